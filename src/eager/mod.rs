//! Eager decode: a whole text validated and handed to a [`Sink`] value by
//! value, in document order, in one pass, with memory bounded by a window
//! of the text rather than by the text.
//!
//! `qjson.parse` keeps the whole index because it reads values later, in
//! any order. Eager decode reads every value once, front to back, so it
//! needs the index of one stretch of text at a time:
//!
//! ```text
//! text    [{"a":1},{"a":2},{"b":"x y z"},{"a":3}]
//!         |------ window 1 ------|
//!                          ^ last `,` `:` `[` `]` `{` `}` entry: the cut
//!                          |------ window 2 -----|
//! ```
//!
//! 1. **Stage 1 per window.** [`crate::scan::scan`] runs on the slice from
//!    the window's start, which is always outside any string (the text's
//!    start, or a structural byte), so the slice scans exactly as that part
//!    of the whole text does. The window ends before a UTF-8 continuation
//!    byte, so no character is split. Its entries are kept up to the last
//!    structural byte (`,` `:` `[` `]` `{` `}`): every string and scalar
//!    before it is complete. A window ending inside a string reports an
//!    unterminated string there, which only says to cut before it. The
//!    next window starts at the cut, so the bytes after it are scanned
//!    twice (a few, not a window's worth). A window with no cut (one long
//!    string) is retried twice as long.
//! 2. **Sizes.** One pass over the window's entries counts the members or
//!    elements of every container that opens and closes inside it, so the
//!    sink can make each table at its final size. A container still open
//!    at the cut gets no size (its table grows as it is filled, as
//!    lua-cjson's tables always do): only the few containers around each
//!    cut, whatever the text's size.
//! 3. **The walk** ([`walk`]) checks the grammar entry by entry, exactly as
//!    [`crate::validate`] does (numbers, literals, escapes, depth), and
//!    gives each value to the sink as soon as it is complete. Its state
//!    (the open containers) carries from one window to the next.
//!
//! A window's index is dropped when the next one is scanned, so what a
//! decode holds besides the values it built is one window's entries
//! (at most [`WINDOW`] x 4 bytes each for positions and escapes), a size
//! per container of that window and the open containers: for a 100 MB
//! text, a few MB at most, against 8 bytes per entry for a whole index.
//! A text no longer than a window is one window with no cut: stage 1
//! once, the sizes, the walk.
//!
//! **Errors.** The walk answers only "valid or not": on any rejection the
//! caller drops what the sink built and parses the text again with
//! [`crate::document::Document`], whose error (code and offset) is the one
//! `qjson.parse` reports. Every rejection is thus reported exactly as
//! parse reports it, and what this pass accepts is held to what
//! validation accepts by tests ([`tests`]) that compare the two on
//! generated and mutated texts with windows of every size.
//!
//! **Duplicate keys** under [`DuplicateKeys::Error`] are the sink's to
//! find (a Lua table knows whether it already has a key); the walk only
//! tells it the policy.
//!
//! [`DuplicateKeys::Error`]: crate::validate::DuplicateKeys::Error

mod walk;

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::ErrorCode;
use crate::index::Index;
use crate::scan;
use crate::validate::Options;

pub use walk::Walk;

/// Where a finished value goes: the parent container is on top of the
/// sink's stack (an object's key above it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The value is the whole text's.
    Root,
    /// Element `n` (1-based, as Lua counts) of the array below.
    Element(u32),
    /// The value of the member whose key is below it.
    Member,
}

/// Why a sink stops a decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The text is invalid (a repeated key under the strict policy).
    Invalid,
    /// The sink cannot build this document (its stack cannot grow): the
    /// caller decodes it another way.
    GiveUp,
}

/// What a sink's method returns.
pub type Flow = Result<(), Stop>;

/// The receiver of a decode's values, in document order. A container is
/// opened, filled (an object's members as a key then a value), and closed;
/// each finished value is placed in its [`Slot`].
pub trait Sink {
    /// Starts an object (`object`) or an array that will hold `hint`
    /// members or elements (0 when unknown).
    fn open(&mut self, object: bool, hint: u32) -> Flow;
    /// Ends the innermost container, which got `count` members or
    /// elements (members counted with repeats).
    fn close(&mut self, object: bool, count: u32, slot: Slot) -> Flow;
    /// A member's key, decoded.
    fn key(&mut self, key: &[u8]) -> Flow;
    /// A string, decoded.
    fn string(&mut self, s: &[u8], slot: Slot) -> Flow;
    /// A number's nearest double.
    fn number(&mut self, n: f64, slot: Slot) -> Flow;
    /// `true` or `false`.
    fn boolean(&mut self, b: bool, slot: Slot) -> Flow;
    /// `null`.
    fn null(&mut self, slot: Slot) -> Flow;
}

/// How a decode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The sink got the whole value.
    Done,
    /// The text is invalid: parse it with `Document` for the error.
    Invalid,
    /// The sink gave up (or stage 1 panicked): decode it another way.
    GiveUp,
}

/// Bytes of text per window. Its entries (4 bytes each, at most one per
/// byte, about one per 4 bytes in typical JSON) stay in the L2 cache
/// between stage 1 and the walk.
pub const WINDOW: usize = 64 << 10;

/// The memory a decode works in, kept for the next one.
#[derive(Default, Debug)]
pub struct Scratch {
    /// One window's stage-1 output (`links` unused).
    index: Index,
    /// Member or element counts of the window's containers, in the order
    /// they open; [`UNKNOWN`] for one still open at the cut.
    sizes: Vec<u32>,
    /// Containers open during the count: (slot in `sizes`, entry of the
    /// opening bracket, separators so far).
    counting: Vec<(u32, u32, u32)>,
    /// The walk's state.
    walk: walk::State,
}

