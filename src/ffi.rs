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

use crate::document::{Document, SCRATCH_KEEP_BYTES, pool, small};
use crate::eager;
use crate::error::{Error, ErrorCode};
use crate::escape;
use crate::lua_api;
use crate::navigate::ValueType;
use crate::navigate::spans::Span;
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
    /// An exact integer, the members of an object counting repeated keys
    /// (`qjson_len`), whether a member's key may be repeated
    /// (`qjson_get_key`, `qjson_raw_key`: 2, else 1), or the offset of a
    /// path error.
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

/// What a reader owns (`qjson_scratch`, opaque in the header), made and
/// freed with it.
#[derive(Default)]
struct ReaderMemory {
    /// What its results point into.
    results: Scratch,
    /// The small documents it keeps parsed (see `document::small`): in
    /// the reader rather than in each thread, so that a small parse and
    /// every read of its document reach them with no thread-local lookup.
    small: small::Slots,
}

/// The memory a reader's results point into: decoded strings and keys,
/// member lists, tapes.
#[derive(Default)]
pub struct Scratch {
    text: Vec<u8>,
    key_text: Vec<u8>,
    keys: Vec<u32>,
    tape: Vec<Item>,
    tape_arena: Vec<u8>,
    spans: Vec<Span>,
    winners: Vec<u32>,
}

impl Scratch {
    /// Gives back each buffer of more than [`SCRATCH_KEEP_BYTES`] that no
    /// read has filled past that size since the last trim; returns the
    /// bytes the buffers still hold. Each read empties the buffer it
    /// fills first, so a buffer's length is what the last read left in it:
    /// a trim empties the large buffers it keeps, and one still short at
    /// the next trim was not needed at that size in between. Untrimmed, one
    /// read of a string decoding to 2 MiB kept those bytes for the
    /// worker's life (spec/ffi_spec.lua, "the shared reader"); a worker
    /// that reads such strings all the time keeps its buffer.
    fn trim(&mut self) -> usize {
        trim(&mut self.text)
            + trim(&mut self.key_text)
            + trim(&mut self.keys)
            + trim(&mut self.tape)
            + trim(&mut self.tape_arena)
            + trim(&mut self.spans)
            + trim(&mut self.winners)
    }
}

/// [`Scratch::trim`] of one buffer: the bytes it holds after.
fn trim<T>(buffer: &mut Vec<T>) -> usize {
    let bytes = |n: usize| n * size_of::<T>();
    if bytes(buffer.capacity()) > SCRATCH_KEEP_BYTES {
        if bytes(buffer.len()) > SCRATCH_KEEP_BYTES {
            buffer.clear();
        } else {
            *buffer = Vec::new();
        }
    }
    bytes(buffer.capacity())
}

/// `qjson_reader` of the header: where every call leaves its results, and
/// (through `scratch`) the memory they point into.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct qjson_reader {
    /// Lookups: the value found.
    pub value: qjson_value,
    /// `qjson_member`: the key.
    pub key: qjson_value,
    /// `qjson_members`: the key entries.
    pub keys: *const u32,
    /// `qjson_tape`: the items.
    pub items: *const Item,
    /// `qjson_spans`: the members or elements.
    pub spans: *const Span,
    /// How many keys or items; `qjson_escape`: bytes consumed.
    pub count: usize,
    /// `qjson_parse`: why the text was rejected.
    pub error: qjson_error,
    /// Owned by the reader; made and freed with it.
    scratch: *mut ReaderMemory,
}

// The layouts the header promises (x86_64 and other LP64 targets).
const _: () = {
    assert!(size_of::<qjson_options>() == 8 && align_of::<qjson_options>() == 4);
    assert!(size_of::<qjson_error>() == 272 && align_of::<qjson_error>() == 8);
    #[cfg(target_pointer_width = "64")]
    assert!(size_of::<qjson_value>() == 40 && align_of::<qjson_value>() == 8);
    #[cfg(target_pointer_width = "64")]
    assert!(size_of::<qjson_reader>() == 392 && align_of::<qjson_reader>() == 8);
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
        Some(scan::Kernel::Avx512) => c"avx512".as_ptr(),
        Some(scan::Kernel::Neon) => c"neon".as_ptr(),
        None => ptr::null(),
    }
}

/// A new reader, or NULL if memory ran out.
#[unsafe(no_mangle)]
pub extern "C" fn qjson_reader_new() -> *mut qjson_reader {
    catch_unwind(|| {
        Box::into_raw(Box::new(qjson_reader {
            value: qjson_value::default(),
            key: qjson_value::default(),
            keys: ptr::null(),
            items: ptr::null(),
            spans: ptr::null(),
            count: 0,
            error: qjson_error {
                code: 0,
                reserved: 0,
                offset: 0,
                message: [0; 256],
            },
            scratch: Box::into_raw(Box::<ReaderMemory>::default()),
        }))
    })
    .unwrap_or(ptr::null_mut())
}

