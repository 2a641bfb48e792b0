-- qjson.safe: the qjson API returning nil, err instead of raising, like
-- cjson.safe. Documents it parses also return nil, err for misuse (a
-- malformed path, use after free()).

local qjson = require("qjson")

local parse = qjson._parse
local decode = qjson._decode
local encode = qjson.encode
local encode_options = require("qjson.encode").OPTIONS
local ipairs = ipairs
local pcall = pcall

-- An option function that returns nil, err for a bad value instead of
-- raising. The message has no position: the error is raised at level 2,
-- which is pcall here.
local function safe_option(set)
    local function results(ok, ...)
        if not ok then
            return nil, (...)
        end
        return ...
    end
    return function(...)
        return results(pcall(set, ...))
    end
end

local _M = {
    _VERSION = qjson._VERSION,
    null = qjson.null,
    decode_max_depth = safe_option(qjson.decode_max_depth),
    duplicate_keys = safe_option(qjson.duplicate_keys),
    kernel = qjson.kernel,
    materialize = qjson.materialize,
    len = qjson.len,
    pairs = qjson.pairs,
    ipairs = qjson.ipairs,
    array_mt = qjson.array_mt,
    empty_array_mt = qjson.empty_array_mt,
    empty_array = qjson.empty_array,
}
for _, name in ipairs(encode_options) do
    _M[name] = safe_option(qjson[name])
end

function _M.parse(text, opts)
    local d, err = parse(text, opts, true)
    return d, err
end

function _M.decode(text, opts)
    local v, err = decode(text, opts)
    if v == nil then
        return nil, err
    end
    return v
end

-- Returns nil, err where qjson.encode raises (unsupported values, NaN,
-- excessive nesting), like cjson.safe.encode.
function _M.encode(v)
    local ok, out = pcall(encode, v)
    if not ok then
        return nil, out
    end
    return out
end

return _M
