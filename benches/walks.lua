-- Decode, then visit every value through `qjson.pairs` (proxies), beside
-- cjson's decode and a `pairs` walk of its tables, in one process: the
-- median over ROUNDS of the two libraries' ratio within a round, for a
-- few shapes (docs/benchmarks.md, "Walks through proxies"):
--
--   LUA_CPATH="target/baselines/?.so;;" luajit benches/walks.lua [ROUNDS]
--
-- The OpenResty cjson fork when LUA_CPATH finds it (tools/baselines.sh
-- builds it), else the installed cjson.

package.path = "lua/?.lua;" .. package.path

local ffi = require("ffi")
local qjson = require("qjson")
local cjson = require("cjson")

local ROUNDS = tonumber(arg[1]) or 7
-- Each library's share of a round, in seconds.
local ROUND_SECONDS = 0.1

ffi.cdef [[
    struct qjson_walks_timespec { long tv_sec; long tv_nsec; };
    int clock_gettime(int clock, struct qjson_walks_timespec *ts);
]]
local ts = ffi.new("struct qjson_walks_timespec")

local function now()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local concat, rep, format = table.concat, string.rep, string.format

-- `n` texts from `item(i)`, joined by commas inside `open` and `close`.
local function list(open, n, item, close)
    local parts = {}
    for i = 1, n do parts[i] = item(i) end
    return open .. concat(parts, ",") .. close
end

local SHAPES = {
    { "chat completion, 70 choices", '{"id":"chatcmpl-1","object":"chat.completion",'
        .. '"created":1677652288,"model":"gpt-4o","choices":' .. list("[", 70, function(i)
            return '{"index":' .. (i - 1) .. ',"message":{"role":"assistant","content":'
                .. '"the quick brown fox jumps over the lazy dog ' .. i .. '"},'
                .. '"finish_reason":"stop","logprobs":null}'
        end, "]") .. ',"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}' },
    { "object of 60 000 keys", list("{", 60000, function(i)
        return '"k' .. i .. '":"v' .. i .. '"'
    end, "}") },
    { "300 objects nested 20 deep", list("[", 300, function()
        return rep('{"a":1,"b":', 19) .. '{"a":1}' .. rep("}", 19)
    end, "]") },
    { "2 500 empty objects and arrays", list("[", 2500, function(i)
        return i % 2 == 0 and "{}" or "[]"
    end, "]") },
}

local qpairs = qjson.pairs

local function walk_proxies(v)
    local n = 1
    if type(v) == "table" then
        for _, x in qpairs(v) do n = n + walk_proxies(x) end
    end
    return n
end

local function walk_tables(v)
    local n = 1
    if type(v) == "table" then
        for _, x in pairs(v) do n = n + walk_tables(x) end
    end
    return n
end

-- Calls of `f` a second, over ROUND_SECONDS.
local function rate(f, text)
    collectgarbage()
    local calls, start = 0, now()
    repeat
        f(text)
        calls = calls + 1
    until now() - start >= ROUND_SECONDS
    return calls / (now() - start)
end

local function qjson_walk(text) return walk_proxies(qjson.decode(text)) end
local function cjson_walk(text) return walk_tables(cjson.decode(text)) end

print(format("| shape | size | cjson walks/s | qjson walks/s | qjson / cjson |"))
print("|---|---:|---:|---:|---:|")
for _, shape in ipairs(SHAPES) do
    local label, text = shape[1], shape[2]
    assert(qjson_walk(text) == cjson_walk(text), label)
    local ratios, qs, cs = {}, {}, {}
    for round = 1, ROUNDS do
        local q, c
        -- The order alternates, so neither always runs after the other.
        if round % 2 == 1 then
            q = rate(qjson_walk, text)
            c = rate(cjson_walk, text)
        else
            c = rate(cjson_walk, text)
            q = rate(qjson_walk, text)
        end
        ratios[round], qs[round], cs[round] = q / c, q, c
    end
    table.sort(ratios)
    table.sort(qs)
    table.sort(cs)
    local mid = math.floor((ROUNDS + 1) / 2)
    print(format("| %s | %.1f KB | %.0f | %.0f | %.2fx |", label, #text / 1000, cs[mid], qs[mid],
                 ratios[mid]))
end
