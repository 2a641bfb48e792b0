-- qjson.materialize: proxies (and any plain tables around them) deep-
-- converted to plain tables, equal to what cjson.decode gives for the
-- same text with every change made through proxies applied.

local ffi = require("ffi")
local qffi = require("qjson.ffi")
local lazy = require("qjson.lazy")
local edits = require("qjson.edits")

local C = qffi.C
local c_decode = qffi.c_decode
local enter = qffi.enter
local leave = qffi.leave
local null = qffi.null
local proxy_info = lazy.proxy_info
local live_ptr = lazy.live_ptr
local tape_value = lazy.tape_value
local get = lazy.get
local object_iter = lazy.object_iter
local empty_array_mt = lazy.empty_array_mt
local source_span = lazy.source_span
local has_changes = lazy.has_changes
local raw_written = lazy.raw_written
local SRC = lazy.SRC
local PTR = require("qjson.doc").PTR
local changed = edits.changed
local new_tab = require("table.new")
local setmetatable = setmetatable
local getmetatable = getmetatable
local type = type
local next = next
local rawequal = rawequal
local error = error
local pcall = pcall
local tonumber = tonumber

local _M = {}

-- An unchanged proxy whose source is shorter than this is built from it
-- natively, as qjson.decode(s, { lazy = false }) builds a text: its
-- fixed cost is below the FFI builder's (decode and materialize of the
-- tool call ran 1.8 times as fast, of an SSE event 1.4 times, and built
-- by its shape, the root of a small text runs faster still), but it
-- parses the source again, which from 1-2 KB on costs more than the FFI
-- build of the parsed document saves (docs/benchmarks.md,
-- "qjson.materialize of small documents").
local NATIVE_MAX_BYTES = 1024
_M.NATIVE_MAX_BYTES = NATIVE_MAX_BYTES

-- What such a source, or a root's text built by its shape, is decoded
-- under: the text was validated when it was parsed, so no depth limit
-- but the Lua stack's (deeper, the native build gives up and the FFI one
-- takes over), and the key a read sees (under "error" no key repeats).
local NO_DEPTH_LIMIT = 2 ^ 32 - 1
local LAST_WINS = C.QJSON_DUPLICATE_KEYS_LAST_WINS
local PARSED_TEXT = ffi.new("qjson_options", NO_DEPTH_LIMIT, LAST_WINS)

-- How many proxies were built natively, from their source or by their
-- shape (for the specs).
local native_builds = 0

-- Raises when raw access wrote into proxy v (code `code`, state st) or,
-- for a root, into a proxy below it (see `raw_written` in
-- lua/qjson/lazy.lua).
local function refuse_raw_written(v, st, code)
    if raw_written(st, v, code) then
        error("qjson: " .. lazy.RAW_WRITTEN, 0)
    end
end

-- One level of materialize, through reader R: a copy of v's own entries
-- (children not yet converted) and true, or, for a scalar or an
-- unchanged proxy, the finished value. Arrays of proxies get `arrays_mt`
-- when given, else empty ones get empty_array_mt. A proxy raw access
-- wrote into is refused, unless the caller did (`refused`).
local function materialize_level(v, R, arrays_mt, refused)
    local st, code = proxy_info(v)
    if st then
        if not refused then
            refuse_raw_written(v, st, code)
        end
        local ptr = live_ptr(st)
        local cursor = lazy.cursor_of(code)
        local is_changed, from, to = changed(st, v, code, R)
        if not is_changed then
            -- (The C API builds from a Lua string: a text the native
            -- document copied, see lua/qjson/lazy.lua's SRC, goes by the
            -- tape.)
            if c_decode and type(st[SRC]) == "string" then
                if not from then
                    from, to = source_span(st, ptr, cursor, R)
                end
                if to - from < NATIVE_MAX_BYTES then
                    local out = c_decode(st[SRC], NO_DEPTH_LIMIT, LAST_WINS, null,
                                         empty_array_mt, arrays_mt, from, to)
                    if out ~= nil then
                        native_builds = native_builds + 1
                        return out
                    end
                end
            end
            return tape_value(ptr, cursor, R, arrays_mt)
        end
        if code < 0 then
            local rec = lazy.record_of(st, v, code)
            local n = rec and rec[lazy.R_N]
            if not n then
                C.qjson_len(ptr, cursor, nil, 0, R)
                n = tonumber(R.value.len)
            end
            local out = new_tab(n, 0)
            for i = 1, n do
                local e = get(st, v, code, i, R)
                if rawequal(e, nil) then e = null end
                out[i] = e
            end
            if arrays_mt or n == 0 then
                setmetatable(out, arrays_mt or empty_array_mt)
            end
            return out, true
        end
        local out = {}
        for k, e in object_iter(st, v, code, R) do
            out[k] = e
        end
        return out, true
    end
    if type(v) ~= "table" then return v end
    local out = {}
    for k, e in next, v do
        out[k] = e
    end
    return setmetatable(out, getmetatable(v)), true
