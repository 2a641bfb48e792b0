//! Small documents: parsed into memory each reader keeps hot, named by a
//! block in their caller's heap.
//!
//! A document the FFI hands out lives until the Lua collector finds its
//! proxies dead, a cycle later. With a large Lua heap a cycle spans
//! hundreds of thousands of parses, so a pooled document comes back long
//! after it was last touched and every line a small parse writes in it is
//! a trip to memory: with 261 MB of Lua objects alive, a 64-byte decode
//! and two reads took 555-605 ns against cjson's 410-430, 0.71-0.74x
//! (`luajit benches/heap_pacing.lua 0 2000000`, two runs at c9fce84). See
//! "Small documents" in docs/architecture.md.
//!
//! So a small text ([`MAX_BYTES`] at most) is parsed into one of the few
//! documents ([`SLOTS`]) of a [`Slots`], which stay in cache as every
//! small parse uses them, and the caller gets a [`Block`] it allocated
//! itself, in its own heap (the Lua modules take it from a LuaJIT cdata
//! of sixteen that the document keeps alive, and the collector frees with
//! the document's other objects), naming the text. No native memory is held
//! for the document, so there is nothing to free or to pace. The FFI keeps
//! a [`Slots`] in each reader (`qjson_reader`), which one thread uses at a
//! time: reaching it costs no thread-local lookup (`__tls_get_addr` and
//! the lazy-initialisation check, for the parse and for every read), and
//! needs no synchronisation.
//!
//! A read names the block. Its document is in the slot [`Slots::parse`]
//! or an earlier read left it in, or, after [`SLOTS`] other small
//! documents took the slots (or when the read comes through another
//! reader), it is parsed again from the text into the least recently used
//! one: a slot is a cache of the text's index and nothing more. What reads
//! leave in a slot (lookup tables, the links of searched objects) goes
//! with it and is rebuilt by the next reads; that costs at most a parse of
//! [`MAX_BYTES`] per read, so reads stay linear.
//!
//! Which slot holds which document: each parse stamps its block and
//! its slot with a number no other parse in the process gets (each
//! [`Slots`] takes stamps from a shared counter a million at a time). A
//! slot is taken for a block only when the stamps are equal, so memory of
//! a dead block that the allocator gives to a new one, through this
//! reader or another, never finds the old one's slot.

use core::sync::atomic::{AtomicU64, Ordering};

use super::Document;
use crate::error::{Error, ErrorCode, Result};
use crate::validate::{self, DuplicateKeys, Options};

/// The longest text parsed this way; longer ones get documents of their
/// own (the FFI's pool), whose cost per parse is small next to their
/// size. `QJSON_SMALL_MAX_BYTES` of the C header.
pub const MAX_BYTES: usize = 4096;

/// Small documents a [`Slots`] keeps parsed: reads that go back and forth
/// between up to this many find each in place.
pub const SLOTS: usize = 8;

/// What names a small document: its text, options and stamp
/// (`qjson_small` of the C header, opaque to callers, who allocate it).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Block {
    text: *const u8,
    len: u32,
    max_depth: u32,
    duplicate_keys: u32,
    /// 0 (keeps `stamp` 8-byte aligned).
    reserved: u32,
    /// The parse's stamp (never 0).
    stamp: u64,
}

/// A block naming nothing yet, for callers from Rust (tests, fuzz
/// targets).
impl Default for Block {
    fn default() -> Self {
        Block {
            text: core::ptr::null(),
            len: 0,
            max_depth: 0,
            duplicate_keys: 0,
            reserved: 0,
            stamp: 0,
        }
    }
}

/// Stamps not yet handed to a set of slots (0 is none).
static STAMPS: AtomicU64 = AtomicU64::new(1);

/// Stamps a [`Slots`] takes from [`STAMPS`] at a time.
const STAMP_BATCH: u64 = 1 << 20;

impl Block {
    /// The block naming the parse of `src` under `opts`, stamped `stamp`.
    fn new(src: &[u8], opts: &Options, stamp: u64) -> Block {
        Block {
            text: src.as_ptr(),
            len: src.len() as u32,
            max_depth: opts.max_depth,
            duplicate_keys: u32::from(opts.duplicate_keys == DuplicateKeys::Error),
            reserved: 0,
            stamp,
        }
    }

