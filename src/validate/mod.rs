//! Stage 2: check the whole document against RFC 8259 by walking the
//! structural index once, and link containers for navigation.
//!
//! Input: the text and the stage-1 index (positions and escapes). Output:
//! `Index::links` (see [`crate::index`]), or the first error in document
//! order. The walk is one loop over the entries with a frame stack on the
//! heap, so nesting depth costs no native stack; the stack is capped by
//! [`Options::max_depth`].
//!
//! Per value it checks: the grammar between structurals; number and
//! literal spellings and what follows them (`literal`, [`crate::values::number`]); the
//! escapes inside each string that stage 1 listed (all but the short
//! escapes it vouched for, and the first of each string in each block),
//! consumed from the sorted escape list in step with the walk
//! (`escapes`); and, under
//! [`DuplicateKeys::Error`], repeated keys per object ([`duplicates`]).
//! UTF-8, control characters and string termination were checked by stage 1.
//!
//! Stage 2 costs about as much as stage 1, so the loop is kept small: one
//! loop per kind of container, so what may follow a value is known from
//! where the code is; of the innermost container only its count and
//! closing byte live in locals, the rest in its frame, on a stack kept by
//! two pointers (docs/benchmarks.md, "The frame stack by pointers"); the byte
//! at an entry is read without a bounds check (stage 1's positions lie
//! inside the text; see [`validate_unchecked`]), and so is the entry
//! itself in a text that ends with a bracket (see `walk`); a string is
//! one compare against the offset of the next escape; and the walk is
//! compiled once per duplicate-key policy. `docs/architecture.md` has the measured alternatives.
//!
//! The walk is written once and compiled twice on x86: for the target's
//! baseline and for x86-64-v3 ([`Isa`]), which the parses of the SIMD
//! kernels run where the CPU has it.

pub mod duplicates;
pub(crate) mod escapes;
pub(crate) mod literal;

use crate::error::{Error, ErrorCode, Result};
use crate::index::Index;
use crate::navigate::Tree;
use crate::scan::{self, Kernel};
use crate::values::number;

/// What to do when an object repeats a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(i32)]
pub enum DuplicateKeys {
    /// Accept; the last occurrence is the value (lua-cjson and most
    /// servers read it this way). Lookups, lengths and iteration agree.
    #[default]
    LastWins = 0,
    /// Reject the document.
    Error = 1,
}

/// Validation options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Deepest container nesting accepted (the root container is depth 1).
    pub max_depth: u32,
    /// The duplicate-key policy.
    pub duplicate_keys: DuplicateKeys,
}

/// The default nesting limit: lua-cjson's (and qjson's encoder's), so that
/// what decodes re-encodes under the default options.
pub const DEFAULT_MAX_DEPTH: u32 = 1000;

impl Default for Options {
    fn default() -> Options {
        Options {
            max_depth: DEFAULT_MAX_DEPTH,
            duplicate_keys: DuplicateKeys::LastWins,
        }
    }
}

/// The instruction set the walk is compiled for.
///
/// Stage 2 is scalar code, but the extensions of x86-64-v3 shorten it:
/// BMI1 and BMI2 (`andn`, `bzhi`, shifts that leave the flags alone),
/// `tzcnt` without a test for zero, and AVX2 for the 32-byte window in
/// which a number's spelling is checked. Compiled with them, stage 2 ran
/// 4-6%, 10-13% and 16-17% faster on twitter.json, citm_catalog.json and
/// canada.json (`cargo bench --bench core`: its stage 2 column shows the
/// baseline build beside `scalar`, this one beside `avx2` and `avx512`);
/// compiled with AVX-512 enabled as well, slower than this on the last
/// two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// The target's baseline, what the library is compiled for.
    Baseline,
    /// x86-64-v3: AVX2, BMI1, BMI2, LZCNT and POPCNT. Run only where
    /// [`Isa::beside`] gives it, on a CPU that has them.
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    X86V3,
}

