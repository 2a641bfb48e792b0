-- qjson called in the middle of another qjson call. LuaJIT may run a
-- garbage-collector finalizer (ffi.gc, __gc) at any allocation, including
-- between a native call and the reads of its results, and the finalizer
-- may read, decode, encode and free documents (other ones, or the one
-- being read). Every interrupted call must still return its own result,
-- and nothing may touch freed memory (tools/memcheck.sh runs this spec
-- under valgrind in make test).
--
-- Two drivers: real finalizers under a collector told to step often (what
-- happens in production, at allocation points only, so coverage depends
-- on timing), and a count hook that re-enters qjson after every VM
-- instruction while a call is under way (every point, deterministically).

local ffi = require("ffi")
local qjson = require("qjson")
local qffi = require("qjson.ffi")
local sse = require("qjson.sse")
local safe = require("qjson.safe")
local helper = require("helper")

local MEMCHECK = os.getenv("QJSON_MEMCHECK") ~= nil
local ROUNDS = MEMCHECK and 100 or 1000

-- A document whose string needs decoding (so the result lives in a
-- reader's memory, not in the text), too long to be a small document
-- (native memory of its own: see "Small documents" in
-- docs/architecture.md) and, outside valgrind, long enough to be given
-- its own mapping by malloc, so that reading it after it was freed would
-- crash.
local BIG_LEN = MEMCHECK and 5000 or 150000
local BIG = '{"x":"' .. string.rep("o", BIG_LEN) .. '\\n"}'
local SMALL = '{"list":[1,2,3],"k":{"a":"\\u00e9","b":[{"c":"\\t"}]}}'
local MAIN = '{"a":"main value \\u00e9","n":42,"list":[{"b":"first\\t"},{"b":"second\\t"}],'
             .. '"obj":{"p":1,"q":"\\u0051","r":[true,false,null]}}'

-- A text of more than 4 KB in memory Lua does not own, whose eager decode
-- is built from the reader's tape (`tape_tables` in lua/qjson.lua): few
-- items, so that re-entering at each of the build's instructions is quick.
local LONG = string.rep("w", 1100)
local WIDE = '[{"s":"' .. LONG .. '\\n"},[1,"' .. LONG .. '"],{"s":"' .. LONG .. '"},"'
             .. LONG .. '",{"end":true}]'
local wide = ffi.new("char[?]", #WIDE)
ffi.copy(wide, WIDE, #WIDE)
local function wide_right(t)
    return #t == 5 and t[1].s == LONG .. "\n" and t[2][2] == LONG and t[3].s == LONG
        and t[4] == LONG and t[5]["end"] == true
end

-- What the interrupting code does: a mix of everything, on other
-- documents and on `shared` (the document the interrupted code reads,
-- when it has one).
local shared
local function reenter()
    local d = qjson.parse(BIG)
    assert(#d:get_str("x") == BIG_LEN + 1)
    d:free()
    local t = qjson.decode(SMALL)
    assert(t.k.a == "\195\169" and t.list[3] == 3 and t.k.b[1].c == "\t")
    for k in qjson.pairs(t.k) do assert(k == "a" or k == "b") end
    t.list[1] = "changed"
    assert(qjson.encode(t) == '{"list":["changed",2,3],"k":{"a":"\\u00e9","b":[{"c":"\\t"}]}}')
    -- A member deleted and one added: matched by position in a table the
    -- interrupted call's encode must not share.
    t.k.a = nil
    t.k.z = 1
    assert(qjson.encode(t.k) == '{"b":[{"c":"\\t"}],"z":1}')
    assert(qjson.decode(SMALL, { lazy = false }).list[2] == 2)
    assert(wide_right(qjson.decode(wide, #WIDE, { lazy = false })))
    if shared then
        assert(shared:get_str("list[1].b") == "second\t")
    end
    -- More small documents than a thread keeps parsed: the interrupted
    -- call's own small document is parsed again when it goes on.
    for i = 1, 9 do
        assert(qjson.decode("[" .. i .. "]")[1] == i)
    end
end

-- Sections that ran inside another so far.
local function nested_count()
    return (qffi.section_counts())
end

-- Runs fn with the JIT off and no traces (LuaJIT runs neither finalizers
-- nor hooks on a trace, and traces compiled earlier would still run), so
-- that calls are interrupted wherever they can be; then turns the JIT back
-- on; raises what fn raised.
local function interpreted(fn)
    local was_on = jit.status()
    jit.off()
    jit.flush()
    local ok, result = pcall(fn)
    if was_on then jit.on() end
    assert(ok, result)
    return result
end

-- Runs `round` ROUNDS times, each after dropping cdata whose finalizers
-- call qjson, with the collector stepping often; returns how many rounds
-- went wrong.
local function with_finalizers(round)
    local pause = collectgarbage("setpause", 50)
    local stepmul = collectgarbage("setstepmul", 400)
    local wrong = interpreted(function()
        local wrong = 0
        for _ = 1, ROUNDS do
            ffi.gc(ffi.new("char[64]"), reenter)
            if not round() then
                wrong = wrong + 1
            end
        end
        return wrong
    end)
    collectgarbage("setpause", pause)
    collectgarbage("setstepmul", stepmul)
    collectgarbage()
    return wrong
end

-- Re-enters qjson when a call is under way (its native results not yet
-- all read). Outside calls, a hook could also land between two
-- instructions of the document bookkeeping, where no finalizer can run
-- (nothing allocates there); the finalizer driver covers that code.
local function reenter_in_call()
    if not qffi.idle() then
        reenter()
    end
end

-- Runs `round` once with qjson re-entered after each VM instruction of
-- every call; returns whether it went right and how many calls ran inside
-- another.
local function at_every_instruction(round)
    local before = nested_count()
    local right = interpreted(function()
        debug.sethook(reenter_in_call, "", 1)
        local ok, result = pcall(round)
        debug.sethook()
        assert(ok, result)
        return result
    end)
    return right, nested_count() - before
end

-- The interrupted operations: each returns whether it got its own result.
local ROUNDS_OF = {
    getters = function()
        local d = shared
        return d:get_str("a") == "main value \195\169" and d:get_i64("n") == 42
            and d:get("list[0].b") == "first\t" and d:len("obj") == 3
            and d:raw("obj.q") == '"\\u0051"' and d:typeof("obj.r") == "array"
            and d:open("list[1]"):get_str("b") == "second\t"
    end,
    proxies = function()
        local t = qjson.decode(MAIN)
        return t.a == "main value \195\169" and t.list[2].b == "second\t"
            and t.obj.q == "Q" and qjson.len(t.obj) == 3 and t.obj.r[3] == qjson.null
    end,
    iteration = function()
        local t = qjson.decode(MAIN)
        local keys, r = {}, nil
        for k, v in qjson.pairs(t.obj) do
            keys[#keys + 1] = k .. "=" .. tostring(v)
            if k == "r" then r = v end
        end
        local bs = {}
        for i, e in qjson.ipairs(t.list) do bs[i] = e.b end
        return table.concat(keys, ",") == "p=1,q=Q,r=" .. tostring(r) and r == t.obj.r
            and bs[1] == "first\t" and bs[2] == "second\t"
    end,
    encode = function()
        local t = qjson.decode(MAIN)
        t.n = 7
        t.z = { "/" }
        return qjson.encode(t) == '{"a":"main value \\u00e9","n":7,"list":[{"b":"first\\t"},'
                                  .. '{"b":"second\\t"}],"obj":{"p":1,"q":"\\u0051","r":'
                                  .. '[true,false,null]},"z":["\\/"]}'
            and qjson.encode({ a = { 1, 2, "three\n" } }) == '{"a":[1,2,"three\\n"]}'
    end,
    eager = function()
        local eager = qjson.decode(MAIN, { lazy = false })
        local t = qjson.decode(MAIN)
        t.list[1].b = "x"
        local m = qjson.materialize(t)
        return eager.list[2].b == "second\t" and eager.obj.q == "Q"
            and m.list[1].b == "x" and m.obj.r[2] == false
    end,
    -- (The call that builds the tables is a section whatever calls it: it
    -- was reached by a tail call, so a hook or finalizer found no section
    -- on the stack, took the shared reader and rebuilt its tape.)
    eager_tape = function()
        return wide_right(qjson.decode(wide, #WIDE, { lazy = false }))
    end,
    sse = function()
        local stream = 'data: {"choices":[{"delta":{"content":"h\\u00e9llo"}}]}\n\n'
                       .. 'data: {"usage":{"total_tokens":12}}\n\ndata: [DONE]\n\n'
        local r = sse.new()
        local got = {}
        for i = 1, #stream, 16 do
            for _, ev in ipairs(r:feed(stream:sub(i, i + 15))) do
                local doc = ev:parse()
                if doc then
                    got[#got + 1] = doc:get_str("choices[0].delta.content")
                                    or tostring(doc:get_f64("usage.total_tokens"))
                end
            end
        end
        return got[1] == "h\195\169llo" and got[2] == "12"
    end,
}
local NAMES = { "getters", "proxies", "iteration", "encode", "eager", "eager_tape", "sse" }

describe("qjson re-entered during a call", function()
    before_each(function()
        shared = qjson.parse(MAIN)
    end)
    after_each(function()
        shared = nil
    end)

    for _, name in ipairs(NAMES) do
        it("from finalizers: " .. name .. " keep their results", function()
            assert.equal(0, with_finalizers(ROUNDS_OF[name]))
        end)
    end

    for _, name in ipairs(NAMES) do
        it("at every instruction: " .. name .. " keep their results", function()
            local right, nested = at_every_instruction(ROUNDS_OF[name])
            assert.is_true(right)
            assert.is_true(nested > 0, "nothing ran inside a call: the test proves nothing")
        end)
    end

    -- Each finalizer's parse paces the collector (lua/qjson/doc.lua,
    -- `pace`), whose step ran the next finalizers inside it, and so on
    -- until the stack overflowed, out of collectgarbage().
    it("from many finalizers that each parse a text larger than a small one", function()
        local parts = {}
        for i = 1, 300 do parts[i] = '{"id":' .. i .. ',"s":"v' .. i .. '"}' end
        local text = '{"list":[' .. table.concat(parts, ",") .. "]}"
        local done = 0
        local function parse_one()
            local t = qjson.decode(text)
            if t.list[300].id == 300 then done = done + 1 end
        end
        for _ = 1, 3 do
            for _ = 1, 5000 do ffi.gc(ffi.new("int[1]"), parse_one) end
            collectgarbage()
            collectgarbage()
        end
        assert.equal(15000, done)
    end)

    it("frees a document freed while it is being read only after the read", function()
        local victims = {}
        local function free_victims()
            for i = #victims, 1, -1 do
                victims[i]:free()
                victims[i] = nil
            end
        end
        local function free_victims_in_call()
            if not qffi.idle() then free_victims() end
        end
        local wrong = interpreted(function()
            local wrong = 0
            for _ = 1, MEMCHECK and 20 or 100 do
                local d = qjson.parse(BIG)
                victims[#victims + 1] = d
                debug.sethook(free_victims_in_call, "", 1)
                local ok, s = pcall(d.get_str, d, "x")
                debug.sethook()
                -- The read either finished or raised "used after free()".
                if ok and #s ~= BIG_LEN + 1 then wrong = wrong + 1 end
            end
            return wrong
        end)
        free_victims()
        assert.equal(0, wrong)
    end)

    it("takes the shared reader back after a call abandoned by an error", function()
        -- A finalizer that raises (LuaJIT 2.1-20230119 passes its error
        -- on) or running out of memory abandons a call mid-way; the next
        -- call must find that out and not go on paying for readers of its
        -- own.
        local d = qjson.parse(MAIN)
        local enter = qffi.enter
        local ok = pcall(function()
            enter()
            error("abandoned")
        end)
        assert.is_false(ok)
        local nested_before, abandoned_before = qffi.section_counts()
        for _ = 1, 100 do
            assert.equal("main value \195\169", d:get_str("a"))
        end
        local nested_after, abandoned_after = qffi.section_counts()
        assert.equal(nested_before, nested_after)
        assert.equal(abandoned_before + 1, abandoned_after)
    end)

    it("ends an encode's section when the encode raises, though it runs unprotected", function()
        -- The Lua encoder runs outside pcall (see `raise` in
        -- lua/qjson/encode.lua), so its own errors must end its section:
        -- otherwise the next call finds it abandoned.
        local refused = {
            "Cannot serialise function: type not supported",
            "Cannot serialise, excessive nesting (4)",
            "Cannot serialise number: must not be NaN or Infinity",
        }
        qjson.encode_max_depth(3)
        safe.encode_max_depth(3)
        local function changed(value)
            local t = qjson.decode('{"a":[1,{"b":2}],"c":"x"}')
            t.a[2].b = value
            return t
        end
        local cases = { changed(print), changed({ { 1 } }), changed(0 / 0) }
        local _, abandoned_before = qffi.section_counts()
        for i, t in ipairs(cases) do
            local ok, err = pcall(qjson.encode, t)
            assert.is_false(ok)
            assert.equal(refused[i], err)
            assert.same({ nil, refused[i] }, { safe.encode(t) })
            assert.same({ false, refused[i] }, { pcall(qjson.encode_pieces, t) })
            -- The next encode starts afresh, on the shared reader.
            assert.equal('{"a":[1,{"b":7}],"c":"x"}', qjson.encode(changed(7)))
            assert.equal('{"a":[1,{"b":8}],"c":"x"}',
                         table.concat((qjson.encode_pieces(changed(8)))))
        end
        qjson.encode_max_depth(1000)
        safe.encode_max_depth(1000)
        local _, abandoned_after = qffi.section_counts()
        assert.equal(abandoned_before, abandoned_after)
    end)

    -- A section's check for an abandoned one saw only its own stack: a
    -- coroutine resumed inside another call (by a finalizer, or by a
    -- metamethod the encoder calls) took the shared reader from it.
    it("gives a coroutine resumed inside a call a reader of its own", function()
        local other = qjson.decode('{"b":[1,2,3]}')
        other.b[2] = 20
        local inner
        local resumer = setmetatable({}, {
            __len = function()
                inner = coroutine.wrap(function() return qjson.encode(other) end)()
                return 1
            end,
            __index = function() return "x" end,
        })
        local t = qjson.decode('{"a":"text","n":[1,2]}')
        t.n[1] = 5
        local nested_before, abandoned_before = qffi.section_counts()
        assert.equal('[{"a":"text","n":[5,2]},["x"]]', qjson.encode({ t, resumer }))
        assert.equal('{"b":[1,20,3]}', inner)
        local nested_after, abandoned_after = qffi.section_counts()
        assert.equal(abandoned_before, abandoned_after)
        assert.is_true(nested_after > nested_before)
    end)

    it("refuses a metamethod that yields inside an encode, as cjson does", function()
        local yielding = setmetatable({}, { __len = function() coroutine.yield() return 1 end })
        local _, abandoned_before = qffi.section_counts()
        for _, encode in ipairs({ qjson.encode, helper.fork() and helper.fork().encode }) do
            local co = coroutine.create(function() return encode({ yielding }) end)
            local ok, err = coroutine.resume(co)
            assert.is_false(ok)
            assert.matches("attempt to yield across C%-call boundary", err)
        end
        -- The encode ended its section: the next one writes on the shared reader.
        local t = qjson.decode('{"a":[1]}')
        t.a[2] = 2
        assert.equal('{"a":[1,2]}', qjson.encode(t))
        local _, abandoned_after = qffi.section_counts()
        assert.equal(abandoned_before, abandoned_after)
    end)

    it("takes the shared reader back from a call abandoned in a coroutine too", function()
        -- Left busy, it would keep every doc:free() waiting (see
        -- lua/qjson/ffi.lua and spec/nginx/nginx_checks.lua).
        local d = qjson.parse(MAIN)
        local enter = qffi.enter
        assert.is_false(coroutine.wrap(function()
            return pcall(function()
                enter()
                error("abandoned")
            end)
        end)())
        assert.is_false(qffi.idle())
        local nested_before, abandoned_before = qffi.section_counts()
        coroutine.wrap(function()
            assert.equal("main value \195\169", d:get_str("a"))
        end)()
        local nested_after, abandoned_after = qffi.section_counts()
        assert.same({ nested_before, abandoned_before + 1 }, { nested_after, abandoned_after })
        assert.is_true(qffi.idle())
    end)

    -- Past 500 levels the encoder goes on in a coroutine of its own, whose
    -- stack does not hold the encode's section: a finalizer run there that
    -- encodes took the shared reader and the encoder's state from it.
    -- The metamethod's function, arguments and result were the module's
    -- alone: a finalizer's encode in the middle of one (say at the end of
    -- string.gsub, which makes the call) cleared them, and the outer
    -- encode wrote [] or called nil (an audit's finding).
    it("keeps a metamethod call's result from finalizers that encode", function()
        local inner = setmetatable({}, { __len = function() return 0 end })
        local outer = setmetatable({ 1, 2, 3 }, { __len = function() return 3 end })
        local pause = collectgarbage("setpause", 100)
        local stepmul = collectgarbage("setstepmul", 400)
        finally(function()
            collectgarbage("setpause", pause)
            collectgarbage("setstepmul", stepmul)
        end)
        local wrong = 0
        for i = 1, MEMCHECK and 2000 or 20000 do
            local g = newproxy(true)
            getmetatable(g).__gc = function() qjson.encode(inner) end
            local _ = { i, tostring(i) }
            local ok, out = pcall(qjson.encode, outer)
            if not ok or out ~= "[1,2,3]" then wrong = wrong + 1 end
        end
        assert.equal(0, wrong)
    end)

    it("keeps a deep encode's state from finalizers run in its own coroutines", function()
        local runs = 0
        local function arm()
            ffi.gc(ffi.new("char[1]"), function()
                runs = runs + 1
                if runs < 3000 then
                    local t = qjson.decode('{"a":[1,2]}')
                    t.a[3] = runs
                    assert(qjson.encode(t) == '{"a":[1,2,' .. runs .. ']}')
                    arm()
                end
            end)
        end
        local function deep()
            local bottom = qjson.decode('{"k":1,"list":[1,2,3]}')
            bottom.k = 2
            bottom.list[4] = 4
            local t = { bottom }
            for _ = 2, 1100 do t = { t } end
            return t
        end
        local want = ("["):rep(1100) .. '{"k":2,"list":[1,2,3,4]}' .. ("]"):rep(1100)
        -- Interpreted: compiled, LuaJIT 2.1-20230119 at times never
        -- returned from such finalizers (with no qjson in them either,
        -- the audit found).
        jit.off()
        finally(function() jit.on() end)
        qjson.encode_max_depth(5000)
        local pause = collectgarbage("setpause", 0)
        local stepmul = collectgarbage("setstepmul", 100000)
        arm()
        local outs = {}
        for i = 1, 4 do
            local ok, out = pcall(qjson.encode, deep())
            outs[i] = ok and out or ("error: " .. tostring(out))
        end
        collectgarbage("setpause", pause)
        collectgarbage("setstepmul", stepmul)
        runs = 3000
        collectgarbage()
        qjson.encode_max_depth(1000)
        for i = 1, 4 do
            assert.equal(want, outs[i])
        end
        assert.is_true(qffi.idle())
    end)
end)
