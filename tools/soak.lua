-- Long-running checks behind `make soak` (and a short one in `make test`).
--
--   luajit tools/soak.lua memory [documents] [bound_mb]
--       Parses `documents` distinct 1 MB chat requests (default 100 000)
--       four ways: parse and drop (no free: the garbage collector alone
--       must keep up), parse and doc:free(), decode + change + encode, the
--       same decoding one text from a pointer, which its documents copy
--       (qjson.decode(ptr, len), as qjson.decode_body does); and
--       as many times one dense text, whose native index the collector
--       cannot see.
--       Samples VmRSS from /proc/self/status every 500 documents and
--       fails if it ever exceeds the RSS after warm-up by more than
--       `bound_mb` (default 64): memory must stay flat, not grow with the
--       number of documents.
--   luajit tools/soak.lua burst [mb] [bound_mb]
--       Eight `mb` MB bodies (default 25) alive at once, each read at its
--       end (so lookup tables are built), then dropped and collected, then
--       10 000 small documents; fails if VmRSS does not come back within
--       `bound_mb` (default 16) of what it was before the burst (with the
--       input already built): a burst of large bodies must not leave its
--       memory with the worker.
--   luajit tools/soak.lua heap [heap_mb] [documents] [bound_mb]
--       With `heap_mb` MB of Lua tables alive (default 90), as a gateway
--       worker's caches and state make, parses one 100 KB dense body
--       `documents` times (default 20 000), reading a value and dropping
--       the document; fails if VmRSS grows by more than `bound_mb`
--       (default 32) after the first 2 000. A reused pooled document must
--       still count towards the collector's pacing: when it counted as
--       nothing, the parked documents grew with every parse (+701 MB
--       here, to 1 106 MB), the cycle being paced by Lua's allocations
--       alone.
--   luajit tools/soak.lua truncations [file.json...]
--       Every single-byte truncation of twitter, citm_catalog and canada
--       (or of the corpus files named)
--       through the C ABI (the prefix is the same buffer with a shorter
--       length, so nothing is copied), each of which must fail with an
--       offset within the prefix; every 64th also through qjson.safe.parse
--       and qjson.safe.decode. About 4.4 TB of scanning: 30-60 minutes.
--
-- Run from the repository root (the Makefile does).

package.path = "lua/?.lua;spec/?.lua;" .. package.path

local ffi = require("ffi")
local qjson = require("qjson")
local safe = require("qjson.safe")
local qffi = require("qjson.ffi")
local helper = require("helper")

local C = qffi.C

-- VmRSS and VmHWM of this process, in MB.
local function rss()
    local f = assert(io.open("/proc/self/status"))
    local status = f:read("*a")
    f:close()
    return tonumber(status:match("VmRSS:%s*(%d+)")) / 1024,
           tonumber(status:match("VmHWM:%s*(%d+)")) / 1024
end

local DOC_BYTES = 1024 * 1024
local SAMPLE_EVERY = 500

-- A distinct document per iteration, as a gateway sees: the same request
-- with a different id spliced in (one new 1 MB Lua string each time).
local base = helper.chat_request(DOC_BYTES)
local head, tail = base:match('^(.-"model":")[^"]*(".*)$')

local function document(i)
    return head .. "gpt-4o-" .. i .. tail
end

-- A dense text (360 KB) parsed again and again: about 8 bytes of native per
-- byte and next to no Lua allocation, so only the pacing of native memory
-- (lua/qjson/doc.lua, `track`) makes the collector free its documents.
local DENSE = "[" .. string.rep('{"a":1,"b":[2,3]},', 20000) .. "0]"

local function dense()
    return DENSE
end

