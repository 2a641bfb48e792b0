-- An LLM-gateway request filter for nginx's access phase: reads the chat
-- request body, enforces a model allow-list and a max_tokens cap, routes
-- models to other names, and forwards the body (changed or not) with
-- proxy_pass. See examples/gateway/gateway.conf for the nginx side.
--
--   init_by_lua_block {
--       require("gateway").configure({
--           models = { "gpt-4o", "gpt-4o-mini" },          -- allow-list
--           routes = { ["gpt-4o"] = "gpt-4o-2024-08-06" },  -- rewrite model
--           max_tokens = 4096,                              -- cap
--       })
--   }
--   access_by_lua_block { require("gateway").access() }
--
-- Policy, in order:
--   * no body, or a body that is not valid JSON: 400, the body says why
--     (qjson's message: "qjson: ... at byte N"); nothing is forwarded.
--   * a key repeated in any object: 400. Parsers disagree on which copy
--     wins (qjson and cjson take the last, others the first), so a gateway
--     that checked one copy could forward a request the upstream reads
--     differently. Keys are compared after unescaping, so "mod\u0065l"
--     is "model" for the allow-list and for the duplicate check.
--   * root not an object, or "model" not a string: 400.
--   * model not on the allow-list: 403.
--   * max_tokens not a positive integer: 400; above the cap: clamped to the
--     cap (the request still succeeds, as with the upstream's own limit);
--     absent: left absent.
--   * model in the routing table: replaced by its route.
-- Only a changed request is re-encoded. qjson re-encodes it as the original
-- bytes with just the changed values spliced in, in pieces of at most
-- 64 KB (qjson.encode_pieces), which ngx.req.init_body, append_body and
-- finish_body make the new body (and its Content-Length) without a Lua
-- string of the whole of it: LuaJIT maps fresh memory for every string of
-- 128 KB or more, and a 1 MB one costs more in page faults than the JSON
-- work. cjson's gateway sets its one string with ngx.req.set_body_data.
--
-- qjson reads the body where nginx keeps it (qjson.decode_body): no Lua
-- string of it is made, which for a 1 MB body costs more than all the
-- JSON work (page faults, as above).
--
-- access("cjson") runs the same policy with lua-cjson, for comparison
-- (tools/gateway_bench.sh); cjson cannot detect repeated keys.
-- access("qjson_str") runs it with qjson on the body's Lua string
-- (ngx.req.get_body_data), as cjson gets it.
-- access("body") only reads the body into a Lua string, with no JSON at
-- all: the ceiling for any Lua JSON library that takes a string.
-- access("body_ptr") only copies the body from where nginx keeps it, as
-- qjson.decode_body does, into a buffer it reuses: the ceiling for a
-- library that reads it that way.
--
-- stream_filter(codec) is a body filter for streamed (SSE) responses: it
-- reads each event's `choices[0].delta.content` and `usage.total_tokens`
-- as a gateway does to meter a stream, passes the body on unchanged, and
-- at the end appends an SSE comment with what it read
-- (": gateway events=N content_bytes=B total_tokens=T"), which clients
-- ignore and tests check. With "cjson" each event is split out and
-- decoded with cjson.decode instead of qjson.sse.

local qjson_safe = require("qjson.safe")
local request_body = require("qjson.body")
local ffi = require("ffi")
local sse = require("qjson.sse")
local cjson_safe = require("cjson.safe")

local ngx = ngx
local io_open = io.open
local format = string.format
local tonumber = tonumber
local type = type
local pairs = pairs
local ipairs = ipairs

local _M = {}

-- Makes the request body the strings of `pieces` in order, `len` bytes in
-- all (what qjson.encode_pieces returns), with no Lua string of the whole.
function _M.set_body_pieces(pieces, len)
    ngx.req.init_body(len)
    for i = 1, #pieces do
        ngx.req.append_body(pieces[i])
    end
    ngx.req.finish_body()
end

local QJSON_OPTIONS = { duplicate_keys = "error" }

-- Makes the request body the text of v; or nil and the error.
local function qjson_set_body(v)
    local pieces, len = qjson_safe.encode_pieces(v)
    if not pieces then
        return nil, len
    end
    _M.set_body_pieces(pieces, len)
    return true
end

local CODECS = {
    qjson = {
        -- The request body, decoded where nginx keeps it: the value; or
        -- nil and the error; or nil alone when there is no body.
        decode_body = function()
            return qjson_safe.decode_body(QJSON_OPTIONS)
        end,
        encode = qjson_safe.encode,
        set_body = qjson_set_body,
    },
    qjson_str = {
        decode = function(text)
            return qjson_safe.decode(text, QJSON_OPTIONS)
        end,
        encode = qjson_safe.encode,
        set_body = qjson_set_body,
    },
    cjson = {
        decode = cjson_safe.decode,
        encode = cjson_safe.encode,
        set_body = function(v)
            local out, err = cjson_safe.encode(v)
            if out then
                ngx.req.set_body_data(out)
            end
            return out ~= nil, err
        end,
    },
}

local conf = { models = {}, routes = {}, max_tokens = math.huge }

-- Sets the policy (see the header). Call from init_by_lua.
function _M.configure(opts)
    local models = {}
    for _, name in ipairs(opts.models or {}) do
        models[name] = true
    end
    local routes = {}
    for from, to in pairs(opts.routes or {}) do
        routes[from] = to
    end
    conf = { models = models, routes = routes, max_tokens = opts.max_tokens or math.huge }
end

-- The request body as a string, wherever nginx keeps it: in memory, or in
-- a temp file when it is larger than client_body_buffer_size. nil when the
-- request has no body.
function _M.read_body()
    ngx.req.read_body()
    local data = ngx.req.get_body_data()
    if data then
        return data
    end
    local path = ngx.req.get_body_file()
    if not path then
        return nil
    end
    local f, err = io_open(path, "rb")
    if not f then
        return nil, err
    end
    data = f:read("*a")
    f:close()
    return data
end

local function reject(json, status, message)
    ngx.status = status
    ngx.header.content_type = "application/json"
    ngx.say(json.encode({ error = { message = message } }))
    return ngx.exit(status)
end

local function positive_integer(v)
    return type(v) == "number" and v >= 1 and v % 1 == 0 and v < math.huge
end

-- body_ptr's buffer, grown to the largest body so far.
local copied, copied_size = nil, 0

-- Copies a body (a pointer and its length, or a string read from a file)
-- into `copied`; returns true.
local function copy_body(text, len)
    len = len or #text
    if len > copied_size then
        copied, copied_size = ffi.new("char[?]", len), len
    end
    ffi.copy(copied, text, len)
    return true
end

-- The access-phase handler: rejects the request (ends it with 400/403)
-- or lets it through with the body the upstream must see.
function _M.access(codec)
    -- ("body" rejects as qjson_str does.)
    local json = CODECS[codec == "body" and "qjson_str" or codec] or CODECS.qjson
    if codec == "body_ptr" then
        ngx.req.read_body()
        if not request_body.apply(copy_body) then
            return reject(json, 400, "request body is empty")
        end
        return
    end
    local req, err
    if json.decode_body then
        ngx.req.read_body()
        req, err = json.decode_body()
        if req == nil and err == nil then
            return reject(json, 400, "request body is empty")
        end
    else
        local body
        body, err = _M.read_body()
        if not body or body == "" then
            return reject(json, 400, err or "request body is empty")
        end
        if codec == "body" then
            return
        end
        req, err = json.decode(body)
    end
    if req == nil then
        return reject(json, 400, err)
    end
    if type(req) ~= "table" then
        return reject(json, 400, "request body must be a JSON object")
    end
    local model = req.model
    if type(model) ~= "string" then
        return reject(json, 400, "model must be a string")
    end
    if not conf.models[model] then
        return reject(json, 403, "model not allowed: " .. model)
    end

    local changed = false
    local max_tokens = req.max_tokens
    if max_tokens ~= nil then
        if not positive_integer(max_tokens) then
            return reject(json, 400, "max_tokens must be a positive integer")
        end
        if max_tokens > conf.max_tokens then
            req.max_tokens = conf.max_tokens
            changed = true
        end
    end
    local route = conf.routes[model]
    if route then
        req.model = route
        changed = true
    end
    if changed then
        local ok
        ok, err = json.set_body(req)
        if not ok then
            return reject(json, 500, err)
        end
    end
end

-- What a stream filter has read so far, per response.
local function stream_state()
    local st = ngx.ctx.gateway_stream
    if not st then
        st = { events = 0, content = 0, total = 0, pending = "" }
        ngx.ctx.gateway_stream = st
    end
    return st
end

-- Counts one event's delta text and usage.
local function meter(st, content, total)
    st.events = st.events + 1
    if type(content) == "string" then
        st.content = st.content + #content
    end
    if total then
        st.total = tonumber(total)
    end
end

local function filter_qjson(st, chunk, eof)
    local stream = st.sse
    if not stream then
        stream = sse.new()
        st.sse = stream
    end
    local events = eof and stream:finish(chunk) or stream:feed(chunk)
    for i = 1, #events do
        local doc = events[i]:parse()
        if doc then
            meter(st, doc:get("choices[0].delta.content"), doc:get_i64("usage.total_tokens"))
        end
    end
end

-- cjson has no stream reader: events end at a blank line and (as the
-- stand-in upstream sends them) are one "data: " line, decoded whole.
local function filter_cjson(st, chunk)
    local text = st.pending .. chunk
    local from = 1
    while true do
        local at, stop = text:find("\n\n", from, true)
        if not at then break end
        local data = text:sub(from, from + 5) == "data: " and text:sub(from + 6, at - 1)
        if data and data ~= "[DONE]" then
            local ev = cjson_safe.decode(data)
            if type(ev) == "table" then
                local choice = type(ev.choices) == "table" and ev.choices[1]
                local delta = type(choice) == "table" and choice.delta
                local usage = type(ev.usage) == "table" and ev.usage
                meter(st, type(delta) == "table" and delta.content or nil,
                      usage and usage.total_tokens or nil)
            end
        end
        from = stop + 1
    end
    st.pending = text:sub(from)
end

-- The body filter for streamed responses (see the header).
function _M.stream_filter(codec)
    local st = stream_state()
    local chunk, eof = ngx.arg[1], ngx.arg[2]
    if codec == "cjson" then
        filter_cjson(st, chunk)
    else
        filter_qjson(st, chunk, eof)
    end
    if eof then
        ngx.arg[1] = chunk .. format(": gateway events=%d content_bytes=%d total_tokens=%d\n\n",
                                     st.events, st.content, st.total)
    end
end

return _M
