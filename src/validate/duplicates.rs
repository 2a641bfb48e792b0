//! Repeated keys within one object, compared after unescaping
//! (`"mod\u0065l"` and `"model"` are the same key).
//!
//! Used by validation under `duplicate_keys = "error"` and by navigation
//! to count the distinct members of an object under "last wins". Small
//! objects compare every pair; larger ones sort their keys, which keeps
//! the cost O(n log n) whatever keys an attacker chooses (no hashing to
//! collide).

use crate::values::string::unescape_into;

/// Objects up to this many keys are checked pair by pair.
const PAIRWISE_MAX: usize = 8;

/// One key's decoded bytes: a slice of the input, or of the arena when
/// the key had escapes.
#[derive(Clone, Copy, Debug)]
struct Key {
    entry: u32,
    start: u32,
    len: u32,
    in_arena: bool,
}

/// Reusable memory for decoded keys.
#[derive(Default, Debug)]
pub struct Scratch {
    arena: Vec<u8>,
    keys: Vec<Key>,
    shadowed: Vec<u32>,
}

impl Scratch {
    /// Bytes of heap held for the next document.
    pub fn retained_bytes(&self) -> usize {
        self.arena.capacity()
            + self.keys.capacity() * size_of::<Key>()
            + self.shadowed.capacity() * size_of::<u32>()
    }

    /// Collects the decoded keys whose opening quotes are `entries`.
    fn load(&mut self, src: &[u8], positions: &[u32], links: &[u32], entries: &[u32]) {
        self.arena.clear();
        self.keys.clear();
        for &entry in entries {
            let e = entry as usize;
            let (open, close) = (positions[e] as usize + 1, positions[e + 1] as usize);
            let key = if links[e] == 0 {
                Key {
                    entry,
                    start: open as u32,
                    len: (close - open) as u32,
                    in_arena: false,
                }
            } else {
                let start = self.arena.len();
                unescape_into(&src[open..close], &mut self.arena);
                Key {
                    entry,
                    start: start as u32,
                    len: (self.arena.len() - start) as u32,
                    in_arena: true,
                }
            };
            self.keys.push(key);
        }
    }

    fn bytes<'a>(&'a self, src: &'a [u8], k: &Key) -> &'a [u8] {
        let from = if k.in_arena { &self.arena[..] } else { src };
        &from[k.start as usize..(k.start + k.len) as usize]
    }

    /// Sorts the loaded keys by bytes, then by document order.
    fn sort(&mut self, src: &[u8]) {
        let mut keys = core::mem::take(&mut self.keys);
        keys.sort_unstable_by(|a, b| {
            self.bytes(src, a)
                .cmp(self.bytes(src, b))
                .then(a.entry.cmp(&b.entry))
        });
        self.keys = keys;
    }
}

/// The entry of the first key, in document order, that repeats an earlier
/// key of the same object; `entries` are the opening quotes of the
/// object's keys, in document order.
pub fn first_repeat(
    src: &[u8],
    positions: &[u32],
    links: &[u32],
    entries: &[u32],
    scratch: &mut Scratch,
) -> Option<u32> {
    if entries.len() < 2 {
        return None;
    }
    scratch.load(src, positions, links, entries);
    let keys = &scratch.keys;
    if keys.len() <= PAIRWISE_MAX {
        return (1..keys.len()).find_map(|j| {
            let kj = scratch.bytes(src, &keys[j]);
            keys[..j]
                .iter()
                .any(|ki| scratch.bytes(src, ki) == kj)
                .then_some(keys[j].entry)
        });
    }
    scratch.sort(src);
    // Sorted by bytes then position, every key equal to its predecessor
    // repeats an earlier one; the first repeat is the smallest such entry.
    scratch
        .keys
        .windows(2)
        .filter(|w| scratch.bytes(src, &w[0]) == scratch.bytes(src, &w[1]))
        .map(|w| w[1].entry)
        .min()
}

/// How many distinct keys the object with key quotes `entries` has.
pub fn count_distinct(
    src: &[u8],
    positions: &[u32],
    links: &[u32],
    entries: &[u32],
    scratch: &mut Scratch,
) -> usize {
    if entries.len() < 2 {
        return entries.len();
    }
    scratch.load(src, positions, links, entries);
    scratch.sort(src);
    1 + scratch
        .keys
        .windows(2)
        .filter(|w| scratch.bytes(src, &w[0]) != scratch.bytes(src, &w[1]))
        .count()
}

/// Removes from `entries` (an object's key quotes, in document order) every
/// key that a later key of the object repeats, so that what is left is
/// the members "last wins" reads, still in document order.
pub fn retain_last(
    src: &[u8],
    positions: &[u32],
    links: &[u32],
    entries: &mut Vec<u32>,
    scratch: &mut Scratch,
) {
    if entries.len() < 2 {
        return;
    }
    scratch.load(src, positions, links, entries);
    scratch.shadowed.clear();
    let keys = &scratch.keys;
    if keys.len() <= PAIRWISE_MAX {
        for (i, ki) in keys.iter().enumerate() {
            let bytes = scratch.bytes(src, ki);
            if keys[i + 1..]
                .iter()
                .any(|kj| scratch.bytes(src, kj) == bytes)
            {
                scratch.shadowed.push(ki.entry);
            }
        }
    } else {
        scratch.sort(src);
        // Within a run of equal keys (sorted by position) all but the last
        // are shadowed.
        for w in scratch.keys.windows(2) {
            if scratch.bytes(src, &w[0]) == scratch.bytes(src, &w[1]) {
                scratch.shadowed.push(w[0].entry);
            }
        }
        scratch.shadowed.sort_unstable();
    }
    if !scratch.shadowed.is_empty() {
        let shadowed = &scratch.shadowed;
        entries.retain(|e| shadowed.binary_search(e).is_err());
    }
}
