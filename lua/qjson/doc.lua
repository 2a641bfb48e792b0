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
local value = qffi.value
local scalar = qffi.scalar
local ffi_string = ffi.string
local ffi_gc = ffi.gc
local collectgarbage = collectgarbage
local error = error
local type = type
local tonumber = tonumber
local tostring = tostring
local setmetatable = setmetatable

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

local _M = { _VERSION = "0.1.0" }

-- Raises `message` at the level of the caller of the getter, or returns
-- nil, message for documents made by qjson.safe. Getters reach here by
-- tail calls only, which replace their frames: level 2 is their caller.
-- (Not `return error(...)`: a tail call would replace this frame too.)
local function misuse(self, message)
    if self._doc.safe then
        return nil, message
    end
    error(message, 2)
end

-- The native handle of a live document; nil after free().
local function handle(self)
    return self._doc.ptr
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

-- The result of a lookup that did not return QJSON_OK.
local function failure(self, rc, path, wanted)
    if rc == NOT_FOUND then
        return nil
    end
    local v = value[0]
    if rc == TYPE_MISMATCH then
        return nil, "qjson: expected " .. wanted .. " at \"" .. path .. "\", got "
                    .. TYPE_NAMES[v.type]
    elseif rc == OUT_OF_RANGE then
        return nil, "qjson: integer at \"" .. path .. "\" does not fit in int64"
    elseif rc == NOT_INTEGER then
        return nil, "qjson: number at \"" .. path .. "\" is not an integer"
    elseif rc == BAD_PATH then
        return misuse(self, "qjson: invalid path \"" .. path .. "\" at byte "
                            .. tostring(tonumber(v.i64)))
    end
    return misuse(self, "qjson: lookup failed with code " .. rc)
end

local function mismatch(path, wanted, got)
    return nil, "qjson: expected " .. wanted .. " at \"" .. path .. "\", got " .. TYPE_NAMES[got]
end

-- Runs the lookup `fn` for `path` from this cursor. Returns the status.
-- Not a tail call: a trace that tail-calls the C function and returns
-- below its start aborts ("NYI: return to lower frame").
-- (The getters below avoid `return f(...)` of a builtin for the same
-- reason.)
local function lookup(self, fn, path)
    local rc = fn(handle(self), self._at, path, #path, value)
    return rc
end

-- Each getter: validate arguments, one native call, convert.

function Doc:get_str(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "get_str")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_get, p)
    if rc ~= OK then return failure(self, rc, p, "string") end
    local v = value[0]
    if v.type ~= T_STRING then return mismatch(p, "string", v.type) end
    local s = ffi_string(v.str, v.len)
    return s
end

function Doc:get_f64(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "get_f64")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_get, p)
    if rc ~= OK then return failure(self, rc, p, "number") end
    local v = value[0]
    if v.type ~= T_NUMBER then return mismatch(p, "number", v.type) end
    return v.num
end

function Doc:get_i64(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "get_i64")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_get_i64, p)
    if rc ~= OK then return failure(self, rc, p, "number") end
    return value[0].i64
end

function Doc:get_bool(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "get_bool")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_find, p)
    if rc ~= OK then return failure(self, rc, p, "boolean") end
    local t = value[0].type
    if t == T_TRUE then return true end
    if t == T_FALSE then return false end
    return mismatch(p, "boolean", t)
end

-- true for JSON null, false for any other value, nil when missing.
function Doc:is_null(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "is_null")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_find, p)
    if rc ~= OK then return failure(self, rc, p) end
    return value[0].type == T_NULL
end

function Doc:typeof(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "typeof")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_find, p)
    if rc ~= OK then return failure(self, rc, p) end
    return TYPE_NAMES[value[0].type]
end

-- Elements of an array, distinct keys of an object.
function Doc:len(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "len")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_len, p)
    if rc ~= OK then return failure(self, rc, p, "array or object") end
    local n = tonumber(value[0].len)
    return n
end

-- The exact source text of the value.
function Doc:raw(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "raw")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_raw, p)
    if rc ~= OK then return failure(self, rc, p) end
    local v = value[0]
    local s = ffi_string(v.str, v.len)
    return s
end

