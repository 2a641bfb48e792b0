-- The native side of qjson: the one ffi.cdef (the block between the
-- qjson-cdef markers of include/qjson.h, checked identical by a spec), the
-- loading of libqjson, the null value, and the readers every call leaves
-- its results in.

local ffi = require("ffi")

local ffi_load = ffi.load
local ffi_gc = ffi.gc
local debug_getinfo = debug.getinfo
local debug_getupvalue = debug.getupvalue
local co_running = coroutine.running
local io_open = io.open
local os_getenv = os.getenv
local pcall = pcall
local concat = table.concat
local gsub = string.gsub
local match = string.match
local gmatch = string.gmatch

local cdef = [[
typedef struct qjson_doc qjson_doc;
typedef struct qjson_scratch qjson_scratch;

enum {
    QJSON_OK = 0,
    /* The document is rejected. */
    QJSON_E_EMPTY = 1,
    QJSON_E_TOO_LARGE = 2,
    QJSON_E_INVALID_UTF8 = 3,
    QJSON_E_CONTROL_CHARACTER = 4,
    QJSON_E_UNTERMINATED_STRING = 5,
    QJSON_E_INVALID_ESCAPE = 6,
    QJSON_E_INVALID_UNICODE_ESCAPE = 7,
    QJSON_E_LONE_SURROGATE = 8,
    QJSON_E_INVALID_NUMBER = 9,
    QJSON_E_INVALID_LITERAL = 10,
    QJSON_E_EXPECTED_VALUE = 11,
    QJSON_E_EXPECTED_VALUE_OR_BRACKET = 12,
    QJSON_E_EXPECTED_KEY = 13,
    QJSON_E_EXPECTED_KEY_OR_BRACE = 14,
    QJSON_E_EXPECTED_COLON = 15,
    QJSON_E_EXPECTED_COMMA_OR_BRACE = 16,
    QJSON_E_EXPECTED_COMMA_OR_BRACKET = 17,
    QJSON_E_TRAILING_CONTENT = 18,
    QJSON_E_DEPTH_EXCEEDED = 19,
    QJSON_E_DUPLICATE_KEY = 20,
    /* Lookup outcomes on a valid document. */
    QJSON_NOT_FOUND = 32,
    QJSON_TYPE_MISMATCH = 33,
    QJSON_OUT_OF_RANGE = 34,
    QJSON_NOT_INTEGER = 35,
    /* Misuse. */
    QJSON_BAD_PATH = 64,
    QJSON_BAD_CURSOR = 65,
    QJSON_BAD_ARGUMENT = 66,
    QJSON_BAD_KERNEL = 67,
    QJSON_INTERNAL = 99
};

enum {
    QJSON_TYPE_NULL = 1,
    QJSON_TYPE_FALSE = 2,
    QJSON_TYPE_TRUE = 3,
    QJSON_TYPE_NUMBER = 4,
    QJSON_TYPE_STRING = 5,
    QJSON_TYPE_ARRAY = 6,
    QJSON_TYPE_OBJECT = 7
};

enum {
    QJSON_DUPLICATE_KEYS_LAST_WINS = 0,
    QJSON_DUPLICATE_KEYS_ERROR = 1
};

/* qjson_parse_small's longest text. */
enum {
    QJSON_SMALL_MAX_BYTES = 4096
};

/* Names a small document (see qjson_parse_small); opaque. */
typedef struct qjson_small {
    uint64_t opaque[4];
} qjson_small;

typedef struct qjson_options {
    uint32_t max_depth;      /* deepest container nesting; 0 means 1000 */
    int32_t duplicate_keys;  /* QJSON_DUPLICATE_KEYS_* */
} qjson_options;

typedef struct qjson_error {
    int32_t code;            /* QJSON_E_*, QJSON_BAD_ARGUMENT or QJSON_BAD_KERNEL */
    uint32_t reserved;
    uint64_t offset;         /* byte offset of the problem in the text */
    char message[256];       /* NUL-terminated ASCII, e.g. "invalid number at byte 17" */
} qjson_error;

typedef struct qjson_value {
    int32_t type;            /* QJSON_TYPE_* of the value found */
    uint32_t cursor;         /* the value's cursor */
    const char *str;         /* qjson_get on a string: decoded bytes; qjson_raw: source text */
    size_t len;              /* byte length of str; qjson_len and arrays: the count */
    double num;              /* qjson_get on a number: nearest double */
    int64_t i64;             /* qjson_get_i64: the value; qjson_len: members with repeats;
                                qjson_raw_key: 2 when other members may have
                                the key, else 1;
                                QJSON_BAD_PATH: offset in path */
} qjson_value;

/* One item of a tape (qjson_tape): a subtree in document order without
   punctuation. A container's item holds its member (including repeated
   keys) or element count and is followed by its children; an object's
   children alternate key string, value. */
typedef struct qjson_item {
    int32_t type;            /* QJSON_TYPE_* */
    uint32_t len;            /* string: byte length; array/object: count */
    union {
        double num;          /* number: nearest double */
        const char *str;     /* string: decoded bytes */
    };
} qjson_item;

/* One member or element of a container (qjson_spans), where the encoder
   splices: byte offsets into the text. */
typedef struct qjson_span {
    const char *key;         /* objects, when keys are asked for: the decoded key; else NULL */
    uint32_t key_len;        /* byte length of key */
    uint32_t key_start;      /* objects: offset of the key's opening quote; arrays: value_start */
    uint32_t value_start;    /* offset of the value's first byte */
    uint32_t value_end;      /* offset just past the value's last byte */
    uint32_t cursor;         /* the value's cursor */
    uint32_t live_start;     /* value_start of the member reads see for this key: its own,
                                but for the earlier copies of a repeated key under "last
                                wins"; elements: their own */
} qjson_span;

/* Where calls leave their results, and (scratch) the memory the strings
   and lists among them point into. Results stay valid until the next call
   given the same reader. Make readers with qjson_reader_new only. */
typedef struct qjson_reader {
    qjson_value value;       /* lookups: the value found */
    qjson_value key;         /* qjson_member: the key (decoded; i64 is its byte offset) */
    const uint32_t *keys;    /* qjson_members: key entries */
    const qjson_item *items; /* qjson_tape: the items */
    const qjson_span *spans; /* qjson_spans: the members or elements */
    size_t count;            /* how many keys, items or spans; qjson_escape: bytes consumed;
                                qjson_parse: native bytes to charge a GC for */
    qjson_error error;       /* qjson_parse: why the text was rejected */
    qjson_scratch *scratch;  /* owned by the reader */
} qjson_reader;

/* Library version, e.g. "0.1.0". */
const char *qjson_version(void);

/* The stage-1 kernel in use ("avx512", "avx2", "neon", "scalar"), or NULL when the
   QJSON_KERNEL environment variable names one this build or CPU lacks. */
const char *qjson_kernel(void);

/* A new reader (NULL when memory ran out), and its release. */
qjson_reader *qjson_reader_new(void);
void qjson_reader_free(qjson_reader *reader);

/* Parses and fully validates json[0..len). Returns NULL on invalid JSON or
   bad options, with the reason in reader->error (reader may be NULL).
   options may be NULL. On success reader->count is the native memory a
   garbage collector should be told about: what the document allocated
   anew, or, when a recycled document had the room, the part of its index
   the text fills (garbage the collector cannot see once the document is
   dropped, reused or not). */
qjson_doc *qjson_parse(const char *json, size_t len, const qjson_options *options,
                       qjson_reader *reader);

/* qjson_parse of a copy of json[0..len) that the document makes and owns
   (its memory kept for the next text, as the index's is), for a text that
   may be freed or changed once the call returns. On success
   reader->value.str is the copy (valid as long as the document) and
   reader->count includes it. */
qjson_doc *qjson_parse_copy(const char *json, size_t len, const qjson_options *options,
                            qjson_reader *reader);

/* Small texts (at most QJSON_SMALL_MAX_BYTES bytes): parsed into memory
   `reader` keeps (required here), and named by `block`, which the caller
   allocates (in a garbage-collected heap: nothing native is held for the
   document, so there is nothing to free). Returns the document's handle,
   for every read through any reader, on any thread, while the block and
   the text stay where they are (a reader that does not hold the document
   parses the text again; qjson_free ignores the handle), or NULL as
   qjson_parse does. */
qjson_doc *qjson_parse_small(const char *json, size_t len, const qjson_options *options,
                             qjson_small *block, qjson_reader *reader);

/* Releases a document. NULL is ignored. */
void qjson_free(qjson_doc *doc);

/* Bytes of native heap the document holds (itself, its index, lookup
   tables and scratch), which a garbage collector cannot see; 0 for NULL. */
size_t qjson_memory(const qjson_doc *doc);

/* Tells the pool of freed documents that a collection cycle of the caller's
   ended and the documents it found dead were freed: the pool then keeps room
   for as many documents as were out at once during that cycle (at least
   64 MiB) and gives the rest back to the allocator. Without it the pool
   keeps at most 64 MiB. */
void qjson_pool_cycle(void);

/* Gives back the memory of reader's results that calls no longer need:
   each buffer of more than 1 MiB that no call filled past 1 MiB since the
   last trim. Call it once per collection cycle, as qjson_pool_cycle, when
   no result of an earlier call given reader is read any more. Returns the
   bytes the results' memory still holds (0 for a NULL reader). */
size_t qjson_reader_trim(qjson_reader *reader);

/* The lookups below leave what they found in reader->value. */

/* Finds the value at path: sets value.type and value.cursor. */
int qjson_find(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
               qjson_reader *reader);

/* Like qjson_find, and for a string also sets str/len to its decoded bytes,
   for a number num to its nearest double (+-inf beyond the double range),
   for an array len to its element count. */
int qjson_get(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
              qjson_reader *reader);

/* The number at path as an exact int64 in value.i64: any integral spelling
   (12, 1.0, 2.5e1); QJSON_NOT_INTEGER or QJSON_OUT_OF_RANGE otherwise. */
int qjson_get_i64(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
                  qjson_reader *reader);

/* Elements of an array or distinct keys of an object, in value.len; in
   value.i64 the members counting repeated keys (an array's elements). */
int qjson_len(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
              qjson_reader *reader);

/* Whether the value at path nests containers more than `levels` deep,
   itself counted (an array in an array is 2), in value.len (1 or 0): for an encoder
   under a lower depth limit than the document was parsed with. Free when
   levels is at least that limit; else a walk of the value. */
int qjson_nests_deeper(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
                       uint32_t levels, qjson_reader *reader);

/* The exact source text of the value at path, in value.str and value.len. */
int qjson_raw(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
              qjson_reader *reader);

/* Reads member key[0..key_len) (decoded bytes, no path syntax) of the
   object at cursor, like qjson_get. QJSON_NOT_FOUND if the value is not an
   object or has no such key; the duplicate-key policy picks the member. */
int qjson_get_key(qjson_doc *doc, uint32_t cursor, const char *key, size_t key_len,
                  qjson_reader *reader);

/* The exact source text (value.str, value.len) and cursor of member
   key[0..key_len) of the object at cursor, found as qjson_get_key finds it:
   where a change to that member goes. Both member reads set value.i64 to 2
   when other members of the object may have the key too (an object of more
   than 16 members searched through its table says 2 when any of its keys
   repeats), else 1. */
int qjson_raw_key(qjson_doc *doc, uint32_t cursor, const char *key, size_t key_len,
                  qjson_reader *reader);

/* Reads element index (0-based) of the array at cursor, like qjson_get.
   O(1) amortised in any order of reads (see src/navigate/lookup.rs). */
int qjson_get_index(qjson_doc *doc, uint32_t cursor, size_t index, qjson_reader *reader);

/* The members of the object at cursor as key entries in document order,
   in reader->keys and reader->count: all of them when every is nonzero,
   else those the duplicate-key policy reads (the last of each repeated
   key). */
int qjson_members(qjson_doc *doc, uint32_t cursor, int every, qjson_reader *reader);

/* Reads the member whose key entry came from qjson_members: reader->key
   gets the decoded key (key.i64: the byte offset of its opening quote),
   reader->value the value as qjson_get fills it. */
int qjson_member(qjson_doc *doc, uint32_t key_entry, qjson_reader *reader);

/* The tape of the value at cursor, in reader->items and reader->count. */
int qjson_tape(qjson_doc *doc, uint32_t cursor, qjson_reader *reader);

/* Every member (in document order, repeated keys included) or element of
   the container at cursor with its byte spans, in reader->spans and
   reader->count; with keys nonzero, objects' keys decoded too. reader->value
   gets the container's own source text as qjson_raw fills it.
   QJSON_TYPE_MISMATCH for a scalar. */
int qjson_spans(qjson_doc *doc, uint32_t cursor, int keys, qjson_reader *reader);

/* Eager decode of a small text by shape: qjson_decode_shaped returns the
   id (from 1) of the text's shape in `shapes`, the same id for every text
   of that shape, and leaves its numbers and strings in `out` in document
   order; 0 when the caller should decode the text another way (longer
   than QJSON_SHAPED_MAX_BYTES, more than 64 strings or numbers, invalid,
   or of a shape past the 32 a registry gives ids to). The shape: "{"
   "}" "[" "]" around containers, "k", a length byte and the decoded key
   before each member's value, "s" string, "n" number, "t" true, "f"
   false, "z" null. The strings point into the text or into memory of the
   thread's, alive until its next call; the shape lives as long as the
   registry, which one thread uses at a time. */
enum {
    QJSON_SHAPED_MAX_BYTES = 4096
};

typedef struct qjson_shapes qjson_shapes;

typedef struct qjson_shaped {
    double number[64];
    const char *string[64];
    uint32_t string_len[64];
    const char *shape;
    uint32_t shape_len;
} qjson_shaped;

qjson_shapes *qjson_shapes_new(void);
void qjson_shapes_free(qjson_shapes *shapes);
uint32_t qjson_decode_shaped(const char *json, size_t len, const qjson_options *options,
                             qjson_shapes *shapes, qjson_shaped *out);

/* Escapes a prefix of src[0..len) into dst[0..cap) as the contents of a
   JSON string, byte for byte as lua-cjson does (\/ only when escape_slash
   is non-zero); stops before an escape that would not fit. Returns the
   bytes written; reader->count is the source bytes they cover. cap >= 6
   makes progress on any non-empty src. */
size_t qjson_escape(const char *src, size_t len, int escape_slash, char *dst, size_t cap,
                    qjson_reader *reader);

]]

