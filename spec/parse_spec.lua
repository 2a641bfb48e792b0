-- qjson.parse and the document getters.

local ffi = require("ffi")
local qjson = require("qjson")
local helper = require("helper")

local CHAT = [[{
  "model": "gpt-4o",
  "temperature": 0.7,
  "stream": false,
  "logprobs": true,
  "tool_choice": null,
  "n": 3,
  "usage": {"total_tokens": 9223372036854775807, "lowest": -9223372036854775808},
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "caf\u00e9 \ud83d\ude00\n"}]}
  ],
  "empty": {}, "none": [],
  "a.b": {"c[0]": 1, "x/y": 2, "t~": 3, "": 4}
}]]

describe("qjson.parse", function()
    local doc
    before_each(function() doc = qjson.parse(CHAT) end)

    describe("get_str", function()
        it("reads strings, decoding escapes and surrogate pairs", function()
            assert.equal("gpt-4o", doc:get_str("model"))
            assert.equal("caf\xc3\xa9 \xf0\x9f\x98\x80\n",
                         doc:get_str("messages[1].content[0].text"))
            assert.equal("Be brief.", doc:get_str("messages[0].content"))
        end)
        it("returns nil for a missing path and nil, err for another type", function()
            assert.is_nil(doc:get_str("nope"))
            assert.is_nil((select(2, doc:get_str("nope"))))
            local wrong = { temperature = "number", stream = "boolean",
                            tool_choice = "null", messages = "array", usage = "object" }
            for path, got in pairs(wrong) do
                local v, err = doc:get_str(path)
                assert.is_nil(v)
                assert.equal('qjson: expected string at "' .. path .. '", got ' .. got, err)
            end
        end)
    end)

    describe("get_f64", function()
        it("reads numbers as Lua numbers", function()
            assert.equal(0.7, doc:get_f64("temperature"))
            assert.equal(3, doc:get_f64("n"))
            assert.equal(9223372036854775807, doc:get_f64("usage.total_tokens"))
        end)
        it("rejects other types", function()
            local v, err = doc:get_f64("model")
            assert.is_nil(v)
            assert.equal('qjson: expected number at "model", got string', err)
        end)
        it("keeps the sign of -0 and gives infinity past the double range", function()
            local d = qjson.parse('{"z":-0,"big":1e400,"small":-1e400,"tiny":1e-400}')
            assert.equal(0, d:get_f64("z"))
            assert.equal(-math.huge, 1 / d:get_f64("z"))
            assert.equal(math.huge, d:get_f64("big"))
            assert.equal(-math.huge, d:get_f64("small"))
            assert.equal(0, d:get_f64("tiny"))
        end)
    end)

    describe("get_i64", function()
        it("is exact at both ends of the int64 range", function()
            local max = doc:get_i64("usage.total_tokens")
            assert.equal("cdata", type(max))
            assert.is_true(ffi.istype("int64_t", max))
            assert.equal("9223372036854775807", tostring(max):gsub("LL$", ""))
            assert.is_true(doc:get_i64("usage.lowest") == -9223372036854775807LL - 1)
            assert.is_true(doc:get_i64("n") == 3LL)
        end)
        it("refuses one past either end, fractions, and other types", function()
            local d = qjson.parse('[9223372036854775808,-9223372036854775809,' ..
                                  '1.5,"7",2.50e1,-0,1E3]')
            local v, err = d:get_i64("[0]")
            assert.is_nil(v)
            assert.equal('qjson: integer at "[0]" does not fit in int64', err)
            assert.is_nil(d:get_i64("[1]"))
            v, err = d:get_i64("[2]")
            assert.is_nil(v)
            assert.equal('qjson: number at "[2]" is not an integer', err)
            v, err = d:get_i64("[3]")
            assert.is_nil(v)
            assert.equal('qjson: expected number at "[3]", got string', err)
            assert.is_true(d:get_i64("[4]") == 25LL)
            assert.is_true(d:get_i64("[5]") == 0LL)
            assert.is_true(d:get_i64("[6]") == 1000LL)
        end)
        it("exceeds what a double holds", function()
            local d = qjson.parse("[9007199254740993]")
            assert.equal("9007199254740993LL", tostring(d:get_i64("[0]")))
            assert.equal(9007199254740992, d:get_f64("[0]"))
        end)
    end)

    describe("get_bool, is_null, typeof", function()
        it("reads booleans", function()
            assert.is_false(doc:get_bool("stream"))
            assert.is_true(doc:get_bool("logprobs"))
            local v, err = doc:get_bool("tool_choice")
            assert.is_nil(v)
            assert.equal('qjson: expected boolean at "tool_choice", got null', err)
        end)
        it("tells null from missing", function()
            assert.is_true(doc:is_null("tool_choice"))
            assert.is_false(doc:is_null("model"))
            assert.is_nil(doc:is_null("missing"))
        end)
        it("names every type", function()
            local want = { model = "string", temperature = "number", stream = "boolean",
                           logprobs = "boolean", tool_choice = "null", messages = "array",
                           usage = "object", [""] = "object" }
            for path, t in pairs(want) do
                assert.equal(t, doc:typeof(path), path)
            end
            assert.is_nil(doc:typeof("missing"))
        end)
    end)

    describe("len", function()
        it("counts elements and members", function()
            assert.equal(2, doc:len("messages"))
            assert.equal(0, doc:len("empty"))
            assert.equal(0, doc:len("none"))
            assert.equal(2, doc:len("usage"))
            assert.equal(11, doc:len(""))
        end)
        it("refuses scalars", function()
            local v, err = doc:len("model")
            assert.is_nil(v)
            assert.equal('qjson: expected array or object at "model", got string', err)
        end)
    end)

    describe("raw", function()
        it("returns the exact source text of any value", function()
            assert.equal('{"role": "system", "content": "Be brief."}', doc:raw("messages[0]"))
            assert.equal('"caf\\u00e9 \\ud83d\\ude00\\n"', doc:raw("messages[1].content[0].text"))
            assert.equal("0.7", doc:raw("temperature"))
            assert.equal("null", doc:raw("tool_choice"))
            assert.equal("false", doc:raw("stream"))
            assert.equal(CHAT, doc:raw(""))
            assert.equal("9223372036854775807", doc:raw("usage.total_tokens"))
        end)
    end)

    describe("get", function()
        it("returns scalars as Lua values and null as qjson.null", function()
            assert.equal("gpt-4o", doc:get("model"))
            assert.equal(0.7, doc:get("temperature"))
            assert.is_false(doc:get("stream"))
            assert.is_true(doc:get("logprobs"))
            assert.equal(qjson.null, doc:get("tool_choice"))
            assert.is_nil(doc:get("missing"))
        end)
        it("points containers to open() and decode()", function()
            local v, err = doc:get("messages")
            assert.is_nil(v)
            assert.matches("is an array; read it with open%(%) or qjson.decode%(%)", err)
        end)
    end)

    describe("paths", function()
        it("step through objects and 0-based arrays", function()
            assert.equal("text", doc:get_str("messages[1].content[0].type"))
            assert.equal("user", doc:get_str("messages[1].role"))
            assert.is_nil(doc:get_str("messages[2].role"))
            assert.is_nil(doc:get_str("messages.0"))
            assert.is_nil(doc:get_str("model.x"))
            assert.is_nil(doc:get_str("usage[0]"))
        end)
        it("accept JSON Pointers for keys with dots, brackets, slashes and tildes", function()
            assert.equal(1, doc:get_f64("/a.b/c[0]"))
            assert.equal(2, doc:get_f64("/a.b/x~1y"))
            assert.equal(3, doc:get_f64("/a.b/t~0"))
            assert.equal(4, doc:get_f64("/a.b/"))
            assert.equal("text", doc:get_str("/messages/1/content/0/type"))
            assert.is_nil(doc:get_str("/messages/-"))
            assert.is_nil(doc:get_str("/messages/01"))
            assert.equal("object", doc:typeof(""))
        end)
        it("raise on malformed paths, naming the offset", function()
            for path, at in pairs({ ["a..b"] = 2, [".a"] = 0, ["a["] = 2, ["a[01]"] = 2,
                                    ["a[-1]"] = 2, ["nope[x]"] = 5, ["/a~2"] = 2 }) do
                local ok, err = pcall(doc.get_str, doc, path)
                assert.is_false(ok)
                assert.matches('qjson: invalid path "' .. path:gsub("%p", "%%%0")
                               .. '" at byte ' .. at, err)
            end
        end)
        it("raise on a path that is not a string", function()
            local ok, err = pcall(doc.get_str, doc, 42)
            assert.is_false(ok)
            assert.matches("bad argument #1 to 'get_str' %(string expected, got number%)", err)
        end)
    end)

    describe("cursors", function()
        it("read relative to the opened value", function()
            local m = doc:open("messages[1]")
            assert.equal("user", m:get_str("role"))
            assert.equal("text", m:get_str("content[0].type"))
            assert.equal("object", m:typeof(""))
            local c = m:open("content")
            assert.equal(1, c:len())
            assert.equal("text", c:get_str("[0].type"))
        end)
        it("are independent of each other and of the document", function()
            local a = doc:open("messages[0]")
            local b = doc:open("messages[1]")
            assert.equal("system", a:get_str("role"))
            assert.equal("user", b:get_str("role"))
            assert.equal("system", a:get_str("role"))
            assert.equal("gpt-4o", doc:get_str("model"))
        end)
        it("are nil for missing values", function()
            assert.is_nil(doc:open("messages[5]"))
        end)
    end)

    describe("errors", function()
        local cases = {
            { "", "qjson: empty input (no JSON value)" },
            { "   ", "qjson: empty input (no JSON value)" },
            { "[1,]", "qjson: unexpected character ']' at byte 3, expected a value" },
            { '{"a":1 x', "qjson: unexpected character 'x' at byte 7, expected ',' or '}'" },
            { '{"a" 1}', "qjson: unexpected character '1' at byte 5, expected ':'" },
            { "[1, 2, 017]", "qjson: invalid number at byte 7" },
            { "[tru]", "qjson: invalid literal at byte 1" },
            { '["a\\x"]', "qjson: invalid escape at byte 3" },
            { '["\\ud800"]', "qjson: lone surrogate in \\u escape at byte 2" },
            { '["a\1"]', "qjson: unescaped control character in string at byte 3" },
            { '["\xc3"]', "qjson: invalid UTF-8 at byte 2" },
            { '["\xed\xa0\x80"]', "qjson: invalid UTF-8 at byte 2" },
            { '["\xc0\xaf"]', "qjson: invalid UTF-8 at byte 2" },
            { '{"a":"b', "qjson: unterminated string starting at byte 5" },
            { "[1] x", "qjson: unexpected character 'x' at byte 4, expected end of input" },
            { "[1]\0", "qjson: unexpected character '\\x00' at byte 3, expected end of input" },
            { "\xef\xbb\xbf[]", "qjson: unexpected character '\\xef' at byte 0, expected a value" },
            { "[1", "qjson: unexpected end of input at byte 2, expected ',' or ']'" },
            { "// c\n[]", "qjson: unexpected character '/' at byte 0, expected a value" },
            -- The first error in the text, though stage 1 finds the later
            -- control byte, invalid UTF-8 or open string first.
            { '[1,,"\1"]', "qjson: unexpected character ',' at byte 3, expected a value" },
            { '[0, "\xff\1"]', "qjson: invalid UTF-8 at byte 5" },
            { '[1 2, "ab', "qjson: unexpected character '2' at byte 3, expected ',' or ']'" },
        }
        for _, case in ipairs(cases) do
            it("reports " .. case[2], function()
                local ok, err = pcall(qjson.parse, case[1])
                assert.is_false(ok)
                assert.equal(case[2], err)
            end)
        end
        it("names the first repeated key under duplicate_keys = \"error\", whatever follows",
           function()
            local error_policy = { duplicate_keys = "error" }
            for _, case in ipairs({
                { '{"a":1,"a":2,"b":x}', 'qjson: duplicate key "a" at byte 7' },
                { '{"x":1,"x":2,"y":{"b":1,"b":2}}', 'qjson: duplicate key "x" at byte 7' },
                { '{"a":1,"a":2,"b":"\1"}', 'qjson: duplicate key "a" at byte 7' },
                { '{"a":1,"a":2', 'qjson: duplicate key "a" at byte 7' },
            }) do
                assert.equal(case[2], select(2, pcall(qjson.parse, case[1], error_policy)))
                assert.equal(case[2], select(2, pcall(qjson.decode, case[1], error_policy)))
            end
        end)
        it("limits nesting to 1000 by default (cjson's), configurably", function()
            local function nest(n) return string.rep("[", n) .. string.rep("]", n) end
            assert.equal(0, qjson.parse(nest(1000)):len(string.rep("[0]", 999)))
            local ok, err = pcall(qjson.parse, nest(1001))
            assert.is_false(ok)
            assert.equal("qjson: nesting too deep at byte 1000", err)
            assert.has_error(function() qjson.parse(nest(3), { max_depth = 2 }) end)
            assert.equal(1, qjson.parse(nest(2), { max_depth = 2 }):len())
            ok, err = pcall(qjson.parse, string.rep("[", 100000))
            assert.is_false(ok)
            assert.equal("qjson: nesting too deep at byte 1000", err)
        end)
        it("rejects bad arguments and options", function()
            assert.has_error(function() qjson.parse(nil) end,
                             nil)
            local ok, err = pcall(qjson.parse, "1", { max_depth = 0 })
            assert.is_false(ok)
            assert.matches("max_depth must be an integer", err)
            ok, err = pcall(qjson.parse, "1", { duplicate_keys = "first" })
            assert.is_false(ok)
            assert.matches('duplicate_keys must be "last" or "error"', err)
            ok, err = pcall(qjson.parse, "1", { max_dpeth = 3 })
            assert.is_false(ok)
            assert.matches("unknown option 'max_dpeth'", err)
            ok, err = pcall(qjson.parse, "1", 5)
            assert.is_false(ok)
            assert.matches("bad argument #2 to 'parse'", err)
        end)
    end)

    describe("duplicate keys", function()
        local text = '{"model":"allowed","x":1,"mod\\u0065l":"sneaky","x":2}'
        it("last wins by default, for every getter", function()
            local d = qjson.parse(text)
            assert.equal("sneaky", d:get_str("model"))
            assert.equal(2, d:get_f64("x"))
            assert.equal(2, d:len(""))
            assert.equal('"sneaky"', d:raw("model"))
        end)
        it("are rejected under duplicate_keys = \"error\"", function()
            local ok, err = pcall(qjson.parse, text, { duplicate_keys = "error" })
            assert.is_false(ok)
            assert.equal('qjson: duplicate key "mod\\u0065l" at byte 25', err)
            ok, err = pcall(qjson.parse, '[{"a":{"b":1,"b":2}}]', { duplicate_keys = "error" })
            assert.is_false(ok)
            assert.equal('qjson: duplicate key "b" at byte 13', err)
            assert.equal(1, qjson.parse('{"a":{"b":1},"c":{"b":2}}',
                                        { duplicate_keys = "error" }):get_f64("a.b"))
        end)
        it("policy can be set process-wide, cjson style", function()
            assert.equal("last", qjson.duplicate_keys())
            assert.equal("error", qjson.duplicate_keys("error"))
            finally(function() qjson.duplicate_keys("last") end)
            assert.has_error(function() qjson.parse(text) end)
            assert.equal("sneaky", qjson.parse(text, { duplicate_keys = "last" }):get_str("model"))
            assert.has_error(function() qjson.duplicate_keys("first") end)
        end)
        it("max depth can be set process-wide", function()
            assert.equal(1000, qjson.decode_max_depth())
            finally(function() qjson.decode_max_depth(1000) end)
            assert.equal(2, qjson.decode_max_depth(2))
            assert.has_error(function() qjson.parse("[[[]]]") end)
            assert.has_error(function() qjson.decode_max_depth(0) end)
        end)
    end)

    describe("escaped keys", function()
        it("match their decoded form", function()
            local d = qjson.parse('{"mod\\u0065l":"m",' ..
                                  '"a\\/b":1,"\\ud83d\\ude00":2,"q\\"":3,"t\\tab":4}')
            assert.equal("m", d:get_str("model"))
            assert.equal(1, d:get_f64("/a~1b"))
            assert.equal(2, d:get_f64("\xf0\x9f\x98\x80"))
            assert.equal(3, d:get_f64('q"'))
            assert.equal(4, d:get_f64("t\tab"))
            assert.is_nil(d:get_str("mod\\u0065l"))
        end)
    end)
end)

