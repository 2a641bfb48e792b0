-- Under a LuaJIT built with Lua 5.2 compatibility (OpenResty's), the
-- length operator and pairs/ipairs honour __len, __pairs and __ipairs, so
-- `#t`, `pairs(t)` and `ipairs(t)` on a proxy must give what qjson.len,
-- qjson.pairs and qjson.ipairs give. make test runs every spec under such
-- a LuaJIT too (tools/luajit52.sh); under Debian's, these are pending.

local qjson = require("qjson")
local proxy_info = require("qjson.lazy").proxy_info

local COMPAT52 = #setmetatable({}, { __len = function() return 1 end }) == 1

-- The (key, value) pairs an iterator triple yields, in order.
local function collect(f, s, var)
    local out = {}
    for k, v in f, s, var do
        out[#out + 1] = { k, v }
    end
    return out
end

local TEXTS = {
    '{"model":"gpt-4o","n":2,"model":"gpt-4.1","messages":[{"role":"user"},{"role":"tool"}]}',
    '[1,"two",null,{"x":[]},[3,4],false]',
    '{}',
    '[]',
    '{"a":{"b":{"c":[1,2,3]}},"z":0}',
    -- Without a '[' (proxies without __ipairs, see lua/qjson/lazy.lua),
    -- with one only inside a string, and after whitespace.
    '{"a":{"b":{"c":1}},"z":0}',
    '{"a":{"b":"[1,2]"},"z":0}',
    ' \n\t{"a":{"b":true}}',
    '\r\n [1,{"a":2}] ',
}

-- Every proxy in `t`, depth first.
local function proxies(t, out)
    out = out or {}
    if type(t) == "table" then
        out[#out + 1] = t
        for _, v in qjson.pairs(t) do
            proxies(v, out)
        end
    end
    return out
end

-- `#` as on the plain tables of the same text and changes: qjson.len for
-- an array or a plain table; for an object proxy, whose keys qjson.len
-- counts, a border of its integer keys, as on cjson's table.
local function assert_same_views(t, label)
    local _, code = proxy_info(t)
    if not code or code < 0 then
        assert.equal(qjson.len(t), #t, label)
    else
        assert.equal(#qjson.materialize(t), #t, label)
    end
    assert.same(collect(qjson.pairs(t)), collect(pairs(t)), label)
    assert.same(collect(qjson.ipairs(t)), collect(ipairs(t)), label)
end

describe("with Lua 5.2 compatibility", function()
    if not COMPAT52 then
        it("#, pairs and ipairs of proxies (needs LuaJIT built with LUA52COMPAT)", function()
            pending("this LuaJIT has no Lua 5.2 compatibility; make test runs this spec "
                    .. "again under one that has (tools/luajit52.sh)")
        end)
        return
    end

    it("#, pairs and ipairs of proxies agree with qjson.len, qjson.pairs, qjson.ipairs", function()
        for _, s in ipairs(TEXTS) do
            for n, t in ipairs(proxies(qjson.decode(s))) do
                assert_same_views(t, s .. " #" .. n)
            end
        end
    end)

    it("and still agree after writes, deletions and appends", function()
        local t = qjson.decode(TEXTS[1])
        t.model = nil
        t.extra = { 1, 2 }
        t.n = 3
        local m = t.messages
        m[#m + 1] = { role = "assistant" }
        m[1] = nil
        assert_same_views(t, "object")
        assert_same_views(m, "array")
        local a = qjson.decode(TEXTS[2])
        a[#a] = nil
        a[#a + 1] = "end"
        assert_same_views(a, "array after changes")
        assert.equal(6, #a)
        -- Integer keys written to an object of a text without arrays.
        local o = qjson.decode(TEXTS[6])
        o[1], o[2] = "one", "two"
        o.a[1] = true
        assert_same_views(o, "object with integer keys")
        assert_same_views(o.a, "nested object with integer keys")
        assert.same({}, collect(ipairs(o)))
    end)

    it("# of an object is 0, as of cjson's table, or a border of integer keys written", function()
        local t = qjson.decode('{"a":1,"b":[1,2],"1":"x"}')
        assert.equal(0, #t)
        assert.equal(3, qjson.len(t))
        t[1], t[2], t[3] = "one", "two", "three"
        assert.equal(3, #t)
        t[2] = nil
        -- A border, as Lua's `#` gives one: t[n] set and t[n + 1] not.
        local n = #t
        assert.is_true((n == 0 or t[n] ~= nil) and t[n + 1] == nil, n)
        local wide = qjson.decode('{"k":0}')
        for i = 1, 1000 do
            wide[i] = i
        end
        assert.equal(1000, #wide)
        assert.equal(0, #qjson.decode('{"a":{"b":1}}').a)
    end)

    it("on plain tables, eager decode and materialize as on any table", function()
        local plain = qjson.decode(TEXTS[2], { lazy = false })
        assert_same_views(plain, "eager")
        assert_same_views(qjson.materialize(qjson.decode(TEXTS[5])), "materialized")
    end)
end)
