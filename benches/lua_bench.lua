-- The comparison benchmark: lua-cjson, lua-resty-simdjson (when it can be
-- required) and qjson, side by side in one LuaJIT process per scenario.
--
--   luajit benches/lua_bench.lua                 every scenario, one fresh
--                                                process each, then tables
--   luajit benches/lua_bench.lua SCENARIO        one scenario (what the
--                                                parent runs), raw rows
--   QUICK=1 ...                                  a few calls per row: checks
--                                                the harness, not the speed
--
-- Per row: at least 50 warm-up calls (so the JIT compiles the loops), a
-- full GC, then 5 timed rounds; the median ops/s, the min-max range, the
-- Lua heap growth over the rounds, and the process's peak RSS. Every
-- workload's answer is checked against cjson's before it is timed.

package.path = "lua/?.lua;benches/?.lua;" .. package.path

local ffi = require("ffi")
local cjson = require("cjson")
local qjson = require("qjson")
local payloads = require("payloads")

local QUICK = os.getenv("QUICK") == "1"
local ROUNDS = 5
local ROUND_SECONDS = QUICK and 0 or 0.1
local WARMUP = QUICK and 2 or 50

ffi.cdef [[
    struct qjson_bench_timespec { long tv_sec; long tv_nsec; };
    int clock_gettime(int clock, struct qjson_bench_timespec *ts);
]]
local ts = ffi.new("struct qjson_bench_timespec")
local function now()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function peak_rss_kb()
    local f = io.open("/proc/self/status")
    if not f then
        return 0
    end
    local kb = f:read("*a"):match("VmHWM:%s*(%d+)")
    f:close()
    return tonumber(kb) or 0
end

local simdjson
do
    local ok, mod = pcall(require, "resty.simdjson")
    if ok then
        simdjson = mod.new()
    end
end

-- Workloads: each takes the JSON text and returns a value summarising
-- what it read, compared with cjson's before timing.

-- Sum of what a gateway reads from a chat request: the model, the
-- temperature and every message's first text part.
local function chat_digest(model, temperature, texts)
    return #model + temperature + texts
end

-- The reads on plain tables from a decoder returning them.
local function read_tables(decode)
    return function(s)
        local t = decode(s)
        local texts = 0
        local messages = t.messages
        for i = 1, #messages do
            texts = texts + #messages[i].content[1].text
        end
        return chat_digest(t.model, t.temperature, texts)
    end
end

local read = { cjson = read_tables(cjson.decode) }
if simdjson then
    read.simdjson = read_tables(function(s) return simdjson:decode(s) end)
end

read["qjson.parse"] = function(s)
    local doc = qjson.parse(s)
    local texts = 0
    for i = 0, doc:len("messages") - 1 do
        texts = texts + #doc:get_str("messages[" .. i .. "].content[0].text")
    end
    return chat_digest(doc:get_str("model"), doc:get_f64("temperature"), texts)
end

read["qjson.decode"] = function(s)
    local t = qjson.decode(s)
    local texts = 0
    local messages = t.messages
    for i = 1, qjson.len(messages) do
        texts = texts + #messages[i].content[1].text
    end
    return chat_digest(t.model, t.temperature, texts)
end

-- Decode and re-encode unchanged; then with one change of each kind. The
-- check value is the output's length (cjson's output differs in bytes:
-- key order and spacing; compared by length after the same change).
local roundtrip = {
    cjson = function(s) return #cjson.encode(cjson.decode(s)) > 0 end,
    ["qjson.decode"] = function(s) return #qjson.encode(qjson.decode(s)) > 0 end,
}
local modify_model = {
    cjson = function(s)
        local t = cjson.decode(s)
        t.model = "gpt-4o-mini"
        return cjson.decode(cjson.encode(t)).model == "gpt-4o-mini"
    end,
    ["qjson.decode"] = function(s)
        local t = qjson.decode(s)
        t.model = "gpt-4o-mini"
        return #qjson.encode(t) == #s + 5
    end,
}
-- A key no payload has, so the change is an addition everywhere.
local ADDED = ',"x_gateway":"u-1"'
local add_field = {
    cjson = function(s)
        local t = cjson.decode(s)
        t.x_gateway = "u-1"
        return #cjson.encode(t) > 0
    end,
    ["qjson.decode"] = function(s)
        local t = qjson.decode(s)
        t.x_gateway = "u-1"
        return #qjson.encode(t) == #s + #ADDED
    end,
}
local modify_nested = {
    cjson = function(s)
        local t = cjson.decode(s)
        t.messages[1].content[1].text = "redacted"
        return #cjson.encode(t) > 0
    end,
    ["qjson.decode"] = function(s)
        local t = qjson.decode(s)
        t.messages[1].content[1].text = "redacted"
        return #qjson.encode(t) > 0
    end,
}

-- A full validating parse with nothing read (qjson) against a full decode.
local parse = {
    cjson = function(s)
        return type(cjson.decode(s))
    end,
    ["qjson.parse"] = function(s)
        return qjson.parse(s):typeof() == "object" and "table"
    end,
}
if simdjson then
    parse.simdjson = function(s)
        return type(simdjson:decode(s))
    end
end

