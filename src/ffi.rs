//! The C ABI declared in `include/qjson.h`: argument checks, panic
//! containment, and translation to and from the safe API. No logic lives
//! here.
//!
//! Every entry point runs its body under `catch_unwind`: a panic (a bug)
//! becomes `QJSON_INTERNAL`, never an unwind into LuaJIT or nginx.

use core::ffi::{c_char, c_int, c_void};
use core::fmt::Write;
use core::panic::AssertUnwindSafe;
use core::ptr;
use std::panic::catch_unwind;

use crate::document::{Document, pool};
use crate::error::{Error, ErrorCode};
use crate::escape;
use crate::navigate::ValueType;
use crate::navigate::tape::Item;
use crate::scan;
use crate::validate::{DEFAULT_MAX_DEPTH, DuplicateKeys, Options};

/// The opaque document handle of the C ABI.
#[allow(non_camel_case_types)]
pub type qjson_doc = Document<'static>;

/// `qjson_options` of the header.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug)]
pub struct qjson_options {
    /// Deepest nesting; 0 means the default.
    pub max_depth: u32,
    /// `QJSON_DUPLICATE_KEYS_*`.
    pub duplicate_keys: i32,
}

/// `qjson_error` of the header.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct qjson_error {
    /// Error code.
    pub code: i32,
    /// Padding kept for the layout.
    pub reserved: u32,
    /// Byte offset.
    pub offset: u64,
    /// NUL-terminated message.
    pub message: [c_char; 256],
}

/// `qjson_value` of the header.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug)]
pub struct qjson_value {
    /// `QJSON_TYPE_*`.
    pub type_: i32,
    /// The value's cursor.
    pub cursor: u32,
    /// String bytes or raw text.
    pub str_: *const c_char,
    /// Length of `str_`, or a count.
    pub len: usize,
    /// A number as a double.
    pub num: f64,
    /// An exact integer, or the offset of a path error.
    pub i64_: i64,
}

/// An empty out-cell, for callers from Rust (tests, fuzz targets).
impl Default for qjson_value {
    fn default() -> Self {
        qjson_value {
            type_: 0,
            cursor: 0,
            str_: ptr::null(),
            len: 0,
            num: 0.0,
            i64_: 0,
        }
    }
}

// The layouts the header promises (x86_64 and other LP64 targets).
const _: () = {
    assert!(size_of::<qjson_options>() == 8 && align_of::<qjson_options>() == 4);
    assert!(size_of::<qjson_error>() == 272 && align_of::<qjson_error>() == 8);
    #[cfg(target_pointer_width = "64")]
    assert!(size_of::<qjson_value>() == 40 && align_of::<qjson_value>() == 8);
};

const OK: c_int = 0;

/// Runs `body`, turning a panic into `QJSON_INTERNAL`.
fn guarded(body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(ErrorCode::Internal as c_int)
}

/// Copies `text` into a NUL-terminated C buffer, cutting it to fit.
/// Formats straight into a fixed C buffer, truncating at a character
/// boundary and leaving room for the NUL, so reporting an error allocates
/// nothing.
struct CBuffer<'a> {
    buf: &'a mut [c_char],
    len: usize,
}

