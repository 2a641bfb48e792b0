-- The getters compile: each runs in a hot loop of a few hundred
-- iterations while jit.attach records trace events, in the style of
-- lua-resty-core's tests. A loop passes when it becomes a compiled loop
-- trace and no trace aborts on an NYI (or stitches around one). Then the
-- same getters called from interpreted code must get traces of their own.

local qjson = require("qjson")
local safe = require("qjson.safe")
local encode = require("qjson.encode")
local util = require("jit.util")
local vmdef = require("jit.vmdef")

-- Busted resolves a spec's globals through a Lua __index function: the
-- trace handler and the hot loops use only locals.
local jit_attach, jit_flush, jit_opt = jit.attach, jit.flush, jit.opt
local ffi_new, ffi_copy = require("ffi").new, require("ffi").copy
local format, find, string_dump = string.format, string.find, string.dump
local concat = table.concat
local type, tostring, pcall, assert, error, pairs, ipairs, getmetatable, newproxy =
    type, tostring, pcall, assert, error, pairs, ipairs, getmetatable, newproxy

-- Enough for a loop to get its own trace after an unlucky start: when a
-- callee called several times per iteration gets hot first, its function
-- trace's side exits try to record the caller's loop and abort on the
-- unroll limit a few times before the loop's own trace starts (300
-- iterations failed 1 run in 10 that way, 1000 none in 60).
local ITERATIONS = 1000

local TOOL_CALL = '{"order_id":"A-20931","options":{"history":true,"max_items":25}}'

local CHAT = '{"model":"gpt-4o","temperature":0.7,"n":3,"stream":false,"tool_choice":null,'
             .. '"usage":{"total_tokens":9223372036854775807},"messages":['
             .. '{"role":"system","content":"Be brief."},'
             .. '{"role":"user","content":[{"type":"text","text":"caf\\u00e9"}]}]}'

-- "file:line" of a bytecode position, or the builtin's name.
local function location(func, pc)
    local info = util.funcinfo(func, pc)
    if info.loc then
        return info.loc
    elseif info.ffid then
        return vmdef.ffnames[info.ffid]
    end
    return "(?)"
end

-- An abort reason as jit.v prints it.
local function reason(code, info)
    if type(code) ~= "number" then
        return tostring(code)
    end
    if type(info) == "function" then
        info = location(info)
    end
    return format(vmdef.traceerr[code], info)
end

-- The "file:line" positions where a trace may stitch: `pace` (lua/qjson/
-- doc.lua) and its call. It runs once a megabyte of native memory parsed
-- and asks collectgarbage("count"), which the compiler stitches around: a
-- trace that starts there is a cold path's, not the loop's. (The loop
-- decoding a copied 8 KB text runs it often enough that its hot counter,
-- shared with other code, made it a trace of its own in one of the busted
-- runs of a `make test` on 2026-12-06.)
-- `sweep`, which every parse may branch into, may not stitch.
local PACE_LINES = {}
do
    local file = assert(io.open(assert(package.searchpath("qjson.doc", package.path))))
    local source = file:read("*a")
    file:close()
    local n, inside = 0, false
    for line in source:gmatch("([^\n]*)\n") do
        n = n + 1
        inside = inside or find(line, "^local function pace%(%)") ~= nil
        if inside or find(line, "^%s+pace%(%)%s*$") then
            PACE_LINES["doc.lua:" .. n] = true
        end
        inside = inside and line ~= "end"
    end
    assert(next(PACE_LINES), "no `pace` in lua/qjson/doc.lua")
end

-- Whether a function is part of qjson's Lua code.
local function in_qjson(func)
    local source = util.funcinfo(func).source or ""
    return find(source, "qjson%.lua$") ~= nil or find(source, "/qjson/[%w_]+%.lua$") ~= nil
end

