-- The module tables of qjson and qjson.safe against lua-cjson's (OpenResty's
-- fork, 2.1.0.11, what OpenResty ships): code written for cjson, such as
-- Kong's `require("cjson.safe").new()` followed by
-- `decode_array_with_array_mt(true)`, runs unchanged. Every function and
-- field the fork has, the same option defaults, `new()` instances whose
-- options are their own, and the options' effects byte for byte; where
-- the fork is found (spec/helper.lua), against it as well.

local ffi = require("ffi")
local qjson = require("qjson")
local safe = require("qjson.safe")
local helper = require("helper")
local fork = helper.fork()
local outcome = helper.outcome
local fork_encode = helper.fork_encode

-- The fork's module table, as `pairs(require("cjson"))` lists it.
local CJSON_NAMES = {
    "_NAME", "_VERSION", "array_mt", "decode", "decode_allow_comment",
    "decode_array_with_array_mt", "decode_invalid_numbers", "decode_max_depth", "empty_array",
    "empty_array_mt", "encode", "encode_empty_table_as_object", "encode_escape_forward_slash",
    "encode_indent", "encode_invalid_numbers", "encode_keep_buffer", "encode_max_depth",
    "encode_number_precision", "encode_skip_unsupported_value_types", "encode_sparse_array",
    "new", "null",
}

-- A test that compares with the fork: pending where it is not found.
local function it_with_fork(name, body)
    it(name, function()
        if not fork then
            pending("OpenResty's cjson fork not found (tools/baselines.sh)")
            return
        end
        body()
    end)
end

-- Asserts that `encode` writes each case { value, text, ... } as the text
-- in its column `column` (2 unless given).
local function assert_encodes(encode, cases, column)
    for _, case in ipairs(cases) do
        assert.equal(case[column or 2], encode(case[1]))
    end
end

-- Asserts that `encode` writes each case's value as `reference` does.
local function assert_encodes_as(reference, encode, cases)
    for _, case in ipairs(cases) do
        assert.equal(reference(case[1]), encode(case[1]))
    end
end

-- Runs f with `cjson_module` as package.loaded.cjson, which qjson's
-- encoder consults for lua-cjson's marks, and puts the old one back.
local function with_cjson(cjson_module, f)
    local saved = package.loaded.cjson
    package.loaded.cjson = cjson_module
    local ok, err = pcall(f)
    package.loaded.cjson = saved
    assert(ok, err)
end

-- Every module table a user can hold.
local function modules()
    return {
        { "qjson", qjson }, { "qjson.new()", qjson.new() },
        { "qjson.safe", safe }, { "qjson.safe.new()", safe.new() },
    }
end

-- The option getters' results (no argument: the current setting), by name.
local function settings(m)
    local out = {}
    for _, name in ipairs(CJSON_NAMES) do
        if name:match("^encode_") or name:match("^decode_") then
            out[name] = { m[name]() }
        end
    end
    return out
end

