-- Linear time for every access pattern: each loop below runs over n and
-- over 4n elements or keys in this process, timed alternately and best of
-- several rounds (the machine may be busy), and 4x the size must cost at
-- most 8x the time: linear work gives about 4x, quadratic 16x. The loops
-- are issue 12's table (reads in every order, through proxies, getters,
-- cursors and pointers) and what an audit of the other paths a body's
-- sender shapes turned up: writes during iteration, many new keys, len
-- between writes, repeated keys, nested iteration, encoding after many
-- changes, long escape runs and digit strings. (The native work of the
-- same reads is counted exactly by src/navigate/lookup.rs's tests; SSE
-- chunked a byte at a time is spec/sse_spec.lua's.)

local ffi = require("ffi")
local qjson = require("qjson")

local assert_linear = require("helper").assert_linear
local concat = table.concat

-- An order of 1..n that makes table.sort (LuaJIT's quicksort) compare
-- about n^2 / 4 times: McIlroy's adversary, which decides each
-- comparison as it is asked, run against table.sort itself.
local function against_quicksort(n)
    local gas = n + 1
    local value, pos = {}, {}
    for i = 1, n do pos[i], value[i] = i, gas end
    local solid, candidate = 0, nil
    table.sort(pos, function(a, b)
        if value[a] == gas and value[b] == gas then
            if a == candidate then value[a] = solid else value[b] = solid end
            solid = solid + 1
        end
        if value[a] == gas then candidate = a elseif value[b] == gas then candidate = b end
        return value[a] < value[b]
    end)
    for i = 1, n do
        if value[i] == gas then value[i], solid = solid, solid + 1 end
    end
    return value
end

-- {"messages":[{"role":"user","content":[{"type":"text","text":"m1"}]},...]}
local function messages(n)
    local t = {}
    for i = 1, n do
        t[i] = '{"role":"user","content":[{"type":"text","text":"m' .. i .. '"}]}'
    end
    return '{"messages":[' .. concat(t, ",") .. "]}"
end

-- {"k1":1,"k2":2,...}
local function object(n)
    local t = {}
    for i = 1, n do
        t[i] = '"k' .. i .. '":' .. i
    end
    return "{" .. concat(t, ",") .. "}"
end

-- A key of 308 bytes that differs from the others only in 8 digits from
-- byte 225, where OpenResty's LuaJIT does not hash a string that long
-- (docs/reliability.md, "Strings LuaJIT interns").
local function alike_key(i)
    return ("a"):rep(225) .. ("%08d"):format(i) .. ("b"):rep(75)
end

-- {"<alike_key(1)>":1,...}
local function alike_keys(n)
    local t = {}
    for i = 1, n do
        t[i] = '"' .. alike_key(i) .. '":' .. i
    end
    return "{" .. concat(t, ",") .. "}"
end

-- object(n) after 16n bytes of whitespace.
local function spaced_object(n)
    return (" \n"):rep(8 * n) .. object(n)
end

local PATTERNS = {
    { "proxy reads in reverse: m[i].role", messages, 250, function(s, n)
        local m = qjson.decode(s).messages
        for i = n, 1, -1 do assert(m[i].role == "user") end
    end },
    { "proxy reads forward, nested: m[i].content[1].text", messages, 125, function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n do assert(m[i].content[1].text) end
    end },
    { "proxy reads strided: m[(i * 7919) % n + 1].role", messages, 250, function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n do assert(m[(i * 7919) % n + 1].role == "user") end
    end },
    { "getters along paths: messages[i].content[0].text", messages, 250, function(s, n)
        local d = qjson.parse(s)
        for i = 0, n - 1 do assert(d:get_str("messages[" .. i .. "].content[0].text")) end
    end },
    { "getters in reverse: messages[n-1-i].role", messages, 250, function(s, n)
        local d = qjson.parse(s)
        for i = 0, n - 1 do assert(d:get_str("messages[" .. (n - 1 - i) .. "].role")) end
    end },
    { "JSON Pointers in reverse: /messages/i/content/0/type", messages, 250, function(s, n)
        local d = qjson.parse(s)
        for i = n - 1, 0, -1 do
            assert(d:get_str("/messages/" .. i .. "/content/0/type") == "text")
        end
    end },
    { "cursors: open(messages):open([i]):get_str(role), in reverse", messages, 250,
      function(s, n)
        local m = qjson.parse(s):open("messages")
        for i = n - 1, 0, -1 do assert(m:open("[" .. i .. "]"):get_str("role") == "user") end
    end },
    { "proxy reads by key: t[k..i]", object, 500, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do assert(t["k" .. i] == i) end
    end },
    -- The root's kind is not found past the whitespace at each read.
    { "proxy reads by key after as much whitespace: t[k..i]", spaced_object, 500,
      function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do assert(t["k" .. i] == i) end
    end },
    { "the same, the text given as a pointer (copied)", spaced_object, 500, function(s, n)
        local buf = ffi.new("char[?]", #s)
        ffi.copy(buf, s, #s)
        local t = qjson.decode(buf, #s)
        for i = 1, n do assert(t["k" .. i] == i) end
    end },
    { "getters by key: get_i64(k..i)", object, 500, function(s, n)
        local d = qjson.parse(s)
        for i = 1, n do assert(d:get_i64("k" .. i) == i) end
    end },
    { "writes during qjson.pairs: t[k] = v + 1", object, 500, function(s)
        local t = qjson.decode(s)
        for k, v in qjson.pairs(t) do t[k] = v + 1 end
    end },
    { "adding n new keys, then encoding", object, 500, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do t["new" .. i] = i end
        assert(#qjson.encode(t) > #s)
    end },
    { "qjson.pairs over n added keys", object, 500, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do t["new" .. i] = i end
        local c = 0
        for _ in qjson.pairs(t) do c = c + 1 end
        assert(c == 2 * n)
    end },
    { "qjson.len between writes", object, 500, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do
            t["k" .. i] = nil
            t["n" .. i] = i
            assert(qjson.len(t) == n)
        end
    end },
    { "repeated keys: len, pairs and reads of {k1:..,k1:..,...}", function(n)
        local t = {}
        for i = 1, n do t[i] = '"k' .. (i % 100) .. '":' .. i end
        return "{" .. concat(t, ",") .. "}"
      end, 500, function(s, n)
        local d = qjson.parse(s)
        local t = qjson.decode(s)
        assert(d:len() == 100 and qjson.len(t) == 100)
        local c = 0
        for _ in qjson.pairs(t) do c = c + 1 end
        assert(c == 100)
        for i = 1, n do assert(d:get_i64("k" .. (i % 100))) end
    end },
    { "nested qjson.ipairs over [{content:[1]},...] (the 1.5 MB attack)", function(n)
        return "[" .. string.rep('{"content":[1]},', n - 1) .. '{"content":[1]}]'
      end, 125, function(s)
        local sum = 0
        for _, e in qjson.ipairs(qjson.decode(s)) do
            for _, x in qjson.ipairs(e.content) do sum = sum + x end
        end
        assert(sum > 0)
    end },
    { "encoding an array of arrays whose every element changed", function(n)
        return "[" .. string.rep("[1,2],", n - 1) .. "[1,2]]"
      end, 250, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do t[i][2] = 3 end
        assert(#qjson.encode(t) == #s)
    end },
    { "encoding an array of arrays changed last to first (edits sorted)", function(n)
        return "[" .. string.rep("[1,2],", n - 1) .. "[1,2]]"
      end, 250, function(s, n)
        local t = qjson.decode(s)
        for i = n, 1, -1 do t[i][2] = 3 end
        assert(#qjson.encode(t) == #s)
    end },
    { "strings of escapes: parse and read", function(n)
        return '{"s":"' .. string.rep("\\n\\u00e9", n) .. '"}'
      end, 100000, function(s, n)
        assert(#qjson.parse(s):get_str("s") == 3 * n)
    end },
    -- A string of n * 64 KB whose 64 KB windows differ only at byte 40 000,
    -- where LuaJIT's string hash does not read: cut into 64 KB pieces of
    -- one length, each new piece was compared with every one before it.
    { "qjson.encode_pieces of a string alike in every 64 KB (plain and proxy)", function(n)
        local window = string.rep("A", 65536)
        local t = {}
        for i = 1, n do
            t[i] = window:sub(1, 39994) .. ("%06d"):format(i) .. window:sub(40001)
        end
        return '{"s":"' .. concat(t):sub(7) .. '"}'
      end, 12, function(s)
        local plain = qjson.decode(s, { lazy = false })
        local proxy = qjson.decode(s)
        proxy.x = 1
        assert(#qjson.encode_pieces(plain) >= 1 and #qjson.encode_pieces(proxy) >= 1)
    end },
    -- Messages alike but for digits near their end, each changed: the
    -- runs between the changes are strings of one length that differ
    -- only where LuaJIT's hash of a long string does not read.
    { "qjson.encode_pieces of a body whose alike messages are all changed", function(n)
        local t = {}
        for i = 1, n do
            t[i] = ('{"role":"user","content":"%s%08d"}'):format(("lorem "):rep(30), i)
        end
        return '{"messages":[' .. concat(t, ",") .. "]}"
      end, 1000, function(s)
        local body = qjson.decode(s)
        local m = body.messages
        for i = 1, qjson.len(m) do m[i].role = "assistant" end
        assert(#qjson.encode_pieces(body) >= 1)
    end },
    -- Every fourth message changed: the others are built from their
    -- source spans (lua/qjson/materialize.lua), each found unchanged by a
    -- search of the document's edits.
    { "qjson.materialize of a body with one message in four changed", messages, 1000,
      function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n, 4 do m[i].role = "assistant" end
        local plain = qjson.materialize(m)
        assert(plain[1].role == "assistant" and plain[n].content[1].text == "m" .. n)
    end },
    -- Each message changed, then it (or the one after it) encoded or
    -- materialized: every encode made the edits of every change so far,
    -- until the edits of a proxy below the root came from the records
    -- inside it (lua/qjson/edits.lua, `edits_for`).
    { "qjson.encode of each message right after changing it", messages, 300, function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n do
            m[i].role = "assistant"
            assert(qjson.encode(m[i]):find('"assistant"', 1, true))
        end
    end },
    { "qjson.encode of each message after changing its text", messages, 300, function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n do
            m[i].content[1].text = "redacted"
            assert(qjson.encode(m[i]):find('"redacted"', 1, true))
        end
    end },
    { "qjson.encode of the next message after changing one", messages, 300, function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n - 1 do
            m[i].role = "assistant"
            assert(qjson.encode(m[i + 1]):find('"user"', 1, true))
        end
    end },
    { "qjson.materialize of each message after changing its text", messages, 300,
      function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n do
            m[i].content[1].text = "redacted"
            assert(qjson.materialize(m[i]).content[1].text == "redacted")
        end
    end },
    -- A handler's writes in an order the body chose (a list of keys it
    -- names): the edits are sorted before they are written.
    { "qjson.encode after writes in an order built against quicksort", function(n)
        return { object(n), against_quicksort(n) }
      end, 1000, function(x, n)
        local t, order = qjson.decode(x[1]), x[2]
        for i = 1, n do t["k" .. (order[i] + 1)] = 0 end
        assert(#qjson.encode(t) < #x[1])
    end },
    -- 16 keys of one length that differ only at their ends, and the
    -- length asked for once per byte of a key: a small object's keys are
    -- compared pairwise, in full, to count the distinct ones (kept since:
    -- src/navigate/lookup.rs, SMALL_DISTINCT).
    { "doc:len() and qjson.len of an object of 16 long keys, n times", function(n)
        local t = {}
        for i = 1, 16 do
            t[i] = '"' .. ("A"):rep(n) .. ("%02d"):format(i) .. '":' .. i
        end
        return "{" .. concat(t, ",") .. "}"
      end, 2000, function(s, n)
        local d, p = qjson.parse(s), qjson.decode(s)
        for _ = 1, n do assert(d:len() == 16 and qjson.len(p) == 16) end
    end },
    -- Objects 65 536 levels down (max_depth raised), each written once: a
    -- write there made a record whose depth a pass over the text up to it
    -- found (until it was noted as the proxy was reached: lua/qjson/lazy.lua,
    -- DEEP_DEPTHS).
    { "writes to n objects 65 536 levels deep", function(n)
        local wrap = 65536
        local o = '{"k":0,"f":[' .. ("0,"):rep(255) .. "0]}"
        return ("["):rep(wrap) .. (o .. ","):rep(n - 1) .. o .. ("]"):rep(wrap)
      end, 1000, function(s, n)
        local inner = qjson.decode(s, { max_depth = 65538 })
        for _ = 1, 65535 do inner = inner[1] end
        for i = 1, n do inner[i].k = i end
        assert(inner[n].k == n and qjson.len(inner[n].f) == 256)
    end },
    -- An invalid text whose first error is found last: a control byte at
    -- the end (stage 1 reports it first, and the text before it is
    -- checked again), after an open object of n keys whose last repeats
    -- the first (under "error", open objects' keys are checked on that
    -- path): src/document.rs, `earliest_error`; src/validate/mod.rs,
    -- `first_with_repeats`.
    { "an invalid text whose first error is found last, under duplicate_keys = error",
      function(n)
        return object(n):sub(1, -2) .. ',"k1":0,"x":"\1"}'
      end, 4000, function(s)
        local ok, err = pcall(qjson.parse, s, { duplicate_keys = "error" })
        assert(not ok and err:find('duplicate key "k1"', 1, true), err)
    end },
    -- Keys of 308 bytes alike but for 8 digits where OpenResty's LuaJIT
    -- does not hash a string: every string of one made is compared with
    -- every one made before it, so the reads and encodes a sender shapes
    -- must make none of the keys the handler did not ask for.
    { "deleting one of n long alike keys, then encoding", alike_keys, 1000, function(s)
        local t = qjson.decode(s)
        t[alike_key(1)] = nil
        local pieces = qjson.encode_pieces(t)
        assert(not qjson.encode(t):find(alike_key(1), 1, true) and #pieces > 0)
    end },
    { "qjson.len of n long alike keys after a write", alike_keys, 1000, function(s, n)
        local t = qjson.decode(s)
        t[alike_key(2)] = 0
        t.x = 1
        assert(qjson.len(t) == n + 1)
    end },
    { "qjson.sse over events of long alike retry:, id: and data: lines", function(n)
        local lines = {}
        for i = 1, n do
            local v = alike_key(i)
            lines[i] = "retry: " .. v .. "\nid: " .. v .. "\ndata: " .. v .. "\ndata: " .. v
                       .. "\n\n"
        end
        return concat(lines)
      end, 1500, function(s, n)
        local stream, count = require("qjson.sse").new(), 0
        for at = 1, #s, 4096 do
            count = count + #stream:feed(s:sub(at, at + 4095))
        end
        assert(count == n)
    end },
    { "qjson.sse over long alike events, each cut in two, parsed and kept", function(n)
        local lines = {}
        for i = 1, n do
            lines[i] = 'data: {"k":"' .. alike_key(i) .. '","n":1}\n\n'
        end
        return concat(lines)
      end, 1500, function(s, n)
        -- (The events kept, as a filter that rewrites the response at its
        -- end keeps them. Each is cut 100 bytes before its end: its first
        -- part is then the same string for all, and its second, under 128
        -- bytes, is hashed whole, so that the chunks themselves are no
        -- chain of alike strings.)
        local stream, count, kept = require("qjson.sse").new(), 0, {}
        local event_len = #s / n
        for at = 1, #s, event_len do
            local cut = at + event_len - 100
            for _, half in ipairs({ s:sub(at, cut - 1), s:sub(cut, at + event_len - 1) }) do
                for _, ev in ipairs(stream:feed(half)) do
                    count = count + assert(ev:parse()):get_f64("n")
                    kept[#kept + 1] = ev
                end
            end
        end
        assert(count == n and #kept == n)
    end },
    { "long digit strings: parse and read", function(n)
        return '[' .. string.rep("1", n) .. ".5e-" .. n .. "]"
      end, 100000, function(s)
        assert(qjson.parse(s):get_f64("[0]") > 0)
    end },
}

describe("4x the elements costs at most 8x the time:", function()
    for _, p in ipairs(PATTERNS) do
        local name, make, n, run = p[1], p[2], p[3], p[4]
        it(name, function()
            assert_linear(make, run, n)
        end)
    end
end)
