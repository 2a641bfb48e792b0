-- A small document decoded and read while the Lua heap holds many live
-- objects, as a gateway worker's does (routes, caches, configuration):
-- qjson's proxies (`qjson.decode`) and plain tables (`lazy = false`)
-- beside cjson, in one process.
--
--   luajit benches/heap_pacing.lua [LIVE_TABLES...]
--
-- (default 0, 30 000 and 300 000: about 0, 4 and 44 MB of Lua heap).
-- The collector's work per byte allocated, and the cache lines a decode
-- touches that it last touched a cycle ago, grow with the Lua heap. A
-- small text's document lives in memory the reader keeps (src/document/
-- small.rs) and is named by a block in the Lua heap, so what a decode
-- costs beyond cjson's at any heap size is what it allocates there (the
-- proxy state and the block) and its native work. An eager decode of a
-- small text builds its tables from a shape (lua/qjson/shapes.lua) and
-- allocates those alone, half of what cjson's do. (Before, each small
-- document had native memory of its own, freed a collection cycle later:
-- a cycle's worth of them was alive at once, as cold as the cycle was
-- long.)
--
-- With a large heap one collection cycle costs tens of milliseconds and
-- comes every few hundred thousand decodes, and a cycle is paid by
-- whichever library allocates when it is due. So the libraries run in
-- alternating blocks over many cycles, and each one's time is the sum of
-- its blocks. cjson is OpenResty's fork from QJSON_BASELINES (a
-- tools/baselines.sh build, as `make bench` sets it) when given, else the
-- first on package.cpath (`LUA_CPATH="target/baselines/?.so;;"` works too).

package.path = "lua/?.lua;benches/?.lua;" .. package.path
local BASELINES = os.getenv("QJSON_BASELINES")
if BASELINES and BASELINES ~= "" then
    package.cpath = BASELINES .. "/?.so;" .. package.cpath
end

local qjson = require("qjson")
local cjson = require("cjson")
local TOOL = require("payloads").TOOL_CALL

local BLOCK = 20000
local BLOCKS = 100
local WARM_UP_BLOCKS = 50

-- A block of decodes, compiled from source once per library so that each
-- gets traces of its own (one shared loop would be compiled for the first
-- library's decode and leave the other to side traces).
local BLOCK_SOURCE = [[
local decode, text, n = ...
return function()
    local sum = 0
    local start = os.clock()
    for k = 1, n do
        local t = decode(text)
        sum = sum + #t.order_id + t.options.max_items + k
    end
    return os.clock() - start, sum
end
]]

local function block_of(decode, n)
    return assert(loadstring(BLOCK_SOURCE, "=block"))(decode, TOOL, n or BLOCK)
end

local EAGER = { lazy = false }
local function eager(text)
    return qjson.decode(text, EAGER)
end

-- The libraries, in the order they run and print.
local LIBRARIES = {
    { name = "cjson", decode = cjson.decode },
    { name = "qjson.decode", decode = qjson.decode },
    { name = "lazy = false", decode = eager },
}
for _, lib in ipairs(LIBRARIES) do
    lib.block = block_of(lib.decode)
end

-- Bytes of Lua objects one decode and its reads allocate: the collector's
-- work is charged by the byte, and it is what grows with the heap. (A
-- thousand decodes, few enough that qjson's native memory does not make
-- it start the stopped collector: see lua/qjson/doc.lua, `track`.)
local function allocated(decode)
    local run = block_of(decode, 1000)
    run()
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    run()
    local bytes = (collectgarbage("count") - before) * 1024 / 1000
    collectgarbage("restart")
    return bytes
end

local function measure(live_tables)
    local live = {}
    for i = 1, live_tables do
        live[i] = { i, tostring(i) }
    end
    collectgarbage()
    local heap_mb = collectgarbage("count") / 1024
    -- Warm-up for each, long enough for a few collection cycles even with
    -- the largest heap (a worker runs for days: the steady state is what
    -- counts), then the timed blocks in turn.
    for _ = 1, WARM_UP_BLOCKS do
        for _, lib in ipairs(LIBRARIES) do
            lib.block()
        end
    end
    local seconds = {}
    for i = 1, #LIBRARIES do
        seconds[i] = 0
    end
    for _ = 1, BLOCKS do
        for i, lib in ipairs(LIBRARIES) do
            seconds[i] = seconds[i] + lib.block()
        end
    end
    local n = BLOCK * BLOCKS
    local cells = {}
    for i, lib in ipairs(LIBRARIES) do
        cells[i] = string.format("%s %4.0f ns", lib.name, seconds[i] / n * 1e9)
        if i > 1 then
            cells[i] = cells[i] .. string.format(" (%.2fx)", seconds[1] / seconds[i])
        end
    end
    print(string.format("%7d live tables (%3.0f MB Lua heap): tool-call decode + 2 reads, %s",
        live_tables, heap_mb, table.concat(cells, ", ")))
    -- (Returned, so the tables stay reachable to the last block: compiled
    -- code need not keep a local it no longer reads.)
    return live
end

local sizes_of = {}
for i, lib in ipairs(LIBRARIES) do
    sizes_of[i] = string.format("%s %.0f bytes", lib.name, allocated(lib.decode))
end
print("Lua objects allocated per decode + 2 reads: " .. table.concat(sizes_of, ", "))
local sizes = { ... }
if #sizes == 0 then
    sizes = { 0, 30000, 300000 }
end
for _, live_tables in ipairs(sizes) do
    measure(tonumber(live_tables))
    collectgarbage()
end
