//! What the fuzz targets share: a safe handle over qjson's C ABI (the
//! `extern "C"` functions of `qjson::ffi`, called exactly as LuaJIT calls
//! them) that copies every answer out before the next call and asserts
//! the contract every call must keep on any input:
//!
//! * no call ever returns `QJSON_INTERNAL` (a panic caught at the
//!   boundary) or a code the header does not list for it;
//! * every pointer handed out is readable for its whole length (the
//!   AddressSanitizer build of `cargo fuzz` checks the reads);
//! * source spans (`qjson_raw`, key offsets) lie inside the text (or the
//!   copy of it the document made).
//!
//! The targets then check how the answers agree with each other.

use core::ffi::c_char;

use qjson::document::small;
use qjson::error::ErrorCode;
use qjson::ffi::{
    qjson_doc, qjson_find, qjson_free, qjson_get, qjson_get_i64, qjson_get_index, qjson_get_key,
    qjson_len, qjson_member, qjson_members, qjson_options, qjson_parse, qjson_parse_copy,
    qjson_parse_small, qjson_raw, qjson_reader, qjson_reader_free, qjson_reader_new, qjson_tape,
    qjson_value,
};
use qjson::navigate::ValueType;
use qjson::navigate::tape::Item;
use qjson::validate::{DEFAULT_MAX_DEPTH, DuplicateKeys, Options};

/// `QJSON_TYPE_*` of the header.
pub const NUMBER: i32 = ValueType::Number as i32;
/// `QJSON_TYPE_STRING`.
pub const STRING: i32 = ValueType::String as i32;
/// `QJSON_TYPE_ARRAY`.
pub const ARRAY: i32 = ValueType::Array as i32;
/// `QJSON_TYPE_OBJECT`.
pub const OBJECT: i32 = ValueType::Object as i32;

/// A rejected parse: code and byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// `QJSON_E_*`.
    pub code: i32,
    /// Byte offset in the text.
    pub offset: u64,
}

/// A `qjson_value` with its string bytes copied out.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// `QJSON_TYPE_*`.
    pub type_: i32,
    /// The value's cursor.
    pub cursor: u32,
    /// Decoded string bytes (strings), raw text (`raw`), else empty.
    pub bytes: Vec<u8>,
    /// `len` as the call left it (a count for `qjson_len`).
    pub len: usize,
    /// Nearest double of a number.
    pub num: f64,
    /// Exact integer (`qjson_get_i64`), or a key's byte offset.
    pub i64_: i64,
}

/// One tape item with its string bytes copied out.
#[derive(Clone, Debug, PartialEq)]
pub enum Tape {
    /// A container or literal: type and count (0 for literals).
    Node(i32, u32),
    /// A number's nearest double, by bits so that NaN-free equality is exact.
    Number(u64),
    /// A string's decoded bytes.
    Str(Vec<u8>),
}

/// The codes a lookup may return on a parsed document.
fn is_lookup_code(rc: i32) -> bool {
    use ErrorCode::*;
    rc == 0
        || [
            NotFound,
            TypeMismatch,
            OutOfRange,
            NotInteger,
            BadPath,
            BadCursor,
        ]
        .iter()
        .any(|&c| c as i32 == rc)
}

fn checked(rc: i32) -> Result<(), i32> {
    assert!(
        is_lookup_code(rc),
        "C ABI returned {rc}, which no lookup may return (99 is a caught panic)"
    );
    if rc == 0 { Ok(()) } else { Err(rc) }
}

/// A reader (where calls leave their results); freed on drop.
struct Reader(*mut qjson_reader);

impl Reader {
    fn new() -> Reader {
        let reader = qjson_reader_new();
        assert!(!reader.is_null(), "qjson_reader_new failed");
        Reader(reader)
    }

    /// What the last call left.
    fn get(&self) -> &qjson_reader {
        // SAFETY: a live reader; the borrow ends before the next call.
        unsafe { &*self.0 }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: made by qjson_reader_new, freed exactly once, here.
        unsafe { qjson_reader_free(self.0) }
    }
}

