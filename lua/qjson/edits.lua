-- What a changed document's text must become: its change records
-- (lua/qjson/lazy.lua) turned into edits of the source, for qjson.encode
-- and qjson.materialize.
--
-- An edit is { from, to, value, depth [, rec, kept] }: source bytes
-- [from, to) are replaced by a value, or by nothing (DELETED); keys added
-- to an object (INSERT) or elements appended to an array (APPEND) are
-- written at one point (from == to) after the container's last source
-- member. `depth` is the nesting depth of the container the edit is in
-- (0 for the root), which the encoder's depth limit needs.
-- Sorted by `from`, two edits never partly overlap: they are disjoint, or
-- one lies inside a range the other replaces (a member written inside a
-- value that was replaced afterwards), and writers skip those. So the
-- text of any proxy is its source with the edits in its range applied in
-- order, with no walk over the containers in between, and a change deep
-- down costs no more than one at the top.
--
-- Each changed container's edits come from its spans
-- (src/navigate/spans.rs: where each member is, one native call):
--
-- * a member written gets its new value; a deleted one is removed with
--   the separator before it, or after it while no member before it stays;
--   a repeated key that was written keeps only the member reads see;
-- * an element written gets its value (null for a hole); elements deleted
--   from the end are removed with their separators.

local ffi = require("ffi")
local qffi = require("qjson.ffi")
local lazy = require("qjson.lazy")

local C = qffi.C
local null = qffi.null
local DELETED = lazy.DELETED
local SRC, CHANGES, EDITS, ROOT_REC = lazy.SRC, lazy.CHANGES, lazy.EDITS, lazy.ROOT_REC
local cursor_of = lazy.cursor_of
local ffi_string = ffi.string
local ffi_cast = ffi.cast
local next = next
local tonumber = tonumber
local math_floor = math.floor
local table_sort = table.sort
local new_tab = require("table.new")

local char_ptr = ffi.typeof("const char *")

local _M = {}

-- Edit values that write a record's added keys or appended elements.
local INSERT = setmetatable({}, { __tostring = function() return "qjson.insert" end })
local APPEND = setmetatable({}, { __tostring = function() return "qjson.append" end })
_M.INSERT, _M.APPEND = INSERT, APPEND

