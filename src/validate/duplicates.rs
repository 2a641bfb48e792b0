//! Which keys of an object are the same key, compared after unescaping
//! (`"mod\u0065l"` and `"model"` are one key).
//!
//! One structure answers that wherever it is asked: [`KeyTable`], an
//! open-addressing hash table of key entries over slots its owner
//! provides. Keys are hashed with SipHash under a key drawn at random once
//! per process (std's `RandomState`), so an attacker who picks the keys of
//! a body cannot make them collide: inserts and lookups cost O(1 + key
//! length) expected, whatever the keys, and a whole object O(its size).
//! Validation fills a scratch table per object under
//! `duplicate_keys = "error"` ([`first_repeat`]); navigation keeps one per
//! object it searches often ([`crate::navigate::lookup`]).
//!
//! Objects of at most [`PAIRWISE_MAX`] keys are compared pair by pair:
//! cheaper than hashing at that size, and O(1) all the same.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use crate::navigate::Tree;
use crate::values::string::unescape_into;

/// Objects up to this many keys are compared pair by pair.
pub const PAIRWISE_MAX: usize = 16;

/// The number of slots a table for `keys` keys (at least 2) needs: 1.75
/// per key, so the table is at most 4/7 full and takes 7 bytes per key.
pub fn table_len(keys: usize) -> usize {
    keys + keys / 2 + keys / 4
}

/// The hash of a decoded key, under the process's random SipHash key.
fn hash(key: &[u8]) -> u64 {
    static HASHER: OnceLock<RandomState> = OnceLock::new();
    HASHER.get_or_init(RandomState::new).hash_one(key)
}

/// The decoded bytes of the key (any string) at entry `e`: a slice of the
/// text, or of `buf` when it has escapes.
pub fn decoded<'r>(tree: &Tree<'r>, e: u32, buf: &'r mut Vec<u8>) -> &'r [u8] {
    let body = tree.string_body(e);
    if !tree.has_escapes(e) {
        return body;
    }
    buf.clear();
    unescape_into(body, buf);
    buf
}

/// An open-addressing (linear probing) hash table of key entries: each
/// slot holds the entry of a key's opening quote, or 0 for empty (entry 0
/// is never a key). Lookups compare keys after unescaping.
pub struct KeyTable<'s> {
    slots: &'s mut [u32],
}

impl<'s> KeyTable<'s> {
    /// A table over `slots`, which must be all 0 and hold at least
    /// [`table_len`] slots for the keys that will be inserted.
    pub fn new(slots: &'s mut [u32]) -> KeyTable<'s> {
        debug_assert!(!slots.is_empty());
        KeyTable { slots }
    }

    /// Inserts the key at entry `key` whose decoded bytes are `bytes`.
    /// When the table already holds the same key, returns its entry and,
    /// if `replace`, puts `key` in its place. Adds the slots it probed to
    /// `work`.
    pub fn insert(
        &mut self,
        tree: &Tree<'_>,
        key: u32,
        bytes: &[u8],
        replace: bool,
        work: &mut u64,
    ) -> Option<u32> {
        let mut at = home(self.slots.len(), bytes);
        loop {
            *work += 1;
            let held = self.slots[at];
            if held == 0 {
                self.slots[at] = key;
                return None;
            }
            if tree.key_is(held, bytes) {
                if replace {
                    self.slots[at] = key;
                }
                return Some(held);
            }
            at += 1;
            if at == self.slots.len() {
                at = 0;
            }
        }
    }
}

/// The slot where probing for `key` starts in a table of `len` slots: its
/// hash scaled to the table (no power-of-two size needed).
fn home(len: usize, key: &[u8]) -> usize {
    ((u128::from(hash(key)) * len as u128) >> 64) as usize
}

/// The entry of the key that decodes to `want` in the [`KeyTable`] slots
/// `slots`, if they hold one. Adds the slots it probed to `work`.
pub fn find(slots: &[u32], tree: &Tree<'_>, want: &[u8], work: &mut u64) -> Option<u32> {
    let mut at = home(slots.len(), want);
    loop {
        *work += 1;
        let held = slots[at];
        if held == 0 {
            return None;
        }
        if tree.key_is(held, want) {
            return Some(held);
        }
        at += 1;
        if at == slots.len() {
            at = 0;
        }
    }
}

/// Reusable memory for [`first_repeat`].
#[derive(Default, Debug)]
pub struct Scratch {
    slots: Vec<u32>,
    key: Vec<u8>,
    /// Keys compared and slots probed so far, for tests that check the
    /// work stays linear whatever the keys.
    work: u64,
}

impl Scratch {
    /// An empty scratch, holding no memory.
    pub const fn new() -> Scratch {
        Scratch {
            slots: Vec::new(),
            key: Vec::new(),
            work: 0,
        }
    }

    /// Bytes of heap held for the next document.
    pub fn retained_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<u32>() + self.key.capacity()
    }

    /// The work done so far (see the field); it only grows.
    pub fn work(&self) -> u64 {
        self.work
    }
}

/// The entry of the first key, in document order, that repeats an earlier
/// key of the same object; `entries` are the opening quotes of the
/// object's keys, in document order.
pub fn first_repeat(tree: &Tree<'_>, entries: &[u32], scratch: &mut Scratch) -> Option<u32> {
    if entries.len() <= PAIRWISE_MAX {
        scratch.work += (entries.len() * entries.len()) as u64;
        return (1..entries.len()).find_map(|j| {
            let key = decoded(tree, entries[j], &mut scratch.key);
            entries[..j]
                .iter()
                .any(|&earlier| tree.key_is(earlier, key))
                .then_some(entries[j])
        });
    }
    scratch.slots.clear();
    scratch.slots.resize(table_len(entries.len()), 0);
    let mut table = KeyTable::new(&mut scratch.slots);
    entries.iter().copied().find(|&e| {
        let key = decoded(tree, e, &mut scratch.key);
        table
            .insert(tree, e, key, false, &mut scratch.work)
            .is_some()
    })
}
