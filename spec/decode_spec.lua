-- qjson.decode: lazy proxies, their reads, writes and iteration, and
-- qjson.encode's passthrough of what was not changed.

local qjson = require("qjson")
local safe = require("qjson.safe")
local cjson = require("cjson")
local lazy = require("qjson.lazy")
local qffi = require("qjson.ffi")
local gen = require("gen")
local helper = require("helper")
-- (qjson.materialize passes its config's array metatable; this takes it.)
local materialize = require("qjson.materialize")

local CHAT = [[{
  "model": "gpt-4o",
  "temperature": 0.7,
  "stream": false,
  "tool_choice": null,
  "usage": { "total_tokens": 9007199254740993 },
  "messages": [
    { "role": "system", "content": [ { "type": "text", "text": "be brief" } ] },
    { "role": "user", "content": [ { "type": "text", "text": "caf\u00e9" } ] }
  ]
}]]

local function keys_of(t)
    local out = {}
    for k in qjson.pairs(t) do
        out[#out + 1] = k
    end
    return out
end

describe("qjson.decode", function()
    describe("reads", function()
        it("gives tables for containers and Lua values for scalars", function()
            local t = qjson.decode(CHAT)
            assert.equal("table", type(t))
            assert.equal("gpt-4o", t.model)
            assert.equal(0.7, t.temperature)
            assert.is_false(t.stream)
            assert.equal(qjson.null, t.tool_choice)
            assert.equal(cjson.null, t.tool_choice)
            assert.equal("caf\xc3\xa9", t.messages[2].content[1].text)
            assert.is_nil(t.missing)
            assert.is_nil(t.messages[3])
            assert.is_nil(t.messages[0])
            assert.is_nil(t.messages.x)
            assert.is_nil(t[1])
        end)
        -- Each number is the double nearest its spelling in every form
        -- of decode, as upstream lua-cjson's strtod gives it: OpenResty's
        -- fork reads an integer spelling with strtoll, so it gives 0 for
        -- -0 and clamps one beyond int64 to 2^63 (README, "Coming from
        -- lua-cjson").
        it("reads -0 and integers beyond int64 as their nearest doubles", function()
            local text = "[-0,18446744073709551615,-123456789012345678901234567890,1e2]"
            local want = { -0.0, 2 ^ 64, -1.2345678901234568e+29, 100 }
            local forms = {
                qjson.decode(text),
                qjson.materialize(qjson.decode(text)),
                qjson.decode(text, { lazy = false }),
            }
            for _, got in ipairs(forms) do
                for i, v in ipairs(want) do
                    assert.equal(v, got[i])
                end
                assert.equal(-math.huge, 1 / got[1])
            end
            assert.equal(-math.huge, 1 / qjson.parse(text):get_f64("[0]"))
        end)
        it("caches nested proxies", function()
            local t = qjson.decode(CHAT)
            assert.equal(t.messages, t.messages)
            assert.equal(t.messages[1], t.messages[1])
        end)
        -- The first container proxy sits in the state, the others in its
        -- registry (lua/qjson/lazy.lua): each keeps its own identity and code
        -- in small and large texts, and in any order of first reads.
        it("keeps every container proxy's identity and place", function()
            for _, pad in ipairs({ "", string.rep(" ", 200) }) do
                for _, order in ipairs({ { 1, 2, 3, 4 }, { 4, 3, 2, 1 }, { 2, 4, 1, 3 } }) do
                    local t = qjson.decode('{"a":{"x":1},"b":[2],"c":{"d":[3]}}' .. pad)
                    local get = {
                        function() return t.a end,
                        function() return t.b end,
                        function() return t.c end,
                        function() return t.c.d end,
                    }
                    local seen = {}
                    for _, i in ipairs(order) do seen[i] = get[i]() end
                    for i = 1, 4 do assert.equal(seen[i], get[i]()) end
                    assert.equal(1, t.a.x)
                    assert.equal(2, t.b[1])
                    assert.equal(3, t.c.d[1])
                    assert.is_true(lazy.is_array(t.b) and lazy.is_array(t.c.d))
                    assert.is_false(lazy.is_array(t.a) or lazy.is_array(t.c))
                    t.c.d[2] = 4
                    t.a.y = 5
                    assert.same({ a = { x = 1, y = 5 }, b = { 2 }, c = { d = { 3, 4 } } },
                                cjson.decode(qjson.encode(t)))
                end
            end
        end)
        -- Past a few proxies the registry moves to larger tables, again and
        -- again as a handler makes more (lua/qjson/lazy.lua, "The
        -- registry"): every proxy made before a move keeps its identity,
        -- its code and its writes, in a small text and a large one.
        it("keeps identity, place and writes of proxies across the registry's growth", function()
            local small = "[" .. string.rep("[],", 39) .. "[]]"
            assert.is_true(#small < 128)
            local parts = {}
            for i = 1, 300 do
                parts[i] = '{"id":' .. i .. ',"content":[{"text":"m' .. i .. '"}]}'
            end
            local large = "[" .. table.concat(parts, ",") .. "]"
            for _, text in ipairs({ small, large }) do
                local t = qjson.decode(text)
                local n = qjson.len(t)
                local order = {}
                for i = 1, n do order[i] = (i * 37) % n + 1 end
                local kept = {}
                for _, i in ipairs(order) do kept[i] = t[i] end
                local inner = {}
                if text == large then
                    for i = n, 1, -1 do inner[i] = t[i].content[1] end
                end
                local expect = cjson.decode(text)
                for i = 1, n do
                    assert.equal(kept[i], t[i])
                    if text == large then
                        assert.equal(inner[i], t[i].content[1])
                        assert.equal(i, kept[i].id)
                        assert.equal("m" .. i, inner[i].text)
                        if i % 7 == 0 then
                            inner[i].text = "w" .. i
                            expect[i].content[1].text = "w" .. i
                        end
                    elseif i % 7 == 0 then
                        kept[i][1] = i
                        expect[i][1] = i
                    end
                end
                assert.same(expect, cjson.decode(qjson.encode(t)))
            end
        end)
        -- Once moved, the registry holds its proxies weakly (lua/qjson/
        -- lazy.lua, "The registry"): a proxy nothing else holds is
        -- collected, while a held one keeps its identity and a written one
        -- its writes, through collections and moves that find the registry
        -- (next to) empty.
        it("lets the collector take proxies nothing holds, and only those", function()
            local parts = {}
            for i = 1, 500 do
                parts[i] = '{"id":' .. i .. ',"content":[{"text":"m' .. i .. '"}]}'
            end
            local t = qjson.decode("[" .. table.concat(parts, ",") .. "]")
            local held, written = t[3].content, t[400]
            written.id = -400
            t[7].content[1].text = "w7"
            local dropped = setmetatable({}, { __mode = "k" })
            for round = 1, 3 do
                for i = 1, 500 do
                    dropped[t[i].content[1]] = true
                end
                collectgarbage()
                collectgarbage()
                assert.equal(held, t[3].content, "round " .. round)
                assert.equal(written, t[400])
                assert.equal(-400, t[400].id)
                assert.equal("w7", t[7].content[1].text)
                assert.equal("m8", t[8].content[1].text)
            end
            -- Of the 1 500 inner proxies made, the one with a write is left.
            local left = 0
            for _ in pairs(dropped) do left = left + 1 end
            assert.equal(1, left)
            local expect = cjson.decode(table.concat({ "[", table.concat(parts, ","), "]" }))
            expect[400].id, expect[7].content[1].text = -400, "w7"
            assert.same(expect, cjson.decode(qjson.encode(t)))
        end)
        it("decodes a scalar root to the scalar", function()
            assert.equal(5, qjson.decode(" 5 "))
            assert.equal("s", qjson.decode('"s"'))
            assert.is_false(qjson.decode("false"))
            assert.equal(qjson.null, qjson.decode("null"))
        end)
        it("validates like qjson.parse and raises the same errors", function()
            local ok, err = pcall(qjson.decode, '{"a":1,}')
            assert.is_false(ok)
            assert.equal("qjson: unexpected character '}' at byte 7, expected a string key", err)
            local v, e = safe.decode("[1,")
            assert.is_nil(v)
            assert.matches("^qjson: unexpected end of input at byte 3", e)
            assert.has_error(function() qjson.decode(nil) end,
                             "bad argument #1 to 'decode' (string expected, got nil)")
            assert.has_error(function() qjson.decode("1", { lazy = 1 }) end,
                             "qjson: lazy must be a boolean")
        end)
        it("exposes no internal state through the table", function()
            local t = qjson.decode('{"_doc":1,"__index":2,"cache":3,"_cur":4,"set":5}')
            assert.equal(1, t._doc)
            assert.equal(2, t.__index)
            assert.equal(3, t.cache)
            assert.equal(4, t._cur)
            assert.is_nil(next(t))
            assert.is_nil(rawget(t, "_doc"))
            t._doc = "mine"
            assert.equal("mine", t._doc)
            assert.equal('{"_doc":"mine","__index":2,"cache":3,"_cur":4,"set":5}',
                         qjson.encode(t))
        end)
        it("iterates in document order, last duplicate winning", function()
            local t = qjson.decode('{"b":1,"a":2,"mod\\u0065l":"x","b":3}')
            assert.same({ "a", "model", "b" }, keys_of(t))
            assert.equal(3, t.b)
            assert.equal(3, qjson.len(t))
            local n = 0
            for i, v in qjson.ipairs(qjson.decode("[10,20,30]")) do
                n = n + 1
                assert.equal(i * 10, v)
            end
            assert.equal(3, n)
        end)
        it("rejects duplicates under duplicate_keys = \"error\"", function()
            local v, err = safe.decode('{"a":1,"a":2}', { duplicate_keys = "error" })
            assert.is_nil(v)
            assert.equal('qjson: duplicate key "a" at byte 7', err)
        end)
    end)

    describe("writes", function()
        it("replace, add and delete at any depth", function()
            local t = qjson.decode(CHAT)
            t.model = "gpt-4o-mini"
            t.messages[2].content[1].text = "tea"
            t.seed = 42
            t.stream = nil
            assert.equal("gpt-4o-mini", t.model)
            assert.equal("tea", t.messages[2].content[1].text)
            assert.equal(42, t.seed)
            assert.is_nil(t.stream)
            assert.same({ "model", "temperature", "tool_choice", "usage", "messages", "seed" },
                        keys_of(t))
            local out = qjson.encode(t)
            local back = cjson.decode(out)
            assert.equal("gpt-4o-mini", back.model)
            assert.equal("tea", back.messages[2].content[1].text)
            assert.equal(42, back.seed)
            assert.is_nil(back.stream)
            -- Untouched values keep their exact spelling.
            assert.truthy(out:find('"usage": { "total_tokens": 9007199254740993 }', 1, true))
            assert.truthy(out:find('{ "type": "text", "text": "be brief" }', 1, true))
        end)
        -- The first changed proxy other than the root keeps its record alone
        -- in the state, the next ones turn that into a table of records
        -- (lua/qjson/lazy.lua): every step reads and encodes what was written.
        it("keeps every changed container's writes, one after another", function()
            local text = '{"a":{"x":1},"b":[1,2],"c":{"y":{"z":3}},"r":0}'
            local expected = cjson.decode(text)
            local t = qjson.decode(text)
            local steps = {
                function(v) v.a.x = 10 end,
                function(v) v.b[3] = 30 end,
                function(v) v.r = "root" end,
                function(v) v.c.y.z = nil end,
                function(v) v.a.w = true end,
                function(v) v.b[3] = nil end,
            }
            for i, step in ipairs(steps) do
                step(t)
                step(expected)
                assert.same(expected, cjson.decode(qjson.encode(t)), "step " .. i)
                assert.same(expected, qjson.materialize(t), "step " .. i)
            end
            assert.equal(10, t.a.x)
            assert.is_nil(t.b[3])
            assert.is_nil(t.c.y.z)
        end)
        -- A change record keeps its own fields in slots 1..8 and an
        -- object's values for string keys as its own keys
        -- (lua/qjson/lazy.lua): keys that are not strings, small numbers
        -- first, must stay apart from both.
        it("keeps writes to keys that are not strings apart", function()
            local text = '{"a":1,"b":{"c":2}}'
            local t = qjson.decode(text)
            local expected = cjson.decode(text)
            for i = 1, 12 do
                t[i] = "n" .. i
                expected[i] = "n" .. i
            end
            t[0.5], expected[0.5] = "half", "half"
            t.b[3], expected.b[3] = 3, 3
            t[true] = "yes"
            for i = 1, 12 do assert.equal("n" .. i, t[i]) end
            assert.equal("half", t[0.5])
            assert.equal("yes", t[true])
            assert.equal(1, t.a)
            assert.equal(3, t.b[3])
            assert.equal(16, qjson.len(t))
            -- (cjson refuses a boolean key too.)
            assert.has_error(function() qjson.encode(t) end,
                             "Cannot serialise boolean: table key must be a number or string")
            t[true] = nil
            assert.same(cjson.decode(cjson.encode(expected)), cjson.decode(qjson.encode(t)))
            assert.same(expected, qjson.materialize(t))
            for i = 1, 12 do t[i] = nil end
            t[0.5], t.b[3] = nil, nil
            assert.equal(text, qjson.encode(t))
        end)
        it("deleting a duplicated key removes every occurrence", function()
            local t = qjson.decode('{"model":"a","x":1,"model":"b"}')
            t.model = nil
            assert.equal('{"x":1}', qjson.encode(t))
            t = qjson.decode('{"model":"a","x":1,"model":"b"}')
            t.model = "c"
            assert.equal('{"x":1,"model":"c"}', qjson.encode(t))
        end)
        -- A change record learns whether a written key repeats from the
        -- lookup that finds it (qjson_raw_key): exactly for an object of
        -- up to 16 members, and for a larger one searched through its
        -- table, whether any of its keys repeats.
        it("replaces a key that does not repeat beside keys that do", function()
            local t = qjson.decode('{"x":1,"model":"a","x":2}')
            t.model = "b"
            assert.equal('{"x":1,"model":"b","x":2}', qjson.encode(t))
            local keys = {}
            for i = 1, 20 do keys[i] = '"k' .. i .. '":' .. i end
            local text = "{" .. table.concat(keys, ",") .. ',"k1":0}'
            for _, searches in ipairs({ 0, 50 }) do
                t = qjson.decode(text)
                -- Enough reads of the object that it gets its table.
                for _ = 1, searches do assert.equal(7, t.k7) end
                t.k2 = "two"
                t.k1 = "one"
                local expect = text:gsub('"k2":2', '"k2":"two"'):gsub('"k1":1,', '')
                                   :gsub('"k1":0', '"k1":"one"')
                assert.equal(expect, qjson.encode(t))
                t = qjson.decode(text)
                for _ = 1, searches do assert.equal(7, t.k7) end
                t.k3 = 33
                assert.equal((text:gsub('"k3":3', '"k3":33')), qjson.encode(t))
            end
        end)
        it("appends to arrays and shortens them", function()
            local t = qjson.decode('{"a": [1, 2]}')
            t.a[3] = { k = true }
            assert.equal('{"a": [1, 2,{"k":true}]}', qjson.encode(t))
            t.a[3] = nil
            t.a[2] = nil
            assert.equal('{"a": [1]}', qjson.encode(t))
            assert.equal(1, qjson.len(t.a))
            assert.has_error(function() t.a[5] = 1 end)
        end)
        it("accepts plain tables and other proxies as values", function()
            local t = qjson.decode('{"a":{"x":1},"b":[true]}')
            local other = qjson.decode('{"o": "from another document"}')
            t.a = other
            t.b[1] = { 1, 2 }
            assert.equal('{"a":{"o": "from another document"},"b":[[1,2]]}', qjson.encode(t))
        end)
        -- A document whose only change is one key of one object is
        -- written straight from its change record (lua/qjson/encode.lua,
        -- put_one_key): the same text as through the document's edits.
        it("splice one replaced or added key as they splice any change", function()
            local text = ' {"a": 1, "b" : [1, {"c": 2}], "d": "x"} '
            local cases = {
                { function(t) t.a = "s" end, ' {"a": "s", "b" : [1, {"c": 2}], "d": "x"} ' },
                { function(t) t.d = { 1, 2 } end, ' {"a": 1, "b" : [1, {"c": 2}], "d": [1,2]} ' },
                { function(t) t.a = t.b end,
                  ' {"a": [1, {"c": 2}], "b" : [1, {"c": 2}], "d": "x"} ' },
                { function(t) t.a = qjson.decode('{"o" : true}') end,
                  ' {"a": {"o" : true}, "b" : [1, {"c": 2}], "d": "x"} ' },
                { function(t) t.b = 5; t.b = qjson.null end,
                  ' {"a": 1, "b" : null, "d": "x"} ' },
                -- One member of an object inside: its record alone.
                { function(t) t.b[2].c = { k = {} } end,
                  ' {"a": 1, "b" : [1, {"c": {"k":{}}}], "d": "x"} ' },
                { function(t) t.b[2].c = qjson.decode('[ true ]') end,
                  ' {"a": 1, "b" : [1, {"c": [ true ]}], "d": "x"} ' },
                -- One key added, to the root or inside, then rewritten.
                { function(t) t.k = { 1 } end,
                  ' {"a": 1, "b" : [1, {"c": 2}], "d": "x","k":[1]} ' },
                { function(t) t.b[2].k = "v"; t.b[2].k = "w" end,
                  ' {"a": 1, "b" : [1, {"c": 2,"k":"w"}], "d": "x"} ' },
            }
            for i, case in ipairs(cases) do
                local t = qjson.decode(text)
                case[1](t)
                assert.equal(case[2], qjson.encode(t), "case " .. i)
                -- A second change elsewhere takes the edits' way.
                t.b2 = 0
                assert.equal(case[2]:gsub("} $", ',"b2":0} '), qjson.encode(t), "case " .. i)
            end
            -- Added keys go after the last member, before the whitespace
            -- that closes the object, or right after an empty one's '{'.
            local added = {
                { '{"a": 1 \n\t}', '{"a": 1,"k":2 \n\t}' },
                { ' { \r\n } ', ' {"k":2 \r\n } ' },
                { '{"o": { } ,"p":[]}', '{"o": {"k":2 } ,"p":[]}', "o" },
                { '{"o": {"x":{}}}', '{"o": {"x":{},"k":2}}', "o" },
                { '{"a":1,"a":2}', '{"a":1,"a":2,"k":2}' },
            }
            for i, case in ipairs(added) do
                local t = qjson.decode(case[1])
                local o = case[3] and t[case[3]] or t
                o.k = 2
                assert.equal(case[2], qjson.encode(t), "added " .. i)
                o.k = nil
                assert.equal(case[1], qjson.encode(t), "added and deleted " .. i)
            end
            local t = qjson.decode(text)
            t.a = t
            assert.has_error(function() qjson.encode(t) end,
                             "Cannot serialise, excessive nesting (1001)")
            -- The depth limit counts a nested member's value at its depth,
            -- with or without another change beside it.
            qjson.encode_max_depth(3)
            finally(function() qjson.encode_max_depth(1000) end)
            local results = {}
            for _, second in ipairs({ false, true }) do
                local d = qjson.decode(text)
                d.b[2].c = { 1 }
                if second then d.b2 = 0 end
                results[#results + 1] = { pcall(qjson.encode, d) }
                d = qjson.decode(text)
                d.b[2].k = { 1 }
                if second then d.b2 = 0 end
                results[#results + 1] = { pcall(qjson.encode, d) }
            end
            for i = 1, 4 do
                assert.same({ false, "Cannot serialise, excessive nesting (4)" }, results[i])
            end
        end)
    end)

    describe("encode passthrough", function()
        it("returns an untouched document's exact text", function()
            local t = qjson.decode(CHAT)
            local _ = t.messages[1].content
            assert.equal(CHAT, qjson.encode(t))
            assert.equal('{ "total_tokens": 9007199254740993 }', qjson.encode(t.usage))
        end)
        it("mixes plain tables and proxies", function()
            local t = qjson.decode('{"a" : [1,2]}')
            assert.equal('[{"a" : [1,2]},[1,2]]', qjson.encode({ t, t.a }))
        end)
    end)

    describe("memory", function()
        it("stays bounded when proxies of many documents are dropped", function()
            local function churn(n)
                for _ = 1, n do
                    local t = qjson.decode(CHAT)
                    local m = t.messages
                    for i = 1, qjson.len(m) do
                        local _ = m[i].content[1].text
                    end
                end
                collectgarbage()
                collectgarbage()
                collectgarbage()
                return collectgarbage("count")
            end
            local warm = churn(2000)
            -- Each decode makes 8 proxies: a leak of any of them would add
            -- megabytes here.
            assert.is_true(churn(20000) < warm + 1024)
        end)
        it("keeps the whitespace around the root of a changed document", function()
            local t = qjson.decode(' \n{"a":1}\n ')
            t.a = 2
            assert.equal(' \n{"a":2}\n ', qjson.encode(t))
        end)
    end)

    describe("materialize and eager decode", function()
        it("match cjson.decode", function()
            local t = qjson.materialize(qjson.decode(CHAT))
            assert.is_nil(getmetatable(t))
            assert.same(cjson.decode(CHAT), t)
            assert.same(cjson.decode(CHAT), qjson.decode(CHAT, { lazy = false }))
        end)
        it("mark empty arrays so they re-encode as []", function()
            local t = qjson.decode('{"a":[],"b":{}}', { lazy = false })
            assert.equal(qjson.empty_array_mt, getmetatable(t.a))
            assert.equal('[]', qjson.encode(t.a))
            assert.equal('{}', qjson.encode(t.b))
        end)
        it("apply changes made through proxies", function()
            local t = qjson.decode('{"a":[1,2],"b":{"c":1}}')
            t.b.c = 2
            t.a[3] = 3
            assert.same({ a = { 1, 2, 3 }, b = { c = 2 } }, qjson.materialize(t))
        end)
        it("build each unchanged proxy as the FFI builder does, small or large", function()
            -- A proxy whose source is under 1 KB is built from it by the
            -- native eager decoder, a larger one through the FFI (see
            -- lua/qjson/materialize.lua): the same tables either way, for
            -- the root and every container inside, with and without a
            -- metatable for every array, in the text's own nesting.
            local big = string.rep('{"k":[1,"x"]},', 120)
            local texts = {
                '{"order_id":"A-20931","options":{"history":true,"max_items":25}}',
                ' [ {"a":1,"a":2,"b":[[],{},[null,false]]}, "\\u00e9\\ud83d\\ude00\\n" ] ',
                '{"n":[-0,1e400,12345678901234567890,-9223372036854775808,0.1]}',
                '{"small":{"s":[1,2,3]},"large":[' .. big .. '{}],"after":{"z":"\\"q\\""}}',
                string.rep("[", 200) .. "1" .. string.rep("]", 200),
            }
            local array_mt = { __name = "spec arrays" }
            local checked, small, large = 0, 0, 0
            local native_before = materialize.native_builds()
            for _, text in ipairs(texts) do
                local root = qjson.decode(text)
                -- Every container, found by walking the proxies.
                local todo = { root }
                while #todo > 0 do
                    local p = table.remove(todo)
                    local st, code = lazy.proxy_info(p)
                    for _, arrays_mt in ipairs({ false, array_mt }) do
                        local got = materialize.materialize(p, arrays_mt or nil)
                        local want = helper.tape_of(p, arrays_mt or nil)
                        local ok, where = gen.identical(want, got)
                        assert(ok, text:sub(1, 40) .. ": " .. tostring(where))
                        checked = checked + 1
                    end
                    local from, to = lazy.source_span(st, lazy.live_ptr(st), lazy.cursor_of(code),
                                                      qffi.main)
                    if to - from < materialize.NATIVE_MAX_BYTES then
                        small = small + 1
                    else
                        large = large + 1
                    end
                    for _, child in qjson.pairs(p) do
                        if lazy.proxy_info(child) then todo[#todo + 1] = child end
                    end
                end
            end
            assert.is_true(checked > 400)
            assert.is_true(small > 200 and large >= 2)
            -- Each small one twice (with and without the metatable), save
            -- where the Lua stack is too shallow for the native build.
            if qffi.c_decode then
                local native = materialize.native_builds() - native_before
                assert.is_true(native > small and native <= 2 * small, tostring(native))
            end
            -- qjson.materialize builds an unchanged root by its shape
            -- first (the eager decode of a small text does the same): the
            -- same tables again, arrays marked by the instance's option.
            local marked = qjson.new()
            marked.decode_array_with_array_mt(true)
            local by_shape = materialize.native_builds()
            for _, text in ipairs(texts) do
                for _, lib in ipairs({ qjson, marked }) do
                    local root = lib.decode(text)
                    local want = helper.tape_of(root, lib == marked and qjson.array_mt or nil)
                    local ok, where = gen.identical(want, lib.materialize(root))
                    assert(ok, text:sub(1, 40) .. ": " .. tostring(where))
                end
            end
            assert.is_true(materialize.native_builds() - by_shape >= 2 * 3)
            -- In a changed document, the unchanged containers beside the
            -- change: each built from the source span that finding it
            -- unchanged looked up, small ones natively.
            local t = qjson.decode(texts[4])
            local before = {}
            for _, k in ipairs({ "small", "large", "after" }) do
                before[k] = helper.tape_of(t[k])
            end
            t.x = 1
            local native = materialize.native_builds()
            local m = qjson.materialize(t)
            assert.equal(1, m.x)
            for k, want in pairs(before) do
                assert(gen.identical(want, m[k]), k)
            end
            if qffi.c_decode then
                -- "small" and "after" (whose children it builds with
                -- them); "large" is over 1 KB.
                assert.equal(native + 2, materialize.native_builds())
            end
        end)
    end)
end)
