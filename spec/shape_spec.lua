-- qjson.decode(text, { lazy = false }) of a small text goes by shape
-- (src/eager/shape.rs, lua/qjson/shapes.lua): the native walk gives the
-- text's shape id and its values, and a function made once per shape
-- builds the tables. It must build exactly what the Lua C API path
-- (qjson_lua_decode) builds, whichever shapes came before, and leave
-- to that path whatever it does not take.

local ffi = require("ffi")
local qjson = require("qjson")
local qffi = require("qjson.ffi")
local shapes = require("qjson.shapes")
local gen = require("gen")

local C = qffi.C
-- Fewer rounds under valgrind (tools/memcheck.sh).
local ROUNDS = os.getenv("QJSON_MEMCHECK") and 10 or 100
local EAGER = { lazy = false }
local STRICT = { lazy = false, duplicate_keys = "error" }
local c_decode = qffi.c_decode
local null, empty_array_mt, array_mt = qjson.null, qjson.empty_array_mt, qjson.array_mt

-- What the C API path builds (arrays marked with `mark` when given).
local function via_c_api(text, mark)
    local v, err = c_decode(text, 1000, C.QJSON_DUPLICATE_KEYS_LAST_WINS, null, empty_array_mt,
                            mark)
    assert(v ~= nil, err)
    return v
end

