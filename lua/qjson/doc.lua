-- Documents and cursors: typed getters over a parsed JSON text.
--
-- A document and every cursor opened from it are the same kind of object:
-- a reference to the shared native handle plus a cursor (0 for the whole
-- document). Each getter is one call into libqjson that resolves the path
-- and reads the value; nothing is decoded that is not asked for.
--
-- Data never raises: a missing path gives nil, a value of another type or
-- an out-of-range integer gives nil and a message. Misuse raises: a
-- malformed path, a document used after free(). Documents made by
-- qjson.safe return nil and the message for misuse too.

local ffi = require("ffi")
local qffi = require("qjson.ffi")

local C = qffi.C
local enter = qffi.enter
local leave = qffi.leave
local idle = qffi.idle
local MAIN = qffi.main
local is_closed = qffi.is_closed
local scalar = qffi.scalar
local ffi_string = ffi.string
local ffi_cast = ffi.cast
local collectgarbage = collectgarbage
local error = error
local type = type
local tonumber = tonumber
local tostring = tostring
local setmetatable = setmetatable
local getmetatable = getmetatable

local DOC_PTR = ffi.typeof("qjson_doc *")
local UINTPTR = ffi.typeof("uintptr_t")

local OK = C.QJSON_OK
local NOT_FOUND = C.QJSON_NOT_FOUND
local TYPE_MISMATCH = C.QJSON_TYPE_MISMATCH
local OUT_OF_RANGE = C.QJSON_OUT_OF_RANGE
local NOT_INTEGER = C.QJSON_NOT_INTEGER
local BAD_PATH = C.QJSON_BAD_PATH

local T_NULL = C.QJSON_TYPE_NULL
local T_FALSE = C.QJSON_TYPE_FALSE
local T_TRUE = C.QJSON_TYPE_TRUE
local T_NUMBER = C.QJSON_TYPE_NUMBER
local T_STRING = C.QJSON_TYPE_STRING

-- Lua-facing type names, indexed by QJSON_TYPE_*.
local TYPE_NAMES = { "null", "boolean", "boolean", "number", "string", "array", "object" }

local Doc = {}
Doc.__index = Doc

-- Where a tracked state (see `track`) keeps its native handle's address
-- (a Lua number, see `address_of`), false once freed: the first array
-- slot, which the lazy states of lua/qjson/lazy.lua keep their other
-- fields beside.
local PTR = 1
-- Beside it, in a root document's array part: the cursor (0) and the
-- root itself, which a cursor keeps in the same two slots (its [PTR]
-- false), so that a getter reads a cursor and its root alike; then the
-- document's slot in the tracking lists, the native bytes its parse
-- charged the collector (a small document has no slot, false, and keeps
-- its block's cdata, see `parse_small` in lua/qjson.lua, in BLOCK
-- instead), the text (never read: it keeps alive the string, or the
-- string.buffer of a line qjson.sse kept, that the native document
-- borrows) and whether the document is qjson.safe's. A hash
-- part is an allocation of its own: with named fields a parse made a
-- table and four hash nodes, a cursor a table and two.
local AT, DOC, SLOT, BYTES, BLOCK, SAFE = 2, 3, 4, 5, 6, 8

local _M = { _VERSION = "0.1.0" }

-- Raises `message` at the level of the caller of the getter, or returns
-- nil, message for documents made by qjson.safe. Getters reach here by
-- tail calls only, which replace their frames: level 2 is their caller.
-- (Not `return error(...)`: a tail call would replace this frame too.)
-- Never called inside a section (see lua/qjson/ffi.lua).
local function misuse(self, message)
    if self[DOC][SAFE] then
        return nil, message
    end
    error(message, 2)
end

-- What a method called on something other than a document or cursor
-- raises (`doc.get_str(path)` for `doc:get_str(path)`, or another
-- table): its fields were taken for a native address, and the process
-- died of SIGSEGV, or another live document was freed.
local NOT_A_DOCUMENT = "qjson: a document method called on something else "
                       .. "(call it as doc:method(...))"

-- The native handle of a live document; nil after free(). The state
-- keeps it as an address (see `address_of`), which compiled code casts
-- back without allocating: kept as the pointer cdata the parse returns,
-- every document was one more object to allocate and sweep. Raises,
-- at the level of the method's caller, when self is not a document.
local function handle(self)
    if getmetatable(self) ~= Doc then
        error(NOT_A_DOCUMENT, 3)
    end
    local address = self[DOC][PTR]
    if address then
        -- Not a tail call: a root trace may not leave through a builtin.
        local ptr = ffi_cast(DOC_PTR, address)
        return ptr
    end
