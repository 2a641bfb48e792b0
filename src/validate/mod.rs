//! Stage 2: check the whole document against RFC 8259 by walking the
//! structural index once, and link containers for navigation.
//!
//! Input: the text and the stage-1 index (positions and escapes). Output:
//! `Index::links` (see [`crate::index`]), or the first error in document
//! order. The walk is an explicit state machine with a frame stack on the
//! heap, so nesting depth costs no native stack; the stack is capped by
//! [`Options::max_depth`].
//!
//! Per value it checks: the grammar between structurals; number and
//! literal spellings and what follows them (`literal`, [`crate::values::number`]); the
//! escapes inside each string, consumed from the sorted escape list in
//! step with the walk (`escapes`); and, under
//! [`DuplicateKeys::Error`], repeated keys per object ([`duplicates`]).
//! UTF-8, control characters and string termination were checked by stage 1.

pub mod duplicates;
mod escapes;
mod literal;

use crate::error::{Error, ErrorCode, Result};
use crate::index::Index;
use crate::navigate::Tree;
use crate::values::number::number_end;

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

/// An open container during the walk.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// Entry of the opening bracket.
    open: u32,
    /// Members or elements seen so far.
    count: u32,
    is_object: bool,
    /// Where this object's keys start in `Scratch::keys`.
    keys_from: u32,
}

/// Reusable working memory of the walk.
#[derive(Default, Debug)]
pub struct Scratch {
    frames: Vec<Frame>,
    keys: Vec<u32>,
    duplicates: duplicates::Scratch,
}

impl Scratch {
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
fn ends_scalar(src: &[u8], at: usize) -> bool {
    src.get(at).is_none_or(|&b| ENDS_SCALAR[b as usize])
}

/// Validates `src` using its stage-1 `index`, filling `index.links`.
pub fn validate(
    src: &[u8],
    index: &mut Index,
    opts: &Options,
    scratch: &mut Scratch,
) -> Result<()> {
    let Index {
        positions,
        escapes,
        links,
    } = index;
    if positions.is_empty() {
        return Err(Error::new(ErrorCode::Empty, src.len()));
    }
    links.clear();
    links.resize(positions.len(), 0);
    scratch.frames.clear();
    scratch.keys.clear();
    Walk {
        src,
        positions,
        escapes,
        links,
        next_escape: 0,
        opts,
        scratch,
    }
    .run()
}

/// The state of one validation walk.
struct Walk<'a> {
    src: &'a [u8],
    positions: &'a [u32],
    escapes: &'a [u32],
    links: &'a mut [u32],
    /// The first escape not yet checked.
    next_escape: usize,
    opts: &'a Options,
    scratch: &'a mut Scratch,
}

