-- Small-document work, counted in instructions rather than timed: what
-- tools/lua_insns.sh runs under callgrind. On a shared, noisy machine a
-- count settles what a change to a few hundred nanoseconds of work did,
-- where wall time cannot.
--
--   luajit benches/insn_loops.lua WORKLOAD N
--
-- runs WORKLOAD N times over the payloads of make bench (benches/
-- payloads.lua): `{}`, the 64-byte tool call and one SSE chunk, the 2 KB chat
-- request, a 4.5 KB chat request in Chinese, and github-100k's list of
-- issues. Two runs that differ only in N differ by N workloads'
-- instructions (start-up, JIT compilation and warm-up cancel), which is
-- how tools/lua_insns.sh reports instructions per workload. cjson is the
-- first cjson on package.cpath (tools/lua_insns.sh puts OpenResty's fork
-- first).

package.path = "lua/?.lua;benches/?.lua;" .. package.path

local qjson = require("qjson")
local cjson = require("cjson")
local payloads = require("payloads")

local TOOL = payloads.TOOL_CALL
local SSE = payloads.sse_events(3)[2]
local CJK = payloads.chat_cjk(4096)
local CHAT = payloads.chat(2048)
local CJK_ESCAPED = payloads.ascii_escaped(CJK)
local EAGER = { lazy = false }
-- Made (or read) by the first workload that reads it.
local GITHUB, TWITTER, CODE
-- The last table an eager workload decoded. Kept, as a handler keeps
-- what it decodes: a table nothing keeps, LuaJIT's allocation sinking
-- may never make when the decode's Lua code is compiled into the
-- workload's trace (qjson's, by shape: lua/qjson/shapes.lua), where
-- cjson's C function makes it regardless.
local kept -- luacheck: ignore 231 (kept, never read)

-- Each workload: one decode of library `lib` and what a handler does
-- with it, as in benches/lua_bench.lua's rows of the same names; `k`
-- makes each change write a new value, as a gateway's do. Returns a
-- number so that nothing is optimised away.

-- Decodes `text`, sets top-level `key` to `value`, encodes.
local function set_and_encode(lib, text, key, value)
    local t = lib.decode(text)
    t[key] = value
    return #lib.encode(t)
end

-- twitter.json of the corpus, under $QJSON_DATA (../shared/data), read
-- by the first workload that needs it.
local function twitter()
    if not TWITTER then
        local dir = (os.getenv("QJSON_DATA") or "../shared/data") .. "/corpus/"
        local f = assert(io.open(dir .. "twitter.json", "rb"))
        TWITTER = f:read("*a")
        f:close()
    end
    return TWITTER
end

-- A workload that makes plain tables of `text` with `lib[how]`, keeps
-- them, and reads the string at `key`.
local function plain_tables(how, text, key)
    return function(lib, k)
        local t = lib[how](text)
        kept = t
        return #t[key] + k
    end
end

-- The access bodies of `nested-1k` and `nested-10k`, made when first read.
local ACCESS = {}

-- Decodes the access body of `n` messages with `lib` and reads every
-- message's text through `m[i].content[1].text`; returns their lengths'
-- sum.
local function nested_reads(lib, n)
    ACCESS[n] = ACCESS[n] or payloads.access(n)
    local messages, sum = lib.decode(ACCESS[n]).messages, 0
    for i = 1, lib.len(messages) do
        sum = sum + #messages[i].content[1].text
    end
    return sum
end