describe("qjson's module tables against lua-cjson's", function()
    it("have every function and field of OpenResty's cjson and cjson.safe", function()
        for _, entry in ipairs(modules()) do
            for _, name in ipairs(CJSON_NAMES) do
                assert(entry[2][name] ~= nil, entry[1] .. " lacks " .. name)
            end
        end
        assert.equal("qjson", qjson._NAME)
        assert.equal("qjson.safe", safe._NAME)
        assert.equal(qjson.null, safe.new().null)
        assert.equal(qjson.array_mt, qjson.new().array_mt)
    end)

    it_with_fork("have every name the fork found here has", function()
        for name in pairs(fork) do
            assert(qjson[name] ~= nil, "qjson lacks " .. name)
        end
        for name in pairs(fork.new()) do
            assert(qjson.new()[name] ~= nil, "qjson.new() lacks " .. name)
        end
    end)

    it("decode a number as cjson does, as the string Lua makes of it", function()
        for _, entry in ipairs(modules()) do
            local m = entry[2]
            -- (2^53 as "%.14g" is 9.007199254741e+15.)
            for _, v in ipairs({ 123, -0.5, 1e300, 2 ^ 53, 0.1 }) do
                assert.equal(tonumber(tostring(v)), m.decode(v), entry[1])
                assert.equal(tonumber(tostring(v)), m.decode(v, { lazy = false }), entry[1])
            end
            local ok, v = pcall(m.decode, true)
            assert(not ok or v == nil, entry[1] .. " decoded a boolean")
        end
        if fork then
            assert.equal(fork.decode(2 ^ 53), qjson.decode(2 ^ 53))
        end
    end)

    it("start with cjson's option settings, but decode_invalid_numbers", function()
        local want = {
            encode_number_precision = { 14 }, encode_sparse_array = { false, 2, 10 },
            encode_escape_forward_slash = { true }, encode_empty_table_as_object = { true },
            encode_max_depth = { 1000 }, decode_max_depth = { 1000 },
            encode_invalid_numbers = { false }, encode_keep_buffer = { true },
            decode_array_with_array_mt = { false }, encode_skip_unsupported_value_types = { false },
            encode_indent = { "" }, decode_allow_comment = { false },
            -- cjson accepts NaN, Infinity and hexadecimal numbers by default;
            -- qjson keeps to RFC 8259.
            decode_invalid_numbers = { false },
        }
        for _, entry in ipairs(modules()) do
            assert.same(want, settings(entry[2]), entry[1])
        end
        if fork then
            local theirs = settings(fork.new())
            theirs.decode_invalid_numbers = { false }
            assert.same(want, theirs)
        end
    end)
end)

describe("qjson.new()", function()
    it("keeps its options to itself, and the module keeps its own", function()
        local a, b = qjson.new(), qjson.new()
        a.encode_escape_forward_slash(false)
        a.encode_number_precision(3)
        a.decode_max_depth(2)
        a.duplicate_keys("error")
        for _ = 1, 2 do
            -- Twice: the key cache of one encoder must not serve another.
            assert.equal('{"a/b":0.333}', a.encode({ ["a/b"] = 1 / 3 }))
            assert.equal('{"a\\/b":0.33333333333333}', b.encode({ ["a/b"] = 1 / 3 }))
            assert.equal('{"a\\/b":0.33333333333333}', qjson.encode({ ["a/b"] = 1 / 3 }))
        end
        assert.has_error(function() a.decode("[[[1]]]") end, "qjson: nesting too deep at byte 2")
        assert.equal(1, b.decode("[[[1]]]", { lazy = false })[1][1][1])
        assert.has_error(function() a.parse('{"k":1,"k":2}') end)
        assert.equal(2, qjson.parse('{"k":1,"k":2}'):get_f64("k"))
        assert.is_true(qjson.encode_escape_forward_slash())
        assert.equal(1000, qjson.decode_max_depth())
        assert.equal("last", qjson.duplicate_keys())
        -- A new instance starts from the defaults, whatever made it.
        local c = a.new()
        assert.equal(14, c.encode_number_precision())
        assert.equal(1000, c.decode_max_depth())
    end)

    it("applies its options to proxies it decodes and encodes", function()
        local a = qjson.new()
        a.encode_number_precision(3)
        local p = a.decode('{"x": 1, "y": [1, 2]}')
        p.x = 1 / 3
        -- The Lua encoder splices the change in with the instance's options.
        assert.equal('{"x": 0.333, "y": [1, 2]}', a.encode(p))
        assert.equal('{"x": 0.33333333333333, "y": [1, 2]}', qjson.encode(p))
    end)

    it("has a safe facade of its own", function()
        local s = safe.new()
        assert.equal(3, s.encode_number_precision(3))
        assert.equal("0.333", s.encode(1 / 3))
        assert.equal("0.33333333333333", safe.encode(1 / 3))
        local v, err = s.decode("[1")
        assert.is_nil(v)
        assert.matches("^qjson: unexpected end of input", err)
        local ok, message = s.decode_invalid_numbers(true)
        assert.is_nil(ok)
        assert.matches("decode_invalid_numbers cannot be turned on", message)
    end)
end)