impl Isa {
    /// The build that runs beside stage 1's `kernel`
    /// ([`Kernel::runs_x86_v3`]).
    #[inline]
    pub fn beside(kernel: Kernel) -> Isa {
        match kernel.runs_x86_v3() {
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            true => Isa::X86V3,
            _ => Isa::Baseline,
        }
    }

    /// The build beside the active kernel, or the baseline when no kernel
    /// is usable (a bad `QJSON_KERNEL`, which stage 1 reports).
    #[inline]
    pub fn active() -> Isa {
        scan::active_kernel().map_or(Isa::Baseline, Isa::beside)
    }
}

/// An open container during the walk: what its close needs of it, and
/// the state of the container around it, which the walk keeps in locals
/// meanwhile.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// Entry of its opening bracket.
    open: u32,
    /// Where its keys start in `Scratch::keys`, for an object under
    /// [`DuplicateKeys::Error`].
    keys_from: u32,
    /// Members or elements of the container around it seen so far.
    count: u32,
    /// The byte that closes the container around it: `}`, `]`, or 0 for
    /// the root (no container: the text is one value).
    close: u32,
}

/// Reusable working memory of the walk.
#[derive(Default, Debug)]
pub struct Scratch {
    /// Room for the walk's frame stack, which it keeps by pointers into
    /// the buffer: the length stays 0 (see `frame_room`).
    frames: Vec<Frame>,
    keys: Vec<u32>,
    duplicates: duplicates::Scratch,
}

impl Scratch {
    /// An empty scratch, holding no memory.
    pub const fn new() -> Scratch {
        Scratch {
            frames: Vec::new(),
            keys: Vec::new(),
            duplicates: duplicates::Scratch::new(),
        }
    }

    /// The work duplicate-key checks have done with this scratch (see
    /// [`duplicates::Scratch::work`]).
    pub fn duplicate_work(&self) -> u64 {
        self.duplicates.work()
    }

    /// Bytes of heap held for the next document.
    pub fn retained_bytes(&self) -> usize {
        self.frames.capacity() * size_of::<Frame>()
            + self.keys.capacity() * size_of::<u32>()
            + self.duplicates.retained_bytes()
    }
}

/// Bytes that may follow a number or literal: whitespace, structural
/// characters and quotes (the grammar decides whether they fit).
static ENDS_SCALAR: [bool; 256] = {
    let mut t = [false; 256];
    let ends = b" \t\n\r,:[]{}\"";
    let mut i = 0;
    while i < ends.len() {
        t[ends[i] as usize] = true;
        i += 1;
    }
    t
};

#[inline]
pub(crate) fn ends_scalar(src: &[u8], at: usize) -> bool {
    src.get(at).is_none_or(|&b| ENDS_SCALAR[b as usize])
}

/// Validates `src` using its stage-1 `index`, filling `index.links`.
///
/// Any index whose offsets lie inside the text is safe here; one that is
/// not stage 1's for `src` gives some verdict or panics. The walk reads
/// every entry with a bounds check, unlike [`validate_unchecked`], whose
/// answers are the same.
///
/// # Panics
///
/// If `index.positions` holds an offset past the end of `src`: the index
/// must be stage 1's output for this text.
pub fn validate(
    src: &[u8],
    index: &mut Index,
    opts: &Options,
    scratch: &mut Scratch,
) -> Result<()> {
    // One branch-free (vectorised) pass, for callers other than
    // `Document::load`, which knows its index is stage 1's.
    let last = index.positions.iter().fold(0, |last, &p| last.max(p));
    assert!(
        index.positions.is_empty() || (last as usize) < src.len(),
        "the index does not belong to this text"
    );
    // SAFETY: just checked; `false` asks for no more; `Isa::active` is a
    // build this CPU runs.
    unsafe { run(src, index, opts, scratch, false, Isa::active()) }
}