local workloads
workloads = {
    -- The fixed cost of a document: `{}` decoded (cjson: its table;
    -- qjson: a proxy) and nothing read.
    ["empty-read"] = function(lib, k)
        local t = lib.decode("{}")
        return (next(t) == nil and 1 or 0) + k
    end,
    -- The same through qjson.parse (cjson: empty-read).
    ["empty-get"] = function(lib, k)
        if not lib.parse then
            return workloads["empty-read"](lib, k)
        end
        local d = lib.parse("{}")
        return (d and 1 or 0) + k
    end,
    ["tool-read"] = function(lib, k)
        local t = lib.decode(TOOL)
        return #t.order_id + t.options.max_items + k
    end,
    -- The same reads through qjson.parse's getters (cjson: tool-read).
    ["tool-get"] = function(lib, k)
        if not lib.parse then
            return workloads["tool-read"](lib, k)
        end
        local d = lib.parse(TOOL)
        return #d:get_str("order_id") + d:get_f64("options.max_items") + k
    end,
    ["tool-modify"] = function(lib, k)
        return set_and_encode(lib, TOOL, "order_id", "B-" .. k)
    end,
    ["tool-nested"] = function(lib, k)
        local t = lib.decode(TOOL)
        t.options.max_items = k
        return #lib.encode(t)
    end,
    ["tool-add"] = function(lib, k)
        return set_and_encode(lib, TOOL, "x_gateway", k)
    end,
    ["tool-eager"] = plain_tables("eager", TOOL, "order_id"),
    -- decode, then plain tables of the whole (cjson: its decode).
    ["tool-materialize"] = plain_tables("materialize", TOOL, "order_id"),
    ["sse-materialize"] = plain_tables("materialize", SSE, "model"),
    ["sse-eager"] = plain_tables("eager", SSE, "model"),
    ["sse-read"] = function(lib, k)
        local t = lib.decode(SSE)
        local delta = t.choices[1].delta
        return #t.model + #(delta.content or "") + k
    end,
    ["sse-get"] = function(lib, k)
        if not lib.parse then
            return workloads["sse-read"](lib, k)
        end
        local d = lib.parse(SSE)
        return #d:get_str("model") + #(d:get("choices[0].delta.content") or "") + k
    end,
    ["sse-modify"] = function(lib, k)
        return set_and_encode(lib, SSE, "model", "gpt-4o-" .. k)
    end,
    ["sse-nested"] = function(lib, k)
        local t = lib.decode(SSE)
        t.choices[1].delta.content = "redacted " .. k
        return #lib.encode(t)
    end,
    ["sse-add"] = function(lib, k)
        return set_and_encode(lib, SSE, "x_gateway", k)
    end,
    -- The 2 KB chat request of make bench, decoded to plain tables.
    ["chat-eager"] = function(lib, k)
        local t = lib.eager(CHAT)
        kept = t
        return #t.model + #t.messages + k
    end,
    -- A 4.5 KB chat request in Chinese, decoded to plain tables: its
    -- strings' UTF-8 checks (src/eager/walk.rs).
    ["cjk-eager"] = function(lib, k)
        local t = lib.eager(CJK)
        kept = t
        return #t.messages[#t.messages].content + k
    end,
    -- The same request as Python's json.dumps sends it, every character a
    -- \uXXXX escape: decoded to plain tables, and lazily with every
    -- message read.
    ["esc-eager"] = function(lib, k)
        local t = lib.eager(CJK_ESCAPED)
        kept = t
        return #t.messages[#t.messages].content + k
    end,
    -- The same reads through qjson.parse's getters (cjson: esc-read).
    ["esc-get"] = function(lib, k)
        if not lib.parse then
            return workloads["esc-read"](lib, k)
        end
        local d, n = lib.parse(CJK_ESCAPED), 0
        for i = 0, d:len("messages") - 1 do
            n = n + #d:get_str("messages[" .. i .. "].content")
        end
        return n + k
    end,
    -- github-100k's reads (benches/lua_bench.lua's "read fields" row):
    -- four keys of each of 54 issue objects of 23 keys, which "last wins"
    -- searches walk whole. Each workload parses 100 KB: run it directly
    -- with a small N (docs/benchmarks.md), not through tools/lua_insns.sh.
    ["github-get"] = function(lib, k)
        GITHUB = GITHUB or payloads.github(100e3)
        if not lib.parse then
            local t, n = lib.decode(GITHUB), 0
            for i = 1, #t do
                local issue = t[i]
                n = n + #issue.title + #issue.user.login + #issue.labels + issue.number
            end
            return n + k
        end
        local d, n = lib.parse(GITHUB), 0
        for i = 0, d:len() - 1 do
            local issue = d:open("[" .. i .. "]")
            n = n + #issue:get_str("title") + #issue:get_str("user.login")
                + issue:len("labels") + issue:get_f64("number")
        end
        return n + k
    end,
    -- twitter.json's reads (benches/lua_bench.lua's "read fields" row of
    -- the twitter scenario): `text`, `user.screen_name` and
    -- `retweet_count` of each of its 100 statuses, objects of about 25
    -- keys (`user` about 40). Parses 631 KB: run it directly, as
    -- github-get.
    ["twitter-get"] = function(lib, k)
        if not lib.parse then
            local statuses, n = lib.decode(twitter()).statuses, 0
            for i = 1, #statuses do
                local status = statuses[i]
                n = n + #status.text + #status.user.screen_name + status.retweet_count
            end
            return n + k
        end
        local statuses, n = lib.parse(twitter()):open("statuses"), 0
        for i = 0, statuses:len() - 1 do
            local status = statuses:open("[" .. i .. "]")
            n = n + #status:get_str("text") + #status:get_str("user.screen_name")
                + status:get_f64("retweet_count")
        end
        return n + k
    end,
    -- The source code of a 100 KB chat request (payloads.chat_code, an
    -- escape every 21 bytes) read as a handler reads it: its user
    -- message's text, decoded. Run directly, as github-get.
    ["code-get"] = function(lib, k)
        CODE = CODE or payloads.chat_code(100e3)
        if not lib.parse then
            return #lib.decode(CODE).messages[2].content + k
        end
        return #lib.parse(CODE):get_str("messages[1].content") + k
    end,
    -- The same request decoded to plain tables (the eager decoder's
    -- escapes and the copies between them).
    ["code-eager"] = function(lib, k)
        CODE = CODE or payloads.chat_code(100e3)
        local t = lib.eager(CODE)
        kept = t
        return #t.messages[2].content + k
    end,
    -- The parses of github-get and twitter-get alone (cjson: the decode),
    -- which those workloads' counts less these leave their reads.
    ["github-parse"] = function(lib, k)
        GITHUB = GITHUB or payloads.github(100e3)
        kept = (lib.parse or lib.decode)(GITHUB)
        return k
    end,
    ["twitter-parse"] = function(lib, k)
        kept = (lib.parse or lib.decode)(twitter())
        return k
    end,
    -- Every member of each of github-100k's 54 issue objects of 23 keys
    -- through pairs, then its title: under "last wins" qjson's pairs
    -- builds each object's key table (which drops repeated keys) and the
    -- title is looked up in it. Run directly with a small N, as
    -- github-get.
    ["github-wide"] = function(lib, k)
        GITHUB = GITHUB or payloads.github(100e3)
        local t, n = lib.decode(GITHUB), 0
        for i = 1, lib.len(t) do
            local issue = t[i]
            for _ in lib.pairs(issue) do
                n = n + 1
            end
            n = n + #issue.title
        end
        return n + k
    end,
    -- make bench's "access: nested" rows: `m[i].content[1].text` of every
    -- message of a body of 1 000 or 10 000 (benches/payloads.lua's
    -- access), three proxies a message. Run directly with a small N, as
    -- github-get.
    ["nested-1k"] = function(lib, k)
        return nested_reads(lib, 1000) + k
    end,
    ["nested-10k"] = function(lib, k)
        return nested_reads(lib, 10000) + k
    end,
    ["esc-read"] = function(lib, k)
        local t = lib.decode(CJK_ESCAPED)
        local messages, n = t.messages, 0
        for i = 1, lib.len(messages) do
            n = n + #messages[i].content
        end
        return n + k
    end,
}

