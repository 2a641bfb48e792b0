-- What a changed document's text must become: its change records
-- (lua/qjson/lazy.lua) turned into edits of the source, for qjson.encode
-- and qjson.materialize.
--
-- An edit is EDIT consecutive entries of one list (from, to, value,
-- depth, rec, kept), named by the position of its first (1, 1 + EDIT,
-- ...): no table per edit, as each costs an allocation, a free and the
-- collector's visits. Source bytes [from, to) are replaced by a value, or
-- by nothing (DELETED); keys added to an object (INSERT) or elements
-- appended to an array (APPEND) are written at one point (from == to)
-- after the container's last source member, from change record `rec`
-- (`kept`: a source member before them stays); other edits have false
-- there. `depth` is the nesting depth of the container the edit is in
-- (0 for the root), which the encoder's depth limit needs.
-- Sorted by `from`, two edits never partly overlap: they are disjoint, or
-- one lies inside a range the other replaces (a member written inside a
-- value that was replaced afterwards), and writers skip those. So the
-- text of any proxy is its source with the edits in its range applied in
-- order, with no walk over the containers in between, and a change deep
-- down costs no more than one at the top.
--
-- A proxy's edits are those of the records of the containers that start
-- inside it: a record's edits lie inside its container, and a container
-- around the proxy has none that start inside it (each replaces a member
-- that holds the proxy whole, or is disjoint from it, or writes after
-- its last member). So encoding or materializing a proxy below the root
-- makes the edits of those records alone (`edits_for`), found through an
-- index of where each record's container starts, not those of the whole
-- document: a handler that changes one message and encodes it, message
-- after message, did the whole document's records again at each encode,
-- time quadratic in the messages (spec/complexity_spec.lua's four loops
-- of it ran 14.5-15.6x as long at 4x the messages with this file as of
-- b1bcde2).
--
-- Each changed container's edits come from its spans
-- (src/navigate/spans.rs: where each member is, one native call):
--
-- * a member written gets its new value; a deleted one is removed with
--   the separator before it, or after it while no member before it stays;
--   a repeated key that was written keeps only the member reads see;
-- * an element written gets its value (null for a hole); elements deleted
--   from the end are removed with their separators.

local qffi = require("qjson.ffi")
local lazy = require("qjson.lazy")

local C = qffi.C
local null = qffi.null
local DELETED = lazy.DELETED
local SRC, CHANGES, EDITS, ROOT_REC = lazy.SRC, lazy.CHANGES, lazy.EDITS, lazy.ROOT_REC
local source = lazy.source
local R_CODE, R_DEPTH, R_N, R_ADDED, R_SIMPLE = lazy.R_CODE, lazy.R_DEPTH, lazy.R_N, lazy.R_ADDED,
                                                lazy.R_SIMPLE
local FIELDS = lazy.FIELDS
local is_record, object_value = lazy.is_record, lazy.object_value
local cursor_of, is_root, source_span = lazy.cursor_of, lazy.is_root, lazy.source_span
local next = next
local rawequal = rawequal
local type = type
local tonumber = tonumber
local math_floor = math.floor
local new_tab = require("table.new")

local _M = {}

-- Entries per edit.
local EDIT = 6
_M.EDIT = EDIT

-- Appends an edit to `list`.
local function push(list, from, to, value, depth, rec, kept)
    local n = #list
    list[n + 1], list[n + 2], list[n + 3] = from, to, value
    list[n + 4], list[n + 5], list[n + 6] = depth, rec, kept
end

-- Edit values that write a record's added keys or appended elements.
local INSERT = setmetatable({}, { __tostring = function() return "qjson.insert" end })
local APPEND = setmetatable({}, { __tostring = function() return "qjson.append" end })
_M.INSERT, _M.APPEND = INSERT, APPEND

