-- Payload shapes where qjson once trailed cjson, each timed beside cjson
-- in one process: the median over ROUNDS of the two libraries' ratio
-- within a round (docs/benchmarks.md, "Where qjson trailed cjson").
--
--   LUA_CPATH="target/baselines/?.so;;" luajit benches/trailing.lua [ROUNDS]
--
-- * walks: decode, then visit every value, through `qjson.pairs` on
--   proxies and through `pairs` on cjson's tables;
-- * escapes: encode plain tables of strings dense in bytes that need an
--   escape (JSON inside JSON, control characters);
-- * escaped text: decode a chat request whose message is written in
--   `\uXXXX` escapes, as Python's `json.dumps` sends it, and read it
--   (lazily, then with `lazy = false`).
--
-- The OpenResty cjson fork when LUA_CPATH finds it (tools/baselines.sh
-- builds it), else the installed cjson.

package.path = "lua/?.lua;benches/?.lua;" .. package.path

local qjson = require("qjson")
local cjson = require("cjson")

local ROUNDS = tonumber(arg[1]) or 7
-- Each library's share of a round, in seconds.
local ROUND_SECONDS = 0.1

local now = require("clock")

local concat, rep, format = table.concat, string.rep, string.format

-- `n` texts from `item(i)`, joined by commas inside `open` and `close`.
local function list(open, n, item, close)
    local parts = {}
    for i = 1, n do parts[i] = item(i) end
    return open .. concat(parts, ",") .. close
end

-- Each library's walk of every value under v, counting them, written
-- out: the same walk made once over its iterator (`pairs` or
-- `qjson.pairs`, an upvalue) slowed cjson's, and so the comparison.
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

local WALKS = {
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

-- Arrays of 100 strings (10 KB to 14 KB encoded).
local function strings(s)
    local t = {}
    for i = 1, 100 do t[i] = s end
    return t
end
local CONTROLS = {}
for b = 0, 31 do CONTROLS[#CONTROLS + 1] = string.char(b) end

local ESCAPES = {
    { "strings of 50 `\"`", strings(rep('"', 50)) },
    { "strings of 50 `\\`", strings(rep("\\", 50)) },
    { "strings of the 32 control characters", strings(concat(CONTROLS)) },
    { "tool-call arguments (JSON in a string)",
      strings('{"location":"Paris, France","unit":"celsius","days":[1,2,3],"ok":true}') },
    { "base64 with a `/` every 64 bytes", strings(rep(rep("A", 63) .. "/", 2)) },
    { "a line of HTML (quotes, slashes, a line feed)",
      strings('<a href="https://example.com/x/y">link</a> and "quoted" text\n') },
}

-- The escaped messages (`benches/payloads.lua`, which also writes them
-- as files for `tools/ab_parse.sh`).
local TEXTS = {}
for i, message in ipairs(require("payloads").escaped) do
    TEXTS[i] = { message.label, message.text }
end

-- Calls of `f(x)` a second, over ROUND_SECONDS.
local function rate(f, x)
    collectgarbage()
    local calls, start = 0, now()
    repeat
        f(x)
        calls = calls + 1
    until now() - start >= ROUND_SECONDS
    return calls / (now() - start)
end

-- Prints a table row per case of `cases` ({ label, input }): the rates
-- of `cjson_f` and `qjson_f` on the input and their median ratio.
local function compare(title, unit, cases, qjson_f, cjson_f)
    print(format("\n%s\n\n| shape | size | cjson %s/s | qjson %s/s | qjson / cjson |", title,
                 unit, unit))
    print("|---|---:|---:|---:|---:|")
    for _, case in ipairs(cases) do
        local label, x = case[1], case[2]
        local ratios, qs, cs = {}, {}, {}
        for round = 1, ROUNDS do
            local q, c
            -- The order alternates, so neither always runs after the other.
            if round % 2 == 1 then
                q = rate(qjson_f, x)
                c = rate(cjson_f, x)
            else
                c = rate(cjson_f, x)
                q = rate(qjson_f, x)
            end
            ratios[round], qs[round], cs[round] = q / c, q, c
        end
        table.sort(ratios)
        table.sort(qs)
        table.sort(cs)
        local mid = math.floor((ROUNDS + 1) / 2)
        local size = type(x) == "string" and #x or #cjson.encode(x)
        print(format("| %s | %.1f KB | %.0f | %.0f | %.2fx |", label, size / 1000, cs[mid], qs[mid],
                     ratios[mid]))
    end
end

local function qjson_walk(text) return walk_proxies(qjson.decode(text)) end
local function cjson_walk(text) return walk_tables(cjson.decode(text)) end
for _, case in ipairs(WALKS) do
    assert(qjson_walk(case[2]) == cjson_walk(case[2]), case[1])
end
for _, case in ipairs(ESCAPES) do
    assert(qjson.encode(case[2]) == cjson.encode(case[2]), case[1])
end

local EAGER = { lazy = false }
local function qjson_read(text) return #qjson.decode(text).messages[1].content end
local function qjson_eager_read(text) return #qjson.decode(text, EAGER).messages[1].content end
local function cjson_read(text) return #cjson.decode(text).messages[1].content end
for _, case in ipairs(TEXTS) do
    local want = cjson.decode(case[2]).messages[1].content
    assert(qjson.decode(case[2]).messages[1].content == want, case[1])
    assert(qjson.decode(case[2], EAGER).messages[1].content == want, case[1])
end

compare("Walks: decode, then visit every value", "walks", WALKS, qjson_walk, cjson_walk)
-- `encode`, with the table's first string changed at every call (a count
-- in front of the second's): every output differs, as a gateway's do. The
-- same output over again LuaJIT interns, and its allocation, cjson's and
-- qjson's alike, would go unseen. One count for both libraries, so that
-- neither makes an output the other made.
local calls = 0
local function varying(encode)
    return function(t)
        calls = calls + 1
        t[1] = calls .. t[2]
        return encode(t)
    end
end

compare("Escapes: encode plain tables", "encodes", ESCAPES, varying(qjson.encode),
        varying(cjson.encode))
compare("Escaped text: decode, read the message", "reads", TEXTS, qjson_read, cjson_read)
compare("Escaped text: decode with lazy = false, read the message", "reads", TEXTS,
        qjson_eager_read, cjson_read)