/// A parsed document over borrowed text, with the reader its calls use.
pub struct Doc<'a> {
    ptr: *mut qjson_doc,
    text: &'a [u8],
    /// Where the bytes the document reads start: the text, or the copy
    /// `qjson_parse_copy` made of it.
    source: *const u8,
    reader: Reader,
    /// What names a small document (`qjson_parse_small`), which `ptr`
    /// points just past; kept where it is while the document is used.
    block: Option<Box<small::Block>>,
    /// Path calls so far (see `evict`).
    calls: u32,
}

/// Parses as many other small documents as a thread keeps, so that the
/// next read of a small document parses its text again.
fn evict() {
    let reader = Reader::new();
    for _ in 0..small::SLOTS {
        let mut block = small::Block::default();
        // SAFETY: a 'static text, a local block and a live reader; the
        // handle is never used.
        let handle = unsafe {
            qjson_parse_small(c"[0]".as_ptr(), 3, core::ptr::null(), &mut block, reader.0)
        };
        assert!(!handle.is_null());
    }
}

impl Drop for Doc<'_> {
    fn drop(&mut self) {
        // SAFETY: ptr came from qjson_parse and is freed exactly once, here.
        unsafe { qjson_free(self.ptr) }
    }
}

/// `len` bytes at `p`, copied. Reading them is the check that the pointer
/// is good for its whole length.
///
/// # Safety
/// The C ABI promised `p[0..len)` readable (NULL only with 0).
unsafe fn copy_out(p: *const u8, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    assert!(!p.is_null(), "NULL pointer handed out with length {len}");
    // SAFETY: the caller passes on the C ABI's promise.
    unsafe { core::slice::from_raw_parts(p, len) }.to_vec()
}

type PathCall =
    unsafe extern "C" fn(*mut qjson_doc, u32, *const c_char, usize, *mut qjson_reader) -> i32;

impl<'a> Doc<'a> {
    /// `qjson_parse` with `max_depth` (0: default) and the duplicate-key
    /// policy (0 last wins, 1 error).
    pub fn parse(text: &'a [u8], max_depth: u32, duplicate_keys: i32) -> Result<Doc<'a>, Rejected> {
        let opts = qjson_options {
            max_depth,
            duplicate_keys,
        };
        let reader = Reader::new();
        // Small texts of odd length take the path of small documents, as
        // qjson.decode does, and texts of a length 2 mod 4 are copied into
        // their documents, as qjson.decode_body's are, so that every path
        // is fuzzed.
        let mut block = (text.len() <= small::MAX_BYTES && !text.len().is_multiple_of(2))
            .then(|| Box::new(small::Block::default()));
        let copy = text.len() % 4 == 2;
        // SAFETY: text outlives the Doc (its lifetime), and the block stays
        // in its Box as long; opts is a live local and reader a live
        // reader.
        let ptr = unsafe {
            match &mut block {
                Some(block) => qjson_parse_small(
                    text.as_ptr().cast(),
                    text.len(),
                    &opts,
                    &mut **block,
                    reader.0,
                ),
                None if copy => qjson_parse_copy(text.as_ptr().cast(), text.len(), &opts, reader.0),
                None => qjson_parse(text.as_ptr().cast(), text.len(), &opts, reader.0),
            }
        };
        if !ptr.is_null() {
            let source = if copy {
                let out = reader.get().value;
                assert_eq!(out.len, text.len(), "the copy's length");
                // SAFETY: the copy is the document's, readable for its
                // length while the document lives.
                assert!(
                    unsafe { copy_out(out.str_.cast(), out.len) } == text,
                    "the copy's bytes"
                );
                out.str_.cast()
            } else {
                text.as_ptr()
            };
            return Ok(Doc {
                ptr,
                text,
                source,
                reader,
                block,
                calls: 0,
            });
        }
        let err = &reader.get().error;
        assert!(
            (1..=20).contains(&err.code),
            "parse failed with code {}, not a QJSON_E_* rejection",
            err.code
        );
        assert!(
            err.offset <= text.len() as u64,
            "error offset past the input"
        );
        let message = err.message.iter().position(|&c| c == 0);
        assert!(
            matches!(message, Some(n) if n > 0),
            "message empty or not NUL-terminated"
        );
        Err(Rejected {
            code: err.code,
            offset: err.offset,
        })
    }

    /// The text the document was parsed from.
    pub fn text(&self) -> &'a [u8] {
        self.text
    }