-- Appends to `list` the edits of the object at cursor in the document
-- of state st, whose change record is rec, through reader R.
local function object_edits(list, st, cursor, rec, R)
    local depth = rec.depth
    local ptr, base = lazy.live_ptr(st), ffi_cast(char_ptr, st[SRC])
    C.qjson_spans(ptr, cursor, 1, R)
    local n = tonumber(R.count)
    local spans = R.spans
    local set = rec.set
    -- Whether a source member before this one stays, and where the last
    -- one ended (at first: just past '{').
    local kept = false
    local prev_end = tonumber(R.value.str - base) + 1
    for i = 0, n - 1 do
        local s = spans[i]
        local v = set[ffi_string(s.key, s.key_len)]
        if v == nil then
            kept = true
        elseif s.live == 0 or v == DELETED then
            if kept then
                list[#list + 1] = { prev_end, s.value_end, DELETED, depth }
            else
                local to = i + 1 < n and spans[i + 1].key_start or s.value_end
                list[#list + 1] = { s.key_start, to, DELETED, depth }
            end
        else
            list[#list + 1] = { s.value_start, s.value_end, v, depth }
            kept = true
        end
        prev_end = s.value_end
    end
    if rec.added then
        list[#list + 1] = { prev_end, prev_end, INSERT, depth, rec, kept }
    end
end

-- Appends to `list` the edits of the array at cursor in the document of
-- state st, whose change record is rec, through reader R.
local function array_edits(list, st, cursor, rec, R)
    local depth = rec.depth
    local ptr, base = lazy.live_ptr(st), ffi_cast(char_ptr, st[SRC])
    C.qjson_spans(ptr, cursor, 0, R)
    local n0 = tonumber(R.count)
    local spans = R.spans
    local n = rec.n
    local kept = n < n0 and n or n0
    for i, v in next, rec.set do
        if i <= kept then
            local s = spans[i - 1]
            list[#list + 1] = { s.value_start, s.value_end, v == DELETED and null or v, depth }
        end
    end
    -- Ends of the last kept element and of the source's elements (at
    -- first: just past '[').
    local open = tonumber(R.value.str - base) + 1
    local kept_end = kept > 0 and spans[kept - 1].value_end or open
    local source_end = n0 > 0 and spans[n0 - 1].value_end or open
    if kept < n0 then
        list[#list + 1] = { kept_end, source_end, DELETED, depth }
    elseif n > n0 then
        list[#list + 1] = { source_end, source_end, APPEND, depth, rec }
    end
end

-- Appends the edits of change record rec of state st to `list`. (The
-- document's pointers are made only where the source is read: each is
-- an allocation where the compiler does not sink it.)
local function record_edits(list, st, rec, R)
    local code = rec.code
    if rec.simple then
        -- Members replaced, in a source without repeated keys: where they
        -- are is known since their first writes (the first outside the
        -- loop, see edits_of).
        local set, depth = rec.set, rec.depth
        list[#list + 1] = { rec[1], rec[2], set[rec[3]], depth }
        for j = 4, #rec, 3 do
            list[#list + 1] = { rec[j], rec[j + 1], set[rec[j + 2]], depth }
        end
    elseif code >= 0 then
        object_edits(list, st, cursor_of(code), rec, R)
    else
        array_edits(list, st, cursor_of(code), rec, R)
    end
end

local function by_from(a, b)
    return a[1] < b[1]
end


-- The sorted edits of the document with state st (which has change
-- records), through reader R: made once after the last write and kept in
-- the state until the next (lua/qjson/lazy.lua drops them on writes).
local function edits_of(st, R)
    local list = st[EDITS]
    if list then return list end
    -- A freed document cannot be encoded, whatever its records hold.
    lazy.live_ptr(st)
    list = new_tab(2, 0)
    -- Mostly the root's record alone: a loop entered often that runs once
    -- is one LuaJIT stops compiling (its traces keep leaving it), and what
    -- it calls would then run interpreted.
    local root_rec = st[ROOT_REC]
    if root_rec then
        record_edits(list, st, root_rec, R)
    end
    local changes = st[CHANGES]
    if changes then
        if changes.proxy then
            -- One record (see lua/qjson/lazy.lua's `record`).
            record_edits(list, st, changes, R)
        else
            for i = 1, #changes do
                record_edits(list, st, changes[i], R)
            end
        end
    end
    if #list > 1 then table_sort(list, by_from) end
    -- Set last: a finalizer run while it was made (by an allocation above)
    -- that encodes this document makes its own.
    st[EDITS] = list
    return list
end
_M.edits_of = edits_of

-- The position in `list` of its first edit at or after byte `from`.
local function first_at(list, from)
    -- (The first, without a loop: see edits_of.)
    local e = list[1]
    if e == nil or e[1] >= from then return 1 end
    local lo, hi = 2, #list + 1
    while lo < hi do
        local mid = math_floor((lo + hi) / 2)
        if list[mid][1] < from then lo = mid + 1 else hi = mid end
    end
    return lo
end
_M.first_at = first_at

-- Whether the proxy (code `code`) of state st, or anything inside it, was
-- changed, through reader R.
function _M.changed(st, proxy, code, R)
    if not lazy.has_changes(st) then return false end
    if lazy.record_of(st, proxy, code) then return true end
    local from, to = lazy.source_span(st, lazy.live_ptr(st), cursor_of(code), R)
    -- Edits starting on `from` replace the proxy: they are its parent's.
    local list = edits_of(st, R)
    local e = list[first_at(list, from + 1)]
    return e ~= nil and e[1] < to
end

return _M
