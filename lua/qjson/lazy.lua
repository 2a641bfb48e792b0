-- Lazy decode: cjson-shaped tables that read the document on demand.
--
-- A proxy is an empty Lua table whose metatable holds everything about
-- it (its document, cursor, cache and changes), so no JSON key can
-- collide with internal fields and
-- `next`, `rawget` or iteration see nothing but data. Values are read
-- from the native index the first time they are asked for and cached;
-- containers come back as proxies of their own, cached too, so
-- `t.messages == t.messages`.
--
-- Writes are recorded per proxy (`set`: the keys or indices assigned,
-- `added`: keys new to an object, in order) and mark the proxy and its
-- ancestors dirty; qjson.encode copies clean subtrees as source bytes and
-- splices only what changed (lua/qjson/encode.lua).

local ffi = require("ffi")
local qffi = require("qjson.ffi")

local C = qffi.C
local value = qffi.value
local scalar = qffi.scalar
local null = qffi.null
local ffi_string = ffi.string
local ffi_new = ffi.new
local setmetatable = setmetatable
local getmetatable = getmetatable
local rawget = rawget
local type = type
local next = next
local tonumber = tonumber
local math_floor = math.floor
local new_tab = require("table.new")

local OK = C.QJSON_OK
local T_FALSE = C.QJSON_TYPE_FALSE
local T_TRUE = C.QJSON_TYPE_TRUE
local T_NUMBER = C.QJSON_TYPE_NUMBER
local T_STRING = C.QJSON_TYPE_STRING
local T_ARRAY = C.QJSON_TYPE_ARRAY
local T_OBJECT = C.QJSON_TYPE_OBJECT

local _M = {}

-- A proxy's state is its metatable: the metamethods plus the document,
-- cursor, cache and changes, marked with IS_PROXY. Keeping it there, and
-- not in a side table keyed by proxy, lets the collector free a dropped
-- tree: LuaJIT marks the values of a weak-keyed table strongly, and a
-- parent's state holds its children, so a side table would keep every
-- proxy it ever saw alive.
local IS_PROXY = {}

-- The state of v if it is a proxy, else nil.
local function state_of(v)
    local mt = getmetatable(v)
    if type(mt) == "table" and rawget(mt, IS_PROXY) then
        return mt
    end
    return nil
end
_M.state_of = state_of

-- Cached in place of a value that was deleted.
local DELETED = setmetatable({}, { __tostring = function() return "qjson.deleted" end })
_M.DELETED = DELETED

