-- Issue 12's access loops, whole-loop time (best of 3) at 1k to 100k
-- elements, as a markdown table (docs/reliability.md, "Linear time for
-- every access pattern"):
--
--   luajit benches/access_loops.lua
--
-- make bench's "access" rows set the same kinds of loop beside cjson; this
-- table shows how each loop grows with the body.

package.path = "lua/?.lua;benches/?.lua;" .. package.path

local qjson = require("qjson")

local now = require("clock")

local MESSAGE = '{"role":"user","content":[{"type":"text","text":"m17"}]}'

local function messages(n)
    return '{"messages":[' .. string.rep(MESSAGE, n, ",") .. "]}"
end

local function object(n)
    local members = {}
    for i = 1, n do members[i] = '"k' .. i .. '":' .. i end
    return "{" .. table.concat(members, ",") .. "}"
end

local function arrays(n)
    return "[" .. string.rep("[1,2]", n, ",") .. "]"
end

local function contents(n)
    return "[" .. string.rep('{"content":[1]}', n, ",") .. "]"
end

local LOOPS = {
    { "`for i = n, 1, -1 do m[i].role` (proxy)", messages, function(s, n)
        local m = qjson.decode(s).messages
        for i = n, 1, -1 do assert(m[i].role) end
    end },
    { "`for i = 1, n do m[i].content[1].text` (proxy)", messages, function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n do assert(m[i].content[1].text) end
    end },
    { "`m[(i*7919) % n + 1].role` (proxy)", messages, function(s, n)
        local m = qjson.decode(s).messages
        for i = 1, n do assert(m[(i * 7919) % n + 1].role) end
    end },
    { '`d:get_str("messages["..i.."].content[0].text")`', messages, function(s, n)
        local d = qjson.parse(s)
        for i = 0, n - 1 do assert(d:get_str("messages[" .. i .. "].content[0].text")) end
    end },
    { '`d:get_str("messages["..(n-1-i).."].role")`', messages, function(s, n)
        local d = qjson.parse(s)
        for i = 0, n - 1 do assert(d:get_str("messages[" .. (n - 1 - i) .. "].role")) end
    end },
    { '`t["k"..i]`, object of n keys (proxy)', object, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do assert(t["k" .. i]) end
    end },
    { '`d:get_i64("k"..i)`, object of n keys', object, function(s, n)
        local d = qjson.parse(s)
        for i = 1, n do assert(d:get_i64("k" .. i)) end
    end },
    { "`for k, v in qjson.pairs(t) do t[k] = v + 1 end`", object, function(s)
        local t = qjson.decode(s)
        for k, v in qjson.pairs(t) do t[k] = v + 1 end
    end },
    { "adding n new keys to a proxy", object, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do t["x" .. i] = i end
    end },
    { "encoding `[[1,2],…]` with every element changed", arrays, function(s, n)
        local t = qjson.decode(s)
        for i = 1, n do t[i][2] = 3 end
        assert(#qjson.encode(t) == #s)
    end },
    { 'nested `qjson.ipairs` over `[{"content":[1]},…]`', contents, function(s)
        for _, e in qjson.ipairs(qjson.decode(s)) do
            for _, x in qjson.ipairs(e.content) do assert(x) end
        end
    end },
}

local SIZES = { 1000, 4000, 16000, 64000, 100000 }

local function human(seconds)
    if seconds < 1 then
        return string.format("%.1f ms", seconds * 1e3)
    end
    return string.format("%.2f s", seconds)
end

print("| loop | 1 000 | 4 000 | 16 000 | 64 000 | 100 000 | 16 000 → 64 000 |")
print("|---|---|---|---|---|---|---|")
for _, loop in ipairs(LOOPS) do
    local label, make, run = loop[1], loop[2], loop[3]
    local cells, times = {}, {}
    for k, n in ipairs(SIZES) do
        local s = make(n)
        local best = math.huge
        for _ = 1, 3 do
            collectgarbage()
            local start = now()
            run(s, n)
            best = math.min(best, now() - start)
        end
        times[k], cells[k] = best, human(best)
    end
    print(string.format("| %s | %s | %.1fx |", label, table.concat(cells, " | "),
                        times[4] / times[3]))
end