/// Releases a reader made by `qjson_reader_new`.
///
/// # Safety
/// `reader` is NULL or came from `qjson_reader_new` and is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_reader_free(reader: *mut qjson_reader) {
    if reader.is_null() {
        return;
    }
    // SAFETY: the caller hands back ownership of a Box made by
    // qjson_reader_new, whose scratch is a Box it made too.
    let reader = unsafe { Box::from_raw(reader) };
    // SAFETY: as above.
    drop(unsafe { Box::from_raw(reader.scratch) });
}

/// The reader's results, the memory they point into and its small
/// documents, borrowed separately.
///
/// # Safety
/// `reader` is NULL or a live reader from `qjson_reader_new`, not used
/// elsewhere during the borrow.
unsafe fn split<'r>(
    reader: *mut qjson_reader,
) -> Option<(&'r mut qjson_reader, &'r mut Scratch, &'r mut small::Slots)> {
    // SAFETY: the caller guarantees reader is NULL or live and unaliased;
    // its memory is a separate allocation it owns.
    let reader = unsafe { reader.as_mut() }?;
    // SAFETY: as above; a reader made elsewhere than qjson_reader_new may
    // carry NULL here, which is refused.
    let memory = unsafe { reader.scratch.as_mut() }?;
    Some((reader, &mut memory.results, &mut memory.small))
}

/// The small documents of `reader`, or `None` for NULL.
///
/// # Safety
/// As [`split`].
unsafe fn small_slots<'r>(reader: *mut qjson_reader) -> Option<&'r mut small::Slots> {
    // SAFETY: the caller's guarantees are split's.
    unsafe { split(reader) }.map(|(_, _, small)| small)
}

/// Parses and validates `json[0..len)`; on success sets `reader.count` to
/// the bytes to charge the caller's collector for
/// (`Document::charged_bytes`), on failure returns NULL and
/// leaves the reason in `reader.error` (when `reader` is not NULL).
///
/// # Safety
/// `json` is valid for reads of `len` bytes and stays alive and unchanged
/// until the returned document is freed; `options` is NULL or valid;
/// `reader` is NULL or a live reader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_parse(
    json: *const c_char,
    len: usize,
    options: *const qjson_options,
    reader: *mut qjson_reader,
) -> *mut qjson_doc {
    // SAFETY: the caller's guarantees are parse_pooled's.
    unsafe { parse_pooled(json, len, options, reader, Document::load) }
}

/// [`qjson_parse`] of a copy of `json[0..len)` that the document makes and
/// owns (`Document::load_copy`), for a text that may be freed or changed
/// once the call returns; on success `reader.value.str` is the copy's
/// first byte (valid as long as the document), and `reader.count`
/// includes the copy.
///
/// # Safety
/// `json` is valid for reads of `len` bytes during the call; `options` is
/// NULL or valid; `reader` is NULL or a live reader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_parse_copy(
    json: *const c_char,
    len: usize,
    options: *const qjson_options,
    reader: *mut qjson_reader,
) -> *mut qjson_doc {
    // SAFETY: the caller's guarantees are parse_pooled's, but for the
    // text's life: `load_copy` keeps nothing of it once it returns. What
    // the document gives out of its copy is read only while the caller
    // holds the document, as for every document (include/qjson.h), which
    // is `load_copy`'s condition.
    let handle = unsafe {
        parse_pooled(json, len, options, reader, |doc, text, opts| {
            doc.load_copy(text, opts)
        })
    };
    // SAFETY: the caller guarantees reader is NULL or live; a handle that
    // is not NULL is a live document, just made.
    if let (Some(r), Some(doc)) = (unsafe { reader.as_mut() }, unsafe { handle.as_ref() }) {
        r.value.str_ = doc.src().as_ptr().cast();
        r.value.len = len;
    }
    handle
}

/// A document from the pool loaded by `load` with the text and options
/// (see [`parse_with`]), or NULL.
///
/// # Safety
/// As [`parse_with`].
unsafe fn parse_pooled(
    json: *const c_char,
    len: usize,
    options: *const qjson_options,
    reader: *mut qjson_reader,
    load: fn(&mut Document<'static>, &'static [u8], &Options) -> Result<(), Error>,
) -> *mut qjson_doc {
    let mut handle = ptr::null_mut();
    // SAFETY: the caller's guarantees are parse_with's.
    unsafe {
        parse_with(json, len, options, reader, |input, opts| {
            let mut doc = pool::take();
            match load(&mut doc, input, opts) {
                Ok(()) => {
                    let charged = doc.charged_bytes();
                    handle = Box::into_raw(doc);
                    Ok(charged)
                }
                Err(e) => {
                    pool::give_back(doc);
                    Err(e)
                }
            }
        })
    };
    handle
}

