//! Eager decode: a whole text validated and handed to a [`Stack`] value by
//! value, in document order, in one pass over its bytes, holding nothing
//! proportional to the text.
//!
//! `qjson.parse` keeps a structural index because it reads values later,
//! in any order. Eager decode reads every value once, front to back, and
//! builds it at once, so it needs no index: [`walk`] reads the bytes
//! themselves, checking the same grammar as [`crate::validate`] and what
//! stage 1 checks (UTF-8 and control bytes in strings, unterminated
//! strings), and gives each value to the sink as soon as it is complete.
//!
//! **Containers are made at their size.** A value stays on the sink's
//! stack until its container has [`CHUNK`] of them or closes; then the
//! container's table is made, at its final size when it closes first, and
//! takes them. Almost every container is one chunk, so almost every table
//! is made exactly at its size (`lua_createtable`) without a pass that
//! counts; a longer one (the root array of a long list) is made for two
//! chunks and grows as lua-cjson's tables grow. The stack holds at most a
//! chunk per open container.
//!
//! ```text
//! [ {"a":1,"b":[true,null]} , ...
//!   ^ slot for the object    stack: slot(root) slot(obj) "a" 1 "b" slot(arr) true null
//!                      ^ `]`: the array is made for 2 and takes them:
//!                             stack: slot(root) slot(obj) "a" 1 "b" [true,null]
//!                       ^ `}`: the object, for 2 members
//! ```
//!
//! **Errors.** The walk answers only "valid or not": on any rejection the
//! caller drops what the sink built and parses the text again with
//! [`crate::document::Document`], whose error (code and offset) is the one
//! `qjson.parse` reports, whichever comes first in the text. What the
//! walk accepts is held to what validation accepts by its tests:
//! generated, mutated and random texts under each option, and a text
//! broken at every offset.
//!
//! **Duplicate keys.** Under [`DuplicateKeys::Error`] the sink finds them
//! (a Lua table knows whether it already has a key). Otherwise a repeated
//! key's last value must win, so members are stored in order; the walk
//! tells the sink when a chunk's keys are all different, and then the
//! order does not matter.
//!
//! [`DuplicateKeys::Error`]: crate::validate::DuplicateKeys::Error

mod bytes;
pub mod shape;
mod walk;

use crate::validate::Options;

/// Values a container keeps on the stack before they go into its table.
pub const CHUNK: u32 = 64;

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

/// The receiver of a decode's values: each value is pushed on a stack; a
/// container has a slot below its values and takes them into its table
/// in chunks.
pub trait Stack {
    /// Pushes a member's key, decoded.
    fn key(&mut self, key: &[u8]) -> Flow;
    /// Pushes a string, decoded.
    fn string(&mut self, s: &[u8]) -> Flow;
    /// Pushes a number's nearest double.
    fn number(&mut self, n: f64) -> Flow;
    /// Pushes `true` or `false`.
    fn boolean(&mut self, b: bool) -> Flow;
    /// Pushes `null`.
    fn null(&mut self) -> Flow;
    /// Starts a container: pushes its slot, below its values.
    fn open(&mut self) -> Flow;
    /// Moves the `pending` values on top (for an object, `pending`
    /// key-value pairs) into the table of the container whose slot is
    /// below them, which holds `stored` already. With `stored` 0 the table
    /// is made first, in the slot: for `pending` values when `last`, for
    /// more otherwise. `distinct` says that no key of these pairs repeats
    /// (they may then be stored in any order; else in order, so that a
    /// repeated key's last value wins, or the sink stops with
    /// [`Stop::Invalid`] under the strict policy). After the `last` call
    /// only the table is left, in the slot.
    fn store(
        &mut self,
        object: bool,
        stored: u32,
        pending: u32,
        distinct: bool,
        last: bool,
    ) -> Flow;
}

/// How a decode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The sink got the whole value, the only one left on its stack.
    Done,
    /// The text is invalid: parse it with `Document` for the error.
    Invalid,
    /// The sink gave up: decode it another way.
    GiveUp,
}

/// The memory a decode works in, kept for the next one.
#[derive(Default, Debug)]
pub struct Scratch(walk::Scratch);

impl Scratch {
    /// Bytes of heap held for the next decode.
    pub fn retained_bytes(&self) -> usize {
        self.0.retained_bytes()
    }
}

/// Decodes `src` into `stack` under `opts`.
pub fn decode<S: Stack>(
    src: &[u8],
    opts: &Options,
    scratch: &mut Scratch,
    stack: &mut S,
) -> Outcome {
    match walk::decode(src, opts.max_depth as usize, &mut scratch.0, stack) {
        Ok(()) => Outcome::Done,
        Err(Stop::Invalid) => Outcome::Invalid,
        Err(Stop::GiveUp) => Outcome::GiveUp,
    }
}

#[cfg(test)]
mod tests;
