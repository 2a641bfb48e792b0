-- Limits and hostile input: what a gateway parsing untrusted bodies can be
-- sent. Every case must end in a value or a clean error with a position
-- inside the input; nothing may crash, recurse without bound, or read
-- outside the text. The verdicts follow docs/conformance.md.
--
-- The large loops (every truncation of the corpus, the 1 GB input) run
-- once, under the avx2 kernel or when none is forced: make test runs this
-- spec once per kernel, and the scalar kernel (and valgrind) gets a
-- smaller sample of the same checks. So does make test's run under a
-- second LuaJIT (QJSON_SAMPLE_LIMITS set): the loops check the native
-- parser, which the avx2 run has checked, and took 50 of its seconds.

local ffi = require("ffi")
local qjson = require("qjson")
local safe = require("qjson.safe")
local qffi = require("qjson.ffi")
local cjson = require("cjson")
local helper = require("helper")
local is_number = require("gen").is_number

local DATA = helper.data_dir()
local C = qffi.C
local forced = os.getenv("QJSON_KERNEL")
-- tools/memcheck.sh sets QJSON_MEMCHECK: under valgrind the samples do.
local FULL = (forced == nil or forced == "" or forced == "avx2") and not os.getenv("QJSON_MEMCHECK")
    and not os.getenv("QJSON_SAMPLE_LIMITS")

-- The byte offset a rejection message names ("... at byte N",
-- "... starting at byte N"), or nil.
local function offset_of(err)
    return tonumber(err:match("at byte (%d+)"))
end

