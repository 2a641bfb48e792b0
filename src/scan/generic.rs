//! Stage 1, written once: find the structure of 64 bytes at a time.
//!
//! Each kernel supplies a [`Simd`] instance: how to load 64 bytes, how to
//! turn them into per-byte class masks ([`Masks`], bit `i` = byte `i`), a
//! carry-less prefix XOR, and a UTF-8 checker; optionally a faster way to
//! turn a mask into offsets. Everything below works on those `u64` masks,
//! so every kernel computes the same index by construction; the tests also
//! compare them byte for byte.
//!
//! # The algorithm, on one block
//!
//! ```text
//! bytes        { " a \ " b \ \ " : 1 2 }
//! backslash    . . . 1 . . 1 1 . . . . .
//! escaped      . . . . 1 . . 1 . . . . .   the byte after an odd run of '\'
//! quote        . 1 . . 1 . . . 1 . . . .
//! real quote   . 1 . . . . . . 1 . . . .   quote & !escaped
//! in string    . 1 1 1 1 1 1 1 . . . . .   prefix XOR of real quotes
//! op           1 . . . . . . . . 1 . . 1   { } [ ] : , outside strings
//! scalar       . . . . . . . . . . 1 1 .   not op, space, quote or in string
//! structural   1 1 . . . . . . 1 1 1 . 1   op | real quote | scalar start
//! ```
//!
//! * **Escapes.** A backslash escapes the next byte unless it is escaped
//!   itself, so in a run of backslashes every other one is active, starting
//!   with the first. [`escaped_bits`] finds, branch-free, which bytes are
//!   escaped with one subtraction of the backslashes from their own mask
//!   shifted up a bit, with the odd bits set, so that every run, whichever
//!   parity it starts on, leaves its active backslashes and the byte after
//!   an odd run marked (the method of simdjson 3). A run reaching bit 63
//!   carries into the next block.
//! * **Strings.** The prefix XOR of the real quotes is 1 from an opening
//!   quote up to, not including, its closing quote; the carry-less multiply
//!   by all-ones computes it in one instruction on x86. Whether the block
//!   ends inside a string carries into the next block.
//! * **Scalars.** Bytes outside strings that are not structural, not
//!   whitespace and not a quote belong to numbers and literals (or to
//!   garbage, which validation rejects); only the first byte of each run is
//!   indexed.
//! * **Checks done here**, because stage 1 is the only stage that sees
//!   every byte: UTF-8 over the whole input (outside strings only ASCII can
//!   be valid anyway), raw control characters inside strings, and an input
//!   that ends inside a string. Escape sequences are *recorded* here (the
//!   `escapes` list) and validation checks them in document order; but
//!   the short escapes that are most of them (`\n`, `\"`, `\\`, `\/`,
//!   `\t`, `\f`) are vouched for here, one table look-up a block, and
//!   listed only where a string's first escape in a block is one
//!   ([`listed_escapes`]): that entry is what tells validation, and so
//!   reads, that the string has escapes. So is a `\uXXXX` of a character
//!   that is no surrogate, in text escaped throughout ([`unlist_vouched`]).
//!   Which escapes are listed is the same with every kernel.
//!
//! # Long strings
//!
//! A block that starts inside a string and holds no quote, backslash or
//! control byte is string content and nothing else: it indexes nothing
//! and cannot change the string state, so it skips classification and
//! the offset writer after one test. Only its UTF-8 is checked, if it has
//! non-ASCII bytes (the long tweets of twitter.json, 13% of its blocks:
//! stage 1 +8%); a plain ASCII one (a base64 image) needs nothing at all,
//! and from it on the next blocks are tested four at a time, which is
//! what lets a 1 MB image be scanned at close to memory bandwidth. What
//! the previous block carries in needs care: an escape of byte 0 is
//! recorded, and a UTF-8 sequence left open is an error, as the checker
//! would find. The test is only tried after a block that was inside a
//! string from its first byte to its last, so the short strings of dense
//! JSON do not pay for it (one branch on a flag).
//!
//! A block of such a string that does hold backslashes (source code in a
//! chat message: a `\n` on every line) but no control byte and no quote
//! that they leave unescaped is string content too, and the string goes on
//! past it: it is classified, and only its escapes are recorded and its
//! UTF-8 checked (`Scanner::escaped_content`).

use core::mem::MaybeUninit;

use super::classify::unicode;
use crate::error::{Error, ErrorCode, Result};
use crate::index::Index;

/// Per-byte class masks of one 64-byte block (bit `i` describes byte `i`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Masks {
    /// `"`
    pub quote: u64,
    /// `\`
    pub backslash: u64,
    /// `{ } [ ] : ,`
    pub op: u64,
    /// space, tab, line feed, carriage return
    pub whitespace: u64,
    /// bytes below 0x20
    pub control: u64,
}

/// Per-byte masks of one 64-byte block (bit `i` describes byte `i`): what
/// [`unlist_vouched`] needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UnicodeBytes {
    /// `u`
    pub u: u64,
    /// hex digits
    pub hex: u64,
    /// `d` and `D`
    pub d: u64,
    /// hex digits from 8: `8`, `9`, `a` to `f`, `A` to `F`
    pub hex_from_8: u64,
    /// `"`
    pub quote: u64,
}

impl UnicodeBytes {
    /// The masks from `any(bits)`, the mask of the block's bytes whose
    /// class (`classify::unicode`, looked up by nibbles) has any of `bits`.
    #[inline(always)]
    pub(crate) fn from_classes(any: impl Fn(u8) -> u64) -> UnicodeBytes {
        UnicodeBytes {
            u: any(unicode::LETTER_U),
            hex: any(unicode::HEX),
            d: any(unicode::LETTER_D),
            hex_from_8: any(unicode::HEX_FROM_8),
            quote: any(unicode::QUOTE),
        }
    }
}

/// What a kernel provides to the generic scanner.
pub(crate) trait Simd: Copy {
    /// 64 loaded bytes.
    type Block: Copy;
    /// The kernel's UTF-8 validator.
    type Utf8: Utf8Check<Self::Block>;

    /// Loads 64 bytes.
    ///
    /// # Safety
    /// `ptr` must be valid for reading 64 bytes.
    unsafe fn load(self, ptr: *const u8) -> Self::Block;
    /// Classifies the bytes of `block`.
    fn masks(self, block: &Self::Block) -> Masks;
    /// True when no byte is `"`, `\`, below 0x20 or above 0x7F.
    fn is_plain_string(self, block: &Self::Block) -> bool;
    /// True when no byte is `"`, `\` or below 0x20: inside a string,
    /// such a block is string content and nothing else.
    fn is_string_content(self, block: &Self::Block) -> bool;
    /// True when some byte is above 0x7F.
    fn has_non_ascii(self, block: &Self::Block) -> bool;
    /// The bytes `"` `t` `f` `\` `n` `/`: after a backslash, the short
    /// escapes that stage 1 vouches for, so that stage 2 need not see
    /// them ([`listed_escapes`]). One table look-up by the low nibble
    /// (`classify::SHORT_ESCAPE_TABLE`); `b` and `r` share `"`'s nibble
    /// and are left to stage 2. Asked only of blocks that have escapes.
    fn short_escapes(self, block: &Self::Block) -> u64;
    /// The bytes of `block` that tell which `\uXXXX` escapes stage 1
    /// vouches for ([`unlist_vouched`]), looked up by nibbles where the
    /// kernel has a byte shuffle (`classify::unicode`).
    fn unicode_bytes(self, block: &Self::Block) -> UnicodeBytes;
    /// [`push_unvouched`] with this kernel, out of line (compiled for its
    /// instruction set, where it needs one enabled): out of the scan's
    /// loop, whose registers it would take. Called for every run with
    /// escapes unless [`Simd::UNVOUCHES_IN_LOOP`].
    ///
    /// # Safety
    /// As for [`push_unvouched`].
    #[inline(never)]
    #[cold]
    unsafe fn push_unvouched(self, run: RunEscapes<'_>) {
        // SAFETY: the caller's contract.
        unsafe { push_unvouched(self, run) }
    }

