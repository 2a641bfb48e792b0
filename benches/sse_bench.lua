-- qjson.sse throughput on a 20,000-event chat completion stream, chunked
-- three ways, with and without reading each event's JSON (cjson.decode of
-- ev.data for comparison). Side by side in one process; best of 3.
--
--   luajit benches/sse_bench.lua
--
-- The collector takes a step every 4 KB of input, as a worker's small
-- per-request heap would: the lines of a stream are alike, and LuaJIT's
-- sparse string hash puts them in one bucket, so letting dead ones pile
-- up measures the interning chain, not the reader. The last two rows
-- leave the collector to its own pace, as a worker with a larger heap
-- does: a data string per event (cjson's way) then pays for that chain,
-- and ev:parse(), which reads a one-line event inside its chunk, does not.

package.path = "lua/?.lua;" .. package.path
local sse = require("qjson.sse")
local cjson = require("cjson")

local EVENTS = 20000
local parts = {}
for i = 1, EVENTS do
    parts[i] = 'data: {"id":"chatcmpl-9xYz","object":"chat.completion.chunk",'
               .. '"created":1718000000,"model":"gpt-4o-2024-05-13","choices":[{"index":0,'
               .. '"delta":{"content":"token ' .. i .. ' Привет"},"logprobs":null,'
               .. '"finish_reason":null}]}\n\n'
end
local stream = table.concat(parts)

local function chunks(size)
    local out = {}
    for i = 1, #stream, size do
        out[#out + 1] = stream:sub(i, i + size - 1)
    end
    return out
end

local function run(name, list, read, own_pace)
    local best = math.huge
    for _ = 1, 3 do
        collectgarbage()
        local t0 = os.clock()
        local s, n, since_step = sse.new(), 0, 0
        for _, c in ipairs(list) do
            for _, ev in ipairs(s:feed(c)) do
                n = n + 1
                read(ev)
            end
            since_step = since_step + #c
            if since_step >= 4096 and not own_pace then
                since_step = 0
                collectgarbage("step", 16)
            end
        end
        assert(n == EVENTS, name .. ": " .. n .. " events")
        best = math.min(best, os.clock() - t0)
    end
    print(string.format("%-42s %7.1f MB/s %8.2f us/event", name, #stream / best / 1e6,
                        best / EVENTS * 1e6))
end

local function framing() end
local function path_getter(ev)
    assert(ev:parse():get_str("choices[0].delta.content"))
end
local function proxies(ev)
    assert(ev:json().choices[1].delta.content)
end
local function with_cjson(ev)
    assert(cjson.decode(ev.data).choices[1].delta.content)
end

print(string.format("%d bytes, %d events", #stream, EVENTS))
local big, small = chunks(4096), chunks(64)
run("framing only, 4096-byte chunks", big, framing)
run("framing only, 64-byte chunks", small, framing)
run("framing only, 1-byte chunks", chunks(1), framing)
run("ev:parse() + get_str, 4096-byte chunks", big, path_getter)
run("ev:json() proxies, 4096-byte chunks", big, proxies)
run("framing + cjson.decode(ev.data), 4096", big, with_cjson)
run("ev:parse() + get_str, 4096, own pace", big, path_getter, true)
run("cjson.decode(ev.data), 4096, own pace", big, with_cjson, true)
