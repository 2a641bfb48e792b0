-- qjson.sse: Server-Sent Events for the response side of LLM gateways.
--
--   local sse = require("qjson.sse")
--   local stream = ngx.ctx.sse or sse.new()       -- in body_filter_by_lua
--   ngx.ctx.sse = stream
--   local events = ngx.arg[2] and stream:finish(ngx.arg[1]) or stream:feed(ngx.arg[1])
--   for _, ev in ipairs(events) do
--       local doc, err = ev:parse()                -- nil, err: bad JSON, [DONE], oversize
--       if doc then doc:get_str("choices[0].delta.content") end
--   end
--
-- Chunks may be split anywhere (inside a line, a CRLF pair or a UTF-8
-- sequence). Lines follow the WHATWG event-stream rules: they end with LF,
-- CR or CRLF; a blank line ends an event; `data:` lines (one leading space
-- dropped) are joined with "\n"; `event:` and `id:` set the type and the
-- last event id; lines starting with `:` are comments; other fields
-- (`retry:` included) are ignored; one leading BOM is dropped.
--
-- Nothing here raises on data: an event whose JSON is invalid, and an
-- event larger than max_event_size, are reported through that event and
-- the stream goes on. Each chunk is scanned once; a line split over many
-- chunks is gathered in a buffer of its own, so the work for a stream is
-- linear in its size however it is chunked.

-- Events are read under the options of the module (require("qjson")),
-- through the calls qjson.safe makes: nil, err instead of raising.
local qjson = require("qjson")
local parse_text = qjson._parse
local parse_any = qjson._parse_any
local decode_any = qjson._decode_any

local ffi = require("ffi")
local new_buffer = require("string.buffer").new

local type = type
local rawget = rawget
local rawset = rawset
local error = error
local tostring = tostring
local pairs = pairs
local math_floor = math.floor
local setmetatable = setmetatable
local byte = string.byte
local find = string.find
local sub = string.sub
local ffi_cast = ffi.cast
local ffi_string = ffi.string
local char_ptr = ffi.typeof("const char *")

local LF = byte("\n")
local CR = byte("\r")
local COLON = byte(":")
local SPACE = byte(" ")
local D, A, T = byte("dat", 1, 3)
local BOM = "\239\187\191"
local DONE = "[DONE]"

local DEFAULT_MAX_EVENT_SIZE = 1024 * 1024

local _M = {
    _VERSION = qjson._VERSION,
    DEFAULT_MAX_EVENT_SIZE = DEFAULT_MAX_EVENT_SIZE,
}

-- Where the bytes of `src` start: a chunk or a line (a Lua string), or
-- a string.buffer holding a line that came split over chunks (see
-- `end_line`), written no more once a slice of it is kept.
local function base_of(src)
    if type(src) == "string" then
        return ffi_cast(char_ptr, src)
    end
    return (src:ref())
end

-- The `len` bytes of `src` after its first `at`, as a string.
local function slice(src, at, len)
    if type(src) == "string" then
        return sub(src, at + 1, at + len)
    end
    return ffi_string(src:ref() + at, len)
end

-- An event keeps where its data lines, its id and its type are in the
-- chunks or lines they were read from (slices: the string, and `len`
-- bytes after `at`), and makes each a string only when it is read:
-- `_src`, `_at`, `_len` for an event of one data line (ev:parse() reads
-- the line where it is), `_parts` (slices one after another, flat) for
-- one of more, `_id_*` and `_type_*`. Every string LuaJIT makes is
-- interned, and the events of a stream are alike: OpenResty's LuaJIT
-- hashes a string of 128 bytes or more from its first nine sixteenths
-- and last 8 bytes only, where the events of one stream differ least
-- (id, model and the like come first, the delta last), so a string per
-- event would be compared with every event of its length not yet
-- collected (docs/reliability.md): an ignored field, an id or a second
-- data line made the stream's time grow as its square.
local Event = {}

-- The data lines of `parts` (see above) joined with "\n".
local function join(parts)
    local b = new_buffer()
    for k = 1, #parts, 3 do
        if k > 1 then
            b:put("\n")
        end
        b:putcdata(base_of(parts[k]) + parts[k + 1], parts[k + 2])
    end
    local text = b:tostring()
    b:free()
    return text
end

-- The fields an event keeps as a slice: the names of its string, at and
-- len. (`event` is set raw to "message" when no event: line gave a type;
-- an oversize event has none of them.)
local SLICED = {
    data = { "_src", "_at", "_len" },
    id = { "_id_src", "_id_at", "_id_len" },
    event = { "_type_src", "_type_at", "_type_len" },
}

