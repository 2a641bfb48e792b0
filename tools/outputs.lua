-- Writes what qjson makes of each payload into a directory, so that two
-- builds (x86-64 natively and aarch64 under qemu, tools/aarch64.sh smoke)
-- can be compared file by file. For each FILE, into OUTDIR/<basename>.*:
--
--   .reads   every value read through the lazy proxies of qjson.decode, in
--            document order, one line each (path, type, value); plus the
--            lazy document's view of the root (qjson.parse: typeof, len)
--   .eager   every value of qjson.decode(text, { lazy = false }), keys
--            sorted (the order of pairs over plain tables is the string
--            hash's, which differs between LuaJIT's x86-64 and arm64
--            builds), then the same of its qjson.encode decoded again
--            (numbers lose digits there, to %.14g, as with cjson)
--   .splice  qjson.encode of the proxy after changing the first member (or
--            element) and adding a key or element
--
-- and checks on the way that an untouched proxy re-encodes to the input
-- itself. Prints the stage-1 kernel in use.
--
-- Usage: luajit tools/outputs.lua OUTDIR FILE...

local qjson = require("qjson")

local format, concat = string.format, table.concat

local outdir = assert(arg[1], "usage: outputs.lua OUTDIR FILE...")

local function slurp(path)
    local f = assert(io.open(path, "rb"))
    local text = f:read("*a")
    f:close()
    return text
end

local function spit(path, text)
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
end

-- The keys of `t` in the order `qjson.pairs` gives, or sorted.
local function keys(t, sorted)
    local list = {}
    for k in qjson.pairs(t) do
        list[#list + 1] = k
    end
    if sorted then
        table.sort(list, function(a, b)
            if type(a) ~= type(b) then return type(a) < type(b) end
            return a < b
        end)
    end
    return list
end

-- One line per value under `v` at `path`, appended to `out`; tables in
-- `qjson.pairs` order, or by sorted keys.
local function walk(v, path, out, sorted)
    local kind = type(v)
    if kind == "table" then
        local list = keys(v, sorted)
        out[#out + 1] = format("%s table %d", path, #list)
        for _, k in ipairs(list) do
            walk(v[k], path .. "/" .. tostring(k), out, sorted)
        end
    elseif kind == "number" then
        out[#out + 1] = format("%s number %.17g", path, v)
    elseif kind == "string" then
        out[#out + 1] = format("%s string %q", path, v)
    else
        out[#out + 1] = format("%s %s %s", path, kind, tostring(v))
    end
end

for i = 2, #arg do
    local file = arg[i]
    local name = file:match("([^/]+)$")
    local text = slurp(file)

    local doc = qjson.parse(text)
    local reads = { format("root %s %s", doc:typeof(), tostring(doc:len())) }
    local t = qjson.decode(text)
    walk(t, "", reads)
    spit(format("%s/%s.reads", outdir, name), concat(reads, "\n"))
    assert(qjson.encode(t) == text, name .. ": an untouched proxy re-encodes to its input")

    local eager = {}
    local plain = qjson.decode(text, { lazy = false })
    walk(plain, "", eager, true)
    walk(qjson.decode(qjson.encode(plain), { lazy = false }), "re-encoded", eager, true)
    spit(format("%s/%s.eager", outdir, name), concat(eager, "\n"))

    if type(t) == "table" then
        local step, state, init = qjson.pairs(t)
        local first = step(state, init)
        if first ~= nil then
            t[first] = "changed"
        end
        if type(first) == "number" or first == nil then
            t[qjson.len(t) + 1] = { added = true }
        else
            t.added_by_outputs_lua = { 1, 2.5, "x" }
        end
    end
    spit(format("%s/%s.splice", outdir, name), qjson.encode(t))
end

print(qjson.kernel())