end

-- Deep-converts v to plain Lua tables through reader R. Depth-first over
-- an explicit stack rather than by recursion, so a tree of any depth
-- converts (a document parsed with a large max_depth, then changed deep
-- down); the tables on the current path are tracked, so one that
-- contains itself raises instead of looping.
local CONTAINS_ITSELF = "qjson: cannot materialize a table that contains itself"
_M.CONTAINS_ITSELF = CONTAINS_ITSELF

local function materialize_tree(v, R, arrays_mt)
    local root, open = materialize_level(v, R, arrays_mt)
    if not open then return root end
    local outs, keys, sources, on_path = { root }, {}, { v }, { [v] = true }
    local depth = 1
    while depth > 0 do
        local out = outs[depth]
        local k, e = next(out, keys[depth])
        if k == nil then
            on_path[sources[depth]] = nil
            depth = depth - 1
        else
            keys[depth] = k
            if type(e) == "table" then
                if on_path[e] then
                    error(CONTAINS_ITSELF, 0)
                end
                local converted, children = materialize_level(e, R, arrays_mt)
                out[k] = converted
                if children then
                    depth = depth + 1
                    outs[depth], keys[depth], sources[depth] = converted, nil, e
                    on_path[e] = true
                end
            end
        end
    end
    return root
end

-- qjson.materialize(v): what cjson.decode gives for the same text (plus
-- empty_array_mt on empty arrays, or `arrays_mt` on every array when
-- given: decode_array_with_array_mt), with any changes made through
-- proxies applied. One section for the whole tree. `by_shape(text,
-- options, arrays_mt)`, when given, builds an unchanged root's text as
-- the eager decode of a small text of a known shape does (lua/qjson.lua):
-- true and the value, or false to build it another way.
function _M.materialize(v, arrays_mt, by_shape)
    if by_shape then
        -- The root of a live document never written to. Before the
        -- section: a shape's build takes the main reader's.
        local st, code = proxy_info(v)
        if st and (code == 0 or code == -1) and st[PTR] and not has_changes(st)
           and type(st[SRC]) == "string" then
            refuse_raw_written(v, st, code)
            local found, out = by_shape(st[SRC], PARSED_TEXT, arrays_mt)
            if found then
                native_builds = native_builds + 1
                return out
            end
        end
    end
    local R = enter()
    local ok, out = pcall(materialize_tree, v, R, arrays_mt)
    leave(R)
    if not ok then
        error(out, 2)
    end
    return out
end

-- One level of proxy v through reader R, for encode_indent (see
-- `put_container` in lua/qjson/encode.lua): an unchanged proxy whole, a
-- changed one as a table of its own entries, its children as they are
-- (proxies, or the plain tables written into it), so that the encoder
-- writes those as it writes any table: a plain table in its own order,
-- one that contains itself to cjson's depth limit.
function _M.level(v, R)
    -- (The encoder has refused a proxy raw access wrote into.)
    return (materialize_level(v, R, nil, true))
end

-- For the specs: how many unchanged proxies were built natively (see
-- `native_builds`).
function _M.native_builds()
    return native_builds
end

return _M