end

local function freed(self)
    return misuse(self, "qjson: document used after free()")
end

-- The path argument ("" when omitted), or nil and the misuse message.
local function check_path(path, method)
    if path == nil then
        return ""
    end
    if type(path) ~= "string" then
        return nil, "bad argument #1 to '" .. method .. "' (string expected, got "
                    .. type(path) .. ")"
    end
    return path
end

-- The result of a lookup that did not return QJSON_OK; ends the section
-- of reader R first.
local function failure(self, R, rc, path, wanted)
    local v = R.value
    local got, offset = v.type, tonumber(v.i64)
    leave(R)
    if rc == NOT_FOUND then
        return nil
    elseif rc == TYPE_MISMATCH then
        return nil, "qjson: expected " .. wanted .. " at \"" .. path .. "\", got "
                    .. TYPE_NAMES[got]
    elseif rc == OUT_OF_RANGE then
        return nil, "qjson: integer at \"" .. path .. "\" does not fit in int64"
    elseif rc == NOT_INTEGER then
        return nil, "qjson: number at \"" .. path .. "\" is not an integer"
    elseif rc == BAD_PATH then
        return misuse(self, "qjson: invalid path \"" .. path .. "\" at byte "
                            .. tostring(offset))
    end
    return misuse(self, "qjson: lookup failed with code " .. rc)
end

local function mismatch(path, wanted, got)
    return nil, "qjson: expected " .. wanted .. " at \"" .. path .. "\", got " .. TYPE_NAMES[got]
end

-- Each getter: check the arguments, then in one section (see
-- lua/qjson/ffi.lua) one native call and the reads of its results.
-- Native calls are never tail calls: a trace that tail-calls the C
-- function and returns below its start aborts ("NYI: return to lower
-- frame"); the getters avoid `return f(...)` of a builtin for the same
-- reason.

-- The native call `fn` for `path` from this cursor, through reader R;
-- returns the status. (Getters call `enter` themselves: a function that
-- holds `enter` is how a section is recognised on the stack.)
local function lookup(self, ptr, fn, path, R)
    local rc = fn(ptr, self[AT], path, #path, R)
    return rc
end

function Doc:get_str(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "get_str")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_get, p, R)
    if rc ~= OK then return failure(self, R, rc, p, "string") end
    local v = R.value
    local t = v.type
    local s = t == T_STRING and ffi_string(v.str, v.len)
    leave(R)
    if not s then return mismatch(p, "string", t) end
    return s
end

function Doc:get_f64(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "get_f64")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_get, p, R)
    if rc ~= OK then return failure(self, R, rc, p, "number") end
    local v = R.value
    local t, n = v.type, v.num
    leave(R)
    if t ~= T_NUMBER then return mismatch(p, "number", t) end
    return n
end

function Doc:get_i64(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "get_i64")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_get_i64, p, R)
    if rc ~= OK then return failure(self, R, rc, p, "number") end
    local n = R.value.i64
    leave(R)
    return n
end

function Doc:get_bool(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "get_bool")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_find, p, R)
    if rc ~= OK then return failure(self, R, rc, p, "boolean") end
    local t = R.value.type
    leave(R)
    if t == T_TRUE then return true end
    if t == T_FALSE then return false end
    return mismatch(p, "boolean", t)
end

-- true for JSON null, false for any other value, nil when missing.
function Doc:is_null(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "is_null")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_find, p, R)
    if rc ~= OK then return failure(self, R, rc, p) end
    local t = R.value.type
    leave(R)
    return t == T_NULL
end

function Doc:typeof(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "typeof")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_find, p, R)
    if rc ~= OK then return failure(self, R, rc, p) end
    local t = R.value.type
    leave(R)
    return TYPE_NAMES[t]
end

-- Elements of an array, distinct keys of an object.
function Doc:len(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "len")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_len, p, R)
    if rc ~= OK then return failure(self, R, rc, p, "array or object") end
    local n = tonumber(R.value.len)
    leave(R)
    return n
end

-- The exact source text of the value.
function Doc:raw(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "raw")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_raw, p, R)
    if rc ~= OK then return failure(self, R, rc, p) end
    local v = R.value
    local s = ffi_string(v.str, v.len)
    leave(R)
    return s
