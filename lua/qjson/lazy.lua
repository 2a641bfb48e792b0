-- Lazy decode: cjson-shaped tables that read the document on demand.
--
-- A proxy is an empty Lua table. What qjson knows about it lives in its
-- metatable, which every proxy of one document shares: the document's
-- *state*. Its fields are nine array slots, which LuaJIT allocates
-- with the table itself (named fields and a separate registry table cost
-- about 1000 more instructions of allocation and collection for a small
-- document and one read of a container in it):
--
--   [PTR]         the native document's address (see lua/qjson/doc.lua),
--                 false once freed
--   [SRC]         the text, which the native document borrows: a Lua
--                 string; or, for a text given as a pointer (qjson.decode
--                 of a pointer and a length, qjson.decode_body), a
--                 qjson_value cdata whose `str` and `len` are the copy
--                 the native document made and owns (see `source`)
--   [ROOT_REC]    the root proxy's change record, false before its
--                 first write
--   [CHANGES]     the other proxies' change records, false before the
--                 first of them, then that record alone, then a table
--                 of them (see `record`)
--   [EDITS]       the edits made from them, false until asked for
--   [CHILD], [CHILD_CODE]
--                 the first proxy made for a container inside the root,
--                 and its code; once a fifth one is made, the
--                 registry's proxy-to-code table and its room (see
--                 "The registry" below)
--   [REG]         false until a second proxy is made; then the list of
--                 the second to fourth proxies and their codes; from the
--                 fifth, the registry's code-to-proxy table
--   [BLOCK]       the cdata holding a small text's block, which names
--                 its document (see `parse_small` in lua/qjson.lua),
--                 false for a document of its own (tracked by
--                 lua/qjson/doc.lua)
--
-- and its hash part holds the metamethods and nothing else. LuaJIT sizes
-- a hash part in powers of two, so under Lua 5.2 compatibility, where
-- the state carries __len, __pairs and __ipairs too, a fifth field
-- doubles it to eight slots, the largest part of what a small decode
-- allocates (`benches/heap_pacing.lua` prints it). So a text without a
-- '[' gets no __ipairs (an object proxy has no elements for ipairs to
-- see, with or without it), and the root proxy's code is found from the
-- text's first byte (`root_code`) rather than kept: as a ninth array slot
-- it made LuaJIT 2.1-20230119 abort the trace of a loop that decodes and
-- reads ("persistent type instability"); only a text that starts with
-- whitespace has it kept, in a weak table beside the states (`SPACED`). A state's registry is what
-- makes a container read twice the same table
-- (`t.messages == t.messages`). No JSON key can collide with internal
-- fields, and `next`, `rawget` or iteration see nothing but data. State
-- and proxies refer to each other only, so the collector frees a dropped
-- document's proxies and state together.
--
-- Every state has the same slots from the start (none is ever added),
-- so compiled code that reads one works for every document's; change
-- records likewise keep the fields they are made with.
--
-- Scalars are read from the native index each time they are asked for
-- (one call, which also brings the type), never cached: a cache table per
-- proxy cost more than the reads it saved.
--
-- Writes: the first write to a proxy gives it a change record (see
-- "Change records" below); qjson.encode and qjson.materialize turn
-- the records into edits of the source text (lua/qjson/edits.lua).

local ffi = require("ffi")
local qffi = require("qjson.ffi")
local docs = require("qjson.doc")

local C = qffi.C
local track = docs.track
local free_dead = docs.free_dead
local address_of = docs.address_of
local enter = qffi.enter
local leave = qffi.leave
local null = qffi.null
local ffi_string = ffi.string
local ffi_cast = ffi.cast
local setmetatable = setmetatable
local getmetatable = getmetatable
local rawget = rawget
local rawequal = rawequal
local type = type
local next = next
local error = error
local ipairs = ipairs
local tostring = tostring
local tonumber = tonumber
local str_byte = string.byte
local str_find = string.find
local math_floor = math.floor
local new_tab = require("table.new")

local OK = C.QJSON_OK
local T_NULL = C.QJSON_TYPE_NULL
local T_FALSE = C.QJSON_TYPE_FALSE
local T_TRUE = C.QJSON_TYPE_TRUE
local T_NUMBER = C.QJSON_TYPE_NUMBER
local T_STRING = C.QJSON_TYPE_STRING
local T_ARRAY = C.QJSON_TYPE_ARRAY
local T_OBJECT = C.QJSON_TYPE_OBJECT

-- JSON's whitespace, the bytes a text may start with before its value,
-- and the bytes that open a container.
local SPACE, TAB, LF, CR = 32, 9, 10, 13
local OPEN_OBJECT, OPEN_ARRAY = 123, 91

-- Arrays hold fewer elements than a text (under 4 GiB) has bytes.
local MAX_INDEX = 2 ^ 32

local FREED = "qjson: document used after free()"

local char_ptr = ffi.typeof("const char *")
local DOC_PTR = ffi.typeof("qjson_doc *")

local _M = {}

-- The slots of a state (see the top of the file).
local PTR = docs.PTR
local SRC, CHANGES, EDITS, REG, CHILD, CHILD_CODE, ROOT_REC = 2, 3, 4, 5, 6, 7, 8
_M.SRC, _M.CHANGES, _M.EDITS, _M.ROOT_REC, _M.CHILD = SRC, CHANGES, EDITS, ROOT_REC, CHILD

-- Stored in a change record for a value that was deleted.
local DELETED = setmetatable({}, { __tostring = function() return "qjson.deleted" end })
_M.DELETED = DELETED