-- Asserts that text is rejected by parse, by both decodes and by the safe
-- flavour, with one message naming an offset within the text; returns it.
local function assert_rejected(text, label)
    local d, err = safe.parse(text)
    assert(d == nil, label .. ": accepted")
    assert(type(err) == "string" and err:sub(1, 7) == "qjson: ", label .. ": " .. tostring(err))
    local at = offset_of(err)
    assert(at or err == "qjson: empty input (no JSON value)", label .. ": no offset in " .. err)
    assert(not at or at <= #text, label .. ": offset past the end in " .. err)
    local ok, e2 = pcall(qjson.decode, text)
    assert(not ok and e2 == err, label .. ": decode said " .. tostring(e2))
    local v, e3 = safe.decode(text, { lazy = false })
    assert(v == nil and e3 == err, label .. ": eager decode said " .. tostring(e3))
    return err, at
end

describe("100 000-deep nesting", function()
    local N = 100000
    local arrays = string.rep("[", N) .. "0" .. string.rep("]", N)
    local objects = string.rep('{"a":', N) .. "0" .. string.rep("}", N)

    for _, case in ipairs({ { "arrays", arrays, 1000 }, { "objects", objects, 5 * 1000 } }) do
        local label, text, at = case[1], case[2], case[3]
        local message = "qjson: nesting too deep at byte " .. at

        it("of " .. label .. " fails cleanly through parse, decode and qjson.safe", function()
            assert.equal(message, select(2, pcall(qjson.parse, text)))
            assert.equal(message, select(2, pcall(qjson.decode, text)))
            assert.equal(message, select(2, pcall(qjson.decode, text, { lazy = false })))
            assert.same({ nil, message }, { safe.parse(text) })
            assert.same({ nil, message }, { safe.decode(text) })
            assert.same({ nil, message }, { safe.decode(text, { lazy = false }) })
            -- cjson refuses it too, at its own limit of 1000.
            assert.is_false(pcall(cjson.decode, text))
        end)

        it("of " .. label .. " is read at any depth when max_depth allows it", function()
            local opts = { max_depth = N }
            local d = qjson.parse(text, opts)
            local pointer = string.rep(label == "arrays" and "/0" or "/a", N)
            assert.equal(0, d:get_f64(pointer))
            assert.equal(1, d:len(pointer:sub(1, -3)))
            assert.equal(text, d:raw())
            d:free()

            local eager = qjson.decode(text, { lazy = false, max_depth = N })
            local p = qjson.decode(text, opts)
            local clean = qjson.materialize(p)
            -- The deepest value of the eager, materialized and lazy trees.
            local key = label == "arrays" and 1 or "a"
            local a, b, c = eager, clean, p
            for _ = 1, N - 1 do a, b, c = a[key], b[key], c[key] end
            assert.same({ 0, 0, 0 }, { a[key], b[key], c[key] })
            -- An untouched proxy is its source, within encode_max_depth,
            -- which counts its levels as cjson counts a table's.
            assert.same({ false, "Cannot serialise, excessive nesting (1001)" },
                        { pcall(qjson.encode, p) })
            local deep = qjson.new()
            deep.encode_max_depth(N)
            assert.equal(text, deep.encode(p))

            -- A change at the bottom: materialize still converts it; encode
            -- stops at encode_max_depth with cjson's message.
            c[key] = { 1 }
            local m = qjson.materialize(p)
            for _ = 1, N do m = m[key] end
            assert.same({ 1 }, m)
            assert.same({ false, "Cannot serialise, excessive nesting (1001)" },
                        { pcall(qjson.encode, p) })
            assert.same({ nil, "Cannot serialise, excessive nesting (1001)" },
                        { safe.encode(p) })

            -- Past 65 535 levels a proxy's depth is kept beside its code:
            -- the limit counts every level exactly, and the splice lands.
            deep.encode_max_depth(N + 1)
            local open, close = label == "arrays" and "[" or '{"a":',
                                label == "arrays" and "]" or "}"
            assert.equal(open:rep(N) .. "[1]" .. close:rep(N), deep.encode(p))
            deep.encode_max_depth(N)
            assert.same({ false, ("Cannot serialise, excessive nesting (%d)"):format(N + 1) },
                        { pcall(deep.encode, p) })
        end)
    end

    local plain_chain = helper.nested_tables

    it("of plain tables fails to encode with cjson's message", function()
        local t = plain_chain(N)
        local message = "Cannot serialise, excessive nesting (1001)"
        assert.same({ false, message }, { pcall(cjson.encode, t) })
        assert.same({ false, message }, { pcall(qjson.encode, t) })
        assert.same({ nil, message }, { safe.encode(t) })
        -- materialize copies plain tables without recursing either.
        local m = qjson.materialize(t)
        for _ = 1, N do m = m[1] end
        assert.same({}, m)
    end)

    it("fails at encode_max_depth exactly as cjson does", function()
        local ok, err = pcall(function()
            for _, depth in ipairs({ 1, 2, 10, 500, 3000 }) do
                cjson.encode_max_depth(depth)
                qjson.encode_max_depth(depth)
                for _, n in ipairs({ depth - 1, depth, depth + 1 }) do
                    local t = plain_chain(n)
                    local cok, cout = pcall(cjson.encode, t)
                    local qok, qout = pcall(qjson.encode, t)
                    assert(cok == qok and cout == qout,
                           ("depth %d, %d tables: cjson %s, qjson %s"):format(
                               depth, n, cout:sub(1, 50), qout:sub(1, 50)))
                end
            end
        end)
        cjson.encode_max_depth(1000)
        qjson.encode_max_depth(1000)
        assert(ok, err)
    end)

    it("encodes with encode_max_depth raised, up to 2 000 000 levels", function()
        -- cjson gives up where lua_checkstack does (7998 with LuaJIT);
        -- qjson's encoder keeps its own stack, so any depth the option
        -- allows encodes, to 2 000 000 levels (`DEEPEST` in
        -- lua/qjson/encode.lua: each 500 nest a C call).
        qjson.encode_max_depth(2 ^ 31 - 1)
        local ok, out = pcall(qjson.encode, plain_chain(N))
        qjson.encode_max_depth(1000)
        assert(ok, out)
        assert.equal(string.rep("[", N) .. "{}" .. string.rep("]", N), out)
        -- The encoder is usable afterwards.
        assert.equal("[[1]]", qjson.encode({ { 1 } }))
    end)

    -- Under the largest encode_max_depth a table that contains itself
    -- ran until the C stack overflowed (SIGSEGV).
    it("fails on a table that contains itself under any encode_max_depth", function()
        local t = {}
        t.a = t
        qjson.encode_max_depth(2 ^ 31 - 1)
        local ok, err = pcall(qjson.encode, t)
        qjson.encode_max_depth(1000)
        assert.same({ false, "Cannot serialise, excessive nesting (2000001)" }, { ok, err })
        assert.equal("[[1]]", qjson.encode({ { 1 } }))
    end)

    it("re-encodes a deep document changed at its innermost value, up to the limit",
       function()
        local depth = 3000
        local text = string.rep("[", depth) .. "1" .. string.rep("]", depth)
        local t = qjson.decode(text, { max_depth = depth })
        local at = t
        for _ = 1, depth - 1 do at = at[1] end
        at[1] = 2
        local want = string.rep("[", depth) .. "2" .. string.rep("]", depth)
        qjson.encode_max_depth(depth)
        local ok, out = pcall(qjson.encode, t)
        qjson.encode_max_depth(depth - 1)
        local ok_below, err = pcall(qjson.encode, t)
        qjson.encode_max_depth(1000)
        assert(ok, out)
        assert.equal(want, out)
        assert.is_false(ok_below)
        assert.equal("Cannot serialise, excessive nesting (3000)", err)
    end)

    it("re-encodes whatever decode accepts under the default options, changed or not",
       function()
        local depth = qjson.decode_max_depth()
        assert.equal(qjson.encode_max_depth(), depth)
        for _, open in ipairs({ "[", '{"k":' }) do
            local close = open == "[" and "]" or "}"
            local text = string.rep(open, depth) .. "1" .. string.rep(close, depth)
            assert.equal(text, qjson.encode(qjson.decode(text)))
            local t = qjson.decode(text)
            local at, key = t, open == "[" and 1 or "k"
            for _ = 1, depth - 1 do at = at[key] end
            at[key] = 2
            assert.equal((text:gsub("1", "2")), qjson.encode(t))
            local eager = qjson.decode(text, { lazy = false })
            assert.equal((text:gsub(" ", "")), qjson.encode(eager))
            local deeper = open .. text .. close
            assert.is_nil(safe.decode(deeper))
        end
    end)

    it("through a mixed tree of proxies and plain tables fails at the same depth", function()
        local root = {}
        local at = root
        for _ = 1, 2000 do
            local p = qjson.decode('{"k": [1]}')
            at[1] = p
            p.k[1] = {}
            at = p.k[1]
        end
        local message = "Cannot serialise, excessive nesting (1001)"
        assert.same({ false, message }, { pcall(qjson.encode, root) })
        assert.same({ nil, message }, { safe.encode(root) })
        local m = qjson.materialize(root)
        for _ = 1, 2000 do m = m[1].k[1] end
        assert.same({}, m)
    end)

    -- The source of a proxy was copied whatever its depth: a document
    -- decoded under a larger max_depth passed encode_max_depth untouched,
    -- or changed anywhere but in its deep part.
    it("copies no source deeper than encode_max_depth, failing where cjson does", function()
        local changes = {
            untouched = function() end,
            ["changed at the top"] = function(t) t[2] = 5 end,
            ["changed at the bottom"] = function(t, depth)
                local at = t
                for _ = 1, depth - 1 do at = at[1] end
                at[1] = 7
            end,
            ["cut short"] = function(t) t[1][1] = 7 end,
        }
        local ok, err = pcall(function()
            for _, depth in ipairs({ 5, 1200 }) do
                local text = string.rep("[", depth) .. "1" .. string.rep("]", depth - 1) .. ",0]"
                cjson.decode_max_depth(depth)
                for name, change in pairs(changes) do
                    for _, limit in ipairs({ 3, depth - 1, depth, depth + 1 }) do
                        cjson.encode_max_depth(limit)
                        qjson.encode_max_depth(limit)
                        local plain = cjson.decode(text)
                        local proxy = qjson.decode(text, { max_depth = depth })
                        change(plain, depth)
                        change(proxy, depth)
                        for _, wrap in ipairs({ false, true }) do
                            local a, b = plain, proxy
                            if wrap then a, b = { a }, { b } end
                            local want = { pcall(cjson.encode, a) }
                            local got = { pcall(qjson.encode, b) }
                            local pieces = { pcall(qjson.encode_pieces, b) }
                            if pieces[1] then pieces[2] = table.concat(pieces[2]) end
                            assert(want[1] == got[1] and want[2] == got[2]
                                   and want[1] == pieces[1] and want[2] == pieces[2],
                                   ("depth %d, %s, limit %d%s: cjson %s, qjson %s, pieces %s")
                                       :format(depth, name, limit, wrap and ", wrapped" or "",
                                       tostring(want[2]):sub(1, 60), tostring(got[2]):sub(1, 60),
                                       tostring(pieces[2]):sub(1, 60)))
                        end
                    end
                end
            end
        end)
        cjson.decode_max_depth(1000)
        cjson.encode_max_depth(1000)
        qjson.encode_max_depth(1000)
        assert(ok, err)
    end)

    it("a table that contains itself fails to materialize instead of looping", function()
        local t = { a = { 1 } }
        t.a[2] = t
        assert.has_error(function() qjson.materialize(t) end,
                         "qjson: cannot materialize a table that contains itself")
        local p = qjson.decode('{"a": {"b": [1]}}')
        p.a.b[2] = p
        assert.has_error(function() qjson.materialize(p) end,
                         "qjson: cannot materialize a table that contains itself")
    end)
end)

describe("input size", function()
    -- Free memory in bytes, from /proc/meminfo.
    local function mem_available()
        local f = io.open("/proc/meminfo")
        if not f then return 0 end
        local text = f:read("*a")
        f:close()
        return (tonumber(text:match("MemAvailable:%s*(%d+) kB")) or 0) * 1024
    end

    it("of 4 GiB or more is refused before reading, with the size in the message", function()
        -- Lua strings stop at 2 GiB, so the C ABI gets an untouched
        -- anonymous mapping: the check must come before any byte is read.
        pcall(ffi.cdef, [[
            void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);
            int munmap(void *addr, size_t length);
        ]])
        local PROT_READ, MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 1, 2, 0x20, 0x4000
        local size = 2 ^ 32
        local p = ffi.C.mmap(nil, size, PROT_READ, MAP_PRIVATE + MAP_ANONYMOUS + MAP_NORESERVE,
                             -1, 0)
        assert(ffi.cast("intptr_t", p) ~= -1, "mmap of 4 GiB failed")
        local reader = ffi.gc(C.qjson_reader_new(), C.qjson_reader_free)
        for _, len in ipairs({ size - 1, size }) do
            assert.is_true(C.qjson_parse(p, len, nil, reader) == nil)
            assert.equal(C.QJSON_E_TOO_LARGE, reader.error.code)
            assert.equal(("input of %d bytes is too large (inputs must be under 4 GiB - 1)")
                         :format(len), ffi.string(reader.error.message))
        end
        ffi.C.munmap(p, size)
    end)

    -- LuaJIT's strings end below 2 GB: the indentation of 50 000 nested
    -- tables passes that, and JIT-compiled code writing it crashed the
    -- process (SIGSEGV) where the interpreter raises.
    it("of an encode past 2 GB fails with 'not enough memory'", function()
        if not FULL then return pending("run under the avx2 kernel only") end
        local need = 2 ^ 31 + 512 * 1024 * 1024
        if mem_available() < need then
            return pending(("needs %d MB free, /proc/meminfo has %d MB")
                           :format(need / 2 ^ 20, mem_available() / 2 ^ 20))
        end
        local q = qjson.new()
        q.encode_max_depth(100000)
        q.encode_indent(" ")
        local t = helper.nested_tables(50000)
        assert.same({ false, "not enough memory" }, { pcall(q.encode, t) })
        assert.equal('[\n [\n  1\n ]\n]', q.encode({ { 1 } }))
        -- The encoder's buffer, grown to 2 GB, goes back at the first
        -- sweep after a cycle that needed no such buffer: kept in the Lua
        -- heap, it made the next cycles wait for 2 GB more of garbage.
        t = nil -- luacheck: ignore 311
        for _ = 1, 2 do
            collectgarbage()
            qjson.parse("[1]")
        end
        collectgarbage()
        assert.is_true(collectgarbage("count") < 2 ^ 20, collectgarbage("count") .. " KB")
    end)

    it("of 1 GB parses, or is skipped when memory is short", function()
        if not FULL then return pending("run under the avx2 kernel only") end
        local size = 1000 * 1000 * 1000
        -- The string, the buffer it is built in, and slack for the index.
        local need = 2 * size + 256 * 1024 * 1024
        if mem_available() < need then
            return pending(("needs %d MB free, /proc/meminfo has %d MB")
                           :format(need / 2 ^ 20, mem_available() / 2 ^ 20))
        end
        -- ["aaa…a", 1]: a 1 GB string, then a value the parser must reach.
        local b = require("string.buffer").new(size)
        b:put('["')
        ffi.fill(b:reserve(size), size, string.byte("a"))
        b:commit(size)
        b:put('", 1]')
        local text = b:tostring()
        b:free()
        local d = qjson.parse(text)
        assert.equal(2, d:len())
        assert.equal("string", d:typeof("[0]"))
        assert.is_true(d:get_i64("[1]") == 1)
        d:free()
        -- Cut before the closing quote.
        local err = assert_rejected(text:sub(1, size), "1 GB unterminated")
        assert.equal("qjson: unterminated string starting at byte 1", err)
        text = nil -- luacheck: ignore 311
        collectgarbage()
    end)
end)

