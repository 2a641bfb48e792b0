-- Where a routed request's time goes inside nginx, step by step: what
-- examples/gateway/gateway.lua does to a 1 MB chat request whose model it
-- rewrites, and the one-string way beside it (qjson.encode, then
-- ngx.req.set_body_data). Each iteration makes a new body, as a gateway's
-- requests differ (an equal one would be found interned).
--
--   tools/nginx-lua benches/gateway_steps.lua [N [BYTES]]   default: 300 1048576
--
-- Prints microseconds per request for each step, CPU time (os.clock),
-- and the worker's minor page faults per request in it: a page of fresh
-- memory faults when it is first written, which is most of what a new
-- 1 MB string or body buffer costs. The loop runs in one request, whose
-- memory pool nginx frees only at its end, so each new request body here
-- is fresh memory, as it is for every request of a worker serving them.

package.path = "spec/?.lua;examples/gateway/?.lua;" .. package.path
local qjson = require("qjson.safe")
local helper = require("helper")
local gateway = require("gateway")
local buffer = require("string.buffer")
local ffi = require("ffi")

local N = tonumber(arg[1]) or 300
local BYTES = tonumber(arg[2]) or 1048576
local ROUTE = "gpt-4o-mini-2024-07-18"

local text = helper.chat_request(BYTES)
local head, tail = text:sub(1, 200), text:sub(207)
local buf = buffer.new()
local clock = os.clock

ffi.cdef[[
struct gateway_steps_rusage {
    long times[4];
    long maxrss, ixrss, idrss, isrss, minflt, majflt, nswap, inblock, oublock,
         msgsnd, msgrcv, nsignals, nvcsw, nivcsw;
};
int getrusage(int who, struct gateway_steps_rusage *usage);
]]
local RUSAGE_SELF = 0
local usage = ffi.new("struct gateway_steps_rusage")

-- Where each step starts and ends: CPU time and minor faults so far.
local at_time, at_faults = {}, {}
local function mark(i)
    at_time[i] = clock()
    ffi.C.getrusage(RUSAGE_SELF, usage)
    at_faults[i] = tonumber(usage.minflt)
end

-- The steps, timed in this order each iteration: a request body as
-- ngx.req.get_body_data makes it; its decode and the reads; the change;
-- then the new body the gateway's way and the one-string way.
local names = { "the body as a Lua string", "qjson.decode + reads", "the change",
                "qjson.encode_pieces", "set_body_pieces (init, append, finish_body)",
                "qjson.encode (one string)", "ngx.req.set_body_data" }
local total, faults = {}, {}
for i = 1, #names do total[i], faults[i] = 0, 0 end

for k = 1, N do
    mark(1)
    local body = buf:reset():put(head, ("%06d"):format(k % 1000000), tail):tostring()
    mark(2)
    local req = assert(qjson.decode(body, { duplicate_keys = "error" }))
    assert(req.model == "gpt-4o" and req.max_tokens == 512)
    mark(3)
    req.model = ROUTE
    mark(4)
    local pieces, len = assert(qjson.encode_pieces(req))
    mark(5)
    gateway.set_body_pieces(pieces, len)
    mark(6)
    local out = assert(qjson.encode(req))
    mark(7)
    ngx.req.set_body_data(out)
    mark(8)
    for i = 1, #names do
        total[i] = total[i] + (at_time[i + 1] - at_time[i])
        faults[i] = faults[i] + (at_faults[i + 1] - at_faults[i])
    end
end

print(("%d-byte requests, %d of them; per request, microseconds and minor page faults:")
      :format(#text, N))
for i = 1, #names do
    print(("  %-44s %8.1f µs %7.1f faults"):format(names[i], total[i] / N * 1e6, faults[i] / N))
end
