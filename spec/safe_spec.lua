-- qjson.safe: the qjson API, returning nil, err where qjson raises. It
-- never raises on data or misuse: invalid JSON, bad options, bad argument
-- types, malformed paths, documents used after free().

local qjson = require("qjson")
local safe = require("qjson.safe")

local TEXT = '{"s":"str","f":1.5,"i":42,"t":true,"z":null,"a":[1,{"k":"v"}],"o":{"x":1}}'

local GETTERS = { "get_str", "get_f64", "get_i64", "get_bool", "is_null", "typeof",
                  "len", "raw", "get", "open" }

local function pack(...)
    return { n = select("#", ...), ... }
end

-- Calls fn(...) and fails the test if it raises; returns a table of
-- pcall's results (true first) and the number of fn's results.
local function no_raise(fn, ...)
    local res = pack(pcall(fn, ...))
    if not res[1] then
        error("raised: " .. tostring(res[2]), 2)
    end
    return res, res.n - 1
end

-- The results of a call that must give exactly nil, message.
local function nil_err(fn, ...)
    local res, n = no_raise(fn, ...)
    assert.is_nil(res[2])
    assert.is_string(res[3])
    assert.equal(2, n)
    return res[3]
end

-- The message qjson raises for the same call (nil if it does not raise).
local function raised(fn, ...)
    local ok, err = pcall(fn, ...)
    if ok then return nil end
    return err
end

describe("qjson.safe", function()
    it("has every public function of qjson, and the same null and version", function()
        for name, v in pairs(qjson) do
            if type(v) == "function" and name:sub(1, 1) ~= "_" then
                assert.is_function(safe[name], name)
            end
        end
        assert.is_true(rawequal(qjson.null, safe.null))
        assert.equal(qjson._VERSION, safe._VERSION)
        assert.equal(qjson.kernel(), safe.kernel())
    end)

    it("parses valid JSON into documents that read like qjson's", function()
        local a, b = qjson.parse(TEXT), safe.parse(TEXT)
        for _, path in ipairs({ "s", "f", "i", "t", "z", "a", "a[1].k", "o", "", "nope" }) do
            for _, getter in ipairs(GETTERS) do
                if getter ~= "open" then
                    local x1, x2 = a[getter](a, path)
                    local y1, y2 = b[getter](b, path)
                    assert.equal(x2, y2, getter .. " " .. path)
                    if getter == "get_i64" and x1 then
                        assert.is_true(x1 == y1)
                    else
                        assert.equal(x1, y1, getter .. " " .. path)
                    end
                end
            end
        end
        assert.equal("v", b:open("a[1]"):get_str("k"))
        assert.is_nil(b:open("nope"))
    end)

    it("returns nil, err for invalid JSON, with qjson's message", function()
        for _, text in ipairs({ "", " ", "[1,]", "{", '{"a" 1}', "[017]", "[tru]",
                                '["\\x"]', '["\\ud800"]', '["\1"]', '["\xc3"]', "[1] x",
                                string.rep("[", 2000), '{"a":1,"a":2}' }) do
            local err = nil_err(safe.parse, text, { duplicate_keys = "error" })
            assert.matches("^qjson: ", err)
            assert.equal(raised(qjson.parse, text, { duplicate_keys = "error" }), err)
        end
    end)

    it("returns nil, err for bad options", function()
        for _, opts in ipairs({ { max_depth = 0 }, { max_depth = 1.5 }, { max_depth = "9" },
                                { max_depth = 2 ^ 31 }, { max_depth = 0 / 0 },
                                { max_depth = math.huge }, { duplicate_keys = "first" },
                                { duplicate_keys = true }, { max_dpeth = 3 }, { [1] = 1 },
                                5, "x", true, print }) do
            local err = nil_err(safe.parse, "[]", opts)
            assert.equal(raised(qjson.parse, "[]", opts), err)
            -- decode read `opts.lazy` first, and raised on a number or a
            -- boolean, from qjson.safe too.
            for _, lazy in ipairs({ false, true }) do
                local q, s = qjson.new(), safe.new()
                q.decode_lazy(lazy)
                s.decode_lazy(lazy)
                local decode_err = nil_err(s.decode, "[]", opts)
                assert.equal(raised(q.decode, "[]", opts), decode_err)
                if type(opts) ~= "table" then
                    assert.equal("bad argument #2 to 'decode' (table expected, got "
                                 .. type(opts) .. ")", decode_err)
                end
            end
        end
        -- Good options still apply.
        assert.is_nil(safe.parse("[[1]]", { max_depth = 1 }))
        assert.equal(1, safe.parse("[[1]]", { max_depth = 2 }):len())
    end)

    it("returns nil, err for a text that is not a string", function()
        for _, v in ipairs({ 1, true, {}, print, qjson.null }) do
            local err = nil_err(safe.parse, v)
            assert.equal("bad argument #1 to 'parse' (string expected, got " .. type(v) .. ")",
                         err)
        end
        assert.equal("bad argument #1 to 'parse' (string expected, got nil)",
                     nil_err(safe.parse))
    end)

    it("option functions return nil, err for bad values", function()
        finally(function()
            safe.decode_max_depth(1000)
            safe.duplicate_keys("last")
        end)
        -- What cjson's decode_max_depth refuses, with its messages.
        for _, v in ipairs({ 0, -1, 0.5, 2 ^ 31, "2147483648" }) do
            assert.equal("bad argument #1 to 'decode_max_depth' "
                         .. "(expected integer between 1 and 2147483647)",
                         nil_err(safe.decode_max_depth, v))
        end
        for _, v in ipairs({ {}, true, "five" }) do
            assert.matches("^bad argument #1 to 'decode_max_depth' %(number expected, got",
                           nil_err(safe.decode_max_depth, v))
        end
        for _, v in ipairs({ "first", 1, true, {} }) do
            assert.matches("^bad argument #1 to 'duplicate_keys' %(duplicate_keys must be",
                           nil_err(safe.duplicate_keys, v))
        end
        -- Unchanged by the refused values; set and read as qjson's are.
        assert.equal(1000, safe.decode_max_depth())
        assert.equal("last", safe.duplicate_keys())
        assert.equal(8, safe.decode_max_depth(8))
        assert.equal("error", safe.duplicate_keys("error"))
        assert.is_nil(safe.parse('{"a":1,"a":2}'))
    end)

    it("has options of its own, as cjson.safe has", function()
        finally(function()
            for _, q in ipairs({ qjson, safe }) do
                q.decode_max_depth(1000)
                q.duplicate_keys("last")
                q.encode_escape_forward_slash(true)
                q.encode_number_precision(14)
            end
        end)
        -- Set on one, the other keeps its defaults, both ways.
        qjson.encode_escape_forward_slash(false)
        assert.equal('"a/b"', qjson.encode("a/b"))
        assert.equal('"a\\/b"', safe.encode("a/b"))
        safe.encode_number_precision(3)
        assert.equal("0.333", safe.encode(1 / 3))
        assert.equal("0.33333333333333", qjson.encode(1 / 3))
        safe.decode_max_depth(1)
        assert.is_nil(safe.decode("[[1]]"))
        assert.equal(1, qjson.decode("[[1]]")[1][1])
        qjson.duplicate_keys("error")
        assert.equal(2, safe.parse('{"a":1,"a":2}'):get_f64("a"))
        assert.has_error(function() qjson.parse('{"a":1,"a":2}') end)
        -- qjson.sse reads events under the module's options.
        local stream = require("qjson.sse").new()
        local events = stream:feed('data: {"a":1,"a":2}\n\ndata: [[1]]\n\n')
        assert.is_nil(events[1]:json())
        assert.is_nil(events[1]:parse())
        assert.equal(1, events[2]:json()[1][1])
        assert.equal(1, events[2]:parse():get_f64("[0][0]"))
    end)
end)