    /// [`Simd::is_plain_string`] of the four blocks at `ptr`: how a long
    /// string of plain ASCII (a base64 image) is skipped. The default
    /// tests each block; a kernel may have one test for the four.
    ///
    /// # Safety
    /// `ptr` must be valid for reading 256 bytes.
    #[inline(always)]
    unsafe fn is_plain_string_256(self, ptr: *const u8) -> bool {
        // SAFETY: 256 readable bytes at ptr (the caller's contract).
        unsafe {
            self.is_plain_string(&self.load(ptr))
                & self.is_plain_string(&self.load(ptr.add(64)))
                & self.is_plain_string(&self.load(ptr.add(128)))
                & self.is_plain_string(&self.load(ptr.add(192)))
        }
    }
    /// Bit `i` of the result is the XOR of bits `0..=i` of `bits`.
    fn prefix_xor(self, bits: u64) -> u64;
    /// A fresh UTF-8 checker.
    fn utf8(self) -> Self::Utf8;

    /// Whether the scan writes each block's offsets as it goes, while
    /// classifying the next block, rather than after a run of blocks (see
    /// [`scan`]): for a kernel whose writer is a few instructions, so
    /// that its stores overlap the classifying of the next block.
    const WRITES_AS_IT_SCANS: bool = false;

    /// Whether the scan drops the `\uXXXX` it vouches for from a block's
    /// listed escapes ([`unlist_vouched`]) in its loop, from the block it
    /// has classified, rather than after each run, from the blocks it
    /// reloads ([`push_unvouched`]). In the loop for the portable kernel,
    /// whose bit planes of the block are made once for both: after the
    /// run, making them again cost more than validation saved (a 10 KB
    /// message in French, an escape a word, parsed at 0.88 times the
    /// speed, github-100k at 0.95; `tools/ab_parse.sh`). After the run for
    /// the SIMD kernels: in the loop, the AVX-512 loop lost vector
    /// registers to it and the full parse of twitter.json and
    /// citm_catalog.json (no `\u` in either) ran 0.80 times as fast, on
    /// an AMD EPYC of the Zen 5 generation.
    const UNVOUCHES_IN_LOOP: bool = false;

    /// Whether the run classifies two blocks a turn outside long strings
    /// (see [`Scanner::run`]): the loop's own tests (the bound, the
    /// long-string flag) once for both, and more of two blocks' work in
    /// flight at once. Measured first with AVX-512 on an Intel Xeon, when
    /// it wrote each block's offsets as soon as it had classified it
    /// (`cargo bench --bench core`, three runs at d59d451 and at 4c45c33,
    /// medians): twitter.json 10.3 -> 11.1 GB/s, citm_catalog 11.1 ->
    /// 12.5, canada 11.1 -> 12.3. AVX2 still gains: one block a turn ran
    /// its stage 1 at 0.80-0.83x simdjson's `haswell` on twitter and
    /// citm_catalog against 0.84-0.87x. A kernel that runs faster one
    /// block a turn says so, with its figures (`scalar`; `avx512` on
    /// AMD's cores, chosen at run time). NEON keeps the default untimed:
    /// it runs here only under emulation. (docs/benchmarks.md, "One block
    /// a turn when writing late", "Two blocks a turn on Intel, one on
    /// AMD".)
    const PAIRS_BLOCKS: bool = true;

    /// How many slots past its offsets [`Simd::write_offsets`] may write:
    /// 8 for the default and for AVX2's table, which store 8 at a time;
    /// a kernel storing more at once says so. Every document keeps this
    /// much spare room in its index.
    const WRITE_SLACK: usize = 8;

    /// Writes `base + i` for every set bit `i` of `bits`, lowest first,
    /// from `out` on, and returns the slot past the last one written. The
    /// default takes the bits one by one; a kernel may override it with
    /// something branch-free.
    ///
    /// # Safety
    /// `out` must be valid for writing `bits.count_ones()` plus
    /// [`Simd::WRITE_SLACK`] `u32`s; the slack may be overwritten with
    /// anything.
    #[inline(always)]
    unsafe fn write_offsets(self, out: *mut u32, base: u32, bits: u64) -> *mut u32 {
        // SAFETY: forwarded from the caller.
        unsafe { write_offsets_one_by_one(out, base, bits) }
    }

    /// Whether a run written after it ([`Keep`]) counts each block's
    /// structurals as it classifies the block, and keeps the count beside
    /// the mask for [`Simd::write_offsets_counted`], so that the writer
    /// after the run does not count them: for a kernel whose writer is
    /// bound by the one port that counts bits (AVX2 on Intel's cores, see
    /// `avx2.rs`).
    const KEEPS_COUNTS: bool = false;

    /// [`Simd::write_offsets`] of a mask whose count of set bits,
    /// `count`, is known: called instead of it where the kernel keeps
    /// counts ([`Simd::KEEPS_COUNTS`]).
    ///
    /// # Safety
    /// As for [`Simd::write_offsets`]; `count` is `bits.count_ones()`.
    #[inline(always)]
    unsafe fn write_offsets_counted(
        self,
        out: *mut u32,
        base: u32,
        bits: u64,
        count: u32,
    ) -> *mut u32 {
        let _ = count;
        // SAFETY: forwarded from the caller.
        unsafe { self.write_offsets(out, base, bits) }
    }
}

/// The default [`Simd::write_offsets`]: 8 slots written unconditionally,
/// 8 more only past 8 bits, a loop only past 16. Most blocks of dense
/// JSON hold fewer than 16 structurals, so this is at most two branches
/// per block instead of one per bit.
///
/// # Safety
/// As for [`Simd::write_offsets`].
#[inline(always)]
pub(crate) unsafe fn write_offsets_one_by_one(out: *mut u32, base: u32, bits: u64) -> *mut u32 {
    // SAFETY: forwarded from the caller.
    unsafe { write_offsets_one_by_one_counted(out, base, bits, bits.count_ones()) }
}

/// [`write_offsets_one_by_one`] of a mask whose count of set bits,
/// `count`, is known.
///
/// # Safety
/// As for [`Simd::write_offsets`]; `count` is `bits.count_ones()`.
#[inline(always)]
pub(crate) unsafe fn write_offsets_one_by_one_counted(
    out: *mut u32,
    base: u32,
    mut bits: u64,
    count: u32,
) -> *mut u32 {
    let count = count as usize;
    let mut fill = |from: usize, to: usize| {
        for i in from..to {
            // Volatile only so that LLVM keeps these plain 4-byte stores:
            // it otherwise packs the 8 offsets into a vector with
            // `vpinsrd`, measured 15-25% slower on the corpus.
            // SAFETY: i < 8, or i < 16 with more than 8 bits, or i <
            // count: below count + 8, which the caller provides.
            unsafe {
                out.add(i)
                    .write_volatile(base.wrapping_add(bits.trailing_zeros()))
            };
            bits &= bits.wrapping_sub(1);
        }
    };
    fill(0, 8);
    if count > 8 {
        fill(8, 16);
        if count > 16 {
            fill(16, count);
        }
    }
    // SAFETY: count <= 64, within the caller's slots.
    unsafe { out.add(count) }
}