/// Parses and validates `json[0..len)` (at most `QJSON_SMALL_MAX_BYTES`)
/// into memory `reader` keeps, and fills `block` (allocated by the
/// caller) to name the document; returns the document's handle for reads
/// (the block's address, tagged: see `is_small`), or NULL with the reason
/// in `reader.error` as `qjson_parse` (`QJSON_BAD_ARGUMENT`, reported
/// nowhere, for a NULL reader). See `document::small`.
///
/// # Safety
/// As `qjson_parse`, with the text alive and unchanged as long as the
/// handle is used; `block` is valid for writes of a `qjson_small` and
/// stays where it is as long.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_parse_small(
    json: *const c_char,
    len: usize,
    options: *const qjson_options,
    block: *mut small::Block,
    reader: *mut qjson_reader,
) -> *mut qjson_doc {
    // SAFETY: the caller guarantees reader is NULL or live; parse_with
    // borrows the reader itself, never its memory.
    let slots = unsafe { small_slots(reader) };
    let load = |input: &'static [u8], opts: &Options| {
        // SAFETY: the caller guarantees block is NULL or valid for writes.
        let (Some(block), Some(slots)) = (unsafe { block.as_mut() }, slots) else {
            return Err(Error::new(ErrorCode::BadArgument, 0));
        };
        // SAFETY: the text and the block stay as long as the handle is
        // used (the caller's guarantee).
        unsafe { slots.parse(input, opts, block) }?;
        Ok(0)
    };
    // SAFETY: the caller's guarantees are parse_with's.
    match unsafe { parse_with(json, len, options, reader, load) } {
        OK => small_handle(block),
        _ => ptr::null_mut(),
    }
}

/// The shared part of the parses: checks the arguments, runs `load` on the
/// text and options, and reports its outcome in `reader` (`count`, or
/// `error`).
///
/// # Safety
/// `json` is valid for reads of `len` bytes and outlives what `load` makes
/// of it; `options` is NULL or valid; `reader` is NULL or a live reader.
unsafe fn parse_with(
    json: *const c_char,
    len: usize,
    options: *const qjson_options,
    reader: *mut qjson_reader,
    load: impl FnOnce(&'static [u8], &Options) -> Result<usize, Error>,
) -> c_int {
    // SAFETY: the caller guarantees reader is NULL or live.
    let error = unsafe { reader.as_mut() }.map_or(ptr::null_mut(), |r| &raw mut r.error);
    let mut count = 0;
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
        match load(input, &opts) {
            Ok(n) => {
                count = n;
                OK
            }
            Err(e) => {
                // SAFETY: error is NULL or points into the live reader.
                unsafe { report(error, e, input) };
                e.code as c_int
            }
        }
    });
    if status == ErrorCode::Internal as c_int {
        // SAFETY: as above.
        unsafe { report(error, Error::new(ErrorCode::Internal, 0), &[]) };
    }
    // SAFETY: as above.
    if let Some(r) = unsafe { reader.as_mut() } {
        r.count = count;
    }
    status
}

fn bad_argument(error: *mut qjson_error) -> c_int {
    // SAFETY: every caller passes an error that is NULL or points into a
    // live reader.
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

/// Bytes of native heap held by a document: the document itself and
/// what it retains (0 for NULL and for a small document, whose memory is
/// its block).
///
/// # Safety
/// `doc` is NULL or a live document from `qjson_parse` or `qjson_parse_small`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_memory(doc: *const qjson_doc) -> usize {
    if is_small(doc) {
        return 0;
    }
    // SAFETY: the caller guarantees doc is NULL or a live document.
    unsafe { doc.as_ref() }.map_or(0, |d| size_of::<Document>() + d.retained_bytes())
}

/// Ends a collection cycle for the pool of freed documents (see
/// `pool::cycle_ended`).
#[unsafe(no_mangle)]
pub extern "C" fn qjson_pool_cycle() {
    let _ = catch_unwind(pool::cycle_ended);
}

/// Gives back the reader's memory that calls no longer need (see
/// `Scratch::trim`), once per collection cycle of the caller's, as
/// `qjson_pool_cycle`; returns the bytes its results' memory still holds
/// (0 for NULL).
///
/// # Safety
/// `reader` is NULL or a live reader from `qjson_reader_new`, and no
/// result of an earlier call given it is read afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_reader_trim(reader: *mut qjson_reader) -> usize {
    // SAFETY: the caller guarantees reader is NULL or live and that its
    // results are no longer read.
    let Some((_, scratch, _)) = (unsafe { split(reader) }) else {
        return 0;
    };
    catch_unwind(AssertUnwindSafe(|| scratch.trim())).unwrap_or(0)
}

/// Added to a block's address by `qjson_parse_small`, it makes the handle
/// of a small document: documents and blocks are 8-byte aligned, so a
/// document's handle never has this bit set.
const SMALL_TAG: usize = 1;

/// Whether `doc` is the handle of a small document's block.
fn is_small(doc: *const qjson_doc) -> bool {
    doc.addr() & SMALL_TAG != 0
}

/// The handle of the small document `block` names.
fn small_handle(block: *mut small::Block) -> *mut qjson_doc {
    block.cast::<u8>().wrapping_add(SMALL_TAG).cast()
}