-- A scalar as a Lua value: string, number, boolean or qjson.null.
function Doc:get(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "get")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_get, p)
    if rc ~= OK then return failure(self, rc, p) end
    local v = scalar(value[0])
    if v ~= nil then return v end
    return nil, "qjson: value at \"" .. p .. "\" is an " .. TYPE_NAMES[value[0].type]
                .. "; read it with open() or qjson.decode()"
end

-- A cursor on the value at path: the same getters, relative to it.
function Doc:open(path)
    if not handle(self) then return freed(self) end
    local p, err = check_path(path, "open")
    if not p then return misuse(self, err) end
    local rc = lookup(self, C.qjson_find, p)
    if rc ~= OK then return failure(self, rc, p) end
    local cursor = setmetatable({ _doc = self._doc, _at = value[0].cursor }, Doc)
    return cursor
end

-- Native lifetimes. A cdata finalizer per document costs LuaJIT about as
-- much as parsing a small document, so documents are freed in sweeps
-- instead: `handles[slot]` owns a document's native pointer and
-- `alive[slot]` (a weak value) its Lua table; once the collector has
-- dropped the table, the next sweep frees the pointer. Nothing reads a
-- native document without holding its table, so a pointer is never used
-- after its sweep. Tables die only when a collection cycle ends, which
-- `cycle[1]` (a weak value nothing else holds) tells: a sweep runs at the
-- first parse after each cycle, so its cost (one visit per slot) is paid
-- once per cycle, like the collector's own.
--
-- The collector cannot see the native memory (index and scratch buffers),
-- so each document counts it as if Lua had allocated it, and every
-- GC_PACE_BYTES the collector does the matching amount of incremental
-- work.
local GC_PACE_BYTES = 1024 * 1024
local native_debt = 0
local handles = {}
local alive = setmetatable({}, { __mode = "v" })
local cycle = setmetatable({ {} }, { __mode = "v" })
local free_slots, free_count = {}, 0
local slot_count, held = 0, 0

local function release(slot)
    local ptr = handles[slot]
    handles[slot] = nil
    alive[slot] = nil
    free_count = free_count + 1
    free_slots[free_count] = slot
    held = held - 1
    C.qjson_free(ptr)
end

local function sweep()
    for slot = 1, slot_count do
        if handles[slot] and alive[slot] == nil then
            release(slot)
        end
    end
    cycle[1] = {}
end

-- At exit (lua_close runs cdata finalizers) every document still held
-- goes back too, so leak checkers see nothing lost. Kept in `handles`, so
-- it lives exactly as long as they do.
handles.exit_guard = ffi_gc(ffi.new("char[1]"), function()
    for slot = 1, slot_count do
        if handles[slot] then
            release(slot)
        end
    end
end)

-- Releases the native document now, for this object and every cursor
-- opened from it; later calls raise instead of touching freed memory.
function Doc:free()
    local state = self._doc
    if state.ptr then
        state.ptr = false
        release(state.slot)
        -- Memory given back now needs no collector work to find it.
        native_debt = native_debt > state.bytes and native_debt - state.bytes or 0
    end
end

Doc.__tostring = function(self)
    local state = self._doc
    return "qjson.doc: " .. (state.ptr and ("cursor " .. self._at) or "freed")
end

-- Wraps a native handle from qjson_parse. `src` is the Lua string the
-- handle borrows: keeping it in the state keeps it alive exactly as long
-- as the handle can be read.
-- The root document is its own state (one table per parse); a cursor
-- refers to its root's.
function _M.new(ptr, src, safe)
    local slot
    if free_count > 0 then
        slot = free_slots[free_count]
        free_count = free_count - 1
    else
        slot_count = slot_count + 1
        slot = slot_count
    end
    -- _doc is in the constructor so that setting it does not grow the table.
    local bytes = tonumber(C.qjson_memory(ptr))
    local root = setmetatable({ ptr = ptr, src = src, safe = safe, _at = 0, _doc = false,
                                slot = slot, bytes = bytes }, Doc)
    root._doc = root
    handles[slot] = ptr
    alive[slot] = root
    held = held + 1
    native_debt = native_debt + bytes
    if native_debt >= GC_PACE_BYTES then
        collectgarbage("step", native_debt / 1024)
        native_debt = 0
    end
    if cycle[1] == nil then
        sweep()
    end
    return root
end

-- The number of native documents not yet freed (for tests).
function _M.held()
    return held
end

_M.Doc = Doc

return _M
