-- Seeded generators shared by the randomized specs (differential_spec,
-- property_spec and the encode fuzz): random plain Lua values as cjson
-- would encode them, and JSON texts written node by node with chosen
-- escapes and whitespace, so that their bytes differ from what any encoder
-- would write. Everything draws from math.random: seed it first.
-- Also the helpers their failure messages and comparisons need.

local lazy = require("qjson.lazy")
local qffi = require("qjson.ffi")

local null = qffi.null
local random = math.random

local _M = {}

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

_M.show = show
_M.difference = difference

-- Deep equality of decoded values: numbers compared with ==, metatables
-- ignored, and each value first passed through `normalize` when given (so
-- that a spec's own placeholders compare equal to null). With `strict`,
-- also the same metatable on every pair of tables and the same sign of
-- every zero (`identical` below). Returns true, or false and where the
-- values differ.
local function equal(a, b, normalize, strict, path)
    if normalize then
        a, b = normalize(a), normalize(b)
    end
    if a == b then
        if strict and a == 0 and 1 / a ~= 1 / b then
            return false, path .. ": 0 and -0"
        end
        return true
    end
    if type(a) ~= "table" or type(b) ~= "table" then
        return false, path .. ": " .. show(a) .. " ~= " .. show(b)
    end
    if strict and getmetatable(a) ~= getmetatable(b) then
        return false, path .. ": metatables differ"
    end
    for k, v in next, a do
        local w = rawget(b, k)
        if w == nil then
            return false, path .. ": key " .. show(k) .. " only on the left"
        end
        local ok, where = equal(v, w, normalize, strict, path .. "[" .. show(k) .. "]")
        if not ok then return false, where end
    end
    for k in next, b do
        if rawget(a, k) == nil then
            return false, path .. ": key " .. show(k) .. " only on the right"
        end
    end
    return true
end

function _M.deep_equal(a, b, normalize, path)
    return equal(a, b, normalize, false, path or "$")
end

-- Whether two decoded values are the same down to their metatables and
-- the sign of zero (what two decoders of one text must agree on).
function _M.identical(a, b)
    return equal(a, b, nil, true, "$")
end

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
    return null
end

_M.STRING_PIECES = STRING_PIECES
_M.random_string = random_string
_M.random_number = random_number
_M.random_value = random_value

-- JSON texts -------------------------------------------------------------------

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

local function digits(n, first_nonzero)
    local out = {}
    for i = 1, n do
        out[i] = (i == 1 and first_nonzero) and random(1, 9) or random(0, 9)
    end
    return table.concat(out)
end

-- The spelling of a JSON number of any shape RFC 8259 allows: zero and
-- minus zero, short and very long integers, fractions with trailing
-- zeros, exponents of either case and sign, values that overflow or
-- underflow a double, integers around 2^53 and 2^63.
local EDGE_NUMBERS = { "0", "-0", "0.0", "-0.0", "0e0", "0E-0", "9007199254740993",
                       "-9007199254740993", "9223372036854775807", "9223372036854775808",
                       "-9223372036854775808", "-9223372036854775809", "18446744073709551616",
                       "1e308", "1.7976931348623157e308", "1.8e308", "4.9e-324", "2e-324",
                       "2.2250738585072011e-308", "1e-400", "-1e400",
                       "123456789012345678901234567890",
                       "0.1", "0.30000000000000004", "1e23", "8.98846567431158e307" }

local function random_number_text()
    local r = random()
    if r < 0.15 then
        return EDGE_NUMBERS[random(#EDGE_NUMBERS)]
    end
    local sign = random() < 0.3 and "-" or ""
    local int = random() < 0.2 and "0" or digits(random(1, r < 0.25 and 40 or 8), true)
    local frac, exp = "", ""
    if random() < 0.5 then
        frac = "." .. digits(random(1, r < 0.3 and 30 or 6))
    end
    if random() < 0.4 then
        exp = (random() < 0.5 and "e" or "E") .. ({ "", "+", "-" })[random(3)]
              .. digits(random(1, 3))
    end
    return sign .. int .. frac .. exp
end

-- A random JSON value as a node for write_json: objects and arrays up to
-- `max_depth` deep (the root is always one), strings with every escape and
-- UTF-8 of 1 to 4 bytes, numbers of every shape, literals. Keys may repeat
-- within an object.
local function random_node(max_depth, depth)
    depth = (depth or 0) + 1
    local r = depth == 1 and random() * 0.5 or random()
    if depth <= max_depth and r < 0.5 then
        local list = {}
        if r < 0.25 then
            for i = 1, random(0, 6) do list[i] = random_node(max_depth, depth) end
            return arr(list)
        end
        for i = 1, random(0, 6) do
            local key = random() < 0.1 and "dup" or random_string(6, false)
            list[i] = { key, random_node(max_depth, depth) }
        end
        return obj(list)
    elseif r < 0.7 then
        return random_string(12, false)
    elseif r < 0.92 then
        return num(random_number_text())
    end
    return ({ TRUE, FALSE, NULL })[random(3)]
end

-- Whether s is spelled as RFC 8259 allows a number (Lua patterns, so an
-- oracle independent of the parser).
function _M.is_number(s)
    local int, rest = s:match("^-?(%d+)(.*)$")
    if not int or (#int > 1 and int:sub(1, 1) == "0") then return false end
    rest = rest:gsub("^%.%d+", "", 1)
    rest = rest:gsub("^[eE][+-]?%d+", "", 1)
    return rest == ""
end

-- Whether s is valid UTF-8 (RFC 3629: no overlongs, no surrogates, at
-- most U+10FFFF), byte by byte.
function _M.valid_utf8(s)
    local i, n = 1, #s
    while i <= n do
        local c = s:byte(i)
        local len, lo, hi = 1, 0x80, 0xBF
        if c < 0x80 then -- luacheck: ignore 542
        elseif c >= 0xC2 and c <= 0xDF then
            len = 2
        elseif c >= 0xE0 and c <= 0xEF then
            len = 3
            if c == 0xE0 then lo = 0xA0 elseif c == 0xED then hi = 0x9F end
        elseif c >= 0xF0 and c <= 0xF4 then
            len = 4
            if c == 0xF0 then lo = 0x90 elseif c == 0xF4 then hi = 0x8F end
        else
            return false
        end
        for k = 1, len - 1 do
            local b = s:byte(i + k)
            if not b or b < (k == 1 and lo or 0x80) or b > (k == 1 and hi or 0xBF) then
                return false
            end
        end
        i = i + len
    end
    return true
end

_M.random_number_text = random_number_text
_M.random_node = random_node
_M.obj, _M.arr, _M.num = obj, arr, num
_M.TRUE, _M.FALSE, _M.NULL = TRUE, FALSE, NULL
_M.json_string = json_string
_M.write_json = write_json

return _M
