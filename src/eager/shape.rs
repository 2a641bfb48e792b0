//! Eager decode of small texts by shape: the walk records what a text
//! looks like (its containers, keys and the type of each value) and
//! hands the values over in flat arrays; the Lua side builds the tables
//! with a function made once per shape, whose table constructors LuaJIT
//! copies from templates that already hold the keys.
//!
//! Built through the Lua C API ([`crate::lua_api::eager`]), a 64-byte
//! tool call spends most of its time in LuaJIT making tables: a
//! `lua_pushlstring` per key (hashing it and finding the string LuaJIT
//! already holds), a `lua_rawset` inserting it, a `lua_createtable` per
//! container. A Lua constructor such as `{ ["order_id"] = a, ["options"]
//! = { ... } }` does none of that per call: LuaJIT's parser keeps its
//! string keys in a template table, the constructor copies the template
//! (`TDUP`) and stores each value into a slot found when the code was
//! compiled. The documents a gateway decodes come in a few shapes (every
//! event of a stream, every tool call of one tool), so a function per
//! shape is made a few times and run many.
//!
//! **The shape** is a byte string: `{` `}` and `[` `]` around a
//! container's values, `k` then a length byte and the decoded bytes
//! before each member's value, `s` a string, `n` a number, `t` `f` `z`
//! true, false and null. Strings and numbers are not in it: their values
//! go to [`Shaped`], in document order, strings as pointers into the
//! text (or into a per-thread arena when they had escapes).
//!
//! **Shape ids** are given out by a registry ([`Shapes`], one per Lua
//! state: lua/qjson.lua shares it between instances), at most
//! [`MAX_SHAPES`] of them, never taken back; a text of a shape that gets
//! no id is decoded the other way. So clients can make at most that many
//! functions (per way of marking arrays) whatever they send: a shape
//! past the budget costs a walk that found no id, not a compilation.
//!
//! The walk is the same as eager decode's ([`super::walk`]); a text it
//! refuses, or one larger than these limits, gets 0 and is decoded by
//! the C API path, which reports the error.

use core::cell::Cell;

use super::{Flow, Stack, Stop, walk};
use crate::validate::{DuplicateKeys, Options};

/// Longest text decoded by shape: past it a decode's fixed costs are
/// small beside the rest.
pub const MAX_TEXT_BYTES: usize = 4096;
/// Most strings, and most numbers, in a text decoded by shape.
pub const MAX_VALUES: usize = 64;
/// Longest shape.
const MAX_SHAPE_BYTES: usize = 1024;
/// Shapes a registry gives ids to (each id a function made in Lua). The
/// functions are called from one place, and LuaJIT's traces follow a few
/// dozen callees there well, not hundreds. `luajit benches/shapes.lua`
/// (2026-12-03, three runs, us a decode by shape against the C API
/// path): 1 shape 0.24-0.41 against 0.42-0.72, 32 shapes in turn
/// 0.35-0.52 against 0.43-0.69; past the budget a text of a shape without
/// an id pays for a walk more: 64 shapes in turn 0.52-0.88 against
/// 0.45-0.69, 128 0.66-1.00 against 0.41-0.70.
pub const MAX_SHAPES: usize = 32;
/// Deepest nesting decoded by shape.
const MAX_OPEN: usize = 32;

/// Where a decode by shape leaves its values for the Lua side
/// (`qjson_shaped` of the header).
#[repr(C)]
#[derive(Debug)]
pub struct Shaped {
    /// The numbers, in document order.
    pub number: [f64; MAX_VALUES],
    /// The strings, in document order: their bytes...
    pub string: [*const u8; MAX_VALUES],
    /// ...and their lengths.
    pub string_len: [u32; MAX_VALUES],
    /// The text's shape (see the module docs), for the Lua side to build
    /// its function the first time it meets the id; alive as long as the
    /// registry that gave the id.
    pub shape: *const u8,
    /// The shape's length.
    pub shape_len: u32,
}

impl Default for Shaped {
    /// No values, no shape.
    fn default() -> Shaped {
        Shaped {
            number: [0.0; MAX_VALUES],
            string: [core::ptr::null(); MAX_VALUES],
            string_len: [0; MAX_VALUES],
            shape: core::ptr::null(),
            shape_len: 0,
        }
    }
}

