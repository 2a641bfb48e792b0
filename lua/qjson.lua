-- qjson: strict, lazy JSON for LuaJIT and OpenResty.
--
--   local qjson = require("qjson")
--   local doc = qjson.parse(body)            -- validates all of body; raises on invalid JSON
--   doc:get_str("model"), doc:get_f64("temperature"), doc:get_i64("usage.total_tokens")
--
-- See README.md for the whole API. qjson.safe has the same functions,
-- returning nil, err instead of raising.

local ffi = require("ffi")
local qffi = require("qjson.ffi")
local doc = require("qjson.doc")
local lazy = require("qjson.lazy")
local encode = require("qjson.encode")
local options = require("qjson.options")
local shapes = require("qjson.shapes")
local body = require("qjson.body")

local C = qffi.C
local enter = qffi.enter
local leave = qffi.leave
local c_decode = qffi.c_decode
local null = qffi.null
local empty_array_mt = lazy.empty_array_mt
local array_mt = encode.array_mt
local ffi_string = ffi.string
local ffi_cast = ffi.cast
local CHAR_PTR = ffi.typeof("const char *")
local TEXT = ffi.typeof("qjson_value")
local ffi_new = ffi.new
-- The longest text given as a pointer: a length past 2^53 is no exact
-- Lua number.
local MAX_TEXT_BYTES = 2 ^ 53
local small_block = ffi.typeof("qjson_small")
local block_chunk = ffi.typeof("qjson_small[?]")
local SMALL_MAX_BYTES = C.QJSON_SMALL_MAX_BYTES
local new_doc = doc.new
local error = error
local pcall = pcall
local type = type
local pairs = pairs
local rawequal = rawequal
local ipairs = ipairs
local next = next
local tostring = tostring
local tonumber = tonumber
local math_floor = math.floor

-- OpenResty's table.nkeys (compiled) where LuaJIT has it: `decode` asks
-- whether the options `opts`, whose `lazy` is set, hold nothing else with
-- it, else with two `next` calls (compiled too, but a `pairs` loop would be
-- a trace of its own). Measured on the tool call's eager decode: 4484
-- against 4545 instructions (tools/lua_insns.sh tool-eager). Asked there,
-- not in a function of its own: as one, once `decode` took its config as
-- an argument, that function's return became a trace of its own
-- (`luajit -jv benches/insn_loops.lua qjson:tool-eager 100000`).
local nkeys
do
    local ok, f = pcall(require, "table.nkeys")
    nkeys = ok and f or nil
end

local DUPLICATE_KEY_POLICIES = {
    last = C.QJSON_DUPLICATE_KEYS_LAST_WINS,
    error = C.QJSON_DUPLICATE_KEYS_ERROR,
}
local MAX_DEPTH_LIMIT = 2 ^ 31 - 1

-- A decoder's options (one per qjson.new() instance, see `instance`),
-- changed cjson-style by its option functions: the native options of a
-- call that passes none (its depth limit is lua-cjson's, and the
-- encoder's default too, so that what decode accepts re-encodes under the
-- default options), the duplicate-key policy's name, whether eager
-- decode marks every array with array_mt (decode_array_with_array_mt),
-- and whether decode makes proxies when a call does not say (decode_lazy).
local function new_config()
    return {
        options = ffi.new("qjson_options", 1000, C.QJSON_DUPLICATE_KEYS_LAST_WINS),
        duplicate_keys = "last",
        mark_arrays = false,
        lazy = true,
    }
end
local main_options = ffi.new("qjson_options")

-- Eager decode by shape (lua/qjson/shapes.lua) fills this out-cell, read
-- in the main section (see lua/qjson/ffi.lua): a decode that a finalizer
-- or hook starts while another builds takes the C API path, as the
-- out-cell and the thread's decoded strings are the first one's until it
-- is done. One registry of shape ids for the Lua state, and the
-- functions made for them (arrays unmarked, and all marked), shared by
-- every instance: an instance made per request must not make its
-- functions again, and the registry's budget bounds what any input can
-- make in the state.
local shaped = ffi.new("qjson_shaped")
local SHAPED_MAX_BYTES = C.QJSON_SHAPED_MAX_BYTES
local shape_registry, shape_builders, marked_shape_builders