    /// The options [`Block::new`] was given.
    fn options(&self) -> Options {
        Options {
            max_depth: self.max_depth,
            duplicate_keys: if self.duplicate_keys == 1 {
                DuplicateKeys::Error
            } else {
                DuplicateKeys::LastWins
            },
        }
    }
}

struct Slot {
    doc: Document<'static>,
    /// The stamp of the parse `doc` holds; 0 for none.
    stamp: u64,
    /// When it was last used (see `Slots::uses`).
    used: u64,
}

/// The documents small texts are parsed into, and validation's working
/// memory for their parses (lent to each, as `Document::load` lends a
/// thread's to the others).
pub struct Slots {
    slots: [Slot; SLOTS],
    scratch: validate::Scratch,
    /// Uses of slots so far.
    uses: u64,
    /// The slot used last.
    last: usize,
    /// The next stamp of this set's, and the end of its batch.
    next_stamp: u64,
    stamps_end: u64,
}

impl Default for Slots {
    fn default() -> Self {
        Slots {
            slots: core::array::from_fn(|_| Slot {
                doc: Document::new(),
                stamp: 0,
                used: 0,
            }),
            scratch: validate::Scratch::new(),
            uses: 0,
            last: 0,
            next_stamp: 0,
            stamps_end: 0,
        }
    }
}

impl Slots {
    /// A stamp no other parse in the process has.
    fn stamp(&mut self) -> u64 {
        if self.next_stamp == self.stamps_end {
            self.next_stamp = STAMPS.fetch_add(STAMP_BATCH, Ordering::Relaxed);
            self.stamps_end = self.next_stamp + STAMP_BATCH;
        }
        self.next_stamp += 1;
        self.next_stamp - 1
    }

    /// The slot holding the parse stamped `stamp`, if any.
    #[inline(always)]
    fn find(&mut self, stamp: u64) -> Option<usize> {
        // Reads mostly follow their parse, or each other, on one document.
        // (The most recently used slot's `used` is already the largest.)
        if self.slots[self.last].stamp == stamp {
            return Some(self.last);
        }
        self.find_other(stamp)
    }

    /// [`Slots::find`] past the slot used last.
    #[inline(never)]
    fn find_other(&mut self, stamp: u64) -> Option<usize> {
        let i = self.slots.iter().position(|s| s.stamp == stamp)?;
        self.uses += 1;
        self.slots[i].used = self.uses;
        self.last = i;
        Some(i)
    }

    /// Parses `src` into the least recently used slot, as the parse
    /// stamped `stamp`; returns the slot (left empty on an error).
    fn load(&mut self, src: &'static [u8], opts: &Options, stamp: u64) -> Result<usize> {
        let i = (0..SLOTS).min_by_key(|&i| self.slots[i].used).unwrap_or(0);
        self.uses += 1;
        self.last = i;
        let slot = &mut self.slots[i];
        slot.used = self.uses;
        slot.stamp = 0;
        slot.doc.load_in(src, opts, &mut self.scratch)?;
        slot.stamp = stamp;
        Ok(i)
    }

    /// Parses and validates `src` (at most [`MAX_BYTES`]) into a slot and
    /// fills `block` to name it.
    ///
    /// # Safety
    /// `src` stays alive and unchanged, and `block` where it is, as long
    /// as the block is passed to [`Slots::attach`] (of this set or
    /// another).
    pub unsafe fn parse(
        &mut self,
        src: &'static [u8],
        opts: &Options,
        block: &mut Block,
    ) -> Result<()> {
        if src.len() > MAX_BYTES {
            return Err(Error::new(ErrorCode::BadArgument, 0));
        }
        let stamp = self.stamp();
        self.load(src, opts, stamp)?;
        *block = Block::new(src, opts, stamp);
        Ok(())
    }

