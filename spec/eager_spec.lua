-- qjson.decode(text, { lazy = false }) builds its tables natively, through
-- the Lua C API (src/lua_api/eager.rs), and falls back to the FFI builder
-- (the one qjson.materialize uses for all but small sources) where that
-- path cannot go. The two must be indistinguishable: same values, same
-- errors.

local qjson = require("qjson")
local qffi = require("qjson.ffi")
local lazy = require("qjson.lazy")
local helper = require("helper")
local gen = require("gen")

local EAGER = { lazy = false }
local DATA = helper.data_dir()
local c_decode = qffi.c_decode

-- The FFI builder's value for a text (raises like qjson.decode): the
-- parsed document built in Lua, as qjson.materialize builds a large
-- unchanged proxy (a small one it builds through the C API too).
local function via_ffi(s, opts)
    local t = qjson.decode(s, opts)
    if not lazy.is_proxy(t) then
        return t
    end
    return helper.tape_of(t)
end

local function same(a, b)
    local ok, where = gen.deep_equal(a, b)
    return ok, where
end

local function files(dir, pattern)
    local list = {}
    for _, name in ipairs(helper.list(DATA .. "/" .. dir)) do
        if name:match(pattern) then
            list[#list + 1] = { name = name, text = helper.read(DATA .. "/" .. dir .. "/" .. name) }
        end
    end
    return list
end

local function nested(n)
    return string.rep("[", n) .. "1" .. string.rep("]", n)
end

describe("eager decode through the Lua C API", function()
    it("is the path this LuaJIT takes", function()
        assert.is_function(c_decode)
    end)

    it("builds what the FFI builder builds, for the corpus and every y_ file", function()
        local checked = 0
        for _, f in ipairs(files("corpus", "%.json$")) do
            assert(same(qjson.decode(f.text, EAGER), via_ffi(f.text)), f.name)
            checked = checked + 1
        end
        for _, f in ipairs(files("jsontestsuite", "^y_.*%.json$")) do
            local ok, where = same(qjson.decode(f.text, EAGER), via_ffi(f.text))
            assert(ok, f.name .. ": " .. tostring(where))
            checked = checked + 1
        end
        assert.is_true(checked >= 98)
    end)

    it("rejects every n_ file with qjson.parse's message", function()
        local checked = 0
        for _, f in ipairs(files("jsontestsuite", "^n_.*%.json$")) do
            local ok_parse, parse_err = pcall(qjson.parse, f.text)
            local ok_eager, eager_err = pcall(qjson.decode, f.text, EAGER)
            assert.is_false(ok_parse, f.name)
            assert.is_false(ok_eager, f.name)
            assert.equal(parse_err, eager_err, f.name)
            checked = checked + 1
        end
        assert.is_true(checked >= 180)
    end)

    it("keeps null, empty arrays, escapes and NUL bytes", function()
        local t = qjson.decode('{"a":null,"e":[],"o":{},"s":"x\\u0000y\\n\\u00e9",'
                               .. '"n":[-0,1e400,2.5],"b":[true,false]}', EAGER)
        assert.equal(qjson.null, t.a)
        assert.equal(qjson.empty_array_mt, getmetatable(t.e))
        assert.equal("[]", qjson.encode(t.e))
        assert.is_nil(next(t.o))
        assert.equal("x\0y\n\xc3\xa9", t.s)
        assert.equal(math.huge, t.n[2])
        assert.equal(-math.huge, 1 / t.n[1])
        assert.same({ true, false }, t.b)
        -- Scalar roots.
        assert.equal("s", qjson.decode('"s"', EAGER))
        assert.equal(qjson.null, qjson.decode("null", EAGER))
        assert.is_false(qjson.decode(" false ", EAGER))
        assert.equal(7, qjson.decode("7", EAGER))
    end)

    it("applies max_depth and duplicate_keys as parse does", function()
        local s = nested(6)
        assert.has_error(function() qjson.decode(s, { lazy = false, max_depth = 5 }) end,
                         "qjson: nesting too deep at byte 5")
        assert.equal(1, qjson.decode(s, { lazy = false, max_depth = 6 })[1][1][1][1][1][1])
        local dup = '{"a":1,"a":2}'
        assert.equal(2, qjson.decode(dup, EAGER).a)
        local strict = { lazy = false, duplicate_keys = "error" }
        assert.has_error(function() qjson.decode(dup, strict) end,
                         select(2, pcall(qjson.parse, dup, { duplicate_keys = "error" })))
    end)

    it("reads long texts and containers as the FFI builder does, errors as parse", function()
        -- Containers longer than a chunk of 64 values (src/eager), keys
        -- repeated across chunks, errors far into the text.
        local parts = {}
        for i = 1, 6000 do
            parts[i] = ('{"k\\u00e9%d":[%d.5e-1,"\\"x\\u00e9 %s",true,null],"e":[]}')
                :format(i, i, string.rep("y", i % 97))
        end
        local text = "[" .. table.concat(parts, ",") .. "]"
        assert.is_true(#text > 4 * 65536)
        assert(same(qjson.decode(text, EAGER), via_ffi(text)))
        local function same_error(s, opts)
            local ok_parse, parse_err = pcall(qjson.parse, s, opts)
            local eager_opts = { lazy = false }
            for k, v in pairs(opts or {}) do eager_opts[k] = v end
            local ok_eager, eager_err = pcall(qjson.decode, s, eager_opts)
            assert.is_false(ok_parse)
            assert.is_false(ok_eager)
            assert.equal(parse_err, eager_err)
        end
        local n = #text
        same_error(text:sub(1, n - 1))                              -- unclosed root
        local comma = text:find("},", 200000, true) + 1               -- far in
        same_error(text:sub(1, comma) .. "x" .. text:sub(comma + 1))
        -- A grammar error near the start, bad UTF-8 later: parse reports
        -- stage 1's error, and so does eager decode.
        same_error(text:sub(1, 3) .. "]" .. text:sub(4, 150000) .. "\255" .. text:sub(150001))
        same_error(text:sub(1, n - 1) .. ',{"a":1,"a":2}]', { duplicate_keys = "error" })
        -- Under the strict policy a key may repeat one of an earlier chunk.
        local members = {}
        for i = 1, 70 do members[i] = ('"k%d":%d'):format(i, i) end
        same_error("{" .. table.concat(members, ",") .. ',"k1":0}', { duplicate_keys = "error" })
        local strict = qjson.decode("{" .. table.concat(members, ",") .. "}",
                                    { lazy = false, duplicate_keys = "error" })
        local keys = 0
        for k, v in pairs(strict) do
            keys = keys + 1
            assert.equal("k" .. v, k)
        end
        assert.equal(70, keys)
        assert.equal(2, qjson.decode(text:sub(1, n - 1) .. ',{"a":1,"a":2}]', EAGER)[6001].a)
    end)

    it("takes { lazy = false } alone at the defaults, and checks any other options", function()
        -- The usual table skips the option checks (two `next` calls):
        -- the process defaults still apply, other tables are checked.
        finally(function()
            qjson.decode_max_depth(1000)
            qjson.duplicate_keys("last")
        end)
        qjson.decode_max_depth(2)
        assert.has_error(function() qjson.decode("[[[1]]]", EAGER) end,
                         "qjson: nesting too deep at byte 2")
        assert.equal(1, qjson.decode("[[[1]]]", { lazy = false, max_depth = 3 })[1][1][1])
        qjson.decode_max_depth(1000)
        qjson.duplicate_keys("error")
        assert.has_error(function() qjson.decode('{"a":1,"a":2}', EAGER) end,
                         'qjson: duplicate key "a" at byte 7')
        qjson.duplicate_keys("last")
        local ok, err = pcall(qjson.decode, "[]", { lazy = false, max_dpeth = 3 })
        assert.is_false(ok)
        assert.matches("unknown option 'max_dpeth'", err)
        ok, err = pcall(qjson.decode, "[]", { lazy = false, max_depth = 0 })
        assert.is_false(ok)
        assert.matches("max_depth must be an integer", err)
    end)

    it("tells options beside lazy without table.nkeys too", function()
        -- lua/qjson.lua counts the options with OpenResty's table.nkeys
        -- where LuaJIT has it, with `next` elsewhere: load it without.
        local saved_qjson, saved_nkeys = package.loaded.qjson, package.loaded["table.nkeys"]
        package.loaded.qjson, package.loaded["table.nkeys"] = nil, nil
        package.preload["table.nkeys"] = function() error("no table.nkeys") end
        local ok, plain = pcall(require, "qjson")
        package.preload["table.nkeys"] = nil
        package.loaded.qjson, package.loaded["table.nkeys"] = saved_qjson, saved_nkeys
        assert(ok, plain)
        assert.equal(2, plain.decode('{"a":[1,2]}', EAGER).a[2])
        assert.has_error(function() plain.decode("[]", { lazy = false, max_dpeth = 3 }) end)
        assert.has_error(function() plain.decode("[[1]]", { lazy = false, max_depth = 1 }) end)
    end)

    it("leaves nesting deeper than the Lua stack to the FFI builder", function()
        local deep = nested(20000)
        local function native(s)
            return c_decode(s, 100000, 0, qjson.null, qjson.empty_array_mt)
        end
        assert.is_nil(select(2, native(deep)))
        local t = qjson.decode(deep, { lazy = false, max_depth = 100000 })
        local depth = 0
        while type(t) == "table" do
            t, depth = t[1], depth + 1
        end
        assert.same({ 20000, 1 }, { depth, t })
        -- Within the stack it builds the whole thing itself.
        assert.is_table(native(nested(3000)))
    end)

    it("decodes a byte range of a text, and gives up on one that is not a value", function()
        -- (qjson.materialize's way: an unchanged proxy's source span.)
        local text = '{"a":[1,2],"b":"x"}'
        local function part(from, to)
            return c_decode(text, 1000, 0, qjson.null, qjson.empty_array_mt, nil, from, to)
        end
        assert.same({ 1, 2 }, part(5, 10))
        assert.equal("x", part(15, 18))
        -- Not a valid text, out of the text, or not whole offsets: nil
        -- alone (the FFI path takes over), never an error message.
        for _, range in ipairs({ { 5, 8 }, { 5, 100 }, { -1, 4 }, { 6, 5 }, { 5.5, 10 } }) do
            local where = range[1] .. ", " .. range[2]
            assert.same({ 1, nil }, { select("#", part(range[1], range[2])),
                                      (part(range[1], range[2])) }, where)
        end
        -- The same part as a whole text: its own message.
        assert.equal(2, select("#", c_decode("[1,", 1000, 0, qjson.null, qjson.empty_array_mt)))
    end)

    it("holds a full chunk at every level within the stack it asks for", function()
        -- Each container asks for room for a chunk of values when it opens
        -- (src/lua_api/eager.rs): here every level holds 63 members and
        -- the 64th opens the next, 60 levels deep, then the same in arrays;
        -- in a new coroutine, whose stack starts small. (LuaJIT's pushes
        -- grow the stack themselves, so a short reservation shows only
        -- under PUC Lua's API checks; the values are checked here.)
        local function wide(depth, object)
            local parts = {}
            for i = 1, 63 do
                parts[i] = object and ('"k%d":"v%d"'):format(i, i) or ('"v%d"'):format(i)
            end
            local open = object and '{' .. table.concat(parts, ",") .. ',"next":'
                or '[' .. table.concat(parts, ",") .. ','
            local close = object and '}' or ']'
            return string.rep(open, depth) .. "1" .. string.rep(close, depth)
        end
        for _, object in ipairs({ true, false }) do
            local text = wide(60, object)
            -- (A Lua function: nginx's coroutine.wrap takes no C function.)
            local t = coroutine.wrap(function(...) return c_decode(...) end)(
                text, 1000, 0, qjson.null, qjson.empty_array_mt)
            assert.is_table(t)
            assert(same(t, via_ffi(text)))
        end
    end)

    it("survives finalizers that decode while it builds", function()
        -- Garbage with finalizers that decode eagerly: the collector runs
        -- them from allocations inside the native build.
        local text = '{"k":[' .. string.rep('"a string to allocate",', 2000) .. '"end"]}'
        local inner, seen = '{"inner":[1,2,3]}', 0
        local function garbage()
            for _ = 1, 50 do
                local u = newproxy(true)
                getmetatable(u).__gc = function()
                    local v = qjson.decode(inner, EAGER)
                    if v.inner[3] == 3 then seen = seen + 1 end
                end
            end
        end
        for _ = 1, 40 do
            garbage()
            local t = qjson.decode(text, EAGER)
            assert.equal(2001, #t.k)
            assert.equal("end", t.k[2001])
        end
        collectgarbage()
        assert.is_true(seen > 0)
    end)
end)
