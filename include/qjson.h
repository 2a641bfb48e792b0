/*
 * qjson.h - the C ABI of libqjson, the native core of the qjson LuaJIT
 * library. This header is the single source of the FFI declarations: the
 * block between the qjson-cdef markers is what lua/qjson/ffi.lua passes to
 * ffi.cdef, and a spec checks that the two are identical.
 *
 * Ownership and lifetime
 *   - qjson_parse borrows the JSON text. The caller keeps those bytes alive
 *     and unchanged until qjson_free(doc); the document never copies them.
 *   - A qjson_doc belongs to the caller, who releases it with qjson_free
 *     exactly once. Freed documents are recycled internally.
 *   - Every call leaves its results in a qjson_reader the caller passes
 *     in (made with qjson_reader_new). Strings and lists it hands out
 *     point into the JSON text or into memory owned by that reader: they
 *     stay valid until the next call given the same reader (and, for the
 *     text, while the text lives). Calls through other readers, on any
 *     document, never touch them: code that may run in the middle of a
 *     read (a garbage collector's finalizer) uses a reader of its own.
 *   - One thread at a time per document and per reader; different
 *     documents may be used from different threads.
 *
 * Cursors
 *   A cursor (uint32_t) names a value of a document. 0 is the whole
 *   document; qjson_find returns the cursor of any value. Lookups take a
 *   cursor and a path relative to it: "" is the value itself, "a.b[0].c" a
 *   dotted path with 0-based indices, "/a/b/0/c" an RFC 6901 JSON Pointer.
 *
 * Return values of the lookup functions
 *   QJSON_OK, or QJSON_NOT_FOUND (the path names nothing: not an error),
 *   QJSON_TYPE_MISMATCH (reader->value.type holds the actual type),
 *   QJSON_OUT_OF_RANGE / QJSON_NOT_INTEGER (qjson_get_i64),
 *   QJSON_BAD_PATH (reader->value.i64 holds the byte offset in the path),
 *   QJSON_BAD_CURSOR, QJSON_BAD_ARGUMENT, QJSON_INTERNAL.
 */
#ifndef QJSON_H
#define QJSON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* qjson-cdef-begin */
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

/* qjson-cdef-end */

/* A lua_CFunction, for package.loadlib: pushes the NULL light userdata
   (lua-cjson's cjson.null, OpenResty's ngx.null). Resolves the Lua API
   from the host process at call time, so libqjson links no Lua library. */
int qjson_lua_null(void *L);

/* A lua_CFunction, for package.loadlib: qjson_lua_decode(text, max_depth,
   duplicate_keys, null, empty_array_mt [, array_mt]) decodes text into
   plain Lua tables (JSON null as `null`; every array with metatable
   `array_mt` when that argument is given and not nil, else empty ones
   with `empty_array_mt`) and returns the value; or nil and the error
   message ("invalid number at byte 17"); or nil alone when the caller
   should decode another way (nesting deeper than the Lua stack can grow). Resolves the Lua API like
   qjson_lua_null; returns nothing when the process has none. */
int qjson_lua_decode(void *L);

/* A lua_CFunction, for package.loadlib: qjson_lua_encode(value, options,
   null, array_mt, empty_array_mt, empty_array, cjson_empty_array) encodes
   a plain Lua value byte for byte as lua-cjson does and returns the text;
   or nil and lua-cjson's error message; or nothing when the caller should
   encode it another way (a table with another metatable, cdata, nesting
   deeper than the Lua stack can grow). `options` is a 14-byte string:
   precision (1..16); flags (1 sparse_convert, 2 escape_slash,
   4 empty_table_as_object, 8 a NaN or an infinity is the caller's to
   encode, 16 so is a value of a type JSON lacks); sparse_ratio,
   sparse_safe and max_depth as little-endian uint32. With an eighth
   argument n (1024 <= n < 2^32) the text comes back as an array of
   strings of at most n bytes each, in order, followed by its length.
   Resolves the Lua API like qjson_lua_null; returns nothing when the
   process has none. */
int qjson_lua_encode(void *L);

#ifdef __cplusplus
}
#endif

#endif /* QJSON_H */