-- Runs `fn` (a function holding one hot loop) with fresh traces, and
-- returns what the compiler did: { started = { [func] = number of traces
-- started at func that compiled }, loops = those of fn that are loops,
-- problems = { "[TRACE --- file:line -- NYI: ...", ... }, log = every
-- event, for failure messages }. A problem is an NYI abort anywhere, a
-- stitch (a call the compiler cannot inline), or a root trace started in
-- qjson that aborts with "leaving loop in root trace" (what `return f()`
-- of a builtin does to a function's own trace); a side trace that cannot
-- return below its start frame is not one (see on_trace). Other aborts (a first
-- use of a C symbol, a finalizer during recording) are retried by
-- LuaJIT and show up as a missing trace if they persist.
local function trace(fn)
    local starts, problems, started, loops, log = {}, {}, {}, 0, {}
    local function on_trace(what, tr, func, pc, otr, oex)
        if what == "start" then
            -- otr, oex: the parent trace and exit of a side trace.
            starts[tr] = { func = func, loc = location(func, pc), root = not otr or otr == 0 }
            log[#log + 1] = format("start %d %s%s", tr, location(func, pc),
                                   otr and otr ~= 0 and format(" (%d/%d)", otr, oex) or "")
        elseif what == "stop" then
            local start = starts[tr] or {}
            local linktype = util.traceinfo(tr).linktype
            log[#log + 1] = format("[TRACE %3d %s %s]", tr, tostring(start.loc), linktype)
            if linktype == "stitch" and not PACE_LINES[start.loc] then
                problems[#problems + 1] = log[#log]
            elseif start.func then
                started[start.func] = (started[start.func] or 0) + 1
                if linktype == "loop" and start.func == fn then
                    loops = loops + 1
                end
            end
        elseif what == "abort" then
            local start = starts[tr] or {}
            local why = reason(otr, oex)
            local ours = start.root and start.func and in_qjson(start.func)
                         and find(why, "leaving loop in root trace", 1, true)
            -- A side trace of a function's own trace cannot return below
            -- the frame it started in when that return comes right after
            -- another or goes through a pcall; LuaJIT falls back to the
            -- interpreter for that exit, and the caller's loop trace, which
            -- inlines the function, is what must compile. The encoder's
            -- own returns are none of those (see `raise` in
            -- lua/qjson/encode.lua): there it is a problem.
            local at = location(func, pc)
            local side_return = not start.root and find(why, "return to lower frame", 1, true)
                                and not find(at, "^encode%.lua:%d+$")
            local line = format("[TRACE --- %s -- %s at %s]", tostring(start.loc), why, at)
            log[#log + 1] = line
            if (find(why, "NYI", 1, true) and not side_return) or ours then
                problems[#problems + 1] = line
            end
        end
    end
    jit_flush()
    -- Setting hotloop also resets every hot counter, which jit.flush()
    -- leaves as they were. 56 is LuaJIT's default.
    jit_opt.start("hotloop=56")
    jit_attach(on_trace, "trace")
    local ok, err = pcall(fn)
    jit_attach(on_trace)
    assert(ok, err)
    return { started = started, loops = loops, problems = problems, log = log }
end

-- Where a trace starts depends on LuaJIT's hot counters, which are shared
-- by bytecode positions hashed from their addresses: a run can start a
-- side trace at an unlucky spot (seen: a function-entry trace in
-- qffi.scalar aborting with "return to lower frame") and compile fine on
-- the next. A real NYI fails every attempt.
local ATTEMPTS = 3

-- Traces `fn` until an attempt passes `accept` (which returns nil or what
-- is wrong); raises with the last attempt's complaint.
local function traced_until(fn, accept)
    local complaint
    for _ = 1, ATTEMPTS do
        local result = trace(fn)
        if #result.problems > 0 then
            complaint = "trace aborts in the hot path:\n  " .. concat(result.problems, "\n  ")
        else
            complaint = accept(result)
        end
        if not complaint then
            return
        end
    end
    error(complaint, 3)
end

-- Fails unless `fn`'s loop compiled into a loop trace, without problems.
local function assert_compiles(fn)
    traced_until(fn, function(result)
        if result.loops == 0 then
            return "the hot loop produced no trace:\n  " .. concat(result.log, "\n  ")
        end
    end)
end

-- Fails unless each function in `funcs` got a trace of its own, without
-- problems, while `fn` ran: how getters compile when their caller is not
-- compiled (an OpenResty handler is a function, not a loop).
local function assert_functions_compile(fn, funcs)
    traced_until(fn, function(result)
        for name, func in pairs(funcs) do
            if not result.started[func] then
                return "no trace started in " .. name .. ":\n  " .. concat(result.log, "\n  ")
            end
        end
    end)
end

-- Fails if `pick` finds lines in what tracing `fn` gave (see `trace`) on
-- every attempt; `what` says what they are.
local function assert_none(fn, pick, what)
    local complaint
    for _ = 1, ATTEMPTS do
        local found = pick(trace(fn))
        if #found == 0 then
            return
        end
        complaint = what .. ":\n  " .. concat(found, "\n  ")
    end
    error(complaint, 3)
end

-- The lines of `lines` holding `text` but not `unless`.
local function lines_with(lines, text, unless)
    local found = {}
    for _, line in ipairs(lines) do
        if find(line, text, 1, true) and not (unless and find(line, unless, 1, true)) then
            found[#found + 1] = line
        end
    end
    return found
end

-- The lines of `lines` holding `text` that also match `pattern`.
local function lines_matching(lines, text, pattern)
    local found = {}
    for _, line in ipairs(lines_with(lines, text)) do
        if find(line, pattern) then found[#found + 1] = line end
    end
    return found
end

-- Fails if any trace `fn` starts aborts on an NYI (but for side traces,
-- "return to lower frame", see trace). For code whose calls into
-- string.buffer and table.sort stitch, and whose short inner loops get
-- traces of their own: the encoder's splicing.
local function assert_no_nyi(fn)
    assert_none(fn, function(result)
        return lines_with(result.log, "NYI", "return to lower frame")
    end, "NYI in the hot path")
end

-- Fails if a trace started at the entry of one of qjson's functions
-- aborts on leaving a loop, as a loop run once a call makes it: each call
-- then leaves the function's trace (see `trace`), and the trace of a
-- loop or handler around it aborts with it. For code whose other aborts
-- assert_no_nyi judges.
local function assert_no_loop_exits(fn)
    assert_none(fn, function(result)
        return lines_with(result.problems, "leaving loop in root trace")
    end, "a loop left in a function's trace")
end

-- Never compiled: a loop calling it stays in the interpreter.
local function interpreted() end
jit.off(interpreted)

describe("JIT compilation of the getters", function()
    if not jit.status() then
        it("needs the JIT compiler on", function() pending("jit.off()") end)
        return
    end

    local doc, sdoc
    setup(function()
        doc = qjson.parse(CHAT)
        sdoc = safe.parse(CHAT)
    end)

    -- Each loop counts wrong results instead of asserting, so the only
    -- calls in the loop are the getter's own.

    it("get_str", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:get_str("messages[1].content[0].text") ~= "caf\xc3\xa9" then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("get_f64", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:get_f64("temperature") ~= 0.7 then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("get_i64", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:get_i64("usage.total_tokens") ~= 9223372036854775807LL then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("get_bool", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:get_bool("stream") ~= false then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("is_null", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:is_null("tool_choice") ~= true then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("typeof", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:typeof("messages") ~= "array" then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("len", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:len("messages") ~= 2 then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("raw", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:raw("usage") ~= '{"total_tokens":9223372036854775807}' then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("get, on strings, numbers, booleans and null", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                if doc:get("model") ~= "gpt-4o" or doc:get("n") ~= 3
                   or doc:get("stream") ~= false or doc:get("tool_choice") ~= qjson.null then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("open and a getter on the cursor", function()
        local bad = 0
        assert_compiles(function()
            for i = 1, ITERATIONS do
                local message = doc:open("messages[" .. (i % 2) .. "]")
                if message:get_str("role") ~= (i % 2 == 0 and "system" or "user") then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("missing paths and type mismatches", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                local v, err = doc:get_str("temperature")
                if v ~= nil or err == nil or doc:get_f64("missing") ~= nil then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("qjson.safe documents, including misuse", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                local v, err = sdoc:get_str("messages..role")
                if v ~= nil or err == nil or sdoc:get_str("model") ~= "gpt-4o" then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    describe("called from interpreted code", function()
        local Doc = require("qjson.doc").Doc
        local cases = {
            get_str = "model", get_f64 = "temperature", get_i64 = "n", get_bool = "stream",
            is_null = "tool_choice", typeof = "messages", len = "messages",
            raw = "usage", get = "model", open = "messages[0]",
        }
        for name, path in pairs(cases) do
            it(name, function()
                local bad = 0
                assert_functions_compile(function()
                    for _ = 1, ITERATIONS do
                        interpreted()
                        if doc[name](doc, path) == nil then bad = bad + 1 end
                    end
                end, { [name] = Doc[name] })
                assert.equal(0, bad)
            end)
        end

        it("open and a getter on the cursor, on a safe document", function()
            local bad = 0
            assert_functions_compile(function()
                for _ = 1, ITERATIONS do
                    interpreted()
                    if sdoc:open("messages[1]"):get_str("role") ~= "user" then
                        bad = bad + 1
                    end
                end
            end, { open = Doc.open, get_str = Doc.get_str })
            assert.equal(0, bad)
        end)
    end)

    it("decode and proxy reads", function()
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                local t = qjson.decode(CHAT)
                if t.messages[2].content[1].text ~= "caf\xc3\xa9" then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("qjson.pairs over decoded objects, as a walk of a document does", function()
        -- Each object's iteration is a table, not a closure: LuaJIT does
        -- not compile making one (FNEW), and every trace through a
        -- qjson.pairs loop aborted there.
        local bad = 0
        assert_no_nyi(function()
            for _ = 1, ITERATIONS do
                local t = qjson.decode(CHAT)
                local n = 0
                for _ in qjson.pairs(t) do n = n + 1 end
                for _ in qjson.pairs(t.usage) do n = n + 1 end
                if n ~= 8 then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("decode of a text given as a pointer (copied), proxy reads, a change, encode", function()
        -- What qjson.decode_body does with a body nginx holds in memory.
        local text = CHAT:gsub('"Be brief%."', '"' .. ("x"):rep(8192) .. '"')
        local buf = ffi_new("char[?]", #text)
        ffi_copy(buf, text, #text)
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                local t = qjson.decode(buf, #text)
                if t.messages[2].content[1].text ~= "caf\xc3\xa9" then bad = bad + 1 end
            end
        end)
        -- The change written from its record, into the copy's bytes
        -- around it (put_one_key with a text that is no Lua string).
        assert_no_nyi(function()
            for i = 1, ITERATIONS do
                local t = qjson.decode(buf, #text)
                t.model = "m" .. i
                if #qjson.encode(t) ~= #text - #'"gpt-4o"' + #tostring(i) + 3 then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("proxy reads over a list of messages, as the registry grows", function()
        -- 900 proxies a document: the registry moves to larger tables
        -- four times (lua/qjson/lazy.lua, "The registry").
        local parts = {}
        for i = 1, 300 do
            parts[i] = '{"role":"user","content":[{"type":"text","text":"m' .. i .. '"}]}'
        end
        local text = '{"messages":[' .. concat(parts, ",") .. "]}"
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS / 50 do
                local m = qjson.decode(text).messages
                local bytes = 0
                for i = 1, qjson.len(m) do bytes = bytes + #m[i].content[1].text end
                if bytes ~= 1092 then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("decode of a small document and the reads a handler does", function()
        -- One document, state and proxy per call: the path that decides
        -- whether qjson.decode beats cjson on small bodies.
        local bad = 0
        assert_compiles(function()
            for _ = 1, ITERATIONS do
                local t = qjson.decode(TOOL_CALL)
                if #t.order_id + t.options.max_items ~= 32 then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
    end)

    it("eager decode of small documents by shape, tables kept", function()
        -- lua/qjson/shapes.lua: the native walk, the function made for
        -- the shape, its constructors and ffi.string, inlined into the
        -- loop; two shapes in turn (the second through a side trace).
        local SSE = '{"id":"c1","choices":[{"index":0,"delta":{"content":"Hi\\n"},'
                    .. '"finish_reason":null}],"usage":null}'
        local eager, kept, bad = { lazy = false }, {}, 0
        assert_compiles(function()
            for i = 1, ITERATIONS do
                local t = qjson.decode(i % 4 == 0 and SSE or TOOL_CALL, eager)
                kept[i % 8 + 1] = t
                local n = t.order_id and #t.order_id + t.options.max_items
                          or #t.choices[1].delta.content + 29
                if n ~= 32 then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
        assert.equal(8, #kept)
    end)

    it("decode of small documents across collection cycles", function()
        -- The first parse after each cycle sweeps dead documents: a
        -- branch of every parse, taken once a cycle, whose side trace is
        -- recorded once it has been taken a few times. It must compile
        -- like the rest: a builtin there made that trace stitch, and
        -- loops that later recorded through it linked to it instead of
        -- inlining the parse. A large table every 16 calls (no builtin
        -- call in the loop) ends a cycle every few thousand.
        local new_tab = require("table.new")
        -- Counts cycles while the test runs: a finalizer that runs once
        -- per cycle, as each collects the proxy the last one made.
        local cycles, counting = 0, true
        local function count_cycles()
            getmetatable(newproxy(true)).__gc = function()
                cycles = cycles + 1
                if counting then count_cycles() end
            end
        end
        count_cycles()
        -- Cycles that start at once and do ten times the usual work per
        -- byte allocated: enough of them whatever the suite left alive.
        local pause = collectgarbage("setpause", 100)
        local stepmul = collectgarbage("setstepmul", 2000)
        local bad = 0
        finally(function()
            counting = false
            collectgarbage("setpause", pause)
            collectgarbage("setstepmul", stepmul)
        end)
        assert_compiles(function()
            for i = 1, 200 * ITERATIONS do
                local t = qjson.decode(TOOL_CALL)
                if #t.order_id + t.options.max_items ~= 32 then bad = bad + 1 end
                if i % 16 == 0 then
                    local _ = new_tab(10000, 0)
                end
            end
        end)
        assert.equal(0, bad)
        -- Enough cycles for the sweep's branch to get a trace of its own.
        assert.is_true(cycles >= 20, cycles .. " cycles")
    end)

    it("a streamed event read by qjson.sse and parsed where it came in", function()
        -- A body filter's work per event: feed a chunk, parse the event's
        -- data (in the chunk, with no string of its own), read a field.
        -- The reader's line loop runs once per chunk of one event and gets
        -- short traces of its own, as the encoder's splicing does.
        local stream = require("qjson.sse").new()
        local bad = 0
        assert_no_nyi(function()
            for i = 1, ITERATIONS do
                local events = stream:feed('data: {"choices":[{"delta":{"content":"t'
                                           .. i .. '"}}]}\n\n')
                local event_doc = events[1]:parse()
                if #event_doc:get_str("choices[0].delta.content") ~= #tostring(i) + 1 then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("decode, delete a member, append an element, add a key, encode", function()
        -- The other edits: removals with their separators, appended
        -- elements and added keys, each in a container of its own.
        local bad, last = 0, nil
        assert_no_nyi(function()
            for i = 1, ITERATIONS do
                local t = qjson.decode(CHAT)
                t.temperature = nil
                local m = t.messages
                m[qjson.len(m) + 1] = i
                t.usage.cached = false
                last = qjson.encode(t)
                local tail = "," .. i .. "]}"
                if last:sub(-#tail) ~= tail then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
        local t = qjson.decode(last)
        assert.same({ nil, ITERATIONS, false }, { t.temperature, t.messages[3], t.usage.cached })
    end)

    it("decode, change a member and an element, encode (the splice)", function()
        local bad, last = 0, nil
        assert_no_nyi(function()
            for i = 1, ITERATIONS do
                local t = qjson.decode(CHAT)
                t.model = i
                t.messages[1].role = "user"
                t.x_gateway = true
                last = qjson.encode(t)
                if last:sub(-18) ~= ',"x_gateway":true}' then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
        local t = qjson.decode(last)
        assert.same({ ITERATIONS, "user", true }, { t.model, t.messages[1].role, t.x_gateway })
    end)

    it("decode, change, encode from code not compiled: side traces leave the encoder",
       function()
        -- As a handler runs it (nginx resumes it from C, and nothing
        -- around it is compiled): the encoder's functions get traces of
        -- their own, and the exits taken as the changed value's type
        -- varies get side traces, which return from the encoder to its
        -- caller. Under the pcall the encoder once ran in, none could
        -- ("NYI: return to lower frame" at its return), and each such
        -- exit ran interpreted from then on.
        local values = { 1, "s", true, 2.5, false, { 1 }, "t" }
        local bad = 0
        assert_none(function()
            for i = 1, ITERATIONS do
                interpreted()
                local t = qjson.decode(TOOL_CALL)
                local v = values[i % #values + 1]
                t.order_id = v
                t.options.max_items = i
                if qjson.decode(qjson.encode(t)).options.max_items ~= i then bad = bad + 1 end
            end
        end, function(result)
            return lines_matching(result.log, "return to lower frame at ", " encode%.lua:%d+%]$")
        end, "a side trace that cannot return out of the encoder")
        assert.equal(0, bad)
    end)

    it("decode, add a number of more than 14 digits, encode: no loop in the number",
       function()
        -- Such a number is written by snprintf, as cjson writes it (see
        -- put_number). A loop over its digits (for the locale's decimal
        -- point) was a loop inside every encode of one: it got a trace
        -- of its own, and a loop around the encode never compiled.
        local bad = 0
        local function run()
            for i = 1, ITERATIONS do
                local t = qjson.decode(TOOL_CALL)
                t.created_us = 1.7e15 + i * 1000
                local out = qjson.encode(t)
                if not find(out, ',"created_us":1.7', 1, true) then bad = bad + 1 end
            end
        end
        assert_compiles(run)
        assert_none(run, function(result)
            return lines_matching(result.log, " loop]", "encode%.lua:%d+ loop%]$")
        end, "a loop trace in the encoder")
        assert.equal(0, bad)
    end)

    it("decode, change a streamed event's delta, encode in pieces", function()
        -- The text before the value is a piece of its own (flush).
        local event = '{"id":"chatcmpl-AbC123xYz","object":"chat.completion.chunk",'
                      .. '"created":1763700000,"model":"gpt-4o-2024-08-06",'
                      .. '"system_fingerprint":"fp_3a9f2b1c0d","choices":[{"index":0,'
                      .. '"delta":{"content":" up"},"logprobs":null,"finish_reason":null}]}'
        local bad, last = 0, nil
        assert_no_nyi(function()
            for i = 1, ITERATIONS do
                local t = qjson.decode(event)
                t.choices[1].delta.content = i
                local pieces, len = qjson.encode_pieces(t)
                last = pieces
                if #pieces ~= 2 or len ~= #event - 5 + #tostring(i) then bad = bad + 1 end
            end
        end)
        assert.equal(0, bad)
        assert.equal(ITERATIONS, qjson.decode(table.concat(last)).choices[1].delta.content)
    end)

    it("decode, replace or add one key of the root, encode (put_one_key)", function()
        -- A gateway's rewrite of `model` and its tag, each written from
        -- the change record alone. Each loop changes one key with
        -- `change` and checks the output's length; `check` is what the
        -- compiler must have done with it.
        local function rewrites(change, length, check)
            local bad, last = 0, nil
            check(function()
                for i = 1, ITERATIONS do
                    local t = qjson.decode(CHAT)
                    change(t, i)
                    last = qjson.encode(t)
                    if #last ~= length(i) then bad = bad + 1 end
                end
            end)
            assert.equal(0, bad)
            return qjson.decode(last)
        end
        local replaced = rewrites(function(t, i) t.model = "m" .. i end,
                                  function(i) return #CHAT - #'"gpt-4o"' + #tostring(i) + 3 end,
                                  assert_no_nyi)
        assert.equal("m" .. ITERATIONS, replaced.model)
        -- The added key is written with no loop of its own: the loop over
        -- added keys, run once a call, left put_added's trace each call
        -- and aborted the traces around it, and a process whose side
        -- traces then gave up ran the rewrite interpreted, 2-4 times
        -- slower (lua_bench's tool-call, one process in two).
        local added = rewrites(function(t, i) t.x_gateway = i end,
                               function(i) return #CHAT + #',"x_gateway":' + #tostring(i) end,
                               function(fn)
                                   assert_no_nyi(fn)
                                   assert_no_loop_exits(fn)
                               end)
        assert.equal(ITERATIONS, added.x_gateway)
    end)

    it("encode of plain tables: the glue around the native encoder", function()
        -- The call into the lua_CFunction is stitched around, not an NYI;
        -- what leads to it (options, metatable check, counter) compiles.
        local plain = qjson.decode(CHAT, { lazy = false })
        local want = qjson.encode(plain)
        local done = encode.native_counts()
        local bad = 0
        assert_no_nyi(function()
            for i = 1, ITERATIONS do
                plain.model = i
                if #qjson.encode(plain) ~= #want - #"gpt-4o" - 2 + #tostring(i) then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
        assert.is_true(encode.native_counts() >= done + ITERATIONS)
    end)

    it("encode of plain tables by the Lua encoder, keys from the key cache", function()
        -- The fallback where the Lua C API cannot be found.
        local plain = qjson.decode(CHAT, { lazy = false })
        local lua_encode = encode.lua_encode
        local want = lua_encode(plain)
        local bad = 0
        assert_no_nyi(function()
            for i = 1, ITERATIONS do
                plain.model = i
                if #lua_encode(plain) ~= #want - #"gpt-4o" - 2 + #tostring(i) then
                    bad = bad + 1
                end
            end
        end)
        assert.equal(0, bad)
    end)

    it("the checker itself notices an NYI", function()
        -- string.dump is NYI in every LuaJIT 2.1, aborting or stitching.
        local result = trace(function()
            local f = function() end
            for _ = 1, ITERATIONS do
                string_dump(f)
            end
        end)
        assert.is_true(#result.problems > 0)
    end)
end)
