-- Eager decode by shape (lua/qjson/shapes.lua) when texts come in many
-- shapes: what the first decode of a shape costs (its function is made),
-- and a decode's cost when N shapes come in turn, by shape beside the Lua
-- C API path (qjson_lua_decode, what a text past a registry's 32 shapes
-- takes). Why src/eager/shape.rs gives out at most 32 ids: the functions
-- are called from one place, and LuaJIT's traces follow a few dozen
-- callees there well, not hundreds.
--
--   luajit benches/shapes.lua

package.path = "lua/?.lua;" .. package.path

local qjson = require("qjson")
local qffi = require("qjson.ffi")

local clock = os.clock
local EAGER = { lazy = false }
local c_decode = qffi.c_decode
local null, empty_array_mt = qjson.null, qjson.empty_array_mt
local DECODES = 64000

-- 128 texts of 128 shapes (one key differs).
local texts = {}
for i = 1, 128 do
    texts[i] = '{"model":"m","n":' .. i .. ',"k' .. i .. '":[1,"x",{"a":true}]}'
end

local start = clock()
for i = 1, 32 do qjson.decode(texts[i], EAGER) end
print(string.format("first decode of a shape (its function made): %.1f us",
                    (clock() - start) / 32 * 1e6))

-- Microseconds per decode of `decode` over the first n texts in turn.
local function per_decode(decode, n)
    local start_at = clock()
    for _ = 1, DECODES / n do
        for i = 1, n do decode(texts[i]) end
    end
    return (clock() - start_at) / DECODES * 1e6
end

local function by_shape(text) return qjson.decode(text, EAGER) end
local function c_api(text) return c_decode(text, 1000, 0, null, empty_array_mt) end
print("shapes in turn   by shape (us)   C API (us)")
for _, n in ipairs({ 1, 8, 16, 32, 64, 128 }) do
    -- A fresh registry per row, its functions made before the timing;
    -- past 32 shapes decodes go through the C API.
    qjson._reset_shapes()
    for i = 1, n do qjson.decode(texts[i], EAGER) end
    print(string.format("%15d %16.2f %12.2f", n, per_decode(by_shape, n), per_decode(c_api, n)))
end