/// [`validate`] without its check of the index, and with entries read
/// without bounds checks when the text ends with a closing bracket (see
/// `walk`), by the walk compiled for `isa`.
///
/// # Safety
///
/// `index.positions` and `index.escapes` are stage 1's output for `src`:
/// every offset is below `src.len()`, and each string's two quotes are
/// consecutive entries. `isa` is [`Isa::Baseline`] or was made for this
/// CPU ([`Isa::beside`]).
pub unsafe fn validate_unchecked(
    src: &[u8],
    index: &mut Index,
    opts: &Options,
    scratch: &mut Scratch,
    isa: Isa,
) -> Result<()> {
    // SAFETY: the caller's promise is `run`'s with `stage1`.
    unsafe { run(src, index, opts, scratch, true, isa) }
}

/// [`validate_unchecked`]'s work; `stage1` says whether its whole promise
/// holds, rather than only the offsets being inside the text.
///
/// # Safety
///
/// Every offset in `index.positions` is below `src.len()`; with `stage1`,
/// the index is also stage 1's output for `src`. `isa` is one this CPU
/// runs.
unsafe fn run(
    src: &[u8],
    index: &mut Index,
    opts: &Options,
    scratch: &mut Scratch,
    stage1: bool,
    isa: Isa,
) -> Result<()> {
    let Index {
        positions,
        escapes,
        links,
    } = index;
    if positions.is_empty() {
        return Err(Error::new(ErrorCode::Empty, src.len()));
    }
    // No zeroing: the walk sets every entry's link (see `walk`); only
    // entries past the last document's are zeroed, as the vector grows.
    links.resize(positions.len(), 0);
    scratch.frames.clear();
    scratch.keys.clear();
    let text = Text { src, positions };
    let closed = stage1 && matches!(text.byte(positions.len() - 1), b'}' | b']');
    let walk = Walk {
        text,
        escapes,
        links,
        max_depth: opts.max_depth,
        scratch,
        policy: opts.duplicate_keys,
        closed,
    };
    let walked = match isa {
        Isa::Baseline => {
            // SAFETY: `closed` only when the index is stage 1's and its
            // last entry is a closing bracket (the walk's promise).
            unsafe { walk.run() }
        }
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        Isa::X86V3 => {
            // SAFETY: as above; the caller vouches for the CPU.
            unsafe { walk_x86_v3(walk) }
        }
    };
    match walked {
        Err(error) if opts.duplicate_keys == DuplicateKeys::Error => {
            Err(first_with_repeats(error, text, links, scratch))
        }
        walked => walked,
    }
}

/// Under [`DuplicateKeys::Error`], the first error of the text, given
/// `error`, the walk's. An object's keys are checked when it closes, so a
/// repeat in an object still open when the walk stopped came before what
/// stopped it: an error later in the object (`{"a":1,"a":2,"b":x}` named
/// the `x`), the end of the text, or the repeat of an object inside it.
/// Those objects' keys are what the walk left in `scratch.keys`, outer to
/// inner, each object's in text order (the innermost's all of them when
/// its check found the repeat): two neighbours are keys of one object
/// when the brackets between them balance. Linear: one pass over the
/// entries from the first of those keys to the last, and one check of
/// each object's keys.
#[cold]
#[inline(never)]
fn first_with_repeats(error: Error, text: Text<'_>, links: &[u32], scratch: &mut Scratch) -> Error {
    let Scratch {
        keys, duplicates, ..
    } = scratch;
    let tree = Tree {
        src: text.src,
        positions: text.positions,
        links,
    };
    let same_object = |a: u32, b: u32| tree.brackets(a + 1..b).1 == 0;
    let mut first = error;
    let mut from = 0;
    while from < keys.len() {
        let mut to = from + 1;
        while to < keys.len() && same_object(keys[to - 1], keys[to]) {
            to += 1;
        }
        if let Some(repeat) = duplicates::first_repeat(&tree, &keys[from..to], duplicates) {
            let repeated = error_at(text, ErrorCode::DuplicateKey, repeat as usize);
            if repeated.offset < first.offset {
                first = repeated;
            }
        }
        from = to;
    }
    first
}

/// A walk to run: its arguments, and the policy and closedness that pick
/// one of its four compilations.
struct Walk<'w, 't> {
    text: Text<'t>,
    escapes: &'w [u32],
    links: &'w mut [u32],
    max_depth: u32,
    scratch: &'w mut Scratch,
    policy: DuplicateKeys,
    closed: bool,
}