/// Appends, for each mask a [`Keep`] sink kept in order, the offsets of
/// its set bits (see [`Simd::write_offsets`]) to `out`, with the mask's
/// count where the kernel keeps counts ([`Simd::KEEPS_COUNTS`]).
///
/// Room for all the offsets is made once, so the loop keeps its cursor
/// in a register: through `Vec::push` (or `reserve` and `set_len` per
/// mask) the length goes to memory and back for every block, a
/// loop-carried trip that each block's writes wait on.
///
/// When the vector lacks room for 64 offsets per mask, it grows by what
/// the masks hold, not by that bound: a pooled document keeps its
/// capacity, and a 282-byte SSE event kept 1 280 bytes for its 62
/// offsets. (Counting every run's bits instead cost stage 1 4-5% more
/// instructions on the corpus.)
#[inline(always)]
fn push_kept<S: Simd>(simd: S, out: &mut Vec<u32>, kept: &[Kept]) {
    let count = |k: &Kept| {
        if S::KEEPS_COUNTS {
            k.count
        } else {
            k.bits.count_ones()
        }
    };
    let write = |cursor: *mut u32, k: &Kept| {
        // SAFETY: `push` passes a cursor with room for the mask's offsets
        // and the slack; `count` is the mask's (a kept count is: `Keep`).
        // (A kernel that keeps none has the default, which ignores it.)
        unsafe { simd.write_offsets_counted(cursor, k.base, k.bits, count(k)) }
    };
    // SAFETY: the writers write as `push` requires.
    unsafe { push(out, kept, S::WRITE_SLACK, count, write) }
}

/// The body of [`push_kept`]: `count` gives a mask's
/// count of set bits, `write` writes its offsets at a cursor as
/// [`Simd::write_offsets`] does and returns the slot past them.
///
/// # Safety
/// `count(m)` is the number of offsets `write(cursor, m)` writes, and
/// `write` writes them and at most `slack` slots more from `cursor` on,
/// initialising the first `count(m)`, and returns `cursor + count(m)`.
#[inline(always)]
unsafe fn push<M>(
    out: &mut Vec<u32>,
    masks: &[M],
    slack: usize,
    count: impl Fn(&M) -> u32,
    write: impl Fn(*mut u32, &M) -> *mut u32,
) {
    if out.capacity() - out.len() < 64 * masks.len() + slack {
        let total: usize = masks.iter().map(|m| count(m) as usize).sum();
        out.reserve(total + slack);
    }
    let start = out.len();
    let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u32>();
    let mut cursor = dst;
    for m in masks {
        // Before each mask the cursor is past the offsets of the masks
        // before it, so this mask's offsets and the slack after them lie
        // within the spare capacity: 64 per mask plus the slack, or all
        // the masks' offsets plus the slack (above), as `write` needs
        // (the caller's contract).
        cursor = write(cursor, m);
    }
    // SAFETY: the writes initialised the slots from `dst` to `cursor`,
    // within the capacity.
    unsafe { out.set_len(start + cursor.offset_from(dst) as usize) }
}

/// Appends, for each `(base, bits)` of `masks` in order, the offsets of
/// the set bits to `out`, one by one ([`write_offsets_exactly`]): a run's
/// escapes, mostly one or two per block that has any, where the kernels'
/// branch-free writers cost the same for one bit as for sixty-four.
/// `total` is the masks' count of bits, room for which is made once:
/// through `Vec::push` each offset stored the length and compared it
/// with the capacity, 15 instructions an escape where this takes 6. Out
/// of line: in the scan's body it changed the register allocation of the
/// hot loop.
#[inline(never)]
fn push_sparse(out: &mut Vec<u32>, masks: &[(u32, u64)], total: usize) {
    out.reserve(total);
    let start = out.len();
    let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u32>();
    let mut cursor = dst;
    for &(base, bits) in masks {
        // SAFETY: fewer than `total` offsets are written before these,
        // and the spare capacity holds `total`.
        cursor = unsafe { write_offsets_exactly(cursor, base, bits) };
    }
    // SAFETY: the loop initialised the slots from `dst` to `cursor`, the
    // masks' `total` bits, within the capacity.
    unsafe { out.set_len(start + cursor.offset_from(dst) as usize) }
}

/// Writes the offsets of `bits` (`base` plus each set bit's place) at
/// `cursor`, one a set bit, and returns the slot past them: no slot past
/// them is written, unlike [`write_offsets_one_by_one`], which stores
/// eight at once.
///
/// # Safety
/// `cursor` must be valid for writing `bits.count_ones()` `u32`s.
#[inline(always)]
unsafe fn write_offsets_exactly(mut cursor: *mut u32, base: u32, mut bits: u64) -> *mut u32 {
    while bits != 0 {
        // SAFETY: one of the `bits.count_ones()` slots (the contract).
        unsafe {
            cursor.write(base + bits.trailing_zeros());
            cursor = cursor.add(1);
        }
        bits &= bits - 1;
    }
    cursor
}

/// A streaming UTF-8 validator fed one block at a time.
pub(crate) trait Utf8Check<B> {
    /// Validates `block`, continuing sequences from the previous block.
    fn check(&mut self, block: &B);
    /// Records that a block of plain ASCII was skipped without `check`
    /// (a sequence the previous block left open is then an error, as
    /// `check` would find).
    fn skip_ascii(&mut self);
    /// True when any error was seen, counting an open sequence at the end.
    fn finish(&mut self) -> bool;
}

/// The prefix XOR of `bits` in six shift-XOR steps, for kernels without a
/// carry-less multiply: each step doubles the span already folded in.
#[inline(always)]
pub(crate) fn prefix_xor_by_shifts(mut bits: u64) -> u64 {
    bits ^= bits << 1;
    bits ^= bits << 2;
    bits ^= bits << 4;
    bits ^= bits << 8;
    bits ^= bits << 16;
    bits ^= bits << 32;
    bits
}

/// State carried from one block to the next.
#[derive(Default)]
struct Carry {
    /// The previous block's in-string mask (0 before the first block).
    /// Its top bit says whether the next block starts inside a string;
    /// all ones says the whole block was, and only then is the next block
    /// tested for skipping (see "Long strings" above). One register for
    /// both: the loop has none to spare.
    in_string: u64,
    /// 1 when byte 0 of the next block is escaped.
    escaped: u64,
    /// 1 when the previous block ended in the middle of a scalar.
    scalar: u64,
}

impl Carry {
    /// All ones when the next block starts inside a string, else 0.
    #[inline(always)]
    fn starts_in_string(&self) -> u64 {
        ((self.in_string as i64) >> 63) as u64
    }

    /// Whether the whole previous block was inside a string.
    #[inline(always)]
    fn long_string(&self) -> bool {
        self.in_string == u64::MAX
    }
}

/// Bits set where a byte is escaped by a backslash; `carry` (0 or 1) says
/// whether bit 0 is escaped by the previous block and is updated for the
/// next one. See the module docs for the method.
#[inline(always)]
pub(crate) fn escaped_bits(backslash: u64, carry: &mut u64) -> u64 {
    const ODD: u64 = 0xAAAA_AAAA_AAAA_AAAA;
    if backslash == 0 {
        // Most blocks have no backslash: only the carried-in escape.
        return core::mem::take(carry);
    }
    // A backslash that is itself escaped starts nothing.
    let active = backslash & !*carry;
    // Take a run of `active` from bit `a`, `n` long. In `(active << 1) |
    // ODD` it is bits a+1 ..= a+n, and bit `a` too when `a` is odd.
    // Subtracting the run (bits a .. a+n) leaves, for an even `a`, bits
    // a .. a+n set and a+n clear; for an odd `a`, bit a+n alone; no
    // borrow leaves the run. XOR with ODD then gives, either way, the
    // run's bits of `a`'s parity (its active backslashes) and bit a+n
    // exactly when `n` is odd (the byte an active backslash escapes), and
    // clears everything outside runs.
    let marks = ((active << 1) | ODD).wrapping_sub(active) ^ ODD;
    // Backslashes that are not active are escaped, and so is the byte
    // after an odd run; so is byte 0 when the previous block escapes it.
    let escaped = marks ^ (backslash | *carry);
    // An active backslash at bit 63 escapes byte 64.
    *carry = (marks & backslash) >> 63;
    escaped
}