/// The block of a small document's handle (see [`is_small`]).
fn small_block(doc: *mut qjson_doc) -> *const small::Block {
    doc.cast::<u8>().wrapping_sub(SMALL_TAG).cast()
}

/// Releases a document.
///
/// # Safety
/// `doc` is NULL or a live document from `qjson_parse`, not used again, or
/// one from `qjson_parse_small` (ignored: it holds no native memory).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_free(doc: *mut qjson_doc) {
    if doc.is_null() || is_small(doc) {
        return;
    }
    // SAFETY: the caller hands back ownership of a Box made by qjson_parse.
    let doc = unsafe { Box::from_raw(doc) };
    let _ = catch_unwind(AssertUnwindSafe(|| pool::give_back(doc)));
}

/// Runs `body` on a live document and reader, catching panics;
/// `QJSON_BAD_ARGUMENT` for NULL pointers (or a reader not made by
/// `qjson_reader_new`).
///
/// # Safety
/// `doc` is NULL or a live document and `reader` NULL or a live reader,
/// neither used elsewhere during the call.
unsafe fn with_reader(
    doc: *mut qjson_doc,
    reader: *mut qjson_reader,
    body: impl FnOnce(&mut qjson_doc, &mut qjson_reader, &mut Scratch) -> c_int,
) -> c_int {
    guarded(|| {
        // SAFETY: the caller guarantees reader is NULL or live.
        let Some((reader, scratch, slots)) = (unsafe { split(reader) }) else {
            return ErrorCode::BadArgument as c_int;
        };
        let doc = if is_small(doc) {
            // SAFETY: the caller guarantees a block qjson_parse_small
            // filled, over a text still alive and unchanged.
            unsafe { slots.attach(small_block(doc)) }
        } else {
            // SAFETY: the caller guarantees doc is NULL or a live,
            // unaliased document.
            unsafe { doc.as_mut() }
        };
        let Some(doc) = doc else {
            return ErrorCode::BadArgument as c_int;
        };
        body(doc, reader, scratch)
    })
}

/// The shared part of every path lookup: checks the arguments, follows
/// the path, sets `reader.value`'s type and cursor and lets `read` fill in
/// the rest (with the reader's buffer for a decoded string).
///
/// # Safety
/// As `with_reader`; `path` is valid for `path_len` bytes (or NULL with 0).
unsafe fn lookup(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    reader: *mut qjson_reader,
    read: impl FnOnce(&mut qjson_doc, u32, &mut qjson_value, &mut Vec<u8>) -> c_int,
) -> c_int {
    // SAFETY: the caller's guarantees are with_reader's.
    unsafe {
        with_reader(doc, reader, |doc, reader, scratch| {
            // SAFETY: the caller guarantees path[0..path_len) is readable.
            let Some(path) = bytes(path, path_len) else {
                return ErrorCode::BadArgument as c_int;
            };
            let out = &mut reader.value;
            match doc.find(cursor, path) {
                Ok(Some(at)) => {
                    out.type_ = doc.value_type(at) as i32;
                    out.cursor = at;
                    read(doc, at, out, &mut scratch.text)
                }
                Ok(None) => ErrorCode::NotFound as c_int,
                Err(e) => {
                    out.i64_ = e.offset as i64;
                    e.code as c_int
                }
            }
        })
    }
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
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe { lookup(doc, cursor, path, path_len, reader, |_, _, _, _| OK) }
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
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(doc, cursor, path, path_len, reader, |doc, at, out, text| {
            read_scalar(doc, at, out, text)
        })
    }
}

/// Fills `out` with the value at `at`: its type and cursor, and for a
/// string its decoded bytes (in `text` when they need decoding), for a
/// number its double, for an array its element count. Inlined into each
/// read: the value's type, read once, picks the branch.
#[inline(always)]
fn read_scalar(doc: &qjson_doc, at: u32, out: &mut qjson_value, text: &mut Vec<u8>) -> c_int {
    let value_type = doc.value_type(at);
    out.type_ = value_type as i32;
    out.cursor = at;
    match value_type {
        ValueType::String => {
            let s = doc.string(at, text);
            out.str_ = s.as_ptr().cast();
            out.len = s.len();
        }
        ValueType::Number => out.num = doc.f64(at),
        ValueType::Array => out.len = doc.tree().count(at) as usize,
        _ => {}
    }
    OK
}

/// Fills `out` with the value at `at` as its exact source text: its type,
/// cursor, and bytes of the text (`qjson_raw`, `qjson_raw_key`).
fn read_raw(doc: &qjson_doc, at: u32, out: &mut qjson_value, _: &mut Vec<u8>) -> c_int {
    let raw = doc.raw(at);
    out.type_ = doc.value_type(at) as i32;
    out.cursor = at;
    out.str_ = raw.as_ptr().cast();
    out.len = raw.len();
    OK
}