impl Walk<'_, '_> {
    /// Runs the walk compiled for its policy and closedness, inlined into
    /// the caller, so each [`Isa`] has its own copies.
    ///
    /// # Safety
    ///
    /// `closed` only when the index is stage 1's and its last entry is a
    /// closing bracket: `walk`'s promise for `CLOSED`.
    #[inline(always)]
    unsafe fn run(self) -> Result<()> {
        let Walk {
            text,
            escapes,
            links,
            max_depth,
            scratch,
            policy,
            closed,
        } = self;
        // SAFETY: forwarded from the caller.
        unsafe {
            match (policy, closed) {
                (DuplicateKeys::LastWins, false) => {
                    walk::<false, false>(text, escapes, links, max_depth, scratch)
                }
                (DuplicateKeys::LastWins, true) => {
                    walk::<false, true>(text, escapes, links, max_depth, scratch)
                }
                (DuplicateKeys::Error, false) => {
                    walk::<true, false>(text, escapes, links, max_depth, scratch)
                }
                (DuplicateKeys::Error, true) => {
                    walk::<true, true>(text, escapes, links, max_depth, scratch)
                }
            }
        }
    }
}

/// The walk compiled for x86-64-v3 ([`Isa::X86V3`]).
///
/// # Safety
///
/// As for [`Walk::run`]; the CPU has AVX2, BMI1, BMI2, LZCNT and POPCNT.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
unsafe fn walk_x86_v3(walk: Walk<'_, '_>) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { walk.run() }
}

/// The text and its entries, every entry known to lie inside the text.
#[derive(Clone, Copy)]
struct Text<'a> {
    src: &'a [u8],
    /// Offsets that are all below `src.len()` (the caller of
    /// [`validate_unchecked`] vouched for it).
    positions: &'a [u32],
}

impl Text<'_> {
    /// The byte at `position`, one of `positions`.
    #[inline(always)]
    fn byte_of(self, position: u32) -> u8 {
        // SAFETY: every position is below src.len() (see the field).
        unsafe { *self.src.get_unchecked(position as usize) }
    }

    /// The offset of entry `i`, or the input length past the last entry.
    #[inline(always)]
    fn at(self, i: usize) -> usize {
        self.positions
            .get(i)
            .map_or(self.src.len(), |&p| p as usize)
    }

    /// The byte at entry `i`, which exists.
    ///
    /// # Safety
    ///
    /// `i < positions.len()`.
    #[inline(always)]
    unsafe fn byte_in(self, i: usize) -> u8 {
        // SAFETY: i is an entry (the caller's promise), and every position
        // is below src.len() (see the field).
        unsafe { self.byte_of(*self.positions.get_unchecked(i)) }
    }

    /// The byte at entry `i`, or 0 past the last entry. A 0 in the text
    /// can only be a (misplaced) scalar start, and every place that reads
    /// the byte treats 0 as "none of the bytes expected here".
    #[inline(always)]
    fn byte(self, i: usize) -> u8 {
        match self.positions.get(i) {
            // SAFETY: every position is below src.len() (see the field).
            Some(&p) => unsafe { *self.src.get_unchecked(p as usize) },
            None => 0,
        }
    }
}

/// `code` at entry `i`, kept out of the walk's code.
#[cold]
#[inline(never)]
fn error_at(text: Text<'_>, code: ErrorCode, i: usize) -> Error {
    Error::new(code, text.at(i))
}

/// What to report when the value at entry `i` is missing: right after an
/// array's `[` its close was allowed too.
#[cold]
#[inline(never)]
fn missing_value(text: Text<'_>, i: usize) -> Error {
    let code = if i > 0 && text.byte(i - 1) == b'[' {
        ErrorCode::ExpectedValueOrBracket
    } else {
        ErrorCode::ExpectedValue
    };
    Error::new(code, text.at(i))
}