Event.__index = function(ev, key)
    local names = SLICED[key]
    if not names then
        return Event[key]
    end
    local value
    local src = rawget(ev, names[1])
    if src then
        value = slice(src, rawget(ev, names[2]), rawget(ev, names[3]))
    else
        local parts = key == "data" and rawget(ev, "_parts")
        if not parts then return nil end
        value = join(parts)
    end
    rawset(ev, key, value)
    return value
end

-- Runs `fn(event)` once per event and keeps its result and error, so a
-- filter may ask for the JSON in several places at no extra cost.
local function cached(self, value_key, err_key, fn)
    if self.err then
        return nil, self.err
    end
    if self.done then
        return nil, "qjson.sse: [DONE] is not JSON"
    end
    local v = self[value_key]
    if v == nil and self[err_key] == nil then
        local err
        v, err = fn(self)
        -- Only what is there: a key set to nil still takes a slot, and
        -- a slot more than the event's table has room for costs a resize.
        if v ~= nil then
            self[value_key] = v
        else
            self[err_key] = err
        end
    end
    return v, self[err_key]
end

local function decode_data(ev)
    local v, err = decode_any(ev.data)
    return v, err
end

local function parse_data(ev)
    local src = rawget(ev, "_src")
    if src then
        local doc, err = parse_text(src, nil, true, "parse", base_of(src) + rawget(ev, "_at"),
                                    rawget(ev, "_len"))
        return doc, err
    end
    local doc, err = parse_any(ev.data, nil, nil, true)
    return doc, err
end

-- The event's data as qjson.decode proxies (1-based arrays), or nil, err.
function Event:json()
    return cached(self, "_value", "_value_err", decode_data)
end

-- The event's data as a qjson.parse document (path getters that return
-- nil, err instead of raising), or nil, err.
function Event:parse()
    return cached(self, "_doc", "_doc_err", parse_data)
end

local Stream = {}
Stream.__index = Stream

-- Forgets the event being read (after a blank line or an oversize one);
-- the last event id stays, as the WHATWG rules say.
local function reset_event(self)
    local parts = self.parts
    for i = 1, 3 * self.ndata do
        parts[i] = nil
    end
    self.ndata = 0
    self.type_src = nil
    self.size = 0
end

-- Appends the event read so far to `out` if it has data (an event with no
-- data line is dropped, as a browser does) and starts the next one.
local function dispatch(self, out, unterminated)
    local n = self.ndata
    if n == 0 then
        return reset_event(self)
    end
    local parts = self.parts
    local ev
    if n == 1 then
        local src, at, len = parts[1], parts[2], parts[3]
        ev = {
            _src = src,
            _at = at,
            _len = len,
            done = len == #DONE and slice(src, at, len) == DONE,
            unterminated = unterminated or nil,
        }
    else
        -- (Lines joined by "\n" are never "[DONE]".) The event takes the
        -- lines' table, and the stream starts another: no copy to make
        -- and no slots to clear.
        ev = { _parts = parts, done = false, unterminated = unterminated or nil }
        self.parts, self.ndata = {}, 0
    end
    local type_src = self.type_src
    if type_src then
        ev._type_src, ev._type_at, ev._type_len = type_src, self.type_at, self.type_len
    else
        ev.event = "message"
    end
    local id_src = self.id_src
    if id_src then
        ev._id_src, ev._id_at, ev._id_len = id_src, self.id_at, self.id_len
    end
    out[#out + 1] = setmetatable(ev, Event)
    reset_event(self)
end

-- Adds s[from, to] as a data line of the current event.
local function add_data(self, s, from, to)
    local n = self.ndata
    self.ndata = n + 1
    local parts = self.parts
    parts[3 * n + 1], parts[3 * n + 2], parts[3 * n + 3] = s, from - 1, to - from + 1
end

-- Whether the `len` bytes at p[i - 1] are `name`.
local function field_is(p, i, len, name)
    if len ~= #name then
        return false
    end
    for k = 1, len do
        if p[i + k - 2] ~= byte(name, k) then
            return false
        end
    end
    return true
end

-- One complete line, bytes i to j (1-based, terminator excluded) of `s`
-- (a string or a buffer, see `base_of`), whose bytes start at p, outside
-- an oversize event. No string is made of it here (see Event): fields
-- are told apart in place, and the values of data, event and id lines
-- kept where they are.
local function take_line(self, s, p, i, j, out)
    if i > j then
        return dispatch(self, out)
    end
    local b1 = p[i - 1]
    if b1 == COLON then
        return
    end
    -- The usual line, "data: ...", read without a search.
    if j - i >= 4 and b1 == D and p[i] == A and p[i + 1] == T and p[i + 2] == A
       and p[i + 3] == COLON then
        local from = i + 5
        if from <= j and p[from - 1] == SPACE then
            from = from + 1
        end
        return add_data(self, s, from, j)
    end
    -- The field name ends at the first colon, or else at the line's end:
    -- looked for in the line only (a search of the rest of the chunk
    -- passed every line after it, quadratic in a chunk of lines without
    -- one).
    local colon = i
    while colon <= j and p[colon - 1] ~= COLON do
        colon = colon + 1
    end
    local name_len = colon - i
    -- The value: after the colon and one space, or empty without a colon.
    local from = colon + 1
    if from <= j and p[from - 1] == SPACE then
        from = from + 1
    elseif from > j + 1 then
        from = j + 1
    end
    if field_is(p, i, name_len, "data") then
        add_data(self, s, from, j)
    elseif field_is(p, i, name_len, "event") then
        -- An empty type is none: the event's is then "message".
        if from <= j then
            self.type_src, self.type_at, self.type_len = s, from - 1, j - from + 1
        else
            self.type_src = nil
        end
    elseif field_is(p, i, name_len, "id") then
        -- An id with a NUL is ignored (looked for in the value only).
        for k = from, j do
            if p[k - 1] == 0 then return end
        end
        self.id_src, self.id_at, self.id_len = s, from - 1, j - from + 1
    end
end

-- Counts `len` more bytes of the current event; past the limit, reports
-- the event once and skips the rest of it. Returns true while skipping.
local function grow(self, len, out)
    self.line_len = self.line_len + len
    if self.skipping then
        return true
    end
    local size = self.size + len
    self.size = size
    if size <= self.max_event_size then
        return false
    end
    out[#out + 1] = setmetatable({
        err = "qjson.sse: event larger than max_event_size (" .. self.max_event_size
              .. " bytes)",
    }, Event)
    self.line = false
    reset_event(self)
    self.skipping = true
    return true