/// One block's results.
struct Found {
    /// Offsets to index, relative to the block.
    structurals: u64,
    /// Escaped bytes inside strings.
    escapes: u64,
    /// Quotes that no backslash escapes.
    quotes: u64,
    /// Raw control bytes inside strings (an error when not 0).
    control: u64,
}

/// Scans one block.
///
/// Only the escape and in-string carries are serial from block to block;
/// the scalar starts are found without knowing where strings are (as
/// simdjson does) and masked afterwards, which keeps them off that chain:
/// a byte outside strings is never preceded by a byte inside one except
/// a closing quote, which is no scalar byte, so the result is the same.
#[inline(always)]
fn step<S: Simd>(simd: S, block: &S::Block, carry: &mut Carry) -> Found {
    let m = simd.masks(block);
    let escaped = escaped_bits(m.backslash, &mut carry.escaped);
    let quotes = m.quote & !escaped;
    let in_string = simd.prefix_xor(quotes) ^ carry.starts_in_string();
    carry.in_string = in_string;
    let scalar = !(m.op | m.whitespace | quotes);
    let scalar_starts = scalar & !((scalar << 1) | carry.scalar);
    carry.scalar = scalar >> 63;
    Found {
        structurals: ((m.op | scalar_starts) & !in_string) | quotes,
        escapes: escaped & in_string,
        quotes,
        control: m.control & in_string,
    }
}

/// Blocks scanned before their structurals are written out: the size of
/// the scan's two arrays of block masks.
const RUN: usize = 64;

/// A pass over a whole input written once, here, for every kernel: stage
/// 1 ([`Stage1`]) or the UTF-8 check alone ([`Utf8`]). Each kernel has
/// one entry that enables its instructions and runs a pass with its
/// [`Simd`] (`avx2::run`, ...), so a new pass adds no code per kernel.
pub(crate) trait Pass {
    /// What the pass gives.
    type Output;
    /// The input it passes over (the scalar kernel checks its UTF-8 up
    /// front).
    fn input(&self) -> &[u8];
    /// Runs the pass with `simd`.
    ///
    /// # Safety
    /// The CPU must support the instructions `simd` uses (its kernel's
    /// capability token exists).
    unsafe fn run<S: Simd>(self, simd: S) -> Self::Output;
}

/// Stage 1 over `input` into `index` (see [`scan`]).
pub(crate) struct Stage1<'a> {
    pub input: &'a [u8],
    pub index: &'a mut Index,
}

impl Pass for Stage1<'_> {
    type Output = Result<()>;

    fn input(&self) -> &[u8] {
        self.input
    }

    #[inline(always)]
    unsafe fn run<S: Simd>(self, simd: S) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { scan(simd, self.input, self.index) }
    }
}

/// Whether the input is valid UTF-8 (see [`is_utf8`]).
pub(crate) struct Utf8<'a>(pub &'a [u8]);

impl Pass for Utf8<'_> {
    type Output = bool;

    fn input(&self) -> &[u8] {
        self.0
    }

    #[inline(always)]
    unsafe fn run<S: Simd>(self, simd: S) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { is_utf8(simd, self.0) }
    }
}

/// Skips plain ASCII string content (no `"`, `\`, byte below 0x20 or
/// from 0x80) from `at`, where the 64 bytes before `at` are such content
/// too: returns an offset past `at` by whole blocks, all of them plain
/// content, and at most 255 + 63 bytes before the first byte that is not
/// (or before `end`). How a long string of plain ASCII (a base64 image)
/// is skipped.
///
/// The windows of 256 bytes it tests start at addresses aligned to 64
/// bytes, the first one up to 63 bytes before `at` (inside the plain
/// block before it), so that no load splits a cache line: the text of
/// a large Lua string starts 40 bytes into a line, and there half of
/// AVX2's 32-byte loads split one (and every one of AVX-512's). Aligned,
/// AVX2 stage 1 of the 10 MB chat request ran at 56-57 GB/s instead of
/// 48 (docs/benchmarks.md, "Skipping on cache lines"). Up to 63 bytes
/// of the last window are left to the caller, to end on a block.
///
/// # Safety
/// `64 <= at <= end <= input.len()`; the CPU supports the instructions
/// `simd` uses.
#[inline(always)]
unsafe fn skip_plain_ascii<S: Simd>(simd: S, input: &[u8], at: usize, end: usize) -> usize {
    let start = input.as_ptr();
    // The bytes of the block before `at` that the first window takes in.
    let behind = (start as usize).wrapping_add(at) % 64;
    let mut window = at - behind;
    // SAFETY: window + 256 <= end <= len: 256 readable bytes.
    while window + 256 <= end && unsafe { simd.is_plain_string_256(start.add(window)) } {
        window += 256;
    }
    // The whole blocks from `at` that clean windows cover.
    at + window.saturating_sub(at) / 64 * 64
}

/// The string content at the start of an input, in whole blocks (see
/// [`string_run`]).
pub(crate) struct StringRun<'a>(pub &'a [u8]);

impl Pass for StringRun<'_> {
    type Output = (usize, bool);

    fn input(&self) -> &[u8] {
        self.0
    }

    #[inline(always)]
    unsafe fn run<S: Simd>(self, simd: S) -> (usize, bool) {
        // SAFETY: forwarded from the caller.
        unsafe { string_run(simd, self.0) }
    }
}

/// How many bytes at the start of `input` are string content in whole
/// blocks: the blocks before the first one (or the input's last, partial
/// block) holding a `"`, `\` or byte below 0x20; and whether one of
/// them has a byte from 0x80. As stage 1 skips long strings: a block at a
/// time, four at a time through plain ASCII.
///
/// # Safety
/// The CPU must support the instructions `simd` uses.
#[inline(always)]
unsafe fn string_run<S: Simd>(simd: S, input: &[u8]) -> (usize, bool) {
    let (mut at, mut non_ascii) = (0, false);
    while at + 64 <= input.len() {
        // SAFETY: at + 64 <= len: 64 readable bytes.
        let block = unsafe { simd.load(input.as_ptr().add(at)) };
        if !simd.is_string_content(&block) {
            break;
        }
        at += 64;
        if simd.has_non_ascii(&block) {
            non_ascii = true;
        } else {
            // SAFETY: the end is the input's; the caller vouches for the
            // CPU.
            at = unsafe { skip_plain_ascii(simd, input, at, input.len()) };
        }
    }
    (at, non_ascii)
}