/// A decode's working memory, kept per thread.
#[derive(Default)]
struct Scratch {
    walk: walk::Scratch,
    shape: Vec<u8>,
    /// Strings that had escapes, decoded: made with room for the whole
    /// text and never grown, so what was handed out stays where it is.
    arena: Vec<u8>,
}

thread_local! {
    /// The scratch between decodes. Its arena holds the decoded strings
    /// of the last decode until the next one on this thread.
    static SPARE: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// Records a text's shape and values as the walk hands them over.
struct ShapeSink<'a> {
    src: &'a [u8],
    out: &'a mut Shaped,
    shape: &'a mut Vec<u8>,
    arena: &'a mut Vec<u8>,
    /// Where each open container's opening byte is in `shape`.
    open: [u16; MAX_OPEN],
    depth: usize,
    numbers: usize,
    strings: usize,
    strict: bool,
}

impl ShapeSink<'_> {
    /// Appends `bytes` to the shape, if it stays within its limit.
    fn put(&mut self, bytes: &[u8]) -> Flow {
        if self.shape.len() + bytes.len() > MAX_SHAPE_BYTES {
            return Err(Stop::GiveUp);
        }
        self.shape.extend_from_slice(bytes);
        Ok(())
    }
}

impl Stack for ShapeSink<'_> {
    fn key(&mut self, key: &[u8]) -> Flow {
        let Ok(len) = u8::try_from(key.len()) else {
            return Err(Stop::GiveUp);
        };
        self.put(&[b'k', len])?;
        self.put(key)
    }

    fn string(&mut self, s: &[u8]) -> Flow {
        if self.strings == MAX_VALUES {
            return Err(Stop::GiveUp);
        }
        let src = self.src.as_ptr_range();
        let ptr = if src.contains(&s.as_ptr()) || s.is_empty() {
            s.as_ptr()
        } else {
            // Decoded: copied into the arena, which never grows (a text
            // decodes to no more bytes than it has), so the strings
            // handed out before stay where they are.
            if self.arena.capacity() - self.arena.len() < s.len() {
                return Err(Stop::GiveUp);
            }
            let at = self.arena.len();
            self.arena.extend_from_slice(s);
            self.arena[at..].as_ptr()
        };
        self.out.string[self.strings] = ptr;
        // At most MAX_TEXT_BYTES.
        self.out.string_len[self.strings] = s.len() as u32;
        self.strings += 1;
        self.put(b"s")
    }

    fn number(&mut self, n: f64) -> Flow {
        if self.numbers == MAX_VALUES {
            return Err(Stop::GiveUp);
        }
        self.out.number[self.numbers] = n;
        self.numbers += 1;
        self.put(b"n")
    }

    fn boolean(&mut self, b: bool) -> Flow {
        self.put(if b { b"t" } else { b"f" })
    }

    fn null(&mut self) -> Flow {
        self.put(b"z")
    }

    fn open(&mut self) -> Flow {
        if self.depth == MAX_OPEN {
            return Err(Stop::GiveUp);
        }
        // Within MAX_SHAPE_BYTES, so within u16.
        self.open[self.depth] = self.shape.len() as u16;
        self.depth += 1;
        // Which kind it is, `store` says: `[` for now.
        self.put(b"[")
    }

    fn store(
        &mut self,
        object: bool,
        stored: u32,
        _pending: u32,
        distinct: bool,
        last: bool,
    ) -> Flow {
        // A container of more than a chunk has more values than a shape
        // holds; a repeated key under the strict policy is the C API
        // path's to report.
        if stored != 0 || !last || (object && !distinct && self.strict) || self.depth == 0 {
            return Err(Stop::GiveUp);
        }
        self.depth -= 1;
        if object {
            self.shape[usize::from(self.open[self.depth])] = b'{';
        }
        self.put(if object { b"}" } else { b"]" })
    }
}

/// Shape ids, from 1: each names one shape for the life of the
/// registry, at most [`MAX_SHAPES`] of them, never taken back. Used by
/// one thread at a time.
#[derive(Debug)]
pub struct Shapes {
    /// Shape `id` is `shapes[id - 1]`.
    shapes: Vec<Box<[u8]>>,
    /// Open addressing by hash: an id, or 0 for an empty slot.
    table: [u8; TABLE_SLOTS],
}