end

-- A scalar as a Lua value: string, number, boolean or qjson.null.
function Doc:get(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "get")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_get, p, R)
    if rc ~= OK then return failure(self, R, rc, p) end
    local v = scalar(R.value)
    local t = R.value.type
    leave(R)
    if v ~= nil then return v end
    return nil, "qjson: value at \"" .. p .. "\" is an " .. TYPE_NAMES[t]
                .. "; read it with open() or qjson.decode()"
end

-- A cursor on the value at path: the same getters, relative to it.
function Doc:open(path)
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local p, err = check_path(path, "open")
    if not p then return misuse(self, err) end
    local R = enter()
    local rc = lookup(self, ptr, C.qjson_find, p, R)
    if rc ~= OK then return failure(self, R, rc, p) end
    local at = R.value.cursor
    leave(R)
    local cursor = setmetatable({ false, at, self[DOC] }, Doc)
    return cursor
end

-- Native lifetimes, of the documents of texts too long to be small ones
-- (a small document holds no native memory: see `parse_native` in
-- lua/qjson.lua). A cdata finalizer per document costs LuaJIT about as
-- much as parsing a small document, so documents are freed in sweeps
-- instead: `handles[slot]` owns a document's native pointer and
-- `alive[slot]` (a weak value) its Lua table; once the collector has
-- dropped the table, the next sweep frees the pointer. Nothing reads a
-- native document without holding its table, so a pointer is never used
-- after its sweep. Tables die only when a collection cycle ends, which
-- `cycle[1]` (a weak value nothing else holds) tells: a sweep runs at the
-- first parse after each cycle, so its cost is paid once per cycle, like
-- the collector's own, and (like it) is proportional to what is alive:
-- `live[1..held]` lists the slots in use, and a sweep visits only those.
--
-- `doc:free()` frees at once, unless a section is under way (it may be
-- reading that very document: the free comes from a finalizer); then the
-- document waits in `pending` for the next parse.
--
-- The collector cannot see the native memory (index, lookup tables), so
-- each parse counts in `native_debt` what it charges since the last
-- cycle: what it allocated anew or, in a recycled document, the index
-- its text fills. A recycled document is garbage the collector must find
-- as much as a new one: counted as nothing, the cycle was paced by Lua's
-- own allocations alone, and with 95 MB of Lua objects alive 18 000
-- parses of a 100 KB body grew VmRSS by 701 MB, still growing
-- (`luajit tools/soak.lua heap`). Lua lets its own garbage grow with the heap
-- before a cycle starts (the pause), and native garbage gets the same
-- allowance: half the Lua heap, at least GC_PACE_BYTES, measured when a
-- cycle's debt first reaches GC_PACE_BYTES (`pace`). Past it, every
-- GC_PACE_BYTES the collector does the incremental work for what was
-- allocated beyond `paced` (the allowance, then the debt paid for so
-- far), as if Lua had allocated it. (A step starts a cycle
-- even while the collector pauses: charging every byte from the first
-- made a worker with 44 MB of Lua objects run a cycle over all of them
-- every few MB of small documents; with the document pool then bounded
-- too, a tool-call decode took twice cjson's time:
-- `luajit benches/heap_pacing.lua 300000`.)
local GC_PACE_BYTES = 1024 * 1024
local native_debt = 0
-- 0 from a sweep until `pace` sets the cycle's allowance.
local paced = GC_PACE_BYTES
local handles = {}
local alive = setmetatable({}, { __mode = "v" })
local cycle = setmetatable({ {} }, { __mode = "v" })
local free_slots, free_count = {}, 0
local slot_count, held = 0, 0
-- The slots in use, densely, and where each is in that list.
local live, live_at = {}, {}
local pending, pending_count = {}, 0
-- What `sweep` has the encoder give back (see `on_sweep`).
local trim_encoder = function() end
-- Stands in `alive` for a document waiting in `pending`, so that no sweep
-- releases it too.
local PENDING = {}

-- The bookkeeping comes first: freeing casts the address back, which
-- allocates when interpreted, and so may run a finalizer that parses or
-- sweeps in turn.
local function release(slot)
    local address = handles[slot]
    handles[slot] = nil
    alive[slot] = nil
    -- The last slot in use takes this one's place in `live`.
    local at, last = live_at[slot], live[held]
    live[at], live_at[last] = last, at
    live[held], live_at[slot] = nil, nil
    held = held - 1
    free_count = free_count + 1
    free_slots[free_count] = slot
    C.qjson_free(ffi_cast(DOC_PTR, address))
