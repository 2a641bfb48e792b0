-- Texts given as a pointer and a length: qjson.parse(ptr, len) and
-- qjson.decode(ptr, len), what qjson.decode_body runs on nginx's request
-- body. A text longer than a small one is copied into memory its
-- document owns, so the bytes may change or go once the call returns;
-- whatever the length, everything reads, changes and encodes as for the
-- same text given as a Lua string.

local ffi = require("ffi")
local qjson = require("qjson")
local safe = require("qjson.safe")
local helper = require("helper")

-- The bytes of `text` in a buffer of its own (uint8_t, another pointer
-- type than char), and a function that overwrites them, as nginx reuses
-- a finished request's memory.
local function buffer(text)
    local buf = ffi.new("uint8_t[?]", #text)
    ffi.copy(buf, text, #text)
    return buf, function() ffi.fill(buf, #text, ("x"):byte()) end
end

-- A chat request of about `bytes` bytes with whitespace around its root,
-- which an encode of the whole unchanged document keeps.
local function chat(bytes)
    return " \n" .. helper.chat_request(bytes) .. "\r\n "
end

-- An array root after whitespace (the root proxy's kind is read from the
-- text's first byte that is not whitespace), longer than a small text.
local ARRAY = "\t [" .. ('{"id":1,"tags":["a","b"],"note":"caf\\u00e9"},'):rep(100) .. "7]  "

-- Texts on both sides of the small-text limit, where the pointer path
-- turns a small text into a Lua string and copies a longer one.
local SMALL = '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
local TEXTS = { SMALL, chat(16 * 1024), chat(300 * 1024), ARRAY }

describe("a text given as a pointer and a length", function()
    it("parses into a document that reads as the string's, the bytes since overwritten", function()
        for _, text in ipairs(TEXTS) do
            local buf, overwrite = buffer(text)
            local doc = qjson.parse(buf, #text)
            overwrite()
            local want = qjson.parse(text)
            assert.equal(want:raw(), doc:raw())
            assert.equal(want:typeof(), doc:typeof())
            assert.equal(want:len(), doc:len())
            if want:typeof() == "object" then
                assert.equal("gpt-4o", doc:get_str("model"))
                assert.equal(want:get_str("messages[0].role"), doc:get_str("messages[0].role"))
            else
                assert.equal("caf\195\169", doc:get_str("[99].note"))
                assert.equal(7, doc:get_f64("[100]"))
            end
        end
    end)

    it("decodes into proxies that read, change and encode as the string's", function()
        for _, text in ipairs(TEXTS) do
            local t
            do
                local buf, overwrite = buffer(text)
                t = qjson.decode(buf, #text)
                overwrite()
            end
            -- Nothing holds the buffer now: collected.
            collectgarbage()
            local want = qjson.decode(text)
            assert.same(qjson.materialize(want), qjson.materialize(t))
            -- Unchanged: the whole text, its surrounding whitespace too,
            -- in one string or in pieces of at most 64 KB.
            assert.equal(text, qjson.encode(t))
            local pieces, len = qjson.encode_pieces(t)
            assert.equal(#text, len)
            assert.equal(text, table.concat(pieces))
            for _, piece in ipairs(pieces) do
                assert.is_true(#piece <= 64 * 1024)
            end
            -- One key replaced, one added (each written from its change
            -- record alone), then changes deeper down.
            local first = qjson.decode(text)
            if want[1] == nil then
                for _, v in ipairs({ t, first }) do v.model = "qwen-plus" end
                assert.equal(qjson.encode(first), qjson.encode(t))
                for _, v in ipairs({ t, first }) do v.x_gateway = 1 end
                assert.equal(qjson.encode(first), qjson.encode(t))
                for _, v in ipairs({ t, first }) do v.messages[1].role = "system" end
                assert.equal(qjson.encode(first), qjson.encode(t))
            else
                for _, v in ipairs({ t, first }) do
                    v[2].tags[1] = "z"
                    v[qjson.len(v) + 1] = false
                end
                assert.equal(qjson.encode(first), qjson.encode(t))
            end
            pieces = qjson.encode_pieces(t)
            assert.equal(qjson.encode(first), table.concat(pieces))
            assert.same(qjson.materialize(first), qjson.materialize(t))
        end
    end)

    it("decodes eagerly (lazy = false) as the string decodes", function()
        for _, text in ipairs(TEXTS) do
            local buf = buffer(text)
            assert.same(qjson.decode(text, { lazy = false }),
                        qjson.decode(buf, #text, { lazy = false }))
        end
    end)

    it("counts the copy in the document's memory", function()
        local text = chat(300 * 1024)
        local doc = qjson.parse((buffer(text)), #text)
        assert.is_true(doc:memory() >= #text)
    end)

    it("is rejected with the string's message, options applied", function()
        local text = chat(16 * 1024)
        local cases = {
            { text:sub(1, -40), nil },
            { text:gsub('"gpt%-4o"', '"\1"', 1), nil },
            { text:gsub('"temperature":', '"model":', 1), { duplicate_keys = "error" } },
            { '[' .. ("[1],"):rep(2000) .. '[[[2]]]]', { max_depth = 2 } },
        }
        for _, case in ipairs(cases) do
            local bad, opts = case[1], case[2]
            local _, want = safe.decode(bad, opts)
            assert.matches("^qjson: .* at byte %d+", want)
            local buf = buffer(bad)
            for _, got in ipairs({
                { pcall(qjson.decode, buf, #bad, opts) },
                { pcall(qjson.parse, buf, #bad, opts) },
            }) do
                assert.same({ false, want }, got)
            end
            assert.same({ nil, want }, { safe.decode(buf, #bad, opts) })
            assert.same({ nil, want }, { safe.parse(buf, #bad, opts) })
        end
    end)

    it("refuses a missing or bad length, a NULL pointer, a number's cdata", function()
        local buf = buffer(SMALL)
        local cases = {
            { buf, nil, "bad argument #2 to 'decode' %(length expected, got nil%)" },
            { buf, -1, "bad argument #2 to 'decode' %(length expected, got %-1%)" },
            { buf, 1.5, "bad argument #2 to 'decode' %(length expected, got 1.5%)" },
            { ffi.cast("const char *", nil), 4, "bad argument #1 to 'decode' %(string or "
                                                 .. "pointer expected, got NULL%)" },
            { ffi.new("double", 1), 4, "bad argument #1 to 'decode' %(string or "
                                       .. "pointer expected, got ctype<double>%)" },
            -- An integer's cdata casts to a pointer, to the address its
            -- value names: it crashed the process, through qjson.safe too.
            { ffi.new("int64_t", 5), 3, "bad argument #1 to 'decode' %(string or "
                                        .. "pointer expected, got ctype<int64_t>%)" },
            { 1ULL, 2, "bad argument #1 to 'decode' %(string or "
                       .. "pointer expected, got ctype<uint64_t>%)" },
            { ffi.new("int", 16), 3, "bad argument #1 to 'decode' %(string or "
                                     .. "pointer expected, got ctype<int>%)" },
            { ffi.new("bool", true), 3, "bad argument #1 to 'decode' %(string or "
                                        .. "pointer expected, got ctype<bool>%)" },
        }
        for _, case in ipairs(cases) do
            for _, name in ipairs({ "decode", "parse" }) do
                local message = case[3]:gsub("'decode'", "'" .. name .. "'")
                local ok, err = pcall(qjson[name], case[1], case[2])
                assert.is_false(ok)
                assert.matches(message, err)
                local v, safe_err = safe[name](case[1], case[2])
                assert.is_nil(v)
                assert.matches(message, safe_err)
            end
        end
    end)

    -- A number or a NULL cdata as the options: decode read `opts.lazy`
    -- first, and raised "attempt to index", through qjson.safe too (an
    -- audit's finding); a NULL, which equals nil, passed as no options.
    it("refuses options that are not a table, as argument #3", function()
        local long = '["' .. ("x"):rep(5000) .. '"]'
        local NULL = ffi.cast("const char *", nil)
        for _, text in ipairs({ SMALL, long }) do
            local buf = buffer(text)
            for _, name in ipairs({ "decode", "parse" }) do
                for _, opts in ipairs({ 5, NULL, "lazy" }) do
                    local message = ("bad argument #3 to '%s' (table expected, got %s)")
                                    :format(name, type(opts))
                    assert.same({ false, message }, { pcall(qjson[name], buf, #text, opts) })
                    assert.same({ nil, message }, { safe[name](buf, #text, opts) })
                end
                assert.same({ nil, ("bad argument #2 to '%s' (table expected, got cdata)")
                                   :format(name) }, { safe[name](text, NULL) })
            end
        end
    end)

    it("reads the request body only in nginx", function()
        -- The message starts with the library's name, or the caller's
        -- position when it raises (it named lua/qjson/body.lua's).
        local message = "qjson: decode_body and parse_body run in nginx (lua-nginx-module)"
        for _, f in ipairs({ qjson.decode_body, qjson.parse_body }) do
            assert.same({ false, message }, { pcall(f) })
            local ok, err = pcall(function()
                local v = f()
                return v
            end)
            assert.is_false(ok)
            assert.equal(message, err:match("^[^:]*pointer_spec%.lua:%d+: (.*)$"))
        end
        for _, f in ipairs({ safe.decode_body, safe.parse_body }) do
            assert.same({ nil, message }, { f() })
        end
    end)
end)