-- Which texts of at most 3 bytes are JSON: an independent oracle.
local function tiny_is_json(s)
    s = s:match("^[ \t\r\n]*(.-)[ \t\r\n]*$")
    if s:match("^%[[ \t\r\n]*%]$") or s:match("^{[ \t\r\n]*}$") or s == '""'
       or s:match("^%[%d%]$") then
        return true
    end
    if s:match('^"[\32-\127]"$') then
        return s ~= '"""' and s ~= '"\\"'
    end
    return is_number(s)
end

describe("inputs of 0 to 3 bytes", function()
    local function check(s)
        local label = ("%q"):format(s)
        if tiny_is_json(s) then
            local d, err = safe.parse(s)
            assert(d, label .. " rejected: " .. tostring(err))
            d:free()
        else
            assert_rejected(s, label)
        end
    end

    it("are judged right for every 0-, 1- and 2-byte input", function()
        check("")
        for a = 0, 255 do
            check(string.char(a))
            for b = 0, 255 do check(string.char(a, b)) end
        end
    end)

    it("are judged right for a sample of 3-byte inputs", function()
        math.randomseed(3)
        local bytes = { 0, 9, 10, 13, 32, 34, 44, 45, 46, 48, 49, 57, 58, 91, 92, 93, 101, 110,
                        116, 123, 125, 127, 128, 191, 192, 237, 255 }
        for _ = 1, FULL and 40000 or 5000 do
            local s = string.char(math.random(0, 255), math.random(0, 255), math.random(0, 255))
            check(s)
        end
        for _, a in ipairs(bytes) do
            for _, b in ipairs(bytes) do
                for _, c in ipairs(bytes) do check(string.char(a, b, c)) end
            end
        end
    end)
end)