end

-- Releases the documents whose states the collector freed.
local function release_dead()
    -- Downwards: a release moves the last entry, already visited, here.
    -- The newest dead are given back first, so the pool (which hands out
    -- the last one given back) gives the next parses the oldest first, in
    -- the order they were parsed: consecutive parses reuse memory
    -- allocated one after the other. The newest first (likelier in
    -- cache) made a tool-call decode with 131 MB of Lua objects alive 15%
    -- slower (`luajit benches/heap_pacing.lua 1000000`, three runs each:
    -- 0.93-0.99x cjson in this order, 0.76-0.83x newest first at db66103).
    for i = held, 1, -1 do
        local slot = live[i]
        -- (A sweep run by a finalizer during a release may have shortened
        -- the list; what it moved is found by the next sweep.)
        if slot and alive[slot] == nil then
            release(slot)
        end
    end
end

-- What the first parse after a collection cycle does. It is a branch of
-- every parse, so whatever the compiler records through it must compile:
-- no loop unless there are documents to look at, and no builtin it
-- cannot inline (collectgarbage, see `pace`). A trace recorded through a
-- call to collectgarbage("count") here stitched around it, and loops that
-- decode (timed by lua_bench.lua) then linked to such traces instead of
-- inlining the parse: with ASLR the same run of `read fields` on the tool
-- call gave 1.1x cjson in one process and 1.5x in the next.
local function sweep()
    if held > 0 then
        release_dead()
    end
    -- The pool of freed documents keeps a cycle's worth of them.
    C.qjson_pool_cycle()
    if idle() then
        -- Memory kept for later calls that the last cycle did not need.
        C.qjson_reader_trim(MAIN)
        trim_encoder()
    end
    cycle[1] = {}
    native_debt = 0
    paced = 0
end

-- Called when the debt of native memory reaches `paced` plus
-- GC_PACE_BYTES: on the first time in a cycle sets the allowance, half
-- the heap in bytes (the count is in KB); past the allowance, has the
-- collector do the work for the debt beyond it.
--
-- Not again while its step runs: the step runs finalizers, a finalizer
-- that parses a text runs `pace`, and each nested step ran the next
-- finalizers, until the stack overflowed ("stack overflow" out of
-- collectgarbage(), 5 000 finalizers each decoding 8 KB). The outer
-- step's `paced` covers what they add.
local stepping = false
local function pace()
    if stepping then
        return
    end
    if paced == 0 then
        local allowance = collectgarbage("count") * 512
        paced = allowance > GC_PACE_BYTES and allowance or GC_PACE_BYTES
        if native_debt < paced + GC_PACE_BYTES then
            return
        end
    end
    stepping = true
    local ok, err = pcall(collectgarbage, "step", (native_debt - paced) / 1024)
    stepping = false
    paced = native_debt
    if not ok then
        error(err, 0)
    end
end

local function release_pending()
    -- Each is taken off the list before its release, which may run a
    -- finalizer that releases the rest.
    while pending_count > 0 do
        local slot = pending[pending_count]
        pending[pending_count] = nil
        pending_count = pending_count - 1
        release(slot)
    end
end

-- At lua_close (see lua/qjson/ffi.lua) every document still held goes
-- back too, so leak checkers see nothing lost, and is marked freed first,
-- so code that runs later and reads one gets "document used after free()"
-- instead of freed memory.
qffi.on_close(function()
    while held > 0 do
        local slot = live[held]
        local state = alive[slot]
        if state then
            -- (PENDING gets a field nothing reads.)
            state[PTR] = false
        end
        release(slot)
    end
    pending_count = 0
end)

-- Releases the native document, for this object and every cursor opened
-- from it (at once, or at the next parse when a section is under way);
-- later calls raise instead of touching freed memory.
function Doc:free()
    if getmetatable(self) ~= Doc then
        error(NOT_A_DOCUMENT, 2)
    end
    local state = self[DOC]
    if state[PTR] then
        state[PTR] = false
        if not state[SLOT] then
            -- A small document: its block goes with the collector.
            state[BLOCK] = false
            return
        end
        if idle() then
            release(state[SLOT])
        else
            pending_count = pending_count + 1
            pending[pending_count] = state[SLOT]
            alive[state[SLOT]] = PENDING
        end
        -- Memory given back now needs no collector work to find it.
        local bytes = state[BYTES]
        native_debt = native_debt > bytes and native_debt - bytes or 0
    end