impl Walk<'_> {
    /// The offset of entry `i`, or the input length past the last entry.
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        self.positions
            .get(i)
            .map_or(self.src.len(), |&p| p as usize)
    }

    /// The byte at entry `i`, or `None` past the last entry.
    #[inline(always)]
    fn byte(&self, i: usize) -> Option<u8> {
        self.positions.get(i).map(|&p| self.src[p as usize])
    }

    fn run(&mut self) -> Result<()> {
        let n = self.positions.len();
        let mut i = 0usize;
        // What to report if the next value is missing.
        let mut value_error = ErrorCode::ExpectedValue;

        'value: loop {
            let p = self.at(i);
            match self.byte(i) {
                Some(open @ (b'{' | b'[')) => {
                    if self.scratch.frames.len() >= self.opts.max_depth as usize {
                        return Err(Error::new(ErrorCode::DepthExceeded, p));
                    }
                    let is_object = open == b'{';
                    let close = if is_object { b'}' } else { b']' };
                    // An empty container starts at count MAX so that the
                    // increment after its closing bracket wraps it to 0.
                    let empty = self.byte(i + 1) == Some(close);
                    self.scratch.frames.push(Frame {
                        open: i as u32,
                        count: if empty { u32::MAX } else { 0 },
                        is_object,
                        keys_from: self.scratch.keys.len() as u32,
                    });
                    i += 1;
                    if !empty {
                        if is_object {
                            i = self.member_key(i, ErrorCode::ExpectedKeyOrBrace)?;
                            value_error = ErrorCode::ExpectedValue;
                        } else {
                            value_error = ErrorCode::ExpectedValueOrBracket;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.string(i)?;
                    i += 2;
                }
                Some(first @ (b't' | b'f' | b'n')) => {
                    literal::check(self.src, p, first)?;
                    i += 1;
                }
                Some(b'-' | b'0'..=b'9') => {
                    match number_end(self.src, p) {
                        Some(end) if ends_scalar(self.src, end) => {}
                        _ => return Err(Error::new(ErrorCode::InvalidNumber, p)),
                    }
                    i += 1;
                }
                _ => return Err(Error::new(value_error, p)),
            }

            // A value ended just before entry i: continue or close the
            // containers around it.
            loop {
                let Some(frame) = self.scratch.frames.last_mut() else {
                    if i < n {
                        return Err(Error::new(ErrorCode::TrailingContent, self.at(i)));
                    }
                    return Ok(());
                };
                frame.count = frame.count.wrapping_add(1);
                let frame = *frame;
                let (close, after_error) = if frame.is_object {
                    (b'}', ErrorCode::ExpectedCommaOrBrace)
                } else {
                    (b']', ErrorCode::ExpectedCommaOrBracket)
                };
                match self.byte(i) {
                    Some(b',') => {
                        i += 1;
                        if frame.is_object {
                            i = self.member_key(i, ErrorCode::ExpectedKey)?;
                        }
                        value_error = ErrorCode::ExpectedValue;
                        continue 'value;
                    }
                    Some(b) if b == close => {
                        self.links[frame.open as usize] = i as u32;
                        self.links[i] = frame.count;
                        if frame.is_object && self.opts.duplicate_keys == DuplicateKeys::Error {
                            self.check_keys(frame.keys_from as usize)?;
                        }
                        self.scratch.frames.pop();
                        i += 1;
                    }
                    _ => return Err(Error::new(after_error, self.at(i))),
                }
            }
        }
    }

    /// Validates the string whose opening quote is entry `i`, and records
    /// in its link whether it contains escapes.
    #[inline(always)]
    fn string(&mut self, i: usize) -> Result<()> {
        let close = self.positions[i + 1];
        if self
            .escapes
            .get(self.next_escape)
            .is_some_and(|&e| e < close)
        {
            escapes::check(self.src, self.escapes, &mut self.next_escape, close)?;
            self.links[i] = 1;
        }
        Ok(())
    }

    /// Reads `"key" :` at entry `i` and returns the entry of the value.
    #[inline(always)]
    fn member_key(&mut self, i: usize, missing: ErrorCode) -> Result<usize> {
        if self.byte(i) != Some(b'"') {
            return Err(Error::new(missing, self.at(i)));
        }
        self.string(i)?;
        if self.opts.duplicate_keys == DuplicateKeys::Error {
            self.scratch.keys.push(i as u32);
        }
        if self.byte(i + 2) != Some(b':') {
            return Err(Error::new(ErrorCode::ExpectedColon, self.at(i + 2)));
        }
        Ok(i + 3)
    }

    /// Rejects the object whose keys are `scratch.keys[from..]` if one
    /// repeats, then forgets them.
    fn check_keys(&mut self, from: usize) -> Result<()> {
        let keys = &self.scratch.keys[from..];
        let tree = Tree {
            src: self.src,
            positions: self.positions,
            links: self.links,
        };
        if let Some(repeat) = duplicates::first_repeat(&tree, keys, &mut self.scratch.duplicates) {
            return Err(Error::new(
                ErrorCode::DuplicateKey,
                self.at(repeat as usize),
            ));
        }
        self.scratch.keys.truncate(from);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