end

-- Reads the line gathered in the line buffer, which goes with it (see
-- `end_line`).
local function take_kept_line(self, out)
    local line = self.line
    self.line = false
    local at, n = line:ref()
    take_line(self, line, at, 1, n, out)
end

-- The line that ends at a terminator: chunk[from, to] (its bytes from
-- p, the chunk's start) completes what the earlier chunks left in the
-- line buffer, if any. A line that came split over chunks is read in
-- its buffer, which goes with what keeps a slice of it (a data, event
-- or id line): the next split line gets a buffer of its own. (Joined as
-- a string, every split line was interned, and the lines of a stream are
-- alike: see Event.)
local function end_line(self, chunk, p, from, to, out)
    local len = to - from + 1
    if grow(self, len, out) then
        -- A blank line ends the oversize event.
        if self.line_len == 0 then
            self.skipping = false
            reset_event(self)
        end
    else
        local line = self.line
        if not line then
            take_line(self, chunk, p, from, to, out)
        else
            line:putcdata(p + from - 1, len)
            take_kept_line(self, out)
        end
    end
    self.line_len = 0
end

-- Keeps chunk[from, to], the start of a line that has no terminator yet.
local function keep(self, chunk, from, to, out)
    if not grow(self, to - from + 1, out) then
        local line = self.line
        if not line then
            line = new_buffer()
            self.line = line
        end
        line:putcdata(base_of(chunk) + from - 1, to - from + 1)
    end
end

local function check_chunk(self, chunk, fname)
    if type(chunk) ~= "string" then
        error("bad argument #1 to '" .. fname .. "' (string expected, got " .. type(chunk)
              .. ")", 3)
    end
    if self.finished then
        error("qjson.sse: " .. fname .. "() after finish()", 3)
    end
end

-- At the stream's start: drops one leading BOM, before any byte of the
-- first line is counted against max_event_size, whatever chunks it comes
-- split over (`bom_seen` of its bytes so far, false once past where one
-- could be). Returns where `chunk`'s lines start, or nil while all of it
-- may still be part of a BOM.
local function skip_bom(self, chunk, out)
    local seen = self.bom_seen
    for i = 1, 3 - seen do
        local b = byte(chunk, i)
        if b == nil then
            self.bom_seen = seen + i - 1
            return nil
        end
        if b ~= byte(BOM, seen + i) then
            -- No BOM: the bytes earlier chunks held back start the line.
            self.bom_seen = false
            if seen > 0 then
                keep(self, BOM, 1, seen, out)
            end
            return 1
        end
    end
    self.bom_seen = false
    return 4 - seen
end

-- Reads `chunk` into `out`.
local function scan(self, chunk, out)
    local n = #chunk
    local pos = 1
    if self.bom_seen then
        pos = skip_bom(self, chunk, out)
        if not pos then return end
    end
    if self.after_cr and n > 0 then
        -- The previous chunk ended with CR: an LF here completes that CRLF.
        self.after_cr = false
        if byte(chunk, 1) == LF then
            pos = 2
        end
    end
    -- The next CR and the next LF, each looked for again only once
    -- passed: a line costs one plain find for the ending the stream uses,
    -- none for the other. (A find for the LF at every line went to the
    -- chunk's end in a stream of CR-ended lines: quadratic in the chunk.)
    local p = ffi_cast(char_ptr, chunk)
    local cr = find(chunk, "\r", pos, true) or n + 1
    local lf = find(chunk, "\n", pos, true) or n + 1
    while pos <= n do
        if cr < pos then
            cr = find(chunk, "\r", pos, true) or n + 1
        end
        if lf < pos then
            lf = find(chunk, "\n", pos, true) or n + 1
        end
        local e = cr < lf and cr or lf
        if e > n then
            keep(self, chunk, pos, n, out)
            return
        end
        end_line(self, chunk, p, pos, e - 1, out)
        if byte(chunk, e) == CR then
            if e == n then
                self.after_cr = true
            elseif byte(chunk, e + 1) == LF then
                e = e + 1
            end
        end
        pos = e + 1
    end
end

-- stream:feed(chunk) -> the list of events that `chunk` completed (often
-- empty). Each event has `data` (string, made when first read), `event`
-- (type, "message" by default), `id` (last event id or nil), `done` (data
-- is "[DONE]"), `ev:json()` and `ev:parse()`; an oversize event has only
-- `err`.
function Stream:feed(chunk)
    check_chunk(self, chunk, "feed")
    local out = {}
    scan(self, chunk, out)
    return out
end

-- stream:finish([chunk]) -> the events of the last chunk, plus the event
-- the stream ended in without its blank line, marked `unterminated`
-- (a browser would drop it; a gateway still wants a final usage event).
-- The stream takes no more chunks.
function Stream:finish(chunk)
    check_chunk(self, chunk or "", "finish")
    local out = {}
    scan(self, chunk or "", out)
    self.finished = true
    local seen = self.bom_seen
    if seen and seen > 0 then
        -- The stream ended inside what could have been a BOM: a line.
        keep(self, BOM, 1, seen, out)
    end
    if not self.skipping then
        if self.line then
            take_kept_line(self, out)
        end
        dispatch(self, out, true)
    end
    return out
end

local OPTIONS = { max_event_size = true }

-- sse.new([options]) -> a stream. options.max_event_size: the most bytes
-- one event may take, counting every line from the previous blank line on
-- without terminators (default 1 MiB).
function _M.new(opts)
    local max = DEFAULT_MAX_EVENT_SIZE
    if opts ~= nil then
        if type(opts) ~= "table" then
            error("bad argument #1 to 'new' (table expected, got " .. type(opts) .. ")", 2)
        end
        for k in pairs(opts) do
            if not OPTIONS[k] then
                error("qjson.sse: unknown option '" .. tostring(k) .. "'", 2)
            end
        end
        if opts.max_event_size ~= nil then
            max = opts.max_event_size
            if type(max) ~= "number" or max < 1 or max ~= math_floor(max) then
                error("qjson.sse: max_event_size must be a positive integer", 2)
            end
        end
    end
    return setmetatable({
        max_event_size = max,
        line = false,       -- the current line so far, when it came split
                            -- over chunks: a string.buffer (see end_line)
        line_len = 0,       -- bytes of the current line so far
        parts = {},         -- the current event's data lines, as slices
                            -- (see Event): the string, at, len of each
        ndata = 0,          -- how many
        size = 0,           -- bytes of the current event so far
        type_src = nil,     -- its type, as a slice, when an event: line
        type_at = 0,        -- gave one
        type_len = 0,
        id_src = nil,       -- the last event id, as a slice
        id_at = 0,
        id_len = 0,
        after_cr = false,   -- the last chunk ended with CR
        skipping = false,   -- inside an oversize event
        bom_seen = 0,       -- bytes of a leading BOM read so far, false
                            -- once past where one could be
        finished = false,
    }, Stream)
end

return _M
