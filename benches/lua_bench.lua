-- The comparison benchmark: lua-cjson, lua-resty-simdjson (when it can be
-- required) and qjson, side by side in one LuaJIT process per scenario.
--
--   luajit benches/lua_bench.lua                 every scenario, one fresh
--                                                process each (the small
--                                                documents' a second time
--                                                with HANDLERS=1), then
--                                                tables
--   luajit benches/lua_bench.lua SCENARIO        one scenario (what the
--                                                parent runs), raw rows
--   luajit benches/lua_bench.lua --report DOC PNG [NATIVE]
--                                                also writes the generated
--                                                part of DOC (markdown), the
--                                                chart PNG (gnuplot) and the
--                                                native results file NATIVE
--   QUICK=1 ...                                  a few calls per row, one
--                                                round: checks the harness,
--                                                not the speed
--   HANDLERS=1 ...                               each call in a coroutine of
--                                                its own, as nginx runs a
--                                                handler (benches/as_handler.lua)
--
-- Per workload: every compiled trace flushed (see `measure`), each library
-- warmed up with 50 calls, or a second of them (so the JIT compiles the
-- loops), a full GC, then 9 rounds in which every library runs for about
-- 50 ms in turn, each round timed up to the end of a full collection of
-- its garbage (see `measure`); per library the
-- median ops/s, the min-max range, the Lua heap growth over its rounds,
-- the process's peak RSS and each round's ops/s (ratios between libraries
-- are taken round by round: see `ratio`). Every workload's answer is checked against
-- cjson's before it is timed.

package.path = "lua/?.lua;benches/?.lua;" .. package.path

-- The baselines (tools/baselines.sh): OpenResty's lua-cjson fork and Kong's
-- lua-resty-simdjson, found before anything installed; without them,
-- Debian's lua-cjson 2.1.0 (upstream, about half the fork's speed on
-- strings).
local BASELINES = os.getenv("QJSON_BASELINES")
if BASELINES == "" then BASELINES = nil end
if BASELINES then
    package.cpath = BASELINES .. "/?.so;" .. package.cpath
    package.path = BASELINES .. "/lib/?.lua;" .. BASELINES .. "/lib/?/init.lua;"
                   .. package.path
    -- resty.simdjson outside nginx needs a few fields of ngx, and the
    -- lua-resty-core it loads checks for the nginx module version it was
    -- released with: claim that one.
    local base = package.searchpath("resty.core.base", package.path)
    local f = base and io.open(base)
    local version = f and tonumber(f:read("*a"):match("ngx_lua_version ~= (%d+)"))
    if f then f:close() end
    rawset(_G, "ngx", { config = { subsystem = "http", ngx_lua_version = version } })
    dofile(BASELINES .. "/ngx_stub.lua")
end

local ffi = require("ffi")
local cjson = require("cjson")
local qjson = require("qjson")
local lazy = require("qjson.lazy")
local qffi = require("qjson.ffi")
local payloads = require("payloads")
local as_handler = require("as_handler")

local QUICK = os.getenv("QUICK") == "1"
local ROUNDS = QUICK and 1 or 9
local ROUND_SECONDS = QUICK and 0 or 0.05
local WARMUP = QUICK and 2 or 50
local WARMUP_SECONDS = QUICK and 0 or 1
local HANDLERS = os.getenv("HANDLERS") == "1"

ffi.cdef [[
    struct qjson_bench_timespec { long tv_sec; long tv_nsec; };
    int clock_gettime(int clock, struct qjson_bench_timespec *ts);
]]
local ts = ffi.new("struct qjson_bench_timespec")
-- The thread's CPU time: on a shared machine, time spent descheduled
-- would otherwise be charged to whichever library was running.
local function now()
    ffi.C.clock_gettime(3, ts) -- CLOCK_THREAD_CPUTIME_ID
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function read_file(path)
    local f = io.open(path, "rb")
    if not f then
        return nil
    end
    local s = f:read("*a")
    f:close()
    return s
end

local function peak_rss_kb()
    local status = read_file("/proc/self/status") or ""
    return tonumber(status:match("VmHWM:%s*(%d+)")) or 0
end

local simdjson
do
    local ok, mod = pcall(require, "resty.simdjson")
    if ok then
        simdjson = mod.new()
    end
end

local function simdjson_decode(s)
    return simdjson:decode(s)
end

-- Deep equality of decoded values (metatables ignored: qjson marks empty
-- arrays with empty_array_mt, cjson 2.1 has nothing to mark them with).
local function same(a, b)
    if a == b then
        return true
    end
    if type(a) ~= "table" or type(b) ~= "table" then
        return false
    end
    for k, v in next, a do
        if not same(v, b[k]) then
            return false
        end
    end
    for k in next, b do
        if a[k] == nil then
            return false
        end
    end
    return true
end

local function rawlen(t)
    return #t
end