/// Runs stage 1 over `input`, appending to `index.positions` and
/// `index.escapes`. The caller has checked that `input` is shorter than
/// 4 GiB.
///
/// Works in runs of up to [`RUN`] blocks ([`Scanner::run`]). How a run's
/// structurals reach the index is the kernel's choice
/// ([`Simd::WRITES_AS_IT_SCANS`]):
///
/// * **After the run** ([`Keep`], the default): the run's loop keeps each
///   block's structural mask (with its count, where the kernel keeps counts:
///   [`Simd::KEEPS_COUNTS`]), then [`push_kept`] writes the offsets.
///   Split this way each loop keeps its state in registers, and the
///   offsets of one block are written while nothing waits on them; the
///   index grows by what the masks hold, no more. Writing each block's
///   offsets right after classifying it, as simdjson does, was 10-15%
///   slower with the AVX2 kernel's table writer (the loop then spills its
///   carries to the stack), and reading the mask's bytes from memory in
///   the writer took fewer instructions but no less time.
/// * **As it scans** ([`WriteNow`]): for the AVX-512 kernel, whose writer
///   is one compress and one store, the stores then overlap the
///   classifying of the next blocks, where after the run they came
///   back to back: stage 1 11-17% faster on the corpus (`cargo bench
///   --bench core` at 5366357 and 3393bfa, the UTF-8 state kept in
///   vectors as well, see `avx512.rs`). Each block's offsets are written
///   one block late, while the next block is classified, as simdjson
///   does: on the AMD EPYC of the Zen 5 generation stage 1 ran a median
///   0.86x simdjson's `icelake` on citm_catalog and canada written at
///   once, 0.89x one block late, twitter 0.91x either way (`cargo bench
///   --bench core`, five runs and ten; docs/benchmarks.md, "Offsets
///   written one block late"), and there one block a turn, not two
///   ([`Simd::PAIRS_BLOCKS`], chosen by the CPU). This needs room for
///   64 offsets per block of the run before it starts: made for inputs
///   of more than one run, where it is at most 16 KB past the entries;
///   a smaller input is written this way only into room it already has
///   (a pooled document), so that a fresh document of 300 bytes does not
///   keep 1 KB for its 60 offsets.
///
/// # Safety
/// The CPU must support the instructions `simd` uses (its kernel's
/// capability token exists).
#[inline(always)]
unsafe fn scan<S: Simd>(simd: S, input: &[u8], index: &mut Index) -> Result<()> {
    let len = input.len();
    let mut scanner = Scanner {
        simd,
        input,
        whole: len - len % 64,
        pos: 0,
        carry: Carry::default(),
        utf8: simd.utf8(),
    };
    // Left uninitialised: zeroing 2 KB cost a 100-byte text more than
    // classifying it (350 instructions of a scan's 790).
    let mut found = [MaybeUninit::<Kept>::uninit(); RUN];
    let mut escapes = [MaybeUninit::<(u32, u64)>::uninit(); RUN];
    let control = |ControlAt(at)| control_error(input, at);
    while scanner.pos < len {
        let run_end = scanner.whole.min(scanner.pos + 64 * RUN);
        // 64 offsets per block of the run and of the tail it may take.
        let room = 64 * ((run_end - scanner.pos) / 64 + 1) + S::WRITE_SLACK;
        let positions = &mut index.positions;
        let n_escapes = if S::WRITES_AS_IT_SCANS
            && (len > 64 * RUN || positions.capacity() - positions.len() >= room)
        {
            positions.reserve(room);
            let mut sink = WriteNow::new(positions);
            // SAFETY: the sink has room for 64 offsets per block of the
            // run, plus the writer's slack; the caller vouches for the
            // CPU.
            let n_escapes =
                unsafe { scanner.run(run_end, &mut sink, &mut escapes) }.map_err(control)?;
            // SAFETY: the caller vouches for the CPU.
            unsafe { sink.finish(simd, positions) };
            n_escapes
        } else {
            let mut sink = Keep::new(&mut found);
            // SAFETY: the sink has a slot per block of a run; the caller
            // vouches for the CPU.
            let n_escapes =
                unsafe { scanner.run(run_end, &mut sink, &mut escapes) }.map_err(control)?;
            // SAFETY: the run wrote the sink's first `len()` slots.
            push_kept(simd, positions, unsafe { written(&found, sink.len()) });
            n_escapes
        };
        if n_escapes != 0 {
            // SAFETY: the run wrote the first n_escapes entries.
            let escapes_run = unsafe { written(&escapes, n_escapes) };
            if S::UNVOUCHES_IN_LOOP {
                let bits: u32 = escapes_run.iter().map(|&(_, b)| b.count_ones()).sum();
                push_sparse(&mut index.escapes, escapes_run, bits as usize);
            } else {
                // SAFETY: the caller vouches for the CPU; the run's blocks
                // start inside the input.
                unsafe {
                    simd.push_unvouched(RunEscapes {
                        input,
                        out: &mut index.escapes,
                        masks: escapes_run,
                    })
                };
            }
        }
    }
    if scanner.utf8.finish() {
        if let Err(e) = core::str::from_utf8(input) {
            return Err(Error::new(ErrorCode::InvalidUtf8, e.valid_up_to()));
        }
        debug_assert!(false, "SIMD UTF-8 check disagrees with core::str");
    }
    if scanner.carry.starts_in_string() != 0 {
        // Nothing inside a string is indexed, so the last entry is the
        // opening quote of the unterminated string.
        let at = index.positions.last().map_or(0, |&p| p as usize);
        return Err(Error::new(ErrorCode::UnterminatedString, at));
    }
    Ok(())
}

/// Where a run's structural masks go, block by block.
trait Sink<S: Simd> {
    /// Takes the structurals `bits` of the block at offset `base`.
    ///
    /// # Safety
    /// At most one call per block of the run the sink was made for, and
    /// the CPU supports the instructions `simd` uses.
    unsafe fn take(&mut self, simd: S, base: u32, bits: u64);
}

/// A [`Sink`] that writes each block's offsets as the next block is
/// taken (see [`scan`]), into room made before the run.
struct WriteNow {
    start: *mut u32,
    cursor: *mut u32,
    /// The base and structurals of the block taken last, not written
    /// yet (none before the first: no bits).
    pending: (u32, u64),
}

impl WriteNow {
    /// Writes into the spare capacity of `positions`, which must hold 64
    /// offsets per block of the run plus the writer's slack.
    #[inline(always)]
    fn new(positions: &mut Vec<u32>) -> WriteNow {
        let start = positions.spare_capacity_mut().as_mut_ptr().cast::<u32>();
        WriteNow {
            start,
            cursor: start,
            pending: (0, 0),
        }
    }

    /// Writes the last block's offsets and makes the offsets written
    /// part of `positions`, the vector it was made from, untouched since.
    ///
    /// # Safety
    /// The CPU must support the instructions `simd` uses.
    #[inline(always)]
    unsafe fn finish<S: Simd>(mut self, simd: S, positions: &mut Vec<u32>) {
        let (base, bits) = self.pending;
        // SAFETY: the room made for the run holds 64 offsets for each of
        // its blocks, the last one's among them, plus the slack; the
        // caller vouches for the CPU.
        self.cursor = unsafe { simd.write_offsets(self.cursor, base, bits) };
        // SAFETY: the writes initialised the slots from `start` (the
        // vector's end) to `cursor`, within its capacity.
        unsafe { positions.set_len(positions.len() + self.cursor.offset_from(self.start) as usize) }
    }
}

impl<S: Simd> Sink<S> for WriteNow {
    #[inline(always)]
    unsafe fn take(&mut self, simd: S, base: u32, bits: u64) {
        let (last_base, last_bits) = self.pending;
        // SAFETY: the room made for the run holds 64 offsets per block
        // past the cursor, plus the slack (the caller's contract): the
        // block before this one is one of the run's, or no bits at all.
        self.cursor = unsafe { simd.write_offsets(self.cursor, last_base, last_bits) };
        self.pending = (base, bits);
    }
}

/// A block's structurals as a [`Keep`] sink keeps them: the block's
/// offset, its mask and, where the kernel keeps counts
/// ([`Simd::KEEPS_COUNTS`]), the mask's count of set bits (else 0).
#[derive(Clone, Copy)]
struct Kept {
    base: u32,
    count: u32,
    bits: u64,
}

