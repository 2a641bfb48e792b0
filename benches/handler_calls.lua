-- The tool call's workloads run the way nginx runs a handler: each call in
-- a coroutine of its own, started from the loop below, so that no trace
-- spans two calls. qjson beside cjson, in one process.
--
--   luajit benches/handler_calls.lua [CALLS]     (default 100 000 a round)
--
-- benches/lua_bench.lua times a workload in a Lua loop that calls it over
-- and over, which LuaJIT compiles into one trace with the workload
-- inlined. A side trace from inside it must find its way back to that
-- loop, and one that cannot (it unrolls the loop instead, "loop unroll
-- limit reached") is given up after a few tries: that exit then runs
-- interpreted for the rest of the process. Which exits get there changes
-- from process to process, and so did lua_bench's rows that change the
-- tool call (docs/benchmarks.md, "Small documents"). In a handler, each
-- request starts in the interpreter and enters the handler's own trace.
-- Each row is qjson's rate over cjson's, the sums of five rounds each,
-- the libraries in turn; a coroutine's creation is in both, as nginx's is.
-- cjson is OpenResty's fork from QJSON_BASELINES when given, else the
-- first on package.cpath.

package.path = "lua/?.lua;benches/?.lua;" .. package.path
local BASELINES = os.getenv("QJSON_BASELINES")
if BASELINES and BASELINES ~= "" then
    package.cpath = BASELINES .. "/?.so;" .. package.cpath
end

local qjson = require("qjson")
local cjson = require("cjson")
local TOOL = require("payloads").TOOL_CALL

local CALLS = tonumber(arg[1]) or 100000
local ROUNDS = 5

-- A new value for each change, of varying length (as lua_bench's).
local k = 0
local function next_value()
    k = k + 1
    return k * 10 ^ (k % 9)
end

-- The tool call's workloads with the functions of `lib`.
local function workloads(lib)
    local decode, encode = lib.decode, lib.encode
    return {
        { "read fields", function(text)
            local t = decode(text)
            return #t.order_id + t.options.max_items
        end },
        { "decode + encode unmodified", function(text)
            return encode(decode(text))
        end },
        { "modify a top-level field + encode", function(text)
            local t = decode(text)
            t.order_id = "B-" .. next_value()
            return encode(t)
        end },
        { "add a field + encode", function(text)
            local t = decode(text)
            t.x_gateway = next_value()
            return encode(t)
        end },
        { "modify a nested field + encode", function(text)
            local t = decode(text)
            t.options.max_items = next_value()
            return encode(t)
        end },
    }
end

-- Calls per second of `handler`, each call in a coroutine of its own.
local function rate(handler)
    local create, resume = coroutine.create, coroutine.resume
    local start = os.clock()
    for _ = 1, CALLS do
        assert(resume(create(handler), TOOL))
    end
    return CALLS / (os.clock() - start)
end

local ours, theirs = workloads(qjson), workloads(cjson)
for i, workload in ipairs(ours) do
    local q, c = 0, 0
    for _ = 1, ROUNDS do
        c = c + rate(theirs[i][2])
        q = q + rate(workload[2])
    end
    print(string.format("%-36s cjson %8.0f/s  qjson %8.0f/s  %.2fx", workload[1],
                        c / ROUNDS, q / ROUNDS, q / c))
end