ffi.cdef(cdef)

local LIBRARY = "libqjson.so"

-- The directory this file was loaded from ("" when unknown).
local function module_dir()
    local source = debug.getinfo(1, "S").source
    return match(source, "^@(.*/)[^/]*$") or ""
end

-- Where to look for the library, in order: $QJSON_LIB; beside the Lua
-- modules (a luarocks or `make install` tree puts it there or on
-- package.cpath); package.cpath; the repository's build tree; then the
-- dynamic linker's own search (LD_LIBRARY_PATH, ld.so.conf).
local function candidates()
    local list = {}
    local explicit = os_getenv("QJSON_LIB")
    if explicit and explicit ~= "" then
        list[#list + 1] = explicit
    end
    local dir = module_dir()
    list[#list + 1] = dir .. LIBRARY
    list[#list + 1] = dir .. "../" .. LIBRARY
    for template in gmatch(package.cpath, "[^;]+") do
        list[#list + 1] = (gsub(template, "%?", "libqjson"))
    end
    list[#list + 1] = dir .. "../../target/release/" .. LIBRARY
    return list
end

local function load_library()
    local tried = {}
    for _, path in ipairs(candidates()) do
        local f = io_open(path, "rb")
        if f then
            f:close()
            local ok, lib = pcall(ffi_load, path)
            if ok then
                return lib, path
            end
            tried[#tried + 1] = path .. " (" .. tostring(lib) .. ")"
        else
            tried[#tried + 1] = path .. " (not found)"
        end
    end
    local ok, lib = pcall(ffi_load, "qjson")
    if ok then
        return lib, LIBRARY
    end
    tried[#tried + 1] = LIBRARY .. " via the dynamic linker (" .. tostring(lib) .. ")"
    error("qjson: cannot load the native library; tried:\n  " .. concat(tried, "\n  "), 0)
end

local lib, lib_path = load_library()

-- The NULL light userdata that lua-cjson (cjson.null) and OpenResty
-- (ngx.null) use for JSON null. Plain Lua cannot make one, so the library
-- exports a lua_CFunction that pushes it.
local function find_null()
    local ngx = rawget(_G, "ngx")
    if type(ngx) == "table" and ngx.null ~= nil then
        return ngx.null
    end
    local push_null = package.loadlib(lib_path, "qjson_lua_null")
    local null = push_null and push_null()
    if null == nil then
        error("qjson: cannot create the null value: package.loadlib(" .. lib_path
              .. ") failed", 0)
    end
    return null
end

local null = find_null()

-- Eager decode through the Lua C API (src/lua_api/eager.rs), when the
-- process's Lua API can be found; nil otherwise, and callers use the FFI.
local function find_c_decode()
    local decode = package.loadlib(lib_path, "qjson_lua_decode")
    if not decode then
        return nil
    end
    local ok, v = pcall(decode, "[null]", 1000, 0, null, {})
    if ok and type(v) == "table" and v[1] == null then
        return decode
    end
    return nil
end

local c_decode = find_c_decode()

-- The encoder of plain values through the Lua C API
-- (src/lua_api/encode.rs), found and probed like the decoder; nil where
-- it cannot be, and qjson.encode keeps to its Lua encoder.
local function find_c_encode()
    local encode = package.loadlib(lib_path, "qjson_lua_encode")
    if not encode then
        return nil
    end
    -- Precision 14, escape_slash, sparse 2 and 10, max_depth 1000.
    local options = "\14\2\2\0\0\0\10\0\0\0\232\3\0\0"
    local ok, s = pcall(encode, { 1, "a/" }, options, null, {}, {}, {}, nil)
    if ok and s == '[1,"a\\/"]' then
        return encode
    end
    return nil
end

local c_encode = find_c_encode()
local ffi_string = ffi.string
local T_NULL = lib.QJSON_TYPE_NULL
local T_FALSE = lib.QJSON_TYPE_FALSE
local T_TRUE = lib.QJSON_TYPE_TRUE
local T_NUMBER = lib.QJSON_TYPE_NUMBER
local T_STRING = lib.QJSON_TYPE_STRING

-- The Lua value of the scalar a lookup left in `cell` (a qjson_value):
-- string, number, boolean or null; nil for an array or object, which each
-- caller turns into its own kind of object.
local function scalar(cell)
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
    return nil
end

-- Readers. Every call into libqjson leaves its results in a qjson_reader,
-- and the strings and lists among them live in that reader's memory until
-- the next call given the same reader. Lua code reads through one reader,
-- `main`, except code that runs in the middle of another read: a garbage
-- collector finalizer (ffi.gc, __gc) may run at any allocation, including
-- between a call and the reads of its results, and may call qjson itself.
-- If it used `main` too, the interrupted read would return the
-- finalizer's results, or copy bytes the finalizer has since freed.
--
-- So a read is a section: `enter()` hands out `main` and marks it busy,
-- `leave(r)` ends the section. A section entered while `main` is busy
-- (from a finalizer, which LuaJIT never interrupts with another) gets a
-- reader of its own, made for it and freed when it leaves. Sections
-- never raise before leaving, but an error from elsewhere (a finalizer
-- that raises inside one, out of memory) can abandon one. A section that
-- finds `main` busy therefore checks that the busy section is still on
-- the stack (rare, so the slow check is fine) and takes `main` back if
-- not, so an abandoned section costs one check, not a slower reader for
-- the rest of the process (nor, as while `main` is busy, every
-- doc:free() deferred: lua/qjson/doc.lua).
--
-- That check sees one stack, and a section may be under way on another:
-- code called inside a section may resume a coroutine that calls qjson.
-- Taken there, `main` gave the waiting section the coroutine's results,
-- or memory the coroutine had freed (an audit's finding,
-- spec/reentry_spec.lua). No section is ever suspended itself (none
-- yields: the encoder calls metamethods where they cannot, as cjson
-- does), so a section under way elsewhere is one that called out: the
-- encoder's metamethod calls say so (`calling_out`), with their thread,
-- and a busy `main` is not taken back from another thread while one is
-- under way. A finalizer run inside a section says nothing; one that
-- resumes a coroutine which calls qjson is not supported (OpenResty's
-- coroutine.resume cannot run there: it yields). Knowing every section's
-- thread would cost each call a coroutine.running(), which LuaJIT does
-- not compile: every read would end its trace there.

-- At lua_close (an nginx worker exiting or reloading) LuaJIT runs every
-- cdata finalizer, then every userdata __gc, then, for up to ten rounds,
-- the __gc of userdata made meanwhile. qjson's own cleanup (`at_close`
-- functions: free every document, then the shared reader) is a userdata
-- __gc, so it runs after the application's ffi.gc finalizers, which may
-- still read documents; anything that calls qjson after it gets a reader
-- of its own, and a document parsed then arms the cleanup again for the
-- next round.
local at_close = {}
local closed = false
local armed = false
local newproxy = newproxy
local function close()
    closed = true
    armed = false
    for i = 1, #at_close do
        at_close[i]()
    end
end

-- Makes sure the cleanup runs (again) at lua_close. The guard userdata is
-- kept by this module, so it lives until then.
local guard
local function arm()
    if not armed then
        armed = true
        guard = newproxy(true)
        getmetatable(guard).__gc = close
    end
end
arm()

local main = lib.qjson_reader_new()
if main == nil then
    error("qjson: cannot allocate a reader", 0)
end
local busy = false
at_close[1] = function()
    if main then
        busy = true
        lib.qjson_reader_free(main)
        main = false
    end
end

local enter, leave

-- Whether a function on the stack above the caller of `enter` is a
-- section: one that holds `enter` or `leave` as an upvalue. Every
-- section's owner calls `enter`; a function it tail-calls to finish the
-- section (a getter's `failure`, eager decode's `tape_tables`) replaces
-- its frame, and calls `leave`. (Holding `enter` alone, a tail-called
-- tape build was taken for an abandoned section: a finalizer took the
-- shared reader and rebuilt or freed its tape under the build, an
-- audit's finding.) A function that has left its section and goes on
-- only costs a call a reader of its own.
local function section_on_stack()
    local level = 4 -- 1 this, 2 own_reader, 3 enter, 4 the new section
    while true do
        level = level + 1
        local info = debug_getinfo(level, "f")
        if info == nil then
            return false
        end
        local fn = info.func
        local i = 1
        while true do
            local name, v = debug_getupvalue(fn, i)
            if name == nil then break end
            if v == enter or v == leave then return true end
            i = i + 1
        end
    end
end

-- Sections that got a reader of their own, and abandoned sections found
-- (for tests).
local nested_count, abandoned_count = 0, 0

-- The running coroutine, or false on the main thread (where
-- coroutine.running gives nil, or under Lua 5.2 compatibility the main
-- thread and true).
local function current_thread()
    local co, is_main = co_running()
    if co == nil or is_main == true then
        return false
    end
    return co
end

-- Calls out of a section into code of the caller's under way, and the
-- thread of the first (see above).
local out_calls, out_thread = 0, false

-- Tells that a section calls out (`entering`), or that the call returned
-- or raised.
local function calling_out(entering)
    if entering then
        if out_calls == 0 then
            out_thread = current_thread()
        end
        out_calls = out_calls + 1
    else
        out_calls = out_calls - 1
    end
end

local function own_reader()
    if not closed and not (out_calls > 0 and out_thread ~= current_thread())
       and not section_on_stack() then
        -- The busy section was abandoned: nothing reads through main.
        abandoned_count = abandoned_count + 1
        return main
    end
    nested_count = nested_count + 1
    local r = lib.qjson_reader_new()
    if r == nil then
        error("qjson: cannot allocate a reader", 0)
    end
    return ffi_gc(r, lib.qjson_reader_free)
end

-- The reader for a new section: see above.
function enter()
    if busy then
        -- Not a tail call: own_reader counts the frames above it.
        local r = own_reader()
        return r
    end
    busy = true
    return main
end

-- Ends the section that `enter` gave `r` to.
function leave(r)
    if r == main then
        busy = closed
    else
        lib.qjson_reader_free(ffi_gc(r, nil))
    end
end

-- Whether no section is under way, so that memory a section might be
-- reading can be freed now.
local function idle()
    return not busy
end

-- Registers `fn` to run at lua_close, before the shared reader is freed.
local function on_close(fn)
    table.insert(at_close, #at_close, fn)
end

-- Whether qjson's cleanup at lua_close has run; `arm` is then needed for
-- anything made afterwards to be cleaned up too.
local function is_closed()
    return closed
end

-- How many sections ran inside another, and how many abandoned sections
-- were found (for tests).
local function section_counts()
    return nested_count, abandoned_count
end

return {
    C = lib,
    path = lib_path,
    cdef = cdef,
    null = null,
    c_decode = c_decode,
    c_encode = c_encode,
    scalar = scalar,
    enter = enter,
    leave = leave,
    calling_out = calling_out,
    idle = idle,
    main = main,
    section_counts = section_counts,
    on_close = on_close,
    is_closed = is_closed,
    arm = arm,
}
