-- The arguments of the cjson-style option functions (qjson.encode_*,
-- qjson.decode_max_depth), checked and converted the way lua-cjson does,
-- so code written for cjson configures qjson unchanged: a switch takes a
-- boolean or "on"/"off"; a number takes an integer, a numeric string or a
-- fraction (truncated, as luaL_checkinteger does), within its range; nil
-- leaves the setting as it is. Errors name the function and argument, at
-- the level of the option function's caller.

local type = type
local error = error
local tonumber = tonumber
local tostring = tostring
local format = string.format
local math_floor = math.floor
local math_ceil = math.ceil

local _M = {}

-- The boolean for switch argument #arg `v` of function `name`, or nil.
function _M.switch(name, arg, v)
    if v == nil or type(v) == "boolean" then
        return v
    elseif v == "on" then
        return true
    elseif v == "off" then
        return false
    elseif type(v) == "string" or type(v) == "number" then
        error(format("bad argument #%d to '%s' (invalid option '%s')", arg, name, tostring(v)), 3)
    end
    error(format("bad argument #%d to '%s' (string expected, got %s)", arg, name, type(v)), 3)
end

-- The integer for number argument #arg `v` of function `name`, in lo..hi,
-- or nil.
function _M.integer(name, arg, v, lo, hi)
    if v == nil then
        return nil
    end
    local n = (type(v) == "number" or type(v) == "string") and tonumber(v) or nil
    if n == nil then
        error(format("bad argument #%d to '%s' (number expected, got %s)", arg, name, type(v)), 3)
    end
    n = n >= 0 and math_floor(n) or math_ceil(n)
    if n < lo or n > hi then
        error(format("bad argument #%d to '%s' (expected integer between %d and %d)",
                     arg, name, lo, hi), 3)
    end
    return n
end

return _M