impl Scratch {
    /// Bytes of heap held for the next decode.
    pub fn retained_bytes(&self) -> usize {
        self.index.retained_bytes()
            + self.sizes.capacity() * 4
            + self.counting.capacity() * 12
            + self.walk.retained_bytes()
    }
}

/// A container's count that the window does not know.
const UNKNOWN: u32 = u32::MAX;

/// Decodes `src` into `sink` with windows of `window` bytes (at least 64;
/// [`WINDOW`] outside tests).
pub fn decode<S: Sink>(
    src: &[u8],
    opts: &Options,
    window: usize,
    scratch: &mut Scratch,
    sink: &mut S,
) -> Outcome {
    if src.len() >= scan::MAX_INPUT {
        return Outcome::Invalid;
    }
    let window = window.max(64);
    let Scratch {
        index,
        sizes,
        counting,
        walk,
    } = scratch;
    let mut walk = Walk::new(walk, opts);
    let mut start = 0usize;
    let mut span = window;
    loop {
        let rest = &src[start..];
        // Stage 1 and the sizes: Rust only, so a panic here is caught and
        // never unwinds into the sink's caller (Lua).
        let cut = catch_unwind(AssertUnwindSafe(|| {
            let cut = scan_window(rest, span, index)?;
            if let Some((entries, _)) = cut {
                count_sizes(rest, &index.positions[..entries], sizes, counting);
            }
            Ok(cut)
        }));
        let (entries, next) = match cut {
            Err(_) => return Outcome::GiveUp,
            Ok(Err(())) => return Outcome::Invalid,
            Ok(Ok(None)) => {
                span = span.saturating_mul(2);
                continue;
            }
            Ok(Ok(Some(cut))) => cut,
        };
        let positions = index.positions.get(..entries).unwrap_or_default();
        if let Err(stop) = walk.run(rest, positions, &index.escapes, sizes, sink) {
            return match stop {
                Stop::Invalid => Outcome::Invalid,
                Stop::GiveUp => Outcome::GiveUp,
            };
        }
        match next {
            None => {
                return if walk.finish() {
                    Outcome::Done
                } else {
                    Outcome::Invalid
                };
            }
            Some(next) => {
                start += next;
                span = window;
            }
        }
    }
}

/// Runs stage 1 on the window of `rest` that starts it and spans about
/// `span` bytes. Returns the entries to walk and where the next window
/// starts (`None` for the last window); `Ok(None)` when the window holds
/// no cut (to be retried longer); `Err` when the text is invalid.
#[allow(clippy::type_complexity)]
fn scan_window(
    rest: &[u8],
    span: usize,
    index: &mut Index,
) -> Result<Option<(usize, Option<usize>)>, ()> {
    index.clear();
    if rest.len() <= span {
        return match scan::scan(rest, index) {
            Ok(()) => Ok(Some((index.positions.len(), None))),
            Err(_) => Err(()),
        };
    }
    // End before a continuation byte: no character is split, so the
    // slice's UTF-8 is valid exactly where the text's is.
    let mut end = span;
    while end > 0 && rest[end] & 0xc0 == 0x80 {
        end -= 1;
    }
    match scan::scan(&rest[..end], index) {
        Ok(()) => {}
        Err(e) if e.code == ErrorCode::UnterminatedString => {
            // The slice ends inside a string that opens at e.offset: its
            // entries before that quote are the text's. Stage 1 appends
            // them before it looks at the end; should it not, scan again
            // up to the quote.
            let quote = e.offset as u32;
            if index.positions.last() != Some(&quote) {
                index.clear();
                if scan::scan(&rest[..e.offset], index).is_err() {
                    return Err(());
                }
            }
        }
        // Only whitespace: no cut yet.
        Err(e) if e.code == ErrorCode::Empty => return Ok(None),
        Err(_) => return Err(()),
    }
    // The last structural byte: every string and scalar before it is
    // complete (a string cannot hold one).
    let positions = &index.positions;
    let cut = positions
        .iter()
        .rposition(|&p| matches!(rest[p as usize], b',' | b':' | b'[' | b']' | b'{' | b'}'));
    match cut {
        Some(cut) if cut > 0 => Ok(Some((cut, Some(positions[cut] as usize)))),
        _ => Ok(None),
    }
}

/// Fills `sizes` with the member or element count of each container that
/// opens in `positions` (entries of `text`), in the order they open;
/// [`UNKNOWN`] for those that do not close there. Invalid text gives
/// wrong counts, bounded by the number of entries: the walk rejects it
/// anyway, and a count is only a table's initial size.
fn count_sizes(
    text: &[u8],
    positions: &[u32],
    sizes: &mut Vec<u32>,
    counting: &mut Vec<(u32, u32, u32)>,
) {
    sizes.clear();
    counting.clear();
    for (i, &p) in positions.iter().enumerate() {
        match text[p as usize] {
            b'[' | b'{' => {
                counting.push((sizes.len() as u32, i as u32, 0));
                sizes.push(UNKNOWN);
            }
            b',' => {
                if let Some(top) = counting.last_mut() {
                    top.2 += 1;
                }
            }
            b']' | b'}' => {
                if let Some((slot, open, commas)) = counting.pop() {
                    let empty = open as usize + 1 == i;
                    sizes[slot as usize] = if empty { 0 } else { commas + 1 };
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
