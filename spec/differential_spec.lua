-- Differential specs: qjson against lua-cjson 2.1.0 (Debian's build).
--
-- 1. Decoding: for the corpus and every JSONTestSuite y_ file,
--    materialize(decode(s)) and decode(s, {lazy = false}) deep-equal
--    cjson.decode(s), and encode(decode(s)) gives back the source bytes.
-- 2. Encoding plain tables: random values encode byte for byte as cjson
--    encodes them, and the values cjson refuses fail with its messages.
-- 3. Mutation: random writes to proxies, mirrored on a plain-table model
--    (cjson.decode of the same text); the re-encoded proxy decodes to the
--    model and untouched top-level values are still their source bytes.
--
-- Everything random is seeded; a failure names the seed and the step.

local qjson = require("qjson")
local lazy = require("qjson.lazy")
local qffi = require("qjson.ffi")
local cjson = require("cjson")
local helper = require("helper")

local DATA = helper.data_dir()
local null = qjson.null
local T_ARRAY = qffi.C.QJSON_TYPE_ARRAY
local random = math.random

-- A deleted array element in a model: the proxy keeps it as a hole that
-- encodes as null, and removing the last element also drops the holes
-- before it.
local HOLE = setmetatable({}, { __tostring = function() return "HOLE" end })

-- A short printable form of a value, for failure messages.
local function show(v)
    if type(v) == "string" then
        local s = string.format("%q", v):gsub("\n", "n")
        if #s > 60 then s = s:sub(1, 57) .. "..." end
        return s
    end
    if v == null then return "null" end
    if type(v) == "table" and lazy.is_proxy(v) then return "proxy" end
    return tostring(v)
end

-- Where two strings first differ, with some bytes of each around it.
local function difference(a, b)
    if type(a) ~= "string" or type(b) ~= "string" then return show(a) .. " vs " .. show(b) end
    local i = 1
    while i <= #a and a:byte(i) == b:byte(i) do i = i + 1 end
    return ("at byte %d: %s vs %s"):format(i, show(a:sub(math.max(1, i - 20), i + 30)),
                                           show(b:sub(math.max(1, i - 20), i + 30)))
end

local function normalize(v)
    if v == HOLE or v == cjson.null then return null end
    return v
end

-- Deep equality of decoded values: cjson.null == qjson.null (== HOLE),
-- numbers compared with ==, metatables ignored. Returns true, or false and
-- where the values differ.
local function deep_equal(a, b, path)
    path = path or "$"
    a, b = normalize(a), normalize(b)
    if a == b then return true end
    if type(a) ~= "table" or type(b) ~= "table" then
        return false, path .. ": " .. show(a) .. " ~= " .. show(b)
    end
    for k, v in next, a do
        local w = rawget(b, k)
        if w == nil then
            return false, path .. ": key " .. show(k) .. " only on the left"
        end
        local ok, where = deep_equal(v, w, path .. "[" .. show(k) .. "]")
        if not ok then return false, where end
    end
    for k in next, b do
        if rawget(a, k) == nil then
            return false, path .. ": key " .. show(k) .. " only on the right"
        end
    end
    return true
end

local function assert_deep_equal(expected, actual, context)
    local ok, where = deep_equal(expected, actual)
    assert(ok, (context and context .. ": " or "") .. tostring(where))
end

-- What cjson makes of v: its decoding of its encoding.
local function canon(v)
    return cjson.decode(cjson.encode(v))
end

describe("decoding agrees with cjson.decode", function()
    -- Each file with its label, read and decoded by cjson on first use.
    -- Debian's lua-cjson 2.1.0 decodes every y_ file of this JSONTestSuite
    -- copy, so none is skipped today; a file cjson rejects would show as
    -- pending, not pass. (Skipped for cjson errors: none.)
    local files = {}
    for _, name in ipairs(helper.list(DATA .. "/corpus")) do
        if name:match("%.json$") then
            files[#files + 1] = { label = "corpus/" .. name, path = DATA .. "/corpus/" .. name }
        end
    end
    for _, name in ipairs(helper.list(DATA .. "/jsontestsuite")) do
        if name:match("^y_.*%.json$") then
            files[#files + 1] = { label = name, path = DATA .. "/jsontestsuite/" .. name }
        end
    end

    it("finds the corpus and the y_ files", function()
        assert.is_true(#files >= 98)
    end)

    -- The text and cjson's decoding (nil, message when cjson fails).
    local function load_file(file)
        if not file.text then
            file.text = helper.read(file.path)
            local ok, v = pcall(cjson.decode, file.text)
            file.ok, file.expected = ok, v
        end
        return file.text, file.ok, file.expected
    end

    for _, file in ipairs(files) do
        describe(file.label, function()
            it("materialize(decode(s)) deep-equals cjson.decode(s)", function()
                local s, ok, expected = load_file(file)
                if not ok then return pending("cjson cannot decode it: " .. expected) end
                assert_deep_equal(expected, qjson.materialize(qjson.decode(s)))
            end)
            it("decode(s, {lazy = false}) deep-equals cjson.decode(s)", function()
                local s, ok, expected = load_file(file)
                if not ok then return pending("cjson cannot decode it: " .. expected) end
                assert_deep_equal(expected, qjson.decode(s, { lazy = false }))
            end)
            it("encode(decode(s)) is the source text", function()
                local s = load_file(file)
                assert.equal(s, qjson.encode(qjson.decode(s)))
            end)
        end)
    end
end)

-- Random plain values ------------------------------------------------------

-- Pieces random strings are made of: ASCII, every control byte, the
-- escaped characters, UTF-8 of 2 to 4 bytes, DEL, and raw bytes >= 0x80.
local STRING_PIECES = { "a", "Z", "0", " ", "~", ".", '"', "\\", "/", "\127",
                        "\xc3\xa9", "\xe2\x82\xac", "\xe2\x80\xa8", "\xf0\x9f\x98\x80",
                        "\\u0041", "\\/", "</script>", "key", "null" }
for byte = 0, 31 do STRING_PIECES[#STRING_PIECES + 1] = string.char(byte) end
local RAW_BYTES = { "\x80", "\xff", "\xc3", "\xed\xa0\x80" }

local function random_string(max, raw_bytes)
    local parts = {}
    for i = 1, random(0, max or 8) do
        if raw_bytes and random() < 0.05 then
            parts[i] = RAW_BYTES[random(#RAW_BYTES)]
        else
            parts[i] = STRING_PIECES[random(#STRING_PIECES)]
        end
    end
    return table.concat(parts)
end

local SPECIAL_NUMBERS = { 0, -0.0, 1, -1, 0.1, 0.5, 1 / 3, 2 ^ 53, 2 ^ 53 + 2, -2 ^ 53,
                          2 ^ 63, -2 ^ 63, 2 ^ 64, 1e15, 1e16, 1e17, 123456789012345678,
                          1e300, -1e300, 1.7976931348623157e308, 2.2250738585072014e-308,
                          4.9406564584124654e-324, 1e-5, 1e-7, 123.456, 99999999999999,
                          999999999999999, 0.000001, 1e21, 1e22,
                          -- Halfway between two 14-digit decimals.
                          440103099353365, -440103099353365, 24064909824598.5,
                          604256559640.625, 12345678901234.5, 0.5, 2.5 }

-- Any finite number: small and large integers, floats of every magnitude.
local function random_number()
    local r = random()
    if r < 0.3 then
        return random(-1000, 1000)
    elseif r < 0.45 then
        return (random() - 0.5) * 2 ^ random(0, 70)
    elseif r < 0.55 then
        return math.floor((random() - 0.5) * 2 ^ random(20, 64))
    elseif r < 0.85 then
        return (random() - 0.5) * 10 ^ random(-320, 308)
    end
    return SPECIAL_NUMBERS[random(#SPECIAL_NUMBERS)]
end

local random_value

-- An array with holes that cjson still encodes as an array: its largest
-- index is at most 10 or at most twice the number of elements.
local function random_sparse_array(depth)
    local max = random(1, 24)
    local t = {}
    local items = 0
    for i = 1, max do
        if i == max or random() < 0.5 then
            t[i] = random_value(depth)
            items = items + 1
        end
    end
    local i = 1
    while max > 10 and max > items * 2 do
        if t[i] == nil then
            t[i] = random_value(depth)
            items = items + 1
        end
        i = i + 1
    end
    return t
end

local function random_table(depth)
    local r = random()
    local t = {}
    if r < 0.1 then
        return t
    elseif r < 0.4 then
        for i = 1, random(1, 6) do t[i] = random_value(depth) end
    elseif r < 0.55 then
        t = random_sparse_array(depth)
    elseif r < 0.9 then
        for _ = 1, random(1, 6) do t[random_string(6, true)] = random_value(depth) end
    else
        -- An object with number keys: cjson writes them with "%.14g".
        -- (Not integer keys >= 2^31: cjson stores the largest index in an
        -- int, and what it makes of {[2^31] = 1} depends on how the C
        -- compiler converts an out-of-range double; on x86-64 it writes
        -- {"2147483648":1}, where qjson refuses an excessively sparse array.)
        local keys = { 0, -1, 1.5, 2 ^ 31 - 1, -2 ^ 40, 1e-3, 1, 2, "1", "k" }
        for _ = 1, random(1, 4) do t[keys[random(#keys)]] = random_value(depth) end
        t[random() < 0.5 and 0.25 or "x"] = true
    end
    return t
end

function random_value(depth)
    depth = (depth or 0) + 1
    local r = random()
    if depth < 5 and r < 0.3 then
        return random_table(depth)
    elseif r < 0.55 then
        return random_string(12, true)
    elseif r < 0.85 then
        return random_number()
    elseif r < 0.92 then
        return random() < 0.5
    end
    return cjson.null
end

describe("encode agrees with cjson.encode", function()
    local SEEDS, PER_SEED = 12, 50
    for seed = 1, SEEDS do
        it(("random plain values, seed %d"):format(seed), function()
            math.randomseed(seed)
            for i = 1, PER_SEED do
                local v = random_value()
                local expected = cjson.encode(v)
                local ok, got = pcall(qjson.encode, v)
                assert(ok and got == expected, ("seed %d value %d: cjson and qjson differ %s")
                                               :format(seed, i, difference(expected, got)))
            end
        end)
    end

    it("rounds numbers halfway between two 14-digit decimals to even, as cjson does", function()
        -- cjson prints with the C library's snprintf, which rounds to even;
        -- LuaJIT's own "%.14g" rounds these up.
        assert.equal("4.4010309935336e+14", qjson.encode(440103099353365))
        assert.equal("[24064909824598,604256559640.62,-12345678901234]",
                     qjson.encode({ 24064909824598.5, 604256559640.625, -12345678901234.5 }))
        -- Every precision cjson accepts, on numbers that are often halfway:
        -- large integers, short binary fractions, decimals ending in 5.
        math.randomseed(99)
        local ok, err = pcall(function()
            for precision = 1, 14 do
                cjson.encode_number_precision(precision)
                qjson.encode_number_precision(precision)
                for i = 1, 300 do
                    local r = random(3)
                    local x
                    if r == 1 then
                        x = math.floor((random() - 0.5) * 10 ^ random(1, 18))
                    elseif r == 2 then
                        x = math.floor((random() - 0.5) * 2 ^ 40) / 2 ^ random(1, 30)
                    else
                        local digits = math.floor(random() * 10 ^ random(1, 16))
                        x = (digits * 10 + 5) / 10 ^ random(0, 20)
                    end
                    local expected, got = cjson.encode(x), qjson.encode(x)
                    assert(expected == got, ("precision %d, value %d (%.17g): cjson %s, qjson %s")
                                            :format(precision, i, x, expected, got))
                end
            end
        end)
        cjson.encode_number_precision(14)
        qjson.encode_number_precision(14)
        assert(ok, err)
    end)

    it("encodes sparse arrays up to cjson's limit as arrays with nulls", function()
        for _, t in ipairs({ { [10] = 1 }, { [2] = 1 }, { 1, nil, 3 },
                             { [1] = 1, [3] = 3, [5] = 5, [12] = 1, [11] = 1, [7] = 1 } }) do
            assert.equal(cjson.encode(t), qjson.encode(t))
        end
    end)

    local inf = math.huge
    local cycle = {}
    cycle[1] = { cycle }
    local deep = {}
    local at = deep
    for _ = 1, 1000 do
        at.next = {}
        at = at.next
    end
    local refused = {
        { "NaN", 0 / 0 },
        { "NaN in an array", { 1, 0 / 0 } },
        { "inf", inf },
        { "-inf in an object", { a = { b = -inf } } },
        { "a function", print },
        { "a function in an object", { f = print } },
        { "a coroutine", { coroutine.create(print) } },
        { "userdata", { io.stdout } },
        { "a boolean key", { [true] = 1 } },
        { "a table key", { [{}] = 1 } },
        { "an excessively sparse array", { [11] = 1 } },
        { "an excessively sparse nested array", { x = { 1, [30] = 2 } } },
        { "a cycle", cycle },
        { "a cycle through a proxy", "proxy cycle" },
        { "1001 nested tables", deep },
    }
    for _, case in ipairs(refused) do
        it("fails as cjson does for " .. case[1], function()
            local plain, value = case[2], case[2]
            if value == "proxy cycle" then
                local s = '{"a": {"b": [1]}}'
                plain, value = cjson.decode(s), qjson.decode(s)
                plain.a.b[2], value.a.b[2] = plain, value
            end
            local cok, cerr = pcall(cjson.encode, plain)
            local qok, qerr = pcall(qjson.encode, value)
            assert.is_false(cok)
            assert.is_false(qok)
            -- cjson's messages carry no position; qjson's neither.
            assert.is_nil(cerr:match("^[^:]*:%d+:"))
            assert.equal(cerr, qerr)
            -- The failure leaves no partial output behind.
            assert.equal('[1,"x"]', qjson.encode({ 1, "x" }))
        end)
    end

    it("fails as cjson does for a refused value spliced into a proxy", function()
        local s = '{"a": [1, 2], "b": {"c": true}}'
        for _, bad in ipairs({ 0 / 0, inf, print, { [false] = 1 }, { [20] = 1 }, cycle }) do
            local p, model = qjson.decode(s), cjson.decode(s)
            p.b.c, model.b.c = bad, bad
            local cok, cerr = pcall(cjson.encode, model)
            local qok, qerr = pcall(qjson.encode, p)
            assert.is_false(cok)
            assert.is_false(qok)
            assert.equal(cerr, qerr)
            assert.equal('{"a": [1, 2], "b": {"c": true}}', qjson.encode(qjson.decode(s)))
        end
    end)
end)

-- Documents for the mutation specs ------------------------------------------

-- Nodes of a JSON text under construction: written with chosen escapes and
-- whitespace, so that the source bytes differ from what any encoder
-- would write.
local function obj(members) return { kind = "object", members = members } end
local function arr(items) return { kind = "array", items = items } end
local function num(text) return { kind = "literal", text = text } end
local TRUE, FALSE, NULL = num("true"), num("false"), num("null")

local SHORT_ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
                        ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

-- The JSON string for s, escaping optional characters with probability p
-- (letters as \u00XX, "/" as "\/", non-ASCII as \uXXXX or surrogate pairs).
local function json_string(s, p)
    local out = {}
    for ch in s:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
        local b = ch:byte()
        if SHORT_ESCAPES[ch] and (b >= 32 or random() < 0.5) then
            out[#out + 1] = SHORT_ESCAPES[ch]
        elseif b < 32 or b == 127 then
            out[#out + 1] = ("\\u%04x"):format(b)
        elseif ch == "/" and random() < p then
            out[#out + 1] = "\\/"
        elseif #ch == 1 and random() < p then
            out[#out + 1] = (random() < 0.5 and "\\u%04x" or "\\u%04X"):format(b)
        elseif #ch > 1 and random() < p then
            local c = b % (2 ^ (7 - #ch))
            for k = 2, #ch do c = c * 64 + ch:byte(k) % 64 end
            if c >= 0x10000 then
                c = c - 0x10000
                out[#out + 1] = ("\\u%04x\\u%04x"):format(0xD800 + math.floor(c / 1024),
                                                           0xDC00 + c % 1024)
            else
                out[#out + 1] = ("\\u%04x"):format(c)
            end
        else
            out[#out + 1] = ch
        end
    end
    return '"' .. table.concat(out) .. '"'
end

-- Writes node pretty-printed in a random style.
local function write_json(node)
    local indent = ({ "  ", "    ", "\t", " " })[random(4)]
    local newline = random() < 0.8 and "\n" or "\r\n"
    local colon = ({ ": ", ":", " : " })[random(3)]
    local out = {}
    local function put(s) out[#out + 1] = s end
    local function write(n, level)
        if type(n) == "string" then
            put(json_string(n, 0.1))
        elseif n.kind == "literal" then
            put(n.text)
        else
            local list = n.kind == "object" and n.members or n.items
            local open, close = n.kind == "object" and "{" or "[", n.kind == "object" and "}" or "]"
            if #list == 0 then
                put(random() < 0.5 and open .. close or open .. " " .. close)
                return
            end
            local inline = level > 2 and random() < 0.5
            local pad = inline and " " or newline .. indent:rep(level + 1)
            put(open)
            for i, item in ipairs(list) do
                put(i > 1 and "," .. pad or pad)
                if n.kind == "object" then
                    put(json_string(item[1], 0.3))
                    put(colon)
                    write(item[2], level + 1)
                else
                    write(item, level + 1)
                end
            end
            put(inline and " " or newline .. indent:rep(level))
            put(close)
        end
    end
    write(node, 0)
    -- Whitespace around the root value, which is kept too.
    local around = { "", "", " ", "\n", "\r\n\t " }
    return around[random(#around)] .. table.concat(out) .. around[random(#around)]
end

local BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(n)
    local chars = {}
    for i = 1, n do
        local c = random(64)
        chars[i] = BASE64:sub(c, c)
    end
    return table.concat(chars)
end

-- A chat-completion request, pretty-printed, with escaped keys and keys
-- that need escaping in a JSON Pointer.
local function chat_request()
    local messages = { obj({ { "role", "system" }, { "content", "Be brief. \"Quote\" / \\" } }) }
    for i = 1, random(2, 6) do
        local content
        if random() < 0.5 then
            content = "message " .. i .. " caf\xc3\xa9 \xf0\x9f\x98\x80\n\tend"
        else
            content = arr({
                obj({ { "type", "text" }, { "text", "look at </this> \1\31" } }),
                obj({ { "type", "image_url" },
                      { "image_url", obj({ { "url", "data:image/png;base64," .. base64(60) },
                                           { "detail", "low" } }) } }),
            })
        end
        local members = { { "role", i % 2 == 1 and "user" or "assistant" }, { "content", content } }
        if random() < 0.3 then
            members[#members + 1] = { "tool_calls", arr({ obj({
                { "id", "call_" .. i }, { "type", "function" },
                { "function", obj({ { "name", "get_weather" },
                                    { "arguments", '{"city": "Paris", "days": 3}' } }) },
            }) }) }
        end
        messages[#messages + 1] = obj(members)
    end
    return obj({
        { "model", "gpt-4o" },
        { "temperature", num(({ "0.7", "7e-1", "0.70", "1", "-0" })[random(5)]) },
        { "max_tokens", num("512") },
        { "stream", FALSE },
        { "stop", random() < 0.5 and NULL or arr({ "\n\n", "END" }) },
        { "messages", arr(messages) },
        { "tools", arr({ obj({ { "type", "function" }, { "function", obj({
            { "name", "get_weather" },
            { "parameters", obj({ { "type", "object" }, { "properties", obj({
                { "city", obj({ { "type", "string" } }) },
                { "days", obj({ { "type", "integer" }, { "minimum", num("1") } }) },
            }) }, { "required", arr({ "city" }) } }) },
        }) } }) }) },
        { "logit_bias", obj({ { "50256", num("-100") }, { "1234", num("2.5E+1") } }) },
        { "metadata", obj({ { "a.b", num("1") }, { "x/y", num("2") }, { "t~0", num("3") },
                            { "", num("4") }, { "quo\"te", TRUE }, { "tab\tkey", NULL },
                            { "caf\xc3\xa9", "\xf0\x9f\x98\x80" }, { "[0]", arr({}) },
                            { "empty", obj({}) } }) },
        { "user", "user/\xc3\xa9" },
        { "n", num("1") },
    })
end

-- Repeated keys at several depths, also spelled differently ("a\u002eb"
-- is "a.b").
local DUPLICATES = [[
{"id": 1, "id": 2,
 "user": {"name": "a", "name": "b", "tags": ["x"]},
 "list": [{"k": 1, "k": {"deep": [1, 2, {"k": 3, "k": 4}], "deep": [5]}}, {"k": null}],
 "user": {"name": "c", "roles": ["admin", "ops"], "meta": {"x": 1, "x": [1, 2]}},
 "a\u002eb": {"v": 1}, "a.b": {"v": 2},
 "empty": {}, "none": [], "nulls": [null, null],
 "tail": "end", "tail": "END"
}]]

local TWITTER = helper.read(DATA .. "/corpus/twitter.json")

local TWEET = qjson.parse(TWITTER):raw("/statuses/3")

-- The texts "another proxy" values are taken from in the current run (one
-- tweet of twitter.json rather than all of it, to keep documents small),
-- and cjson's decoding of each text (read only: chosen parts are copied).
local donors
local donor_models = {}

-- Mutation --------------------------------------------------------------------

local function is_proxy(v)
    return type(v) == "table" and lazy.is_proxy(v)
end

local function is_array_proxy(p)
    return lazy.state_of(p).kind == T_ARRAY
end

local function deep_copy(v)
    if type(v) ~= "table" then return v end
    local out = {}
    for k, e in next, v do out[k] = deep_copy(e) end
    return out
end

-- The keys (document order, then added order) or indices of the proxy's
-- children that are proxies themselves (only those with at most `max`
-- members when given).
local function proxy_children(p, max)
    local kids = {}
    local function consider(k, v)
        if is_proxy(v) and (not max or qjson.len(v) <= max) then kids[#kids + 1] = k end
    end
    if is_array_proxy(p) then
        for i = 1, qjson.len(p) do consider(i, p[i]) end
    else
        for k, v in qjson.pairs(p) do consider(k, v) end
    end
    return kids
end

-- From (p, m), descends into proxy children, stopping at each level with
-- probability `stop`. Returns the proxy, the model and the path.
local function descend(p, m, stop)
    local path = {}
    while random() >= stop do
        local kids = proxy_children(p)
        if #kids == 0 then break end
        local k = kids[random(#kids)]
        p, m = p[k], m[k]
        path[#path + 1] = k
        if type(m) ~= "table" then
            error("the model has " .. show(m) .. " where the proxy has a container at "
                  .. table.concat(path, "/"), 0)
        end
    end
    return p, m, path
end

-- Strings whose cjson round trip is exact: valid UTF-8 with escapes.
local function random_text()
    return random_string(10, false)
end

-- A number whose "%.14g" form reads back as itself.
local function random_exact_number()
    return tonumber(("%.14g"):format(random_number()))
end

local function random_scalar()
    local r = random()
    if r < 0.4 then return random_text() end
    if r < 0.8 then return random_exact_number() end
    if r < 0.9 then return random() < 0.5 end
    return null
end

-- A plain table that materialize and cjson agree on: no holes, string
-- keys, exact numbers.
local function random_plain(depth)
    depth = (depth or 0) + 1
    local t = {}
    local n = random(0, 4)
    local as_array = random() < 0.5
    for i = 1, n do
        local r = random()
        local v
        if depth < 3 and r < 0.3 then
            v = random_plain(depth)
        elseif r < 0.35 then
            v = qjson.empty_array
        else
            v = random_scalar()
        end
        if as_array then t[i] = v else t[random_text() .. i] = v end
    end
    return t
end

-- A clean proxy for a part of a freshly decoded donor text, its model and
-- where it comes from.
local function random_donor()
    local which = random(#donors)
    local text = donors[which]
    donor_models[text] = donor_models[text] or cjson.decode(text)
    local p, m, path = descend(qjson.decode(text), donor_models[text], 0.4)
    local at = {}
    for i, k in ipairs(path) do at[i] = tostring(k) end
    return p, deep_copy(m), "donor " .. which .. " at /" .. table.concat(at, "/")
end

local NEW_KEYS = { "new", "a.b", "x/y", "t~0", "~1", "", 'quo"te', "back\\slash", "ctl\1\31",
                   "tab\t", "caf\xc3\xa9", "\xf0\x9f\x98\x80", "\127", "[0]", "id", "text",
                   "messages", "name", "k", "deep", "nul\0key" }

-- A value to write: the proxy's value, the model's, and a description.
local function random_write()
    local r = random()
    if r < 0.5 then
        local v = random_scalar()
        return v, v, "scalar " .. show(v)
    elseif r < 0.75 then
        local t = random_plain()
        return t, canon(t), "plain table " .. show(cjson.encode(t))
    elseif r < 0.8 then
        -- A plain table holding a proxy.
        local p, m, what = random_donor()
        return { p, "x" }, { m, "x" }, "{ proxy of " .. what .. ", \"x\" }"
    end
    local p, m, what = random_donor()
    return p, m, "proxy of " .. what
end

-- One random write to the container (p, m) found at `path`; records the
-- top-level key it touches in `touched`. Returns a description.
local function mutate(p, m, path, touched)
    local function touch(k) touched[path[1] or k] = true end
    local r = random()
    if is_array_proxy(p) then
        local n = qjson.len(p)
        assert(n == #m, ("length %d, model length %d"):format(n, #m))
        if n > 0 and r < 0.35 then
            local i = random(n)
            local v, mv, what = random_write()
            p[i], m[i] = v, mv
            assert(rawequal(p[i], v), "reads back another value")
            touch(i)
            return ("[%d] = %s"):format(i, what)
        elseif r < 0.6 then
            local v, mv, what = random_write()
            p[n + 1], m[n + 1] = v, mv
            assert(rawequal(p[n + 1], v) and qjson.len(p) == n + 1, "append not seen")
            touch(n + 1)
            return ("append [%d] = %s"):format(n + 1, what)
        elseif n > 0 and r < 0.75 then
            p[n] = nil
            m[n] = nil
            while #m > 0 and m[#m] == HOLE do m[#m] = nil end
            assert(p[n] == nil and qjson.len(p) == #m, "the removed element is still there")
            touch(n)
            return ("[%d] = nil (last)"):format(n)
        elseif n > 1 and r < 0.85 then
            local i = random(n - 1)
            p[i], m[i] = nil, HOLE
            assert(p[i] == nil and qjson.len(p) == n, "the hole reads as a value")
            touch(i)
            return ("[%d] = nil (hole)"):format(i)
        elseif r < 0.9 then
            p[n + 1] = nil
            assert(qjson.len(p) == n, "appending nil changed the length")
            touch(n + 1)
            return ("[%d] = nil (past the end)"):format(n + 1)
        end
        local kids = proxy_children(p, 30)
        if #kids > 0 and n > 0 then
            -- The same proxy at a second place (with its own changes).
            local from, to = kids[random(#kids)], random(n + 1)
            p[to], m[to] = p[from], m[from]
            touch(from)
            touch(to)
            return ("[%d] = [%d]"):format(to, from)
        end
        return "nothing"
    end
    local keys = {}
    for k in qjson.pairs(p) do keys[#keys + 1] = k end
    local count = 0
    for _ in next, m do count = count + 1 end
    assert(#keys == count and qjson.len(p) == count,
           ("%d keys, length %d, model has %d"):format(#keys, qjson.len(p), count))
    if #keys > 0 and r < 0.45 then
        local k = keys[random(#keys)]
        local v, mv, what = random_write()
        p[k], m[k] = v, mv
        assert(rawequal(p[k], v), "reads back another value")
        touch(k)
        return ("[%s] = %s"):format(show(k), what)
    elseif r < 0.65 then
        -- Mostly a key that is there, sometimes one that may not be.
        local k = (#keys > 0 and random() < 0.8) and keys[random(#keys)]
                  or NEW_KEYS[random(#NEW_KEYS)]
        p[k], m[k] = nil, nil
        assert(p[k] == nil, "the deleted key still reads as a value")
        touch(k)
        return ("[%s] = nil"):format(show(k))
    elseif r < 0.9 then
        local k = random() < 0.5 and NEW_KEYS[random(#NEW_KEYS)] or random_text()
        local v, mv, what = random_write()
        p[k], m[k] = v, mv
        assert(rawequal(p[k], v), "reads back another value")
        touch(k)
        return ("[%s] = %s (add)"):format(show(k), what)
    end
    local kids = proxy_children(p, 30)
    if #kids > 0 then
        local from = kids[random(#kids)]
        local to = random() < 0.5 and keys[random(#keys)] or NEW_KEYS[random(#NEW_KEYS)]
        p[to], m[to] = p[from], m[from]
        touch(from)
        touch(to)
        return ("[%s] = [%s]"):format(show(to), show(from))
    end
    return "nothing"
end

-- RFC 6901: "~" is "~0", "/" is "~1".
local function pointer(key)
    return "/" .. key:gsub("~", "~0"):gsub("/", "~1")
end

-- Random rounds of writes on a decoded `text`; after each round the
-- encoding must decode (by cjson and by qjson) to the model.
local function run_mutations(text, seed, rounds, donor_texts, unique_keys)
    donors = donor_texts
    local proxy, model = qjson.decode(text), cjson.decode(text)
    assert(is_proxy(proxy) and next(model) ~= nil, "the document is not a non-empty object")
    local doc = qjson.parse(text)
    local sources = {}
    for k in next, model do sources[k] = doc:raw(pointer(k)) end
    local lead, trail = text:match("^[ \t\r\n]*"), text:match("[ \t\r\n]*$")
    local touched, log = {}, {}
    local function context(round, step)
        return ("seed %d, round %d, step %d; writes so far:\n  %s\n"):format(
            seed, round, step, table.concat(log, "\n  "))
    end
    for round = 1, rounds do
        for step = 1, random(1, 6) do
            local ok, err = pcall(function()
                local p, m, path = descend(proxy, model, random() < 0.3 and 0.1 or 0.5)
                local what = mutate(p, m, path, touched)
                local at = {}
                for i, k in ipairs(path) do at[i] = tostring(k) end
                log[#log + 1] = "/" .. table.concat(at, "/") .. " " .. what
            end)
            assert(ok, context(round, step) .. tostring(err))
        end
        local where = context(round, 0)
        local out = qjson.encode(proxy)
        assert.equal(out, qjson.encode(proxy), where)
        local ok, decoded = pcall(cjson.decode, out)
        assert(ok, where .. "cjson cannot decode the output: " .. tostring(decoded))
        assert_deep_equal(model, decoded, where .. "cjson.decode(encode(proxy))")
        assert_deep_equal(model, qjson.decode(out, { lazy = false }),
                          where .. "qjson.decode(encode(proxy))")
        assert_deep_equal(model, qjson.materialize(proxy), where .. "materialize(proxy)")
        if unique_keys then
            -- Writes leave one member per key: no repeated key appears.
            local ok_unique, err = pcall(qjson.parse, out, { duplicate_keys = "error" })
            assert(ok_unique, where .. tostring(err))
        end
        assert(out:sub(1, #lead) == lead and out:sub(#out - #trail + 1) == trail,
               where .. "the whitespace around the root changed")
        for k, raw in next, sources do
            if not touched[k] then
                assert(out:find(raw, 1, true),
                       where .. "untouched " .. show(k) .. " lost its source text " .. show(raw))
            end
        end
    end
end

describe("random writes to proxies match writes to cjson tables", function()
    math.randomseed(1000)
    local chat_donor = write_json(chat_request())
    -- Donors without repeated keys, so that the output must have none.
    local unique_donors = { chat_donor, TWEET }
    for seed = 1, 30 do
        it(("on a pretty-printed chat request, seed %d"):format(seed), function()
            math.randomseed(seed)
            run_mutations(write_json(chat_request()), seed, 8, unique_donors, true)
        end)
    end
    for seed = 1, 20 do
        it(("on a document with duplicate keys, seed %d"):format(seed), function()
            math.randomseed(seed)
            run_mutations(DUPLICATES, seed, 8, { DUPLICATES, chat_donor, TWEET }, false)
        end)
    end
    for seed = 1, 8 do
        it(("on twitter.json, seed %d"):format(seed), function()
            math.randomseed(seed)
            run_mutations(TWITTER, seed, 5, unique_donors, true)
        end)
    end

    it("writes a repeated key once and deletes every occurrence", function()
        local p = qjson.decode('{"a": 1, "b": 2, "a": 3, "c": {"x": 1, "x": 2}, "d\\u002e": 0}')
        p.a = 4
        p.c.x = nil
        p["d."] = 5
        assert.equal('{"b": 2, "a": 4, "c": {}, "d\\u002e": 5}', qjson.encode(p))
        p = qjson.decode('{"a": 1, "a": 2}')
        p.a = nil
        p.a = 3
        assert.equal('{"a": 3}', qjson.encode(p))
    end)

    it("leaves an unchanged document byte for byte", function()
        math.randomseed(7)
        local text = write_json(chat_request())
        local p = qjson.decode(text)
        for _ in qjson.pairs(p) do end
        assert.equal(text, qjson.encode(p))
    end)
end)