/// A [`Sink`] that keeps each block's mask for [`push_kept`].
struct Keep {
    start: *mut Kept,
    end: *mut Kept,
}

impl Keep {
    /// Keeps the masks in `slots`, one per block.
    #[inline(always)]
    fn new(slots: &mut [MaybeUninit<Kept>; RUN]) -> Keep {
        // A pointer rather than a count: one register fewer in the loop.
        let start = slots.as_mut_ptr().cast::<Kept>();
        Keep { start, end: start }
    }

    /// How many masks were kept.
    #[inline(always)]
    fn len(&self) -> usize {
        // SAFETY: both point into the slots.
        unsafe { self.end.offset_from(self.start) as usize }
    }
}

impl<S: Simd> Sink<S> for Keep {
    #[inline(always)]
    unsafe fn take(&mut self, _: S, base: u32, bits: u64) {
        // SAFETY: at most one call per block of a run, which has at most
        // RUN blocks: the slot is one of the RUN.
        unsafe {
            let count = if S::KEEPS_COUNTS {
                bits.count_ones()
            } else {
                0
            };
            self.end.write(Kept { base, count, bits });
            self.end = self.end.add(1);
        }
    }
}

/// A stage 1 scan in progress: where it is and what each block hands to
/// the next.
struct Scanner<'a, S: Simd> {
    simd: S,
    input: &'a [u8],
    /// The end of the input's whole blocks.
    whole: usize,
    /// The offset of the next block.
    pos: usize,
    carry: Carry,
    utf8: S::Utf8,
}

impl<S: Simd> Scanner<'_, S> {
    /// Scans the blocks up to `run_end` (at most [`RUN`] of them), and the
    /// input's last, partial block if the run ends at it and is not full.
    /// Each block's structurals go to `sink`, its escapes (when it has
    /// any) to `escapes`; returns how many of those it wrote.
    ///
    /// # Safety
    /// The CPU must support the instructions `simd` uses, and `sink` must
    /// take as many blocks as the run has.
    #[inline(always)]
    unsafe fn run<K: Sink<S>>(
        &mut self,
        run_end: usize,
        sink: &mut K,
        escapes: &mut [MaybeUninit<(u32, u64)>; RUN],
    ) -> core::result::Result<usize, ControlAt> {
        let (simd, input) = (self.simd, self.input);
        // A full run's blocks fill `escapes` (and a `Keep` sink): it
        // leaves the tail to a run of its own.
        let full = run_end - self.pos == 64 * RUN;
        // A count on the stack array, not a second `Keep`: sharing that
        // type (two pointers, or a count on a borrowed array) cost stage 1
        // 3-5% with every kernel.
        let mut n_escapes = 0;
        while self.pos < run_end {
            let pos = self.pos;
            if S::PAIRS_BLOCKS && !self.carry.long_string() && pos + 128 <= run_end {
                // Outside long strings, two blocks a turn where the
                // kernel gains ([`Simd::PAIRS_BLOCKS`]). (A second block
                // that a long string fills is classified, not skipped:
                // the same result.)
                // SAFETY: pos + 128 <= run_end <= len: 128 readable bytes.
                let (first, second) = unsafe {
                    let at = input.as_ptr().add(pos);
                    (simd.load(at), simd.load(at.add(64)))
                };
                // SAFETY: two blocks of the run; the caller vouches for
                // the CPU.
                unsafe { self.block(&first, sink, escapes, &mut n_escapes)? };
                self.pos += 64;
                // SAFETY: as above.
                unsafe { self.block(&second, sink, escapes, &mut n_escapes)? };
                self.pos += 64;
                continue;
            }
            // SAFETY: pos + 64 <= whole <= len, so 64 bytes are readable.
            let block = unsafe { simd.load(input.as_ptr().add(pos)) };
            if self.carry.long_string() && simd.is_string_content(&block) {
                // Inside a string, so byte 0 escaped by a backslash run
                // ending the previous block is an escape to record.
                // SAFETY: at most one entry per block of the run.
                unsafe { record_escapes(escapes, &mut n_escapes, pos, self.carry.escaped) };
                self.carry.escaped = 0;
                self.pos += 64;
                if simd.has_non_ascii(&block) {
                    // Text in other scripts: only its UTF-8 to check.
                    self.utf8.check(&block);
                    continue;
                }
                // Plain ASCII (base64): four blocks per test from here on,
                // past the run's end: skipped blocks leave nothing in the
                // sinks, and stopping at each run's 4 KB cost the test of
                // its first and last blocks one by one.
                // SAFETY: whole <= len; the caller vouches for the CPU.
                self.pos = unsafe { skip_plain_ascii(simd, input, self.pos, self.whole) };
                self.utf8.skip_ascii();
                continue;
            }
            // A block this does not take (the string ends in it), `block`
            // classifies again: the masks made once for both, passed to
            // each, cost stage 1 more instructions (`benches/insns.rs`
            // `avx2`: chat-code-100KB 183 320 -> 194 209, twitter.json
            // 1 501 499 -> 1 514 783 a scan, at 0cc3ed6).
            if self.carry.long_string()
                // SAFETY: at most one entry per block of the run.
                && unsafe { self.escaped_content(&block, &simd.masks(&block), escapes, &mut n_escapes) }
            {
                self.pos += 64;
                continue;
            }
            // SAFETY: one block of the run; the caller vouches for the CPU.
            unsafe { self.block(&block, sink, escapes, &mut n_escapes)? };
            self.pos += 64;
        }
        let len = input.len();
        if self.pos == self.whole && self.pos < len && !full {
            let block = load_tail(simd, &input[self.pos..]);
            // SAFETY: the run has fewer than RUN blocks, so the sink and
            // `escapes` take one more; the caller vouches for the CPU.
            unsafe { self.block(&block, sink, escapes, &mut n_escapes)? };
            self.pos = len;
        }
        Ok(n_escapes)
    }

    /// Checks and classifies the block at `self.pos` and hands on what it
    /// found.
    ///
    /// # Safety
    /// As for [`Scanner::run`]: the sink and `escapes` take one more block.
    #[inline(always)]
    unsafe fn block<K: Sink<S>>(
        &mut self,
        block: &S::Block,
        sink: &mut K,
        escapes: &mut [MaybeUninit<(u32, u64)>; RUN],
        n_escapes: &mut usize,
    ) -> core::result::Result<(), ControlAt> {
        let pos = self.pos;
        self.utf8.check(block);
        let f = step(self.simd, block, &mut self.carry);
        if f.control != 0 {
            return Err(ControlAt(pos + f.control.trailing_zeros() as usize));
        }
        // SAFETY: the caller's contract.
        unsafe { sink.take(self.simd, pos as u32, f.structurals) };
        if f.escapes != 0 {
            let listed = listed_escapes(f.escapes, self.simd.short_escapes(block), f.quotes);
            let listed = self.unlist_vouched(block, listed);
            // SAFETY: the caller's contract.
            unsafe { record_escapes(escapes, n_escapes, pos, listed) };
        }
        Ok(())
    }

    /// [`unlist_vouched`] of `listed`, the escapes `block` lists, where
    /// the kernel does that in the loop ([`Simd::UNVOUCHES_IN_LOOP`]); else
    /// `listed` as it is, for [`push_unvouched`] after the run.
    #[inline(always)]
    fn unlist_vouched(&self, block: &S::Block, listed: u64) -> u64 {
        if S::UNVOUCHES_IN_LOOP && listed & (listed - 1) != 0 {
            unlist_vouched(listed, &self.simd.unicode_bytes(block))
        } else {
            listed
        }
    }

    /// Takes the block at `self.pos`, whose masks are `m`, as string
    /// content with escapes, when it is that: the previous block was
    /// inside a string from its first byte to its last ([`Carry::long_string`]),
    /// and this one holds no control byte and no quote that a backslash
    /// does not escape, so it indexes nothing and the string goes on past
    /// it. Then only its escapes are recorded and its UTF-8 checked; the
    /// prefix XOR, the structurals and the writer are left out. Returns
    /// whether it took the block (else nothing changed).
    ///
    /// Source code in a chat message has a `\n` or `\"` on every line, so
    /// few of its blocks are plain content that [`Simd::is_string_content`]
    /// skips: stage 1 of chat-code-100KB (an escape every 21 bytes) ran at
    /// 6.1 GB/s with `avx2` and 9.5 with `avx512`, below twitter.json's 7.8
    /// and 15, and runs at 11.1 and 12.8-13.1 this way (docs/benchmarks.md,
    /// "Strings with escapes in every block").
    ///
    /// # Safety
    /// `escapes` takes one more block.
    #[inline(always)]
    unsafe fn escaped_content(
        &mut self,
        block: &S::Block,
        m: &Masks,
        escapes: &mut [MaybeUninit<(u32, u64)>; RUN],
        n_escapes: &mut usize,
    ) -> bool {
        let mut carried = self.carry.escaped;
        let escaped = escaped_bits(m.backslash, &mut carried);
        if m.quote & !escaped != 0 || m.control != 0 {
            return false;
        }
        // The in-string carry stays all ones. The scalar carry is left
        // as it was: it concerns a byte outside strings, and the next
        // block's first byte is inside this string or its closing quote.
        self.carry.escaped = carried;
        self.utf8.check(block);
        if escaped != 0 {
            // No quote in the block but escaped ones.
            let listed = listed_escapes(escaped, self.simd.short_escapes(block), 0);
            let listed = self.unlist_vouched(block, listed);
            // SAFETY: the caller's contract.
            unsafe { record_escapes(escapes, n_escapes, self.pos, listed) };
        }
        true
    }
}