-- Scenarios: a payload and the workloads to run on it.
local scenarios = {}
for _, rung in ipairs(payloads.ladder) do
    scenarios[#scenarios + 1] = {
        name = "chat " .. rung[1],
        payload = function() return payloads.chat(rung[2]) end,
        workloads = {
            { "read model, temperature, texts", read },
            { "decode + encode unmodified", roundtrip },
            { "modify model + encode", modify_model },
            { "add a field + encode", add_field },
            { "modify a nested field + encode", modify_nested },
        },
    }
end
local corpus_dir = (os.getenv("QJSON_DATA") or "../shared/data") .. "/corpus/"
for _, name in ipairs({ "twitter", "citm_catalog", "canada" }) do
    scenarios[#scenarios + 1] = {
        name = name,
        payload = function()
            local f = assert(io.open(corpus_dir .. name .. ".json", "rb"))
            local s = f:read("*a")
            f:close()
            return s
        end,
        workloads = { { "validate whole text", parse } },
    }
end

local LIBRARIES = { "cjson", "simdjson", "qjson.parse", "qjson.decode" }

-- Runs `fn(s)` and returns ops/s (median, min, max), the heap growth in KB.
local function measure(fn, s)
    for _ = 1, WARMUP do
        fn(s)
    end
    -- Calls per round, so a round lasts about ROUND_SECONDS.
    local calls = 1
    local t0 = now()
    fn(s)
    local once = now() - t0
    if once > 0 then
        calls = math.max(1, math.floor(ROUND_SECONDS / once))
    end
    collectgarbage()
    collectgarbage()
    local heap = collectgarbage("count")
    local rates = {}
    for r = 1, ROUNDS do
        local start = now()
        for _ = 1, calls do
            fn(s)
        end
        rates[r] = calls / (now() - start)
    end
    local grown = collectgarbage("count") - heap
    table.sort(rates)
    return rates[(ROUNDS + 1) / 2], rates[1], rates[ROUNDS], grown
end

local function run_scenario(scenario)
    local s = scenario.payload()
    for _, workload in ipairs(scenario.workloads) do
        local label, fns = workload[1], workload[2]
        local expected = fns.cjson(s)
        for _, lib in ipairs(LIBRARIES) do
            local fn = fns[lib]
            if fn then
                local got = fn(s)
                if got ~= expected then
                    error(string.format("%s / %s / %s: got %s, cjson says %s",
                        scenario.name, label, lib, tostring(got), tostring(expected)))
                end
                local median, lo, hi, heap = measure(fn, s)
                print(table.concat({ "ROW", scenario.name, #s, label, lib,
                    median, lo, hi, heap, peak_rss_kb() }, "\t"))
            end
        end
    end
end

local function human_rate(ops, bytes)
    local mbs = ops * bytes / 1e6
    if mbs >= 1000 then
        return string.format("%.2f GB/s", mbs / 1000)
    end
    return string.format("%.0f MB/s", mbs)
end

-- Runs every scenario in its own process and prints one table per workload.
local function run_all()
    local interpreter = arg[-1] or "luajit"
    if not simdjson then
        print("lua-resty-simdjson: not found on package.path/cpath, its column is skipped")
    end
    local rows = {}
    for _, scenario in ipairs(scenarios) do
        local p = assert(io.popen(string.format("%s %s %q", interpreter, arg[0], scenario.name)))
        for line in p:lines() do
            local f = {}
            for field in line:gmatch("[^\t]+") do
                f[#f + 1] = field
            end
            if f[1] == "ROW" then
                rows[#rows + 1] = {
                    scenario = f[2], bytes = tonumber(f[3]), workload = f[4], lib = f[5],
                    median = tonumber(f[6]), lo = tonumber(f[7]), hi = tonumber(f[8]),
                    heap = tonumber(f[9]), rss = tonumber(f[10]),
                }
            else
                print(line)
            end
        end
        assert(p:close(), "scenario failed: " .. scenario.name)
    end

    local by_key = {}
    for _, r in ipairs(rows) do
        by_key[r.scenario .. "\0" .. r.workload .. "\0" .. r.lib] = r
    end
    local workloads_seen, order = {}, {}
    for _, r in ipairs(rows) do
        if not workloads_seen[r.workload] then
            workloads_seen[r.workload] = true
            order[#order + 1] = r.workload
        end
    end
    for _, workload in ipairs(order) do
        print()
        print("## " .. workload)
        print(string.format("%-14s %-12s %12s %19s %11s %9s %10s %8s",
            "payload", "library", "ops/s", "min-max", "throughput",
            "heap KB", "peak RSS", "vs cjson"))
        for _, r in ipairs(rows) do
            if r.workload == workload then
                local base = by_key[r.scenario .. "\0" .. workload .. "\0cjson"]
                print(string.format("%-14s %-12s %12.1f %19s %11s %9.0f %7.0f MB %7.1fx",
                    r.scenario, r.lib, r.median,
                    string.format("%.1f-%.1f", r.lo, r.hi), human_rate(r.median, r.bytes),
                    r.heap, r.rss / 1024, r.median / base.median))
            end
        end
    end
end

local wanted = arg[1]
if wanted then
    for _, scenario in ipairs(scenarios) do
        if scenario.name == wanted then
            run_scenario(scenario)
            return
        end
    end
    error("unknown scenario: " .. wanted)
end
run_all()