    /// The document `block` names, from the slot holding it or parsed
    /// again into one; `None` when the block was never filled or the text
    /// no longer parses (it was changed, against the contract).
    ///
    /// # Safety
    /// `block` was filled by [`Slots::parse`] (of any set, on any thread)
    /// and its text is alive and unchanged.
    #[inline(always)]
    pub unsafe fn attach(&mut self, block: *const Block) -> Option<&mut Document<'static>> {
        // SAFETY: the caller guarantees a block that parse filled.
        let b = unsafe { *block };
        if b.stamp == 0 {
            // Never filled: a slot with no document has this stamp.
            return None;
        }
        let i = match self.find(b.stamp) {
            Some(i) => i,
            // SAFETY: the caller's guarantees are attach's.
            None => unsafe { self.load_again(&b) }?,
        };
        Some(&mut self.slots[i].doc)
    }

    /// Parses the text `block` names again, into a slot.
    ///
    /// # Safety
    /// As [`Slots::attach`].
    #[cold]
    unsafe fn load_again(&mut self, b: &Block) -> Option<usize> {
        // SAFETY: the block names a text the caller keeps alive.
        let src = unsafe { core::slice::from_raw_parts(b.text, b.len as usize) };
        self.load(src, &b.options(), b.stamp).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::navigate::ValueType;

    const TEXTS: [&[u8]; 4] = [
        br#"{"order_id":"A-20931","options":{"history":true,"max_items":25}}"#,
        br#"[1,"two\n",{"three":[3,3.5]},null]"#,
        br#"{"a":1,"a":2,"b":"\u00e9"}"#,
        b"  7  ",
    ];

    /// What a few reads of `doc` give.
    fn read_all(doc: &mut Document<'_>) -> Vec<String> {
        let mut text = Vec::new();
        let mut out = vec![String::from_utf8_lossy(doc.src()).into_owned()];
        for path in [
            &b""[..],
            b"options.max_items",
            b"[1]",
            b"[2].three[1]",
            b"a",
            b"b",
        ] {
            out.push(match doc.find(0, path) {
                Ok(Some(at)) => match doc.value_type(at) {
                    ValueType::String => format!("{:?}", doc.string(at, &mut text)),
                    ValueType::Number => format!("{}", doc.f64(at)),
                    t => format!("{t:?} {:?}", doc.len(at)),
                },
                other => format!("{other:?}"),
            });
        }
        out
    }

    /// Parses a 'static text into `slots`, naming it by `block`.
    fn parse(
        slots: &mut Slots,
        text: &'static [u8],
        opts: &Options,
        block: &mut Block,
    ) -> Result<()> {
        // SAFETY: a 'static text; every block of these tests stays in its
        // Box or stack frame while it is read.
        unsafe { slots.parse(text, opts, block) }
    }

    /// [`read_all`] of the document of `block`, through `slots`.
    fn reads(slots: &mut Slots, block: &Block) -> Vec<String> {
        // SAFETY: a block parse filled, over a 'static text.
        read_all(unsafe { slots.attach(block) }.expect("attached"))
    }

    /// A block lent to another thread: a block holds a pointer, which is
    /// not `Sync`. (A pointer keeps its provenance, which Miri's strict
    /// provenance checks; an address made back into a pointer would not.)
    struct SharedBlock(*mut Block);

    // SAFETY: shared only with one scoped thread, which the block
    // outlives and which alone uses it meanwhile.
    unsafe impl Sync for SharedBlock {}

    impl SharedBlock {
        /// The block (a method, so that a closure borrows the whole
        /// `SharedBlock`, not its field).
        fn pointer(&self) -> *mut Block {
            self.0
        }
    }

    /// [`read_all`] of a document of its own, checked against a block
    /// parsed by other slots on another thread (which `slots` load from
    /// the text).
    fn expected(slots: &mut Slots, text: &'static [u8]) -> Vec<String> {
        let mut block = Block::default();
        let shared = SharedBlock(core::ptr::from_mut(&mut block));
        std::thread::scope(|s| {
            s.spawn(|| {
                let block = shared.pointer();
                // SAFETY: the block on the stack frame of the scope, which
                // outlives the thread.
                parse(&mut Slots::default(), text, &Options::default(), unsafe {
                    &mut *block
                })
                .unwrap();
            });
        });
        let out = read_all(&mut Document::parse(text, &Options::default()).unwrap());
        assert_eq!(
            out,
            reads(slots, &block),
            "a block parsed on another thread"
        );
        out
    }

    #[test]
    fn reads_as_a_document_of_its_own_in_any_order() {
        let mut slots = Slots::default();
        let mut blocks: Vec<Box<Block>> = (0..3 * SLOTS).map(|_| Box::default()).collect();
        for (i, block) in blocks.iter_mut().enumerate() {
            parse(
                &mut slots,
                TEXTS[i % TEXTS.len()],
                &Options::default(),
                block,
            )
            .unwrap();
        }
        // Forwards, backwards, and strided: more blocks than slots.
        let n = blocks.len();
        for i in (0..n).chain((0..n).rev()).chain((0..n).map(|i| i * 7 % n)) {
            let want = expected(&mut slots, TEXTS[i % TEXTS.len()]);
            assert_eq!(reads(&mut slots, &blocks[i]), want, "block {i}");
        }
    }

    /// The address of the slot holding the document of `block`.
    fn slot_of(slots: &mut Slots, block: &Block) -> usize {
        // SAFETY: as in `reads`.
        core::ptr::from_mut(unsafe { slots.attach(block) }.unwrap()).addr()
    }

    #[test]
    fn keeps_the_documents_used_last() {
        let mut slots = Slots::default();
        let mut kept = Box::<Block>::default();
        let mut other = Box::<Block>::default();
        parse(&mut slots, TEXTS[0], &Options::default(), &mut kept).unwrap();
        let slot = slot_of(&mut slots, &kept);
        for i in 0..4 * SLOTS {
            parse(
                &mut slots,
                TEXTS[i % 2 + 1],
                &Options::default(),
                &mut other,
            )
            .unwrap();
            assert_eq!(
                slot,
                slot_of(&mut slots, &kept),
                "read between parses, it stays in place"
            );
        }
        let mut others: Vec<Box<Block>> = (0..SLOTS).map(|_| Box::default()).collect();
        for block in &mut others {
            parse(&mut slots, TEXTS[1], &Options::default(), block).unwrap();
        }
        // Pushed out by SLOTS newer ones, and parsed again.
        let want = expected(&mut slots, TEXTS[0]);
        assert_eq!(reads(&mut slots, &kept), want);
    }

    #[test]
    fn a_block_parsed_again_names_its_new_text() {
        let mut slots = Slots::default();
        let mut block = Box::<Block>::default();
        let mut other = Box::<Block>::default();
        parse(&mut slots, TEXTS[0], &Options::default(), &mut block).unwrap();
        parse(&mut slots, TEXTS[2], &Options::default(), &mut other).unwrap();
        // The memory of a dead block, given to a new one for another text
        // (as LuaJIT's allocator does): the slot of the old is not read.
        parse(&mut slots, TEXTS[1], &Options::default(), &mut block).unwrap();
        let want = expected(&mut slots, TEXTS[1]);
        assert_eq!(reads(&mut slots, &block), want);
        let want = expected(&mut slots, TEXTS[2]);
        assert_eq!(reads(&mut slots, &other), want);
    }

    #[test]
    fn a_block_is_read_through_other_slots_too() {
        // Another reader's slots (a nested section's): the text is parsed
        // again there, and both sets read the same document.
        let (mut mine, mut theirs) = (Slots::default(), Slots::default());
        let mut block = Box::<Block>::default();
        parse(&mut mine, TEXTS[1], &Options::default(), &mut block).unwrap();
        let want = read_all(&mut Document::parse(TEXTS[1], &Options::default()).unwrap());
        assert_eq!(reads(&mut theirs, &block), want);
        assert_eq!(reads(&mut mine, &block), want);
    }

    #[test]
    fn names_nothing_before_a_parse() {
        let block = Block::default();
        let mut slots = Slots::default();
        // SAFETY: a block (never filled: attach says so).
        assert!(unsafe { slots.attach(&block) }.is_none());
    }

    #[test]
    fn refuses_long_texts_and_rejects_as_documents_do() {
        static LONG: [u8; MAX_BYTES + 1] = [b' '; MAX_BYTES + 1];
        let mut slots = Slots::default();
        let mut block = Box::<Block>::default();
        let opts = Options::default();
        let long = parse(&mut slots, &LONG, &opts, &mut block).unwrap_err();
        assert_eq!(long.code, ErrorCode::BadArgument);
        let exact = &LONG[..MAX_BYTES];
        for bad in [exact, b"{\"a\":1,}", b"[\"\\x\"]", b"{\"a\":1,\"a\":2}"] {
            let strict = Options {
                duplicate_keys: DuplicateKeys::Error,
                ..Options::default()
            };
            let got = parse(&mut slots, bad, &strict, &mut block).unwrap_err();
            let want = Document::parse(bad, &strict).unwrap_err();
            assert_eq!((got.code, got.offset), (want.code, want.offset));
        }
    }
}