describe("option functions", function()
    -- One more argument than the function takes (a nil counts), then
    -- `f`'s outcome.
    local function one_too_many(f, most)
        if most == 1 then
            return pcall(f, nil, 1)
        end
        return pcall(f, nil, nil, nil, 1)
    end

    it("refuse one argument too many, as cjson does, and change nothing", function()
        for _, name in ipairs(qjson._options) do
            local most = name == "encode_sparse_array" and 3 or 1
            local want = ("bad argument #%d to '%s' (found too many arguments)")
                         :format(most + 1, name)
            local q = qjson.new()
            local before = { q[name]() }
            assert.same({ false, want }, { one_too_many(q[name], most) })
            assert.same({ nil, want }, { select(2, one_too_many(safe.new()[name], most)) })
            assert.same(before, { q[name]() })
            if fork and fork[name] then
                local ok, err = one_too_many(fork.new()[name], most)
                assert.is_false(ok)
                assert.matches("found too many arguments", err, 1, true)
            end
        end
        local q = qjson.new()
        assert.has_error(function() q.encode_max_depth(5, 6) end,
                         "bad argument #2 to 'encode_max_depth' (found too many arguments)")
        assert.equal(1000, q.encode_max_depth())
        assert.same({ false, 2, 10 }, { q.encode_sparse_array(nil, nil, nil) })
    end)
end)

describe("number options", function()
    -- NaN compares false with every bound: it passed the range check,
    -- was kept, and the next encode's number format ("%.nang") crashed
    -- the process. (cjson reads these arguments into a C int, where NaN
    -- is out of range here, but 0 for encode_sparse_array's ratio and
    -- safe count; qjson refuses NaN everywhere.)
    it("refuse NaN as out of range and keep their setting", function()
        local q = qjson.new()
        local cases = {
            { "encode_number_precision", "expected integer between 1 and 16", 14 },
            { "encode_max_depth", "expected integer between 1 and 2147483647", 1000 },
            { "decode_max_depth", "expected integer between 1 and 2147483647", 1000 },
        }
        for _, case in ipairs(cases) do
            local name, message, setting = case[1], case[2], case[3]
            assert.has_error(function() q[name](0 / 0) end,
                             "bad argument #1 to '" .. name .. "' (" .. message .. ")")
            assert.equal(setting, q[name]())
        end
        assert.has_error(function() q.encode_sparse_array(true, 0 / 0) end,
                         "bad argument #2 to 'encode_sparse_array' "
                         .. "(expected integer between 0 and 2147483647)")
        assert.same({ false, 2, 10 }, { q.encode_sparse_array() })
        local p = q.decode('{"a":1}')
        p.b = 2.5
        assert.equal('{"a":1,"b":2.5}', q.encode(p))
        assert.same({ nil, "bad argument #1 to 'encode_number_precision' "
                           .. "(expected integer between 1 and 16)" },
                    { safe.new().encode_number_precision(0 / 0) })
    end)
end)

describe("decode_lazy", function()
    it("off, makes decode give plain tables unless a call asks for proxies", function()
        local a = qjson.new()
        assert.is_true(a.decode_lazy())
        assert.is_false(a.decode_lazy(false))
        local t = a.decode('{"m":[1,{"k":null}],"e":[]}')
        assert.is_nil(getmetatable(t))
        -- Plain tables: rawget and next see their entries.
        assert.equal(1, rawget(t.m, 1))
        assert.is_not_nil(next(t))
        assert.same({ 1, { k = qjson.null } }, t.m)
        assert.equal(qjson.empty_array_mt, getmetatable(t.e))
        -- Other options still apply, and a call's own `lazy` wins.
        assert.has_error(function() a.decode("[[1]]", { max_depth = 1 }) end,
                         "qjson: nesting too deep at byte 1")
        assert.has_error(function() a.decode('{"k":1,"k":2}', { duplicate_keys = "error" }) end)
        assert.is_nil(rawget(a.decode("[1]", { lazy = true }), 1))
        assert.equal(1, rawget(a.decode("[1]", { lazy = false }), 1))
        assert.has_error(function() a.decode("[1]", { lazy = "no" }) end,
                         "qjson: lazy must be a boolean")
        -- The module still makes proxies.
        assert.is_nil(rawget(qjson.decode("[1]"), 1))
        local s = safe.new()
        s.decode_lazy("off")
        assert.equal(1, rawget(s.decode("[1]"), 1))
        assert.is_nil(rawget(safe.decode("[1]"), 1))
    end)
end)

