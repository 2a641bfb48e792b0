-- qjson.encode of plain values through the Lua C API
-- (src/lua_api/encode.rs), against the Lua encoder it replaces (still the
-- fallback: lua/qjson/encode.lua) and, where it can be found, OpenResty's
-- lua-cjson fork, byte for byte, under every encoder option.
--
-- The fork is found by spec/helper.lua (make test builds it); without it
-- those comparisons are pending and the Lua encoder is the reference.

local qjson = require("qjson")
local qffi = require("qjson.ffi")
local encode = require("qjson.encode")
local gen = require("gen")
local is_proxy = require("qjson.lazy").is_proxy

local difference = gen.difference
local lua_encode = encode.lua_encode
local native_counts = encode.native_counts

-- OpenResty's lua-cjson, loaded beside Debian's (its own module table).
local helper = require("helper")
local fork = helper.fork()
local outcome = helper.outcome

local function fork_encode(v)
    return helper.fork_encode(fork, v)
end

-- Both libraries' options set alike.
local OPTIONS = {
    { "encode_number_precision", 14 },
    { "encode_escape_forward_slash", true },
    { "encode_empty_table_as_object", true },
    { "encode_max_depth", 1000 },
}
local function set_option(name, ...)
    qjson[name](...)
    if fork then fork[name](...) end
end
local function reset_options()
    for _, o in ipairs(OPTIONS) do set_option(o[1], o[2]) end
    set_option("encode_sparse_array", false, 2, 10)
end


-- Fails unless the native encoder wrote v itself, byte for byte as the
-- Lua encoder and (unless `not_fork`) the fork do, or raised their error.
local function assert_native(v, label, not_fork)
    local done = native_counts()
    local got = outcome(qjson.encode, v)
    assert(native_counts() == done + 1, (label or "") .. ": not encoded natively")
    local want = outcome(lua_encode, v)
    assert(got == want, ("%s: native and Lua encoders differ %s")
                        :format(label or "", difference(want, got)))
    if fork and not not_fork then
        local cjson = fork_encode(v)
        assert(got == cjson, ("%s: qjson and cjson differ %s")
                             :format(label or "", difference(cjson, got)))
    end
    return got
end