-- Appends to `list` the edits of the object at cursor in the document
-- of state st, whose change record is rec, through reader R. A member
-- is matched with the keys written by where the value reads see for its
-- key starts (`live_start`; a record's triple holds that start for a key
-- the source has), a number: no member needs a Lua string of its key.
-- LuaJIT interns every string it makes, and strings alike where its
-- hash does not look share one chain, so a string per member made one
-- deletion in an object of 32 000 long keys cost 4.8 s to encode
-- (docs/reliability.md, "Strings LuaJIT interns").
local function object_edits(list, st, cursor, rec, R)
    local depth = rec[R_DEPTH]
    local ptr, base = lazy.live_ptr(st), (source(st[SRC]))
    -- The keys written that the source has, by where the value read for
    -- them starts. (A table of this call's own: a finalizer or hook may
    -- encode another document in the middle of the loop below.)
    local written_at = new_tab(0, (#rec - FIELDS) / 3)
    for p = FIELDS + 1, #rec, 3 do
        local from = rec[p]
        if from then
            written_at[from] = rec[p + 2]
        end
    end
    C.qjson_spans(ptr, cursor, 0, R)
    local n = tonumber(R.count)
    local spans = R.spans
    -- Whether a source member before this one stays, and where the last
    -- one ended (at first: just past '{').
    local kept = false
    local prev_end = tonumber(R.value.str - base) + 1
    for i = 0, n - 1 do
        local s = spans[i]
        local key, v = written_at[s.live_start], nil
        if key ~= nil then
            v = object_value(rec, key)
        end
        if rawequal(v, nil) then
            kept = true
        elseif s.live_start ~= s.value_start or rawequal(v, DELETED) then
            if kept then
                push(list, prev_end, s.value_end, DELETED, depth, false, false)
            else
                local to = i + 1 < n and spans[i + 1].key_start or s.value_end
                push(list, s.key_start, to, DELETED, depth, false, false)
            end
        else
            push(list, s.value_start, s.value_end, v, depth, false, false)
            kept = true
        end
        prev_end = s.value_end
    end
    if rec[R_ADDED] > 0 then
        push(list, prev_end, prev_end, INSERT, depth, rec, kept)
    end
end

-- Appends to `list` the edits of the array at cursor in the document of
-- state st, whose change record is rec, through reader R.
local function array_edits(list, st, cursor, rec, R)
    local depth = rec[R_DEPTH]
    local ptr, base = lazy.live_ptr(st), (source(st[SRC]))
    C.qjson_spans(ptr, cursor, 0, R)
    local n0 = tonumber(R.count)
    local spans = R.spans
    local n = rec[R_N]
    local kept = n < n0 and n or n0
    -- The elements written: the record's entries past its slots (a loop
    -- over them, not over the array: one write to a long array costs
    -- one edit).
    for slot, v in next, rec do
        local i = slot - FIELDS
        if i >= 1 and i <= kept then
            local s = spans[i - 1]
            local value = rawequal(v, DELETED) and null or v
            push(list, s.value_start, s.value_end, value, depth, false, false)
        end
    end
    -- Ends of the last kept element and of the source's elements (at
    -- first: just past '[').
    local open = tonumber(R.value.str - base) + 1
    local kept_end = kept > 0 and spans[kept - 1].value_end or open
    local source_end = n0 > 0 and spans[n0 - 1].value_end or open
    if kept < n0 then
        push(list, kept_end, source_end, DELETED, depth, false, false)
    elseif n > n0 then
        push(list, source_end, source_end, APPEND, depth, rec, false)
    end
end

-- Appends the edits of change record rec of state st to `list`. (The
-- document's pointers are made only where the source is read: each is
-- an allocation where the compiler does not sink it.)
local function record_edits(list, st, rec, R)
    local code = rec[R_CODE]
    if rec[R_SIMPLE] then
        -- Members replaced whose keys the source does not repeat: where
        -- they are is known since their first writes (the first outside the
        -- loop, see edits_of).
        local depth = rec[R_DEPTH]
        local j = FIELDS + 1
        push(list, rec[j], rec[j + 1], object_value(rec, rec[j + 2]), depth, false, false)
        for k = j + 3, #rec, 3 do
            push(list, rec[k], rec[k + 1], object_value(rec, rec[k + 2]), depth, false, false)
        end
    elseif code >= 0 then
        object_edits(list, st, cursor_of(code), rec, R)
    else
        array_edits(list, st, cursor_of(code), rec, R)
    end
end