local libraries = {
    qjson = {
        decode = qjson.decode,
        parse = qjson.parse,
        eager = function(s) return qjson.decode(s, EAGER) end,
        materialize = function(s) return qjson.materialize(qjson.decode(s)) end,
        encode = qjson.encode,
        len = qjson.len,
        pairs = qjson.pairs,
    },
    cjson = { decode = cjson.decode, eager = cjson.decode, materialize = cjson.decode,
              encode = cjson.encode,
              len = function(t) return #t end, pairs = pairs },
}

-- luajit benches/insn_loops.lua --bytes LIB:WORKLOAD: the Lua heap
-- bytes one workload allocates (the mean of 1000, after 1000 to warm up,
-- with the collector stopped), which tools/lua_insns.sh prints beside the
-- instructions: on small documents every table a library makes costs
-- its allocation, its free and the collector's visits.
local bytes_mode = arg[1] == "--bytes"
local name, n = arg[1], tonumber(arg[2])
if bytes_mode then
    name, n = arg[2], 1000
end
local lib_name, work = (name or ""):match("^(%a+):(.+)$")
local run, lib = workloads[work], libraries[lib_name]
if not (run and lib and n) then
    local names = {}
    for w in pairs(workloads) do names[#names + 1] = w end
    table.sort(names)
    io.stderr:write("usage: luajit benches/insn_loops.lua {qjson|cjson}:WORKLOAD N\n",
                    "       luajit benches/insn_loops.lua --bytes {qjson|cjson}:WORKLOAD\n",
                    "workloads: ", table.concat(names, " "), "\n")
    os.exit(2)
end

-- HANDLERS=1: each workload in a coroutine of its own, as nginx resumes a
-- request's handler (benches/as_handler.lua), the coroutine's own cost in
-- both libraries' counts.
if os.getenv("HANDLERS") == "1" then
    local loop_run = run
    local handler = require("as_handler")(function(k) return loop_run(lib, k) end)
    run = function(_, k) return handler(k) end
end

local sum = 0
for k = 1, n do
    sum = sum + run(lib, k)
end
assert(sum > 0)
if bytes_mode then
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    for k = n + 1, 2 * n do
        sum = sum + run(lib, k)
    end
    local after = collectgarbage("count")
    collectgarbage("restart")
    print(string.format("%.0f", (after - before) * 1024 / n))
end