-- The metatable cjson (OpenResty's fork) and qjson give arrays that must
-- encode as [] even when empty.
local empty_array_mt = { __name = "qjson.empty_array" }
_M.empty_array_mt = empty_array_mt

-- A proxy's code says where its container is: its cursor plus SPAN times
-- its nesting depth (0 for the root), negated minus one for an array. The
-- encoder's depth limit needs the depth, and a proxy learns it from its
-- parent for free. Depths from DEEP on are kept as DEEP, so that a code
-- stays an exact double (below 2^53, where a max_depth of up to 2^31 - 1
-- would not fit), and the exact depth of such a proxy is kept beside its
-- state in DEEP_DEPTHS (by cursor), learnt from its parent's there as the
-- proxy is reached: no write, encode or materialize at any depth costs a
-- pass over the document. DEEP is low enough that the 100 000-level
-- documents of spec/limits_spec.lua take that path.
local SPAN = 2 ^ 32
local DEEP = 2 ^ 16 - 1
local DEEP_DEPTHS = setmetatable({}, { __mode = "k" })

local function cursor_of(code)
    if code < 0 then code = -1 - code end
    return code % SPAN
end
_M.cursor_of = cursor_of

-- The depth in a code, or false from DEEP on.
local function depth_in(code)
    if code < 0 then code = -1 - code end
    local d = math_floor(code / SPAN)
    return d < DEEP and d
end
_M.depth_in = depth_in

-- The registry.
--
-- A document's first proxy below the root is kept in two slots, [CHILD]
-- and [CHILD_CODE]. The next LISTED go to a list in [REG], code and proxy
-- in turn, its free pairs false: one allocation, with no hash part (an
-- allocation of its own) and no hashing, for the few proxies a handler
-- of a small document makes (`t.choices[1].delta` of a streamed event is
-- three). A list's [1] is a code; a code-to-proxy table has no key 1 (a
-- code below the root is at least SPAN or negative), which tells them
-- apart. With the proxy after those, the document gets a registry of its
-- proxies below the root, both ways, and [CHILD] and [CHILD_CODE] change
-- meaning: [REG] maps codes to proxies, [BY_PROXY] (what was [CHILD])
-- proxies to codes, and [ROOM] (what was [CHILD_CODE]) counts the
-- proxies that fit before the tables must grow. No code equals a room,
-- so `proxy_at`'s check of [CHILD_CODE] needs no look at which meaning
-- holds.
--
-- The registry's two tables have room for four times the proxies they
-- hold when made, and move to new ones of four times the proxies they
-- hold whenever they fill, up to tables of BIG_REGISTRY slots; from there
-- on, to twice. Left to itself LuaJIT grows a table by doubling,
-- rehashing every entry each time, which cost a loop reading
-- `m[i].content[1].text` over a thousand messages more than everything
-- else it did. Past LuaJIT's allocator's threshold for mapping memory of
-- its own (128 KB, page faults on every use) growing by four would only
-- add slack: two tables of 24-byte slots then hold a proxy in at most 96
-- bytes, as the one table LuaJIT doubled did. Growth stays amortised
-- constant work per proxy.
--
-- The registry's tables are weak both ways: a proxy nothing else holds
-- may be collected with its entries, and a later read of its container
-- makes a new one. Identity holds for every proxy still held (one cannot
-- compare a proxy one no longer has), and a proxy with a change record is
-- held by the record. A loop over 100 000 messages reading
-- `m[i].content[1].text` otherwise kept all 300 000 proxies and their
-- entries alive, in tables far larger than the caches: `make bench`'s
-- "access 100k" row read at 0.56x cjson's fork, and at 1.35x weak
-- (docs/architecture.md). A room does not count the entries the
-- collector removed; a move counts what is left, and always makes room
-- for MIN_MOVED more. The list stays strong: it holds three proxies at
-- most, and a weak table costs a metatable and the collector's atomic
-- phase a pass over it.
local BY_PROXY, ROOM = CHILD, CHILD_CODE
local LISTED = 3
local BIG_REGISTRY = 4096
local MIN_MOVED = 8
local WEAK = { __mode = "kv" }

-- Gives state st a registry of two new tables with room for `size`
-- proxies, of which it will hold `n`; returns them, code-to-proxy first.
local function new_tables(st, size, n)
    local by_code = setmetatable(new_tab(0, size), WEAK)
    local by_proxy = setmetatable(new_tab(0, size), WEAK)
    st[REG], st[BY_PROXY], st[ROOM] = by_code, by_proxy, size - n
    return by_code, by_proxy
end

-- Gives state st, whose [CHILD] and full list hold 1 + LISTED proxies, a
-- registry holding them. (No loop: run once a call in a handler's trace,
-- a loop left it, as put_one_key in lua/qjson/encode.lua says.)
local function new_registry(st, list)
    local first, code = st[CHILD], st[CHILD_CODE]
    local by_code, by_proxy = new_tables(st, 4 * (1 + LISTED), 1 + LISTED)
    by_code[code], by_proxy[first] = first, code
    by_code[list[1]], by_proxy[list[2]] = list[2], list[1]
    by_code[list[3]], by_proxy[list[4]] = list[4], list[3]
    by_code[list[5]], by_proxy[list[6]] = list[6], list[5]
    return by_code
end

-- Moves the full registry of state st to two new tables with room for
-- more than it holds (larger ones, unless the collector emptied it);
-- returns the new code-to-proxy table.
local function grow_registry(st)
    local by_proxy = st[BY_PROXY]
    local n = 0
    for _ in next, by_proxy do n = n + 1 end
    local size = 4 * n <= BIG_REGISTRY and 4 * n or 2 * n
    if size < n + MIN_MOVED then
        -- The collector may have left (next to) nothing.
        size = n + MIN_MOVED
    end
    local new_by_code, new_by_proxy = new_tables(st, size, n)
    for proxy, code in next, by_proxy do
        new_by_code[code], new_by_proxy[proxy] = proxy, code
    end
    return new_by_code