describe("qjson.safe documents", function()
    local doc
    before_each(function() doc = safe.parse(TEXT) end)

    it("give nil for missing paths and nil, err for other types, like qjson", function()
        assert.is_nil(doc:get_str("missing"))
        assert.equal('qjson: expected string at "f", got number', nil_err(doc.get_str, doc, "f"))
        assert.equal('qjson: number at "f" is not an integer', nil_err(doc.get_i64, doc, "f"))
        assert.equal('qjson: expected array or object at "s", got string',
                     nil_err(doc.len, doc, "s"))
        assert.matches("is an object; read it with open", nil_err(doc.get, doc, "o"))
    end)

    it("return nil, err for malformed paths, with the offset", function()
        for path, at in pairs({ ["a..b"] = 2, [".a"] = 0, ["a["] = 2, ["a[01]"] = 2,
                                ["a[-1]"] = 2, ["nope[x]"] = 5, ["/a~2"] = 2 }) do
            for _, getter in ipairs(GETTERS) do
                local err = nil_err(doc[getter], doc, path)
                assert.equal('qjson: invalid path "' .. path .. '" at byte ' .. at, err)
            end
        end
    end)

    it("return nil, err for a path that is not a string", function()
        for _, getter in ipairs(GETTERS) do
            for _, path in ipairs({ 1, true, {}, print }) do
                local err = nil_err(doc[getter], doc, path)
                assert.equal("bad argument #1 to '" .. getter .. "' (string expected, got "
                             .. type(path) .. ")", err)
            end
        end
    end)

    it("return nil, err after free(), from the document and its cursors", function()
        local cursor = doc:open("a[1]")
        local inner = cursor:open("")
        assert.equal("v", cursor:get_str("k"))
        no_raise(doc.free, doc)
        no_raise(doc.free, doc)
        no_raise(cursor.free, cursor)
        for _, d in ipairs({ doc, cursor, inner }) do
            for _, getter in ipairs(GETTERS) do
                assert.equal("qjson: document used after free()", nil_err(d[getter], d, "k"))
                assert.equal("qjson: document used after free()", nil_err(d[getter], d, "a..b"))
                assert.equal("qjson: document used after free()", nil_err(d[getter], d, 5))
            end
        end
        assert.equal("qjson.doc: freed", tostring(cursor))
    end)

    it("make safe cursors; qjson's documents still raise", function()
        local cursor = doc:open("a")
        assert.matches("invalid path", nil_err(cursor.get_str, cursor, "[x]"))
        local plain = qjson.parse(TEXT)
        assert.has_error(function() plain:get_str("a..b") end)
        assert.has_error(function() plain:open("a"):get_str("[x]") end)
        plain:free()
        assert.has_error(function() plain:get_str("s") end)
    end)

    it("have qjson's documents raise misuse at the caller's line", function()
        local plain = qjson.parse(TEXT)
        local cursor = plain:open("a")
        local calls = {
            function() local v = plain:get_str("a..b") return v end,
            function() local v = cursor:len(7) return v end,
            function() plain:free() local v = cursor:get_str("[0]") return v end,
        }
        for _, call in ipairs(calls) do
            local line = debug.getinfo(call, "S").linedefined
            local ok, err = pcall(call)
            assert.is_false(ok)
            assert.matches("^[^:]*safe_spec%.lua:" .. line .. ": ", err)
        end
    end)
end)
