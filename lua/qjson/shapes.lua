-- Eager decode of small texts by shape (src/eager/shape.rs): the native
-- walk gives a text's shape id and its strings and numbers in a
-- qjson_shaped; a function made once per shape builds the tables with Lua
-- table constructors, whose string keys LuaJIT keeps in a template it
-- copies (TDUP), where the Lua C API would hash, look up and insert every
-- key of every document.
--
-- One function per shape id and way of marking arrays, made the first
-- time the id is met (15-35 us, benches/shapes.lua); the Lua state's
-- registry (lua/qjson.lua) gives out at most 32 ids, so at most twice
-- that many are made, whatever the input, and a text of any other shape
-- is decoded through the C API.

local ffi = require("ffi")

local byte = string.byte
local sub = string.sub
local format = string.format
local gsub = string.gsub
local concat = table.concat
local load = load
local assert = assert
local tostring = tostring
local error = error
local setmetatable = setmetatable
local ffi_string = ffi.string

local OPEN_OBJECT, CLOSE_OBJECT = byte("{"), byte("}")
local OPEN_ARRAY, CLOSE_ARRAY = byte("["), byte("]")
local KEY, STRING, NUMBER = byte("k"), byte("s"), byte("n")
local TRUE, FALSE, NULL = byte("t"), byte("f"), byte("z")

-- A Lua string literal of any bytes: each a decimal escape.
local function literal(bytes)
    return '"' .. gsub(bytes, ".", function(c) return format("\\%03d", byte(c)) end) .. '"'
end

-- The Lua source of the function that builds a value of `shape`, every
-- array with the metatable `amt` when `marked`, else empty ones with
-- `emt` (as qjson_lua_decode marks them).
local function source(shape, marked)
    local at, strings, numbers = 1, 0, 0
    local value
    -- The values of the container whose opening byte was just read, up
    -- to its closing byte `close`; members with their keys, a repeated
    -- key's last value only. (In a constructor LuaJIT stores a constant
    -- value in the template and the others after copying it, so with
    -- both under one key the order of the source would not hold.)
    local function items(close)
        local list, member_of = {}, {}
        while true do
            local c = byte(shape, at)
            if c == close then
                at = at + 1
                local kept = {}
                for i = 1, #list do
                    if list[i] then kept[#kept + 1] = list[i] end
                end
                return kept
            end
            if c == KEY then
                local len = byte(shape, at + 1)
                local key = sub(shape, at + 2, at + 1 + len)
                at = at + 2 + len
                if member_of[key] then
                    list[member_of[key]] = false
                end
                list[#list + 1] = "[" .. literal(key) .. "]=" .. value()
                member_of[key] = #list
            else
                list[#list + 1] = value()
            end
        end
    end
    value = function()
        local c = byte(shape, at)
        at = at + 1
        if c == STRING then
            strings = strings + 1
            return format("fs(s[%d],l[%d])", strings - 1, strings - 1)
        elseif c == NUMBER then
            numbers = numbers + 1
            return format("n[%d]", numbers - 1)
        elseif c == TRUE then
            return "true"
        elseif c == FALSE then
            return "false"
        elseif c == NULL then
            return "null"
        elseif c == OPEN_OBJECT then
            return "{" .. concat(items(CLOSE_OBJECT), ",") .. "}"
        elseif c == OPEN_ARRAY then
            local list = items(CLOSE_ARRAY)
            local t = "{" .. concat(list, ",") .. "}"
            if marked then
                return "setmt(" .. t .. ",amt)"
            elseif #list == 0 then
                return "setmt({},emt)"
            end
            return t
        end
        error("qjson: bad shape byte " .. tostring(c) .. " at " .. (at - 1))
    end
    local body = value()
    if at ~= #shape + 1 then
        error("qjson: bad shape, " .. (#shape - at + 1) .. " bytes left")
    end
    return "local fs, null, emt, amt, setmt = ...\n"
        .. "return function(o)\n"
        .. "local n, s, l = o.number, o.string, o.string_len\n"
        .. "return " .. body .. "\nend\n"
end

local _M = {}

-- Builds a function of a qjson_shaped for the shape in `out` (a
-- qjson_shaped just filled), arrays marked with `array_mt` when given.
function _M.compile(out, null, empty_array_mt, array_mt)
    local shape = ffi_string(out.shape, out.shape_len)
    local chunk = assert(load(source(shape, array_mt ~= nil), "=qjson shape"))
    return chunk(ffi_string, null, empty_array_mt, array_mt, setmetatable)
end

_M.source = source

return _M