impl Write for CBuffer<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.len() - 1 - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        for (dst, &src) in self.buf[self.len..].iter_mut().zip(&s.as_bytes()[..n]) {
            *dst = src as c_char;
        }
        self.len += n;
        // A full buffer stops the formatting, so nothing is appended after
        // a cut.
        if n < s.len() {
            Err(core::fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// Fills `*out` (if not NULL) with `e`, formatted against `input`.
///
/// # Safety
/// `out` is NULL or valid for writes of a `qjson_error`.
unsafe fn report(out: *mut qjson_error, e: Error, input: &[u8]) {
    // SAFETY: the caller guarantees out is NULL or valid for writes.
    let Some(out) = (unsafe { out.as_mut() }) else {
        return;
    };
    out.code = e.code as i32;
    out.offset = e.offset as u64;
    let mut message = CBuffer {
        buf: &mut out.message,
        len: 0,
    };
    let _ = write!(message, "{}", e.display(input));
    let end = message.len;
    out.message[end] = 0;
}

/// The library version.
#[unsafe(no_mangle)]
pub extern "C" fn qjson_version() -> *const c_char {
    c"0.1.0".as_ptr()
}

/// The name of the active stage-1 kernel, or NULL when misconfigured.
#[unsafe(no_mangle)]
pub extern "C" fn qjson_kernel() -> *const c_char {
    let name = catch_unwind(|| scan::active_kernel().ok()).ok().flatten();
    match name {
        Some(scan::Kernel::Scalar) => c"scalar".as_ptr(),
        Some(scan::Kernel::Avx2) => c"avx2".as_ptr(),
        None => ptr::null(),
    }
}

/// Parses and validates `json[0..len)`.
///
/// # Safety
/// `json` is valid for reads of `len` bytes and stays alive and unchanged
/// until the returned document is freed; `options` is NULL or valid;
/// `error` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_parse(
    json: *const c_char,
    len: usize,
    options: *const qjson_options,
    error: *mut qjson_error,
) -> *mut qjson_doc {
    let mut handle = ptr::null_mut();
    let status = guarded(|| {
        // SAFETY: the caller guarantees json[0..len) is readable and
        // outlives the document (the 'static here is that promise).
        let Some(input): Option<&'static [u8]> = (unsafe { bytes(json, len) }) else {
            return bad_argument(error);
        };
        // SAFETY: the caller guarantees options is NULL or valid.
        let opts = match unsafe { options.as_ref() }.map(convert_options) {
            None => Options::default(),
            Some(Some(opts)) => opts,
            Some(None) => return bad_argument(error),
        };
        let mut doc = pool::take();
        match doc.load(input, &opts) {
            Ok(()) => {
                handle = Box::into_raw(doc);
                OK
            }
            Err(e) => {
                pool::give_back(doc);
                // SAFETY: the caller guarantees error is NULL or writable.
                unsafe { report(error, e, input) };
                e.code as c_int
            }
        }
    });
    if status == ErrorCode::Internal as c_int {
        // SAFETY: as above.
        unsafe { report(error, Error::new(ErrorCode::Internal, 0), &[]) };
    }
    handle
}

fn bad_argument(error: *mut qjson_error) -> c_int {
    // SAFETY: every caller passes through its own caller's guarantee that
    // error is NULL or writable.
    unsafe { report(error, Error::new(ErrorCode::BadArgument, 0), &[]) };
    ErrorCode::BadArgument as c_int
}

fn convert_options(o: &qjson_options) -> Option<Options> {
    let duplicate_keys = match o.duplicate_keys {
        0 => DuplicateKeys::LastWins,
        1 => DuplicateKeys::Error,
        _ => return None,
    };
    let max_depth = if o.max_depth == 0 {
        DEFAULT_MAX_DEPTH
    } else {
        o.max_depth
    };
    Some(Options {
        max_depth,
        duplicate_keys,
    })
}

/// Bytes of native heap held by a document (0 for NULL).
///
/// # Safety
/// `doc` is NULL or a live document from `qjson_parse`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_memory(doc: *const qjson_doc) -> usize {
    // SAFETY: the caller guarantees doc is NULL or a live document.
    unsafe { doc.as_ref() }.map_or(0, Document::retained_bytes)
}

/// Releases a document.
///
/// # Safety
/// `doc` is NULL or a live document from `qjson_parse`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_free(doc: *mut qjson_doc) {
    if doc.is_null() {
        return;
    }
    // SAFETY: the caller hands back ownership of a Box made by qjson_parse.
    let doc = unsafe { Box::from_raw(doc) };
    let _ = catch_unwind(AssertUnwindSafe(|| pool::give_back(doc)));
}