    fn call(&mut self, f: PathCall, cursor: u32, path: &[u8]) -> Result<qjson_value, i32> {
        // Every fourth path call of a small document reads it parsed
        // again from its text: the answers must not change.
        self.calls += 1;
        if self.block.is_some() && self.calls.is_multiple_of(4) {
            evict();
        }
        // SAFETY: a live document, a path slice and a live reader.
        let rc = unsafe {
            f(
                self.ptr,
                cursor,
                path.as_ptr().cast(),
                path.len(),
                self.reader.0,
            )
        };
        checked(rc).map(|()| self.reader.get().value)
    }

    fn owned(out: &qjson_value) -> Value {
        Value {
            type_: out.type_,
            cursor: out.cursor,
            bytes: Vec::new(),
            len: out.len,
            num: out.num,
            i64_: out.i64_,
        }
    }

    /// Like `owned`, plus the string bytes of a string value.
    fn scalar(out: &qjson_value) -> Value {
        let mut v = Self::owned(out);
        if out.type_ == STRING {
            // SAFETY: qjson_get's promise for strings.
            v.bytes = unsafe { copy_out(out.str_.cast(), out.len) };
        }
        v
    }

    /// `qjson_find`.
    pub fn find(&mut self, cursor: u32, path: &[u8]) -> Result<Value, i32> {
        self.call(qjson_find, cursor, path).map(|o| Self::owned(&o))
    }

    /// `qjson_get`.
    pub fn get(&mut self, cursor: u32, path: &[u8]) -> Result<Value, i32> {
        self.call(qjson_get, cursor, path).map(|o| Self::scalar(&o))
    }

    /// `qjson_get_i64`.
    pub fn get_i64(&mut self, cursor: u32, path: &[u8]) -> Result<Value, i32> {
        self.call(qjson_get_i64, cursor, path)
            .map(|o| Self::owned(&o))
    }

    /// `qjson_len`.
    pub fn len(&mut self, cursor: u32, path: &[u8]) -> Result<Value, i32> {
        self.call(qjson_len, cursor, path).map(|o| Self::owned(&o))
    }

    /// `qjson_raw`, checked to point inside the text; `bytes` is the span
    /// and `i64_` its start offset.
    pub fn raw(&mut self, cursor: u32, path: &[u8]) -> Result<Value, i32> {
        let out = self.call(qjson_raw, cursor, path)?;
        let start = (out.str_ as usize).wrapping_sub(self.source as usize);
        assert!(
            out.len > 0 && start <= self.text.len() && out.len <= self.text.len() - start,
            "raw span {start}+{} outside the {}-byte text",
            out.len,
            self.text.len()
        );
        let mut v = Self::owned(&out);
        v.bytes = self.text[start..start + out.len].to_vec();
        v.i64_ = start as i64;
        Ok(v)
    }

    /// `qjson_get_key`.
    pub fn get_key(&mut self, cursor: u32, key: &[u8]) -> Result<Value, i32> {
        self.call(qjson_get_key, cursor, key)
            .map(|o| Self::scalar(&o))
    }

    /// `qjson_get_index`.
    pub fn get_index(&mut self, cursor: u32, index: usize) -> Result<Value, i32> {
        // SAFETY: a live document and a live reader.
        let rc = unsafe { qjson_get_index(self.ptr, cursor, index, self.reader.0) };
        checked(rc).map(|()| Self::scalar(&self.reader.get().value))
    }