describe("document methods called on something else", function()
    -- Their fields were taken for a native address: SIGSEGV, or another
    -- live document freed (an audit's finding).
    it("raise qjson's message, and free nothing", function()
        local METHODS = { "get_str", "get_f64", "get_i64", "get_bool", "is_null", "typeof",
                          "len", "raw", "get", "open", "memory", "free" }
        local live = qjson.parse('{"tag":"' .. ("x"):rep(5000) .. '"}')
        local safe_doc = require("qjson.safe").parse('{"a":1}')
        local others = { "a", 42, true, qjson.decode("[0, 0, [4096]]", { lazy = false }),
                         qjson.decode("[0, 0, [4096]]"), ffi.cast("const char *", nil),
                         { 0, 0, { 1, 0, false, 1, 0 } } }
        for _, method in ipairs(METHODS) do
            for _, other in ipairs(others) do
                for _, d in ipairs({ live, safe_doc }) do
                    local ok, err = pcall(d[method], other, "a")
                    assert.is_false(ok)
                    assert.equal("qjson: a document method called on something else "
                                 .. "(call it as doc:method(...))", err)
                end
            end
        end
        assert.equal(5000, #live:get_str("tag"))
        live:free()
    end)
end)

describe("document lifetime", function()
    it("keeps its source string alive across garbage collections", function()
        local doc = qjson.parse(table.concat({ '{"k":"', string.rep("v", 1000), '"}' }))
        collectgarbage()
        collectgarbage()
        assert.equal(string.rep("v", 1000), doc:get_str("k"))
        local cursor = doc:open("")
        doc = nil -- luacheck: ignore 311
        collectgarbage()
        assert.equal(1000, #cursor:get_str("k"))
    end)

    it("frees the native side when collected", function()
        -- Documents dropped without free() are freed by the sweep that
        -- follows the collection which found them dead.
        local held = require("qjson.doc").held
        local before = held()
        for i = 1, 5000 do
            local d = qjson.parse(helper.pooled('{"i":' .. i .. '}'))
            assert.equal(i, d:get_f64("i"))
        end
        collectgarbage()
        local last = qjson.parse(helper.pooled("[]")) -- the first parse after a cycle sweeps
        -- Earlier dead documents go too, so it can be fewer than before.
        assert.is_true(held() <= before + 1, ("held %d, before %d"):format(held(), before))
        last:free()
    end)

    it("hands dead documents' memory to new ones in the order they were parsed", function()
        -- Consecutive parses then reuse memory allocated one after the
        -- other (see `sweep` in lua/qjson/doc.lua).
        local PTR = require("qjson.doc").PTR
        collectgarbage()
        collectgarbage()
        qjson.parse(helper.pooled("[]")):free() -- sweeps what died before
        local addresses = {}
        for i = 1, 3 do
            addresses[i] = tostring(qjson.parse(helper.pooled('{"n":' .. i .. '}'))[PTR])
        end
        collectgarbage()
        collectgarbage()
        local sweeping = qjson.parse(helper.pooled("[]")) -- parsed, then sweeps
        local next_doc = qjson.parse(helper.pooled("[1]"))
        assert.equal(addresses[1], tostring(next_doc[PTR]))
        sweeping:free()
        next_doc:free()
    end)

    it("keeps documents that are reachable only through cursors or proxies", function()
        for _, size in ipairs({ "small", "pooled" }) do
            local text = size == "small" and function(s) return s end or helper.pooled
            local cursor = qjson.parse(text('{"a":{"b":"kept"}}')):open("a")
            local nested = qjson.decode(text('{"x":{"y":["kept"]}}')).x.y
            for i = 1, 5000 do
                qjson.parse(text('{"i":' .. i .. '}'))
            end
            collectgarbage()
            qjson.parse(helper.pooled("[]")) -- the first parse after a cycle sweeps
            assert.equal("kept", cursor:get_str("b"))
            assert.equal("kept", nested[1])
            assert.equal('["kept"]', qjson.encode(nested))
        end
    end)

    it("free() gives the native document back at once", function()
        local held = require("qjson.doc").held
        local doc = qjson.parse(helper.pooled('{"a":1}'))
        local before = held()
        doc:free()
        assert.equal(before - 1, held())
    end)

    it("holds no native memory for a small document", function()
        -- Its index is in memory the thread keeps; what names it is a
        -- block in the Lua heap (see "Small documents" in
        -- docs/architecture.md).
        local held = require("qjson.doc").held
        local before = held()
        local largest = require("qjson.ffi").C.QJSON_SMALL_MAX_BYTES
        local doc = qjson.parse(string.rep(" ", largest - 7) .. '{"a":1}')
        local proxy = qjson.decode('{"a":[1]}')
        assert.equal(before, held())
        assert.equal(0, doc:memory())
        assert.equal(1, doc:get_f64("a"))
        assert.equal(1, proxy.a[1])
        doc:free()
        assert.has_error(function() doc:get_f64("a") end, "qjson: document used after free()")
        assert.equal(1, proxy.a[1])
    end)

    it("frees dead documents at the first parse after a cycle, of a small text too", function()
        -- A worker that parses small texts and now and then a large one
        -- gives the large one's memory back without waiting for the next.
        local held = require("qjson.doc").held
        collectgarbage()
        collectgarbage()
        qjson.parse(helper.pooled("[]")):free() -- sweeps what died before
        local before = held()
        for _, parse in ipairs({ qjson.parse, qjson.decode }) do
            parse(helper.pooled('{"big":true}'))
            assert.equal(before + 1, held())
            collectgarbage()
            collectgarbage()
            parse('{"small":true}')
            assert.equal(before, held())
        end
    end)

    it("reads small documents alike whichever of them was parsed or read last", function()
        -- More documents than a thread keeps parsed (8): reads that go
        -- from one to another parse the text again, into the place of
        -- the one used longest ago, and find the same values.
        local docs, proxies = {}, {}
        for i = 1, 20 do
            local text = '{"i":' .. i .. ',"a":[' .. string.rep("0,", i) .. i .. '],"s":"x\\ty"}'
            docs[i] = qjson.parse(text, i % 2 == 0 and { duplicate_keys = "error" } or nil)
            proxies[i] = qjson.decode(text)
        end
        for round = 1, 3 do
            for k = 1, 20 do
                local i = round == 2 and 21 - k or (k * 7) % 20 + 1
                assert.equal(i, docs[i]:get_f64("i"))
                assert.equal(i, docs[i]:get_f64("a[" .. i .. "]"))
                assert.equal(i + 1, docs[i]:len("a"))
                assert.equal("x\ty", docs[i]:get_str("s"))
                assert.equal(i, proxies[i].a[i + 1])
                assert.equal(i, proxies[i].i)
                assert.equal(i + 1, qjson.len(proxies[i].a))
            end
        end
    end)

    it("reads a small document whose neighbours were collected", function()
        -- Small documents' blocks come sixteen to a cdata (`parse_small`
        -- in lua/qjson.lua), which each document keeps alive: one kept
        -- while those parsed beside it are collected, and their memory
        -- goes to new objects, still reads its own text.
        local kept = {}
        for i = 1, 100 do
            local text = '{"i":' .. i .. ',"s":"' .. string.rep("v", i) .. '"}'
            local d = i % 2 == 0 and qjson.parse(text) or qjson.decode(text)
            if i % 17 == 0 then kept[#kept + 1] = { i, d } end
        end
        collectgarbage()
        collectgarbage()
        local others = {}
        for i = 1, 300 do
            others[i] = { qjson.decode('{"other":' .. i .. '}'), string.rep("x", 40 + i) }
        end
        for _, k in ipairs(kept) do
            local i, d = k[1], k[2]
            if i % 2 == 0 then
                assert.equal(i, d:get_f64("i"))
                assert.equal(i, #d:get_str("s"))
            else
                assert.equal(i, d.i)
                assert.equal(i, #d.s)
            end
        end
        assert.equal(300, others[300][1].other)
    end)

    it("free() makes later calls raise instead of touching freed memory", function()
        local doc = qjson.parse('{"a":{"b":1}}')
        local cursor = doc:open("a")
        doc:free()
        doc:free()
        for _, call in ipairs({
            function() return doc:get_str("a") end,
            function() return doc:get_f64("a.b") end,
            function() return cursor:get_f64("b") end,
            function() return cursor:len() end,
            function() return doc:open("a") end,
            function() return doc:raw("") end,
        }) do
            local ok, err = pcall(call)
            assert.is_false(ok)
            assert.matches("qjson: document used after free%(%)", err)
        end
        collectgarbage()
    end)

    it("at lua_close, finalizers read documents whole, or get \"used after free()\"", function()
        -- lua_close runs the application's cdata finalizers before qjson's
        -- cleanup (a userdata __gc), so those read their documents whole;
        -- a userdata __gc that happens to run after it gets an error, and a
        -- document parsed by one is still freed. Run in a child LuaJIT
        -- (under valgrind too when this spec is: make test does that).
        local script = [=[
            local ffi = require("ffi")
            local qjson = require("qjson")
            local d = qjson.parse('{"a":"x\\n","b":[1,2]}')
            local t = qjson.decode('{"c":{"d":"e\\t"}}')
            local function report(want, ok, v)
                if ok then
                    io.write(v == want and "." or "W")
                elseif tostring(v):find("used after free", 1, true) then
                    io.write("f")
                else
                    io.write("E")
                end
            end
            keep = {}
            for i = 1, 40 do
                keep[i] = ffi.gc(ffi.new("char[1]"), function()
                    report("x\n", pcall(d.get_str, d, "a"))
                    report("e\t", pcall(function() return t.c.d end))
                    local late = qjson.parse('{"late":true}')
                    report(true, pcall(late.get_bool, late, "late"))
                end)
            end
            for i = 1, 5 do
                local u = newproxy(true)
                getmetatable(u).__gc = function()
                    report("x\n", pcall(d.get_str, d, "a"))
                    local late = qjson.parse('{"late":true}')
                    report(true, pcall(late.get_bool, late, "late"))
                end
                keep[#keep + 1] = u
            end
        ]=]
        local path = os.tmpname()
        local f = assert(io.open(path, "wb"))
        f:write(script)
        f:close()
        -- (LD_PRELOAD: see tools/memcheck.sh.)
        local valgrind = os.getenv("QJSON_MEMCHECK")
                         and "LD_PRELOAD=$PWD/target/release/libqjson.so valgrind -q "
                             .. "--error-exitcode=99 --leak-check=full "
                             .. "--errors-for-leak-kinds=definite "
                             .. "--suppressions=tools/valgrind.supp " or ""
        local cmd = ("LUA_PATH='lua/?.lua;;' %sluajit -joff %s 2>&1; echo \" exit=$?\"")
                    :format(valgrind, path)
        local p = assert(io.popen(cmd))
        local out = p:read("*a")
        p:close()
        os.remove(path)
        local marks, status = out:match("^([%.fWE]*) exit=(%d+)%s*$")
        assert(marks, "unexpected output: " .. out)
        assert.equal("0", status)
        -- Every cdata finalizer read its documents whole.
        assert.equal(string.rep(".", 40 * 3), marks:sub(1, 40 * 3))
        assert.is_nil(marks:find("[WE]"))
    end)

    it("allows many documents alive at once", function()
        local docs = {}
        for i = 1, 2000 do
            docs[i] = qjson.parse('{"i":' .. i .. ',"s":"' .. string.rep("x", i % 50) .. '"}')
        end
        collectgarbage()
        for i = 2000, 1, -1 do
            assert.equal(i, docs[i]:get_f64("i"))
            assert.equal(i % 50, #docs[i]:get_str("s"))
        end
    end)
end)

describe("big documents", function()
    it("parses a 10 MB chat request built here and reads every message", function()
        local body = helper.chat_request(10 * 1024 * 1024, 10)
        assert.is_true(#body >= 10 * 1024 * 1024)
        local doc = qjson.parse(body)
        assert.equal("gpt-4o", doc:get_str("model"))
        assert.equal(10, doc:len("messages"))
        for i = 0, 9 do
            assert.equal("message " .. (i + 1),
                         doc:get_str("messages[" .. i .. "].content[0].text"))
            local url = doc:get_str("messages[" .. i .. "].content[1].image_url.url")
            assert.is_true(#url > 1000000)
            assert.equal("data:image/jpeg;base64,", url:sub(1, 23))
        end
        -- One broken byte deep inside a 10 MB body is found.
        local at = #body - 100
        local broken = body:sub(1, at) .. "\1" .. body:sub(at + 2)
        local ok, err = pcall(qjson.parse, broken)
        assert.is_false(ok)
        assert.equal("qjson: unescaped control character in string at byte " .. at, err)
    end)

    it("parses a 10 MB array of small objects", function()
        local item = '{"id":12345,"name":"item","tags":["a","b"],"price":9.99,"ok":true}'
        local n = math.ceil(10 * 1024 * 1024 / (#item + 1))
        local body = "[" .. string.rep(item, n, ",") .. "]"
        local doc = qjson.parse(body)
        assert.equal(n, doc:len(""))
        assert.equal(9.99, doc:get_f64("[" .. (n - 1) .. "].price"))
        for i = 0, n - 1, 9973 do
            assert.equal("b", doc:get_str("[" .. i .. "].tags[1]"))
        end
    end)
end)
