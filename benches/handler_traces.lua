-- What LuaJIT's trace compiler makes of qjson's decode, change, encode
-- in the two shapes a gateway calls it in:
--
--   handler  each call in a coroutine of its own, as nginx resumes a
--            handler: decode an SSE event or the tool call, set `model`
--            to a value whose type varies from call to call, add a key,
--            encode. Nothing around qjson is compiled, so its functions
--            get traces of their own, and the exits the varying types
--            take get side traces, which must return out of qjson.
--   loop     a loop of the caller's (a body filter over events): decode
--            the tool call, add a microsecond timestamp (16 digits,
--            written by snprintf), encode. The loop must compile, with
--            qjson inside its trace.
--
--   luajit benches/handler_traces.lua [CALLS [handler|loop]]
--                                        default: 30 000 handler
--
-- Prints the traces compiled and given up (by where they started and
-- why), the loop traces started in qjson, and the calls per second.
-- Counts move a little from run to run (where the collector's cycles
-- fall shapes what LuaJIT compiles); instructions per call, counted by
-- callgrind at two CALLS, do not. The Lua code is the current directory's
-- lua/: to compare with another checkout, run this file from that
-- checkout's directory (QJSON_LIB naming a library if it has none built).

package.path = "lua/?.lua;benches/?.lua;" .. package.path
local qjson = require("qjson")
local payloads = require("payloads")
local util = require("jit.util")
local vmdef = require("jit.vmdef")

local find = string.find
local CALLS = tonumber(arg[1]) or 30000
local SHAPE = arg[2] or "handler"
assert(SHAPE == "handler" or SHAPE == "loop", "shape: handler or loop")

local texts = payloads.sse_events(20)
texts[#texts + 1] = payloads.TOOL_CALL
local VALUES = { 1, "s", true, 2.5, false, "t" }

local function handler(k)
    local t = qjson.decode(texts[k % #texts + 1])
    t.model = VALUES[k % #VALUES + 1]
    t.x_k = k
    return #qjson.encode(t)
end

-- "file:line" of a bytecode position.
local function location(func, pc)
    local info = util.funcinfo(func, pc)
    return info.loc or (info.ffid and vmdef.ffnames[info.ffid]) or "?"
end

local compiled, aborted, starts, qjson_loops = 0, {}, {}, 0
jit.attach(function(what, tr, func, pc, otr, oex)
    if what == "start" then
        starts[tr] = location(func, pc)
    elseif what == "stop" then
        compiled = compiled + 1
        local at = starts[tr] or ""
        if util.traceinfo(tr).linktype == "loop" and not find(at, "^handler_traces")
           and not find(at, "^payloads") then
            qjson_loops = qjson_loops + 1
        end
    elseif what == "abort" then
        local why = type(otr) == "number" and vmdef.traceerr[otr] or tostring(otr)
        if type(oex) == "function" then oex = location(oex) end
        local key = string.format("%s -- %s at %s", tostring(starts[tr]),
                                  why:format(oex), location(func, pc))
        aborted[key] = (aborted[key] or 0) + 1
    end
end, "trace")

local TOOL_CALL = payloads.TOOL_CALL
local length = 0
local create, resume = coroutine.create, coroutine.resume
local start = os.clock()
if SHAPE == "handler" then
    for k = 1, CALLS do
        local ok, err = resume(create(handler), k)
        assert(ok, err)
    end
else
    for k = 1, CALLS do
        local t = qjson.decode(TOOL_CALL)
        t.created_us = 1.7e15 + k * 1000
        length = length + #qjson.encode(t)
    end
end
local seconds = os.clock() - start
jit.attach(function() end)

local lines, total = {}, 0
for key, n in pairs(aborted) do
    lines[#lines + 1] = string.format("%4d  %s", n, key)
    total = total + n
end
table.sort(lines, function(a, b) return a > b end)
print(string.format("%d traces compiled (%d loops in qjson), %d given up; %.0f calls/s",
                    compiled, qjson_loops, total, CALLS / seconds))
for _, line in ipairs(lines) do print(line) end