/// `read_scalar` into `reader.value` for a value that was found, else
/// `QJSON_NOT_FOUND`.
fn read_found(
    doc: &qjson_doc,
    found: Option<u32>,
    reader: &mut qjson_reader,
    scratch: &mut Scratch,
) -> c_int {
    match found {
        Some(at) => read_scalar(doc, at, &mut reader.value, &mut scratch.text),
        None => ErrorCode::NotFound as c_int,
    }
}

/// The value of member `key` (decoded bytes, `key_len` long, or NULL
/// with 0) of the object at `cursor`, read into `reader.value` by `read`;
/// with `repeats`, `value.i64_` is 2 when other members may have the key
/// (a change must drop them too: `Document::member_repeated`), else 1.
/// `QJSON_NOT_FOUND` when there is none. A read without `repeats` walks
/// the members from the last and stops at the first match
/// (`Document::member`).
///
/// # Safety
/// As `with_reader`; `key` is valid for `key_len` bytes (or NULL with 0).
unsafe fn with_member(
    doc: *mut qjson_doc,
    cursor: u32,
    key: *const c_char,
    key_len: usize,
    reader: *mut qjson_reader,
    repeats: bool,
    read: impl FnOnce(&qjson_doc, u32, &mut qjson_value, &mut Vec<u8>) -> c_int,
) -> c_int {
    // SAFETY: the caller's guarantees are with_reader's.
    unsafe {
        with_reader(doc, reader, |doc, reader, scratch| {
            // SAFETY: key[0..key_len) is readable or NULL.
            let Some(key) = bytes(key, key_len) else {
                return ErrorCode::BadArgument as c_int;
            };
            if !doc.is_value(cursor) {
                return ErrorCode::BadCursor as c_int;
            }
            let found = if repeats {
                doc.member_repeated(cursor, key)
            } else {
                doc.member(cursor, key).map(|at| (at, false))
            };
            match found {
                Some((at, repeated)) => {
                    if repeats {
                        reader.value.i64_ = 1 + i64::from(repeated);
                    }
                    read(doc, at, &mut reader.value, &mut scratch.text)
                }
                None => ErrorCode::NotFound as c_int,
            }
        })
    }
}

/// Reads member `key` (decoded bytes, `key_len` long) of the object at
/// `cursor`, like `qjson_get`. No path syntax: any bytes are a key.
///
/// # Safety
/// As `with_reader`; `key` is valid for `key_len` bytes (or NULL with 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_get_key(
    doc: *mut qjson_doc,
    cursor: u32,
    key: *const c_char,
    key_len: usize,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are with_member's.
    unsafe { with_member(doc, cursor, key, key_len, reader, false, read_scalar) }
}

/// The exact source text of member `key` of the object at `cursor`, as
/// `qjson_raw` gives it, and its cursor: where a change to that member
/// goes, in one call; `value.i64` as `with_member` sets it.
///
/// # Safety
/// As `with_reader`; `key` is valid for `key_len` bytes (or NULL with 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_raw_key(
    doc: *mut qjson_doc,
    cursor: u32,
    key: *const c_char,
    key_len: usize,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are with_member's.
    unsafe { with_member(doc, cursor, key, key_len, reader, true, read_raw) }
}

/// Reads element `index` (0-based) of the array at `cursor`, like
/// `qjson_get`. O(1) amortised in any order of reads.
///
/// # Safety
/// As `with_reader`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_get_index(
    doc: *mut qjson_doc,
    cursor: u32,
    index: usize,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are with_reader's.
    unsafe {
        with_reader(doc, reader, |doc, reader, scratch| {
            if !doc.is_value(cursor) {
                return ErrorCode::BadCursor as c_int;
            }
            let found = doc.element(cursor, index);
            read_found(doc, found, reader, scratch)
        })
    }
}

/// The members of the object at `cursor` as key entries in document
/// order, in `reader.keys` and `reader.count`: all of them when `every` is
/// nonzero, else those the duplicate-key policy reads.
///
/// # Safety
/// As `with_reader`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_members(
    doc: *mut qjson_doc,
    cursor: u32,
    every: c_int,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are with_reader's.
    unsafe {
        with_reader(doc, reader, |doc, reader, scratch| {
            if !doc.is_value(cursor) {
                return ErrorCode::BadCursor as c_int;
            }
            match doc.members(cursor, every != 0, &mut scratch.keys) {
                Some(members) => {
                    reader.keys = members.as_ptr();
                    reader.count = members.len();
                    OK
                }
                None => ErrorCode::TypeMismatch as c_int,
            }
        })
    }
}

