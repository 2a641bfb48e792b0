-- Where a routed request's time goes inside nginx, step by step: what
-- examples/gateway/gateway.lua does to a 1 MB chat request whose model it
-- rewrites, and the one-string way beside it (qjson.encode, then
-- ngx.req.set_body_data). Each iteration makes a new body, as a gateway's
-- requests differ (an equal one would be found interned).
--
--   tools/nginx-lua benches/gateway_steps.lua [N [BYTES]]   default: 300 1048576
--
-- Prints microseconds per request for each step, CPU time (os.clock).
-- The loop runs in one request, whose memory pool nginx frees only at
-- its end, so each new request body here is fresh memory, as it is for
-- every request of a worker serving them.

package.path = "spec/?.lua;examples/gateway/?.lua;" .. package.path
local qjson = require("qjson.safe")
local helper = require("helper")
local gateway = require("gateway")
local buffer = require("string.buffer")

local N = tonumber(arg[1]) or 300
local BYTES = tonumber(arg[2]) or 1048576
local ROUTE = "gpt-4o-mini-2024-07-18"

local text = helper.chat_request(BYTES)
local head, tail = text:sub(1, 200), text:sub(207)
local buf = buffer.new()
local clock = os.clock

-- The steps, timed in this order each iteration: a request body as
-- ngx.req.get_body_data makes it; its decode and the reads; the change;
-- then the new body the gateway's way and the one-string way.
local names = { "the body as a Lua string", "qjson.decode + reads", "the change",
                "qjson.encode_pieces", "set_body_pieces (init, append, finish_body)",
                "qjson.encode (one string)", "ngx.req.set_body_data" }
local total = {}
for i = 1, #names do total[i] = 0 end

for k = 1, N do
    local t0 = clock()
    local body = buf:reset():put(head, ("%06d"):format(k % 1000000), tail):tostring()
    local t1 = clock()
    local req = assert(qjson.decode(body, { duplicate_keys = "error" }))
    assert(req.model == "gpt-4o" and req.max_tokens == 512)
    local t2 = clock()
    req.model = ROUTE
    local t3 = clock()
    local pieces, len = assert(qjson.encode_pieces(req))
    local t4 = clock()
    gateway.set_body_pieces(pieces, len)
    local t5 = clock()
    local out = assert(qjson.encode(req))
    local t6 = clock()
    ngx.req.set_body_data(out)
    local t7 = clock()
    local t = { t0, t1, t2, t3, t4, t5, t6, t7 }
    for i = 1, #names do
        total[i] = total[i] + (t[i + 1] - t[i])
    end
end

print(("%d-byte requests, %d of them; microseconds per request:"):format(#text, N))
for i = 1, #names do
    print(("  %-44s %8.1f"):format(names[i], total[i] / N * 1e6))
end
