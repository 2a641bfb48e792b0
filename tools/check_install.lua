-- Checks an installed qjson: every module and libqjson.so come from the
-- install prefix (not from a checkout), and the library parses, decodes,
-- encodes and reads SSE. Raises on the first failure, so the exit status
-- is the verdict under plain LuaJIT and under tools/nginx-lua alike.
--
-- Usage: luajit tools/check_install.lua PREFIX MODULE...
--   PREFIX   the directory every file must have been loaded from
--   MODULE   module names to find under PREFIX (qjson, qjson.ffi, ...)

local prefix = assert(arg[1], "usage: check_install.lua PREFIX MODULE...")

local function inside(path)
    return path ~= nil and path:sub(1, #prefix) == prefix
end

for i = 2, #arg do
    local name = arg[i]
    local path = package.searchpath(name, package.path)
    assert(inside(path), name .. " found at " .. tostring(path) .. ", not under " .. prefix)
    require(name)
end

local qjson = require("qjson")
assert(inside(qjson.library_path),
       "libqjson.so loaded from " .. qjson.library_path .. ", not under " .. prefix)

local text = '{"model":"gpt-4o","n":[1,2.5,"x"]}'
assert(qjson.parse(text):get_str("model") == "gpt-4o", "parse")
local t = qjson.decode(text)
assert(t.n[2] == 2.5, "decode")
t.model = "o1"
assert(qjson.encode(t) == '{"model":"o1","n":[1,2.5,"x"]}', "encode a changed proxy")
assert(qjson.encode({ a = { true } }) == '{"a":[true]}', "encode a plain table")
assert(select(2, require("qjson.safe").parse("[1,]")):match("^qjson: "), "qjson.safe")
local events = require("qjson.sse").new():feed('data: {"usage":{"total_tokens":7}}\n\n')
assert(events[1]:json().usage.total_tokens == 7, "qjson.sse")

print("qjson " .. qjson._VERSION .. " from " .. qjson.library_path .. " (" .. qjson.kernel()
      .. ")")
