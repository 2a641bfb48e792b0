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
local enter = qffi.enter
local leave = qffi.leave
local scalar = qffi.scalar
local null = qffi.null
local ffi_string = ffi.string
local setmetatable = setmetatable
local getmetatable = getmetatable
local rawget = rawget
local type = type
local next = next
local error = error
local pcall = pcall
local ipairs = ipairs
local tostring = tostring
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

local FREED = "qjson: document used after free()"

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

local ObjectMT, ArrayMT = {}, {}

-- A proxy for the container at `cursor`; `n`, for an array, is its
-- element count.
local function new_proxy(doc, cursor, kind, parent, n)
    local mt = kind == T_OBJECT and ObjectMT or ArrayMT
    local st = { __index = mt.__index, __newindex = mt.__newindex, __len = mt.__len,
                 __pairs = mt.__pairs, __ipairs = mt.__ipairs, [IS_PROXY] = true,
                 doc = doc, cur = cursor, kind = kind, cache = {}, dirty = false,
                 parent = parent, n = n, n0 = n }
    -- Not a tail call: `return setmetatable(...)` ends the trace of a
    -- function that got one of its own ("leaving loop in root trace").
    local proxy = setmetatable({}, st)
    return proxy
end

-- The Lua value for the qjson_value `cell` a read of `doc` just filled;
-- a container becomes a proxy whose parent has state `parent`.
local function convert(doc, parent, cell)
    local v = scalar(cell)
    if v == nil then
        local t = cell.type
        v = new_proxy(doc, cell.cursor, t, parent, t == T_ARRAY and tonumber(cell.len) or nil)
    end
    return v
end

-- The native document of a proxy, or nil once it was freed.
local function doc_ptr(st)
    return st.doc.ptr
end

-- Reads member `key` (a string) or element `i` (a number) of the proxy
-- with state st from its source, through reader R, and caches it; nil
-- when there is none. The caller checked the cache and holds a section.
local function fetch(st, ptr, k, R)
    local rc
    if st.kind == T_OBJECT then
        if type(k) ~= "string" then return nil end
        rc = C.qjson_get_key(ptr, st.cur, k, #k, R)
    else
        if type(k) ~= "number" or k < 1 or k > st.n0 or k ~= math_floor(k) then return nil end
        rc = C.qjson_get_index(ptr, st.cur, k - 1, R)
    end
    if rc ~= OK then return nil end
    local v = convert(st.doc, st, R.value)
    st.cache[k] = v
    return v
end

-- Member or element k of a proxy, inside reader R's section (for code
-- that already holds one: encode, materialize).
local function get(st, k, R)
    local v = st.cache[k]
    if v ~= nil then
        if v == DELETED then return nil end
        return v
    end
    local ptr = doc_ptr(st)
    if not ptr then error(FREED, 0) end
    return fetch(st, ptr, k, R)
end
_M.get = get

local function proxy_index(proxy, k)
    local st = getmetatable(proxy)
    local v = st.cache[k]
    if v ~= nil then
        if v == DELETED then return nil end
        return v
    end
    local ptr = doc_ptr(st)
    if not ptr then error(FREED, 2) end
    local R = enter()
    v = fetch(st, ptr, k, R)
    leave(R)
    return v
end
ObjectMT.__index = proxy_index
ArrayMT.__index = proxy_index

-- Marks st and its ancestors as holding changes.
local function mark_dirty(st)
    while st and not st.dirty do
        st.dirty = true
        st = st.parent
    end
end