describe("decode_array_with_array_mt", function()
    local TEXT = '{"a":[],"b":[[1],[]],"c":{"d":[2]}}'

    -- Every array of `t` has metatable `mt`, every object none.
    local function check(t, mt)
        assert.equal(mt, getmetatable(t.a))
        assert.equal(mt, getmetatable(t.b))
        assert.equal(mt, getmetatable(t.b[1]))
        assert.equal(mt, getmetatable(t.b[2]))
        assert.equal(mt, getmetatable(t.c.d))
        assert.is_nil(getmetatable(t))
        assert.is_nil(getmetatable(t.c))
    end

    it("gives every eagerly decoded or materialized array qjson.array_mt", function()
        local a = qjson.new()
        assert.is_true(a.decode_array_with_array_mt(true))
        check(a.decode(TEXT, { lazy = false }), qjson.array_mt)
        check(a.materialize(a.decode(TEXT)), qjson.array_mt)
        assert.equal("[]", a.encode(a.decode("[]", { lazy = false })))
        assert.equal('{"a":[[1],[]]}', a.encode(a.decode('{"a":[[1],[]]}', { lazy = false })))
        -- The module's decode is untouched: empty arrays alone are marked.
        local t = qjson.decode(TEXT, { lazy = false })
        assert.equal(qjson.empty_array_mt, getmetatable(t.a))
        assert.is_nil(getmetatable(t.b[1]))
        assert.is_false(a.decode_array_with_array_mt("off"))
        assert.is_nil(getmetatable(a.decode("[1]", { lazy = false })))
    end)

    it("marks the arrays of the FFI build too (nesting deeper than the Lua stack)", function()
        local a = qjson.new()
        a.decode_array_with_array_mt(true)
        a.decode_max_depth(100000)
        local depth = 20000
        local t = a.decode(("["):rep(depth) .. ("]"):rep(depth), { lazy = false })
        for _ = 1, depth - 1 do
            assert.equal(qjson.array_mt, getmetatable(t))
            t = t[1]
        end
        assert.equal(qjson.array_mt, getmetatable(t))
        assert.is_nil(t[1])
    end)

    it_with_fork("matches the fork's tables", function()
        local theirs, ours = fork.new(), qjson.new()
        theirs.decode_array_with_array_mt(true)
        ours.decode_array_with_array_mt(true)
        local c, q = theirs.decode(TEXT), ours.decode(TEXT, { lazy = false })
        check(c, theirs.array_mt)
        check(q, qjson.array_mt)
    end)
end)