/// What to report when entry `i`, after a value inside `close`'s
/// container, neither continues nor closes it.
#[cold]
#[inline(never)]
fn missing_separator(text: Text<'_>, close: u8, i: usize) -> Error {
    let code = match close {
        b'}' => ErrorCode::ExpectedCommaOrBrace,
        b']' => ErrorCode::ExpectedCommaOrBracket,
        _ => ErrorCode::TrailingContent,
    };
    Error::new(code, text.at(i))
}

/// The error for a member that starts at entry `k` with fewer than three
/// entries left: a missing key, or an invalid escape in it, or a missing
/// colon.
#[cold]
#[inline(never)]
fn truncated_member(
    text: Text<'_>,
    escapes: &[u32],
    mut next_escape: usize,
    missing: ErrorCode,
    k: usize,
) -> Error {
    if text.byte(k) != b'"' {
        return error_at(text, missing, k);
    }
    if let Some(&end) = text.positions.get(k + 1)
        && let Err(e) = escapes::check(text.src, escapes, &mut next_escape, end)
    {
        return e;
    }
    error_at(text, ErrorCode::ExpectedColon, k + 2)
}

/// Checks the escapes of a string that ends at offset `end` and has
/// some, `escapes[*next..]` being those not yet checked; returns the offset
/// of the next escape left (`u32::MAX` when none is: no string ends there,
/// offsets being below 4 GiB).
#[inline(never)]
fn string_escapes(text: Text<'_>, escapes: &[u32], next: &mut usize, end: u32) -> Result<u32> {
    escapes::check(text.src, escapes, next, end)?;
    Ok(escapes.get(*next).copied().unwrap_or(u32::MAX))
}