-- The metatable cjson (OpenResty's fork) and qjson give arrays that must
-- encode as [] even when empty.
local empty_array_mt = { __name = "qjson.empty_array" }
_M.empty_array_mt = empty_array_mt

local key_cell = ffi_new("qjson_value[1]")
local keys_out = ffi_new("const uint32_t *[1]")
local count_out = ffi_new("size_t[1]")
local items_out = ffi_new("const qjson_item *[1]")

local ObjectMT, ArrayMT = {}, {}

local function new_proxy(doc, cursor, kind, parent)
    local mt = kind == T_OBJECT and ObjectMT or ArrayMT
    local st = { __index = mt.__index, __newindex = mt.__newindex, __len = mt.__len,
                 __pairs = mt.__pairs, __ipairs = mt.__ipairs, [IS_PROXY] = true,
                 doc = doc, cur = cursor, kind = kind, cache = {}, dirty = false,
                 parent = parent }
    local proxy = setmetatable({}, st)
    if kind == T_ARRAY then
        C.qjson_len(doc.ptr, cursor, nil, 0, value)
        local n = tonumber(value[0].len)
        st.n, st.n0 = n, n
    end
    return proxy
end

-- The Lua value for the qjson_value in `cell` (read right after a call).
local function convert(st, cell)
    local v = scalar(cell)
    if v == nil then
        v = new_proxy(st.doc, cell.cursor, cell.type, st)
    end
    return v
end

function ObjectMT.__index(proxy, key)
    local st = getmetatable(proxy)
    local cache = st.cache
    local v = cache[key]
    if v ~= nil then
        if v == DELETED then return nil end
        return v
    end
    if type(key) ~= "string" then return nil end
    if C.qjson_get_key(st.doc.ptr, st.cur, key, #key, value) ~= OK then return nil end
    v = convert(st, value[0])
    cache[key] = v
    return v
end

function ArrayMT.__index(proxy, i)
    local st = getmetatable(proxy)
    local cache = st.cache
    local v = cache[i]
    if v ~= nil then
        if v == DELETED then return nil end
        return v
    end
    if type(i) ~= "number" or i < 1 or i > st.n0 or i ~= math_floor(i) then return nil end
    if C.qjson_get_index(st.doc.ptr, st.cur, i - 1, value) ~= OK then return nil end
    v = convert(st, value[0])
    cache[i] = v
    return v
end

-- Marks st and its ancestors as holding changes.
local function mark_dirty(st)
    while st and not st.dirty do
        st.dirty = true
        st = st.parent
    end
end

-- Whether the object proxy's source has member `key`.
local function in_source(st, key)
    return type(key) == "string" and C.qjson_get_key(st.doc.ptr, st.cur, key, #key, value) == OK
end

function ObjectMT.__newindex(proxy, key, v)
    if key == nil then
        error("table index is nil", 2)
    end
    local st = getmetatable(proxy)
    local set = st.set
    if not set then
        set = {}
        st.set = set
    end
    if not set[key] then
        set[key] = true
        if not in_source(st, key) then
            local added = st.added
            if not added then
                added = {}
                st.added = added
            end
            added[#added + 1] = key
        end
    end
    if v == nil then v = DELETED end
    st.cache[key] = v
    st.len = nil
    mark_dirty(st)
end

function ArrayMT.__newindex(proxy, i, v)
    local st = getmetatable(proxy)
    if type(i) ~= "number" or i < 1 or i ~= math_floor(i) or i > st.n + 1 then
        error("qjson: array index " .. tostring(i) .. " is out of range 1.." .. (st.n + 1)
              .. " (arrays grow by one at the end)", 2)
    end
    local set = st.set
    if not set then
        set = {}
        st.set = set
    end
    set[i] = true
    st.cache[i] = v == nil and DELETED or v
    if v == nil then
        -- Removing the last elements shortens the array; a hole in the
        -- middle stays and encodes as null, as cjson does.
        local n = st.n
        while n > 0 and st.cache[n] == DELETED do
            n = n - 1
        end
        st.n = n
    elseif i > st.n then
        st.n = i
    end
    mark_dirty(st)
end

-- Members of the object proxy's source, as a Lua list of key entries.
local function source_members(st, every)
    local rc = C.qjson_members(st.doc.ptr, st.cur, every and 1 or 0, keys_out, count_out)
    if rc ~= OK then return {} end
    local n = tonumber(count_out[0])
    local list = new_tab(n, 0)
    local keys = keys_out[0]
    for i = 1, n do
        list[i] = keys[i - 1]
    end
    return list
end
_M.source_members = source_members

-- The key and value of the member at key entry `entry`, through the cache.
local function member(st, entry)
    C.qjson_member(st.doc.ptr, entry, key_cell, value)
    local cell = key_cell[0]
    local key = ffi_string(cell.str, cell.len)
    local v = st.cache[key]
    if v == nil then
        v = convert(st, value[0])
        st.cache[key] = v
    end
    return key, v
end

-- Iterates an object proxy: source members in document order (the one
-- "last wins" reads for a repeated key), then added keys in order.
local function object_pairs(proxy)
    local st = getmetatable(proxy)
    local entries = source_members(st, false)
    local i, added_i = 0, 0
    return function()
        while i < #entries do
            i = i + 1
            local key, v = member(st, entries[i])
            if v ~= DELETED then return key, v end
        end
        local added = st.added
        while added and added_i < #added do
            added_i = added_i + 1
            local key = added[added_i]
            local v = st.cache[key]
            if v ~= DELETED and v ~= nil then return key, v end
        end
        return nil
    end
end

local function array_ipairs_step(proxy, i)
    i = i + 1
    local v = proxy[i]
    if v == nil then return nil end
    return i, v
end

-- Iterates an array proxy 1..n; a hole (deleted element) reads as nil
-- and ends ipairs-style iteration, as it would on a plain table.
local function array_pairs(proxy)
    return array_ipairs_step, proxy, 0
end

-- The number of elements, or of distinct keys.
local function proxy_len(st, proxy)
    if st.kind == T_ARRAY then return st.n end
    local n = st.len
    if n then return n end
    if not st.set then
        C.qjson_len(st.doc.ptr, st.cur, nil, 0, value)
        n = tonumber(value[0].len)
    else
        n = 0
        for _ in object_pairs(proxy) do n = n + 1 end
    end
    st.len = n
    return n
end

function ObjectMT.__len(proxy) return proxy_len(getmetatable(proxy), proxy) end
function ArrayMT.__len(proxy) return getmetatable(proxy).n end
ObjectMT.__pairs = object_pairs
ArrayMT.__pairs = array_pairs
ArrayMT.__ipairs = array_pairs
ObjectMT.__ipairs = function() return next, {}, nil end

function _M.is_proxy(v)
    return state_of(v) ~= nil
end

-- qjson.len(v): #v for a plain table, the element or key count of a proxy.
function _M.len(v)
    local st = state_of(v)
    if st then return proxy_len(st, v) end
    return #v
end

function _M.pairs(v)
    local st = state_of(v)
    if st then
        if st.kind == T_OBJECT then return object_pairs(v) end
        return array_pairs(v)
    end
    return next, v, nil
end

function _M.ipairs(v)
    local st = state_of(v)
    if st then
        if st.kind == T_ARRAY then return array_pairs(v) end
        return next, {}, nil
    end
    return ipairs(v)
end

-- Builds plain tables from a tape (see src/navigate/tape.rs) in one pass
-- with an explicit stack: the container on top is filled by a tight loop
-- over its items (scalars inline), which only breaks out to descend into a
-- non-empty child and resumes after it.

-- The value of a scalar item, or a presized empty table for a container
-- item plus its item count.
local function item_value(item)
    local ty = item.type
    if ty == T_STRING then
        return ffi_string(item.str, item.len), 0
    elseif ty == T_NUMBER then
        return item.num, 0
    elseif ty == T_OBJECT then
        return new_tab(0, item.len), item.len
    elseif ty == T_ARRAY then
        local n = item.len
        if n == 0 then
            return setmetatable({}, empty_array_mt), 0
        end
        return new_tab(n, 0), n
    elseif ty == T_TRUE then
        return true, 0
    elseif ty == T_FALSE then
        return false, 0
    end
    return null, 0
end

local function build(items)
    local root, open = item_value(items[0])
    if open == 0 then
        return root
    end
    -- Per open container: the table, the items it still expects, whether
    -- it is an object, and (arrays) the next index to fill.
    local tables, lefts, objects, nexts = { root }, { open }, { items[0].type == T_OBJECT }, { 1 }
    local depth = 1
    local i = 1
    while depth > 0 do
        local t, left = tables[depth], lefts[depth]
        if objects[depth] then
            while left > 0 do
                local key_item = items[i]
                local key = ffi_string(key_item.str, key_item.len)
                local v, n = item_value(items[i + 1])
                i = i + 2
                left = left - 1
                t[key] = v
                if n > 0 then
                    lefts[depth] = left
                    depth = depth + 1
                    tables[depth], lefts[depth], nexts[depth] = v, n, 1
                    objects[depth] = items[i - 1].type == T_OBJECT
                    goto descend
                end
            end
        else
            local at = nexts[depth]
            while left > 0 do
                local v, n = item_value(items[i])
                i = i + 1
                left = left - 1
                t[at] = v
                at = at + 1
                if n > 0 then
                    lefts[depth], nexts[depth] = left, at
                    depth = depth + 1
                    tables[depth], lefts[depth], nexts[depth] = v, n, 1
                    objects[depth] = items[i - 1].type == T_OBJECT
                    goto descend
                end
            end
        end
        depth = depth - 1
        ::descend::
    end
    return root
end

-- Plain tables for the value at cursor of the native document ptr (any
-- value type).
function _M.tape_value(ptr, cursor)
    C.qjson_tape(ptr, cursor, items_out, count_out)
    return build(items_out[0])
end

-- One level of materialize: a copy of v's own entries (children not yet
-- converted) and true, or, for a scalar or an unchanged proxy, the
-- finished value.
local function materialize_level(v)
    local st = state_of(v)
    if st then
        if not st.dirty then
            return _M.tape_value(st.doc.ptr, st.cur)
        end
        if st.kind == T_ARRAY then
            local n = st.n
            local out = new_tab(n, 0)
            for i = 1, n do
                local e = v[i]
                if e == nil then e = null end
                out[i] = e
            end
            if n == 0 then setmetatable(out, empty_array_mt) end
            return out, true
        end
        local out = {}
        for k, e in object_pairs(v) do
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

-- Deep-converts v to plain Lua tables: what cjson.decode gives for the
-- same text (plus empty_array_mt on empty arrays), with any changes made
-- through proxies applied. Depth-first over an explicit stack rather than
-- by recursion, so a tree of any depth converts (a document parsed with a
-- large max_depth, then changed deep down); the tables on the current
-- path are tracked, so one that contains itself raises instead of
-- looping.
local function materialize(v)
    local root, open = materialize_level(v)
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
                    error("qjson: cannot materialize a table that contains itself", 2)
                end
                local converted, children = materialize_level(e)
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
_M.materialize = materialize

-- The proxy (or scalar) for the root of a parsed document.
function _M.root(doc)
    C.qjson_get(doc.ptr, 0, nil, 0, value)
    local cell = value[0]
    local t = cell.type
    if t == T_OBJECT or t == T_ARRAY then
        return new_proxy(doc, 0, t, nil)
    end
    return convert(nil, cell)
end

return _M