-- A registry with every id free (at load, and for specs: `_reset_shapes`).
local function reset_shapes()
    shape_registry = ffi.gc(C.qjson_shapes_new(), C.qjson_shapes_free)
    shape_builders, marked_shape_builders = {}, {}
end
reset_shapes()

-- Builds `text` by its shape under `o` (a qjson_options): true and the
-- value; or false when it has no shape id (it is longer than
-- SHAPED_MAX_BYTES, another build holds the out-cell, the registry is
-- spent, or the text is invalid or of no shape), for the caller to take
-- another path.
local function by_shape(text, o, arrays_mt)
    if #text > SHAPED_MAX_BYTES then
        return false
    end
    local R = enter()
    local id = R == qffi.main and C.qjson_decode_shaped(text, #text, o, shape_registry, shaped)
               or 0
    if id == 0 then
        leave(R)
        return false
    end
    local builders = arrays_mt and marked_shape_builders or shape_builders
    local build = builders[id]
    if build == nil then
        build = shapes.compile(shaped, null, empty_array_mt, arrays_mt)
        builders[id] = build
    end
    local v = build(shaped)
    leave(R)
    return true, v
end

-- Checks one option value; returns the converted value or nil, message.
local checks = {
    max_depth = function(v)
        if type(v) ~= "number" or v ~= math_floor(v) or v < 1 or v > MAX_DEPTH_LIMIT then
            return nil, "max_depth must be an integer from 1 to " .. MAX_DEPTH_LIMIT
        end
        encode.allow_parse_depth(v)
        return v
    end,
    duplicate_keys = function(v)
        local policy = DUPLICATE_KEY_POLICIES[v]
        if policy == nil then
            return nil, "duplicate_keys must be \"last\" or \"error\""
        end
        return policy
    end,
}

-- The message for `opts`, argument #`arg` (2 unless given) of `fname`,
-- when it is neither nil nor a table; else nil.
local function options_misuse(opts, fname, arg)
    -- (rawequal: a NULL pointer cdata equals nil.)
    if not rawequal(opts, nil) and type(opts) ~= "table" then
        return "bad argument #" .. (arg or 2) .. " to '" .. fname .. "' (table expected, got "
               .. type(opts) .. ")"
    end
    return nil
end

-- The qjson_options for a call to `fname` in reader R's section: the
-- options of config `cfg`, or those overridden by the table `opts`.
-- Returns nil, message for a bad table. `lazy` (decode only) is not a
-- native option and is skipped here. A section running inside another
-- (see lua/qjson/ffi.lua) fills options of its own.
local function options_for(opts, fname, R, cfg)
    local default_options = cfg.options
    if rawequal(opts, nil) then
        return default_options
    end
    local misuse = options_misuse(opts, fname)
    if misuse then
        return nil, misuse
    end
    local call_options = R == qffi.main and main_options or ffi.new("qjson_options")
    call_options.max_depth = default_options.max_depth
    call_options.duplicate_keys = default_options.duplicate_keys
    for k, v in pairs(opts) do
        if k == "lazy" and fname == "decode" then
            if type(v) ~= "boolean" then
                return nil, "qjson: lazy must be a boolean"
            end
            goto continue
        end
        local check = checks[k]
        if check == nil then
            return nil, "qjson: unknown option '" .. tostring(k) .. "'"
        end
        local converted, err = check(v)
        if converted == nil then
            return nil, "qjson: " .. err
        end
        call_options[k] = converted
        ::continue::
    end
    return call_options
end

-- Error levels for `error`: invalid JSON is data and its message is
-- exactly "qjson: ..." (as cjson's are), misuse points at the caller.
local DATA, MISUSE = 0, 2

-- A small text's block, which names its document (it has none of its
-- own: see "Small documents" in docs/architecture.md), is taken from a
-- chunk of BLOCKS_PER_CHUNK blocks, one cdata: a cdata of its own per
-- document, one more object to allocate and sweep, cost a tool call's
-- decode and reads about 200 instructions of 3 850 (see "Small
-- documents" in docs/architecture.md). A document keeps its chunk alive,
-- so one that outlives the others of its chunk holds 512 bytes where its
-- block is 32. Only the main section takes blocks from the chunk: a
-- finalizer or hook that parses while a section is open (see
-- lua/qjson/ffi.lua) runs between any two of the section's
-- instructions, and gets a block of its own.
local BLOCKS_PER_CHUNK = 16
local chunk, chunk_used = false, BLOCKS_PER_CHUNK

-- Parses a small text (`at`, `len` bytes) under options `o` in reader
-- R's section; returns the handle and the cdata holding its block.
local function parse_small(at, len, o, R)
    local block, holder
    if R == qffi.main then
        if chunk_used == BLOCKS_PER_CHUNK then
            chunk, chunk_used = block_chunk(BLOCKS_PER_CHUNK), 0
        end
        block, holder = chunk + chunk_used, chunk
        chunk_used = chunk_used + 1
    else
        block = small_block()
        holder = block
    end
    return C.qjson_parse_small(at, len, o, block, R), holder
end

-- Parses `text` for `fname` in reader R's section (see
-- lua/qjson/ffi.lua); returns the native handle (the caller owns it), the
-- bytes of native memory to charge the collector for (see `track` in
-- lua/qjson/doc.lua) and, for a small text when `small` is set, the cdata
-- holding the block that names its document (see `parse_small`), which
-- the caller keeps alive as long as it uses the handle; or nil, the
-- message and its level.
local function parse_native(text, opts, fname, R, small, cfg, from, len)
    if not from and type(text) ~= "string" then
        return nil, "bad argument #1 to '" .. fname .. "' (string expected, got "
                    .. type(text) .. ")", MISUSE
    end
    local o, err = options_for(opts, fname, R, cfg)
    if not o then
        return nil, err, MISUSE
    end
    local at = text
    if from then
        -- (qjson.sse: the pointer `from` into the chunk, a string, or the
        -- string.buffer `text`, which holds a line that came split over
        -- chunks and is written no more.)
        at = from
    else
        len = #text
    end
    local block, ptr
    if small and len <= SMALL_MAX_BYTES then
        ptr, block = parse_small(at, len, o, R)
    else
        ptr = C.qjson_parse(at, len, o, R)
    end
    if ptr == nil then
        return nil, "qjson: " .. ffi_string(R.error.message), DATA
    end
    return ptr, tonumber(R.count), block
end

-- `parse_native` of the `len` bytes at `at` (a `const char *` from
-- `text_pointer`), longer than a small text: copied into the document
-- when `copy` is set (reader.value.str is then the copy), else read where
-- they are, which must stay as long as the document.
local function parse_native_at(at, len, opts, fname, R, cfg, copy)
    local o, err = options_for(opts, fname, R, cfg)
    if not o then
        return nil, err, MISUSE
    end
    local ptr
    if copy then
        ptr = C.qjson_parse_copy(at, len, o, R)
    else
        ptr = C.qjson_parse(at, len, o, R)
    end
    if ptr == nil then
        return nil, "qjson: " .. ffi_string(R.error.message), DATA
    end
    return ptr, tonumber(R.count)
end

-- Parses `text` for `fname` under config `cfg`, or only the `len` bytes
-- at the pointer `from` into it when given (qjson.sse: an event's data
-- inside the chunk it came in, a string, or the buffer of a line that
-- came split, with no string of its own; the document keeps `text`
-- alive); returns the document, or nil, the message and its level.
local function parse(cfg, text, opts, safe, fname, from, len)
    local R = enter()
    local ptr, detail, block_or_level = parse_native(text, opts, fname or "parse", R, true,
                                                     cfg, from, len)
    leave(R)
    if not ptr then
        return nil, detail, block_or_level
    end
    return new_doc(ptr, text, safe, detail, block_or_level)
end

-- A text given as the pointer `ptr` to `len` bytes (qjson.parse(ptr, len)
-- and qjson.decode(ptr, len)), checked for `fname`: the pointer as a
-- `const char *`, or nil and the message.
local function text_pointer(ptr, len, fname)
    if type(len) ~= "number" or len < 0 or len ~= math_floor(len) or len > MAX_TEXT_BYTES then
        return nil, "bad argument #2 to '" .. fname .. "' (length expected, got "
                    .. (type(len) == "number" and tostring(len) or type(len)) .. ")"
    end
    -- A number's cdata (get_i64's int64_t, say) casts to a pointer too,
    -- to the address its value names: refused as what it is.
    local ok, at = false, nil
    if tonumber(ptr) == nil then
        ok, at = pcall(ffi_cast, CHAR_PTR, ptr)
    end
    if not ok or at == nil then
        return nil, "bad argument #1 to '" .. fname .. "' (string or pointer expected, got "
                    .. (ok and "NULL" or tostring(ffi.typeof(ptr))) .. ")"
    end
    return at