/// The shared part of every lookup: checks the arguments, follows the
/// path, and lets `read` fill in the value.
///
/// # Safety
/// `doc` is NULL or a live document; `path` is valid for `path_len` bytes
/// (or NULL with 0); `out` is NULL or valid for writes.
unsafe fn lookup(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    out: *mut qjson_value,
    read: impl FnOnce(&mut qjson_doc, u32, &mut qjson_value) -> c_int,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller guarantees doc is NULL or a live, unaliased
        // document and out is NULL or writable.
        let (Some(doc), Some(out)) = (unsafe { doc.as_mut() }, unsafe { out.as_mut() }) else {
            return ErrorCode::BadArgument as c_int;
        };
        // SAFETY: the caller guarantees path[0..path_len) is readable.
        let Some(path) = (unsafe { bytes(path, path_len) }) else {
            return ErrorCode::BadArgument as c_int;
        };
        match doc.find(cursor, path) {
            Ok(Some(at)) => {
                out.type_ = doc.value_type(at) as i32;
                out.cursor = at;
                read(doc, at, out)
            }
            Ok(None) => ErrorCode::NotFound as c_int,
            Err(e) => {
                out.i64_ = e.offset as i64;
                e.code as c_int
            }
        }
    })
}

/// Finds the value at `path` from `cursor`.
///
/// # Safety
/// See `lookup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_find(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    out: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe { lookup(doc, cursor, path, path_len, out, |_, _, _| OK) }
}

/// Finds a value and decodes it if it is a string or a number.
///
/// # Safety
/// See `lookup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_get(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    out: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe { lookup(doc, cursor, path, path_len, out, read_scalar) }
}

/// Fills `out` with the value at `at`: its type and cursor, and for a
/// string its decoded bytes, for a number its double.
fn read_scalar(doc: &mut qjson_doc, at: u32, out: &mut qjson_value) -> c_int {
    out.type_ = doc.value_type(at) as i32;
    out.cursor = at;
    match doc.value_type(at) {
        ValueType::String => {
            let s = doc.string(at);
            out.str_ = s.as_ptr().cast();
            out.len = s.len();
        }
        ValueType::Number => out.num = doc.f64(at),
        _ => {}
    }
    OK
}

/// `read_scalar` for a value that was found, else `QJSON_NOT_FOUND`.
fn read_found(doc: &mut qjson_doc, found: Option<u32>, out: &mut qjson_value) -> c_int {
    match found {
        Some(at) => read_scalar(doc, at, out),
        None => ErrorCode::NotFound as c_int,
    }
}

/// Hands a slice owned by the document to the caller as pointer and count.
fn hand_out<T>(slice: &[T], ptr: &mut *const T, count: &mut usize) -> c_int {
    *ptr = slice.as_ptr();
    *count = slice.len();
    OK
}

/// Runs `body` on a live document and a cursor that `accept` allows,
/// catching panics; `QJSON_BAD_ARGUMENT` for NULL pointers,
/// `QJSON_BAD_CURSOR` for a cursor `accept` refuses.
///
/// # Safety
/// `doc` is NULL or a live document, not used elsewhere during the call.
unsafe fn with_cursor(
    doc: *mut qjson_doc,
    cursor: u32,
    accept: fn(&qjson_doc, u32) -> bool,
    body: impl FnOnce(&mut qjson_doc) -> c_int,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller guarantees doc is NULL or a live, unaliased
        // document.
        let Some(doc) = (unsafe { doc.as_mut() }) else {
            return ErrorCode::BadArgument as c_int;
        };
        if !accept(doc, cursor) {
            return ErrorCode::BadCursor as c_int;
        }
        body(doc)
    })
}

/// Reads member `key` (decoded bytes, `key_len` long) of the object at
/// `cursor`, like `qjson_get`. No path syntax: any bytes are a key.
///
/// # Safety
/// `doc` is NULL or a live document; `key` is valid for `key_len` bytes
/// (or NULL with 0); `out` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_get_key(
    doc: *mut qjson_doc,
    cursor: u32,
    key: *const c_char,
    key_len: usize,
    out: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are with_cursor's.
    unsafe {
        with_cursor(doc, cursor, Document::is_value, |doc| {
            // SAFETY: out is NULL or valid for writes; key[0..key_len) is
            // readable or NULL.
            let (Some(out), Some(key)) = (out.as_mut(), bytes(key, key_len)) else {
                return ErrorCode::BadArgument as c_int;
            };
            let found = doc.member(cursor, key);
            read_found(doc, found, out)
        })
    }
}

