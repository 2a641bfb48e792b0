-- qjson.encode: lua-cjson's encoder for plain tables, byte for byte, and
-- source passthrough for proxies.
--
-- Plain values follow cjson 2.1 exactly: the same escapes (including \/),
-- "%.14g" numbers, the same array detection and sparse-array rule, the
-- same error messages. They are encoded natively where the Lua C API can
-- be found (src/lua_api/encode.rs, tested against the Lua encoder here,
-- which stays the specification and the fallback; see _M.encode). A
-- proxy that was not changed is copied as its source bytes; a changed one
-- is the source with only the changed values spliced in (members dropped
-- or added, separators and whitespace of the rest kept), written into one
-- buffer.

local ffi = require("ffi")
local buffer = require("string.buffer")
local qffi = require("qjson.ffi")
local lazy = require("qjson.lazy")
local edits = require("qjson.edits")
local options = require("qjson.options")
local materialize = require("qjson.materialize").materialize
local materialize_level = require("qjson.materialize").level
local CONTAINS_ITSELF = require("qjson.materialize").CONTAINS_ITSELF

local C = qffi.C
local enter = qffi.enter
local calling_out = qffi.calling_out
local leave = qffi.leave
local MAIN = qffi.main
local null = qffi.null
local proxy_info = lazy.proxy_info
local DELETED = lazy.DELETED
local FIELDS, R_N, R_N0 = lazy.FIELDS, lazy.R_N, lazy.R_N0
local object_value = lazy.object_value
local next_added, ADDED_START = lazy.next_added, lazy.ADDED_START
local SRC, ROOT_REC, CHANGES, CHILD = lazy.SRC, lazy.ROOT_REC, lazy.CHANGES, lazy.CHILD
local R_SIMPLE, R_DEPTH, R_ADDED, R_CODE = lazy.R_SIMPLE, lazy.R_DEPTH, lazy.R_ADDED,
                                          lazy.R_CODE
local is_record, last_byte, OPEN_OBJECT = lazy.is_record, lazy.last_byte, lazy.OPEN_OBJECT
local has_changes = lazy.has_changes
local raw_written, raw_written_below = lazy.raw_written, lazy.raw_written_below
local empty_array_mt = lazy.empty_array_mt
local live_ptr = lazy.live_ptr
local source_span = lazy.source_span
local source_deeper = lazy.source_deeper
local source = lazy.source
local cursor_of = lazy.cursor_of
local edits_of, edits_for = edits.edits_of, edits.edits_for
local first_edit = edits.first_at
local EDIT = edits.EDIT
local depth_of = lazy.depth_of
local INSERT, APPEND = edits.INSERT, edits.APPEND
local switch = options.switch
local switch_function = options.switch_function
local integer = options.integer
local choice = options.choice
local ffi_cast = ffi.cast
local ffi_string = ffi.string
local table_clear = require("table.clear")
local new_tab = require("table.new")
local ffi_istype = ffi.istype
local type = type
local next = next
local ipairs = ipairs
local rawget = rawget
local rawequal = rawequal
-- The encoder's own coroutines (see SEGMENT) are LuaJIT's: OpenResty
-- keeps those as coroutine._create and _resume, and its coroutine.resume
-- yields to nginx, which it cannot where the running code cannot yield
-- (inside a C call, such as a string.gsub callback): it raised there,
-- ended the encode without its section, and left nginx to resume the new
-- coroutine later, in the middle of something else (an audit's finding).
-- Nothing the encoder's coroutines run yields.
local co_create = rawget(coroutine, "_create") or coroutine.create
local co_resume = rawget(coroutine, "_resume") or coroutine.resume
local error = error
local tostring = tostring
local getmetatable = getmetatable
-- (Where a sandbox leaves no debug library, what __metatable shows.)
local debug_getmetatable = debug and debug.getmetatable or getmetatable
local pcall = pcall
local tonumber = tonumber
local setmetatable = setmetatable
local math_floor = math.floor
local math_ceil = math.ceil
local str_find = string.find
local str_gsub = string.gsub
local str_format = string.format
local str_sub = string.sub
local str_char = string.char

local huge = math.huge
local char_ptr = ffi.typeof("const char *")

local _M = {}

local array_mt = { __name = "qjson.array" }
_M.array_mt = array_mt
_M.empty_array_mt = empty_array_mt

-- A value that encodes as [] (like cjson.empty_array, which is also
-- accepted when lua-cjson is loaded).
local empty_array = setmetatable({}, {
    __index = empty_array_mt,
    __newindex = function() error("qjson.empty_array is read-only", 2) end,
    __metatable = empty_array_mt,
})
_M.empty_array = empty_array

-- The most memory the output buffer keeps between encodes that do not
-- need more, as the native encoder's (SCRATCH_KEEP_BYTES in
-- src/document.rs); see `trim_buffer`.
local BUFFER_KEEP_BYTES = 1024 * 1024

-- An encoder's options (cjson's, one table per qjson.new() instance; see
-- `encoder`), with what depends on them: the key cache (below) and the
-- options packed for the native encoder (`pack_options`).
local function new_config()
    return {
        number_precision = 14,
        number_format = "%.14g",
        exact_integers = 1e14, -- integers below 10^number_precision print exactly
        sparse_convert = false,
        sparse_ratio = 2,
        sparse_safe = 10,
        escape_slash = true,
        empty_table_as_object = true,
        max_depth = 1000,
        -- NaN and infinities: 0 refused, 1 written as NaN, Infinity and
        -- -Infinity, 2 as null (cjson's "off", "on", "null").
        invalid_numbers = 0,
        skip_unsupported = false,
        keep_buffer = true,
        -- encode_indent: false, or the string written once per level of
        -- nesting before each element and member, each on a line of its
        -- own (cjson's pretty-printing).
        indent = false,
        key_cache = {},
        key_cache_count = 0,
    }
end

-- The options of the encode under way, set by `lua_encode`.
local config

-- The encoder's state: the output buffer, the pending source copy (see
-- `copy`), the deepest table entered, and the reader of the encode's
-- section (see lua/qjson/ffi.lua). An encode that runs inside another's
-- section (from a finalizer) saves them and works on fresh ones.
local buf = buffer.new()
local reader

-- The deepest table entered by the current encode: should a nesting
-- within encode_max_depth still exhaust LuaJIT (a stack segment's, see
-- SEGMENT, or its C stack after some hundred thousand levels), the error
-- says how deep it got, as cjson's does when lua_checkstack fails. (A
-- caller so deep that the first SEGMENT levels overflow its own stack
-- gets LuaJIT's "stack overflow": that stack is under no pcall, see
-- `raise`.)
local deepest = 0