/// The walk; `STRICT` is [`DuplicateKeys::Error`], so that the last-wins
/// walk carries no key bookkeeping at all.
///
/// With `CLOSED`, entries are read without a bounds check except right
/// after a closing bracket. Every other read is at the entry after one
/// that is neither the last nor a closing bracket: after a `,`, `[`, `{`
/// or `:`, after a number or literal (its first byte), after a string's
/// closing quote (found as the entry after its opening quote), after a
/// key's opening quote. The last entry being a closing bracket, each of
/// those is followed by an entry. Only a bracket can close the text, and
/// the reads after one are checked.
///
/// The walk sets the link of every entry it passes, 0 where nothing is to
/// be kept, and an accepted text is passed entry by entry: `links` need
/// not be zeroed first (it holds the last document's). The zero fill was
/// a sixth of stage 2's instructions on citm_catalog; with the walk's own
/// writes stage 2 went from 2.18 to 1.99 instructions a byte there
/// (`benches/parse_insns.rs`). With `CLOSED` the writes go unchecked:
/// at entries the walk has just read; at the four entries from a key on
/// (its quotes, its colon, and the entry after the colon, which exists
/// because the colon is no bracket); or at a container's opening entry
/// when its close is read.
///
/// A key's closing quote is linked to the entry after its member (the
/// next key, or the entry past the object's `}`), or to 0 when the value
/// is a container, whose close's link leads there: searches of the
/// object then step from key to key without reading a byte of a value
/// ([`crate::navigate::Tree::next_key`]). The link is part of the store
/// that sets the key's other links, plus one store per string or
/// container value (docs/benchmarks.md, "Member links from validation").
///
/// # Safety
///
/// With `CLOSED`, the index is stage 1's output for the text (a string's
/// quotes are consecutive entries) and its last entry is `}` or `]`.
#[inline(always)]
unsafe fn walk<const STRICT: bool, const CLOSED: bool>(
    text: Text<'_>,
    escapes: &[u32],
    links: &mut [u32],
    max_depth: u32,
    scratch: &mut Scratch,
) -> Result<()> {
    let Scratch {
        frames,
        keys,
        duplicates,
    } = scratch;
    let max_depth = max_depth as usize;
    let n = text.positions.len();
    let mut next_escape = 0usize;
    let mut escape_at = escapes.first().copied().unwrap_or(u32::MAX);
    let mut i = 0usize;
    // The innermost open container: members or elements so far, closing
    // byte (0 for the root, which is no container). Its opening entry is
    // in its frame, and so is the state of the containers around it.
    let mut count = 0u32;
    let mut close = 0u8;
    // The frame stack, by pointers into the buffer of `frames`, whose
    // length stays 0: a push compares its top with one limit, the end of
    // the buffer or the depth limit, whichever comes first.
    let mut top = frames.as_mut_ptr();
    // SAFETY: at most the capacity past the buffer's start.
    let mut limit = unsafe { top.add(frames.capacity().min(max_depth)) };

    // The byte at entry `$i`, which (see the function's docs) is an entry
    // when CLOSED.
    macro_rules! byte {
        ($i:expr) => {
            if CLOSED {
                // SAFETY: with CLOSED, every use is a read the function's
                // docs show to be at an entry.
                unsafe { text.byte_in($i) }
            } else {
                text.byte($i)
            }
        };
    }

    // Sets the link of entry `$i`.
    macro_rules! link {
        ($i:expr, $v:expr) => {
            if CLOSED {
                // SAFETY: with CLOSED, every use is at an entry the walk
                // has read (see the function's docs).
                unsafe { *links.get_unchecked_mut($i) = $v }
            } else {
                links[$i] = $v
            }
        };
    }

    // Sets the links of entries `$i` and `$i + 1` to `$v` and 0: one store.
    macro_rules! link_and_zero {
        ($i:expr, $v:expr) => {
            if CLOSED {
                // SAFETY: with CLOSED, every use is at two entries: a
                // string's quotes, or a key's colon and the value after it
                // (see the function's docs).
                unsafe {
                    links
                        .as_mut_ptr()
                        .add($i)
                        .cast::<[u32; 2]>()
                        .write_unaligned([$v, 0])
                }
            } else {
                links[$i] = $v;
                links[$i + 1] = 0;
            }
        };
    }

    // The byte at entry `$i`, or 0 past the last entry.
    macro_rules! checked_byte {
        ($i:expr) => {
            text.byte($i)
        };
    }

    // Checks the escapes of the string whose opening quote is entry `$i`.
    macro_rules! string {
        ($i:expr) => {{
            let s = $i;
            let end = if CLOSED {
                // SAFETY: with CLOSED, the closing quote is the entry after
                // the opening one.
                unsafe { *text.positions.get_unchecked(s + 1) }
            } else {
                text.positions[s + 1]
            };
            let escaped = escape_at < end;
            if escaped {
                escape_at = string_escapes(text, escapes, &mut next_escape, end)?;
            }
            link_and_zero!(s, u32::from(escaped));
        }};
    }

    // Reads `"key" :` at entry `$i` and moves `i` to the value.
    macro_rules! member_key {
        ($i:expr, $missing:expr) => {{
            let k = $i;
            if !CLOSED && k + 2 >= n {
                return Err(truncated_member(text, escapes, next_escape, $missing, k));
            }
            // SAFETY: k is an entry: k + 2 < n, or CLOSED (see the
            // function's docs).
            if unsafe { text.byte_in(k) } != b'"' {
                return Err(error_at(text, $missing, k));
            }
            // SAFETY: k + 2 < n, or CLOSED: then entry k opens a string,
            // the entry after it closes the string and is not the last,
            // being no bracket, so k + 1 and k + 2 are entries.
            let (end, colon) = unsafe {
                let end = *text.positions.get_unchecked(k + 1);
                (end, text.byte_in(k + 2))
            };
            let escaped = escape_at < end;
            if escaped {
                escape_at = string_escapes(text, escapes, &mut next_escape, end)?;
            }
            if colon != b':' {
                return Err(error_at(text, ErrorCode::ExpectedColon, k + 2));
            }
            // The key's quotes, its colon and the value (set again when
            // the value is read). The closing quote's link is the entry
            // after a member whose value is one entry, a number or
            // literal; `value` sets it again for any other.
            let links_from_key = [u32::from(escaped), (k + 5) as u32, 0, 0];
            if CLOSED {
                // SAFETY: with CLOSED, k + 2 is no bracket (a colon), so
                // an entry follows it: k..=k + 3 are entries.
                unsafe {
                    links
                        .as_mut_ptr()
                        .add(k)
                        .cast::<[u32; 4]>()
                        .write_unaligned(links_from_key)
                }
            } else {
                // (The value may be missing.)
                links[k..k + 3].copy_from_slice(&links_from_key[..3]);
            }
            if STRICT {
                keys.push(k as u32);
            }
            i = k + 3;
        }};
    }

    // Entry `i` starts a value of the innermost container: moves `i` past
    // a string or scalar, or opens a container and goes on with its first
    // value at `$walk`. A `$member`'s key, its closing quote two entries
    // back, is linked to the entry after the `,` or `}` that follows a
    // value of one entry (by `member_key`) or a string (here), and to 0
    // for a container (here), whose close leads there instead.
    macro_rules! value {
        ($walk:lifetime, $member:expr) => {{
            // The value's offset and first byte (0 past the last entry).
            let (p, b) = if CLOSED {
                // SAFETY: with CLOSED, i is an entry (see the function's
                // docs).
                let p = unsafe { *text.positions.get_unchecked(i) };
                (p as usize, text.byte_of(p))
            } else {
                (text.at(i), text.byte(i))
            };
            match b {
                b'"' => {
                    if $member {
                        link!(i - 2, (i + 3) as u32);
                    }
                    string!(i);
                    i += 2;
                }
                b'-' | b'0'..=b'9' => {
                    // With CLOSED, the next entry exists and, when the
                    // number runs up to it, is a structural byte or a quote
                    // (a digit, the number's last byte, is followed by no
                    // scalar start), which may follow a number.
                    let plain = CLOSED && {
                        // SAFETY: with CLOSED, entry i is no bracket, so
                        // i + 1 is an entry.
                        let next = unsafe { *text.positions.get_unchecked(i + 1) };
                        number::is_plain_number(text.src, p, next as usize)
                    };
                    if !plain
                        && !number::number_end(text.src, p)
                            .is_some_and(|end| ends_scalar(text.src, end))
                    {
                        return Err(error_at(text, ErrorCode::InvalidNumber, i));
                    }
                    link!(i, 0);
                    i += 1;
                }
                b't' | b'f' | b'n' => {
                    // As for numbers: with CLOSED, an entry right after a
                    // literal's last letter is a structural byte or a quote.
                    let next = if CLOSED {
                        // SAFETY: with CLOSED, entry i is no bracket, so
                        // i + 1 is an entry.
                        unsafe { *text.positions.get_unchecked(i + 1) as usize }
                    } else {
                        usize::MAX
                    };
                    if !literal::spelled_end(text.src, p)
                        .is_some_and(|end| end == next || ends_scalar(text.src, end))
                    {
                        return Err(error_at(text, ErrorCode::InvalidLiteral, i));
                    }
                    link!(i, 0);
                    i += 1;
                }
                b'{' | b'[' => {
                    if $member {
                        link!(i - 2, 0);
                    }
                    if top == limit {
                        let Some(room) = frame_room(frames, top, max_depth) else {
                            return Err(error_at(text, ErrorCode::DepthExceeded, i));
                        };
                        (top, limit) = room;
                    }
                    // `{` + 2 is `}`, `[` + 2 is `]`.
                    let closer = b + 2;
                    if byte!(i + 1) == closer {
                        // Empty: its count, the link of i + 1, is 0.
                        link!(i, (i + 1) as u32);
                        link!(i + 1, 0);
                        i += 2;
                        if CLOSED && i == n && close != 0 {
                            // The text ends inside a container, where
                            // the read of the next entry would fail.
                            return Err(missing_separator(text, close, i));
                        }
                    } else {
                        // SAFETY: top is below limit, inside the buffer.
                        unsafe {
                            top.write(Frame {
                                open: i as u32,
                                keys_from: if STRICT { keys.len() as u32 } else { 0 },
                                count,
                                close: u32::from(close),
                            });
                            top = top.add(1);
                        }
                        count = 0;
                        close = closer;
                        if closer == b'}' {
                            member_key!(i + 1, ErrorCode::ExpectedKeyOrBrace);
                        } else {
                            i += 1;
                        }
                        continue $walk;
                    }
                }
                _ => return Err(missing_value(text, i)),
            }
        }};
    }

    // After a value of the innermost container (closed by `$close`), entry
    // `i`, read with `$byte`, must continue it: `,` then the next value
    // (or `"key" :` and it), go on at `$next`; or close it, fall through.
    macro_rules! separator {
        ($close:expr, $next:lifetime, $byte:ident) => {{
            let close = $close;
            count += 1;
            let b = $byte!(i);
            if b == b',' {
                link!(i, 0);
                if close == b'}' {
                    member_key!(i + 1, ErrorCode::ExpectedKey);
                    continue $next;
                }
                if close == b']' {
                    i += 1;
                    continue $next;
                }
            }
            if b != close {
                return Err(missing_separator(text, close, i));
            }
        }};
    }

    // The container type is in the code: one loop per kind of container,
    // each with its own separator check, so a value is followed by one
    // byte compare and no test of what it was in. Entry i starts a value
    // of the innermost container.
    'walk: loop {
        match close {
            b'}' => 'object: loop {
                value!('walk, true);
                separator!(b'}', 'object, byte);
                break;
            },
            b']' => 'array: loop {
                value!('walk, false);
                separator!(b']', 'array, byte);
                break;
            },
            _ => {
                value!('walk, false);
                break 'walk;
            }
        }
        // Entry i closes the innermost container; the ones it closes in
        // turn are handled here too.
        loop {
            // SAFETY: the container being closed pushed a frame, which
            // is below the top.
            let frame = unsafe {
                top = top.sub(1);
                top.read()
            };
            if STRICT && close == b'}' {
                check_keys(text, links, keys, frame.keys_from as usize, duplicates)?;
            }
            link!(frame.open as usize, i as u32);
            link!(i, count);
            count = frame.count;
            close = frame.close as u8;
            i += 1;
            // Past a closing bracket the text may end: a checked read.
            separator!(close, 'walk, checked_byte);
            if close == 0 {
                break 'walk;
            }
        }
    }
    // The root value ended: only the end of the text may follow (a stray 0
    // byte reads as 0 too).
    if i < n {
        return Err(error_at(text, ErrorCode::TrailingContent, i));
    }
    // Every escape lies in a string, and every string was checked.
    debug_assert_eq!(escape_at, u32::MAX);
    Ok(())
}

/// Room for one more frame above `top` in `frames`' buffer, or `None`
/// when `max_depth` frames are open: the new top and limit.
#[cold]
#[inline(never)]
fn frame_room(
    frames: &mut Vec<Frame>,
    top: *mut Frame,
    max_depth: usize,
) -> Option<(*mut Frame, *mut Frame)> {
    // SAFETY: top points into the buffer, past the frames open.
    let depth = unsafe { top.offset_from(frames.as_ptr()) } as usize;
    if depth >= max_depth {
        return None;
    }
    // SAFETY: the frames below the top were written; as the vector's
    // elements they move with it when it grows. Its length goes back to
    // 0 after.
    unsafe { frames.set_len(depth) };
    frames.reserve(depth.max(8));
    // SAFETY: as above.
    unsafe { frames.set_len(0) };
    let base = frames.as_mut_ptr();
    // SAFETY: depth is below the capacity (it grew by at least one
    // above), and the limit at most the capacity: both within or one past
    // the end of the buffer.
    unsafe { Some((base.add(depth), base.add(frames.capacity().min(max_depth)))) }
}

/// Rejects the object whose keys are `keys[from..]` if one repeats, then
/// forgets them.
fn check_keys(
    text: Text<'_>,
    links: &[u32],
    keys: &mut Vec<u32>,
    from: usize,
    duplicates: &mut duplicates::Scratch,
) -> Result<()> {
    let tree = Tree {
        src: text.src,
        positions: text.positions,
        links,
    };
    if let Some(repeat) = duplicates::first_repeat(&tree, &keys[from..], duplicates) {
        return Err(error_at(text, ErrorCode::DuplicateKey, repeat as usize));
    }
    keys.truncate(from);
    Ok(())
}

#[cfg(test)]
mod tests;