/// Reads element `index` (0-based) of the array at `cursor`, like
/// `qjson_get`. O(1) amortised in any order of reads.
///
/// # Safety
/// `doc` is NULL or a live document; `out` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_get_index(
    doc: *mut qjson_doc,
    cursor: u32,
    index: usize,
    out: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are with_cursor's.
    unsafe {
        with_cursor(doc, cursor, Document::is_value, |doc| {
            // SAFETY: out is NULL or valid for writes.
            let Some(out) = out.as_mut() else {
                return ErrorCode::BadArgument as c_int;
            };
            let found = doc.element(cursor, index);
            read_found(doc, found, out)
        })
    }
}

/// The members of the object at `cursor` as key entries in document
/// order: all of them when `every` is nonzero, else those the duplicate-key
/// policy reads. Sets `*keys` to an array owned by the document (valid
/// until the next call on it) and `*count`.
///
/// # Safety
/// `doc` is NULL or a live document; `keys` and `count` are NULL or valid
/// for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_members(
    doc: *mut qjson_doc,
    cursor: u32,
    every: c_int,
    keys: *mut *const u32,
    count: *mut usize,
) -> c_int {
    // SAFETY: the caller's guarantees are with_cursor's.
    unsafe {
        with_cursor(doc, cursor, Document::is_value, |doc| {
            // SAFETY: keys and count are NULL or valid for writes.
            let (Some(keys), Some(count)) = (keys.as_mut(), count.as_mut()) else {
                return ErrorCode::BadArgument as c_int;
            };
            match doc.members(cursor, every != 0) {
                Some(members) => hand_out(members, keys, count),
                None => ErrorCode::TypeMismatch as c_int,
            }
        })
    }
}

/// Reads the member whose key is at entry `key_entry` (from
/// `qjson_members`): `key->str/len` the decoded key and `key->i64` the
/// byte offset of its opening quote; `value` as `qjson_get` fills it.
///
/// # Safety
/// `doc` is NULL or a live document; `key` and `value` are NULL or valid
/// for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_member(
    doc: *mut qjson_doc,
    key_entry: u32,
    key: *mut qjson_value,
    value: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are with_cursor's.
    unsafe {
        with_cursor(doc, key_entry, Document::is_key, |doc| {
            // SAFETY: key and value are NULL or valid for writes.
            let (Some(key), Some(value)) = (key.as_mut(), value.as_mut()) else {
                return ErrorCode::BadArgument as c_int;
            };
            key.type_ = ValueType::String as i32;
            key.cursor = key_entry;
            key.i64_ = doc.index().positions[key_entry as usize] as i64;
            let name = doc.key(key_entry);
            key.str_ = name.as_ptr().cast();
            key.len = name.len();
            // key, closing quote, colon, value.
            read_scalar(doc, key_entry + 3, value)
        })
    }
}

/// The tape of the value at `cursor` (see `qjson_item` in the header):
/// sets `*items` to an array owned by the document, valid until the next
/// call on it, and `*count`.
///
/// # Safety
/// `doc` is NULL or a live document; `items` and `count` are NULL or valid
/// for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_tape(
    doc: *mut qjson_doc,
    cursor: u32,
    items: *mut *const Item,
    count: *mut usize,
) -> c_int {
    // SAFETY: the caller's guarantees are with_cursor's.
    unsafe {
        with_cursor(doc, cursor, Document::is_value, |doc| {
            // SAFETY: items and count are NULL or valid for writes.
            let (Some(items), Some(count)) = (items.as_mut(), count.as_mut()) else {
                return ErrorCode::BadArgument as c_int;
            };
            hand_out(doc.tape(cursor), items, count)
        })
    }
}