describe("encode_invalid_numbers", function()
    local VALUES = {
        { { 0 / 0, math.huge, -math.huge }, "[NaN,Infinity,-Infinity]", "[null,null,null]" },
        { { a = -math.huge }, '{"a":-Infinity}', '{"a":null}' },
        { { [0.5] = 0 / 0 }, '{"0.5":NaN}', '{"0.5":null}' },
        { 0 / 0, "NaN", "null" },
    }

    it("writes NaN and infinities as cjson does when on or null", function()
        local a = qjson.new()
        assert.is_true(a.encode_invalid_numbers(true))
        assert_encodes(a.encode, VALUES)
        assert.equal("null", a.encode_invalid_numbers("null"))
        assert_encodes(a.encode, VALUES, 3)
        assert.is_false(a.encode_invalid_numbers("off"))
        assert.has_error(function() a.encode({ 0 / 0 }) end,
                         "Cannot serialise number: must not be NaN or Infinity")
        assert.has_error(function() a.encode_invalid_numbers("maybe") end,
                         "bad argument #1 to 'encode_invalid_numbers' (invalid option 'maybe')")
        assert.has_error(function() qjson.encode({ math.huge }) end,
                         "Cannot serialise number: must not be NaN or Infinity")
    end)

    it("applies to values spliced into proxies", function()
        local a = qjson.new()
        a.encode_invalid_numbers("on")
        local p = a.decode('{"x": 1, "y": [2]}')
        p.x = 0 / 0
        p.y[2] = -math.huge
        assert.equal('{"x": NaN, "y": [2,-Infinity]}', a.encode(p))
    end)

    it_with_fork("matches the fork", function()
        local theirs, ours = fork.new(), qjson.new()
        for _, setting in ipairs({ "on", "null" }) do
            theirs.encode_invalid_numbers(setting)
            ours.encode_invalid_numbers(setting)
            assert_encodes_as(theirs.encode, ours.encode, VALUES)
        end
    end)
end)

describe("encode_skip_unsupported_value_types", function()
    local co = coroutine.create(print)
    local VALUES = {
        { print, "" },
        { { print, 1, print, 2, print }, "[1,2]" },
        { { a = print }, "{}" },
        { { 1, { print } }, "[1,[]]" },
        { { co, io.stdout, 3 }, "[3]" },
        { { b = 1, a = print }, '{"b":1}' },
        { { ffi.new("char[1]"), qjson.null }, "[null]" },
    }

    it("leaves unsupported values out of tables, with their keys and commas", function()
        local a = qjson.new()
        assert.is_true(a.encode_skip_unsupported_value_types(true))
        assert_encodes(a.encode, VALUES)
        -- int64_t and uint64_t are written (qjson's extension; cjson leaves
        -- them out too).
        assert.equal("[5]", a.encode({ ffi.new("int64_t", 5) }))
        assert.has_error(function() qjson.encode({ print }) end,
                         "Cannot serialise function: type not supported")
        -- A key is still refused.
        assert.has_error(function() a.encode({ [print] = 1 }) end,
                         "Cannot serialise function: table key must be a number or string")
    end)

    it("leaves them out of keys and elements added to proxies", function()
        local a = qjson.new()
        a.encode_skip_unsupported_value_types(true)
        local p = a.decode('{"x": [1]}')
        p.f = print
        p.x[2] = print
        p.x[3] = 3
        assert.equal('{"x": [1,3]}', a.encode(p))
        -- A source member's new value keeps its key: refused, not dropped.
        p.x = print
        assert.has_error(function() a.encode(p) end,
                         "Cannot serialise function: type not supported")
    end)

    -- cjson writes a member's key before it finds the value left out: a
    -- key it cannot write raises. The Lua encoder (a foreign metatable,
    -- a proxy, encode_indent) left such a member out with its key.
    it("still refuses a key it cannot write, whose value it leaves out", function()
        local a = qjson.new()
        a.encode_skip_unsupported_value_types(true)
        local BOOLEAN_KEY = "Cannot serialise boolean: table key must be a number or string"
        local NAN_KEY = "Cannot serialise number: must not be NaN or Infinity"
        local foreign = { __index = {} }
        local cases = {
            { { [true] = print }, BOOLEAN_KEY },
            { { setmetatable({}, {}), { [true] = print } }, BOOLEAN_KEY },
            { setmetatable({ [false] = co, a = 1 }, foreign), BOOLEAN_KEY },
            { setmetatable({ [math.huge] = print, a = 1 }, foreign), NAN_KEY },
            { { [-math.huge] = print, a = 1 }, NAN_KEY },
        }
        for _, indent in ipairs({ "", "  " }) do
            a.encode_indent(indent)
            for _, case in ipairs(cases) do
                assert.has_error(function() a.encode(case[1]) end, case[2])
                if fork then
                    local theirs = fork.new()
                    theirs.encode_skip_unsupported_value_types(true)
                    assert.has_error(function() theirs.encode(case[1]) end, case[2])
                end
            end
            local p = a.decode('{"a":1}')
            p[true] = print
            assert.has_error(function() a.encode(p) end, BOOLEAN_KEY)
        end
        a.encode_indent("")
        a.encode_invalid_numbers("null")
        assert.equal('{"a":1}', a.encode(setmetatable({ [math.huge] = print, a = 1 }, foreign)))
    end)

    it_with_fork("matches the fork", function()
        local theirs, ours = fork.new(), qjson.new()
        theirs.encode_skip_unsupported_value_types(true)
        ours.encode_skip_unsupported_value_types(true)
        for _, case in ipairs(VALUES) do
            local v = case[1]
            if type(v) == "table" and v[2] == qjson.null then
                v = { v[1], fork.null }
            end
            assert.equal(theirs.encode(v), ours.encode(case[1]))
        end
    end)
end)