-- Whether the object proxy's source has member `key`.
local function in_source(st, key)
    if type(key) ~= "string" then return false end
    local ptr = doc_ptr(st)
    if not ptr then error(FREED, 3) end
    local R = enter()
    local found = C.qjson_get_key(ptr, st.cur, key, #key, R) == OK
    leave(R)
    return found
end

function ObjectMT.__newindex(proxy, key, v)
    if key == nil then
        error("table index is nil", 2)
    end
    local st = getmetatable(proxy)
    local cache = st.cache
    local old = cache[key]
    local set = st.set
    if not set then
        set = {}
        st.set = set
    end
    -- Whether the key has a value now (for the count of keys).
    local had = old ~= nil and old ~= DELETED
    if not set[key] then
        set[key] = true
        -- A value read before came from the source.
        local in_src = old ~= nil or in_source(st, key)
        had = had or in_src
        if not in_src then
            local added = st.added
            if not added then
                added = {}
                st.added = added
            end
            added[#added + 1] = key
        end
    end
    if v == nil then v = DELETED end
    cache[key] = v
    local len = st.len
    if len then
        st.len = len + (v ~= DELETED and 1 or 0) - (had and 1 or 0)
    end
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

-- The native document of a proxy, raising once it was freed (for code
-- whose sections leave on errors: encode, materialize).
local function live_ptr(st)
    local ptr = doc_ptr(st)
    if not ptr then error(FREED, 0) end
    return ptr
end
_M.live_ptr = live_ptr

-- Members of the object proxy's source (document ptr), as a Lua list of
-- key entries, through reader R.
local function source_members(st, ptr, every, R)
    if C.qjson_members(ptr, st.cur, every and 1 or 0, R) ~= OK then return {} end
    local n = tonumber(R.count)
    local list = new_tab(n, 0)
    local keys = R.keys
    for i = 1, n do
        list[i] = keys[i - 1]
    end
    return list
end
_M.source_members = source_members

-- The key and value of the member at key entry `entry` of the proxy's
-- document ptr, through the cache and reader R.
local function member(st, ptr, entry, R)
    C.qjson_member(ptr, entry, R)
    local cell = R.key
    local key = ffi_string(cell.str, cell.len)
    local v = st.cache[key]
    if v == nil then
        v = convert(st.doc, st, R.value)
        st.cache[key] = v
    end
    return key, v
end

-- Iterates the object proxy with state st: source members in document
-- order (the one "last wins" reads for a repeated key), then added keys
-- in order. Reads go through reader R when the caller holds a section
-- (encode, materialize); without R, each read is a section of its own.
local function object_iter(st, R)
    local ptr = doc_ptr(st)
    if not ptr then error(FREED, 3) end
    local r = R or enter()
    local entries = source_members(st, ptr, false, r)
    if not R then leave(r) end
    local i, added_i = 0, 0
    return function()
        while i < #entries do
            i = i + 1
            ptr = doc_ptr(st)
            if not ptr then error(FREED, 2) end
            r = R or enter()
            local key, v = member(st, ptr, entries[i], r)
            if not R then leave(r) end
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

local function object_pairs(proxy)
    return object_iter(getmetatable(proxy))
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

-- The number of elements, or of distinct keys: counted once (natively
-- while nothing was written, else by iterating), then kept up to date by
-- every write.
local function proxy_len(st, proxy)
    if st.kind == T_ARRAY then return st.n end
    local n = st.len
    if n then return n end
    if not st.set then
        local ptr = doc_ptr(st)
        if not ptr then error(FREED, 3) end
        local R = enter()
        C.qjson_len(ptr, st.cur, nil, 0, R)
        n = tonumber(R.value.len)
        leave(R)
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

-- Per open container: the table, the items it still expects, whether it
-- is an object, and (arrays) the next index to fill. The shared reader's
-- section reuses one set (no tables made per document); a section inside
-- another (a finalizer decoding) makes its own.
local main_stacks = { {}, {}, {}, {} }

local function build(items, stacks)
    local root, open = item_value(items[0])
    if open == 0 then
        return root
    end
    local tables, lefts, objects, nexts = stacks[1], stacks[2], stacks[3], stacks[4]
    tables[1], lefts[1], objects[1], nexts[1] = root, open, items[0].type == T_OBJECT, 1
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
        -- (Let the collector have the table.)
        tables[depth] = nil
        depth = depth - 1
        ::descend::
    end
    return root
end

-- Plain tables for the value at cursor of the native document ptr (any
-- value type), through reader R.
local function tape_value(ptr, cursor, R)
    C.qjson_tape(ptr, cursor, R)
    local v = build(R.items, R == qffi.main and main_stacks or { {}, {}, {}, {} })
    return v
end
_M.tape_value = tape_value

-- One level of materialize, through reader R: a copy of v's own entries
-- (children not yet converted) and true, or, for a scalar or an
-- unchanged proxy, the finished value.
local function materialize_level(v, R)
    local st = state_of(v)
    if st then
        if not st.dirty then
            return tape_value(live_ptr(st), st.cur, R)
        end
        if st.kind == T_ARRAY then
            local n = st.n
            local out = new_tab(n, 0)
            for i = 1, n do
                local e = get(st, i, R)
                if e == nil then e = null end
                out[i] = e
            end
            if n == 0 then setmetatable(out, empty_array_mt) end
            return out, true
        end
        local out = {}
        for k, e in object_iter(st, R) do
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
local function materialize_tree(v, R)
    local root, open = materialize_level(v, R)
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
                    error("qjson: cannot materialize a table that contains itself", 0)
                end
                local converted, children = materialize_level(e, R)
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
-- empty_array_mt on empty arrays), with any changes made through proxies
-- applied. One section for the whole tree.
function _M.materialize(v)
    local R = enter()
    local ok, out = pcall(materialize_tree, v, R)
    leave(R)
    if not ok then
        error(out, 2)
    end
    return out
end

-- The proxy (or scalar) for the root of a parsed document.
function _M.root(doc)
    local R = enter()
    C.qjson_get(doc.ptr, 0, nil, 0, R)
    local v = convert(doc, nil, R.value)
    leave(R)
    return v
end

return _M
