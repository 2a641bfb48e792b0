-- qjson.safe: the qjson API returning nil, err instead of raising, like
-- cjson.safe. Documents it parses also return nil, err for misuse (a
-- malformed path, use after free()).

local qjson = require("qjson")

local parse = qjson._parse
local pcall = pcall

-- An option function that returns nil, err for a bad value instead of
-- raising. The message has no position: the error is raised at level 2,
-- which is pcall here.
local function safe_option(set)
    return function(v)
        local ok, current = pcall(set, v)
        if not ok then
            return nil, current
        end
        return current
    end
end

local _M = {
    _VERSION = qjson._VERSION,
    null = qjson.null,
    decode_max_depth = safe_option(qjson.decode_max_depth),
    duplicate_keys = safe_option(qjson.duplicate_keys),
    kernel = qjson.kernel,
}

function _M.parse(text, opts)
    local d, err = parse(text, opts, true)
    return d, err
end

return _M