describe("encode_indent", function()
    local CASES = {
        { { 1, { 2, { 3 } }, {} }, "[\n  1,\n  [\n    2,\n    [\n      3\n    ]\n  ],\n  {}\n]" },
        { { x = { y = { z = "w" } } }, '{\n  "x": {\n    "y": {\n      "z": "w"\n    }\n  }\n}' },
        { {}, "{}" },
        { { {}, { k = {} } }, '[\n  {},\n  {\n    "k": {}\n  }\n]' },
        { "s", '"s"' },
    }

    it("lays out every element and member on a line of its own, as cjson does", function()
        local a = qjson.new()
        assert.equal("  ", a.encode_indent("  "))
        assert_encodes(a.encode, CASES)
        a.encode_indent("\t")
        assert.equal('{\n\t"x": [\n\t\t1\n\t]\n}', a.encode({ x = { 1 } }))
        assert.equal("", a.encode_indent(""))
        assert.equal('{"x":[1]}', a.encode({ x = { 1 } }))
        assert.equal("", qjson.encode_indent())
    end)

    it("lays out proxies anew, changed or not", function()
        local a = qjson.new()
        a.encode_indent("  ")
        local p = a.decode('[1, {"k": [true, null]}]')
        local want = '[\n  1,\n  {\n    "k": [\n      true,\n      null\n    ]\n  }\n]'
        assert.equal(want, a.encode(p))
        p[2].k[2] = false
        assert.equal((want:gsub("null", "false")), a.encode(p))
        -- Without it, the source's layout around the change stays.
        assert.equal('[1, {"k": [true, false]}]', qjson.encode(p))
    end)

    -- Under encode_indent a changed proxy was materialized whole: the
    -- plain tables written into it were copies, iterated in an order of
    -- their own, and one that contained itself raised materialize's
    -- message, with a file and line.
    it("writes plain tables written into proxies as it writes them anywhere", function()
        local a = qjson.new()
        a.encode_indent(" ")
        local loop = {}
        loop.me = loop
        local p = a.decode('[0, {"a": 1}]')
        p[2].b = loop
        assert.has_error(function() a.encode(p) end, "Cannot serialise, excessive nesting (1001)")
        p[2].b = nil
        p[2].self = p
        assert.has_error(function() a.encode(p) end, "Cannot serialise, excessive nesting (1001)")
        for i = 1, 100 do
            local t = {}
            for k = 1, i % 9 + 2 do
                t[(k * 7919 + i) % 13 - 6 + (k % 3) / 2] = k
            end
            p = a.decode("[0]")
            p[2] = t
            assert.equal(a.encode({ 0, t }), a.encode(p))
            if fork then
                local theirs = fork.new()
                theirs.encode_indent(" ")
                local c = theirs.decode("[0]")
                c[2] = t
                assert.equal(theirs.encode(c), a.encode(p))
            end
        end
    end)

    it_with_fork("matches the fork", function()
        local theirs, ours = fork.new(), qjson.new()
        -- (So that the fork decodes [] as an array, as qjson does.)
        theirs.decode_array_with_array_mt(true)
        for _, indent in ipairs({ "  ", "\t", "->" }) do
            theirs.encode_indent(indent)
            ours.encode_indent(indent)
            assert_encodes_as(theirs.encode, ours.encode, CASES)
            local text = '[1, {"k": [true, null]}, [], {}]'
            assert.equal(theirs.encode(theirs.decode(text)), ours.encode(ours.decode(text)))
        end
    end)
end)