-- cjson's message for a nesting too deep, at `depth`.
local function nesting_message(depth)
    return str_format("Cannot serialise, excessive nesting (%d)", depth)
end

-- err, or cjson's message with the depth reached for a stack that ran
-- out (see SEGMENT).
local function reported(err)
    if type(err) == "string" and str_find(err, "stack overflow", 1, true) then
        return nesting_message(deepest)
    end
    return err
end

-- Raises `err` out of the encode under way.
--
-- An encode in `main` is not run under pcall: a side trace that starts
-- inside a pcall'd function can never return through the pcall ("NYI:
-- return to lower frame"), so each exit of the encoder's traces that
-- LuaJIT wanted a side trace for ran interpreted from then on. What an
-- error leaves of its state, the next encode sets afresh (`encode_with`);
-- its section it ends here, as sections never raise before leaving
-- (lua/qjson/ffi.lua). An encode in a reader of its own (inside another's
-- section) runs under lua_encode's pcall, which gives the other its state
-- back.
local function raise(err)
    if reader == MAIN then
        reader = nil
        leave(MAIN)
    end
    error(reported(err), 0)
end

local function fail(kind, reason)
    raise("Cannot serialise " .. kind .. ": " .. reason)
end

-- Why a proxy that raw access wrote into is refused (see
-- `lazy.raw_written`).
local RAW_WRITTEN = lazy.RAW_WRITTEN

-- Strings are escaped natively (src/escape.rs), straight into buf, in
-- slices of at most ESCAPE_SLICE output bytes, so a long string needs no
-- worst-case (6x) reservation.
local ESCAPE_SLICE = 1024 * 1024

local function put_string(s)
    local len = #s
    local slash = config.escape_slash and 1 or 0
    buf:put('"')
    if len <= ESCAPE_SLICE / 6 then
        local p, room = buf:reserve(len * 6)
        buf:commit(C.qjson_escape(s, len, slash, p, room, reader))
    else
        local src = ffi_cast(char_ptr, s)
        local done = 0
        while done < len do
            local want = (len - done) * 6
            if want > ESCAPE_SLICE then
                want = ESCAPE_SLICE
            end
            local p, room = buf:reserve(want)
            buf:commit(C.qjson_escape(src + done, len - done, slash, p, room, reader))
            local consumed = tonumber(reader.count)
            if consumed == 0 then
                raise("qjson: internal error escaping a string")
            end
            done = done + consumed
        end
    end
    buf:put('"')
end

-- cjson formats numbers with the C library's snprintf, which rounds a
-- value exactly halfway between two candidates to even (440103099353365
-- is "4.4010309935336e+14"); LuaJIT's own formatter (buf:put, putf)
-- rounds it up ("...37e+14") but agrees everywhere else. Only two kinds
-- of number can be halfway at a precision of at most 16 digits, and only
-- those go to snprintf: integers of more than `precision` digits, and
-- fractions of at most 24 bits (a finer one has 18 or more significant
-- digits: its odd numerator times 5^k, k > 24).
pcall(ffi.cdef, "int snprintf(char *str, size_t size, const char *format, ...);")
-- snprintf writes the locale's decimal point (after os.setlocale); cjson
-- writes "." whatever the locale. localeconv's struct starts with it.
pcall(ffi.cdef, "struct lconv *localeconv(void);")
local LCONV_PTR = ffi.typeof("struct { const char *decimal_point; } *")
local libc = ffi.C
local NUMBER_MAX = 32

-- How `encode_invalid_numbers` "on" writes a NaN or an infinity, as
-- cjson does.
local function non_finite_text(n)
    if n ~= n then
        return "NaN"
    end
    return n > 0 and "Infinity" or "-Infinity"
end

