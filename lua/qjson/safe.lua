-- qjson.safe: the qjson API returning nil, err instead of raising, like
-- cjson.safe. Documents it parses also return nil, err for misuse (a
-- malformed path, use after free()). As cjson.safe's, its options are its
-- own, starting from the defaults: code that configures `cjson` in one
-- place and `cjson.safe` in another keeps both settings.

local qjson = require("qjson")
local body = require("qjson.body")

local ipairs = ipairs
local pcall = pcall

-- pcall's results as a safe function returns them: the call's results,
-- or nil and the error.
local function results(ok, ...)
    if not ok then
        return nil, (...)
    end
    return ...
end

-- An option function that returns nil, err for a bad value instead of
-- raising. The message has no position: the error is raised at level 2,
-- which is pcall here.
local function safe_option(set)
    return function(...)
        return results(pcall(set, ...))
    end
end

local SHARED = { "_VERSION", "null", "kernel", "materialize", "len", "pairs", "ipairs",
                 "array_mt", "empty_array_mt", "empty_array", "library_path" }

-- The safe facade of the qjson module table `q` (one made by qjson.new(),
-- whose options it then shares).
local function wrap(q)
    local parse, decode = q._parse_any, q._decode_any
    local encode, encode_pieces = q.encode, q.encode_pieces
    local M = { _NAME = "qjson.safe" }
    for _, name in ipairs(SHARED) do
        M[name] = q[name]
    end
    for _, name in ipairs(q._options) do
        M[name] = safe_option(q[name])
    end

    function M.parse(text, opts, more)
        local d, err = parse(text, opts, more, true)
        return d, err
    end

    function M.decode(text, opts, more)
        local v, err = decode(text, opts, more)
        if v == nil then
            return nil, err
        end
        return v
    end

    -- The request body's (see lua/qjson/body.lua): nil when there is
    -- none, nil, err where qjson's raise (outside nginx too).
    function M.parse_body(opts)
        return results(pcall(body.apply, M.parse, opts))
    end

    function M.decode_body(opts)
        return results(pcall(body.apply, M.decode, opts))
    end

    -- Returns nil, err where qjson.encode raises (unsupported values, NaN,
    -- excessive nesting), like cjson.safe.encode.
    function M.encode(v)
        return results(pcall(encode, v))
    end

    -- The same for qjson.encode_pieces: the pieces and the length, or
    -- nil, err.
    function M.encode_pieces(v)
        return results(pcall(encode_pieces, v))
    end

    -- A safe facade over a new qjson instance (cjson.safe.new()).
    function M.new()
        return wrap(q.new())
    end

    return M
end

return wrap(qjson.new())