-- `order`, positions of edits in `list` (n of them), sorted by the
-- edits' starts: a merge sort, in passes over runs of doubling width
-- between `order` and a second array; returns the array that holds the
-- result. O(n log n) for any order of writes: LuaJIT's table.sort, a
-- quicksort, takes quadratic time on an order built against it, and a
-- handler's writes may come in an order the body chose (the loop of
-- spec/complexity_spec.lua that writes so ran 15.1x as long at 4x the
-- keys with this file as of b92c2e9).
local function sort_by_start(order, n, list)
    local from, to = order, new_tab(n, 0)
    local width = 1
    while width < n do
        for i = 1, n, 2 * width do
            local mid, hi = i + width, i + 2 * width
            if mid > n + 1 then mid = n + 1 end
            if hi > n + 1 then hi = n + 1 end
            local a, b = i, mid
            for k = i, hi - 1 do
                local take_b = b < hi and (a >= mid or list[from[b]] < list[from[a]])
                if take_b then
                    to[k], b = from[b], b + 1
                else
                    to[k], a = from[a], a + 1
                end
            end
        end
        from, to = to, from
        width = 2 * width
    end
    return from
end

-- `list` with its edits in the order of their `from`: itself when they
-- are (one record's edits mostly are), else a new list.
local function sorted(list)
    local n = #list
    local sorted_already = true
    for p = 1 + EDIT, n, EDIT do
        if list[p] < list[p - EDIT] then
            sorted_already = false
            break
        end
    end
    if sorted_already then return list end
    local order = new_tab(n / EDIT, 0)
    for i = 1, n / EDIT do
        order[i] = (i - 1) * EDIT + 1
    end
    order = sort_by_start(order, n / EDIT, list)
    local out = new_tab(n, 0)
    for i = 1, n / EDIT do
        local p = order[i]
        push(out, list[p], list[p + 1], list[p + 2], list[p + 3], list[p + 4], list[p + 5])
    end
    return out
end


-- The sorted edits of the document with state st (which has change
-- records), through reader R: made once after the last write and kept in
-- the state until the next (lua/qjson/lazy.lua drops them on writes).
local function edits_of(st, R)
    local list = st[EDITS]
    -- (Kept edits of one proxy's range, see edits_for, have its bounds.)
    if list and not list.to then return list end
    -- A freed document cannot be encoded, whatever its records hold.
    lazy.live_ptr(st)
    list = new_tab(EDIT, 0)
    -- Mostly the root's record alone: a loop entered often that runs once
    -- is one LuaJIT stops compiling (its traces keep leaving it), and what
    -- it calls would then run interpreted.
    local root_rec = st[ROOT_REC]
    if root_rec then
        record_edits(list, st, root_rec, R)
    end
    local changes = st[CHANGES]
    if changes then
        if is_record(changes) then
            -- One record (see lua/qjson/lazy.lua's `record`).
            record_edits(list, st, changes, R)
        else
            for i = 1, #changes do
                record_edits(list, st, changes[i], R)
            end
        end
    end
    list = sorted(list)
    -- Set last: a finalizer run while it was made (by an allocation above)
    -- that encodes this document makes its own.
    st[EDITS] = list
    return list
end
_M.edits_of = edits_of

-- Bytes per bucket of the index of where change records' containers
-- start (see `index_records`).
local BUCKET = 64

-- The keys under which a map of change records (lua/qjson/lazy.lua's
-- `record`) keeps that index: the start of each record of its list, by
-- position in the list, and the positions of the records starting in
-- each bucket (a number, or a list of them).
local STARTS, BUCKETS = {}, {}

-- Adds record changes[k] of state st (document ptr) to the index, through
-- reader R.
local function index_record(st, ptr, changes, starts, buckets, k, R)
    local from = source_span(st, ptr, cursor_of(changes[k][R_CODE]), R)
    starts[k] = from
    local b = math_floor(from / BUCKET)
    local there = buckets[b]
    if not there then
        buckets[b] = k
    elseif type(there) == "number" then
        buckets[b] = { there, k }
    else
        there[#there + 1] = k
    end
end

-- The index of map `changes` of state st, with the records added since
-- it was last asked for (each record once: a write adds records, never
-- moves one), through reader R: the starts and the buckets. (The first
-- new record outside the loop, see edits_of.)
local function index_records(st, changes, R)
    local starts, buckets = changes[STARTS], changes[BUCKETS]
    if not starts then
        starts, buckets = new_tab(#changes, 0), {}
        changes[STARTS], changes[BUCKETS] = starts, buckets
    end
    local k, n = #starts + 1, #changes
    if k <= n then
        local ptr = lazy.live_ptr(st)
        index_record(st, ptr, changes, starts, buckets, k, R)
        for j = k + 1, n do
            index_record(st, ptr, changes, starts, buckets, j, R)
        end
    end
    return starts, buckets
end

-- Appends to `list` the edits of record changes[k], if its container
-- starts in [from, to).
local function edits_if_within(list, st, changes, starts, k, from, to, R)
    local start = starts[k]
    if start >= from and start < to then
        record_edits(list, st, changes[k], R)
    end
end

-- Appends to `list` the edits of the records of bucket entry `there` (see
-- BUCKETS) whose containers start in [from, to).
local function bucket_edits(list, st, changes, starts, there, from, to, R)
    if type(there) == "number" then
        edits_if_within(list, st, changes, starts, there, from, to, R)
    elseif there then
        for i = 1, #there do
            edits_if_within(list, st, changes, starts, there[i], from, to, R)
        end
    end
end

-- Sorted edits of the document with state st that include every edit
-- inside the proxy with code `code`, whose source is [from, to), through
-- reader R: the document's (`edits_of`) for the root, else those of the
-- records whose containers start in the range (see the top of the file).
-- Kept in the state with the range until the next write: what is encoded
-- or materialized inside the proxy reads them again. The records are
-- found by a pass over them or over the range's buckets, whichever is
-- shorter: no more steps than the range has BUCKETs of bytes.
local function edits_for(st, code, from, to, R)
    local list = st[EDITS]
    if list then
        local lo = list.from
        if not lo or (lo <= from and to <= list.to) then return list end
    end
    if is_root(code) then return edits_of(st, R) end
    list = new_tab(EDIT, 0)
    local changes = st[CHANGES]
    -- (The root's record has no edit inside.)
    if changes and is_record(changes) then
        local start = source_span(st, lazy.live_ptr(st), cursor_of(changes[R_CODE]), R)
        if start >= from and start < to then
            record_edits(list, st, changes, R)
        end
    elseif changes then
        local n = #changes
        local starts, buckets = index_records(st, changes, R)
        local first, last = math_floor(from / BUCKET), math_floor((to - 1) / BUCKET)
        if last - first < n then
            -- (A small proxy's one or two buckets without a loop: see
            -- edits_of.)
            bucket_edits(list, st, changes, starts, buckets[first], from, to, R)
            if last > first then
                bucket_edits(list, st, changes, starts, buckets[last], from, to, R)
                for b = first + 1, last - 1 do
                    bucket_edits(list, st, changes, starts, buckets[b], from, to, R)
                end
            end
        else
            for k = 1, n do
                edits_if_within(list, st, changes, starts, k, from, to, R)
            end
        end
    end
    list = sorted(list)
    list.from, list.to = from, to
    -- Set last, as in edits_of.
    st[EDITS] = list
    return list
end
_M.edits_for = edits_for

-- The position in `list` of its first edit at or after byte `from`
-- (past the last edit when there is none).
local function first_at(list, from)
    -- (The first, without a loop: see edits_of.)
    local first = list[1]
    if first == nil or first >= from then return 1 end
    -- Edit numbers (the one past the last when no edit qualifies): edit
    -- lo starts before `from`, and the answer is in (lo, hi].
    local lo, hi = 1, #list / EDIT + 1
    while hi - lo > 1 do
        local mid = math_floor((lo + hi) / 2)
        if list[(mid - 1) * EDIT + 1] < from then lo = mid else hi = mid end
    end
    return (hi - 1) * EDIT + 1
end
_M.first_at = first_at

-- Whether the proxy (code `code`) of state st, or anything inside it, was
-- changed, through reader R; and, when finding that out took them, where
-- its source starts and ends (lazy.source_span), so that the caller need
-- not ask again.
function _M.changed(st, proxy, code, R)
    if not lazy.has_changes(st) then return false end
    if lazy.record_of(st, proxy, code) then return true end
    local from, to = source_span(st, lazy.live_ptr(st), cursor_of(code), R)
    -- Edits starting on `from` replace the proxy: they are its parent's.
    local list = edits_for(st, code, from, to, R)
    local e_from = list[first_at(list, from + 1)]
    return e_from ~= nil and e_from < to, from, to
end

return _M