-- One buffer a text is copied into and decoded from, as nginx's request
-- body is by qjson.decode_body: the document copies it into memory of its
-- own. The same text each time, so that the Lua heap does not grow by a
-- string a document: only the copies' charge to the collector (see
-- `Document::charged_bytes`) makes it free their documents.
local BODY = ffi.new("char[?]", #base)

-- Each: a name, what it does with a text, and the text for iteration i
-- (a distinct chat request unless given).
local VARIANTS = {
    { "dense, same text, drop", function(text)
        local d = qjson.parse(text)
        assert(d:get_f64("[5].b[1]") == 3)
    end, dense },
    { "parse, drop, no free()", function(text)
        local d = qjson.parse(text)
        assert(d:get_f64("temperature") == 0.7)
    end },
    { "parse, doc:free()", function(text)
        local d = qjson.parse(text)
        assert(d:len("messages") == 4)
        d:free()
    end },
    { "decode, change, encode", function(text)
        local t = qjson.decode(text)
        t.max_tokens = 256
        assert(#qjson.encode(t) == #text)
    end },
    { "decode, change, encode a pointer", function(text)
        ffi.copy(BODY, text, #text)
        local t = qjson.decode(BODY, #text)
        t.max_tokens = 256
        assert(#qjson.encode(t) == #text)
    end, function() return base end },
}

-- Calls `run(i)` for i = 1 .. n, sampling VmRSS every SAMPLE_EVERY calls
-- (and after the last) once the first `warm_up` are done; returns VmRSS
-- after the warm-up, the most it reached and the CPU seconds since.
local function sample_rss(run, n, warm_up)
    for i = 1, warm_up do run(i) end
    local start = rss()
    local max = start
    local t0 = os.clock()
    for i = warm_up + 1, n do
        run(i)
        if i % SAMPLE_EVERY == 0 or i == n then
            local now = rss()
            if now > max then max = now end
        end
    end
    return start, max, os.clock() - t0
end

local function memory(documents, bound_mb)
    local failed = false
    for _, variant in ipairs(VARIANTS) do
        local name, run = variant[1], variant[2]
        local text_of = variant[3] or document
        local bytes = #text_of(1)
        collectgarbage()
        local warm_up = math.min(SAMPLE_EVERY, documents)
        local start, max, seconds = sample_rss(function(i) run(text_of(i)) end, documents,
                                               warm_up)
        local _, hwm = rss()
        local over = max - start > bound_mb
        failed = failed or over
        print(("%-32s %7d x %.2f MB: VmRSS after warm-up %.0f MB, max %.0f MB (+%.0f), "
               .. "VmHWM %.0f MB, %.1f s CPU, %.2f GB/s%s"):format(
            name, documents, bytes / 1e6, start, max, max - start, hwm, seconds,
            (documents - warm_up) * bytes / seconds / 1e9,
            over and ("  FAILED: grew more than " .. bound_mb .. " MB") or ""))
    end
    return not failed
end

local function burst(mb, bound_mb)
    -- The input is built first and stays: building it (400 000 strings)
    -- grows the Lua heap and LuaJIT's string table, which are the test's,
    -- not qjson's, so "before" is measured with it built.
    local n = math.floor(mb * 1e6 / 60)
    local parts = {}
    for i = 1, n do
        parts[i] = '{"role":"user","content":"message number ' .. i .. '","n":[1,2,3]}'
    end
    local body = '{"messages":[' .. table.concat(parts, ",") .. ']}'
    parts = nil -- luacheck: ignore 311
    -- Full cycles until the Lua heap stops shrinking (LuaJIT halves its
    -- string table at most once a cycle).
    local function settle()
        local heap
        repeat
            heap = collectgarbage("count")
            collectgarbage()
        until collectgarbage("count") >= heap
        qjson.parse("[]") -- the first parse after a cycle sweeps
    end
    settle()
    local before = rss()
    local docs, native = {}, 0
    for i = 1, 8 do
        -- Eight distinct strings, as eight requests would be.
        docs[i] = qjson.parse(body .. string.rep(" ", i))
        assert(docs[i]:get_f64("messages[" .. (n - 1) .. "].n[2]") == 3)
        native = native + docs[i]:memory()
    end
    local peak = rss()
    docs = nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    for i = 1, 10000 do
        assert(qjson.parse('{"model":"m","i":' .. i .. '}'):get_f64("i") == i)
    end
    settle()
    local after = rss()
    local ok = after - before <= bound_mb
    print(("burst of 8 x %.0f MB: VmRSS %.0f MB before (input built), %.0f MB with them alive"
           .. " (native %.0f MB), %.0f MB after them and 10 000 small documents%s"):format(
        mb, before, peak, native / 1e6, after,
        ok and "" or ("  FAILED: more than " .. bound_mb .. " MB above before")))
    return ok
end

local function heap(heap_mb, documents, bound_mb)
    -- Tables of one array slot: about 90 bytes each with their slot.
    local keep = {}
    for i = 1, math.floor(heap_mb * 1e6 / 90) do
        keep[i] = { i }
    end
    local text = "[" .. string.rep('{"a":1,"b":[2,3]},', 5600) .. "0]"
    local warm_up = math.min(2000, documents)
    local start, max, seconds = sample_rss(function()
        assert(qjson.parse(text):get_f64("[5].b[1]") == 3)
    end, documents, warm_up)
    local ok = max - start <= bound_mb
    print(("%.0f MB of Lua objects alive (%d tables), %d x %.0f KB dense: VmRSS after"
           .. " warm-up %.0f MB, max %.0f MB (+%.0f), %.1f us a parse%s"):format(
        collectgarbage("count") / 1024, #keep, documents, #text / 1e3, start, max, max - start,
        seconds / (documents - warm_up) * 1e6,
        ok and "" or ("  FAILED: grew more than " .. bound_mb .. " MB")))
    return ok
end

local function truncations(names)
    local reader = ffi.gc(C.qjson_reader_new(), C.qjson_reader_free)
    local err = reader.error
    local ok = true
    if #names == 0 then
        names = { "twitter.json", "citm_catalog.json", "canada.json" }
    end
    for _, name in ipairs(names) do
        local text = helper.read(helper.data_dir() .. "/corpus/" .. name)
        local n = #text
        local t0 = os.clock()
        local accepted = 0
        for len = 0, n - 1 do
            local d = C.qjson_parse(text, len, nil, reader)
            if d ~= nil then
                C.qjson_free(d)
                accepted = accepted + 1
                if not text:sub(len + 1):match("^[ \t\r\n]*$") then
                    print(name .. " cut at " .. len .. " was accepted")
                    ok = false
                end
            elseif err.offset > len then
                print(name .. " cut at " .. len .. ": offset " .. tonumber(err.offset))
                ok = false
            end
            if len % 64 == 0 and d == nil then
                local prefix = text:sub(1, len)
                local _, e1 = safe.parse(prefix)
                local _, e2 = safe.decode(prefix)
                if e1 ~= e2 or e1 ~= "qjson: " .. ffi.string(err.message) then
                    print(name .. " cut at " .. len .. ": " .. tostring(e1) .. " / "
                          .. tostring(e2))
                    ok = false
                end
            end
        end
        print(("%-18s %8d truncations (%d only whitespace cut, accepted), %.0f s CPU")
              :format(name, n, accepted, os.clock() - t0))
    end
    return ok
end

local mode = arg[1]
local passed
if mode == "memory" then
    passed = memory(tonumber(arg[2]) or 100000, tonumber(arg[3]) or 64)
elseif mode == "burst" then
    passed = burst(tonumber(arg[2]) or 25, tonumber(arg[3]) or 16)
elseif mode == "heap" then
    passed = heap(tonumber(arg[2]) or 90, tonumber(arg[3]) or 20000, tonumber(arg[4]) or 32)
elseif mode == "truncations" then
    passed = truncations({ select(2, unpack(arg)) })
else
    io.stderr:write("usage: luajit tools/soak.lua memory [documents] [bound_mb]"
        .. " | burst [mb] [bound_mb] | heap [heap_mb] [documents] [bound_mb]"
        .. " | truncations [file.json...]\n")
    os.exit(2)
end
print(passed and "soak: ok" or "soak: FAILED")
os.exit(passed and 0 or 1)
