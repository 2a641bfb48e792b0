-- qjson.safe: the qjson API returning nil, err instead of raising, like
-- cjson.safe. Documents it parses also return nil, err for misuse (a
-- malformed path, use after free()).

local qjson = require("qjson")

local parse = qjson._parse

local _M = {
    _VERSION = qjson._VERSION,
    null = qjson.null,
    decode_max_depth = qjson.decode_max_depth,
    duplicate_keys = qjson.duplicate_keys,
    kernel = qjson.kernel,
}

function _M.parse(text, opts)
    local d, err = parse(text, opts, true)
    return d, err
end

return _M