    /// `qjson_members`: key entries, copied.
    pub fn members(&mut self, cursor: u32, every: bool) -> Result<Vec<u32>, i32> {
        // SAFETY: a live document and a live reader.
        let rc = unsafe { qjson_members(self.ptr, cursor, every as i32, self.reader.0) };
        checked(rc)?;
        let (keys, count) = (self.reader.get().keys, self.reader.get().count);
        if count == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: qjson_members hands out count entries at keys.
        Ok(unsafe { core::slice::from_raw_parts(keys, count) }.to_vec())
    }

    /// `qjson_member`: the key (bytes, and `i64_` its quote's offset, which
    /// is checked to be a quote of the text) and the value.
    pub fn member(&mut self, entry: u32) -> Result<(Value, Value), i32> {
        // SAFETY: a live document and a live reader.
        let rc = unsafe { qjson_member(self.ptr, entry, self.reader.0) };
        checked(rc)?;
        let (key, value) = (self.reader.get().key, self.reader.get().value);
        assert_eq!(key.type_, STRING);
        let at = usize::try_from(key.i64_).expect("negative key offset");
        assert_eq!(
            self.text.get(at),
            Some(&b'"'),
            "key offset {at} is not a quote"
        );
        Ok((Self::scalar(&key), Self::scalar(&value)))
    }

    /// `qjson_tape`, copied.
    pub fn tape(&mut self, cursor: u32) -> Result<Vec<Tape>, i32> {
        // SAFETY: a live document and a live reader.
        let rc = unsafe { qjson_tape(self.ptr, cursor, self.reader.0) };
        checked(rc)?;
        let (items, count): (*const Item, usize) =
            (self.reader.get().items, self.reader.get().count);
        assert!(count > 0 && !items.is_null(), "empty tape for a value");
        // SAFETY: qjson_tape hands out count items at items.
        let items = unsafe { core::slice::from_raw_parts(items, count) };
        Ok(items
            .iter()
            .map(|it| match it.type_ {
                // SAFETY: the type says which payload field is live.
                NUMBER => Tape::Number(unsafe { it.payload.num }.to_bits()),
                // SAFETY: as above; the string bytes live as long as the tape.
                STRING => Tape::Str(unsafe { copy_out(it.payload.str_, it.len as usize) }),
                t => {
                    assert!((1..=7).contains(&t), "tape item of type {t}");
                    Tape::Node(t, it.len)
                }
            })
            .collect())
    }

    /// The tape of the value at `cursor` rebuilt from the element and
    /// member calls, to compare with [`Doc::tape`]; `swap` puts a given
    /// tape in place of one value's subtree.
    pub fn walk(&mut self, cursor: u32, swap: Option<(u32, &[Tape])>, out: &mut Vec<Tape>) {
        if let Some((at, tape)) = swap
            && at == cursor
        {
            out.extend_from_slice(tape);
            return;
        }
        let v = self.get(cursor, b"").expect("a cursor that find returned");
        match v.type_ {
            NUMBER => out.push(Tape::Number(v.num.to_bits())),
            STRING => out.push(Tape::Str(v.bytes)),
            ARRAY => {
                let n = self.len(cursor, b"").expect("array length").len;
                out.push(Tape::Node(ARRAY, n as u32));
                for i in 0..n {
                    let e = self.get_index(cursor, i).expect("element below the length");
                    self.walk(e.cursor, swap, out);
                }
                assert_eq!(self.get_index(cursor, n), Err(ErrorCode::NotFound as i32));
            }
            OBJECT => {
                let every = self.members(cursor, true).expect("object members");
                out.push(Tape::Node(OBJECT, every.len() as u32));
                for entry in every {
                    let (key, value) = self.member(entry).expect("member of a listed entry");
                    out.push(Tape::Str(key.bytes));
                    self.walk(value.cursor, swap, out);
                }
            }
            t => out.push(Tape::Node(t, 0)),
        }
    }
}