describe("a NUL byte", function()
    local DOCS = { '{"key": "va", "n": [1, 2.5, true, null], "e": -1e5}', '"x"', "[[]]",
                   ' {"a\\"b": ["\\u0041", {}]} ' }

    -- Whether the byte at 0-based offset `at` of s lies inside a string
    -- (after its opening quote, up to its closing quote), and whether it
    -- follows an escaping backslash.
    local function inside_string(s, at)
        local inside, escaped = false, false
        for i = 1, at do
            local c = s:sub(i, i)
            if escaped then
                escaped = false
            elseif inside and c == "\\" then
                escaped = true
            elseif c == '"' then
                inside = not inside
            end
        end
        return inside, escaped
    end

    it("is rejected at every position, as a control character inside strings", function()
        for _, doc in ipairs(DOCS) do
            for i = 0, #doc do
                for _, s in ipairs({ doc:sub(1, i) .. "\0" .. doc:sub(i + 1),
                                     doc:sub(1, i) .. "\0" .. doc:sub(i + 2) }) do
                    if #s > i then
                        local err, at = assert_rejected(s, ("%q at %d"):format(doc, i))
                        local inside, escaped = inside_string(doc, i)
                        if inside and not escaped then
                            assert.equal("qjson: unescaped control character in string at byte "
                                         .. i, err)
                        elseif escaped then
                            assert.truthy(at == i or at == i - 1, err)
                        elseif err:find("unterminated string", 1, true) then
                            -- A quote was replaced: a later string opens
                            -- and never closes.
                            assert.truthy(doc:sub(i + 1, i + 1) == '"', err)
                        elseif err:find("'\\x00'", 1, true) then
                            assert.equal(i, at)
                        else
                            -- Inside a number or literal (or a string it
                            -- cut open): the token's start or the opening
                            -- quote is named.
                            assert.truthy(at <= i, err)
                        end
                    end
                end
            end
        end
    end)
end)

