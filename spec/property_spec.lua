-- Property tests against lua-cjson 2.1.0 (Debian's build): random JSON
-- texts from spec/gen.lua, and random byte mutations of them.
--
-- 1. Every generated text (nested objects and arrays, strings with every
--    escape and UTF-8 of 1 to 4 bytes, numbers of every spelling, repeated
--    keys) reads the same through qjson.decode (lazy, materialized, eager)
--    and the qjson.parse getters as through cjson.decode. cjson is correct
--    on all of these: it reads numbers with C strtod (correctly rounded,
--    +-inf on overflow, so both lose precision beyond 2^53 alike) and
--    keeps the last of repeated keys, as qjson does.
-- 2. Mutated texts get the same accept/reject verdict from both, except
--    where cjson is lenient and qjson strict on purpose (README, "Coming
--    from lua-cjson"): cjson accepts invalid UTF-8, raw control bytes
--    (including NUL, which also ends its input), and number spellings C
--    strtod reads but JSON forbids (01, 1., +1, 0x10, inf, nan). A text
--    with any of those is judged by qjson alone, which must reject it.
--    Whenever qjson accepts a mutated text, cjson must too, with an equal
--    value.
--
-- Everything is seeded; a failure names the seed, the case and the text.

local qjson = require("qjson")
local safe = require("qjson.safe")
local cjson = require("cjson")
local gen = require("gen")

local random = math.random
local show = gen.show

local function assert_deep_equal(expected, actual, context)
    local ok, where = gen.deep_equal(expected, actual)
    assert(ok, context .. ": " .. tostring(where))
end

-- The sign of zero survives every path (1/-0 is -inf).
local function same_number(a, b)
    return a == b and (a ~= 0 or 1 / a == 1 / b)
end

local function pointer_to(base, key)
    if type(key) == "number" then
        return base .. "/" .. (key - 1)
    end
    return base .. "/" .. key:gsub("~", "~0"):gsub("/", "~1")
end

-- Compares the value at `ptr` of doc (getters) and the proxy `p` (lazy
-- reads, nothing materialized) with cjson's `expected`.
local function compare_reads(doc, ptr, p, expected, context)
    local where = context .. " at " .. show(ptr)
    local kind = doc:typeof(ptr)
    if type(expected) ~= "table" then
        local got = doc:get(ptr)
        if type(expected) == "number" then
            assert(same_number(expected, got) and same_number(expected, doc:get_f64(ptr))
                   and same_number(expected, p), where .. ": " .. show(got) .. " ~= "
                                                 .. show(expected))
        else
            assert(got == expected and p == expected, where .. ": " .. show(got) .. " / "
                                                      .. show(p) .. " ~= " .. show(expected))
            if type(expected) == "string" then
                assert(doc:get_str(ptr) == expected, where)
            end
        end
        return
    end
    local count = 0
    for _ in next, expected do count = count + 1 end
    assert(doc:len(ptr) == count and qjson.len(p) == count, where .. ": length")
    if kind == "array" then
        for i = 1, count do
            compare_reads(doc, pointer_to(ptr, i), p[i], expected[i], context)
        end
    else
        assert(kind == "object", where .. ": " .. kind)
        local seen = 0
        for k, v in qjson.pairs(p) do
            seen = seen + 1
            assert(expected[k] ~= nil, where .. ": extra key " .. show(k))
            compare_reads(doc, pointer_to(ptr, k), v, expected[k], context)
        end
        assert(seen == count, where .. ": pairs saw " .. seen .. " keys")
    end
end

-- Checks every read of `text` against cjson.decode's `expected`.
local function assert_reads_like_cjson(text, expected, context)
    assert_deep_equal(expected, qjson.decode(text, { lazy = false }), context .. ", eager")
    assert_deep_equal(expected, qjson.materialize(qjson.decode(text)), context .. ", materialize")
    compare_reads(qjson.parse(text), "", qjson.decode(text), expected, context)
end

-- Whether cjson's reading of s is outside what it parses strictly: invalid
-- UTF-8, a control byte in a string or outside whitespace, or a bare token
-- that is not a JSON literal or number. A small lexer, independent of
-- both parsers.
local function cjson_lenient(s)
    if not gen.valid_utf8(s) then return true end
    local i, n = 1, #s
    while i <= n do
        local c = s:sub(i, i)
        if c == '"' then
            i = i + 1
            while i <= n do
                local d = s:byte(i)
                if d < 32 then return true end
                if d == 92 then
                    i = i + 1
                elseif d == 34 then
                    break
                end
                i = i + 1
            end
            i = i + 1
        elseif c:match("[%w%+%-%.]") then
            local token = s:match("^[%w%+%-%.]+", i)
            if token ~= "true" and token ~= "false" and token ~= "null"
               and not gen.is_number(token) then
                return true
            end
            i = i + #token
        else
            if c:byte() < 32 and not c:match("[\t\n\r]") then return true end
            i = i + 1
        end
    end
    return false
end

-- Bytes mutations insert: structure, string and number syntax, controls,
-- UTF-8 lead and continuation bytes.
local BYTES = { "{", "}", "[", "]", ":", ",", '"', "\\", " ", "\n", "\t", "0", "1", "-",
                "+", ".", "e", "E", "u", "a", "t", "n", "\0", "\1", "\31", "\127", "\128",
                "\191", "\192", "\194", "\224", "\237", "\240", "\244", "\255", "/", "*" }

-- One random edit of s: delete, insert, replace or duplicate a span.
local function mutate(s)
    local n = #s
    local at = random(1, n + 1)
    local r = random()
    if r < 0.3 and n > 0 then
        local len = random(1, 4)
        return s:sub(1, at - 1) .. s:sub(at + len)
    elseif r < 0.6 then
        return s:sub(1, at - 1) .. BYTES[random(#BYTES)] .. s:sub(at)
    elseif r < 0.85 and n > 0 then
        return s:sub(1, at - 1) .. BYTES[random(#BYTES)] .. s:sub(at + 1)
    end
    local from = random(1, math.max(1, n))
    return s:sub(1, at - 1) .. s:sub(from, from + random(0, 8)) .. s:sub(at)
end

describe("random JSON texts read like cjson.decode", function()
    for seed = 1, 40 do
        it(("seed %d"):format(seed), function()
            math.randomseed(seed)
            for case = 1, 25 do
                local text = gen.write_json(gen.random_node(random(1, 5)))
                local context = ("seed %d case %d, text %s"):format(seed, case, show(text))
                local ok, expected = pcall(cjson.decode, text)
                assert(ok, context .. ": cjson rejects it: " .. tostring(expected))
                assert_reads_like_cjson(text, expected, context)
            end
        end)
    end

    it("numbers of every spelling", function()
        math.randomseed(77)
        for case = 1, 2000 do
            local text = gen.random_number_text()
            local expected = cjson.decode(text)
            local d = qjson.parse(text)
            assert(same_number(expected, d:get_f64()) and same_number(expected, qjson.decode(text)),
                   ("case %d: %s reads as %.17g, cjson %.17g"):format(case, text, d:get_f64(),
                                                                       expected))
            local i = d:get_i64()
            if i then
                -- An exact integer: the double cjson read is its rounding.
                assert(tonumber(i) == expected, ("case %d: %s"):format(case, text))
            end
        end
    end)
end)

describe("mutated texts get cjson's verdict where cjson is strict", function()
    local counts = { agree_accept = 0, agree_reject = 0, lenient = 0 }
    for seed = 1, 30 do
        it(("seed %d"):format(seed), function()
            math.randomseed(1000 + seed)
            for case = 1, 100 do
                local text = gen.write_json(gen.random_node(random(1, 4)))
                for _ = 1, random(1, 3) do text = mutate(text) end
                local context = ("seed %d case %d, text %s"):format(seed, case,
                                                                  ("%q"):format(text))
                local doc, err = safe.parse(text)
                local cok, cvalue = pcall(cjson.decode, text)
                if doc then
                    assert(cok, context .. ": qjson accepts, cjson rejects: " .. tostring(cvalue))
                    assert(not cjson_lenient(text), context .. ": qjson accepts a lenient text")
                    assert_reads_like_cjson(text, cvalue, context)
                    counts.agree_accept = counts.agree_accept + 1
                elseif cok then
                    assert(cjson_lenient(text), context .. ": cjson accepts, qjson says " .. err)
                    counts.lenient = counts.lenient + 1
                else
                    counts.agree_reject = counts.agree_reject + 1
                end
            end
        end)
    end

    it("covered accepted, rejected and cjson-lenient texts", function()
        -- The mutations must exercise every branch above, or the
        -- property says little.
        for kind, n in pairs(counts) do
            assert(n >= 20, kind .. ": only " .. n)
        end
    end)

    it("classifies cjson's known leniencies", function()
        for _, s in ipairs({ "[01]", "[1.]", "[+1]", "[0x10]", "[inf]", "[nan]", '["\1"]',
                             '["\xff"]', "[1]\0x", '{"a":\n-01}' }) do
            assert.is_true(pcall(cjson.decode, s), s)
            assert.is_nil((safe.decode(s)))
            assert.is_true(cjson_lenient(s), s)
        end
        assert.is_false(cjson_lenient('{"a": [1, -0.5e+3, true, null, "x\\"\\u00e9"]}'))
    end)
end)
