-- A stand-in LLM upstream for testing the gateway: it answers every request
-- with what it received, as JSON:
--   {"requests":N,"bytes":B,"content_length":"B","sha256":"<hex>"}
-- `requests` counts every request this server has taken (shared dict
-- "upstream", so all workers count), and GET /requests returns the count
-- without counting, so a test can prove a rejected request never arrived.
-- With hashing off (the load test) the sha256 field is absent and
-- answering costs little more than receiving the body.

local ffi = require("ffi")
local cjson = require("cjson")
local gateway = require("gateway")

local ngx = ngx
local format = string.format
local tonumber = tonumber
local byte = string.byte
local gsub = string.gsub

-- nginx is linked with OpenSSL (it serves TLS), so libcrypto's symbols are
-- already in the process.
ffi.cdef [[
unsigned char *SHA256(const unsigned char *data, size_t len, unsigned char *md);
]]
local digest = ffi.new("unsigned char[32]")

local _M = {}

-- The SHA-256 of `s`, as 64 lowercase hex digits.
function _M.sha256_hex(s)
    ffi.C.SHA256(s, #s, digest)
    return (gsub(ffi.string(digest, 32), ".", function(c)
        return format("%02x", byte(c))
    end))
end

-- The content handler. `hash`: whether to hash the body.
function _M.echo(hash)
    local counter = ngx.shared.upstream
    local requests = counter:incr("requests", 1, 0)
    local body = gateway.read_body() or ""
    ngx.header.content_type = "application/json"
    ngx.say(cjson.encode({
        requests = requests,
        bytes = #body,
        content_length = ngx.var.http_content_length,
        sha256 = hash and _M.sha256_hex(body) or nil,
    }))
end

-- A streamed chat completion: `n` chat.completion.chunk events of about
-- 250 bytes (a role delta, n - 3 words, a finish reason, then usage) and
-- [DONE], made once per count.
local streams = {}
local function stream_text(n)
    local text = streams[n]
    if text then
        return text
    end
    local head = 'data: {"id":"chatcmpl-AbC123","object":"chat.completion.chunk",'
        .. '"created":1763700000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":'
    local events = { head .. '{"role":"assistant","content":""},"finish_reason":null}]}\n\n' }
    for i = 2, n - 2 do
        events[i] = head .. format('{"content":" word%d"},"finish_reason":null}]}\n\n', i)
    end
    events[n - 1] = head .. '{},"finish_reason":"stop"}]}\n\n'
    events[n] = head .. '{},"finish_reason":null}],"usage":{"prompt_tokens":10,'
        .. format('"completion_tokens":%d,"total_tokens":%d}}\n\n', n, n + 10)
    events[n + 1] = "data: [DONE]\n\n"
    text = table.concat(events)
    streams[n] = text
    return text
end

-- GET /v1/stream?events=N: a streamed response of N events (default 200).
function _M.stream()
    local n = math.max(4, tonumber(ngx.var.arg_events) or 200)
    ngx.header.content_type = "text/event-stream"
    ngx.print(stream_text(n))
end

-- GET /requests: the count so far.
function _M.requests()
    ngx.say(ngx.shared.upstream:get("requests") or 0)
end

return _M
