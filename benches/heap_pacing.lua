-- A small document decoded and read while the Lua heap holds many live
-- objects, as a gateway worker's does (routes, caches, configuration):
-- qjson beside cjson, in one process.
--
--   luajit benches/heap_pacing.lua [LIVE_TABLES] [DECODES]
--
-- (defaults 300 000 and 1 000 000). qjson's native documents are freed
-- when the collector finds their proxies dead, so a cycle's worth of them
-- is alive at once, and a cycle's worth grows with the Lua heap: whether
-- the document pool holds them (src/document.rs, `pool`) and how often
-- the collector is made to catch up with their native memory
-- (lua/qjson/doc.lua, `track`) decide whether a small document's cost
-- grows with the heap. cjson is the first on package.cpath
-- (`LUA_CPATH=target/baselines/?.so;;` for OpenResty's fork).

package.path = "lua/?.lua;benches/?.lua;" .. package.path

local qjson = require("qjson")
local cjson = require("cjson")
local TOOL = require("payloads").TOOL_CALL

local live_tables = tonumber(arg[1]) or 300000
local decodes = tonumber(arg[2]) or 1000000

local live = {}
for i = 1, live_tables do
    live[i] = { i, tostring(i) }
end

local function run(decode)
    local sum = 0
    local start = os.clock()
    for k = 1, decodes do
        local t = decode(TOOL)
        sum = sum + #t.order_id + t.options.max_items + k
    end
    return (os.clock() - start) / decodes * 1e9, sum
end

-- Warm-up for both, then timed runs in turn.
run(cjson.decode)
run(qjson.decode)
local cj, qj = run(cjson.decode), run(qjson.decode)
print(string.format("%d live tables (%.0f MB Lua heap): tool-call decode + 2 reads, "
    .. "cjson %.0f ns, qjson %.0f ns (%.2fx)",
    #live, collectgarbage("count") / 1024, cj, qj, cj / qj))
