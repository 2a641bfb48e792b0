-- The native side of qjson: the one ffi.cdef (the block between the
-- qjson-cdef markers of include/qjson.h, checked identical by a spec), the
-- loading of libqjson, the null value, and the out-cells every module
-- shares. Out-cells are safe to share: LuaJIT runs one coroutine at a time
-- and each is read back before the next call into the library.

local ffi = require("ffi")

local ffi_load = ffi.load
local io_open = io.open
local os_getenv = os.getenv
local pcall = pcall
local concat = table.concat
local gsub = string.gsub
local match = string.match
local gmatch = string.gmatch

local cdef = [[
typedef struct qjson_doc qjson_doc;

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

typedef struct qjson_options {
    uint32_t max_depth;      /* deepest container nesting; 0 means 1024 */
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
    size_t len;              /* byte length of str; qjson_len: the count */
    double num;              /* qjson_get on a number: nearest double */
    int64_t i64;             /* qjson_get_i64: the value; QJSON_BAD_PATH: offset in path */
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

/* Library version, e.g. "0.1.0". */
const char *qjson_version(void);

/* The stage-1 kernel in use ("avx2", "scalar"), or NULL when the
   QJSON_KERNEL environment variable names one this build or CPU lacks. */
const char *qjson_kernel(void);

/* Parses and fully validates json[0..len). Returns NULL and fills *error
   (which may be NULL) on invalid JSON or bad options. options may be NULL. */
qjson_doc *qjson_parse(const char *json, size_t len, const qjson_options *options,
                       qjson_error *error);

/* Releases a document. NULL is ignored. */
void qjson_free(qjson_doc *doc);

/* Bytes of native heap the document holds (its index and scratch buffers),
   which a garbage collector cannot see; 0 for NULL. */
size_t qjson_memory(const qjson_doc *doc);

/* Finds the value at path: sets out->type and out->cursor. */
int qjson_find(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
               qjson_value *out);

/* Like qjson_find, and for a string also sets str/len to its decoded bytes,
   for a number num to its nearest double (+-inf beyond the double range). */
int qjson_get(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
              qjson_value *out);

/* The number at path as an exact int64 in out->i64: any integral spelling
   (12, 1.0, 2.5e1); QJSON_NOT_INTEGER or QJSON_OUT_OF_RANGE otherwise. */
int qjson_get_i64(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
                  qjson_value *out);

/* Elements of an array or distinct keys of an object, in out->len. */
int qjson_len(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
              qjson_value *out);

/* The exact source text of the value at path, in out->str and out->len. */
int qjson_raw(qjson_doc *doc, uint32_t cursor, const char *path, size_t path_len,
              qjson_value *out);

/* Reads member key[0..key_len) (decoded bytes, no path syntax) of the
   object at cursor, like qjson_get. QJSON_NOT_FOUND if the value is not an
   object or has no such key; the duplicate-key policy picks the member. */
int qjson_get_key(qjson_doc *doc, uint32_t cursor, const char *key, size_t key_len,
                  qjson_value *out);

/* Reads element index (0-based) of the array at cursor, like qjson_get.
   O(1) amortised in any order of reads (see src/navigate/lookup.rs). */
int qjson_get_index(qjson_doc *doc, uint32_t cursor, size_t index, qjson_value *out);

/* The members of the object at cursor as key entries in document order:
   all of them when every is nonzero, else those the duplicate-key policy
   reads (the last of each repeated key). *keys points into the document
   and is valid until the next call on it. */
int qjson_members(qjson_doc *doc, uint32_t cursor, int every, const uint32_t **keys,
                  size_t *count);

/* Reads the member whose key entry came from qjson_members: key->str/len
   is the decoded key, key->i64 the byte offset of its opening quote;
   value is filled as by qjson_get. */
int qjson_member(qjson_doc *doc, uint32_t key_entry, qjson_value *key, qjson_value *value);

/* The tape of the value at cursor: *items points into the document and is
   valid until the next call on it; string bytes stay valid as long as the
   document and the tape do. */
int qjson_tape(qjson_doc *doc, uint32_t cursor, const qjson_item **items, size_t *count);

/* Escapes a prefix of src[0..len) into dst[0..cap) as the contents of a
   JSON string, byte for byte as lua-cjson does (\/ only when escape_slash
   is non-zero); stops before an escape that would not fit. Returns the
   bytes written; *consumed is the source bytes they cover. cap >= 6 makes
   progress on any non-empty src. */
size_t qjson_escape(const char *src, size_t len, int escape_slash, char *dst, size_t cap,
                    size_t *consumed);

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

return {
    C = lib,
    path = lib_path,
    cdef = cdef,
    null = null,
    scalar = scalar,
    -- Shared out-cells.
    value = ffi.new("qjson_value[1]"),
    error = ffi.new("qjson_error[1]"),
}
