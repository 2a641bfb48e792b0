-- The arguments of the cjson-style option functions (qjson.encode_*,
-- qjson.decode_max_depth), checked and converted the way lua-cjson does,
-- so code written for cjson configures qjson unchanged: a switch takes a
-- boolean or "on"/"off"; a number takes an integer, a numeric string or a
-- fraction (truncated, as luaL_checkinteger does), within its range; nil
-- leaves the setting as it is. Errors name the function and argument, at
-- the level of the option function's caller.

local type = type
local error = error
local select = select
local tonumber = tonumber
local tostring = tostring
local format = string.format
local math_floor = math.floor
local math_ceil = math.ceil

local _M = {}

-- The setting for argument #arg `v` of function `name`, which takes the
-- arguments that are keys of `settings` (each mapped to its setting), or
-- nil for nil.
local function choice(name, arg, v, settings)
    if v == nil then
        return nil
    end
    local setting = settings[v]
    if setting ~= nil then
        return setting
    elseif type(v) == "string" or type(v) == "number" then
        error(format("bad argument #%d to '%s' (invalid option '%s')", arg, name, tostring(v)), 3)
    end
    error(format("bad argument #%d to '%s' (string expected, got %s)", arg, name, type(v)), 3)
end
_M.choice = choice

local SWITCH = { [true] = true, [false] = false, on = true, off = false }

-- The boolean for switch argument #arg `v` of function `name`, or nil.
-- (A tail call: the error levels of `choice` hold.)
function _M.switch(name, arg, v)
    return choice(name, arg, v, SWITCH)
end

-- The option function `name` of a switch kept in field `field` of
-- `config`: sets it when given a value (then calls `changed(config)` when
-- given) and returns the current setting.
function _M.switch_function(name, config, field, changed)
    return function(on)
        on = choice(name, 1, on, SWITCH)
        if on ~= nil then
            config[field] = on
            if changed then
                changed(config)
            end
        end
        return config[field]
    end
end

-- The string for string argument #arg `v` of function `name` (a number is
-- taken as its string, as luaL_checklstring takes it), or nil.
function _M.text(name, arg, v)
    if v == nil or type(v) == "string" then
        return v
    elseif type(v) == "number" then
        return tostring(v)
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
    -- (NaN compares false with everything: out of range too, as cjson
    -- finds it; kept, it made the number format "%.nang".)
    if not (n >= lo and n <= hi) then
        error(format("bad argument #%d to '%s' (expected integer between %d and %d)",
                     arg, name, lo, hi), 3)
    end
    return n
end

-- Option function `f`, named `name`, behind cjson's check of how many
-- arguments it got (json_arg_init): more than `most`, trailing nils
-- counted as lua_gettop counts them, raises "found too many arguments"
-- and changes nothing. (`f` is tail-called: its own errors keep their
-- levels.)
function _M.at_most(name, most, f)
    return function(...)
        if select("#", ...) > most then
            error(format("bad argument #%d to '%s' (found too many arguments)", most + 1, name),
                  2)
        end
        return f(...)
    end
end

return _M