/// Of a block's escapes `escapes` (escaped bytes inside strings), those
/// that go to the escape list for validation: every one whose byte is not
/// in `short` ([`Simd::short_escapes`]: a `\u`, a `\b` or `\r`, or an
/// invalid escape, which validation reports where it always has), and
/// the first of each string in the block, short or not, which is what
/// marks a string as escaped. `quotes` are the block's real quotes. (Of
/// the `\u`, those that stage 1 vouches for are dropped next:
/// [`unlist_vouched`].)
///
/// The first escape after the block's start and after each quote: adding
/// 1 and the quotes to the bytes that are no escape carries from bit 0
/// and from each quote through those bytes into the first escape after
/// it, which is left set. A string's first escape in the block comes
/// after its opening quote or, in a string open from an earlier block,
/// after the block's start, with no quote between.
///
/// A 100 KB request of source code (chat-code-100KB, 4 767 escapes, all
/// short, in one string) lists one escape a block of it that has any,
/// where it listed every one (docs/benchmarks.md, "Short escapes vouched
/// for in stage 1").
#[inline(always)]
fn listed_escapes(escapes: u64, short: u64, quotes: u64) -> u64 {
    let firsts = (!escapes).wrapping_add(quotes).wrapping_add(1) & escapes;
    escapes & (!short | firsts)
}

/// Of `listed`, the escapes a block lists ([`listed_escapes`]), those
/// left once the `\uXXXX` that stage 1 vouches for
/// ([`plain_unicode_escapes`]) are dropped where they are not the first
/// listed of their string in the block. `b` are the block's bytes. Text
/// escaped throughout (Python's `json.dumps` sends every character from
/// U+0080 so) then lists about two escapes a block where it listed every
/// one, which validation checked one at a time (docs/benchmarks.md,
/// "`\uXXXX` vouched for in stage 1", has the figures).
///
/// A listed escape is the first of its string in the block when no
/// listed escape comes before it in the block, or a `"` (escaped or not)
/// lies between the listed escape before it and it: the carry of
/// [`listed_escapes`] from the block's start and from the quotes that are
/// not listed escapes, through the bytes that are not. Where it sees a
/// quote that a backslash escapes, it keeps an escape listed that need
/// not be, which costs a check and changes nothing. (The quotes of the
/// block's bytes, not the real quotes the loop knows: so that the result
/// is the same where it is done after the run.)
#[inline(always)]
fn unlist_vouched(listed: u64, b: &UnicodeBytes) -> u64 {
    let firsts = (!listed).wrapping_add(b.quote & !listed).wrapping_add(1) & listed;
    listed & !(plain_unicode_escapes(listed, b) & !firsts)
}

/// The escapes a run recorded, for [`push_unvouched`].
pub(crate) struct RunEscapes<'a> {
    /// The text scanned.
    pub input: &'a [u8],
    /// Where the escapes' offsets go.
    pub out: &'a mut Vec<u32>,
    /// `(block start, listed)` of each block of the run with escapes
    /// ([`listed_escapes`]): blocks that start inside `input`.
    pub masks: &'a [(u32, u64)],
}

/// Appends the escapes a run recorded to `run.out` as [`push_sparse`]
/// does, after [`unlist_vouched`] of each block that lists two escapes or
/// more, reloaded. What the SIMD kernels do with every run's escapes
/// (see [`Simd::UNVOUCHES_IN_LOOP`]), out of line and cold
/// ([`Simd::push_unvouched`]), so that the scan's body keeps one call and
/// nothing else for them: in the scan's body the AVX-512 loop lost
/// registers too (stage 1 of citm_catalog.json, which has two escapes,
/// at 16.0 GB/s against 18.2 this way, `cargo bench --bench core`).
///
/// Every such block is classified: a test of its bytes one by one first
/// (is a `u` of no surrogate listed after the first escape?) made the
/// parse slower than the classifying it saved, where it saved any (a
/// message of emoji in English, surrogate pairs only, which none of this
/// shortens: 0.71 times as fast as before vouching with the test, 0.79
/// without; Russian 1.8 and 2.0 times). A block that still lists more
/// than four escapes (those emoji) is written by the kernel's branch-free
/// writer where that is a few instructions ([`Simd::WRITES_AS_IT_SCANS`]):
/// with `avx512` the emoji message then parses 1.13 times as fast, the
/// others at 0.98. (Every run written branch-free where its blocks list
/// more than four on average, as runs were before stage 1 vouched for
/// any `\u`, parsed the emoji message 0.53 times as fast as before:
/// `tools/ab_parse.sh`.)
///
/// # Safety
/// The CPU must support the instructions `simd` uses.
#[inline(always)]
pub(crate) unsafe fn push_unvouched<S: Simd>(simd: S, run: RunEscapes<'_>) {
    let RunEscapes { input, out, masks } = run;
    let total: usize = masks.iter().map(|&(_, b)| b.count_ones() as usize).sum();
    out.reserve(total + S::WRITE_SLACK);
    let start = out.len();
    let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u32>();
    let mut cursor = dst;
    for &(base, listed) in masks {
        // One listed escape is the first of its string.
        let bits = if listed & (listed - 1) == 0 {
            listed
        } else {
            let at = base as usize;
            let block = if at + 64 <= input.len() {
                // SAFETY: 64 readable bytes at `at`.
                unsafe { simd.load(input.as_ptr().add(at)) }
            } else {
                load_tail(simd, input.get(at..).unwrap_or_default())
            };
            unlist_vouched(listed, &simd.unicode_bytes(&block))
        };
        // SAFETY: fewer than `total` offsets are written before these
        // (`bits` is part of `listed`), and the spare capacity holds
        // `total` and the writer's slack.
        cursor = unsafe {
            if S::WRITES_AS_IT_SCANS && bits.count_ones() > 4 {
                simd.write_offsets(cursor, base, bits)
            } else {
                write_offsets_exactly(cursor, base, bits)
            }
        };
    }
    // SAFETY: the loop initialised the slots from `dst` to `cursor`, at
    // most the masks' `total` bits, within the capacity.
    unsafe { out.set_len(start + cursor.offset_from(dst) as usize) }
}

