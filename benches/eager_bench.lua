-- qjson.decode(s, { lazy = false }) against cjson.decode on the payloads
-- of issue 13: the tool call, streamed chunks, the 2 KB chat request,
-- github-100k and the corpus. Side by side in one process, the two
-- libraries alternating round by round (so a neighbour's load hits both),
-- each round timed in thread CPU time; best and median of the rounds.
--
--   QJSON_BASELINES=$PWD/target/baselines luajit benches/eager_bench.lua [ROUNDS]
--
-- QJSON_BASELINES puts OpenResty's lua-cjson fork (tools/baselines.sh)
-- before any installed cjson, as benches/lua_bench.lua does. Each result
-- is checked against cjson's before anything is timed.

package.path = "lua/?.lua;benches/?.lua;" .. package.path
local BASELINES = os.getenv("QJSON_BASELINES")
if BASELINES and BASELINES ~= "" then
    package.cpath = BASELINES .. "/?.so;" .. package.cpath
end

local ffi = require("ffi")
local cjson = require("cjson")
local qjson = require("qjson")
local payloads = require("payloads")

ffi.cdef [[
    struct qjson_eager_bench_timespec { long tv_sec; long tv_nsec; };
    int clock_gettime(int clock, struct qjson_eager_bench_timespec *ts);
]]
local ts = ffi.new("struct qjson_eager_bench_timespec")
local function cpu_now()
    ffi.C.clock_gettime(3, ts) -- CLOCK_THREAD_CPUTIME_ID
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function read(path)
    local f = assert(io.open(path, "rb"), "missing " .. path)
    local s = f:read("*a")
    f:close()
    return s
end

local corpus = (os.getenv("QJSON_DATA") or "../shared/data") .. "/corpus/"
local PAYLOADS = {
    { "tool call", { payloads.TOOL_CALL } },
    { "SSE chunks", payloads.sse_events(200) },
    { "chat 2 KB", { payloads.chat(2048) } },
    { "github-100k", { payloads.github(100e3) } },
    { "twitter", { read(corpus .. "twitter.json") } },
    { "citm_catalog", { read(corpus .. "citm_catalog.json") } },
    { "canada", { read(corpus .. "canada.json") } },
}

local EAGER = { lazy = false }
local LIBS = {
    cjson.decode,
    function(s) return qjson.decode(s, EAGER) end,
}

-- Deep equality, metatables aside (qjson marks empty arrays).
local function same(a, b)
    if a == b then
        return true
    end
    if type(a) ~= "table" or type(b) ~= "table" then
        return false
    end
    for k, v in next, a do
        if not same(v, b[k]) then
            return false
        end
    end
    for k in next, b do
        if a[k] == nil then
            return false
        end
    end
    return true
end

-- A timing loop of its own for each library: LuaJIT attaches traces to
-- a function's bytecode, so one loop shared by both would be compiled for
-- whichever ran first and reach the other through side exits. Each
-- returns the seconds per call of `fn` over `calls` calls cycling through
-- `texts`.
local LOOP = [[
    local cpu_now = ...
    return function(fn, texts, calls)
        local n = #texts
        local t0 = cpu_now()
        for k = 1, calls do
            fn(texts[(k - 1) % n + 1])
        end
        return (cpu_now() - t0) / calls
    end
]]
local loops = {}
for i = 1, 2 do
    loops[i] = assert(load(LOOP, "=eager_bench loop " .. i))(cpu_now)
end

local ROUNDS = tonumber(arg[1]) or 7
print(string.format("%-13s %9s %12s %12s %7s %7s", "payload", "bytes", "cjson ns",
                    "qjson ns", "best", "median"))
for _, p in ipairs(PAYLOADS) do
    local name, texts = p[1], p[2]
    local bytes = 0
    for _, s in ipairs(texts) do
        assert(same(LIBS[2](s), LIBS[1](s)), name .. ": qjson's tables differ from cjson's")
        bytes = bytes + #s
    end
    bytes = bytes / #texts
    -- About 50 ms per round and library.
    local calls = math.max(#texts, math.floor(0.05 / loops[1](LIBS[1], texts, #texts * 3)))
    for i, fn in ipairs(LIBS) do
        loops[i](fn, texts, calls) -- warm-up: traces, caches, heap
    end
    local times = { {}, {} }
    for r = 1, ROUNDS do
        for i, fn in ipairs(LIBS) do
            collectgarbage()
            times[i][r] = loops[i](fn, texts, calls)
        end
    end
    table.sort(times[1])
    table.sort(times[2])
    local mid = math.floor((ROUNDS + 1) / 2)
    print(string.format("%-13s %9.0f %12.0f %12.0f %6.2fx %6.2fx", name, bytes,
        times[1][1] * 1e9, times[2][1] * 1e9, times[1][1] / times[2][1],
        times[1][mid] / times[2][mid]))
end