end

-- The code (without its array sign) of the container at `cursor`,
-- `depth` levels deep from DEEP on, in the document with state st, a
-- member or element of the one at parent_cursor: its exact depth noted in
-- DEEP_DEPTHS, from its parent's past DEEP.
local function deep_code(st, cursor, parent_cursor, depth)
    local depths = DEEP_DEPTHS[st]
    if not depths then
        depths = {}
        DEEP_DEPTHS[st] = depths
    end
    if depth > DEEP then depth = depths[parent_cursor] + 1 end
    depths[cursor] = depth
    return DEEP * SPAN + cursor
end

-- The proxy for the container at `cursor` of type `t` in the document
-- with state st, a member or element of the proxy with code `parent`: the
-- one made before, or a new one.
local function proxy_at(st, cursor, t, parent)
    if parent < 0 then parent = -1 - parent end
    local depth = math_floor(parent / SPAN) + 1
    local c = depth < DEEP and depth * SPAN + cursor
              or deep_code(st, cursor, parent % SPAN, depth)
    if t ~= T_OBJECT then c = -1 - c end
    if st[CHILD_CODE] == c then return st[CHILD] end
    local reg = st[REG]
    local p
    if reg then
        if reg[1] then
            -- The list (its free pairs' false equals no code).
            p = reg[1] == c and reg[2] or reg[3] == c and reg[4] or reg[5] == c and reg[6]
        else
            p = reg[c]
        end
    end
    if not p then
        -- Not a tail call: `return setmetatable(...)` ends the trace of a
        -- function that got one of its own ("leaving loop in root trace").
        p = setmetatable({}, st)
        if not reg then
            if not st[CHILD] then
                st[CHILD], st[CHILD_CODE] = p, c
                return p
            end
            reg = new_tab(2 * LISTED, 0)
            reg[1], reg[2], reg[3], reg[4], reg[5], reg[6] = c, p, false, false, false, false
            st[REG] = reg
            return p
        end
        if reg[1] then
            if not reg[3] then
                reg[3], reg[4] = c, p
                return p
            elseif not reg[5] then
                reg[5], reg[6] = c, p
                return p
            end
            reg = new_registry(st, reg)
        end
        local room = st[ROOM]
        if room == 0 then
            reg = grow_registry(st)
            room = st[ROOM]
        end
        st[ROOM] = room - 1
        reg[c] = p
        st[BY_PROXY][p] = c
    end
    return p
end

-- Where the text src (a state's [SRC]) starts, and its length.
local function source(src)
    if type(src) == "string" then
        return ffi_cast(char_ptr, src), #src
    end
    return src.str, tonumber(src.len)
end
_M.source = source

-- The byte at position i (1-based) of the text at `base`, or the first
-- after it in direction `step` (1 or -1) when it is whitespace, and that
-- byte's position.
local function byte_from(base, i, step)
    local b = base[i - 1]
    while b == SPACE or b == TAB or b == LF or b == CR do
        i = i + step
        b = base[i - 1]
    end
    return b, i
end

-- The first byte of the text src (a state's [SRC]).
local function lead_byte(src)
    local b
    if type(src) == "string" then
        -- Not a tail call: a root trace may not leave through a builtin.
        b = str_byte(src, 1)
    else
        b = src.str[0]
    end
    return b
end

-- The byte that starts the value of the valid JSON text src (a state's
-- [SRC]): its first that is not whitespace; and whether whitespace comes
-- before it.
local function first_byte(src)
    local b = lead_byte(src)
    if b == SPACE or b == TAB or b == LF or b == CR then
        if type(src) == "string" then
            b = str_byte(src, (str_find(src, "[^ \t\n\r]")))
        else
            b = byte_from(src.str, 1, 1)
        end
        return b, true
    end
    return b, false
end

-- The last byte of the text src (a state's [SRC]) at or before position
-- i that is not whitespace, and its position: where the last value of a
-- container ends when i is just before its closing byte (an empty one's
-- opening byte, OPEN_OBJECT or OPEN_ARRAY, when it has none).
local function last_byte(src, i)
    if type(src) ~= "string" then
        return byte_from(src.str, i, -1)
    end
    local b = str_byte(src, i)
    while b == SPACE or b == TAB or b == LF or b == CR do
        i = i - 1
        b = str_byte(src, i)
    end
    return b, i
end
_M.last_byte = last_byte
_M.OPEN_OBJECT = OPEN_OBJECT

-- The root proxies' codes of the states whose text starts with
-- whitespace, set by `_M.root`, which finds the root's first byte once.
-- Found again past the whitespace at every read of the root proxy, a loop
-- over n keys of a root after n bytes of whitespace was quadratic (4x the
-- size took 16x the time). Weak: a state goes with its document.
local SPACED = setmetatable({}, { __mode = "k" })

-- The root proxy's code of state st: 0 for an object, -1 for an array
-- (kept in the state only for a text that starts with whitespace: a field
-- of its own made each state larger, see the top of the file).
local function root_code(st)
    local b = lead_byte(st[SRC])
    if b == OPEN_OBJECT then
        return 0
    elseif b == OPEN_ARRAY then
        return -1
    end
    return SPACED[st]
end

-- Whether `code` is a root proxy's (a child's code holds its depth).
local function is_root(code)
    return code == 0 or code == -1
end
_M.is_root = is_root

-- The code of a proxy of state st.
local function code_of(st, proxy)
    local code
    local reg = st[REG]
    if reg and not reg[1] then
        code = st[BY_PROXY][proxy]
    elseif proxy == st[CHILD] then
        code = st[CHILD_CODE]
    elseif reg then
        -- The list (no proxy equals a free pair's false).
        code = reg[2] == proxy and reg[1] or reg[4] == proxy and reg[3]
               or reg[6] == proxy and reg[5] or nil
    end
    return code or root_code(st)
end

-- The Lua value for the qjson_value `cell` a read of st's document just
-- filled, inside the proxy with code `parent`: a scalar, or the proxy of
-- a container.
local function value_of(st, cell, parent)
    local t = cell.type
    if t == T_STRING then
        -- Not a tail call: a trace may not return below its start.
        local s = ffi_string(cell.str, cell.len)
        return s
    elseif t == T_NUMBER then
        return cell.num
    elseif t == T_TRUE then
        return true
    elseif t == T_FALSE then
        return false
    elseif t == T_NULL then
        return null
    end
    local p = proxy_at(st, cell.cursor, t, parent)
    return p
end

-- Reads member `k` of the object, or element `k` of the array, whose
-- proxy has `code` in the document ptr of state st, through reader R; nil
-- when there is none. No caching: see the top of the file.
local function fetch(st, ptr, code, k, R)
    local rc
    if code >= 0 then
        if type(k) ~= "string" then return nil end
        rc = C.qjson_get_key(ptr, code % SPAN, k, #k, R)
    else
        if type(k) ~= "number" or k < 1 or k > MAX_INDEX or k ~= math_floor(k) then
            return nil
        end
        rc = C.qjson_get_index(ptr, (-1 - code) % SPAN, k - 1, R)
    end
    if rc ~= OK then return nil end
    local v = value_of(st, R.value, code)
    return v
end

-- Change records.
--
-- A proxy's first write gives it a record: one table whose slots below
-- FIELDS say what the record is about, and whose other entries are what
-- was written. Every table a change makes costs it an allocation, a free
-- and the collector's visits (a rewritten tool call made four, against
-- cjson's two tables for the whole document), so a record is one table,
-- made with array room for its slots and a first write, and no hash part
-- (an allocation of its own; docs/benchmarks.md, "One table, no hash
-- part", has what dropping it gained):
--
--   [R_CODE], [R_DEPTH]  the proxy's code and nesting depth
--   [R_PROXY]            the proxy; false in the root's record
--   [R_N]                an array's current element count; an object's
--                        count of keys once asked for, false until then
--   [R_N0]               an array's source element count
--   [R_FIRST]            (the same slot) an object's value for the first
--                        key written, when a string; false before it
--   [R_ADDED]            how many keys the source lacks were written
--   [R_SIMPLE]           true while every write to the object replaced a
--                        member whose key the source does not repeat: the
--                        encoder then needs nothing but the triples below
--   [R_OTHER]            an object's values for keys that are not
--                        strings, false before the first
--
-- From FIELDS + 1 on, an array's record holds element k's value at
-- FIELDS + k; an object's lists a triple per key written, in the order
-- first written: where its value is in the source (start, end) and the
-- key, or false, false and the key for a key the source lacks. An
-- object's value for the key of its first triple, when a string, is
-- [R_FIRST], so that the one write of a gateway's rewrite fills no hash
-- part; its values for other string keys are the record's own string
-- keys (no slot is a string). A deleted value is DELETED.
--
-- The root's record is the state's [ROOT_REC]. The first other proxy's
-- record is `st[CHANGES]` itself; with a second, `st[CHANGES]` maps
-- proxies other than the root to their records and lists them (1..n), so
-- that going over them is a numeric loop, which compiles. A record's
-- R_CODE slot is a number, a map's first entry a record: `is_record`
-- tells them apart. Every write drops the document's edits
-- (`st[EDITS]`), made again when next needed.
local R_CODE, R_DEPTH, R_PROXY, R_N, R_N0, R_ADDED, R_SIMPLE, R_OTHER = 1, 2, 3, 4, 5, 6, 7, 8
local R_FIRST = R_N0
local FIELDS = 8
_M.R_CODE, _M.R_DEPTH, _M.R_N, _M.R_N0, _M.R_ADDED, _M.R_SIMPLE = R_CODE, R_DEPTH, R_N, R_N0,
                                                                  R_ADDED, R_SIMPLE
_M.FIELDS = FIELDS

-- Whether t (st[CHANGES]) is a lone record rather than a map of them.
local function is_record(t)
    return type(t[R_CODE]) == "number"
end
_M.is_record = is_record

-- The change record of the proxy with `code` of state st, or a false
-- value.
local function record_of(st, proxy, code)
    if is_root(code) then
        return st[ROOT_REC]
    end
    local changes = st[CHANGES]
    -- (A map's R_PROXY entry is a record, never a proxy.)
    if not changes or changes[R_PROXY] == proxy then
        return changes
    end
    -- (A record has no proxy keys: nil for any other proxy.)
    return changes[proxy]
end
_M.record_of = record_of

-- The value object record rec holds for key k, or nil.
local function object_value(rec, k)
    if type(k) == "string" then
        if k == rec[FIELDS + 3] then
            return rec[R_FIRST]
        end
        return rec[k]
    end
    local other = rec[R_OTHER]
    if other then
        return other[k]
    end
    return nil
end
_M.object_value = object_value

-- Records v for key k in object record rec.
local function set_object_value(rec, k, v)
    if type(k) == "string" then
        if k == rec[FIELDS + 3] then
            rec[R_FIRST] = v
        else
            rec[k] = v
        end
        return
    end
    local other = rec[R_OTHER]
    if not other then
        other = new_tab(0, 1)
        rec[R_OTHER] = other
    end
    other[k] = v
end

-- The first key the source lacks written to object record rec after the
-- triple at position j: its triple's position and the key, or nil. Keys
-- in write order: `for j, key in next_added, rec, ADDED_START do`.
local function next_added(rec, j)
    for p = j + 3, #rec, 3 do
        if not rec[p] then
            return p, rec[p + 2]
        end
    end
    return nil
end
_M.next_added = next_added
-- (The position before the first triple.)
local ADDED_START = FIELDS + 1 - 3
_M.ADDED_START = ADDED_START

-- A proxy's raw table is empty, and only raw access (rawset,
-- table.insert) writes there, past the metatable: a change no record
-- holds, which the encoder would leave out (`table.insert(body.messages,
-- msg)`, then `qjson.encode(body)`, wrote the body without msg).
-- (table.remove and table.sort see an empty table and change nothing,
-- which nothing can tell from not calling them.) So the encoder and
-- materialize refuse a proxy with anything in its raw table and, for a
-- document's root, any proxy of that document still alive
-- (`raw_written`): at most one per container of the text, which
-- encoding the root may copy anyway. Another proxy checks itself alone,
-- so that encoding each message of a list costs each its own size, and a
-- write into a proxy below it goes unseen there; so does one into a
-- proxy the collector took, gone with what was written into it (reads
-- make a new one, as if nothing was written).
_M.RAW_WRITTEN = "a decoded table was changed past its metatable (rawset, table.insert); "
                 .. "decode with lazy = false for code that does that"

-- Whether raw access wrote into a proxy below the root of the document
-- with state st (see above).
local function raw_written_below(st)
    -- (No proxy below the root, the usual case for a small text: one load.)
    local child = st[CHILD]
    if not child then return false end
    local reg = st[REG]
    if reg and not reg[1] then
        -- The registry (see above): [CHILD] is its proxy-to-code table.
        for p in next, child do
            if next(p) ~= nil then return true end
        end
        return false
    end
    if next(child) ~= nil then return true end
    if reg then
        -- The list: proxies in its even slots, false where free.
        for i = 2, 2 * LISTED, 2 do
            local p = reg[i]
            if p and next(p) ~= nil then return true end
        end
    end
    return false
end

_M.raw_written_below = raw_written_below

-- Whether raw access wrote into proxy v (code `code`) of state st or, v
-- being its document's root, into a proxy below it (see above).
function _M.raw_written(st, v, code)
    return next(v) ~= nil or is_root(code) and raw_written_below(st)
end

-- Whether any proxy of state st has a change record.
function _M.has_changes(st)
    return (st[ROOT_REC] or st[CHANGES]) and true or false
end

-- What proxy's change record says about key or index k: the value
-- written (nil for a deleted one) and true, or nothing when k is as in
-- the source.
local function written(rec, code, k)
    local v
    if code >= 0 then
        v = object_value(rec, k)
    elseif type(k) == "number" and k >= 1 then
        if k > rec[R_N] then
            -- Cut off by deletions at the end.
            return nil, true
        end
        v = rec[FIELDS + k]
    end
    if not rawequal(v, nil) then
        if rawequal(v, DELETED) then return nil, true end
        return v, true
    end
    return nil, false
end

-- Member or element k of the proxy (code `code`) of state st, inside
-- reader R's section (for code that already holds one: encode,
-- materialize).
local function get(st, proxy, code, k, R)
    local rec = record_of(st, proxy, code)
    if rec then
        local v, done = written(rec, code, k)
        if done then return v end
    end
    local address = st[PTR]
    if not address then error(FREED, 0) end
    local v = fetch(st, ffi_cast(DOC_PTR, address), code, k, R)
    return v
end
_M.get = get

local function proxy_index(proxy, k)
    local st = getmetatable(proxy)
    local code = code_of(st, proxy)
    local rec = record_of(st, proxy, code)
    if rec then
        local v, done = written(rec, code, k)
        if done then return v end
    end
    local address = st[PTR]
    if not address then error(FREED, 2) end
    local R = enter()
    local v = fetch(st, ffi_cast(DOC_PTR, address), code, k, R)
    leave(R)
    return v
end

-- The native document of a state, raising once it was freed (for code
-- whose sections leave on errors: encode, materialize).
local function live_ptr(st)
    local address = st[PTR]
    if not address then error(FREED, 0) end
    -- Not a tail call: a builtin's ends the trace of a function that got
    -- one of its own ("leaving loop in root trace").
    local ptr = ffi_cast(DOC_PTR, address)
    return ptr
end
_M.live_ptr = live_ptr

-- Where the source text that the qjson_value v holds (filled by
-- qjson_raw or qjson_raw_key) starts and ends in the text of state st, as
-- byte offsets.
local function span_in(st, v)
    local start = tonumber(v.str - (source(st[SRC])))
    return start, start + tonumber(v.len)
end

-- Where the source text of the value at cursor in the document of state
-- st starts and ends, as byte offsets.
local function source_span(st, ptr, cursor, R)
    C.qjson_raw(ptr, cursor, nil, 0, R)
    local start, stop = span_in(st, R.value)
    return start, stop
end
_M.source_span = source_span

-- The element count of the array at cursor, or the distinct key count of
-- the object, in the document ptr (in a section of its own).
local function source_len(ptr, cursor)
    local R = enter()
    C.qjson_len(ptr, cursor, nil, 0, R)
    local n = tonumber(R.value.len)
    leave(R)
    return n
end

-- Whether the source of the proxy (code `code`) of state st nests more
-- than `levels` containers deep, itself counted.
local function source_deeper(st, code, levels, R)
    C.qjson_nests_deeper(live_ptr(st), cursor_of(code), nil, 0, levels, R)
    return R.value.len ~= 0
end
_M.source_deeper = source_deeper

-- The nesting depth of the proxy with `code` of state st: from its code,
-- or, from DEEP on, as noted when it was reached.
local function depth_of(st, code)
    return depth_in(code) or DEEP_DEPTHS[st][cursor_of(code)]
end
_M.depth_of = depth_of

-- The change record of the proxy (code `code`) of state st, made on its
-- first write (see "Change records" above).
local function record(st, proxy, code, level)
    st[EDITS] = false
    local rec = record_of(st, proxy, code)
    if rec then return rec end
    local address = st[PTR]
    if not address then error(FREED, level + 1) end
    local ptr = ffi_cast(DOC_PTR, address)
    local cursor = cursor_of(code)
    local depth = depth_of(st, code)
    local R = enter()
    -- An array: its element count. An object starts simple; a write that
    -- replaces a member whose key repeats makes it not (`proxy_newindex`).
    local n = false
    if code < 0 then
        C.qjson_len(ptr, cursor, nil, 0, R)
        n = tonumber(R.value.len)
    end
    local simple = code >= 0
    leave(R)
    -- Room for the slots and a first write: a triple, or three elements
    -- (an array part of up to 16 slots is allocated with the table).
    rec = new_tab(FIELDS + 3, 0)
    local root = is_root(code)
    rec[R_CODE], rec[R_DEPTH], rec[R_PROXY], rec[R_N] = code, depth, not root and proxy, n
    rec[R_N0], rec[R_ADDED], rec[R_SIMPLE], rec[R_OTHER] = n, 0, simple, false
    if root then
        st[ROOT_REC] = rec
        return rec
    end
    local changes = st[CHANGES]
    if not changes then
        st[CHANGES] = rec
        return rec
    end
    if is_record(changes) then
        local first = changes
        changes = new_tab(2, 2)
        changes[first[R_PROXY]], changes[1] = first, first
        st[CHANGES] = changes
    end
    changes[proxy] = rec
    changes[#changes + 1] = rec
    return rec
end

-- Where the value of member `key` of the object at cursor in the
-- document of state st starts and ends, and whether other members may
-- have the key too; nil when there is none.
local function member_span(st, ptr, cursor, key)
    if type(key) ~= "string" then return nil end
    local R = enter()
    local from, to, repeated
    if C.qjson_raw_key(ptr, cursor, key, #key, R) == OK then
        from, to = span_in(st, R.value)
        repeated = R.value.i64 ~= 1
    end
    leave(R)
    return from, to, repeated
end

local function proxy_newindex(proxy, k, v)
    local st = getmetatable(proxy)
    local code = code_of(st, proxy)
    if code >= 0 then
        if k == nil then
            error("table index is nil", 2)
        end
        local rec = record(st, proxy, code, 2)
        local old = object_value(rec, k)
        -- Whether the key has a value now (for the count of keys).
        local had
        if rawequal(old, nil) then
            local address = st[PTR]
            if not address then error(FREED, 2) end
            local from, to, repeated = member_span(st, ffi_cast(DOC_PTR, address),
                                                   cursor_of(code), k)
            had = from ~= nil
            local w = #rec
            if had then
                rec[w + 1], rec[w + 2], rec[w + 3] = from, to, k
                if repeated then
                    -- Its other copies must go too (lua/qjson/edits.lua).
                    rec[R_SIMPLE] = false
                end
            else
                rec[w + 1], rec[w + 2], rec[w + 3] = false, false, k
                rec[R_ADDED] = rec[R_ADDED] + 1
                rec[R_SIMPLE] = false
            end
        else
            had = not rawequal(old, DELETED)
        end
        if rawequal(v, nil) then
            v = DELETED
            rec[R_SIMPLE] = false
        end
        set_object_value(rec, k, v)
        local len = rec[R_N]
        if len then
            rec[R_N] = len + (rawequal(v, DELETED) and 0 or 1) - (had and 1 or 0)
        end
        return
    end
    local rec = record(st, proxy, code, 2)
    local n = rec[R_N]
    if type(k) ~= "number" or k < 1 or k ~= math_floor(k) or k > n + 1 then
        error("qjson: array index " .. tostring(k) .. " is out of range 1.." .. (n + 1)
              .. " (arrays grow by one at the end)", 2)
    end
    if rawequal(v, nil) then
        rec[FIELDS + k] = DELETED
        -- Removing the last elements shortens the array; a hole in the
        -- middle stays and encodes as null, as cjson does.
        while n > 0 and rawequal(rec[FIELDS + n], DELETED) do
            n = n - 1
        end
        rec[R_N] = n
    else
        rec[FIELDS + k] = v
        if k > n then rec[R_N] = k end
    end
end

-- The iterator of nothing.
local function empty_iter()
    return nil
end

-- The key and value of the member at key entry `entry` of the document
-- ptr of state st, as written if `rec` (the object's change record, or
-- nil) says so, through reader R.
local function member(st, ptr, code, rec, entry, R)
    C.qjson_member(ptr, entry, R)
    local cell = R.key
    local key = ffi_string(cell.str, cell.len)
    local v
    if rec then v = object_value(rec, key) end
    if rawequal(v, nil) then
        v = value_of(st, R.value, code)
    end
    return key, v
end

-- An object iteration (see `object_iter`): the state, proxy and code it
-- iterates, the reader of the caller's section (false: each read is a
-- section of its own), where its added keys go on (false after the last),
-- the slot of the last source member it visited, and from IT_ENTRIES + 1
-- to IT_END the key entries of the source members reads see. One table:
-- a list of its own was an allocation more an object, and a walk over a
-- decoded document makes one for every object.
local IT_ST, IT_PROXY, IT_CODE, IT_R, IT_ADDED, IT_AT, IT_END = 1, 2, 3, 4, 5, 6, 7
local IT_ENTRIES = 7

-- The next key and value of iteration `it`, or nil after the last: one
-- member a call, and a call again (a tail call) past a deleted one.
-- A function of the iteration's table, not a closure over its state
-- (LuaJIT does not compile making a closure, FNEW), and no loop: every
-- trace through a `pairs` loop over proxies aborted at one or the other
-- ("NYI: bytecode 51", "inner loop in root trace"), and a walk over a
-- decoded document ran at 0.13x to 0.74x cjson's speed
-- (`benches/trailing.lua`).
local function object_step(it)
    local st, proxy, code = it[IT_ST], it[IT_PROXY], it[IT_CODE]
    local rec = record_of(st, proxy, code)
    local at = it[IT_AT] + 1
    local key, v
    if at <= it[IT_END] then
        it[IT_AT] = at
        local address = st[PTR]
        if not address then error(FREED, 2) end
        local R = it[IT_R]
        local r = R or enter()
        key, v = member(st, ffi_cast(DOC_PTR, address), code, rec, it[at], r)
        if not R then leave(r) end
    else
        -- Then the added keys, in write order.
        local added_at = it[IT_ADDED]
        if not (rec and added_at) then return nil end
        added_at, key = next_added(rec, added_at)
        it[IT_ADDED] = added_at or false
        if not added_at then return nil end
        v = object_value(rec, key)
    end
    if rawequal(v, DELETED) then return object_step(it) end
    return key, v
end

-- Iterates the object proxy (code `code`) of state st: source members in
-- document order (the one "last wins" reads for a repeated key), then
-- added keys in order. Reads go through reader R when the caller holds a
-- section (encode, materialize); without R, each read is a section of its
-- own.
local function object_iter(st, proxy, code, R)
    local address = st[PTR]
    if not address then error(FREED, 3) end
    local r = R or enter()
    local n = 0
    if C.qjson_members(ffi_cast(DOC_PTR, address), cursor_of(code), 0, r) == OK then
        n = tonumber(r.count)
    end
    local it
    if n > 0 or record_of(st, proxy, code) then
        it = new_tab(IT_ENTRIES + n, 0)
        it[IT_ST], it[IT_PROXY], it[IT_CODE], it[IT_R] = st, proxy, code, R or false
        it[IT_ADDED], it[IT_AT], it[IT_END] = ADDED_START, IT_ENTRIES, IT_ENTRIES + n
        local keys = r.keys
        for i = 1, n do
            it[IT_ENTRIES + i] = keys[i - 1]
        end
    end
    if not R then leave(r) end
    if not it then
        return empty_iter
    end
    return object_step, it, nil
end
_M.object_iter = object_iter

-- ipairs over an array proxy: 1, 2, ... up to the first element that
-- reads as nil (a deleted one, or the end), as on a plain table.
local function array_ipairs_step(proxy, i)
    i = i + 1
    local v = proxy[i]
    if rawequal(v, nil) then return nil end
    return i, v
end

-- The number of elements, or of distinct keys, of the proxy (code
-- `code`) of state st: natively while nothing was written; once written,
-- kept by the change record. An object's is counted once: the source's
-- distinct keys, natively, plus the keys written that it lacks, less
-- those deleted that it has (one triple each). (Iterating made a string
-- of every key: see `object_edits` in lua/qjson/edits.lua for what that
-- cost.)
local function proxy_len(st, proxy, code)
    local rec = record_of(st, proxy, code)
    -- (An array's record always holds its count.)
    local n = rec and rec[R_N]
    if n then return n end
    local address = st[PTR]
    if not address then error(FREED, 3) end
    n = source_len(ffi_cast(DOC_PTR, address), cursor_of(code))
    if rec then
        for p = FIELDS + 1, #rec, 3 do
            local in_source = rec[p] ~= false
            local present = not rawequal(object_value(rec, rec[p + 2]), DELETED)
            if present and not in_source then
                n = n + 1
            elseif in_source and not present then
                n = n - 1
            end
        end
        rec[R_N] = n
    end
    return n
end

-- pairs over an array proxy: every element from 1 to its length that is
-- not nil, in order, past a deleted one as pairs goes past a plain
-- table's hole (and as encode writes the rest, with null in the hole).
-- The length is asked for at a nil only: at the end, or at a hole.
local function array_pairs_step(proxy, i)
    i = i + 1
    local v = proxy[i]
    if not rawequal(v, nil) then return i, v end
    local st = getmetatable(proxy)
    local n = proxy_len(st, proxy, code_of(st, proxy))
    while i < n do
        i = i + 1
        v = proxy[i]
        if not rawequal(v, nil) then return i, v end
    end
    return nil
end

-- The state and code of v if it is a proxy, else nil.
local function proxy_info(v)
    local st = getmetatable(v)
    if type(v) == "table" and type(st) == "table" and rawget(st, "__index") == proxy_index then
        return st, code_of(st, v)
    end
    return nil
end
_M.proxy_info = proxy_info

function _M.is_proxy(v)
    return proxy_info(v) ~= nil
end

-- Whether v is an array proxy.
function _M.is_array(v)
    local st, code = proxy_info(v)
    return st ~= nil and code < 0
end

-- qjson.len(v): #v for a plain table, the element or key count of a proxy.
function _M.len(v)
    local st, code = proxy_info(v)
    if st then return proxy_len(st, v, code) end
    return #v
end

function _M.pairs(v)
    local st, code = proxy_info(v)
    if st then
        if code >= 0 then return object_iter(st, v, code) end
        return array_pairs_step, v, 0
    end
    return next, v, nil
end

function _M.ipairs(v)
    local st, code = proxy_info(v)
    if st then
        if code < 0 then return array_ipairs_step, v, 0 end
        return empty_iter
    end
    return ipairs(v)
end

-- Where `#`, `pairs` and `ipairs` consult metamethods of tables (LuaJIT
-- built with Lua 5.2 compatibility, as OpenResty's is), states carry them
-- too; elsewhere they would be dead weight in every state.
local COMPAT = #setmetatable({}, { __len = function() return 1 end }) == 1

-- Whether the object proxy with change record rec holds integer key k
-- (only a write gives it one: JSON's keys are strings).
local function has_integer_key(rec, code, k)
    return (written(rec, code, k)) ~= nil
end

-- `#` of a proxy: what it is of the table cjson decodes, with the same
-- changes. An array's length; for an object, a border of its integer keys
-- (0 unless some were written), found as LuaJIT finds one in a hash part,
-- by doubling then halving: a gateway's "is it an array?" test, `#t > 0`,
-- took every object for one when this was its count of keys (which
-- qjson.len still gives).
local function proxy_len_mm(proxy)
    local st = getmetatable(proxy)
    local code = code_of(st, proxy)
    if code < 0 then
        local n = proxy_len(st, proxy, code)
        return n
    end
    local rec = record_of(st, proxy, code)
    if not rec or not has_integer_key(rec, code, 1) then
        return 0
    end
    local i, j = 1, 2
    while has_integer_key(rec, code, j) do
        i, j = j, j * 2
    end
    while j - i > 1 do
        local m = math_floor((i + j) / 2)
        if has_integer_key(rec, code, m) then
            i = m
        else
            j = m
        end
    end
    return i
end

local function proxy_pairs(proxy)
    return _M.pairs(proxy)
end

local function proxy_ipairs(proxy)
    return _M.ipairs(proxy)
end

-- Builds plain tables from a tape (see src/navigate/tape.rs) in one pass
-- with an explicit stack: the container on top is filled by a tight loop
-- over its items (scalars inline), which only breaks out to descend into a
-- non-empty child and resumes after it.

-- The value of a scalar item, or a presized empty table for a container
-- item plus its item count. Arrays get `arrays_mt` when given
-- (decode_array_with_array_mt), else empty ones get empty_array_mt.
local function item_value(item, arrays_mt)
    local ty = item.type
    if ty == T_STRING then
        return ffi_string(item.str, item.len), 0
    elseif ty == T_NUMBER then
        return item.num, 0
    elseif ty == T_OBJECT then
        return new_tab(0, item.len), item.len
    elseif ty == T_ARRAY then
        local n = item.len
        if arrays_mt then
            return setmetatable(new_tab(n, 0), arrays_mt), n
        end
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

local function build(items, stacks, arrays_mt)
    local root, open = item_value(items[0], arrays_mt)
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
                local v, n = item_value(items[i + 1], arrays_mt)
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
                local v, n = item_value(items[i], arrays_mt)
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
-- value type), through reader R; arrays as `item_value` makes them.
local function tape_value(ptr, cursor, R, arrays_mt)
    C.qjson_tape(ptr, cursor, R)
    local v = build(R.items, R == qffi.main and main_stacks or { {}, {}, {}, {} }, arrays_mt)
    return v
end
_M.tape_value = tape_value

-- Texts shorter than this are searched for a '[' (see `root`); in longer
-- ones the search would cost more than the slots it saves.
local ARRAYLESS_CHECKED = 4096

-- The value of `text`, just parsed into the native document ptr (which
-- charges the collector `bytes`): the root proxy, whose state takes charge of
-- ptr; or, for a scalar root, the scalar, and ptr is freed at once.
function _M.root(ptr, text, bytes, block)
    local b, spaced = first_byte(text)
    local t = b == OPEN_OBJECT and T_OBJECT or b == OPEN_ARRAY and T_ARRAY
    if not t then
        local R = enter()
        C.qjson_get(ptr, 0, nil, 0, R)
        local v = value_of(nil, R.value, 0)
        leave(R)
        C.qjson_free(ptr)
        free_dead()
        return v
    end
    local address = address_of(ptr)
    block = block or false
    -- [PTR], [SRC], [CHANGES], [EDITS], [REG], [CHILD], [CHILD_CODE], [ROOT_REC], [BLOCK]
    local st
    if COMPAT and (type(text) ~= "string" or #text >= ARRAYLESS_CHECKED
                   or str_find(text, "[", 1, true)) then
        st = { address, text, false, false, false, false, 0, false, block,
               __index = proxy_index, __newindex = proxy_newindex, __len = proxy_len_mm,
               __pairs = proxy_pairs, __ipairs = proxy_ipairs }
    elseif COMPAT then
        -- No array in the text: `ipairs` of an object proxy sees no
        -- elements with or without __ipairs, and four fields fit a hash
        -- part of four slots where five take eight.
        st = { address, text, false, false, false, false, 0, false, block,
               __index = proxy_index, __newindex = proxy_newindex, __len = proxy_len_mm,
               __pairs = proxy_pairs }
    else
        st = { address, text, false, false, false, false, 0, false, block,
               __index = proxy_index, __newindex = proxy_newindex }
    end
    if spaced then
        SPACED[st] = t == T_ARRAY and -1 or 0
    end
    local root = setmetatable({}, st)
    track(st, address, bytes, block)
    return root
end

return _M
