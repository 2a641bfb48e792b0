-- What a new Lua string of a large body costs, whole or in 64 KB pieces:
-- why qjson.encode_pieces exists. LuaJIT's allocator serves an object of
-- 128 KB or more with a mapping of its own (mmap), touched page by page
-- as it is written (a fault per 4 KB) and unmapped when the object is
-- freed (munmap), so every new string that large pays all three; smaller
-- objects come from memory the allocator already holds. Each string made
-- here differs from the ones before it (a counter at both ends), as the
-- bodies of a gateway's requests do: an equal one would be found interned
-- and not made at all.
--
--   luajit benches/fresh_strings.lua [BYTES [N]]    default: 1048576 1000
--   tools/nginx-lua benches/fresh_strings.lua [BYTES [N]]   (in nginx)
--
-- Prints the time per body of each way, CPU time (os.clock), each way
-- timed twice, alternating.

local buffer = require("string.buffer")
local ffi = require("ffi")

local BYTES = tonumber(arg and arg[1]) or 1048576
local N = tonumber(arg and arg[2]) or 1000
local PIECE = 65536

local body = string.rep("x", BYTES)
local at = ffi.cast("const char *", body)
local buf = buffer.new()
-- The last results, kept so that no string is made for nothing.
local whole, pieces = nil, {}

local ways = {
    { "one string of the body", function(k)
        whole = buf:reset():put(k):putcdata(at, BYTES):put(k):tostring()
    end },
    { "the body in 64 KB strings", function(k)
        local n = 0
        for from = 0, BYTES - 1, PIECE do
            n = n + 1
            pieces[n] = buf:reset():put(k):putcdata(at + from, math.min(PIECE, BYTES - from))
                           :tostring()
        end
    end },
    { "the copy alone (no string)", function(k)
        buf:reset():put(k):putcdata(at, BYTES):put(k)
    end },
}

print(("%d-byte bodies, %d of each way; microseconds per body:"):format(BYTES, N))
for round = 1, 2 do
    for _, way in ipairs(ways) do
        collectgarbage()
        local t = os.clock()
        for k = 1, N do
            way[2](k)
        end
        print(("  round %d  %-28s %8.1f"):format(round, way[1], (os.clock() - t) / N * 1e6))
    end
end
assert(#whole == BYTES + 2 * #tostring(N) and #pieces >= 1)
