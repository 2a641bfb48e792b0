-- qjson.sse in a real body filter, as README shows it:
--
--   tools/nginx-lua spec/nginx/sse_body_filter.lua
--
-- The content phase of one real request streams a chat completion (CRLF
-- lines) in 7-byte prints, each flushed, so the body filter sees it split
-- inside lines, CRLF pairs and UTF-8 sequences; one event carries invalid
-- JSON. The filter reads every event; the run checks what it saw. Then a
-- second filter rewrites the stream as README shows it: each event's
-- delta.content redacted, the event re-encoded with qjson.encode_pieces
-- and handed to nginx as ngx.arg[1], a table of strings. Raises (exit
-- status 1) on any difference.

local runner = require("nginx_runner")
local here = arg[0]:match("^(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local client = require("nginx_client")
local sse = require("qjson.sse")

local PIECES = { "Hel", "lo ", "Привет ", "😀", " 日本", "語" }
local lines = {}
for _, piece in ipairs(PIECES) do
    lines[#lines + 1] = 'data: {"id":"chatcmpl-AbC123xYz","object":"chat.completion.chunk",'
                        .. '"created":1763700000,"model":"gpt-4o-2024-08-06",'
                        .. '"system_fingerprint":"fp_3a9f2b1c0d","choices":[{"index":0,'
                        .. '"delta":{"content":"' .. piece .. '"}}]}\r\n\r\n'
end
-- Events a rewrite passes on as they came: a type of its own
-- (Anthropic's stream types every event), an id, which stays the last one
-- seen for the events after it, and data of two lines.
lines[#lines + 1] = 'event: ping\r\ndata: {"type":"ping"}\r\n\r\n'
lines[#lines + 1] = 'id: 42\r\ndata: {"note":"a"}\r\n\r\n'
lines[#lines + 1] = 'data: {"multi":\r\ndata: "line"}\r\n\r\n'
lines[#lines + 1] = 'data: {"choices":[{"delta":{"content":"lost"\r\n\r\n'
lines[#lines + 1] = ': keep-alive\r\n\r\n'
lines[#lines + 1] = 'data: {"choices":[],"usage":{"prompt_tokens":9,"total_tokens":15}}\r\n\r\n'
lines[#lines + 1] = "data: [DONE]\r\n\r\n"
local STREAM = table.concat(lines)

local seen

runner.on("content", function()
    ngx.header["Content-Type"] = "text/event-stream"
    -- The client speaks HTTP/1.0: without a length, the Lua module would
    -- buffer the whole response and the filter would see one chunk.
    ngx.header["Content-Length"] = #STREAM
    for i = 1, #STREAM, 7 do
        ngx.print(STREAM:sub(i, i + 6))
        ngx.flush(true)
    end
end)

runner.on("body_filter", function()
    local ctx = ngx.ctx
    local stream = ctx.sse or sse.new()
    ctx.sse = stream
    ctx.calls = (ctx.calls or 0) + 1
    ctx.text = ctx.text or {}
    ctx.errors = ctx.errors or {}
    local events = ngx.arg[2] and stream:finish(ngx.arg[1]) or stream:feed(ngx.arg[1])
    for _, ev in ipairs(events) do
        local doc, err = ev:parse()
        if doc then
            ctx.text[#ctx.text + 1] = doc:get_str("choices[0].delta.content")
            ctx.total = doc:get_i64("usage.total_tokens") or ctx.total
        elseif ev.done then
            ctx.done = true
        else
            ctx.errors[#ctx.errors + 1] = err
        end
    end
    if ngx.arg[2] then
        seen = ctx
    end
end)

local status, body = client.request("GET", "/phase/sse")
assert(status == 200, "status " .. tostring(status))
assert(body == STREAM, "the filter changed the body")
assert(seen, "the body filter never saw the end of the stream")
assert(seen.calls > #lines, "the body came in " .. seen.calls .. " chunks, expected many")
assert(table.concat(seen.text) == table.concat(PIECES), table.concat(seen.text))
assert(tonumber(seen.total) == 15, "usage: " .. tostring(seen.total))
assert(seen.done, "[DONE] not seen")
assert(#seen.errors == 1 and seen.errors[1]:match("^qjson: .* at byte %d+"),
       "errors: " .. table.concat(seen.errors, "; "))
print("qjson.sse read " .. #PIECES .. " deltas, usage and [DONE] from " .. seen.calls
      .. " body_filter calls")

-- The rewrite: the stream's length changes, so it goes without one.
runner.on("header_filter", function()
    ngx.header["Content-Length"] = nil
end)
local qjson = require("qjson")
-- (The text before each value is a piece of its own: see encode_pieces.)
local most_pieces = 0
runner.on("body_filter", function()
    local ctx = ngx.ctx
    local stream = ctx.sse or sse.new()
    ctx.sse = stream
    local events = ngx.arg[2] and stream:finish(ngx.arg[1]) or stream:feed(ngx.arg[1])
    -- README's filter.
    local function head(ev)
        local lines_before = ev.event ~= "message" and "event: " .. ev.event .. "\n" or ""
        if ev.id ~= ctx.sse_id then
            ctx.sse_id = ev.id
            lines_before = lines_before .. "id: " .. ev.id .. "\n"
        end
        return lines_before
    end
    local out = {}
    for _, ev in ipairs(events) do
        local t = ev:json()
        local delta = t and t.choices and t.choices[1] and t.choices[1].delta
        if delta and delta.content then
            delta.content = "[redacted]"
            out[#out + 1] = head(ev) .. "data: "
            local pieces = qjson.encode_pieces(t)
            most_pieces = math.max(most_pieces, #pieces)
            for i = 1, #pieces do out[#out + 1] = pieces[i] end
            out[#out + 1] = "\n\n"
        elseif not ev.err then
            out[#out + 1] = head(ev) .. "data: " .. ev.data:gsub("\n", "\ndata: ") .. "\n\n"
        end
    end
    ngx.arg[1] = out
end)
local redacted = {}
for _, line in ipairs(lines) do
    if line:find('"content":"', 1, true) and line:find("}}]}", 1, true) then
        line = line:gsub('"content":"[^"]*"', '"content":"[redacted]"')
    end
    if line:sub(1, 1) ~= ":" then
        redacted[#redacted + 1] = (line:gsub("\r\n", "\n"))
    end
end
local rewritten
status, rewritten = client.request("GET", "/phase/sse")
assert(status == 200, "status " .. tostring(status))
assert(rewritten == table.concat(redacted), "rewritten: " .. rewritten)
assert(most_pieces == 2, "pieces of an event: " .. most_pieces)
print("qjson.encode_pieces rewrote " .. #PIECES .. " events into ngx.arg[1]")