end

-- Bytes of native memory the document holds (itself, its index, lookup
-- tables and scratch), which the garbage collector cannot see.
function Doc:memory()
    local ptr = handle(self)
    if not ptr then return freed(self) end
    local n = tonumber(C.qjson_memory(ptr))
    return n
end

Doc.__tostring = function(self)
    local state = self[DOC]
    return "qjson.doc: " .. (state[PTR] and ("cursor " .. self[AT]) or "freed")
end

-- What every parse does, of a small text too (whose document has no
-- native memory of its own): the first after a collection cycle frees the
-- documents it found dead, and one outside a section those freed during
-- one. (Were small parses to skip it, a worker that parses small texts
-- and now and then a large one would keep the large ones' memory until
-- the next.)
local function free_dead()
    if cycle[1] == nil then
        sweep()
    end
    if pending_count > 0 and idle() then
        release_pending()
    end
end
_M.free_dead = free_dead

-- Sets what each sweep that finds no section under way has the encoder
-- do: give back its buffer's memory that the last cycle did not need
-- (lua/qjson/encode.lua, `trim_buffer`). One function: the encoder's.
function _M.on_sweep(fn)
    trim_encoder = fn
end

-- Puts slots never used before into `free_slots`, as many as there are
-- so far (16 at first), lowest on top. Taking a slot is then the same
-- path every time: a branch between reused and new slots, which
-- alternate with the collector's cycles, kept compiled traces from
-- settling.
local function add_slots()
    local n = slot_count > 16 and slot_count or 16
    for i = n, 1, -1 do
        free_count = free_count + 1
        free_slots[free_count] = slot_count + i
    end
    slot_count = slot_count + n
end

-- Takes charge of a native handle from qjson_parse, at `address` (a Lua
-- number: see `address_of`), whose parse charges the collector `bytes` of
-- native memory: it is freed once `state` (a table whose [PTR] is set to false
-- should lua_close free it first) has been collected; returns its
-- slot. Documents (below) and qjson.decode's proxy states
-- (lua/qjson/lazy.lua) are such states. A small document's handle (its
-- `block` given: nothing native to free) is not tracked: false.
local function track(state, address, bytes, block)
    if block then
        free_dead()
        return false
    end
    if free_count == 0 then
        add_slots()
    end
    local slot = free_slots[free_count]
    free_count = free_count - 1
    handles[slot] = address
    alive[slot] = state
    held = held + 1
    live[held], live_at[slot] = slot, held
    native_debt = native_debt + bytes
    if native_debt >= paced + GC_PACE_BYTES then
        pace()
    end
    free_dead()
    if is_closed() then
        -- Parsed during lua_close, after qjson's cleanup: it runs again.
        qffi.arm()
    end
    return slot
end
_M.track = track

-- A native handle as a Lua number, which a table holds without boxing
-- it (a pointer cdata is an object of its own for the collector); calls
-- cast it back (`ffi.cast(DOC_PTR, address)`), which compiled code does
-- without allocating. User-space addresses fit in a double's 53 bits.
local function address_of(ptr)
    -- Not a tail call: a root trace may not leave through a builtin.
    local address = tonumber(ffi_cast(UINTPTR, ptr))
    return address
end
_M.address_of = address_of

-- Wraps a native handle from qjson_parse, which charges the collector
-- `bytes` of native memory, or a small document's handle and its `block`.
-- `src` is the Lua string (or qjson.sse's string.buffer) the handle
-- borrows, or false when the document owns a copy: keeping it in the state
-- keeps it alive exactly as long as the handle can be read. The root
-- document is its own state (one table per parse); a cursor refers to its
-- root's.
function _M.new(ptr, src, safe, bytes, block)
    -- Every slot is in the constructor, so that setting one does not grow
    -- the table; the handle's address is its [PTR].
    local address = address_of(ptr)
    local root = setmetatable({ address, 0, false, false, bytes, block or false, src, safe }, Doc)
    root[DOC] = root
    root[SLOT] = track(root, address, bytes, block)
    return root
end

-- The number of native documents not yet freed (for tests).
function _M.held()
    return held
end

_M.Doc = Doc
_M.PTR = PTR

return _M