describe("truncated corpus files", function()
    -- Every prefix of the first `head` bytes, `middle` evenly spaced
    -- prefixes after them and the last `tail`: a truncation costs a scan
    -- of the whole prefix, and all of them (7 TB of scanning for the three
    -- files) are left to `make soak` (tools/soak.lua truncations).
    -- decode fails through the same native parse; it is checked on every
    -- prefix of the head and every 16th of the rest.
    local head, middle, tail = 16384, 500, 256
    if not FULL then head, middle, tail = 2048, 50, 32 end
    for _, name in ipairs({ "twitter.json", "citm_catalog.json", "canada.json" }) do
        it(name .. " fails with an offset within the prefix, never crashes", function()
            local text = helper.read(DATA .. "/corpus/" .. name)
            local n = #text
            local lengths = {}
            for len = 0, head - 1 do lengths[#lengths + 1] = len end
            for k = 1, middle do
                lengths[#lengths + 1] = head + math.floor(k * (n - head - tail) / (middle + 1))
            end
            for len = n - tail, n - 1 do lengths[#lengths + 1] = len end
            for k, len in ipairs(lengths) do
                local prefix = text:sub(1, len)
                if text:sub(len + 1):match("^[ \t\r\n]*$") then
                    -- Only whitespace was cut: still the same document.
                    assert.equal(prefix, qjson.encode(qjson.decode(prefix)))
                else
                    local d, err = safe.parse(prefix)
                    assert(d == nil, name .. " cut at " .. len .. " accepted")
                    local at = offset_of(err) or 0
                    assert(at <= len, name .. " cut at " .. len .. ": " .. err)
                    if len < head or k % 16 == 0 then
                        local v, err2 = safe.decode(prefix)
                        assert(v == nil and err2 == err, name .. " cut at " .. len)
                    end
                end
            end
        end)
    end
end)

describe("invalid UTF-8", function()
    local BAD = {
        { "overlong 2-byte /", "\xC0\xAF" }, { "overlong 2-byte DEL", "\xC1\xBF" },
        { "overlong 3-byte", "\xE0\x80\xAF" }, { "overlong 4-byte", "\xF0\x80\x80\xAF" },
        { "UTF-8 surrogate D800", "\xED\xA0\x80" }, { "UTF-8 surrogate DFFF", "\xED\xBF\xBF" },
        { "UTF-8 surrogate pair", "\xED\xA0\xBD\xED\xB8\x80" },
        { "5-byte form", "\xF8\x88\x80\x80\x80" }, { "6-byte form", "\xFC\x84\x80\x80\x80\x80" },
        { "truncated 2-byte", "\xC3" }, { "truncated 3-byte", "\xE2\x82" },
        { "truncated 4-byte", "\xF0\x9F\x98" }, { "lone continuation", "\x80" },
        { "continuation BF", "\xBF" }, { "FE", "\xFE" }, { "FF", "\xFF" },
        { "above U+10FFFF", "\xF4\x90\x80\x80" }, { "F5 lead", "\xF5\x80\x80\x80" },
        { "lead then ASCII", "\xE2A\x82" },
    }
    local GOOD = { "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xEF\xBF\xBF",
                   "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF", "\xEE\x80\x80", "\xC2\x80", "\x7F" }

    it("is rejected in keys and values at every alignment, naming its position", function()
        for _, case in ipairs(BAD) do
            local bad = case[2]
            for pad = 0, 70 do
                local fill = string.rep("a", pad)
                local shapes = { { '{"' .. fill, '": 1}' }, { '["' .. fill, 'z"]' },
                                 { '{"k": "' .. fill, '"}' }, { "[" .. (" "):rep(pad), "]" } }
                for _, shape in ipairs(shapes) do
                    local s = shape[1] .. bad .. shape[2]
                    local err, at = assert_rejected(s, case[1] .. " after " .. #shape[1])
                    assert(err:find("invalid UTF-8", 1, true), case[1] .. ": " .. err)
                    assert(at >= #shape[1] and at < #shape[1] + #bad + 1, case[1] .. ": " .. err)
                end
            end
        end
    end)

    it("valid sequences at the same places are accepted and read back", function()
        for _, good in ipairs(GOOD) do
            for pad = 0, 70 do
                local fill = string.rep("a", pad)
                local d = qjson.parse('{"' .. fill .. good .. '": ["' .. good .. fill .. '"]}')
                assert.equal(good .. fill, d:get_str("/" .. fill .. good .. "/0"))
                assert.same({ [fill .. good] = { good .. fill } },
                            qjson.decode(d:raw(), { lazy = false }))
            end
        end
    end)
end)

describe("surrogate escapes", function()
    -- docs/conformance.md: a lone or swapped surrogate is rejected, naming
    -- the backslash of the escape; a pair in order is one code point.
    local REJECTED = { '["\\ud800"]', '["\\udc00"]', '["\\uDFFF"]', '["\\udc00\\ud800"]',
                       '["\\ud800\\u0041"]', '["\\ud800\\ud800"]', '["\\ud800x"]',
                       '["\\ud800\\n"]', '["\\udbff\\ue000"]' }
    it("that are lone, swapped or unpaired are rejected, in values and keys", function()
        for _, s in ipairs(REJECTED) do
            local err = assert_rejected(s, s)
            assert.equal("qjson: lone surrogate in \\u escape at byte 2", err)
            local key = "{" .. s:sub(2, -2) .. ": 1}"
            assert.equal("qjson: lone surrogate in \\u escape at byte 2",
                         assert_rejected(key, key))
            local later = '["ok", "ab' .. s:sub(3)
            assert.equal("qjson: lone surrogate in \\u escape at byte 10",
                         assert_rejected(later, later))
            -- cjson is strict about these too.
            assert.is_false(pcall(cjson.decode, s))
        end
    end)

    it("in order decode to one code point, as cjson does", function()
        for _, case in ipairs({ { "\\ud800\\udc00", "\xF0\x90\x80\x80" },
                                { "\\udbff\\udfff", "\xF4\x8F\xBF\xBF" },
                                { "\\uD83D\\uDE00", "\xF0\x9F\x98\x80" } }) do
            local s = '["' .. case[1] .. '"]'
            assert.equal(case[2], qjson.parse(s):get_str("[0]"))
            assert.same(cjson.decode(s), qjson.decode(s, { lazy = false }))
        end
    end)
end)

describe("a byte order mark", function()
    it("at the start is rejected, as docs/conformance.md says", function()
        local err = assert_rejected("\xEF\xBB\xBF{}", "BOM")
        assert.equal("qjson: unexpected character '\\xef' at byte 0, expected a value", err)
        assert.equal("qjson: unexpected character '\\xef' at byte 2, expected end of input",
                     (assert_rejected("{}\xEF\xBB\xBF", "BOM after")))
    end)

    it("inside a string is U+FEFF", function()
        assert.equal("\xEF\xBB\xBF", qjson.parse('["\xEF\xBB\xBF"]'):get_str("[0]"))
    end)
end)

describe("comments", function()
    it("are rejected wherever they appear", function()
        for _, s in ipairs({ "// c\n{}", "{} // c", "/* c */ {}", "{}/**/", "[1, /* c */ 2]",
                             '{"a": 1 /* c */}', '{/**/"a": 1}', "[1]//", "#\n[]", "[1]\n# c" }) do
            assert_rejected(s, s)
        end
    end)

    it("inside strings are text", function()
        local d = qjson.parse('["// c", "/* c */", "#"]')
        assert.same({ "// c", "/* c */", "#" }, qjson.decode(d:raw(), { lazy = false }))
    end)
end)

describe("numbers of 10 000 digits", function()
    local zeros = string.rep("0", 9999)
    local pi = "3.14159265358979323846264338327950288419716939937510"
    local CASES = {
        -- text, get_f64, get_i64 (or its error kind)
        { "1" .. zeros, math.huge, "does not fit" },
        { "-1" .. zeros, -math.huge, "does not fit" },
        { "0." .. zeros .. "1", 0, "not an integer" },
        { "1." .. zeros, 1, 1 },
        { "0." .. zeros .. "1e10000", 1, 1 },
        { "1" .. zeros .. "e-9999", 1, 1 },
        { pi .. string.rep("7", 10000 - #pi), 3.141592653589793, "not an integer" },
        { "123" .. zeros:sub(1, 17), 1.23e19, "does not fit" },
    }

    it("are accepted and read back like cjson (C strtod) reads them", function()
        for _, case in ipairs(CASES) do
            local text = "[" .. case[1] .. "]"
            local d = qjson.parse(text)
            local f = d:get_f64("[0]")
            assert.equal(case[2], f)
            assert.equal(cjson.decode(text)[1], f)
            assert.equal(f, qjson.decode(text)[1])
            assert.equal(f, qjson.decode(text, { lazy = false })[1])
            local i, err = d:get_i64("[0]")
            if type(case[3]) == "number" then
                assert.is_true(i == case[3])
            else
                assert.is_nil(i)
                assert.truthy(err:find(case[3], 1, true))
            end
            -- The exact spelling survives a change beside it.
            local p = qjson.decode("[" .. case[1] .. ", 0]")
            p[2] = 1
            assert.equal("[" .. case[1] .. ", 1]", qjson.encode(p))
        end
    end)
end)