local function put_number(n)
    if n ~= n or n == huge or n == -huge then
        local setting = config.invalid_numbers
        if setting == 0 then
            fail("number", "must not be NaN or Infinity")
        end
        buf:put(setting == 1 and non_finite_text(n) or "null")
        return
    end
    local fast
    if n == math_floor(n) then
        fast = n < config.exact_integers and n > -config.exact_integers
    else
        fast = (n * 16777216) % 1 ~= 0
    end
    if fast then
        if config.number_precision == 14 then
            buf:put(n) -- LuaJIT formats numbers with "%.14g"
        else
            buf:putf(config.number_format, n)
        end
        return
    end
    local p = buf:reserve(NUMBER_MAX)
    local len = libc.snprintf(p, NUMBER_MAX, config.number_format, n)
    -- The locale's decimal point, checked here and not with a loop over
    -- the digits: a loop run on every such number is an inner loop in
    -- the trace of any loop around the encode ("inner loop in root
    -- trace"), which then never compiled.
    local point = ffi_cast(LCONV_PTR, libc.localeconv()).decimal_point
    if point[0] == 46 and point[1] == 0 then
        buf:commit(len)
        return
    end
    local text, mark = ffi_string(p, len), ffi_string(point)
    local at = str_find(text, mark, 1, true)
    if at then
        text = str_sub(text, 1, at - 1) .. "." .. str_sub(text, at + #mark)
    end
    buf:put(text)
end

local int64_t = ffi.typeof("int64_t")
local uint64_t = ffi.typeof("uint64_t")

local function put_cdata(v)
    if ffi_istype(int64_t, v) or ffi_istype(uint64_t, v) then
        local digits = str_gsub(tostring(v), "U?LL$", "")
        buf:put(digits)
        return
    end
    fail("cdata", "type not supported")
end

local put_value

-- lua-cjson (OpenResty's fork), when it is loaded beside qjson: tables
-- and values it marks encode as it encodes them. (Its module and
-- cjson.safe share one array_mt, empty_array_mt and empty_array.)
local function cjson_module()
    local loaded = package.loaded
    return loaded.cjson or loaded["cjson.safe"]
end

-- lua-cjson's empty_array, when it is loaded.
local function cjson_empty_array()
    local cjson = cjson_module()
    return cjson and cjson.empty_array
end

-- How lua-cjson (OpenResty's fork) reads a table with metatable `mt` that
-- is not one of qjson's: as an array of #t raw elements ("raw") when `mt`
-- is its array_mt, of __len(t) elements read through __index
-- ("metamethods", and the __len) when `mt` has a __len, as one of #t raw
-- elements unless its keys make it an array ("empty") when `mt` is its
-- empty_array_mt (so an empty one is []); else as any table (nil).
local function cjson_array_kind(mt)
    if type(mt) ~= "table" then
        -- (What a __metatable field shows: no metamethods to read.)
        return nil
    end
    local cjson = cjson_module()
    if cjson and mt == cjson.array_mt then
        return "raw"
    end
    local len = rawget(mt, "__len")
    if len then
        return "metamethods", len
    elseif cjson and mt == cjson.empty_array_mt then
        return "empty"
    end
    return nil
end

-- Whether put_value refuses v as "type not supported": what
-- encode_skip_unsupported_value_types leaves out of tables.
local function unsupported(v)
    local t = type(v)
    if t == "function" or t == "thread" then
        return true
    elseif t == "userdata" then
        return v ~= null and v ~= cjson_empty_array()
    elseif t == "cdata" then
        return not (ffi_istype(int64_t, v) or ffi_istype(uint64_t, v))
    end
    return false
end

-- Whether the element or member value v is left out (its key and comma
-- too), as cjson's encode_skip_unsupported_value_types leaves it.
local function skipped(v)
    return config.skip_unsupported and unsupported(v)
end

-- cjson's lua_array_length: the array length of t, or -1 for an object.
local function array_length(t)
    local max, items = 0, 0
    for k in next, t do
        if type(k) == "number" and k >= 1 and math_floor(k) == k then
            if k > max then max = k end
            items = items + 1
        else
            return -1
        end
    end
    if config.sparse_ratio > 0 and max > items * config.sparse_ratio
        and max > config.sparse_safe then
        if not config.sparse_convert then
            fail("table", "excessively sparse array")
        end
        return -1
    end
    return max
end

-- LuaJIT's strings and buffers end below 2 GB. Indentation written past
-- that by compiled code crashed the process (SIGSEGV: 50 000 nested
-- tables under encode_indent(" ")) where the interpreter raises "not
-- enough memory", as `put_newline` does first.
local MAX_OUTPUT = 2 ^ 31 - 2 ^ 24

-- Under encode_indent: a new line, indented for nesting depth `depth`.
local function put_newline(depth)
    if #buf + 1 + depth * #config.indent > MAX_OUTPUT then
        raise("not enough memory")
    end
    buf:put("\n")
    for _ = 1, depth do
        buf:put(config.indent)
    end
end

-- Before an element or member of a container at `depth`: the comma after
-- the one before (unless it is the `first`), and its line under
-- encode_indent.
local function put_separator(first, depth)
    if not first then buf:put(",") end
    if config.indent then put_newline(depth) end
end

-- The closing bracket of a container at `depth`, on a line of its own
-- under encode_indent when it holds something (`empty` otherwise), even
-- if every value it holds was skipped (encode_skip_unsupported_value_types):
-- `[\n]`, as cjson writes it.
local function put_close(bracket, empty, depth)
    if config.indent and not empty then put_newline(depth - 1) end
    buf:put(bracket)
end

-- A call of a table's metamethod (its __len, or its __index through
-- t[k]) made as cjson makes it, from C (string.gsub's callback): a yield
-- inside fails ("attempt to yield across C-call boundary") instead of
-- leaving this encode, with the module's state and the shared reader, to
-- other coroutines (lua/qjson/ffi.lua: no section is ever suspended); an
-- error inside is raised as the encode's own, which ends its section.
local call_f, call_a, call_b, call_out
local function call_pending()
    call_out = call_f(call_a, call_b)
    return false
end

-- (A finalizer may encode in the middle of it, even between the call and
-- the read of its result: what was pending is put back as it was, or the
-- outer call read the inner's nil, or called a nil function.)
local function metamethod_call(f, a, b)
    local outer_f, outer_a, outer_b, outer_out = call_f, call_a, call_b, call_out
    call_f, call_a, call_b, call_out = f, a, b, nil
    calling_out(true)
    local ok, err = pcall(str_gsub, "x", "x", call_pending)
    calling_out(false)
    local out = call_out
    call_f, call_a, call_b, call_out = outer_f, outer_a, outer_b, outer_out
    if not ok then
        raise(err)
    end
    return out
end

local function index_of(t, k)
    return t[k]
end

-- Whether the elements of a table with metatable `mt` (not nil) are read
-- through it: when it has an __index (or hides what it has).
local function reads_through(mt)
    return type(mt) ~= "table" or rawget(mt, "__index") ~= nil
end

-- Writes the n elements of array t, read raw, or through its metatable
-- (`via_metamethods`) as cjson reads those of a table that has one but
-- its array_mt.
local function put_array(t, n, depth, via_metamethods)
    buf:put("[")
    local first = true
    for i = 1, n do
        local v
        if via_metamethods then v = metamethod_call(index_of, t, i) else v = rawget(t, i) end
        if not skipped(v) then
            put_separator(first, depth)
            first = false
            put_value(v, depth)
        end
    end
    put_close("]", n < 1, depth)
end

-- Short keys written before, as written with their colon ('"role":'), in
-- each encoder's config: objects repeat their keys (every element of an
-- array, every document of a stream), and a table lookup costs less than
-- escaping the key again through the FFI. Bounded by clearing it when
-- full (a weak table would never drop strings); cleared when the escaping
-- of `/` changes.
local KEY_CACHE_MAX = 4096
local KEY_CACHE_LEN = 64

-- Writes key k of a member and the colon after it.
local function put_key(k)
    local tk = type(k)
    if tk == "string" then
        local key_cache = config.key_cache
        local written = key_cache[k]
        if written then
            buf:put(written)
            return
        end
        if #k > KEY_CACHE_LEN then
            put_string(k)
            buf:put(":")
            return
        end
        local before = #buf
        put_string(k)
        buf:put(":")
        if config.key_cache_count >= KEY_CACHE_MAX then
            table_clear(key_cache)
            config.key_cache_count = 0
        end
        local p, len = buf:ref()
        key_cache[k] = ffi_string(p + before, len - before)
        config.key_cache_count = config.key_cache_count + 1
    elseif tk == "number" then
        buf:put('"')
        put_number(k)
        buf:put('":')
    else
        fail(tk, "table key must be a number or string")
    end
end

-- Raises as put_key(k) would, writing nothing: for a member whose value
-- is left out (encode_skip_unsupported_value_types), as cjson writes the
-- key before it finds that out.
local function check_key(k)
    local tk = type(k)
    if tk == "number" then
        if (k ~= k or k == huge or k == -huge) and config.invalid_numbers == 0 then
            fail("number", "must not be NaN or Infinity")
        end
    elseif tk ~= "string" then
        fail(tk, "table key must be a number or string")
    end
end

-- The deepest nesting the encoder goes into, whatever encode_max_depth
-- allows. Past SEGMENT levels it goes on in a coroutine (see
-- `put_container_on_new_stack`), and each one's resume is a C call
-- nested in the one before it: 4 000 of them (2 000 000 levels) fit in
-- a C stack of 1 MB, 4 000 did not in 256 KB, and 16 000 did not in 1 MB
-- (`ulimit -s`, nested plain tables). Unbounded, a table that contains
-- itself under encode_max_depth(2^31 - 1) ran until the C stack
-- overflowed: SIGSEGV, after 27 s and 12.7 GB with 8 MB of stack.
local DEEPEST = 2000000

local function nesting_error(depth)
    raise(nesting_message(depth))
end

local function enter_table(depth)
    if depth > config.max_depth or depth > DEEPEST then
        nesting_error(depth)
    end
    if depth > deepest then deepest = depth end
end

local function put_table(t, depth)
    enter_table(depth)
    local mt = getmetatable(t)
    if mt == array_mt then
        return put_array(t, #t, depth)
    end
    local cjson_kind, len
    if mt ~= nil and mt ~= empty_array_mt then
        -- The metatable itself, as cjson reads it, not what a __metatable
        -- field shows.
        mt = debug_getmetatable(t)
        cjson_kind, len = cjson_array_kind(mt)
    end
    if cjson_kind == "raw" then
        return put_array(t, #t, depth)
    elseif cjson_kind == "metamethods" then
        local n = tonumber(metamethod_call(len, t)) or 0
        return put_array(t, n >= 0 and math_floor(n) or math_ceil(n), depth, reads_through(mt))
    end
    local n = array_length(t)
    if n > 0 or (n == 0 and not config.empty_table_as_object) then
        -- With a metatable its elements are read through it, so an
        -- __index fills its holes, as in cjson.
        return put_array(t, n, depth, mt ~= nil and reads_through(mt))
    end
    if mt == empty_array_mt or cjson_kind == "empty" then
        -- Not an array by its keys (or none), but marked as one: #t raw
        -- elements, as lua-cjson writes it.
        return put_array(t, #t, depth)
    end
    buf:put("{")
    local first, empty = true, true
    for k, v in next, t do
        empty = false
        if skipped(v) then
            check_key(k)
        else
            put_separator(first, depth)
            first = false
            put_key(k)
            if config.indent then buf:put(" ") end
            put_value(v, depth)
        end
    end
    put_close("}", empty, depth)
end

-- Splicing: the source text of a proxy, with the edits of its document
-- (lua/qjson/edits.lua) in its range applied. Offsets are from `base`,
-- the start of the document's text.

-- The base of no text, for when nothing is pending: flush then copies
-- no bytes from it. (A branch on "anything pending?" kept LuaJIT from
-- compiling flush: its side trace for the other case returned below the
-- trace's start, and flush ran interpreted, boxing its pointer.)
local NOWHERE_BYTE = ffi.new("char[1]")
-- (Of the type real bases have: the compiled flush checks it.)
local NOWHERE = ffi_cast(char_ptr, NOWHERE_BYTE)
local pending_from, pending_to, pending_base = 0, 0, NOWHERE

-- qjson.encode_pieces' output: the pieces taken so far, their count and
-- their bytes, and how many of them are runs of the source (see
-- SPAN_PIECES); `out_pieces` is false in any other encode.
local out_pieces, out_count, out_len, out_runs = false, 0, 0, 0

-- The longest string of a text encoded in pieces (qjson.encode_pieces):
-- LuaJIT's allocator maps fresh memory for every object of 128 KB or
-- more and unmaps it when the object is freed, so each whole text that
-- large costs page faults for every 4 KB of it (on the AMD EPYC of
-- docs/benchmarks.md, a fresh 1 MB string took about 0.7 ms and sixteen
-- of 64 KB about 0.06 ms: "Encode in pieces" in docs/architecture.md).
-- Pieces under that size come from memory the allocator already holds.
local PIECE_BYTES = 65536
local HALF_PIECE = PIECE_BYTES / 2

-- The untouched runs of a changed document's source from SPAN_PIECE_MIN
-- to SPAN_PIECE_MAX bytes are pieces of their own, not copied into the
-- buffer. OpenResty's LuaJIT hashes a string of 128 bytes or more from a
-- few of its bytes, so texts of one length that differ only elsewhere
-- share a chain of its string table, and each new one is compared with
-- every one of them still uncollected: with 10 MB of Lua objects alive,
-- an SSE event's change re-encoded as one string ran at about 100 000
-- calls a second, in pieces at 390 000-490 000 (docs/benchmarks.md,
-- "Rewritten events in a gateway's heap"). A run that is the same in
-- every event (the text before the token) is one string, found again,
-- and what is left between runs is short or unlike the rest.
-- Shorter runs are hashed whole and cost less copied; longer ones are
-- cut with the buffer. Only the first SPAN_PIECES runs of an encode are
-- pieces: the runs of one document can be alike too (the messages of a
-- body, each changed), and as strings of one length they would meet in
-- one chain, each compared with all before it (spec/complexity_spec.lua
-- holds such a body to linear time). So an encode adds at most
-- SPAN_PIECES long strings where one string of its text adds one, and
-- those strings together are no longer than the text.
local SPAN_PIECE_MIN, SPAN_PIECE_MAX, SPAN_PIECES = 128, PIECE_BYTES, 4

-- Moves the buffer's text to the pieces, as strings of at most
-- PIECE_BYTES: piece k (from 0) is cut PIECE_BYTES - k % (PIECE_BYTES /
-- 2) bytes long, as the native encoder cuts them (src/lua_api/encode.rs):
-- pieces of one length whose bytes differ only where LuaJIT's string hash
-- does not read would share a hash chain, each compared with all before
-- it, which text from a client can arrange.
local function cut_buffer()
    while #buf > 0 do
        local piece = buf:get(PIECE_BYTES - out_count % HALF_PIECE)
        out_count, out_len = out_count + 1, out_len + #piece
        out_pieces[out_count] = piece
    end
end

local function flush()
    local n = pending_to - pending_from
    if out_pieces and n >= SPAN_PIECE_MIN and n <= SPAN_PIECE_MAX and out_runs < SPAN_PIECES then
        -- An untouched run of the source: a piece of its own.
        cut_buffer()
        out_count, out_len, out_runs = out_count + 1, out_len + n, out_runs + 1
        out_pieces[out_count] = ffi_string(pending_base + pending_from, n)
    else
        buf:putcdata(pending_base + pending_from, n)
    end
    pending_from, pending_to = 0, 0
end

-- Copies source bytes [from, to), merged with the previous copy when they
-- touch, so untouched runs cost one copy.
local function copy(base, from, to)
    if to <= from then return end
    if base == pending_base and from == pending_to then
        pending_to = to
        return
    end
    flush()
    pending_base, pending_from, pending_to = base, from, to
end

-- Writes `key`, added to an object (change record rec), and its value,
-- after a comma when something comes before it (`kept`); returns whether
-- something now does.
local function put_added_key(rec, key, kept, depth)
    local v = object_value(rec, key)
    if rawequal(v, DELETED) then
        return kept
    elseif skipped(v) then
        check_key(key)
        return kept
    end
    if kept then buf:put(",") end
    put_key(key)
    put_value(v, depth)
    return true
end

-- The keys added to an object (change record rec), each after a comma
-- when something comes before it (`kept`: a source member stays).
local function put_added(rec, kept, depth)
    for _, key in next_added, rec, ADDED_START do
        kept = put_added_key(rec, key, kept, depth)
    end
end

-- The elements appended to an array (change record rec), holes as null.
local function put_appended(rec, depth)
    local kept = rec[R_N0] > 0
    for i = rec[R_N0] + 1, rec[R_N] do
        local v = rec[FIELDS + i]
        if not skipped(v) then
            if kept then buf:put(",") end
            kept = true
            put_value(rawequal(v, DELETED) and null or v, depth)
        end
    end
end

-- Counts a container entered at depth d to write an edit in it, as if
-- every container above it had been entered (so the limit and its
-- message are cjson's; see put_source).
local function enter_edit(d)
    if d > config.max_depth then
        nesting_error(config.max_depth + 1)
    end
    if d > deepest then deepest = d end
end

-- Writes the edit at position e of `list` (see lua/qjson/edits.lua),
-- whose source range starts after `at`, in a range entered at `depth`
-- from nesting depth `from_depth`; returns where the source goes on.
local function put_edit(base, list, e, at, depth, from_depth)
    copy(base, at, list[e])
    local d = depth + list[e + 3] - from_depth
    enter_edit(d)
    local v = list[e + 2]
    if not rawequal(v, DELETED) then
        flush()
        if rawequal(v, INSERT) then
            put_added(list[e + 4], list[e + 5], d)
        elseif rawequal(v, APPEND) then
            put_appended(list[e + 4], d)
        else
            put_value(v, d)
        end
    end
    return list[e + 1]
end

-- Writes source bytes [from, to) of the text at `base` with the edits of
-- `list` that start in (after, to) applied, skipping those inside a range
-- an earlier one replaced. A container's own edits start after its first
-- byte; one that starts on it replaces the container, and is its parent's.
-- The range is a value at nesting depth `from_depth` in its document
-- (0 for the root) entered at `depth`; each edit's container
-- is entered at its depth counted from there, as if every container in
-- between had been (so the limit and its message are cjson's).
local function put_source(base, list, from, after, to, depth, from_depth)
    local at = from
    local e = first_edit(list, after + 1)
    local e_from = list[e]
    if e_from and e_from < to then
        -- The first edit outside the loop, which most ranges need no
        -- more than (see edits_of in lua/qjson/edits.lua).
        at = put_edit(base, list, e, at, depth, from_depth)
        e = e + EDIT
        e_from = list[e]
        while e_from and e_from < to do
            if e_from >= at then
                at = put_edit(base, list, e, at, depth, from_depth)
            end
            e = e + EDIT
            e_from = list[e]
        end
    end
    copy(base, at, to)
end

-- The largest max_depth a document may have been parsed under: the
-- default's, or more once decode_max_depth or a call's option allowed
-- more (lua/qjson.lua tells, `allow_parse_depth`). While encode_max_depth
-- is at least this, no proxy's source nests deeper than the encoder
-- allows, and the encoder copies it without a look at its depth. (An
-- upvalue, not a field: the trace of a loop that decodes, changes and
-- encodes a small document is near LuaJIT's 500 constants, and a field
-- took it past them: spec/jit_spec.lua's "decode, add a number of more
-- than 14 digits, encode" then compiled no trace under OpenResty's
-- LuaJIT.)
local deepest_parse = 1000

function _M.allow_parse_depth(n)
    if n > deepest_parse then
        deepest_parse = n
    end
end

-- Whether the source of the proxy (code `code`) of state st, entered at
-- `depth`, nests deeper than encode_max_depth allows. The source nests at
-- most the max_depth it was parsed under (at most `deepest_parse`) less
-- the proxy's depth in it, so unless encode_max_depth is lower, or the
-- proxy is entered deeper than it lies (inside plain tables), that
-- settles it without a look.
local function too_deep(st, code, depth)
    local levels = config.max_depth - depth + 1
    return levels + depth_of(st, code) < deepest_parse
           and source_deeper(st, code, levels, reader)
end

-- Writes the proxy (code `code`: see lua/qjson/lazy.lua) of state st: its
-- source bytes, with its document's edits in that range applied.
local function put_proxy(st, code, depth, proxy)
    enter_table(depth)
    if too_deep(st, code, depth) then
        -- Copied, the source would pass the limit: cjson's error, unless
        -- changes took the deep part out, which the plain tables the proxy
        -- stands for tell (linear, and only past the limit). One that
        -- contains itself nests past any limit, as in cjson.
        if not has_changes(st) then
            nesting_error(config.max_depth + 1)
        end
        local ok, plain = pcall(materialize, proxy)
        if not ok then
            if plain == CONTAINS_ITSELF then
                nesting_error(config.max_depth + 1)
            end
            error(plain, 0)
        end
        return put_table(plain, depth)
    end
    local ptr = live_ptr(st)
    local base = source(st[SRC])
    local from, to = source_span(st, ptr, cursor_of(code), reader)
    if has_changes(st) then
        local list = edits_for(st, code, from, to, reader)
        local e_from = list[first_edit(list, from + 1)]
        if e_from and e_from < to then
            -- Changed inside: from its own depth on.
            local from_depth = depth_of(st, code)
            put_source(base, list, from, from, to, depth, from_depth)
            flush()
            return
        end
    end
    copy(base, from, to)
    flush()
end

-- Writes the table v (a plain one or a proxy) entered at `depth`. Under
-- encode_indent a proxy is written as the plain table of its level (its
-- children left as they are, then written in turn), every line laid out
-- anew, as cjson would write them. (Materialized whole, the plain tables
-- written into it were copies, iterated in an order of their own, and
-- one that contained itself raised materialize's error, not cjson's.)
local function put_container(v, depth)
    local st, code = proxy_info(v)
    if not st then
        put_table(v, depth)
    elseif raw_written(st, v, code) then
        fail("table", RAW_WRITTEN)
    elseif config.indent then
        put_table(materialize_level(v, reader), depth)
    else
        put_proxy(st, code, depth, v)
    end
end

-- The encoder recurses, and a Lua stack holds some thousands of its
-- levels; so every SEGMENT levels the recursion goes on in a coroutine of
-- its own, whose stack starts empty, and nesting is bounded by
-- encode_max_depth alone (cjson's by its C stack, near 8 000 levels).
-- SEGMENT levels of the deepest-framed path (splicing changed proxies)
-- take well under half a stack.
-- Where coroutines are disabled (nginx's log_by_lua*, which raises "API
-- disabled in the context of log_by_lua*"), it goes on in the stack it
-- is in, and a nesting deeper than that stack holds raises cjson's
-- "excessive nesting" error (see `raise`).
local SEGMENT = 500

-- A call out of the encode's section (lua/qjson/ffi.lua, `calling_out`):
-- a finalizer run in the new coroutine that calls qjson would find the
-- section on no stack there, and took the shared reader and the encoder's
-- state from it (an audit's finding: output cut short, without error).
local function put_container_on_new_stack(v, depth)
    local made, co = pcall(co_create, put_container)
    local ok, err
    if made then
        calling_out(true)
        ok, err = co_resume(co, v, depth)
        calling_out(false)
    else
        ok, err = pcall(put_container, v, depth)
    end
    if not ok then
        raise(err)
    end
end

function put_value(v, depth)
    local t = type(v)
    if t == "string" then
        put_string(v)
    elseif t == "number" then
        put_number(v)
    elseif t == "boolean" then
        buf:put(v and "true" or "false")
    elseif t == "table" then
        if rawequal(v, empty_array) then
            -- A value, as cjson.empty_array is: no level of nesting.
            buf:put("[]")
            return
        end
        depth = depth + 1
        if depth % SEGMENT == 0 then
            put_container_on_new_stack(v, depth)
        else
            put_container(v, depth)
        end
    elseif t == "cdata" then
        -- Before any comparison: LuaJIT compares a pointer with nil, a
        -- light userdata or a table as an address, so a NULL pointer
        -- would pass for null.
        put_cdata(v)
    elseif v == nil or v == null then
        buf:put("null")
    elseif t == "userdata" and v == cjson_empty_array() then
        buf:put("[]")
    else
        fail(t, "type not supported")
    end
end


-- The change record of the document of state st when its only change
-- is one key of one object (lua/qjson/lazy.lua): a member replaced whose
-- key the source does not repeat (the record is `R_SIMPLE` with one
-- triple), or a key the source lacks added (one triple, for no source
-- member), as a gateway's rewrite of `model` or `options.max_items`, or
-- its tag, does; else nil.
local function one_key_record(st)
    local rec, changes = st[ROOT_REC], st[CHANGES]
    if rec then
        if changes then return nil end
    elseif is_record(changes) then
        rec = changes
    else
        return nil
    end
    if #rec ~= FIELDS + 3 then return nil end
    if rec[R_SIMPLE] or (rec[FIELDS + 1] == false and rec[R_ADDED] == 1) then
        return rec
    end
    return nil
end

-- Writes the document of state st, whose text is src and whose only
-- change is that of record rec (see one_key_record), straight from the
-- record, as put_source would with the one edit but without making the
-- document's list of edits, which a rewrite encoded once throws away:
-- the source up to the member's value, the value, the source after it;
-- or, for an added key, the source up to the object's last value (found
-- from the object's closing byte back over whitespace), the key, the
-- source after. The 64-byte tool call changed and encoded
-- (`tools/lua_insns.sh tool-modify tool-nested tool-add`): 6 787 -> 6 169,
-- 6 750 -> 6 578 and 7 004 -> 5 596 instructions, 712 -> 613, 826 -> 676
-- and 698 -> 579 bytes of Lua heap; its rows "modify a top-level field +
-- encode", "modify a nested field + encode" and "add a field + encode" in
-- `luajit benches/lua_bench.lua tool-call` 1.27x -> 1.36x, 1.34x -> 1.42x
-- and 1.45x -> 1.92x the cjson fork (medians of five runs each, old and
-- new alternating).
local function put_one_key(st, src, rec)
    local ptr = live_ptr(st)
    -- The value's depth, counted as put_edit counts it.
    local d = 1 + rec[R_DEPTH]
    enter_edit(d)
    local base, len = source(src)
    local from = rec[FIELDS + 1]
    if from then
        copy(base, 0, from)
        flush()
        put_value(object_value(rec, rec[FIELDS + 3]), d)
        copy(base, rec[FIELDS + 2], len)
        flush()
        return
    end
    -- After the last member's value, or the '{' of an empty object: the
    -- last byte before the closing '}' (at offset to - 1, position to)
    -- that is not whitespace, whose position is the offset after it.
    local _, to = source_span(st, ptr, cursor_of(rec[R_CODE]), reader)
    local b, at = last_byte(src, to - 1)
    copy(base, 0, at)
    flush()
    -- (Its one key, with no loop: put_added's loop, run once a call, left
    -- its function's trace every call, "leaving loop in root trace", and
    -- aborted the traces around it, "inner loop in root trace".)
    put_added_key(rec, rec[FIELDS + 3], b ~= OPEN_OBJECT, d)
    copy(base, at, len)
    flush()
end

-- Encodes v into buf. A whole changed document is its text with all its
-- edits applied, so the whitespace around its root value stays; so is an
-- unchanged one whose text is no Lua string (see `lua_encode`).
local function put_top(v)
    local st, code = proxy_info(v)
    local changed = st and has_changes(st)
    if st and (code == 0 or code == -1) and not config.indent
       and (changed or type(st[SRC]) ~= "string")
       and (config.max_depth >= deepest_parse or not too_deep(st, code, 1)) then
        -- `raw_written` spelt out: the trace of a loop that decodes,
        -- changes and encodes a small document is near LuaJIT's 500
        -- constants, and the call took four more, past them
        -- (spec/jit_spec.lua's "more than 14 digits" loop then compiled
        -- from maxirconst 503 under OpenResty's LuaJIT, this from 499).
        if next(v) ~= nil or st[CHILD] and raw_written_below(st) then
            fail("table", RAW_WRITTEN)
        end
        enter_table(1)
        local src = st[SRC]
        local rec = changed and one_key_record(st)
        if rec then
            put_one_key(st, src, rec)
            return
        end
        local base, len = source(src)
        put_source(base, edits_of(st, reader), 0, -1, len, 1, 0)
        flush()
        return
    end
    -- A value left out is the whole text left out: "", as cjson gives.
    if not skipped(v) then
        put_value(v, 0)
    end
end

-- The pieces of the text just encoded, and its length, which stays in
-- out_len for `trim_buffer`.
local function take_pieces()
    cut_buffer()
    local pieces = out_pieces
    out_pieces, out_count, out_runs = false, 0, 0
    return pieces, out_len
end

-- Encodes v in reader R's section; returns the text (in pieces and its
-- length when `pieces` is set). Raises as `raise` says; whatever an error
-- left behind, the next encode sets afresh here. The text stays in the
-- buffer (or its length in out_len) for `trim_buffer`.
local function encode_with(v, R, pieces)
    buf:reset()
    pending_base, pending_from, pending_to = NOWHERE, 0, 0
    out_pieces, out_count, out_len, out_runs = pieces and new_tab(4, 0) or false, 0, 0, 0
    deepest = 0
    reader = R
    put_top(v)
    reader = nil
    if pieces then
        return take_pieces()
    end
    -- Not a tail call: a root trace may not leave through a builtin.
    local out = buf:tostring()
    return out
end

-- The bytes the buffer holds from its read position on (all of it once
-- reset): the room `reserve` reports and the bytes not yet read. (LuaJIT
-- gives the room of a 2 GB buffer as -2^31: its lengths have 32 bits, the
-- number it returns 31.)
local function buffer_bytes()
    local _, room = buf:reserve(0)
    if room < 0 then
        room = room + 2 ^ 32
    end
    return room + #buf
end

-- The buffer's memory. LuaJIT counts it in the Lua heap, so a buffer kept
-- at its largest would hold that memory for the worker's life and make
-- each collection cycle wait for as much garbage more: after one encode
-- of 2 GB, no cycle ran in a loop of small decodes (spec/limits_spec.lua).
-- Each sweep that finds no section under way (lua/qjson/doc.lua, once a
-- cycle) calls this: a buffer larger than BUFFER_KEEP_BYTES is kept while
-- the last encode needed it at that size, and given back at the next
-- sweep that finds no such encode since. The last encode's text (or its
-- length, in pieces) is what tells, emptied here: the check costs an
-- encode nothing. (Freed after every encode, the buffer of a 10 MB chat
-- request changed and encoded again would grow anew each time, through
-- fresh pages the kernel zeroes.)
local function trim_buffer()
    local needed = #buf > BUFFER_KEEP_BYTES or out_len > BUFFER_KEEP_BYTES
    buf:reset()
    out_len = 0
    if not needed and buffer_bytes() > BUFFER_KEEP_BYTES then
        buf:free()
    end
end
require("qjson.doc").on_sweep(trim_buffer)

-- Whether the whole document of state st (its root's code `code`) nests
-- no deeper than max_depth allows: without a look while no document was
-- parsed under a deeper limit (`deepest_parse`), else by a walk of its
-- source (a decode under a larger max_depth anywhere made every untouched
-- document lose the whitespace around its root, written as its value).
local function within_depth(st, code, max_depth)
    if max_depth >= deepest_parse then
        return true
    end
    local R = enter()
    local deeper = source_deeper(st, code, max_depth, R)
    leave(R)
    return not deeper
end

-- The Lua encoder, with the options of `cfg`: every value, proxies
-- included. Returns the text, or, with `pieces`, the text in pieces and
-- its length.
local function lua_encode(v, cfg, pieces)
    local st, code = proxy_info(v)
    if st and (code == 0 or code == -1) and not has_changes(st) and not cfg.indent
       and type(st[SRC]) == "string" and within_depth(st, code, cfg.max_depth) then
        -- An untouched whole document is its own text (when the text is a
        -- Lua string; a copy the native document owns is written out by
        -- put_top), unless raw access wrote into a proxy of it.
        if raw_written(st, v, code) then
            fail("table", RAW_WRITTEN)
        end
        local src = st[SRC]
        if pieces then
            return { src }, #src
        end
        return src
    end
    local R = enter()
    local saved_config = config
    config = cfg
    -- The text (or its pieces), and then the pieces' length; or, when
    -- `ok` is false, the error in `out`.
    local ok, out, second = true
    if R == MAIN then
        -- Not under pcall: see `raise`.
        out, second = encode_with(v, R, pieces)
    else
        -- Inside another encode's section, perhaps: keep its state.
        local saved_buf, saved_reader, saved_deepest = buf, reader, deepest
        local saved_base, saved_from, saved_to = pending_base, pending_from, pending_to
        local saved_pieces, saved_count, saved_len, saved_runs = out_pieces, out_count, out_len,
                                                                  out_runs
        buf = buffer.new()
        ok, out, second = pcall(encode_with, v, R, pieces)
        if not ok then
            -- (While `deepest` is still this encode's.)
            out = reported(out)
        end
        buf, reader, deepest = saved_buf, saved_reader, saved_deepest
        pending_base, pending_from, pending_to = saved_base, saved_from, saved_to
        out_pieces, out_count, out_len, out_runs = saved_pieces, saved_count, saved_len,
                                                   saved_runs
    end
    config = saved_config
    leave(R)
    if not ok then
        error(out, 0)
    end
    if pieces then
        return out, second
    end
    return out
end

-- Plain values are encoded natively (src/lua_api/encode.rs) when the Lua
-- C API can be found: a table whose metatable is one of ours or none,
-- and any other value. The native encoder hands back (returns nothing)
-- what it does not encode, a proxy or another metatable met inside, cdata,
-- nesting deeper than its stack grows, a NaN or an infinity that
-- `encode_invalid_numbers` lets through, a value that
-- `encode_skip_unsupported_value_types` leaves out, and the Lua encoder
-- encodes the whole value again. Counted, for the specs.
local c_encode = qffi.c_encode
local native_done, native_declined = 0, 0

-- The options as the native encoder reads them (src/lua_api/encode.rs,
-- `options`): one string in cfg.native, packed again whenever an option
-- changes.
local function u32(n)
    return str_char(n % 256, math_floor(n / 256) % 256, math_floor(n / 65536) % 256,
                    math_floor(n / 16777216) % 256)
end
local function pack_options(cfg)
    local flags = (cfg.sparse_convert and 1 or 0) + (cfg.escape_slash and 2 or 0)
                  + (cfg.empty_table_as_object and 4 or 0)
                  + (cfg.invalid_numbers ~= 0 and 8 or 0) + (cfg.skip_unsupported and 16 or 0)
    cfg.native = str_char(cfg.number_precision, flags) .. u32(cfg.sparse_ratio)
                 .. u32(cfg.sparse_safe) .. u32(cfg.max_depth)
end

-- encode_invalid_numbers' settings, as cjson names them.
local INVALID_NUMBERS = { [false] = 0, off = 0, [true] = 1, on = 1, null = 2 }
local INVALID_NUMBER_NAMES = { [0] = false, true, "null" }

-- An encoder: `encode` and cjson's encoder options (set when given
-- arguments, return the current values) over a config of its own. The
-- module's are one (qjson.encode, qjson.encode_*); qjson.new() makes
-- another per instance.
local function encoder(cfg)
    pack_options(cfg)
    local e = {}

    function e.encode(v)
        if c_encode and not cfg.indent then
            local mt = type(v) == "table" and getmetatable(v)
            if not mt or mt == array_mt or mt == empty_array_mt then
                local out, err = c_encode(v, cfg.native, null, array_mt, empty_array_mt,
                                          empty_array, cjson_empty_array())
                if out then
                    native_done = native_done + 1
                    return out
                elseif err then
                    native_done = native_done + 1
                    error(err, 0)
                end
                native_declined = native_declined + 1
            end
        end
        return lua_encode(v, cfg)
    end

    -- The text of v as an array of strings of at most 64 KB each (an
    -- untouched whole document: its source string alone), and its length.
    -- (Not through e.encode with an argument more: the one-string path
    -- then cost a small encode 2% more instructions.)
    function e.encode_pieces(v)
        local mt = type(v) == "table" and getmetatable(v)
        if c_encode and not cfg.indent and (not mt or mt == array_mt or mt == empty_array_mt) then
            -- The pieces and their length, or nil and the error, or
            -- nothing (handed back).
            local pieces, len = c_encode(v, cfg.native, null, array_mt, empty_array_mt,
                                         empty_array, cjson_empty_array(), PIECE_BYTES)
            if pieces == nil and len == nil then
                native_declined = native_declined + 1
            else
                native_done = native_done + 1
                if pieces == nil then
                    error(len, 0)
                end
                return pieces, len
            end
        end
        return lua_encode(v, cfg, true)
    end

    -- For the specs: the Lua encoder alone.
    function e.lua_encode(v)
        return lua_encode(v, cfg)
    end

    function e.encode_number_precision(n)
        n = integer("encode_number_precision", 1, n, 1, 16)
        if n then
            cfg.number_precision = n
            cfg.number_format = "%." .. n .. "g"
            cfg.exact_integers = 10 ^ n
            pack_options(cfg)
        end
        return cfg.number_precision
    end

    function e.encode_sparse_array(convert, ratio, safe)
        convert = switch("encode_sparse_array", 1, convert)
        ratio = integer("encode_sparse_array", 2, ratio, 0, 2 ^ 31 - 1)
        safe = integer("encode_sparse_array", 3, safe, 0, 2 ^ 31 - 1)
        if convert ~= nil then cfg.sparse_convert = convert end
        if ratio then cfg.sparse_ratio = ratio end
        if safe then cfg.sparse_safe = safe end
        pack_options(cfg)
        return cfg.sparse_convert, cfg.sparse_ratio, cfg.sparse_safe
    end

    -- (The cached keys were escaped the other way.)
    e.encode_escape_forward_slash = switch_function("encode_escape_forward_slash", cfg,
                                                    "escape_slash", function()
        table_clear(cfg.key_cache)
        cfg.key_cache_count = 0
        pack_options(cfg)
    end)

    e.encode_empty_table_as_object = switch_function("encode_empty_table_as_object", cfg,
                                                     "empty_table_as_object", pack_options)

    function e.encode_max_depth(n)
        n = integer("encode_max_depth", 1, n, 1, 2 ^ 31 - 1)
        if n then
            cfg.max_depth = n
            pack_options(cfg)
        end
        return cfg.max_depth
    end

    -- "off" (the default) refuses NaN and infinities; "on" writes them as
    -- NaN, Infinity and -Infinity (not JSON, but what JavaScript reads);
    -- "null" writes null.
    function e.encode_invalid_numbers(setting)
        setting = choice("encode_invalid_numbers", 1, setting, INVALID_NUMBERS)
        if setting then
            cfg.invalid_numbers = setting
            pack_options(cfg)
        end
        return INVALID_NUMBER_NAMES[cfg.invalid_numbers]
    end

    -- Leaves functions, threads, userdata (but null) and cdata (but
    -- int64_t and uint64_t) out of arrays and objects, with their keys,
    -- instead of raising; a value left out at the top encodes as "".
    -- (A value written into a proxy over one of its source members is
    -- still refused: the member's key is the source's.)
    e.encode_skip_unsupported_value_types = switch_function(
        "encode_skip_unsupported_value_types", cfg, "skip_unsupported", pack_options)

    -- The string each level of nesting is indented by, each element and
    -- member on a line of its own ("" for compact JSON, the default). A
    -- number is taken as its string, as cjson takes it.
    function e.encode_indent(indent)
        indent = options.text("encode_indent", 1, indent)
        if indent then
            cfg.indent = indent ~= "" and indent
        end
        return cfg.indent or ""
    end

    -- cjson's switch for keeping its buffer between calls: qjson keeps
    -- its own while encodes need it and gives it back once they do not
    -- (`trim_buffer`), so the setting changes nothing but what it returns.
    e.encode_keep_buffer = switch_function("encode_keep_buffer", cfg, "keep_buffer")

    return e
end

-- The option functions, for the facades to re-export.
_M.OPTIONS = { "encode_number_precision", "encode_sparse_array", "encode_escape_forward_slash",
               "encode_empty_table_as_object", "encode_max_depth", "encode_invalid_numbers",
               "encode_skip_unsupported_value_types", "encode_keep_buffer", "encode_indent" }

-- A new encoder with cjson's default options (for qjson.new()).
function _M.new_encoder()
    return encoder(new_config())
end

-- The module's encoder: qjson.encode and its options.
local default = _M.new_encoder()
_M.encode = default.encode
_M.encode_pieces = default.encode_pieces
_M.lua_encode = default.lua_encode
for _, name in ipairs(_M.OPTIONS) do
    _M[name] = default[name]
end

-- For the specs: how many encodes the native encoder finished (with the
-- text or an error) and handed back.
function _M.native_counts()
    return native_done, native_declined
end

-- For the specs: the bytes the output buffer holds (all of them after a
-- sweep: see `buffer_bytes`).
_M.buffer_bytes = buffer_bytes

return _M