/// Reads the member whose key is at entry `key_entry` (from
/// `qjson_members`): `reader.key` gets the decoded key (`i64` the byte
/// offset of its opening quote), `reader.value` the value as `qjson_get`
/// fills it.
///
/// # Safety
/// As `with_reader`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_member(
    doc: *mut qjson_doc,
    key_entry: u32,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are with_reader's.
    unsafe {
        with_reader(doc, reader, |doc, reader, scratch| {
            if !doc.is_key(key_entry) {
                return ErrorCode::BadCursor as c_int;
            }
            let key = &mut reader.key;
            key.type_ = ValueType::String as i32;
            key.cursor = key_entry;
            key.i64_ = doc.index().positions[key_entry as usize] as i64;
            let name = doc.string(key_entry, &mut scratch.key_text);
            key.str_ = name.as_ptr().cast();
            key.len = name.len();
            // key, closing quote, colon, value.
            read_scalar(doc, key_entry + 3, &mut reader.value, &mut scratch.text)
        })
    }
}

/// The tape of the value at `cursor` (see `qjson_item` in the header), in
/// `reader.items` and `reader.count`.
///
/// # Safety
/// As `with_reader`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_tape(
    doc: *mut qjson_doc,
    cursor: u32,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are with_reader's.
    unsafe {
        with_reader(doc, reader, |doc, reader, scratch| {
            if !doc.is_value(cursor) {
                return ErrorCode::BadCursor as c_int;
            }
            let items = doc.tape(cursor, &mut scratch.tape, &mut scratch.tape_arena);
            reader.items = items.as_ptr();
            reader.count = items.len();
            OK
        })
    }
}

/// The members (every one) or elements of the container at `cursor` with
/// their byte spans, in `reader.spans` and `reader.count`, keys decoded when
/// `keys` is nonzero; `reader.value` gets the container's own source text
/// as `qjson_raw` fills it.
///
/// # Safety
/// As `with_reader`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_spans(
    doc: *mut qjson_doc,
    cursor: u32,
    keys: c_int,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are with_reader's.
    unsafe {
        with_reader(doc, reader, |doc, reader, scratch| {
            if !doc.is_value(cursor) {
                return ErrorCode::BadCursor as c_int;
            }
            let raw = doc.raw(cursor);
            let out = &mut reader.value;
            out.type_ = doc.value_type(cursor) as i32;
            out.cursor = cursor;
            out.str_ = raw.as_ptr().cast();
            out.len = raw.len();
            let Scratch {
                spans,
                winners,
                key_text,
                ..
            } = scratch;
            match doc.spans(cursor, keys != 0, winners, spans, key_text) {
                Some(spans) => {
                    reader.spans = spans.as_ptr();
                    reader.count = spans.len();
                    OK
                }
                None => ErrorCode::TypeMismatch as c_int,
            }
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
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(doc, cursor, path, path_len, reader, |doc, at, out, _| {
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

/// Counts elements or distinct keys; `i64` gets the members of an object
/// counting repeated keys (the elements of an array), so one call tells
/// whether an object repeats a key.
///
/// # Safety
/// See `lookup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_len(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(
            doc,
            cursor,
            path,
            path_len,
            reader,
            |doc, at, out, _| match doc.len(at) {
                Some(n) => {
                    out.len = n;
                    out.i64_ = i64::from(doc.tree().count(at));
                    OK
                }
                None => ErrorCode::TypeMismatch as c_int,
            },
        )
    }
}

/// Whether the value at path nests containers more than `levels` deep,
/// itself counted: `value.len` 1 or 0. For an encoder under a lower depth
/// limit than the document was parsed with, before it copies the value's
/// source text.
///
/// # Safety
/// See `lookup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_nests_deeper(
    doc: *mut qjson_doc,
    cursor: u32,
    path: *const c_char,
    path_len: usize,
    levels: u32,
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(doc, cursor, path, path_len, reader, |doc, at, out, _| {
            out.len = usize::from(doc.nests_deeper_than(at, levels));
            OK
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
    reader: *mut qjson_reader,
) -> c_int {
    // SAFETY: the caller's guarantees are lookup's.
    unsafe {
        lookup(doc, cursor, path, path_len, reader, |doc, at, out, text| {
            read_raw(doc, at, out, text)
        })
    }
}

/// A `lua_CFunction` that pushes the NULL light userdata and returns 1
/// (0 if the host process has no Lua API to be found: see
/// [`crate::lua_api`]).
///
/// # Safety
/// Called by Lua with its own `lua_State`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn qjson_lua_null(state: *mut c_void) -> c_int {
    let Some(api) = lua_api::api() else {
        return 0;
    };
    // SAFETY: Lua called us with its state; pushing one value is within
    // the LUA_MINSTACK slots every C function may use.
    unsafe { (api.pushlightuserdata)(state, ptr::null_mut()) };
    1
}

/// `qjson_shaped` of the header.
#[allow(non_camel_case_types)]
pub type qjson_shaped = eager::shape::Shaped;

/// `qjson_shapes` of the header (opaque).
#[allow(non_camel_case_types)]
pub type qjson_shapes = eager::shape::Shapes;

/// A new registry of shape ids, or NULL when out of memory.
#[unsafe(no_mangle)]
pub extern "C" fn qjson_shapes_new() -> *mut qjson_shapes {
    catch_unwind(|| Box::into_raw(Box::<qjson_shapes>::default())).unwrap_or(ptr::null_mut())
}

/// Frees a registry from `qjson_shapes_new` (NULL is ignored).
///
/// # Safety
/// `shapes` is NULL or from `qjson_shapes_new`, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_shapes_free(shapes: *mut qjson_shapes) {
    if !shapes.is_null() {
        // SAFETY: from Box::into_raw in qjson_shapes_new, freed once.
        drop(unsafe { Box::from_raw(shapes) });
    }
}

/// Eager decode of a small text by shape (see [`eager::shape`]): returns
/// the id of the text's shape in `shapes` with its values and the shape
/// in `out`, or 0 when the caller should decode it another way
/// (`qjson_lua_decode`, which reports errors).
///
/// # Safety
/// `json` is valid for reads of `len` bytes, `options` is valid, `shapes`
/// is a live registry no other thread uses meanwhile, `out` is valid for
/// writes; the strings `out` points to live until the text is freed or
/// this thread's next call, the shape as long as the registry.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_decode_shaped(
    json: *const c_char,
    len: usize,
    options: *const qjson_options,
    shapes: *mut qjson_shapes,
    out: *mut qjson_shaped,
) -> u32 {
    // SAFETY: each is NULL or valid, and `shapes` and `out` are the
    // caller's alone during the call (its guarantees).
    let (Some(options), Some(shapes), Some(out)) = (
        unsafe { options.as_ref() },
        unsafe { shapes.as_mut() },
        unsafe { out.as_mut() },
    ) else {
        return 0;
    };
    let Some(opts) = convert_options(options) else {
        return 0;
    };
    if json.is_null() {
        return 0;
    }
    // SAFETY: json is valid for len bytes (the caller's guarantee).
    let Some(input) = (unsafe { bytes(json, len) }) else {
        return 0;
    };
    catch_unwind(AssertUnwindSafe(|| {
        eager::shape::decode(input, &opts, shapes, out)
    }))
    .unwrap_or(0)
}

