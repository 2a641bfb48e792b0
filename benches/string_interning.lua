-- What LuaJIT's string interning costs a decode, by where a body's strings
-- differ. Every Lua string is interned: LuaJIT hashes it and compares it
-- with the strings already in its hash chain. The hash of a long string
-- reads only some of its bytes, so strings of one length that differ only
-- where it does not read share a chain, and each new one is compared with
-- those before it. A client can send such strings; the cost is LuaJIT's,
-- paid by every library that makes them into Lua strings.
--
--   luajit benches/string_interning.lua [N ...]     default: 10000 20000 40000
--   luajit benches/string_interning.lua --pause [P ...]   default: 100 200 400 1000
--
-- Which bytes are read: on a CPU with SSE 4.2, OpenResty's luajit2 (and
-- Debian's luajit2 2.1-20230119, its build) hashes a string of 128 bytes
-- or more from three bytes (first, middle, last); a chain that grows past
-- 32 strings is rehashed from its first and last 8 bytes and 16 windows
-- of 8 bytes at offsets drawn once per process, all of them in the
-- string's first nine sixteenths (lj_str_hash.c, hash_128_above: its loop
-- steps one chunk where it reads two). So strings that differ only after
-- that, short of their last 8 bytes, collide in every process; strings
-- that differ only between the windows collide in some processes and not
-- in others.
--
-- For each N: a JSON array of N strings of 308 bytes that differ in 8
-- digits at their start, in their middle (byte 150: between windows or
-- not, by process) or at three quarters (byte 225: never read); the time
-- of cjson.decode, of qjson.decode(s, { lazy = false }), of qjson.parse
-- alone (validation: no Lua string is made) and of qjson.parse plus
-- get_str of every element (one Lua string each). cjson is the first on
-- package.cpath (set LUA_CPATH to OpenResty's fork, as tools/baselines.sh
-- builds it).
--
-- With --pause: the SSE rows' nested change of benches/lua_bench.lua
-- (decode an event, set choices[1].delta.content to a new value, encode)
-- under each collector pause P (collectgarbage("setpause", P); Lua's
-- default is 200), median of 5 rounds of 20 000 events per library. Each
-- output differs from the last only in the new value, so the outputs made
-- since the last collection share a chain when the value lies where the
-- hash does not read: the longer a cycle, the more of them each new one
-- is compared with. Where the value lies is printed first: qjson keeps
-- the event's order (choices last, so the value in the unread part);
-- cjson writes keys in its table's order, which follows the per-process
-- hash seed, so its value lands in the read part in some processes only.
-- A third column encodes with qjson.encode_pieces, whose pieces share no
-- chain.

package.path = "lua/?.lua;" .. package.path

local cjson = require("cjson")
local qjson = require("qjson")

local EAGER = { lazy = false }
local PAD = string.rep("x", 150)

local function body(n, where)
    local parts = {}
    for i = 1, n do
        local digits = string.format("%08d", i)
        local s = where == "start" and digits .. PAD .. PAD
                  or where == "middle" and PAD .. digits .. PAD
                  or PAD .. PAD:sub(1, 75) .. digits .. PAD:sub(76)
        parts[i] = '"' .. s .. '"'
    end
    return "[" .. table.concat(parts, ",") .. "]"
end

local function read_all(text)
    local doc = qjson.parse(text)
    local sum = 0
    for i = 0, doc:len() - 1 do
        sum = sum + #doc:get_str("[" .. i .. "]")
    end
    doc:free()
    return sum
end

local ways = {
    { "cjson.decode", cjson.decode },
    { "qjson eager", function(s) return qjson.decode(s, EAGER) end },
    { "qjson.parse", function(s) return qjson.parse(s) end },
    { "parse + get_str each", read_all },
}

-- Milliseconds of one call, the best of three, each after a full
-- collection (so no string of an earlier call is still in a chain: the
-- result is dropped when the call returns).
local function time_ms(fn, text)
    local best = math.huge
    for _ = 1, 3 do
        collectgarbage()
        collectgarbage()
        local start = os.clock()
        fn(text)
        best = math.min(best, os.clock() - start)
    end
    return best * 1e3
end

-- Median microseconds per nested change of `lib` over 5 rounds.
local function nested_change_us(lib, events)
    local rounds, k = {}, 0
    for r = 0, 5 do
        local start = os.clock()
        for _ = 1, 100 do
            for i = 1, #events do
                k = k + 1
                local t = lib.decode(events[i])
                t.choices[1].delta.content = "redacted " .. k
                lib.encode(t)
            end
        end
        -- Round 0 warms up.
        if r > 0 then rounds[r] = (os.clock() - start) / (100 * #events) * 1e6 end
    end
    table.sort(rounds)
    return rounds[3]
end

-- qjson.encode_pieces in place of qjson.encode: the untouched run before
-- the value is a piece of its own, the same string in every event, and
-- the rest is under 128 bytes, hashed whole (lua/qjson/encode.lua).
local in_pieces = { decode = qjson.decode, encode = qjson.encode_pieces }

local function pauses(list)
    package.path = "benches/?.lua;" .. package.path
    local payloads = require("payloads")
    local events = payloads.sse_events(200)
    print(payloads.nested_change_where(events[2], cjson, qjson))
    for _, pause in ipairs(list) do
        collectgarbage()
        collectgarbage("setpause", pause)
        local c = nested_change_us(cjson, events)
        local q = nested_change_us(qjson, events)
        local p = nested_change_us(in_pieces, events)
        print(string.format("pause %4d: nested change of an SSE event, cjson %6.2f us, "
            .. "qjson %6.2f us (%.2fx), in pieces %6.2f us (%.2fx)", pause, c, q, c / q,
            p, c / p))
    end
    collectgarbage("setpause", 200)
end

local numbers = {}
for i = 1, #arg do
    if arg[i] ~= "--pause" then
        numbers[#numbers + 1] = assert(tonumber(arg[i]), "arguments must be numbers")
    end
end
if arg[1] == "--pause" then
    pauses(#numbers > 0 and numbers or { 100, 200, 400, 1000 })
    return
end
local sizes = #numbers > 0 and numbers or { 10000, 20000, 40000 }

print(string.format("%-8s %-7s %14s %14s %14s %22s", "strings", "differ", ways[1][1],
                    ways[2][1], ways[3][1], ways[4][1]))
for _, n in ipairs(sizes) do
    for _, where in ipairs({ "start", "middle", "3/4" }) do
        local text = body(n, where)
        local row = { string.format("%-8d %-7s", n, where) }
        for k, way in ipairs(ways) do
            local cell = k == 4 and "%19.1f ms" or "%11.1f ms"
            row[#row + 1] = string.format(cell, time_ms(way[2], text))
        end
        print(table.concat(row, " "))
    end
end