describe("qjson.encode through the Lua C API", function()
    before_each(reset_options)
    teardown(reset_options)

    it("is the path this LuaJIT takes, and counts what it writes", function()
        assert.is_function(qffi.c_encode)
        local done, declined = native_counts()
        assert.equal('{"a":[1,2]}', qjson.encode({ a = { 1, 2 } }))
        assert.same({ done + 1, declined }, { native_counts() })
    end)

    it("finds OpenResty's cjson fork to compare with", function()
        if not fork then
            return pending("no cjson.so in $BASELINES or target/baselines (tools/baselines.sh)")
        end
        assert.equal("table", type(fork.array_mt))
    end)

    for seed = 1, 16 do
        it(("writes random plain values as the Lua encoder and cjson, seed %d"):format(seed),
           function()
            math.randomseed(seed)
            for i = 1, 60 do
                assert_native(gen.random_value(), ("seed %d value %d"):format(seed, i))
            end
        end)
    end

    it("writes every byte and long strings as they do", function()
        local bytes = {}
        for b = 0, 255 do bytes[#bytes + 1] = string.char(b) end
        local all = table.concat(bytes)
        for _, slash in ipairs({ true, false }) do
            set_option("encode_escape_forward_slash", slash)
            assert_native(all, "all bytes")
            assert_native({ [all] = all }, "all bytes as a key")
            -- Every length around the 16-byte chunks, each byte in turn
            -- the one to escape.
            for len = 0, 40 do
                for at = 1, len, 7 do
                    for _, c in ipairs({ "/", "\1", '"', "\127", "\xc3" }) do
                        local s = ("x"):rep(at - 1) .. c .. ("y"):rep(len - at)
                        assert_native({ [s] = { s, s .. s } }, "string " .. len)
                    end
                end
            end
            for _, n in ipairs({ 1000, 174763, 400000 }) do
                assert_native(('ab"/\n\1cdefghijklmnop'):rep(n / 20), "long string " .. n)
            end
        end
    end)

    it("writes numbers as they do under every precision", function()
        local numbers = { 0, -0.0, 1, -1, 0.1, 1 / 3, -2.5, 1e300, -1e-300, 5e-324, 2 ^ 53,
                          2 ^ 63, -2 ^ 63, 2 ^ 64, 1e15, 1e16, 1e17, 99999999999999,
                          100000000000000, 440103099353365, 24064909824598.5, 123456.789e3,
                          9007199254740993, 1e21, 1e-7, 0.000001, 12345678901234567890 }
        for _ = 1, 200 do numbers[#numbers + 1] = gen.random_number() end
        for precision = 1, 16 do
            set_option("encode_number_precision", precision)
            assert_native(numbers, "precision " .. precision)
            local keyed = {}
            for i = 1, 40 do keyed[numbers[i] + 0.5] = i end
            assert_native(keyed, "number keys at precision " .. precision)
        end
    end)

    it("refuses NaN and infinities, as number values and keys", function()
        for _, v in ipairs({ 0 / 0, math.huge, { 1, -math.huge }, { a = { 0 / 0 } },
                             { [-math.huge] = 1 } }) do
            local got = assert_native(v, "not finite")
            assert.equal("error: Cannot serialise number: must not be NaN or Infinity", got)
        end
    end)

    it("detects arrays as cjson does, sparse ones included", function()
        local cases = {
            { 1, 2, 3 }, { [1] = 1, [2] = 2, [4] = 4 }, { [10] = 1 }, { [11] = 1 },
            { [2] = 2, [1] = 1 }, { 1, 2, 3, n = 3 }, { [0] = 0, 1 }, { [1.5] = 1 },
            { [-1] = 1 }, { 1, nil, 3 }, { [3] = 3, [2] = 2, [1] = 1, x = 1 },
            { 1, { 2, { 3, { 4 } } } }, { x = { [30] = 1, 1 } }, { 1, 2, [100] = { print } },
            { { print }, [50] = 1 }, { { { 0 / 0 } }, x = 1 },
        }
        -- Keys 1..n put in the hash part first (each a new key of a table
        -- with room), then more: iteration order is not key order.
        local mixed = { a = 1, b = 2, c = 3, d = 4 }
        mixed.a, mixed.b, mixed.c, mixed.d = nil, nil, nil, nil
        mixed[3], mixed[1], mixed[2] = "c", "a", "b"
        cases[#cases + 1] = mixed
        local hashed = { a = 1, b = 2 }
        hashed[1], hashed.a, hashed.b = 1, nil, nil
        hashed[2] = 2
        cases[#cases + 1] = hashed
        for _, settings in ipairs({ { false, 2, 10 }, { true, 2, 10 }, { false, 0, 10 },
                                    { true, 1, 0 }, { false, 3, 1 } }) do
            set_option("encode_sparse_array", unpack(settings))
            for i, t in ipairs(cases) do
                assert_native(t, ("case %d, sparse %s"):format(i, table.concat(
                    { tostring(settings[1]), settings[2], settings[3] }, ",")))
            end
        end
        -- Keys past what cjson keeps in an int (it writes {"2147483648":1},
        -- the Lua encoder refuses or converts a sparse array): against the
        -- Lua encoder alone.
        for _, convert in ipairs({ false, true }) do
            set_option("encode_sparse_array", convert, 2, 10)
            for _, t in ipairs({ { [2 ^ 31] = 1 }, { [2 ^ 53] = 1 }, { 1, [2 ^ 40] = 2 } }) do
                assert.equal(outcome(lua_encode, t), outcome(qjson.encode, t))
            end
        end
    end)

    it("writes keys as cjson does and refuses other key types", function()
        assert_native({ [1] = 1, [-1] = 2, [0.5] = 3, x = 4, [1e300] = 5 }, "number keys")
        for _, key in ipairs({ true, false, {}, print, coroutine.create(print), io.stdout }) do
            local got = assert_native({ a = 1, [key] = 1 }, "key " .. type(key))
            assert.matches("table key must be a number or string", got, 1, true)
        end
    end)

    it("refuses the types cjson refuses", function()
        for _, v in ipairs({ print, coroutine.create(print), io.stdout, { f = print },
                             { 1, { io.stdout } } }) do
            assert.matches("^error: Cannot serialise %a+: type not supported$",
                           assert_native(v, type(v)))
        end
    end)

    it("writes empty tables by their metatable and the options", function()
        for _, as_object in ipairs({ true, false }) do
            set_option("encode_empty_table_as_object", as_object)
            for _, v in ipairs({ {}, setmetatable({}, qjson.array_mt),
                                 setmetatable({}, qjson.empty_array_mt), qjson.empty_array,
                                 { a = {}, b = qjson.empty_array, c = { {} } },
                                 setmetatable({ 1, 2, x = 3 }, qjson.array_mt),
                                 setmetatable({ 1, nil, 3 }, qjson.array_mt),
                                 setmetatable({ 7 }, qjson.empty_array_mt) }) do
                assert_native(v, "empty, as object: " .. tostring(as_object))
            end
            -- Marked as empty arrays but not arrays by their keys: the fork
            -- writes #t elements, and so does the Lua encoder, which the
            -- native one hands them to.
            for _, case in ipairs({ { setmetatable({ x = 1 }, qjson.empty_array_mt), "[]" },
                                    { setmetatable({ 1, 2, x = 1 }, qjson.empty_array_mt),
                                      "[1,2]" } }) do
                local declined = select(2, native_counts())
                assert.equal(case[2], qjson.encode(case[1]))
                assert.equal(declined + 1, select(2, native_counts()))
                if fork then
                    assert.equal(fork_encode(case[1]), case[2])
                end
            end
        end
        assert.equal("[]", qjson.encode(qjson.decode("[]", { lazy = false })))
    end)

    it("writes null and cjson's empty array", function()
        assert_native({ qjson.null, { a = qjson.null }, qjson.null }, "null")
        if fork then
            local saved = package.loaded.cjson
            package.loaded.cjson = fork
            finally(function() package.loaded.cjson = saved end)
            assert.equal('{"a":[]}', assert_native({ a = fork.empty_array }, "cjson empty"))
        end
    end)

    it("stops at encode_max_depth with cjson's message", function()
        local function nested(n, inner)
            local t = inner or {}
            for _ = 2, n do t = { t } end
            return t
        end
        for _, limit in ipairs({ 1, 5, 1000 }) do
            set_option("encode_max_depth", limit)
            assert_native(nested(limit), "at the limit")
            assert_native(nested(limit, { x = 1 }), "objects at the limit")
            local got = outcome(qjson.encode, nested(limit + 1))
            assert.equal(("error: Cannot serialise, excessive nesting (%d)"):format(limit + 1),
                         got)
            assert.equal(got, outcome(lua_encode, nested(limit + 1)))
            if fork then
                assert.equal(got, fork_encode(nested(limit + 1)))
            end
            -- Through objects the native encoder reports it itself.
            local objects = { v = 1 }
            for _ = 1, limit do objects = { k = objects } end
            assert_native(objects, "objects past the limit")
        end
        -- A cycle reaches the limit too.
        local cycle = {}
        cycle.self = { cycle }
        assert.matches("excessive nesting %(1001%)", outcome(qjson.encode, cycle))
    end)

    it("writes qjson.empty_array as cjson writes its own: a value, no level of nesting",
       function()
        -- `limit` arrays around v.
        local function around(limit, v)
            local t = { v }
            for _ = 2, limit do t = { t } end
            return t
        end
        for _, limit in ipairs({ 1, 5 }) do
            set_option("encode_max_depth", limit)
            local got = assert_native(around(limit, qjson.empty_array), "at the limit", true)
            assert.equal(("["):rep(limit + 1) .. ("]"):rep(limit + 1), got)
            if fork then
                assert.equal(got, fork_encode(around(limit, fork.empty_array)))
            end
        end
        -- Written into a proxy, through the Lua encoder.
        set_option("encode_max_depth", 1)
        local p = qjson.decode('{"a":1}')
        p.a = qjson.empty_array
        assert.equal('{"a":[]}', qjson.encode(p))
    end)

    it("lays out a container whose every value is skipped as cjson does", function()
        set_option("encode_indent", "  ")
        set_option("encode_skip_unsupported_value_types", true)
        finally(function()
            set_option("encode_indent", "")
            set_option("encode_skip_unsupported_value_types", false)
        end)
        -- On its lines when it holds anything, written or skipped.
        assert.equal("[\n]", qjson.encode({ print }))
        assert.equal('{\n  "x": {\n  }\n}', qjson.encode({ x = { a = print } }))
        for _, v in ipairs({ { print }, { x = { a = print } }, { 1, print }, { print, 1 },
                             { a = print, b = 1 }, {}, { x = {} }, { { print } } }) do
            local got = qjson.encode(v)
            if fork then
                assert.equal(fork_encode(v), got)
            end
        end
    end)

    it("leaves nesting deeper than its stack to the Lua encoder", function()
        set_option("encode_max_depth", 100000)
        local t = { 1 }
        for _ = 1, 20000 do t = { a = t } end
        local _, declined = native_counts()
        local s = qjson.encode(t)
        assert.equal(declined + 1, select(2, native_counts()))
        assert.equal(lua_encode(t), s)
        assert.equal(('{"a":'):rep(20000) .. "[1]" .. ("}"):rep(20000), s)
    end)

    it("hands a table with a proxy or another metatable inside back to Lua", function()
        local doc = qjson.decode('{"b": [1, 2, {"c": "d"}], "e": "f/"}')
        local changed = qjson.decode('{"x": [1, {"y": 2}]}')
        changed.x[2].y = { 3, "z" }
        local lookup = setmetatable({ 1, nil, 3 }, { __index = function() return 0 end })
        for _, v in ipairs({ { a = doc }, { 1, 2, doc.b }, { doc.b[3], changed },
                             { n = { m = { changed.x } } }, { lookup }, doc, changed }) do
            local _, declined = native_counts()
            local s = qjson.encode(v)
            assert.equal(lua_encode(v), s)
            if type(v) == "table" and not is_proxy(v) then
                assert.equal(declined + 1, select(2, native_counts()))
            end
        end
        assert.equal('{"a":{"b": [1, 2, {"c": "d"}], "e": "f/"}}', qjson.encode({ a = doc }))
    end)

    it("hands back cdata, and int64 boxes come out as the Lua encoder writes them", function()
        local v = { n = 12345678901234567LL, u = 18446744073709551615ULL, s = "x" }
        assert.equal(lua_encode(v), qjson.encode(v))
        local array = require("ffi").new("int[1]")
        assert.matches("type not supported", outcome(qjson.encode, { array }))
    end)

    it("leaves no partial output behind an error", function()
        for _, bad in ipairs({ { 1, 2, print }, { a = { b = { 0 / 0 } } }, { [true] = 1 } }) do
            assert.is_false(pcall(qjson.encode, bad))
            assert.equal('[1,"x"]', qjson.encode({ 1, "x" }))
        end
    end)

    it("raises at level 0, as the Lua encoder and cjson do; safe returns it", function()
        local ok, err = pcall(qjson.encode, { print })
        assert.is_false(ok)
        assert.equal("Cannot serialise function: type not supported", err)
        local s, e = require("qjson.safe").encode({ print })
        assert.is_nil(s)
        assert.equal(err, e)
    end)

    it("survives finalizers that encode while it pushes its output", function()
        local inner, seen = { k = { 1, 2, "three" } }, 0
        local big = {}
        for i = 1, 3000 do big[i] = { i = i, s = "a string of some length " .. i } end
        local want = lua_encode(big)
        for _ = 1, 30 do
            for _ = 1, 50 do
                local u = newproxy(true)
                getmetatable(u).__gc = function()
                    if qjson.encode(inner) == '{"k":[1,2,"three"]}' then seen = seen + 1 end
                end
            end
            assert.equal(want, qjson.encode(big))
        end
        collectgarbage()
        assert.is_true(seen > 0)
    end)
end)

describe("qjson.encode's output buffer", function()
    -- A change to a document of about 3 MB, which the Lua encoder splices
    -- into the rest of its text in the buffer: as one string, or in pieces.
    local function encode_large(pieces)
        local parts = {}
        for i = 1, 50000 do
            parts[i] = '{"k":"' .. ("x"):rep(50) .. '"}'
        end
        local t = qjson.decode("[" .. table.concat(parts, ",") .. "]")
        t[1].k = "y"
        if pieces then
            local list, len = qjson.encode_pieces(t)
            assert.equal(2949952, len)
            assert.is_true(#list > 1)
        else
            assert.equal(2949952, #qjson.encode(t))
        end
    end
    -- A collection cycle, then the parse that sweeps after it.
    local function cycle()
        collectgarbage()
        qjson.parse("[1]")
    end

    for _, pieces in ipairs({ false, true }) do
        it("is kept while encodes need it, given back after a cycle that did not"
           .. (pieces and " (in pieces)" or ""), function()
            encode_large(pieces)
            -- (Measured after a sweep, which empties the buffer.)
            cycle()
            local size = encode.buffer_bytes()
            assert.is_true(size > 2 ^ 21, size)
            encode_large(pieces)
            cycle()
            assert.equal(size, encode.buffer_bytes())
            -- A small encode between: the buffer is not needed at its size.
            local t = qjson.decode('{"a":[1]}')
            t.a[1] = 2
            assert.equal('{"a":[2]}', qjson.encode(t))
            cycle()
            assert.is_true(encode.buffer_bytes() <= 2 ^ 20, encode.buffer_bytes())
            encode_large(pieces)
            cycle()
            cycle()
            assert.is_true(encode.buffer_bytes() <= 2 ^ 20, encode.buffer_bytes())
        end)
    end
end)

-- qjson.encode_pieces: the text qjson.encode returns, as strings of at
-- most 64 KB, natively for plain values and through the Lua encoder for
-- proxies, with the same errors.
describe("qjson.encode_pieces", function()
    local PIECE = 65536
    before_each(reset_options)
    teardown(reset_options)

    -- Fails unless the pieces of v, of at most PIECE bytes each and none
    -- empty (or the source text alone, when `source` is given), are the
    -- text qjson.encode gives and its length is given, and (`native`) the
    -- native encoder wrote them; returns the pieces. Pieces of 128 bytes
    -- or more found in `text`, a changed document's source, are its
    -- untouched runs; the others are cut from the encoder's buffer.
    local function assert_pieces(v, label, native, source, text)
        local done = native_counts()
        local pieces, len = qjson.encode_pieces(v)
        if native then
            assert(native_counts() == done + 1, label .. ": not encoded natively")
        end
        local want = qjson.encode(v)
        local got = table.concat(pieces)
        assert(got == want,
               ("%s: pieces and encode differ %s"):format(label, difference(want, got)))
        assert.equal(#want, len, label)
        if source then
            assert.same({ true, 1 }, { rawequal(source, pieces[1]), #pieces }, label)
            return pieces
        end
        -- Piece k (from 0) is PIECE - k % (PIECE / 2) bytes, the last
        -- one at most that: no two of the first PIECE / 2 share a length;
        -- but a run of the source and the piece before it may be shorter.
        local function is_run(piece)
            return piece and text and #piece >= 128 and text:find(piece, 1, true) ~= nil
        end
        for i, piece in ipairs(pieces) do
            local size = PIECE - (i - 1) % (PIECE / 2)
            local short = i == #pieces or is_run(piece) or is_run(pieces[i + 1])
            assert(#piece >= 1 and (#piece == size or short and #piece < size),
                   ("%s: piece %d of %d bytes"):format(label, i, #piece))
        end
        return pieces
    end

    it("cuts plain values natively into pieces of 64 KB", function()
        math.randomseed(7)
        for i = 1, 200 do
            assert_pieces(gen.random_value(), "random value " .. i, true)
        end
        for _, n in ipairs({ PIECE - 2, PIECE - 1, PIECE, 3 * PIECE - 2, 1000000 }) do
            local pieces = assert_pieces(("x"):rep(n), "string of " .. n, true)
            local count, cut = 0, 0
            while cut < n + 2 do
                cut = cut + PIECE - count % (PIECE / 2)
                count = count + 1
            end
            assert.equal(count, #pieces)
        end
        assert_pieces({ list = { ("é/\n"):rep(100000), { 1, 2.5, qjson.null } } }, "escapes", true)
    end)

    it("leaves qjson.encode one result on every path", function()
        local doc = qjson.decode('{"a":[1,2]}')
        doc.a[3] = 3
        for _, v in ipairs({ { 1 }, doc, qjson.decode("[1]"), { doc } }) do
            assert.equal(1, select("#", qjson.encode(v)))
        end
    end)

    -- After any decode under a larger max_depth, the encoder must look at
    -- a document's depth; it wrote an untouched one as its root value, the
    -- whitespace around it dropped (an audit's finding).
    it("gives an untouched document its source after a decode under a larger max_depth",
       function()
        qjson.decode("[1]", { max_depth = 2000 })
        local text = ' {"a":1} '
        assert.equal(text, qjson.encode(qjson.decode(text)))
        local pieces, len = qjson.encode_pieces(qjson.decode(text))
        assert.same({ { text }, #text }, { pieces, len })
        -- One deeper than encode_max_depth is still refused, as cjson does.
        local deep = ("["):rep(1001) .. ("]"):rep(1001)
        assert.has_error(function() qjson.encode(qjson.decode(deep, { max_depth = 2000 })) end,
                         "Cannot serialise, excessive nesting (1001)")
    end)

    it("gives an untouched document its source, and a changed one in pieces", function()
        local text = helper.chat_request(400000)
        local doc = qjson.decode(text)
        assert_pieces(doc, "untouched", false, text)
        doc.model = "gpt-4o-mini-2024-07-18"
        doc.messages[1].role = "system"
        doc.x_gateway = { routed = true }
        local pieces = assert_pieces(doc, "changed", false, nil, text)
        assert.is_true(#pieces > 1)
        assert.same(qjson.decode(qjson.encode(doc), { lazy = false }),
                    qjson.decode(table.concat(pieces), { lazy = false }))
        assert_pieces({ wrapped = doc, n = 1 }, "a proxy inside a plain table", false, nil, text)
    end)

    -- OpenResty's LuaJIT hashes a string of 128 bytes or more from a few
    -- of its bytes: texts alike but for a token, re-encoded one after
    -- another, would each be compared with every one before them still
    -- uncollected. Their runs from the source are strings found again.
    it("gives each untouched run of 128 bytes to 64 KB a piece of its own", function()
        local prefix = '{"id":"chatcmpl-AbC123xYz","object":"chat.completion.chunk",'
                       .. '"created":1763700000,"model":"gpt-4o-2024-08-06",'
                       .. '"system_fingerprint":"fp_3a9f2b1c0d","choices":[{"index":0,'
                       .. '"delta":{"content":'
        assert(#prefix >= 128)
        local rest = '},"logprobs":null,"finish_reason":null}]}'
        local event = qjson.decode(prefix .. '" upstream"' .. rest)
        event.choices[1].delta.content = "redacted"
        assert.same({ { prefix, '"redacted"' .. rest }, #prefix + 10 + #rest },
                    { qjson.encode_pieces(event) })
        -- A run under 128 bytes is copied with what is around it.
        local head = '{"choices":[{"index":0,"delta":{"content":'
        local short = qjson.decode(head .. '"a"' .. rest)
        short.choices[1].delta.content = "b"
        assert.same({ { head .. '"b"' .. rest }, #head + 3 + #rest },
                    { qjson.encode_pieces(short) })
        -- Between two changes; and a run over 64 KB goes with the buffer.
        local words, long = ("alike "):rep(30), ("x"):rep(PIECE + 10)
        local text = '{"a":1,"b":"' .. words .. '","c":2,"d":"' .. long .. '","e":3}'
        local doc = qjson.decode(text)
        doc.a, doc.c, doc.e = 10, 20, 30
        local pieces = assert_pieces(doc, "two runs", false, nil, text)
        assert.same({ '{"a":10', ',"b":"' .. words .. '","c":' },
                    { pieces[1], pieces[2] })
        assert.same({ 4, PIECE - 2, '","e":30}' },
                    { #pieces, #pieces[3], pieces[4]:sub(-9) })
        -- The first four runs of an encode only (runs of one document can
        -- be alike as well: spec/complexity_spec.lua).
        local members = {}
        for i = 1, 6 do members[i] = ('"k%d":"%s","v%d":0'):format(i, words, i) end
        local many = qjson.decode("{" .. table.concat(members, ",") .. "}")
        for i = 1, 6 do many["v" .. i] = i end
        local runs = 0
        for _, piece in ipairs(assert_pieces(many, "six runs", false, nil,
                                             "{" .. table.concat(members, ",") .. "}")) do
            if piece:find(words, 1, true) and not piece:find(":%d") then runs = runs + 1 end
        end
        assert.equal(4, runs)
    end)

    it("writes what the Lua encoder writes under encode_indent", function()
        qjson.encode_indent("  ")
        assert_pieces({ a = { ("y"):rep(200000), { b = 1 } } }, "indented")
        qjson.encode_indent("")
    end)

    it("raises what qjson.encode raises; safe returns nil and it", function()
        local safe = require("qjson.safe")
        for _, bad in ipairs({ { 1, print }, { a = { 0 / 0 } }, { [true] = 1 } }) do
            local ok, err = pcall(qjson.encode, bad)
            assert.is_false(ok)
            assert.same({ false, err }, { pcall(qjson.encode_pieces, bad) })
            assert.same({ nil, err }, { safe.encode_pieces(bad) })
        end
        local nested = {}
        for _ = 1, 1100 do nested = { nested } end
        assert.same({ pcall(qjson.encode, nested) }, { pcall(qjson.encode_pieces, nested) })
        local doc = qjson.decode('{"a":1}')
        doc.f = print
        assert.same({ pcall(qjson.encode, doc) }, { pcall(qjson.encode_pieces, doc) })
    end)

    it("follows the options of its instance, and a skipped value is no piece", function()
        local q = qjson.new()
        q.encode_escape_forward_slash(false)
        assert.same({ { '["a/b"]' }, 7 }, { q.encode_pieces({ "a/b" }) })
        assert.same({ { '["a\\/b"]' }, 8 }, { qjson.encode_pieces({ "a/b" }) })
        q.encode_skip_unsupported_value_types(true)
        assert.same({ {}, 0 }, { q.encode_pieces(print) })
        assert.equal("", q.encode(print))
    end)
end)

-- What OpenResty's cjson reads of a table, found different by an audit
-- (each expectation is the fork's output for the same table).
describe("a proxy written past its metatable", function()
    -- Raw access (Lua's table library, rawset) writes into a proxy's raw
    -- table, which no change record sees: encoding the document anyway
    -- left such a write out without a word.
    local TEXT = '{"model":"m","messages":[{"role":"user","content":"hi"}],"n":[1,2]}'
    local WHY = "a decoded table was changed past its metatable"
    local cases = {
        { "table.insert into a list", function(t) table.insert(t.messages, { role = "x" }) end },
        { "table.insert at the front", function(t) table.insert(t.messages, 1, {}) end },
        { "rawset into a member", function(t) rawset(t.messages[1], "k", 1) end },
        { "rawset into the root", function(t) rawset(t, "k", 1) end },
    }
    for _, case in ipairs(cases) do
        local label, write = case[1], case[2]
        it("is refused by encode, encode_pieces and materialize: " .. label, function()
            for _, change_too in ipairs({ false, true }) do
                local t = qjson.decode(TEXT)
                if change_too then t.model = "changed" end
                write(t)
                local ok, err = pcall(qjson.encode, t)
                assert.is_false(ok, label)
                assert.equal("Cannot serialise table: ", err:sub(1, 24))
                assert.truthy(err:find(WHY, 1, true), err)
                assert.is_false((pcall(qjson.encode_pieces, t)))
                assert.is_false((pcall(qjson.encode, { wrap = t })))
                local mok, merr = pcall(qjson.materialize, t)
                assert.is_false(mok, label)
                assert.truthy(merr:find(WHY, 1, true), merr)
                local v, serr = require("qjson.safe").encode(t)
                assert.is_nil(v)
                assert.equal(err, serr)
            end
        end)
    end

    it("is not seen in a proxy left untouched, read or written through it", function()
        local t = qjson.decode(TEXT)
        local _ = t.messages[1].content
        t.messages[2] = { role = "assistant" }
        assert.equal('{"model":"m","messages":[{"role":"user","content":"hi"},'
                     .. '{"role":"assistant"}],"n":[1,2]}', qjson.encode(t))
        assert.equal(TEXT, qjson.encode(qjson.decode(TEXT)))
    end)
end)

describe("qjson.encode reads tables as cjson does", function()
    local ffi = require("ffi")

    it("reads the elements of a table with a metatable through it", function()
        local holes = setmetatable({ [2] = "b" }, { __index = function(_, k) return "d" .. k end })
        assert.equal('["d1","b"]', qjson.encode(holes))
        assert.equal('["d1","b"]', lua_encode(holes))
        local by_table = setmetatable({ "a", nil, "c" }, { __index = { "A", "B" } })
        assert.equal('[["a","B","c"]]', qjson.encode({ by_table }))
        -- Members stay raw: an __index adds no keys.
        assert.equal('{"x":1}', qjson.encode(setmetatable({ x = 1 }, { __index = { y = 2 } })))
        if fork then
            assert.equal(fork_encode(holes), qjson.encode(holes))
            assert.equal(fork_encode({ by_table }), qjson.encode({ by_table }))
        end
    end)

    it("reads the metatable itself, not what a __metatable field shows", function()
        local counted = setmetatable({}, { __len = function() return 2 end, __metatable = false })
        assert.equal("[null,null]", qjson.encode(counted))
        -- Showing cjson's array_mt makes no array (qjson's own is taken
        -- at its word: the encoder's every table would pay otherwise).
        if fork then
            local loaded = package.loaded.cjson
            package.loaded.cjson = fork
            local shown = setmetatable({ 1, 2, x = 1 }, { __metatable = fork.array_mt })
            local ok, out = pcall(qjson.encode, shown)
            package.loaded.cjson = loaded
            assert.same({ true, '{"1":1,"2":2,"x":1}' }, { ok, out })
        end
    end)

    it("refuses pointer cdata, NULL too, in tables and in proxies", function()
        local message = "Cannot serialise cdata: type not supported"
        for _, p in ipairs({ ffi.cast("void *", 0), ffi.new("char *"), ffi.cast("void *", 1) }) do
            assert.same({ false, message }, { pcall(qjson.encode, { p }) })
            assert.same({ false, message }, { pcall(lua_encode, { p }) })
            local doc = qjson.decode('{"a":1}')
            doc.a = p
            assert.same({ false, message }, { pcall(qjson.encode, doc) })
        end
        -- Written into a proxy, a NULL pointer is a value, not a deletion.
        local array = qjson.decode("[1,2,3]")
        local null_pointer = ffi.cast("void *", 0)
        array[3] = null_pointer
        assert.equal(3, qjson.len(array))
        -- (Not `==`: LuaJIT finds a NULL pointer equal to nil.)
        assert.is_true(rawequal(array[3], null_pointer))
        local object = qjson.decode('{"a":1}')
        object.a = null_pointer
        assert.equal("cdata", type(object.a))
        assert.equal(1, qjson.len(object))
    end)
end)