/// Of a block's escapes `escapes` (escaped bytes inside strings), the
/// `\uXXXX` of a character that is no surrogate (what validation checks
/// with `string::plain_unicode`): a `u` followed in the block by four hex
/// digits, the first two not `d` and one from 8 (`\uD800` to `\uDFFF`,
/// which validation pairs). A `\u` whose digits run past the block (its
/// `u` from byte 60) is not among them.
#[inline(always)]
fn plain_unicode_escapes(escapes: u64, b: &UnicodeBytes) -> u64 {
    let digits = b.hex >> 1 & b.hex >> 2 & b.hex >> 3 & b.hex >> 4;
    let surrogate = b.d >> 1 & b.hex_from_8 >> 2;
    escapes & b.u & digits & !surrogate
}

/// Records `bits`, the escapes of the block at `pos`, in `escapes` when
/// there are any.
///
/// # Safety
/// `escapes` has a slot for each block of the run, and this block's is
/// not taken yet: `*n_escapes` is below the run's blocks.
#[inline(always)]
unsafe fn record_escapes(
    escapes: &mut [MaybeUninit<(u32, u64)>; RUN],
    n_escapes: &mut usize,
    pos: usize,
    bits: u64,
) {
    if bits != 0 {
        // SAFETY: the caller's contract.
        unsafe {
            escapes
                .get_unchecked_mut(*n_escapes)
                .write((pos as u32, bits))
        };
        *n_escapes += 1;
    }
}

/// Whether `input` is valid UTF-8, by the kernel's checker alone, block
/// by block (a block of ASCII costs one test): for a caller that needs
/// only that verdict (the eager decoder, see `crate::eager`).
///
/// # Safety
/// The CPU must support the instructions `simd` uses (its kernel's
/// capability token exists).
#[inline(always)]
unsafe fn is_utf8<S: Simd>(simd: S, input: &[u8]) -> bool {
    let mut utf8 = simd.utf8();
    let mut blocks = input.chunks_exact(64);
    for block in &mut blocks {
        // SAFETY: a chunk of `chunks_exact(64)` is 64 readable bytes.
        utf8.check(&unsafe { simd.load(block.as_ptr()) });
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        utf8.check(&load_tail(simd, rest));
    }
    !utf8.finish()
}

/// The last `rest.len()` (< 64) bytes of an input as a block, without
/// reading past the input: through a copy padded with spaces, which are
/// whitespace (no structure) and ASCII (valid UTF-8).
#[inline(always)]
fn load_tail<S: Simd>(simd: S, rest: &[u8]) -> S::Block {
    let mut tail = [b' '; 64];
    tail[..rest.len()].copy_from_slice(rest);
    // SAFETY: `tail` is 64 readable bytes.
    unsafe { simd.load(tail.as_ptr()) }
}

/// The first `n` entries of `slots`.
///
/// # Safety
/// They must have been written.
#[inline(always)]
unsafe fn written<T>(slots: &[MaybeUninit<T>], n: usize) -> &[T] {
    // SAFETY: n <= slots.len() (slicing checks it) and the caller wrote
    // those; MaybeUninit<T> has T's layout.
    unsafe { core::slice::from_raw_parts(slots[..n].as_ptr().cast::<T>(), n) }
}

/// Where a run stopped at a raw control byte inside a string. The run
/// hands back only the offset and [`scan`] builds the error: a call to
/// [`control_error`] inside the loop, whose result the compiler could not
/// prove to be an error, made the loop keep going after it, so every
/// vector constant lived across a call and the AVX-512 loop reloaded
/// eight of them at every turn.
struct ControlAt(usize);

/// The error for a control byte at `at`, unless invalid UTF-8 comes
/// first: every kernel reports the earliest of the two, whatever order it
/// finds them in.
#[cold]
fn control_error(input: &[u8], at: usize) -> Error {
    match core::str::from_utf8(&input[..at]) {
        Err(e) => Error::new(ErrorCode::InvalidUtf8, e.valid_up_to()),
        Ok(_) => Error::new(ErrorCode::ControlCharacter, at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte-at-a-time reference for `escaped_bits` over a whole buffer.
    fn naive_escaped(bytes: &[u8]) -> Vec<bool> {
        let mut out = vec![false; bytes.len()];
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\\' && i + 1 < bytes.len() {
                out[i + 1] = true;
                i += 2;
            } else {
                i += 1;
            }
        }
        out
    }

    #[test]
    fn escaped_bits_matches_naive_on_backslash_runs_across_blocks() {
        // Every pattern of backslashes over 3 blocks would be 2^192; walk
        // runs of every length starting at every offset around bit 63.
        for start in 0..130 {
            for run in 0..70 {
                let mut bytes = vec![b'a'; 192];
                for b in &mut bytes[start..(start + run).min(192)] {
                    *b = b'\\';
                }
                let want = naive_escaped(&bytes);
                let mut carry = 0;
                for (k, chunk) in bytes.chunks(64).enumerate() {
                    let mut bs = 0u64;
                    for (i, &b) in chunk.iter().enumerate() {
                        bs |= ((b == b'\\') as u64) << i;
                    }
                    let got = escaped_bits(bs, &mut carry);
                    for i in 0..64 {
                        assert_eq!(
                            got >> i & 1 == 1,
                            want[k * 64 + i],
                            "start {start} run {run} byte {}",
                            k * 64 + i
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn listed_escapes_are_the_unvouched_and_each_strings_first() {
        // Random escapes, short ones and quotes (apart, as in a block),
        // against the rule walked bit by bit.
        let mut rng = crate::testing::Rng::new(11);
        for _ in 0..if cfg!(miri) { 200 } else { 20_000 } {
            let (mut escapes, mut short, mut quotes) = (0u64, 0u64, 0u64);
            for bit in 0..64 {
                match rng.below(8) {
                    0 => escapes |= 1 << bit,
                    1 => {
                        escapes |= 1 << bit;
                        short |= 1 << bit;
                    }
                    2 => quotes |= 1 << bit,
                    _ => {}
                }
            }
            // `short` may hold bytes that are no escape.
            short |= rng.next_u64() & !escapes & !quotes;
            let mut want = 0;
            let mut first = true;
            for bit in 0..64 {
                if quotes >> bit & 1 == 1 {
                    first = true;
                } else if escapes >> bit & 1 == 1 {
                    if first || short >> bit & 1 == 0 {
                        want |= 1 << bit;
                    }
                    first = false;
                }
            }
            assert_eq!(listed_escapes(escapes, short, quotes), want);
        }
    }

    #[test]
    fn escaped_bits_on_random_masks() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            let mut blocks = [0u64; 3];
            for b in &mut blocks {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Dense backslashes make long runs likely.
                *b = x | (x >> 3);
            }
            let bytes: Vec<u8> = (0..192)
                .map(|i| {
                    if blocks[i / 64] >> (i % 64) & 1 == 1 {
                        b'\\'
                    } else {
                        b'x'
                    }
                })
                .collect();
            let want = naive_escaped(&bytes);
            let mut carry = 0;
            for (k, &bs) in blocks.iter().enumerate() {
                let got = escaped_bits(bs, &mut carry);
                for i in 0..64 {
                    assert_eq!(got >> i & 1 == 1, want[k * 64 + i]);
                }
            }
        }
    }
}