/// A `lua_CFunction`: `qjson_lua_decode(text, max_depth, duplicate_keys,
/// null, empty_array_mt)` decodes `text` into plain Lua tables (eager
/// decode) and returns the value, or nil and the error message, or nil
/// alone when the caller should take the FFI path instead (see
/// [`crate::lua_api::eager`]). Returns nothing if the process has no Lua
/// API to be found.
///
/// # Safety
/// Called by Lua with its own `lua_State`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn qjson_lua_decode(state: *mut c_void) -> c_int {
    let Some(api) = lua_api::api() else {
        return 0;
    };
    // SAFETY: Lua called us with its state, and api is its API.
    unsafe { lua_api::eager::decode(api, state) }
}

/// A `lua_CFunction`: `qjson_lua_encode(value, options, null, array_mt,
/// empty_array_mt, empty_array, cjson_empty_array)` encodes a plain Lua
/// value as lua-cjson does and returns the text (or, given an eighth
/// argument, the text in pieces and its length), or nil and the error
/// message, or nothing when the Lua encoder is to encode it (see
/// [`crate::lua_api::encode`]). Returns nothing as well if the process has
/// no Lua API to be found.
///
/// # Safety
/// Called by Lua with its own `lua_State`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn qjson_lua_encode(state: *mut c_void) -> c_int {
    let Some(api) = lua_api::api() else {
        return 0;
    };
    // SAFETY: Lua called us with its state, and api is its API.
    unsafe { lua_api::encode::encode(api, state) }
}