describe("tables lua-cjson marks, when it is loaded beside qjson", function()
    local function cases(cjson)
        local counted = setmetatable({}, {
            __len = function() return 2 end,
            __index = function(_, i) return i * 10 end,
        })
        return {
            { setmetatable({}, cjson.empty_array_mt), "[]" },
            { setmetatable({}, cjson.array_mt), "[]" },
            { setmetatable({ 1, 2 }, cjson.array_mt), "[1,2]" },
            { { a = setmetatable({}, cjson.empty_array_mt) }, '{"a":[]}' },
            { setmetatable({ a = 1 }, cjson.empty_array_mt), "[]" },
            { setmetatable({ 1, 2, a = 1 }, cjson.empty_array_mt), "[1,2]" },
            { counted, "[10,20]" },
            { { counted }, "[[10,20]]" },
        }
    end

    it("encode as cjson encodes them: its array_mt, empty_array_mt and __len", function()
        local cjson = { array_mt = {}, empty_array_mt = {} }
        with_cjson(cjson, function()
            local marked = cases(cjson)
            assert_encodes(qjson.encode, marked)
            assert_encodes(qjson.new().encode, marked)
            -- A metatable hidden behind __metatable is no table to read.
            local locked = setmetatable({ 1 }, { __metatable = "locked" })
            assert.equal("[1]", qjson.encode(locked))
        end)
    end)

    it_with_fork("match the fork", function()
        with_cjson(fork, function()
            assert_encodes_as(fork.encode, qjson.encode, cases(fork))
            assert.equal(fork.encode({ fork.empty_array }), qjson.encode({ fork.empty_array }))
        end)
    end)
end)

describe("random tables marked for lua-cjson", function()
    local gen = require("gen")
    local lua_encode = require("qjson.encode").lua_encode

    -- Marks some of the tables of v with one of `metatables`, at random.
    local function mark(v, metatables, seen)
        if type(v) ~= "table" or seen[v] then
            return v
        end
        seen[v] = true
        for _, child in next, v do
            mark(child, metatables, seen)
        end
        if math.random() < 0.4 then
            setmetatable(v, metatables[math.random(#metatables)])
        end
        return v
    end

    it_with_fork("encode as the fork encodes them, natively or not", function()
        local metatables = {
            fork.array_mt, fork.empty_array_mt, qjson.array_mt, qjson.empty_array_mt,
            { __len = function() return 2 end }, { __metatable = "locked" }, { __index = {} },
        }
        with_cjson(fork, function()
            for seed = 1, 300 do
                math.randomseed(seed)
                local v = mark(gen.random_value(), metatables, {})
                local ours = outcome(qjson.encode, v)
                assert.equal(outcome(lua_encode, v), ours, "seed " .. seed .. ": Lua encoder")
                -- (The fork is given its own metatables for qjson's.)
                assert.equal(fork_encode(fork, v), ours, "seed " .. seed .. ": the fork")
            end
        end)
    end)
end)

describe("the options qjson keeps fixed", function()
    it("take their one setting and refuse the other with a reason", function()
        for _, name in ipairs({ "decode_invalid_numbers", "decode_allow_comment" }) do
            assert.is_false(qjson[name](false))
            assert.is_false(qjson[name]("off"))
            assert.has_error(function() qjson[name](true) end)
            assert.has_error(function() qjson[name]("on") end)
            assert.is_false(qjson[name]())
        end
        assert.has_error(function() qjson.decode("[NaN]") end)
        assert.is_false(qjson.new().encode_keep_buffer(false))
        assert.is_true(qjson.encode_keep_buffer())
    end)
end)