-- Whether `text` is decoded by shape (a registry of its own: ids left).
local out = ffi.new("qjson_shaped")
local default_options = ffi.new("qjson_options", 1000, C.QJSON_DUPLICATE_KEYS_LAST_WINS)
local function by_shape(text)
    local registry = ffi.gc(C.qjson_shapes_new(), C.qjson_shapes_free)
    return C.qjson_decode_shaped(text, #text, default_options, registry, out) ~= 0
end

local identical = gen.identical

describe("eager decode by shape", function()
    it("builds what the C API path builds, for random small texts", function()
        local taken, checked = 0, 0
        for _ = 1, ROUNDS do
            -- 30 texts stay within the 32 ids a registry gives out.
            qjson._reset_shapes()
            for _ = 1, 30 do
                local text = gen.write_json(gen.random_node(4))
                local ok, v = pcall(qjson.decode, text, EAGER)
                assert(ok, v)
                assert(identical(v, via_c_api(text)))
                if by_shape(text) then taken = taken + 1 end
                checked = checked + 1
            end
        end
        assert.is_true(taken > checked * 0.9, taken .. " of " .. checked)
    end)

    it("marks every array under decode_array_with_array_mt", function()
        qjson._reset_shapes()
        local q = qjson.new()
        q.decode_array_with_array_mt(true)
        for _ = 1, 30 do
            local text = gen.write_json(gen.random_node(4))
            assert(identical(q.decode(text, EAGER), via_c_api(text, array_mt)))
        end
        -- The same shapes unmarked, from the same instance.
        q.decode_array_with_array_mt(false)
        local text = '{"a":[],"b":[[1],{"c":[]}]}'
        assert(identical(q.decode(text, EAGER), via_c_api(text)))
        assert.equal(empty_array_mt, getmetatable(q.decode(text, EAGER).a))
    end)

    it("carries every value of one shape, its function made once", function()
        qjson._reset_shapes()
        local values = { '"plain"', '""', '"tab\\tquote\\"\\u0000nul"', '"\\u00e9\\ud83d\\ude00"',
                         '"caf\195\169"', "0", "-0", "1e400", "-1e400", "123456789012345678",
                         "2.5e-3", "-7" }
        for _, a in ipairs(values) do
            for _, b in ipairs(values) do
                local text = '{"x":' .. a .. ',"list":[' .. b .. "," .. a .. "],"
                             .. '"o":{"y":' .. b .. "}}"
                local v = qjson.decode(text, EAGER)
                assert(identical(v, via_c_api(text)), text)
            end
        end
    end)

    it("keeps keys of any bytes, and a repeated key's last value", function()
        local keys = { "", "k", '\\"', "\\\\", "\\u0000", "\\n\\r\\t", "\\u00e9",
                       "caf\195\169", "[{,:}]", "1", string.rep("k", 255) }
        for _, k in ipairs(keys) do
            local text = '{"' .. k .. '":1,"other":["' .. k .. '"]}'
            assert.is_true(by_shape(text), text)
            assert(identical(qjson.decode(text, EAGER), via_c_api(text)), text)
        end
        local repeated = '{"a":1,"b":2,"a":{"c":3},"a":[4]}'
        assert.same({ 4 }, qjson.decode(repeated, EAGER).a)
        assert(identical(qjson.decode(repeated, EAGER), via_c_api(repeated)))
        assert.has_error(function() qjson.decode(repeated, STRICT) end,
                         select(2, pcall(qjson.parse, repeated, { duplicate_keys = "error" })))
        assert.equal(1, qjson.decode('{"a":1,"b":2}', STRICT).a)
        -- A constant value (true, null, []) and a read one under one key.
        assert.is_true(qjson.decode('{"a":"x","a":true}', EAGER).a)
        assert.equal("x", qjson.decode('{"a":true,"a":"x"}', EAGER).a)
        assert.equal(null, qjson.decode('{"a":[],"a":"x","a":null}', EAGER).a)
    end)

    it("leaves to the C API path what it does not take, with the same results", function()
        local many_numbers = "[" .. string.rep("1,", 64) .. "2]"
        local many_strings = "[" .. string.rep('"s",', 64) .. '"t"]'
        local long_key = '{"' .. string.rep("k", 256) .. '":1}'
        local long_text = '["' .. string.rep("x", C.QJSON_SHAPED_MAX_BYTES) .. '"]'
        local deep = string.rep("[", 40) .. string.rep("]", 40)
        for _, text in ipairs({ many_numbers, many_strings, long_key, long_text, deep }) do
            assert.is_false(by_shape(text))
            assert(identical(qjson.decode(text, EAGER), via_c_api(text)))
        end
        -- Errors come from the C API path, as parse reports them.
        for _, text in ipairs({ '{"a":1,}', '["\\x"]', "[1] 2", '{"a":"\255"}' }) do
            assert.is_false(by_shape(text))
            assert.has_error(function() qjson.decode(text, EAGER) end,
                             select(2, pcall(qjson.parse, text)))
        end
        assert.has_error(function() qjson.decode("[[1]]", { lazy = false, max_depth = 1 }) end,
                         "qjson: nesting too deep at byte 1")
    end)

    it("decodes every shape past the ids the registry gives out the other way", function()
        qjson._reset_shapes()
        for i = 1, 300 do
            local text = '{"key' .. i .. '":[' .. i .. ',"v"]}'
            local v = qjson.decode(text, EAGER)
            assert.equal(i, v["key" .. i][1])
            assert(identical(v, via_c_api(text)))
        end
        -- The first shapes keep their functions.
        assert.equal(7, qjson.decode('{"key1":[7,"w"]}', EAGER).key1[1])
    end)

    it("makes a shape's function once for every instance", function()
        qjson._reset_shapes()
        local text = '{"shared":["by",1,"instance"]}'
        assert.same({ "by", 1, "instance" }, qjson.decode(text, EAGER).shared)
        local compile, made = shapes.compile, 0
        shapes.compile = function(...)
            made = made + 1
            return compile(...)
        end
        local ok, err = pcall(function()
            for _, q in ipairs({ qjson.new(), require("qjson.safe").new(), qjson }) do
                assert.same({ "by", 2, "instance" },
                            q.decode('{"shared":["by",2,"instance"]}', EAGER).shared)
            end
            assert.equal(0, made)
            -- A new shape is made once, whichever instance meets it.
            qjson.new().decode('{"other":1}', EAGER)
            qjson.decode('{"other":2}', EAGER)
            assert.equal(1, made)
        end)
        shapes.compile = compile
        assert(ok, err)
    end)

    it("gives a decode that a finalizer starts while another builds the C API path", function()
        local text = '{"a":"' .. string.rep("s", 40) .. '","list":["x","y","z","w"],'
                     .. '"o":{"b":"\\u00e9\\t","c":[1,2,"q"]}}'
        local inner, seen = '{"inner":["one","two",3]}', 0
        local expected = via_c_api(text)
        local function garbage()
            for _ = 1, 20 do
                local u = newproxy(true)
                getmetatable(u).__gc = function()
                    local v = qjson.decode(inner, EAGER)
                    if v.inner[2] == "two" and v.inner[3] == 3 then seen = seen + 1 end
                end
            end
        end
        local saved = collectgarbage("setstepmul", 1000)
        for i = 1, 2000 do
            if i % 10 == 0 then garbage() end
            assert(identical(qjson.decode(text, EAGER), expected))
        end
        collectgarbage("setstepmul", saved)
        collectgarbage()
        assert.is_true(seen > 0)
    end)

    it("gives a decode that a hook starts while another builds the C API path", function()
        -- A count hook re-enters at every k-th VM instruction of a decode
        -- by shape, between the native call and the end of the build
        -- (and while the shape's function is made, the first time):
        -- the inner decodes must not take the out-cell the outer reads.
        local outer = '{"a":"main value \\u00e9","n":42,"list":[{"b":"first\\t"},'
                      .. '{"b":"second\\t"}],"obj":{"p":1,"q":"\\u0051","r":[true,false,null]}}'
        local inner = '{"list":[1,2,3],"k":{"a":"\\u00e9","b":[{"c":"\\t"}]}}'
        local want_outer, want_inner = via_c_api(outer), via_c_api(inner)
        local wrong, nested = 0, 0
        local was_on = jit.status()
        jit.off()
        for k = 1, 40 do
            qjson._reset_shapes()
            for _ = 1, 2 do
                debug.sethook(function()
                    if not qffi.idle() then
                        nested = nested + 1
                        if not identical(qjson.decode(inner, EAGER), want_inner) then
                            wrong = wrong + 1
                        end
                    end
                end, "", k)
                local ok, v = pcall(qjson.decode, outer, EAGER)
                debug.sethook()
                if not (ok and identical(v, want_outer)) then wrong = wrong + 1 end
            end
        end
        if was_on then jit.on() end
        assert.equal(0, wrong)
        assert.is_true(nested > 100, "nothing ran inside a decode: the test proves nothing")
    end)

    it("writes a function per shape from the shape's bytes", function()
        local source = shapes.source('{k\1ask\1b[nz]k\0[]}', false)
        assert.truthy(source:find('["\\097"]=fs(s[0],l[0])', 1, true))
        assert.truthy(source:find('["\\098"]={n[0],null}', 1, true))
        assert.truthy(source:find('[""]=setmt({},emt)', 1, true))
        assert.truthy(shapes.source("[[]]", true):find("setmt({setmt({},amt)},amt)", 1, true))
        assert.has_error(function() shapes.source("{k\1as", false) end)
    end)
end)