/// Splits fuzz input into a few option bytes and the rest.
pub fn take<const N: usize>(data: &[u8]) -> Option<([u8; N], &[u8])> {
    let (head, rest) = data.split_first_chunk::<N>()?;
    Some((*head, rest))
}

/// The validation options two fuzz option bytes stand for, as the C ABI
/// reads them: the low bit of `policy` picks the duplicate-key policy
/// (returned as the C ABI's code too), `depth` 0 the default nesting limit.
pub fn options(policy: u8, depth: u8) -> (Options, i32, u32) {
    let policy = i32::from(policy & 1);
    let depth = u32::from(depth);
    let opts = Options {
        max_depth: if depth == 0 { DEFAULT_MAX_DEPTH } else { depth },
        duplicate_keys: if policy == 1 {
            DuplicateKeys::Error
        } else {
            DuplicateKeys::LastWins
        },
    };
    (opts, policy, depth)
}

/// Cross-checks everything the getters say about the value at `cursor`
/// (a cursor `find` returned): `find`, `get`, `get_i64`, `len`, `raw` and
/// the tape agree, a number's double is the correctly rounded value of
/// its source text, decoded strings are UTF-8, and the raw text parses on
/// its own to the same value.
pub fn check_value(doc: &mut Doc<'_>, cursor: u32, max_depth: u32, policy: i32) {
    let found = doc.find(cursor, b"").expect("find of a returned cursor");
    let got = doc.get(cursor, b"").expect("get of a returned cursor");
    let raw = doc.raw(cursor, b"").expect("raw of a returned cursor");
    assert_eq!((found.type_, found.cursor), (got.type_, cursor));
    assert_eq!((raw.type_, raw.cursor), (got.type_, cursor));
    let i64_ = doc.get_i64(cursor, b"");
    let len = doc.len(cursor, b"");
    match got.type_ {
        NUMBER => {
            let text = core::str::from_utf8(&raw.bytes).expect("ASCII number");
            let want: f64 = text.parse().expect("Rust parses every JSON number");
            assert_eq!(got.num.to_bits(), want.to_bits(), "double of {text}");
            match i64_ {
                Ok(v) => assert_eq!(v.i64_ as f64, got.num, "i64 of {text}"),
                Err(rc) => assert!(
                    rc == ErrorCode::NotInteger as i32 || rc == ErrorCode::OutOfRange as i32,
                    "get_i64 of {text} returned {rc}"
                ),
            }
        }
        t => assert_eq!(
            i64_.map(|_| ()),
            Err(ErrorCode::TypeMismatch as i32),
            "i64 of type {t}"
        ),
    }
    if got.type_ == STRING {
        assert!(
            core::str::from_utf8(&got.bytes).is_ok(),
            "decoded string is not UTF-8"
        );
    }
    match (got.type_, len) {
        (ARRAY, Ok(n)) => {
            assert!(doc.get_index(cursor, n.len.wrapping_sub(1)).is_ok() || n.len == 0);
            assert_eq!(
                doc.get_index(cursor, n.len).map(|_| ()),
                Err(ErrorCode::NotFound as i32)
            );
        }
        (OBJECT, Ok(n)) => {
            let read = doc.members(cursor, false).expect("members of an object");
            assert_eq!(
                read.len(),
                n.len,
                "len differs from the members the policy reads"
            );
        }
        (t, len) => assert_eq!(
            len.map(|_| ()),
            Err(ErrorCode::TypeMismatch as i32),
            "len of type {t}"
        ),
    }
    let tape = doc.tape(cursor).expect("tape of a returned cursor");
    let mut walked = Vec::new();
    doc.walk(cursor, None, &mut walked);
    assert_eq!(tape, walked, "tape differs from the element/member walk");

    let mut alone = Doc::parse(&raw.bytes, max_depth, policy).expect("a value's raw text parses");
    assert_eq!(
        alone.tape(0).expect("root tape"),
        tape,
        "raw text reparses differently"
    );
}