/// Slots of the table: a power of two, at least twice [`MAX_SHAPES`], so
/// a probe meets an empty slot soon.
const TABLE_SLOTS: usize = 4 * MAX_SHAPES;

impl Default for Shapes {
    fn default() -> Shapes {
        Shapes {
            shapes: Vec::new(),
            table: [0; TABLE_SLOTS],
        }
    }
}

/// A hash of a shape, eight bytes at a time.
fn shape_hash(shape: &[u8]) -> usize {
    let mix = |h: u64, bytes: &[u8]| {
        let mut word = [0u8; 8];
        word[..bytes.len()].copy_from_slice(bytes);
        (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    };
    let mut chunks = shape.chunks_exact(8);
    let h = (&mut chunks).fold(shape.len() as u64, mix);
    (mix(h, chunks.remainder()) >> 32) as usize
}

impl Shapes {
    /// The id of `shape` and the registry's copy of it, adding it if
    /// there is room; `None` when there is none.
    fn id(&mut self, shape: &[u8]) -> Option<(u8, &[u8])> {
        let hash = shape_hash(shape);
        let mut slot = hash % TABLE_SLOTS;
        loop {
            let id = self.table[slot];
            if id == 0 {
                break;
            }
            if *self.shapes[usize::from(id) - 1] == *shape {
                return Some((id, &self.shapes[usize::from(id) - 1]));
            }
            slot = (slot + 1) % TABLE_SLOTS;
        }
        if self.shapes.len() == MAX_SHAPES {
            return None;
        }
        self.shapes.push(shape.into());
        // At most MAX_SHAPES, within u8.
        let id = self.shapes.len() as u8;
        self.table[slot] = id;
        Some((id, &self.shapes[usize::from(id) - 1]))
    }
}

/// Decodes `src` into `out` by shape: returns the shape's id in `shapes`
/// (from 1), with `out` holding its values and the shape; or 0 when the
/// text is to be decoded the other way (invalid, larger than the limits
/// above, or of a shape that got no id).
pub fn decode(src: &[u8], opts: &Options, shapes: &mut Shapes, out: &mut Shaped) -> u32 {
    if src.len() > MAX_TEXT_BYTES {
        return 0;
    }
    let mut scratch = SPARE.with(Cell::take).unwrap_or_default();
    let Scratch { walk, shape, arena } = &mut *scratch;
    shape.clear();
    arena.clear();
    arena.reserve(src.len());
    let mut sink = ShapeSink {
        src,
        out,
        shape,
        arena,
        open: [0; MAX_OPEN],
        depth: 0,
        numbers: 0,
        strings: 0,
        strict: opts.duplicate_keys == DuplicateKeys::Error,
    };
    let walked = walk::decode(src, opts.max_depth as usize, walk, &mut sink);
    let id = match walked {
        Ok(()) => shapes.id(shape).map_or(0, |(id, lasting)| {
            out.shape = lasting.as_ptr();
            // At most MAX_SHAPE_BYTES.
            out.shape_len = lasting.len() as u32;
            u32::from(id)
        }),
        Err(_) => 0,
    };
    SPARE.with(|spare| spare.set(Some(scratch)));
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped() -> Box<Shaped> {
        Box::default()
    }

    fn shape_of(out: &Shaped) -> &[u8] {
        // SAFETY: set by a decode that returned an id, from a registry
        // the test keeps.
        unsafe { core::slice::from_raw_parts(out.shape, out.shape_len as usize) }
    }

    fn string(out: &Shaped, k: usize) -> &[u8] {
        // SAFETY: string k of the last decode on this thread, whose text
        // the test keeps.
        unsafe { core::slice::from_raw_parts(out.string[k], out.string_len[k] as usize) }
    }

    #[test]
    fn records_the_shape_and_the_values() {
        let (mut shapes, mut out) = (Shapes::default(), shaped());
        let opts = Options::default();
        let text = br#"{"order_id":"A-2\n","options":{"history":true,"max_items":25,"e":[],"o":{},"z":[null,false,-0.5]}}"#;
        let id = decode(text, &opts, &mut shapes, &mut out);
        assert_eq!(id, 1);
        assert_eq!(
            shape_of(&out),
            b"{k\x08order_idsk\x07options{k\x07historytk\x09max_itemsnk\x01e[]k\x01o{}k\x01z[zfn]}}"
        );
        assert_eq!(string(&out, 0), b"A-2\n");
        assert_eq!(&out.number[..2], &[25.0, -0.5]);
        // Another text of the same shape has the same id; another shape
        // the next.
        let again = br#"{"order_id":"B","options":{"history":true,"max_items":1,"e":[],"o":{},"z":[null,false,3]}}"#;
        assert_eq!(decode(again, &opts, &mut shapes, &mut out), id);
        assert_eq!(string(&out, 0), b"B");
        assert_eq!(decode(b"[1]", &opts, &mut shapes, &mut out), 2);
        assert_eq!(decode(again, &opts, &mut shapes, &mut out), id);
    }

    #[test]
    fn leaves_the_rest_to_the_other_path() {
        let (mut shapes, mut out) = (Shapes::default(), shaped());
        let opts = Options::default();
        let mut id = |text: &[u8], opts: &Options| decode(text, opts, &mut shapes, &mut out);
        assert_eq!(id(b"{\"a\":1,}", &opts), 0);
        assert_eq!(
            id(format!("[{}1]", "1,".repeat(MAX_VALUES)).as_bytes(), &opts),
            0
        );
        let strings = format!("[{}\"\"]", "\"\",".repeat(MAX_VALUES));
        assert_eq!(id(strings.as_bytes(), &opts), 0);
        assert_eq!(
            id(
                format!("\"{}\"", "x".repeat(MAX_TEXT_BYTES)).as_bytes(),
                &opts
            ),
            0
        );
        let deep = format!("{}{}", "[".repeat(MAX_OPEN + 1), "]".repeat(MAX_OPEN + 1));
        assert_eq!(id(deep.as_bytes(), &opts), 0);
        let long_key = format!("{{\"{}\":1}}", "k".repeat(256));
        assert_eq!(id(long_key.as_bytes(), &opts), 0);
        let long_shape = format!("[{}]", "true,".repeat(MAX_SHAPE_BYTES) + "true");
        assert_eq!(id(long_shape.as_bytes(), &opts), 0);
        let strict = Options {
            duplicate_keys: DuplicateKeys::Error,
            ..Options::default()
        };
        assert_eq!(id(br#"{"a":1,"a":2}"#, &strict), 0);
        assert_eq!(id(br#"{"a":1,"b":2}"#, &strict), 1);
        assert_eq!(id(br#"{"a":1,"a":2}"#, &opts), 2);
        let shallow = Options {
            max_depth: 1,
            ..Options::default()
        };
        assert_eq!(id(b"[[]]", &shallow), 0);
    }

    #[test]
    fn strings_with_escapes_stay_where_they_were_put() {
        let (mut shapes, mut out) = (Shapes::default(), shaped());
        let text = br#"["a\tb","plain","\u00e9\u00e9","x\"y",""]"#;
        assert_eq!(decode(text, &Options::default(), &mut shapes, &mut out), 1);
        assert_eq!(string(&out, 0), b"a\tb");
        assert_eq!(string(&out, 1), b"plain");
        assert_eq!(string(&out, 2), "\u{e9}\u{e9}".as_bytes());
        assert_eq!(string(&out, 3), b"x\"y");
        assert_eq!(string(&out, 4), b"");
    }

    #[test]
    fn gives_out_a_bounded_number_of_ids() {
        let (mut shapes, mut out) = (Shapes::default(), shaped());
        for k in 0..2 * MAX_SHAPES {
            let text = format!("{{\"key{k}\":1}}");
            let id = decode(text.as_bytes(), &Options::default(), &mut shapes, &mut out);
            let expected = if k < MAX_SHAPES { k as u32 + 1 } else { 0 };
            assert_eq!(id, expected, "text {k}");
        }
        // The shapes given ids keep them.
        for k in 0..MAX_SHAPES {
            let text = format!("{{\"key{k}\":2}}");
            let id = decode(text.as_bytes(), &Options::default(), &mut shapes, &mut out);
            assert_eq!(id, k as u32 + 1);
            let key = format!("key{k}");
            let expected = [b"{k", &[key.len() as u8][..], key.as_bytes(), b"n}"].concat();
            assert_eq!(shape_of(&out), expected);
        }
    }
}