-- Payload shapes: what a gateway reads from each kind of body and the
-- changes it makes. `read(t, len)` works on plain tables (len = #) and on
-- proxies (len = qjson.len); `read_doc(doc)` does the same reads with
-- qjson.parse's path getters. Each returns a number summarising the reads.
local shapes = {}

shapes.chat = {
    read = function(t, len)
        local texts = 0
        local messages = t.messages
        for i = 1, len(messages) do
            texts = texts + #messages[i].content[1].text
        end
        return #t.model + t.temperature + texts
    end,
    read_doc = function(doc)
        local texts = 0
        for i = 0, doc:len("messages") - 1 do
            texts = texts + #doc:get_str("messages[" .. i .. "].content[0].text")
        end
        return #doc:get_str("model") + doc:get_f64("temperature") + texts
    end,
    modify_top = function(t, k) t.model = "gpt-4o-mini-" .. k end,
    add = function(t, k) t.x_gateway = k end,
    modify_nested = function(t, k) t.messages[1].content[1].text = "redacted " .. k end,
}

-- A chat request whose messages' content is a string: in Chinese
-- (payloads.chat_cjk), or source code (payloads.chat_code).
shapes.chat_text = {
    read = function(t, len)
        local chars = 0
        local messages = t.messages
        for i = 1, len(messages) do
            chars = chars + #messages[i].content
        end
        return #t.model + chars
    end,
    read_doc = function(doc)
        local chars = 0
        for i = 0, doc:len("messages") - 1 do
            chars = chars + #doc:get_str("messages[" .. i .. "].content")
        end
        return #doc:get_str("model") + chars
    end,
    modify_top = function(t, k) t.model = "qwen-plus-" .. k end,
    add = function(t, k) t.x_gateway = k end,
    modify_nested = function(t, k) t.messages[1].content = "redacted " .. k end,
}

shapes.github = {
    read = function(t, len)
        local sum = 0
        for i = 1, len(t) do
            local issue = t[i]
            sum = sum + #issue.title + #issue.user.login + len(issue.labels) + issue.number
        end
        return sum
    end,
    read_doc = function(doc)
        local sum = 0
        for i = 0, doc:len() - 1 do
            local issue = doc:open("[" .. i .. "]")
            sum = sum + #issue:get_str("title") + #issue:get_str("user.login")
                  + issue:len("labels") + issue:get_f64("number")
        end
        return sum
    end,
    modify_top = function(t, k) t[1].state = "closed " .. k end,
    add = function(t, k) t[1].x_gateway = k end,
    modify_nested = function(t, k) t[1].user.login = "redacted " .. k end,
}

-- twitter.json (the corpus): what a handler reads of each of its 100
-- statuses.
shapes.twitter = {
    read = function(t, len)
        local sum, statuses = 0, t.statuses
        for i = 1, len(statuses) do
            local status = statuses[i]
            sum = sum + #status.text + #status.user.screen_name + status.retweet_count
        end
        return sum
    end,
    read_doc = function(doc)
        local sum, statuses = 0, doc:open("statuses")
        for i = 0, statuses:len() - 1 do
            local status = statuses:open("[" .. i .. "]")
            sum = sum + #status:get_str("text") + #status:get_str("user.screen_name")
                  + status:get_f64("retweet_count")
        end
        return sum
    end,
}

shapes.sse = {
    read = function(t)
        local delta = t.choices[1].delta
        return #t.model + #(delta.content or "")
    end,
    read_doc = function(doc)
        local content = doc:get("choices[0].delta.content")
        return #doc:get_str("model") + #(content or "")
    end,
    modify_top = function(t, k) t.model = "gpt-4o-" .. k end,
    add = function(t, k) t.x_gateway = k end,
    modify_nested = function(t, k) t.choices[1].delta.content = "redacted " .. k end,
}

-- A tool call's arguments, about 70 bytes.
shapes.tool = {
    read = function(t)
        return #t.order_id + t.options.max_items
    end,
    read_doc = function(doc)
        return #doc:get_str("order_id") + doc:get_f64("options.max_items")
    end,
    modify_top = function(t, k) t.order_id = "B-" .. k end,
    add = function(t, k) t.x_gateway = k end,
    modify_nested = function(t, k) t.options.max_items = k end,
}

-- Workloads: a label and, per library, a function of one payload text
-- whose result `verify(result, cjson's result, text)` checks once before
-- timing.
-- The plain tables the encode workload starts from: made on its first,
-- untimed call (the check against cjson), so the other workloads of a
-- scenario run without these tables on the heap.
local plain_of = setmetatable({}, { __index = function(t, s)
    local v = cjson.decode(s)
    t[s] = v
    return v
end })

local function same_when_decoded(got, expected)
    return same(cjson.decode(got), cjson.decode(expected))
end

-- Decode, change with `change` (or not), encode; per library. A change
-- writes a new value each call, so every output is a new string, as a
-- gateway's are: an output equal to the last one would be found interned
-- and never allocated, hiding the cost of a fresh body-sized string.
local change_count = 0

-- The value of the next change: the change's number k times 10^(k % 9),
-- so that outputs differ in length as a gateway's do, not only in a few
-- digits. OpenResty's LuaJIT hashes a string of 128 bytes or more from
-- its first nine sixteenths and last 8 bytes only: outputs of one length
-- whose new value lies in between share one hash chain, and each new one
-- is compared with every one before it that the collector has not swept
-- (docs/reliability.md, "Strings LuaJIT interns"). Where the value lands
-- depends on the library's key order, which for cjson's output changes
-- from process to process: with the number alone, SSE's nested change
-- ran 0.4x to 1.8x cjson between reports of the same code. Numbers of
-- seven digits take eight lengths this way (times 10^8 they print as
-- 1.234567e+14), each chain an eighth as long. Every value is new: were
-- k * 10^(k % 9) = j * 10^(j % 9) with j = k * 10^d, then j % 9 = k % 9
-- (10 is 1 modulo 9) and d = 0. (A number of at most 14 significant
-- digits: both encoders print it exactly, with %.14g, and no string is
-- made for it.)
local function next_change()
    change_count = change_count + 1
    return change_count * 10 ^ (change_count % 9)
end

-- A workload of one library: decode, `change` (or not), encode; its
-- result is encode's first.
local function edited(decode, encode, change)
    return function(s)
        local t = decode(s)
        if change then
            change(t, next_change())
        end
        return (encode(t))
    end
end

local function edits(change)
    return {
        cjson = edited(cjson.decode, cjson.encode, change),
        simdjson = simdjson and edited(simdjson_decode, cjson.encode, change),
        ["qjson.decode"] = edited(qjson.decode, qjson.encode, change),
    }
end

-- The same change encoded with qjson.encode_pieces (its pieces, what
-- ngx.print or a body filter's ngx.arg[1] takes as they are), checked as
-- their text.
local function same_text_when_decoded(got, expected)
    if type(got) == "table" then
        got = table.concat(got)
    end
    return same_when_decoded(got, expected)
end

-- The workload of `change`, labelled `label`; with `pieces`, encoded with
-- qjson.encode_pieces too.
local function change_workload(label, change, pieces)
    if not pieces then
        return { label, same_when_decoded, edits(change) }
    end
    local list = edits(change)
    list["qjson pieces"] = edited(qjson.decode, qjson.encode_pieces, change)
    return { label, same_text_when_decoded, list }
end

-- An untouched document must come back as its own bytes; cjson's output
-- (and a re-encode of simdjson's tables) is checked by value, as cjson
-- rounds numbers to 14 digits.
local roundtrip = { "decode + encode unmodified", function(got, expected, s)
    return got == s or same_when_decoded(got, expected)
end, edits(nil) }

-- The reads and changes of a payload shape.
-- The "read fields" workload of a shape: its reads after each library's
-- decode.
local function read_fields(shape)
    local read, read_doc = shape.read, shape.read_doc
    local function plain_read(decode)
        return function(s) return read(decode(s), rawlen) end
    end
    return { "read fields", same, {
        cjson = plain_read(cjson.decode),
        simdjson = simdjson and plain_read(simdjson_decode),
        ["qjson.parse"] = function(s) return read_doc(qjson.parse(s)) end,
        ["qjson.decode"] = function(s) return read(qjson.decode(s), qjson.len) end,
    } }
end

local NESTED_CHANGE = "modify a nested field + encode"

-- (`pieces`: the changes also with qjson.encode_pieces.)
local function workloads_for(shape, pieces)
    return {
        read_fields(shape),
        roundtrip,
        change_workload("modify a top-level field + encode", shape.modify_top, pieces),
        change_workload("add a field + encode", shape.add, pieces),
        change_workload(NESTED_CHANGE, shape.modify_nested, pieces),
    }
end

local EAGER = { lazy = false }

local read_everything = { "read everything (plain tables)", same, {
    cjson = cjson.decode,
    simdjson = simdjson and simdjson_decode,
    ["qjson eager"] = function(s) return qjson.decode(s, EAGER) end,
    ["qjson materialize"] = function(s) return qjson.materialize(qjson.decode(s)) end,
} }

-- cjson.encode's output exactly, not just the same value.
local encode_plain = { "encode plain tables", function(a, b) return a == b end, {
    cjson = function(s) return cjson.encode(plain_of[s]) end,
    qjson = function(s) return qjson.encode(plain_of[s]) end,
} }

local validate = { "validate whole text", function(a, b) return a == b end, {
    cjson = function(s) return type(cjson.decode(s)) end,
    simdjson = simdjson and function(s) return type(simdjson:decode(s)) end,
    ["qjson.parse"] = function(s)
        local kind = qjson.parse(s):typeof()
        return (kind == "object" or kind == "array") and "table" or kind
    end,
} }

-- Access patterns (issue 12): one loop over the `n` messages or keys of
-- payloads.access(n), in an order, reading a field. Every read is O(1)
-- amortised in each library, so a flat throughput from 1k to 100k is
-- the point of these rows.
local function forward(i) return i end
local function reverse(i, n) return n + 1 - i end
local function strided(i, n) return (i * 7919) % n + 1 end

local reads = {
    role = {
        plain = function(m, j) return #m[j].role end,
        doc = function(d, j) return #d:get_str("messages[" .. (j - 1) .. "].role") end,
    },
    text = {
        plain = function(m, j) return #m[j].content[1].text end,
        doc = function(d, j) return #d:get_str("messages[" .. (j - 1) .. "].content[0].text") end,
    },
}

local function message_pattern(label, order, field)
    local read, read_doc = reads[field].plain, reads[field].doc
    local function plain(decode, len)
        return function(s)
            local m = decode(s).messages
            local n, sum = len(m), 0
            for i = 1, n do sum = sum + read(m, order(i, n)) end
            return sum
        end
    end
    return { label, same, {
        cjson = plain(cjson.decode, rawlen),
        simdjson = simdjson and plain(simdjson_decode, rawlen),
        ["qjson.parse"] = function(s)
            local d = qjson.parse(s)
            local n, sum = d:len("messages"), 0
            for i = 1, n do sum = sum + read_doc(d, order(i, n)) end
            return sum
        end,
        ["qjson.decode"] = plain(qjson.decode, qjson.len),
    } }
end

local function key_reads(decode, len)
    return function(s)
        local t = decode(s)
        local index, sum = t.index, 0
        for i = 1, len(t.messages) do sum = sum + index["k" .. i] end
        return sum
    end
end

local access_patterns = {
    message_pattern("access: forward, m[i].role", forward, "role"),
    message_pattern("access: reverse, m[n+1-i].role", reverse, "role"),
    message_pattern("access: strided, m[i*7919 % n + 1].role", strided, "role"),
    message_pattern("access: nested, m[i].content[1].text", forward, "text"),
    { "access: wide object, t.index[\"k\" .. i]", same, {
        cjson = key_reads(cjson.decode, rawlen),
        simdjson = simdjson and key_reads(simdjson_decode, rawlen),
        ["qjson.parse"] = function(s)
            local d = qjson.parse(s)
            local sum = 0
            for i = 1, d:len("messages") do sum = sum + d:get_i64("index.k" .. i) end
            return sum
        end,
        ["qjson.decode"] = key_reads(qjson.decode, qjson.len),
    } },
}

-- The least a rewrite of a body can cost in Lua: parse it and make one
-- new string of its size (cjson's row: the string alone). "modify a
-- top-level field + encode" is measured against this.
local floor_buffer = require("string.buffer").new()
-- The last copy, kept: a string only measured for its length and dropped
-- is one the compiler need not make at all (LuaJIT sank it, and the cjson
-- column showed 35M "copies" of 2 KB a second).
local last_copy
local function fresh_copy(s)
    change_count = change_count + 1
    last_copy = floor_buffer:reset():put(s, change_count):tostring()
    return #last_copy
end
local floor = { "floor: parse + one fresh string of the body", same, {
    cjson = fresh_copy,
    ["qjson.parse"] = function(s)
        qjson.parse(s)
        return fresh_copy(s)
    end,
} }

-- What a document costs before anything is read from it.
local fixed_cost = { "fixed cost: decode, read nothing", function() return true end, {
    cjson = cjson.decode,
    simdjson = simdjson and simdjson_decode,
    ["qjson.parse"] = qjson.parse,
    ["qjson.decode"] = qjson.decode,
    ["qjson eager"] = function(s) return qjson.decode(s, EAGER) end,
} }

local function with_plain(list)
    list[#list + 1] = read_everything
    list[#list + 1] = encode_plain
    return list
end

-- Prints (as NOTE lines) the memory one decoded document of `text` holds
-- while alive, per library: Lua heap plus qjson's native bytes, averaged
-- over 10 000 documents kept at once.
local function memory_per_document(text)
    local N = 10000
    local function measure_one(label, decode, native_of)
        local keep = {}
        collectgarbage()
        collectgarbage()
        local heap = collectgarbage("count")
        local native = 0
        for i = 1, N do
            keep[i] = decode(text)
        end
        collectgarbage()
        collectgarbage()
        local lua_bytes = (collectgarbage("count") - heap) * 1024 - 8 * N
        if native_of then
            for i = 1, N do native = native + native_of(keep[i]) end
        end
        print(string.format("NOTE\tmemory per decoded document of %d B, %-12s %5.0f B"
            .. " (Lua heap %.0f + native %.0f)", #text, label .. ":",
            (lua_bytes + native) / N, lua_bytes / N, native / N))
        keep = nil -- luacheck: ignore 311
    end
    measure_one("cjson", cjson.decode)
    measure_one("qjson.parse", qjson.parse, function(d) return d:memory() end)
    measure_one("qjson.decode", qjson.decode, function(v)
        local st = lazy.proxy_info(v)
        return st and tonumber(qffi.C.qjson_memory(lazy.live_ptr(st))) or 0
    end)
    measure_one("qjson eager", function(s) return qjson.decode(s, EAGER) end)
end

-- Prints (as a NOTE line) where each library's nested change of an SSE
-- event writes its new value: the nested change's ratio follows whether
-- LuaJIT's string hash reads it in cjson's output, whose key order is
-- drawn per process (payloads.nested_change_where).
local function nested_value_position(text)
    print("NOTE\tnested SSE change: " .. payloads.nested_change_where(text, cjson, qjson))
end

-- Scenarios: a name, the payload texts a timed call cycles through, and
-- the workloads. Built lazily: a scenario process makes only its own.
local scenarios = {}
scenarios[#scenarios + 1] = {
    name = "empty {}",
    texts = function() return { "{}" } end,
    workloads = function() return { fixed_cost } end,
    notes = function(texts) memory_per_document(texts[1]) end,
}
scenarios[#scenarios + 1] = {
    name = "tool-call",
    texts = function() return { payloads.TOOL_CALL } end,
    workloads = function()
        local list = with_plain(workloads_for(shapes.tool))
        table.insert(list, 1, fixed_cost)
        return list
    end,
    notes = function(texts) memory_per_document(texts[1]) end,
}
for _, rung in ipairs(payloads.ladder) do
    scenarios[#scenarios + 1] = {
        name = "chat " .. rung[1],
        texts = function() return { payloads.chat(rung[2]) } end,
        workloads = function()
            local list = with_plain(workloads_for(shapes.chat))
            list[#list + 1] = floor
            return list
        end,
    }
end
-- The Chinese chat request as Python's json.dumps sends it by default:
-- every character a \uXXXX escape.
for _, size in ipairs({ { "9k", 4096 }, { "196k", 100e3 } }) do
    scenarios[#scenarios + 1] = {
        name = "cjk-escaped " .. size[1],
        texts = function() return { payloads.ascii_escaped(payloads.chat_cjk(size[2])) } end,
        workloads = function() return with_plain(workloads_for(shapes.chat_text)) end,
    }
end
-- Source code in a chat message: a JSON escape every 21 bytes.
scenarios[#scenarios + 1] = {
    name = "chat-code 100k",
    texts = function() return { payloads.chat_code(100e3) } end,
    workloads = function() return with_plain(workloads_for(shapes.chat_text)) end,
}
scenarios[#scenarios + 1] = {
    name = "github-100k",
    texts = function() return { payloads.github(100e3) } end,
    workloads = function() return with_plain(workloads_for(shapes.github)) end,
}
scenarios[#scenarios + 1] = {
    name = "sse",
    texts = function() return payloads.sse_events(200) end,
    workloads = function() return with_plain(workloads_for(shapes.sse, true)) end,
    notes = function(texts)
        memory_per_document(texts[1])
        nested_value_position(texts[2])
    end,
}
-- The SSE events' nested change in a worker holding 10 MB of Lua objects,
-- as a gateway's does (routes, plugin configs, caches): the collector's
-- cycles are that much longer, and every output a cycle makes stays in
-- LuaJIT's string table until it ends (see `next_change`).
scenarios[#scenarios + 1] = {
    name = "sse, 10 MB heap",
    heap_mb = 10,
    texts = function() return payloads.sse_events(200) end,
    workloads = function()
        return { change_workload(NESTED_CHANGE, shapes.sse.modify_nested, true) }
    end,
}
scenarios[#scenarios + 1] = {
    name = "interleaved",
    texts = function()
        return { payloads.chat(100e3), payloads.chat(200e3), payloads.chat(500e3),
                 payloads.chat(1e6) }
    end,
    workloads = function() return workloads_for(shapes.chat) end,
}
for _, size in ipairs({ { "1k", 1e3 }, { "10k", 1e4 }, { "100k", 1e5 } }) do
    scenarios[#scenarios + 1] = {
        name = "access " .. size[1],
        texts = function() return { payloads.access(size[2]) } end,
        workloads = function() return access_patterns end,
    }
end
local corpus_dir = (os.getenv("QJSON_DATA") or "../shared/data") .. "/corpus/"
for _, name in ipairs({ "twitter", "citm_catalog", "canada" }) do
    scenarios[#scenarios + 1] = {
        name = name,
        texts = function()
            return { (assert(read_file(corpus_dir .. name .. ".json"), "missing " .. name)) }
        end,
        -- encode_plain last: the tables it keeps would weigh on the others.
        workloads = function()
            local list = { validate, read_everything, roundtrip, encode_plain }
            if shapes[name] then
                table.insert(list, 2, read_fields(shapes[name]))
            end
            return list
        end,
    }
end

-- Eager decode's peak memory: peak RSS above the text while one text of
-- PEAK_MB is decoded into plain tables, per shape and library, each in a
-- fresh process (`lua_bench.lua --peak-memory LIB SHAPE`), as NOTE lines.
local PEAK_MB = QUICK and 2 or 100
local PEAK_SHAPES = { "[0,...]", '[{"a":1},...]', "twitter", "citm_catalog", "canada" }
local PEAK_LIBS = { cjson = cjson.decode,
                    ["qjson eager"] = function(s) return qjson.decode(s, EAGER) end }

local function status_kb(field)
    return tonumber((read_file("/proc/self/status") or ""):match(field .. ":%s*(%d+)"))
end

-- In the child: builds the text, resets the peak (Linux 4.0+), decodes,
-- prints the text's size and the peak above the resident size before.
local function peak_memory_child(lib, shape)
    local unit = shape == "[0,...]" and "0," or shape == '[{"a":1},...]' and '{"a":1},'
                 or assert(read_file(corpus_dir .. shape .. ".json"), "missing " .. shape)
                    :gsub("%s+$", "") .. ","
    local n = math.max(1, math.floor(PEAK_MB * 1e6 / #unit))
    local text = "[" .. string.rep(unit, n - 1) .. unit:sub(1, -2) .. "]"
    unit = nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    local f = io.open("/proc/self/clear_refs", "w")
    local reset = f and f:write("5") and f:close()
    local base = status_kb("VmRSS")
    local v = PEAK_LIBS[lib](text)
    local peak = status_kb("VmHWM")
    assert(type(v) == "table")
    print(string.format("PEAK\t%d\t%s", #text, reset and (peak - base) * 1024 or "-"))
end

local function eager_peak_memory()
    local interpreter = arg[-1] or "luajit"
    for _, shape in ipairs(PEAK_SHAPES) do
        local per_byte = {}
        for _, lib in ipairs({ "cjson", "qjson eager" }) do
            local p = assert(io.popen(string.format("%s %s --peak-memory %q %q",
                interpreter, arg[0], lib, shape)))
            local out = p:read("*a")
            assert(p:close(), "peak memory child failed: " .. lib .. " " .. shape)
            local bytes, peak = out:match("PEAK\t(%d+)\t(%S+)")
            per_byte[lib] = tonumber(peak) and tonumber(peak) / tonumber(bytes)
        end
        local c, q = per_byte.cjson, per_byte["qjson eager"]
        print(string.format("NOTE\teager decode peak RSS above the text, %d MB of %-15s"
            .. " cjson %5.2f B/B, qjson eager %5.2f B/B (%.2fx cjson)", PEAK_MB, shape .. ":",
            c or 0 / 0, q or 0 / 0, c and q and q / c or 0 / 0))
    end
end

scenarios[#scenarios + 1] = {
    name = "eager peak memory",
    texts = function() return { "" } end,
    workloads = function() return {} end,
    notes = eager_peak_memory,
}

local LIBRARIES = { "cjson", "simdjson", "qjson.parse", "qjson.decode", "qjson pieces",
                    "qjson eager", "qjson materialize", "qjson" }

-- Calls `fn` on `texts` in turn until `calls` calls are done; returns
-- the seconds taken.
--
-- Each function gets a loop of its own, compiled from source: one loop
-- shared by every library is compiled for the first one timed, and
-- reaches the others through side exits (which charged every qjson row).
-- Each result is kept (until the next), as a handler keeps what it
-- decodes: a result nothing keeps, LuaJIT's allocation sinking may never
-- make when the library's Lua code is compiled into the loop's trace
-- (qjson's eager decode by shape: lua/qjson/shapes.lua), where a C
-- function such as cjson.decode makes it regardless.
local TIMED_LOOP = [[
    local now = ...
    local kept
    return function(fn, texts, calls)
        local n = #texts
        local start = now()
        for k = 1, calls do
            kept = fn(texts[(k - 1) % n + 1])
        end
        kept = nil
        return now() - start
    end
]]
local loops = setmetatable({}, { __mode = "k" })
local function timed(fn, texts, calls)
    local loop = loops[fn]
    if not loop then
        loop = assert(load(TIMED_LOOP, "=lua_bench timed loop"))(now)
        loops[fn] = loop
    end
    return loop(fn, texts, calls)
end

-- This file's functions: the workloads and the shape functions they call.
local THIS_FILE = debug.getinfo(1, "S").source
-- The files whose functions `own` copies: this one, and the handler
-- wrapper's (benches/as_handler.lua), whose closure holds the workload.
local OWNED = { [THIS_FILE] = true, [debug.getinfo(as_handler, "S").source] = true }

-- A copy of function `fn` of these files with bytecode of its own, and so
-- traces of its own. A workload of one library and the shape functions it
-- calls (`read`, a change) share their bytecode with the other libraries'
-- when made from the same source: LuaJIT compiles them for whichever ran
-- first and sends the others through side exits, as the shared timing
-- loop did (see TIMED_LOOP). Function upvalues from these files (OWNED)
-- are copied the same way (`copies` keeps one copy per function); every
-- other upvalue stays shared with `fn`.
local function own(fn, copies)
    copies = copies or {}
    if copies[fn] then return copies[fn] end
    local info = debug.getinfo(fn, "Su")
    if not OWNED[info.source] then return fn end
    local copy = assert(loadstring(string.dump(fn), info.source))
    copies[fn] = copy
    for i = 1, info.nups do
        local _, value = debug.getupvalue(fn, i)
        if type(value) == "function" and OWNED[debug.getinfo(value, "S").source] then
            debug.setupvalue(copy, i, own(value, copies))
        else
            debug.upvaluejoin(copy, i, fn, i)
        end
    end
    return copy
end

-- The median, least and greatest of the numbers in `list`, left as it
-- is. Its length is odd wherever it is called: ROUNDS (1 or 9) rounds,
-- or their ratios.
local function median(list)
    local sorted = { unpack(list) }
    table.sort(sorted)
    return sorted[(#sorted + 1) / 2], sorted[1], sorted[#sorted]
end

-- Times the libraries `checked` (name -> function of one text, checked
-- against cjson; each timed as its own copy, see `own`) side by side:
-- each is warmed up (WARMUP calls, or fewer when they take over a
-- second: a call over a big body runs its inner loops often enough to
-- compile) and given enough calls for a round of about ROUND_SECONDS;
-- then ROUNDS rounds run every library once each, in an order that
-- rotates, so a slow spell of the shared machine falls on all of them
-- alike; a round is timed up to the end of a full collection of its
-- garbage. Returns, per library, ops/s (median, min, max) and the Lua heap
-- growth over its rounds in KB.
local function measure(checked, texts)
    local n = #texts
    local libs, calls, fns = {}, {}, {}
    -- Each workload starts with no compiled code: traces compiled for the
    -- workloads before it hold guards on their functions (a side trace
    -- that returns out of qjson checks which function it returns to, and
    -- each workload's is a copy of its own, see `own`), which the next
    -- one's calls failed on every call, sometimes into side traces that
    -- never compiled (docs/benchmarks.md, "The harness's own traces").
    jit.flush()
    for _, lib in ipairs(LIBRARIES) do
        local fn = checked[lib]
        fn = fn and own(HANDLERS and as_handler(fn) or fn)
        fns[lib] = fn
        if fn then
            libs[#libs + 1] = lib
            local warm_until = now() + WARMUP_SECONDS
            for k = 1, math.max(WARMUP, n) do
                fn(texts[(k - 1) % n + 1])
                if k >= n and now() > warm_until then break end
            end
            -- Calls per round: doubled until they take a tenth of a round.
            local c = n
            while c < 2 ^ 40 do
                local seconds = timed(fn, texts, c)
                if seconds >= ROUND_SECONDS / 10 then
                    c = math.max(n, math.floor(c * ROUND_SECONDS / seconds))
                    break
                end
                c = c * 2
            end
            calls[lib] = c
        end
    end
    local rates, grown = {}, {}
    for _, lib in ipairs(libs) do
        rates[lib], grown[lib] = {}, 0
    end
    collectgarbage()
    collectgarbage()
    for r = 1, ROUNDS do
        for j = 1, #libs do
            local lib = libs[(r + j - 2) % #libs + 1]
            local heap = collectgarbage("count")
            local seconds = timed(fns[lib], texts, calls[lib])
            grown[lib] = grown[lib] + collectgarbage("count") - heap
            -- The round ends with its garbage collected, on its clock: a
            -- round left garbage to the next library's round, which paid
            -- for it. On citm_catalog's eager decode (a few calls a round,
            -- a collection cycle every few calls) that moved the ratio
            -- between 1.0x and 1.7x from run to run.
            local start = now()
            collectgarbage()
            seconds = seconds + now() - start
            rates[lib][r] = calls[lib] / seconds
        end
    end
    local results = {}
    for _, lib in ipairs(libs) do
        local mid, lo, hi = median(rates[lib])
        -- The rounds in order too: a ratio between two libraries is taken
        -- round by round (see `ratio`).
        results[lib] = { mid, lo, hi, grown[lib], rates[lib] }
    end
    return libs, results
end

-- About `mb` MB of small live tables, for a scenario run in a heap like a
-- gateway worker's.
local function live_heap(mb)
    collectgarbage()
    local base, t, n = collectgarbage("count"), {}, 0
    while collectgarbage("count") - base < mb * 1024 do
        for _ = 1, 1000 do
            n = n + 1
            t[n] = { n }
        end
    end
    return t
end

local function run_scenario(scenario)
    local live = scenario.heap_mb and live_heap(scenario.heap_mb)
    local texts = scenario.texts()
    local bytes = 0
    for _, s in ipairs(texts) do
        bytes = bytes + #s
    end
    bytes = bytes / #texts
    for _, workload in ipairs(scenario.workloads()) do
        local label, verify, fns = workload[1], workload[2], workload[3]
        local expected = {}
        -- Each library's checked calls make the same changes as cjson's.
        change_count = 0
        for k, s in ipairs(texts) do
            expected[k] = fns.cjson(s)
        end
        for _, lib in ipairs(LIBRARIES) do
            local fn = fns[lib]
            if fn then
                change_count = 0
                for k, s in ipairs(texts) do
                    if not verify(fn(s), expected[k], s) then
                        error(string.format("%s / %s / %s: the result differs from cjson's",
                            scenario.name, label, lib))
                    end
                end
            end
        end
        local libs, results = measure(fns, texts)
        local rss = peak_rss_kb()
        for _, lib in ipairs(libs) do
            local mid, lo, hi, heap, rounds = unpack(results[lib])
            print(table.concat({ "ROW", scenario.name, bytes, label, lib,
                mid, lo, hi, heap, rss, table.concat(rounds, ",") }, "\t"))
        end
    end
    if scenario.notes then
        scenario.notes(texts)
    end
    -- (Alive to the end.)
    return live
end

local function human_rate(ops, bytes)
    local mbs = ops * bytes / 1e6
    if mbs >= 1000 then
        return string.format("%.2f GB/s", mbs / 1000)
    end
    return string.format("%.0f MB/s", mbs)
end

local function human_size(bytes)
    if bytes >= 1e6 then
        return string.format("%.1f MB", bytes / 1e6)
    end
    return string.format("%.1f KB", bytes / 1e3)
end

-- Runs every scenario in its own process; returns the rows and the notes.
-- The small documents run once more as nginx runs a handler (HANDLERS=1,
-- benches/as_handler.lua), their rows named SCENARIO .. AS_HANDLER: in the
-- harness's loop LuaJIT compiles a workload into the loop's own trace,
-- which a request handler never is, and the smaller the document the more
-- of qjson's lead that is (docs/benchmarks.md, "Small documents as
-- handlers").
local HANDLER_SCENARIOS = { "tool-call", "sse", "chat 2 KB" }
local AS_HANDLER = ", as a handler"

local function collect_rows()
    local interpreter = arg[-1] or "luajit"
    local rows, notes = {}, {}
    local runs = {}
    for _, scenario in ipairs(scenarios) do
        runs[#runs + 1] = { scenario.name, "", "" }
    end
    for _, name in ipairs(HANDLER_SCENARIOS) do
        runs[#runs + 1] = { name, "HANDLERS=1 ", AS_HANDLER }
    end
    for _, run in ipairs(runs) do
        local name, env, suffix = run[1], run[2], run[3]
        io.stderr:write("  ", name, suffix, "\n")
        local p = assert(io.popen(string.format("%s%s %s %q", env, interpreter, arg[0], name)))
        for line in p:lines() do
            local f = {}
            for field in line:gmatch("[^\t]+") do
                f[#f + 1] = field
            end
            if f[1] == "ROW" then
                local rounds = {}
                for rate in (f[11] or ""):gmatch("[^,]+") do
                    rounds[#rounds + 1] = tonumber(rate)
                end
                rows[#rows + 1] = {
                    scenario = f[2] .. suffix, bytes = tonumber(f[3]), workload = f[4], lib = f[5],
                    median = tonumber(f[6]), lo = tonumber(f[7]), hi = tonumber(f[8]),
                    heap = tonumber(f[9]), rss = tonumber(f[10]), rounds = rounds,
                }
            elseif f[1] == "NOTE" then
                -- A handler's run measures memory as the loop's did.
                if suffix == "" then
                    notes[#notes + 1] = f[2]
                end
            else
                print(line)
            end
        end
        assert(p:close(), "scenario failed: " .. name .. suffix)
    end
    return rows, notes
end

-- The rows grouped: workloads in first-seen order, and a lookup of one
-- row by scenario, workload and library.
local function index_rows(rows)
    local by_key, order, seen = {}, {}, {}
    for _, r in ipairs(rows) do
        by_key[r.scenario .. "\0" .. r.workload .. "\0" .. r.lib] = r
        if not seen[r.workload] then
            seen[r.workload] = true
            order[#order + 1] = r.workload
        end
    end
    return function(scenario, workload, lib)
        return by_key[scenario .. "\0" .. workload .. "\0" .. lib]
    end, order
end

-- How many times faster row r ran than row `base` (another library on
-- the same workload, so with as many rounds): the median over the rounds
-- of their ratio in each round. Both ran in every round, back to back, so
-- a slow spell of the shared machine slows both sides of a round's ratio,
-- where the ratio of the two medians pairs rounds that may be seconds
-- apart (docs/benchmarks.md, "Lua ratios, round by round").
local function ratio(r, base)
    if not base then
        return "-"
    end
    local ratios = {}
    for k = 1, #r.rounds do
        ratios[k] = r.rounds[k] / base.rounds[k]
    end
    return string.format("%.1fx", (median(ratios)))
end

local function print_tables(rows)
    local find, order = index_rows(rows)
    for _, workload in ipairs(order) do
        print()
        print("## " .. workload)
        print(string.format("%-14s %-17s %12s %19s %10s %11s %9s %10s %8s %8s",
            "payload", "library", "ops/s", "min-max", "ns/op", "throughput",
            "heap KB", "peak RSS", "/cjson", "/simdjson"))
        for _, r in ipairs(rows) do
            if r.workload == workload then
                print(string.format("%-14s %-17s %12.1f %19s %10.0f %11s %9.0f %7.0f MB %8s %8s",
                    r.scenario, r.lib, r.median,
                    string.format("%.1f-%.1f", r.lo, r.hi), 1e9 / r.median,
                    human_rate(r.median, r.bytes),
                    r.heap, r.rss / 1024, ratio(r, find(r.scenario, workload, "cjson")),
                    ratio(r, find(r.scenario, workload, "simdjson"))))
            end
        end
    end
end

-- The markdown tables: per workload, one row per payload, one column per
-- library (ops/s, and the ratio to cjson for the others).
local function markdown_tables(rows)
    local find, order = index_rows(rows)
    local out = {}
    for _, workload in ipairs(order) do
        local libs, scenario_order, seen_lib, seen_scenario = {}, {}, {}, {}
        for _, r in ipairs(rows) do
            if r.workload == workload then
                if not seen_lib[r.lib] then
                    seen_lib[r.lib] = true
                    libs[#libs + 1] = r.lib
                end
                if not seen_scenario[r.scenario] then
                    seen_scenario[r.scenario] = true
                    scenario_order[#scenario_order + 1] = r
                end
            end
        end
        out[#out + 1] = "\n### " .. workload .. "\n"
        local head, rule = { "payload", "size" }, { "---", "---:" }
        for _, lib in ipairs(libs) do
            head[#head + 1] = lib
            rule[#rule + 1] = "---:"
        end
        out[#out + 1] = "| " .. table.concat(head, " | ") .. " |"
        out[#out + 1] = "|" .. table.concat(rule, "|") .. "|"
        for _, first in ipairs(scenario_order) do
            local cells = { first.scenario, human_size(first.bytes) }
            local base = find(first.scenario, workload, "cjson")
            for _, lib in ipairs(libs) do
                local r = find(first.scenario, workload, lib)
                local cell = "-"
                if r then
                    cell = string.format("%.0f", r.median)
                    if lib ~= "cjson" and base then
                        cell = cell .. " (" .. ratio(r, base) .. ")"
                    end
                end
                cells[#cells + 1] = cell
            end
            out[#out + 1] = "| " .. table.concat(cells, " | ") .. " |"
        end
    end
    return table.concat(out, "\n")
end

local function command_output(cmd)
    local p = io.popen(cmd .. " 2>/dev/null")
    if not p then
        return ""
    end
    local s = p:read("*a") or ""
    p:close()
    return (s:gsub("%s+$", ""))
end

local function machine()
    local cpuinfo = read_file("/proc/cpuinfo") or ""
    local flags = {}
    local cpu_flags = " " .. (cpuinfo:match("\nflags%s*:%s*([^\n]*)") or "") .. " "
    -- (/proc/cpuinfo calls LZCNT "abm".)
    local used = { "avx2", "pclmulqdq", "popcnt", "bmi1", "bmi2", "abm", "avx512f", "avx512bw",
                   "avx512vbmi", "avx512_vbmi2" }
    for _, flag in ipairs(used) do
        if cpu_flags:find(" " .. flag .. " ", 1, true) then
            flags[#flags + 1] = flag
        end
    end
    return {
        "- date: " .. os.date("!%Y-%m-%d %H:%M UTC"),
        "- CPU: " .. (cpuinfo:match("model name%s*:%s*([^\n]*)") or "?") .. ", "
            .. command_output("nproc") .. " cores; flags used by qjson: "
            .. table.concat(flags, ", "),
        "- OS: " .. command_output("uname -sr") .. ", "
            .. command_output(". /etc/os-release && echo $PRETTY_NAME"),
        "- LuaJIT: " .. jit.version .. " (Lua 5.2 compatibility: "
            .. (rawlen(setmetatable({}, { __len = function() return 1 end })) == 1
                and "on" or "off") .. ")",
        "- lua-cjson: " .. tostring(cjson._VERSION) .. (BASELINES
            and " (OpenResty's fork, built by tools/baselines.sh)"
            or " (Debian's package: upstream, not OpenResty's fork)"),
        "- lua-resty-simdjson: " .. (simdjson and "found" or "not installed, column skipped"),
        "- qjson: " .. qjson._VERSION .. ", kernel " .. qjson.kernel(),
    }
end

-- A gnuplot chart: throughput against payload size on the chat ladder,
-- log-log, one line per library, for the read and the change workloads.
local function write_chart(rows, png)
    local find = index_rows(rows)
    local panels = { { "read fields", "read model, temperature, every text" },
                     { "modify a top-level field + encode", "change model, encode" } }
    local libs = { "cjson", "simdjson", "qjson.parse", "qjson.decode" }
    -- One data block per line drawn; gnuplot numbers the blocks from 0.
    local data = os.tmpname()
    local f = assert(io.open(data, "w"))
    local plots, block = {}, 0
    for _, panel in ipairs(panels) do
        local lines = {}
        for color, lib in ipairs(libs) do
            local points = {}
            for _, rung in ipairs(payloads.ladder) do
                local r = find("chat " .. rung[1], panel[1], lib)
                if r then
                    points[#points + 1] = string.format("%.0f %.3f", r.bytes,
                                                        r.median * r.bytes / 1e6)
                end
            end
            if #points > 0 then
                f:write(table.concat(points, "\n"), "\n\n\n")
                -- A library keeps its color in both panels.
                lines[#lines + 1] = string.format(
                    "'%s' index %d with linespoints linetype %d title '%s'",
                    data, block, color, lib)
                block = block + 1
            end
        end
        plots[#plots + 1] = string.format("set title '%s'\nplot %s", panel[2],
            table.concat(lines, ", "))
    end
    f:close()
    local gp = assert(io.popen("gnuplot", "w"))
    gp:write(string.format([[
set terminal pngcairo size 1200,480 font ',10'
set output '%s'
set multiplot layout 1,2
set logscale xy
set grid
set key top left
set xlabel 'chat request size (bytes)'
set ylabel 'throughput (MB/s of request body)'
%s
unset multiplot
]], png, table.concat(plots, "\n")))
    assert(gp:close(), "gnuplot failed")
    os.remove(data)
end

local BEGIN, END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"

-- Replaces the generated part of `doc` (between the markers) with the
-- machine, the native results and every table.
local function write_report(rows, notes, doc, png, native)
    local parts = { BEGIN, "",
        "Generated by `make bench-report` (tools/bench.sh REPORT=1); ops/s are medians of",
        ROUNDS .. " rounds, `(N.Nx)` the median over those rounds of the ratio to cjson's",
        "rate in the same round, in the same process.", "",
        table.concat(machine(), "\n"), "",
        "![throughput against payload size](" .. png:match("[^/]+$") .. ")", "" }
    local native_text = native and read_file(native)
    if native_text and native_text ~= "" then
        parts[#parts + 1] = "### Native core (`cargo bench --bench core`), GB/s\n"
        parts[#parts + 1] = "```\n" .. native_text:gsub("%s+$", "") .. "\n```"
    end
    parts[#parts + 1] = markdown_tables(rows)
    parts[#parts + 1] = "\n### Memory per decoded document (10 000 kept alive),"
        .. " eager decode's peak\n\n```\n"
        .. table.concat(notes, "\n") .. "\n```"
    parts[#parts + 1] = "\n" .. END
    local generated = table.concat(parts, "\n")
    local text = read_file(doc) or "# Benchmarks\n\n"
    local from, to = text:find(BEGIN, 1, true), select(2, text:find(END, 1, true))
    if from and to then
        text = text:sub(1, from - 1) .. generated .. text:sub(to + 1)
    else
        text = text:gsub("%s*$", "\n\n") .. generated .. "\n"
    end
    local f = assert(io.open(doc, "wb"))
    f:write(text)
    f:close()
end

local function run_all(report)
    if not simdjson then
        print("lua-resty-simdjson: not found on package.path/cpath, its column is skipped")
    end
    -- Wall time: the scenarios run in child processes, which `now()` (this
    -- thread's CPU time) does not see.
    local started = os.time()
    local rows, notes = collect_rows()
    print_tables(rows)
    print("\n## memory per decoded document, eager decode's peak\n" .. table.concat(notes, "\n"))
    print(string.format("\n(%d rows in %d s)", #rows, os.time() - started))
    if report then
        write_chart(rows, report.png)
        write_report(rows, notes, report.doc, report.png, report.native)
        print("wrote " .. report.doc .. " and " .. report.png)
    end
end

if arg[1] == "--peak-memory" then
    peak_memory_child(arg[2], arg[3])
    return
elseif arg[1] == "--report" then
    run_all({ doc = assert(arg[2], "--report DOC PNG [NATIVE]"),
              png = assert(arg[3], "--report DOC PNG [NATIVE]"), native = arg[4] })
    return
elseif arg[1] then
    for _, scenario in ipairs(scenarios) do
        if scenario.name == arg[1] then
            run_scenario(scenario)
            return
        end
    end
    error("unknown scenario: " .. arg[1])
end
run_all()