/// `ptr[0..len)` as bytes; an empty slice for NULL with 0, `None` for NULL
/// with a length.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `len` bytes for `'a`.
unsafe fn bytes<'a>(ptr: *const c_char, len: usize) -> Option<&'a [u8]> {
    if len > isize::MAX as usize {
        return None;
    }
    if ptr.is_null() {
        return (len == 0).then_some(&[]);
    }
    // SAFETY: the caller guarantees ptr[0..len) is readable.
    Some(unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Reads a number as an exact `i64`.
///
/// # Safety
/// See `lookup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_get_i64(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    out: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(doc, cursor, path, path_len, out, |doc, at, out| {
            if doc.value_type(at) != ValueType::Number {
                return ErrorCode::TypeMismatch as c_int;
            }
            match doc.i64(at) {
                Ok(v) => {
                    out.i64_ = v;
                    OK
                }
                Err(code) => code as c_int,
            }
        })
    }
}

/// Counts elements or distinct keys.
///
/// # Safety
/// See `lookup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_len(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    out: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(doc, cursor, path, path_len, out, |doc, at, out| {
            match doc.len(at) {
                Some(n) => {
                    out.len = n;
                    OK
                }
                None => ErrorCode::TypeMismatch as c_int,
            }
        })
    }
}

/// The exact source text of a value.
///
/// # Safety
/// See `lookup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_raw(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    out: *mut qjson_value,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(doc, cursor, path, path_len, out, |doc, at, out| {
            let raw = doc.raw(at);
            out.str_ = raw.as_ptr().cast();
            out.len = raw.len();
            OK
        })
    }
}

/// A `lua_CFunction` that pushes the NULL light userdata and returns 1
/// (0 if the host process has no Lua API).
///
/// The Lua API is looked up in the process at call time rather than
/// linked, so the library loads in processes without Lua too.
///
/// # Safety
/// Called by Lua with its own `lua_State`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_lua_null(state: *mut c_void) -> c_int {
    unsafe extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    /// glibc's and musl's RTLD_DEFAULT.
    const RTLD_DEFAULT: *mut c_void = ptr::null_mut();
    type PushLightUserdata = unsafe extern "C" fn(*mut c_void, *mut c_void);
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let symbol = unsafe { dlsym(RTLD_DEFAULT, c"lua_pushlightuserdata".as_ptr()) };
    if symbol.is_null() {
        return 0;
    }
    // SAFETY: lua_pushlightuserdata has this signature in every Lua 5.1
    // API, LuaJIT's included.
    let push: PushLightUserdata = unsafe { core::mem::transmute(symbol) };
    // SAFETY: Lua called us with its state; pushing one value is within
    // the LUA_MINSTACK slots every C function may use.
    unsafe { push(state, ptr::null_mut()) };
    1
}

/// Escapes a prefix of `src[..len]` into `dst[..cap]` like lua-cjson;
/// returns the bytes written and sets `*consumed` to the source bytes they
/// cover (never a cut escape).
///
/// # Safety
/// `src` is valid for `len` reads, `dst` for `cap` writes, `consumed` for
/// one write; `dst` does not overlap `src`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_escape(
    src: *const c_char,
    len: usize,
    escape_slash: c_int,
    dst: *mut c_char,
    cap: usize,
    consumed: *mut usize,
) -> usize {
    let mut written = 0;
    let status = guarded(|| {
        if src.is_null() || dst.is_null() || consumed.is_null() {
            return ErrorCode::BadArgument as c_int;
        }
        // SAFETY: the caller guarantees both ranges and that they do not
        // overlap.
        let (src, dst) = unsafe {
            (
                core::slice::from_raw_parts(src.cast::<u8>(), len),
                core::slice::from_raw_parts_mut(dst.cast::<u8>(), cap),
            )
        };
        let (read, wrote) = escape::escape(src, escape_slash != 0, dst);
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { *consumed = read };
        written = wrote;
        OK
    });
    if status != OK && !consumed.is_null() {
        // SAFETY: as above.
        unsafe { *consumed = 0 };
    }
    written
}