end

-- `parse` of the `len` bytes at the pointer `ptr`: a small text as a Lua
-- string of them (a small document borrows its text), a longer one into
-- a copy that its document makes and owns, so that the bytes may change
-- or go once the call returns (nginx's request body, see decode_body).
local function parse_pointer(cfg, ptr, len, opts, safe)
    local at, err = text_pointer(ptr, len, "parse")
    if not at then
        return nil, err, MISUSE
    end
    -- (The options are argument #3 here.)
    local misuse = options_misuse(opts, "parse", 3)
    if misuse then
        return nil, misuse, MISUSE
    end
    if len <= SMALL_MAX_BYTES then
        return parse(cfg, ffi_string(at, len), opts, safe)
    end
    local R = enter()
    local handle, detail, level = parse_native_at(at, len, opts, "parse", R, cfg, true)
    leave(R)
    if not handle then
        return nil, detail, level
    end
    -- Nothing to keep alive: the document owns its copy.
    return new_doc(handle, false, safe, detail)
end

-- The plain tables of the document `ptr` parsed in reader R's section,
-- which this ends: built from its tape, the document freed (it lives only
-- while its tape is read: no Lua object, no finalizer, nothing for the
-- collector to pace).
local function tape_tables(ptr, R, arrays_mt)
    local ok, v = pcall(lazy.tape_value, ptr, 0, R, arrays_mt)
    C.qjson_free(ptr)
    leave(R)
    if not ok then
        error(v, 0)
    end
    return v
end

-- Decodes `text` under config `cfg`: proxies, or plain tables when
-- opts.lazy == false (or opts does not say and decode_lazy is off).
-- Returns the value, or nil, the message and its level.
local function decode(cfg, text, opts)
    -- (Before `opts.lazy`, which a number or a boolean would raise on,
    -- from qjson.safe's too.)
    local misuse = options_misuse(opts, "decode")
    if misuse then
        return nil, misuse, MISUSE
    end
    local lazy_given = opts and opts.lazy
    local lazy_option = lazy_given
    if lazy_option == nil then
        lazy_option = cfg.lazy
    end
    if lazy_option == false then
        local arrays_mt = cfg.mark_arrays and array_mt or nil
        if c_decode and type(text) == "string" then
            -- A small text of a known shape is built by that shape's
            -- function (lua/qjson/shapes.lua); any other by the native
            -- side with the Lua C API, where nil alone means "not this
            -- way" (nesting deeper than the Lua stack allows).
            -- No options but `lazy` (`{ lazy = false }`, the usual table,
            -- or none under decode_lazy(false)) need no checks.
            local default_options = cfg.options
            local max_depth = default_options.max_depth
            local duplicate_keys = default_options.duplicate_keys
            local others = false
            if opts then
                local own = lazy_given == nil and 0 or 1
                if nkeys then
                    others = nkeys(opts) > own
                else
                    local key = next(opts)
                    if key == "lazy" then key = next(opts, key) end
                    others = key ~= nil
                end
            end
            if others then
                local R = enter()
                local o, err = options_for(opts, "decode", R, cfg)
                if o then
                    max_depth, duplicate_keys = o.max_depth, o.duplicate_keys
                end
                leave(R)
                if not o then
                    return nil, err, MISUSE
                end
            end
            if not others then
                local found, v = by_shape(text, default_options, arrays_mt)
                if found then
                    return v
                end
            end
            local v, message = c_decode(text, max_depth, duplicate_keys, null, empty_array_mt,
                                        arrays_mt)
            if v ~= nil then
                return v
            elseif message then
                return nil, "qjson: " .. message, DATA
            end
        end
        -- The document lives only while its tape is read: no Lua object,
        -- no finalizer, nothing for the collector to pace.
        local R = enter()
        local ptr, err, level = parse_native(text, opts, "decode", R, false, cfg)
        if not ptr then
            leave(R)
            return nil, err, level
        end
        return tape_tables(ptr, R, arrays_mt)
    end
    local R = enter()
    local ptr, detail, block_or_level = parse_native(text, opts, "decode", R, true, cfg)
    leave(R)
    if not ptr then
        return nil, detail, block_or_level
    end
    return lazy.root(ptr, text, detail, block_or_level)
end

-- `decode` of the `len` bytes at the pointer `ptr`, as `parse_pointer`
-- parses them: lazily into a copy the document owns; eagerly
-- (`lazy = false`) from the bytes where they are, by the document's tape.
local function decode_pointer(cfg, ptr, len, opts)
    local at, err = text_pointer(ptr, len, "decode")
    if not at then
        return nil, err, MISUSE
    end
    -- (Before `opts.lazy`; the options are argument #3 here.)
    local misuse = options_misuse(opts, "decode", 3)
    if misuse then
        return nil, misuse, MISUSE
    end
    if len <= SMALL_MAX_BYTES then
        return decode(cfg, ffi_string(at, len), opts)
    end
    local lazy_option = opts and opts.lazy
    if lazy_option == nil then
        lazy_option = cfg.lazy
    end
    local R = enter()
    local handle, detail, level = parse_native_at(at, len, opts, "decode", R, cfg,
                                                  lazy_option ~= false)
    if not handle then
        leave(R)
        return nil, detail, level
    elseif lazy_option == false then
        return tape_tables(handle, R, cfg.mark_arrays and array_mt or nil)
    end
    -- The proxies' text: the copy (see [SRC] in lua/qjson/lazy.lua).
    local text = ffi_new(TEXT)
    text.str, text.len = R.value.str, len
    leave(R)
    return lazy.root(handle, text, detail)
end

-- The decoder options qjson keeps to RFC 8259 for, on purpose: a cjson
-- switch that only turns on what qjson rejects (its default here is off).
-- Returns the option function, which accepts off and refuses on.
local function strict_switch(name, what)
    return function(on)
        on = options.switch(name, 1, on)
        if on then
            error("qjson: " .. name .. " cannot be turned on: qjson accepts only RFC 8259 JSON"
                  .. " (" .. what .. " are rejected)", 2)
        end
        return false
    end
end

local decode_invalid_numbers = strict_switch("decode_invalid_numbers",
                                             "NaN, Infinity and hexadecimal numbers")
local decode_allow_comment = strict_switch("decode_allow_comment", "comments")

local materialize = require("qjson.materialize").materialize
local new_encoder = encode.new_encoder

-- The stage-1 kernel in use ("avx512", "avx2", "neon" or "scalar").
local function kernel()
    local name = C.qjson_kernel()
    if name == nil then
        return nil, "qjson: QJSON_KERNEL names a kernel this build or CPU cannot run"
    end
    return ffi_string(name)
end

-- The option functions of a module table (qjson.safe wraps them).
local OPTIONS = { "decode_max_depth", "duplicate_keys", "decode_array_with_array_mt",
                  "decode_lazy", "decode_invalid_numbers", "decode_allow_comment" }
for _, name in ipairs(encode.OPTIONS) do
    OPTIONS[#OPTIONS + 1] = name
end
-- How many arguments each takes, where not one (cjson's counts).
local MOST_ARGUMENTS = { encode_sparse_array = 3 }

local instance

-- qjson.new(): another module table with options of its own, at their
-- defaults (cjson.new()).
local function new()
    return instance(new_config(), new_encoder())
end

-- A qjson module table over decode config `cfg` and encoder `enc` (see
-- lua/qjson/encode.lua): the module itself, or one made by qjson.new()
-- (cjson.new()'s counterpart), whose options are its own.
function instance(cfg, enc)
    local M = {
        _VERSION = "0.1.0",
        _NAME = "qjson",
        null = null,
        len = lazy.len,
        pairs = lazy.pairs,
        ipairs = lazy.ipairs,
        array_mt = array_mt,
        empty_array_mt = encode.empty_array_mt,
        empty_array = encode.empty_array,
        library_path = qffi.path,
        encode = enc.encode,
        encode_pieces = enc.encode_pieces,
        decode_invalid_numbers = decode_invalid_numbers,
        decode_allow_comment = decode_allow_comment,
        kernel = kernel,
        new = new,
        _options = OPTIONS,
    }
    for _, name in ipairs(encode.OPTIONS) do
        M[name] = enc[name]
    end

    -- What qjson.parse (and qjson.safe's, `safe` set) and qjson.decode do
    -- with a string and its options, or a pointer cdata, its length and
    -- the options: the document or value, or nil, the message and its
    -- level.
    local function parse_any(text, opts, more, safe)
        if type(text) == "cdata" then
            return parse_pointer(cfg, text, opts, more, safe)
        end
        return parse(cfg, text, opts, safe)
    end
    local function decode_any(text, opts, more)
        local t = type(text)
        if t == "cdata" then
            return decode_pointer(cfg, text, opts, more)
        elseif t == "number" then
            -- As cjson.decode takes one (its argument is read as Lua reads
            -- a number as a string: "%.14g"): 123 decodes to 123.
            text = tostring(text)
        end
        return decode(cfg, text, opts)
    end

    -- qjson.parse(text [, options]): a validated document. Raises on
    -- invalid JSON ("qjson: invalid number at byte 17") and on bad
    -- arguments. qjson.parse(ptr, len [, options]): the same of the `len`
    -- bytes at a pointer cdata, copied (see `parse_pointer`).
    function M.parse(text, opts, more)
        local d, err, level = parse_any(text, opts, more, false)
        if not d then
            error(err, level)
        end
        return d
    end

    -- qjson.decode(text [, options]): like cjson.decode, but objects and
    -- arrays are proxies read on demand. Raises like qjson.parse.
    -- qjson.decode(ptr, len [, options]) as qjson.parse(ptr, len).
    function M.decode(text, opts, more)
        local v, err, level = decode_any(text, opts, more)
        if v == nil then
            error(err, level)
        end
        return v
    end

    -- qjson.parse_body([options]), qjson.decode_body([options]) (nginx):
    -- the current request's body, read where nginx keeps it (see
    -- lua/qjson/body.lua); nil when the request has none.
    function M.parse_body(opts)
        return body.apply(M.parse, opts)
    end
    function M.decode_body(opts)
        return body.apply(M.decode, opts)
    end

    -- For specs: a registry of shape ids with every id free again.
    M._reset_shapes = reset_shapes

    -- Used by qjson.safe and qjson.sse.
    function M._parse(text, opts, safe, fname, from, len)
        return parse(cfg, text, opts, safe, fname, from, len)
    end
    M._parse_any, M._decode_any = parse_any, decode_any

    -- Plain tables, with this instance's decode_array_with_array_mt.
    function M.materialize(v)
        return materialize(v, cfg.mark_arrays and array_mt or nil, by_shape)
    end

    -- cjson-style option functions: set when given a value, always return
    -- the current one. They change the defaults of every later call.

    function M.decode_max_depth(depth)
        depth = options.integer("decode_max_depth", 1, depth, 1, MAX_DEPTH_LIMIT)
        if depth then
            cfg.options.max_depth = depth
            encode.allow_parse_depth(depth)
        end
        return cfg.options.max_depth
    end

    function M.duplicate_keys(policy)
        if policy ~= nil then
            local v, err = checks.duplicate_keys(policy)
            if not v then
                error("bad argument #1 to 'duplicate_keys' (" .. err .. ")", 2)
            end
            cfg.duplicate_keys = policy
            cfg.options.duplicate_keys = v
        end
        return cfg.duplicate_keys
    end

    -- Eager decode (lazy = false) and materialize give every array
    -- qjson.array_mt, as cjson's option gives its array_mt, so that an
    -- empty one re-encodes as [] (proxies always do).
    M.decode_array_with_array_mt = options.switch_function("decode_array_with_array_mt", cfg,
                                                           "mark_arrays")

    -- Whether decode makes proxies (true, the default) or plain tables
    -- (false: every call as if it passed `lazy = false`) when a call's
    -- options do not say: an instance that decodes as cjson does.
    M.decode_lazy = options.switch_function("decode_lazy", cfg, "lazy")

    for _, name in ipairs(OPTIONS) do
        M[name] = options.at_most(name, MOST_ARGUMENTS[name] or 1, M[name])
    end
    return M
end

return instance(new_config(), encode)