/// Escapes a prefix of `src[..len]` into `dst[..cap]` like lua-cjson;
/// returns the bytes written and sets `reader.count` to the source bytes
/// they cover (never a cut escape).
///
/// # Safety
/// `src` is valid for `len` reads, `dst` for `cap` writes; `dst` does not
/// overlap `src`; `reader` is NULL or a live reader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qjson_escape(
    src: *const c_char,
    len: usize,
    escape_slash: c_int,
    dst: *mut c_char,
    cap: usize,
    reader: *mut qjson_reader,
) -> usize {
    // SAFETY: the caller guarantees reader is NULL or live.
    let Some(reader) = (unsafe { reader.as_mut() }) else {
        return 0;
    };
    reader.count = 0;
    let mut written = 0;
    guarded(|| {
        if src.is_null() || dst.is_null() || cap > isize::MAX as usize {
            return ErrorCode::BadArgument as c_int;
        }
        // SAFETY: the caller guarantees src's range.
        let Some(src) = (unsafe { bytes(src, len) }) else {
            return ErrorCode::BadArgument as c_int;
        };
        // SAFETY: the caller guarantees dst's range (no larger than a
        // slice may be, checked above) and that it does not overlap src.
        let dst = unsafe { core::slice::from_raw_parts_mut(dst.cast::<u8>(), cap) };
        let (read, wrote) = escape::escape(src, escape_slash != 0, dst);
        reader.count = read;
        written = wrote;
        OK
    });
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `include/qjson.h`, which LuaJIT's cdef is (a spec checks that).
    const HEADER: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/include/qjson.h"));

    #[test]
    fn the_header_says_what_small_documents_are_here() {
        assert!(HEADER.contains(&format!("QJSON_SMALL_MAX_BYTES = {}\n", small::MAX_BYTES)));
        let words = size_of::<small::Block>() / size_of::<u64>();
        assert!(HEADER.contains(&format!(
            "typedef struct qjson_small {{\n    uint64_t opaque[{words}];\n}} qjson_small;"
        )));
        assert_eq!(align_of::<small::Block>(), align_of::<u64>());
        assert!(
            SMALL_TAG < align_of::<Document>().min(align_of::<small::Block>()),
            "no document's handle has the tag, every block's address takes it"
        );
    }

    #[test]
    fn a_small_document_reads_through_any_reader() {
        const TEXT: &[u8] = br#"{"order_id":"A-20931","options":{"max_items":25}}"#;
        let (mine, theirs) = (qjson_reader_new(), qjson_reader_new());
        let mut block = small::Block::default();
        let read = |reader: *mut qjson_reader, doc: *mut qjson_doc, path: &[u8]| {
            // SAFETY: a live reader and the handle of a block on this
            // frame, over a 'static text; the path is `path.len()` bytes.
            let rc = unsafe { qjson_get(doc, 0, path.as_ptr().cast(), path.len(), reader) };
            // SAFETY: a live reader.
            let value = unsafe { &(*reader).value };
            (rc, value.type_, value.num)
        };
        let block = &raw mut block;
        let parse = |reader: *mut qjson_reader| {
            // SAFETY: a 'static text, a block on this frame, and a live
            // reader or NULL.
            unsafe {
                qjson_parse_small(TEXT.as_ptr().cast(), TEXT.len(), ptr::null(), block, reader)
            }
        };
        let doc = parse(mine);
        assert!(!doc.is_null());
        let want = (OK, ValueType::Number as i32, 25.0);
        // Another reader's slots do not hold it: it is parsed there again.
        assert_eq!(read(theirs, doc, b"options.max_items"), want);
        assert_eq!(read(mine, doc, b"options.max_items"), want);
        // The slots are the reader's: with none, nothing is parsed.
        let none = parse(ptr::null_mut());
        assert!(none.is_null());
        // SAFETY: readers from qjson_reader_new, not used again.
        unsafe {
            qjson_reader_free(mine);
            qjson_reader_free(theirs);
        }
    }

    #[test]
    fn a_reader_gives_back_large_buffers_a_trim_after_their_last_need() {
        // A string that decodes to 2 MiB (each `\n` to one byte), and one
        // of a few bytes; each read fills the reader's text buffer.
        let large = format!(r#"["{}","a\nb"]"#, r"\n".repeat(2 << 20));
        let reader = qjson_reader_new();
        // SAFETY: a live text and reader; the text outlives the document.
        let doc = unsafe { qjson_parse(large.as_ptr().cast(), large.len(), ptr::null(), reader) };
        assert!(!doc.is_null());
        let read = |path: &[u8]| {
            // SAFETY: a live document and reader; the path is its length.
            let rc = unsafe { qjson_get(doc, 0, path.as_ptr().cast(), path.len(), reader) };
            // SAFETY: a live reader.
            (rc, unsafe { (*reader).value.len })
        };
        // SAFETY: a live reader whose results are not read after a trim.
        let trim = || unsafe { qjson_reader_trim(reader) };
        assert_eq!(read(b"[0]"), (OK, 2 << 20));
        // Needed since the last trim: kept, then given back by the next.
        assert!(trim() >= 2 << 20);
        assert!(trim() <= SCRATCH_KEEP_BYTES);
        // A short read after a long one leaves the buffer short: the long
        // one's memory goes at the next trim.
        assert_eq!(read(b"[0]"), (OK, 2 << 20));
        assert_eq!(read(b"[1]"), (OK, 3));
        assert!(trim() <= SCRATCH_KEEP_BYTES);
        // SAFETY: NULL is allowed; the document and reader are not used again.
        unsafe {
            assert_eq!(qjson_reader_trim(ptr::null_mut()), 0);
            qjson_free(doc);
            qjson_reader_free(reader);
        }
    }

    #[test]
    fn the_header_says_what_decodes_by_shape() {
        use eager::shape::{MAX_SHAPES, MAX_TEXT_BYTES, MAX_VALUES};
        assert!(HEADER.contains(&format!("QJSON_SHAPED_MAX_BYTES = {MAX_TEXT_BYTES}\n")));
        for field in ["double number", "const char *string", "uint32_t string_len"] {
            assert!(HEADER.contains(&format!("    {field}[{MAX_VALUES}];\n")));
        }
        assert!(HEADER.contains(&format!("more than {MAX_VALUES} strings or numbers")));
        assert!(HEADER.contains(&format!("past the {MAX_SHAPES} a registry")));
    }
}
