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
//! Validation compares the keys of an object of at most
//! [`PAIRWISE_CHECK_MAX`] pair by pair: cheaper than anything else at that
//! size, and O(1) all the same. A larger object's keys are first sorted
//! into [`BUCKETS`] buckets by a fingerprint (the key's length and its
//! first and last bytes: unkeyed and cheap, no pass over the whole key),
//! and each key is compared only with the earlier keys of its bucket
//! ([`by_fingerprint`]). The keys of real objects mostly differ in those
//! bytes, so a few comparisons settle the object where SipHash cost a
//! few hundred instructions a key: with the buckets, the parse of
//! twitter.json under "error" runs 1.89 times as fast as with the table
//! for every object, github-100k's 1.55 times (`DUPLICATE_KEYS=error
//! tools/ab_parse.sh`, docs/benchmarks.md). A key with escapes, or a
//! bucket holding [`BUCKET_MAX`] keys when another arrives (which keys
//! chosen to share a fingerprint make), sends the object to the keyed
//! table: at most `BUCKET_MAX` comparisons a key are spent first, so the
//! work stays linear whatever the keys. Navigation always walks objects
//! of at most [`PAIRWISE_MAX`] keys.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use crate::navigate::Tree;
use crate::values::string::unescape_into;

/// Objects up to this many keys are walked by navigation and compared
/// pair by pair by its counts (`crate::navigate::lookup`).
pub const PAIRWISE_MAX: usize = 16;

/// Fingerprint buckets of [`by_fingerprint`]: 128.
const BUCKET_BITS: u32 = 7;
const BUCKETS: usize = 1 << BUCKET_BITS;

/// The most keys a fingerprint bucket holds before the object goes to a
/// [`KeyTable`] instead.
const BUCKET_MAX: usize = 8;

/// Objects of up to this many keys are checked pair by pair by
/// [`first_repeat`]; larger ones by fingerprint.
const PAIRWISE_CHECK_MAX: usize = 8;

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
    /// For each key of the object [`by_fingerprint`] checks, the key
    /// before it in its bucket (its index plus one, 0 for none).
    earlier: Vec<u32>,
    /// [`by_fingerprint`]'s buckets: the stamp of the object that last
    /// used one (high half) and its last key (index plus one, low half).
    /// A stamp that is not the current object's reads as an empty bucket,
    /// so no object clears them.
    buckets: Vec<u64>,
    /// The current object's stamp (never 0 once buckets exist).
    stamp: u32,
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
            earlier: Vec::new(),
            buckets: Vec::new(),
            stamp: 0,
            work: 0,
        }
    }

    /// Bytes of heap held for the next document.
    pub fn retained_bytes(&self) -> usize {
        (self.slots.capacity() + self.earlier.capacity()) * size_of::<u32>()
            + self.buckets.capacity() * size_of::<u64>()
            + self.key.capacity()
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
    if entries.len() <= PAIRWISE_CHECK_MAX {
        scratch.work += (entries.len() * entries.len()) as u64;
        return (1..entries.len()).find_map(|j| {
            let key = decoded(tree, entries[j], &mut scratch.key);
            entries[..j]
                .iter()
                .any(|&earlier| tree.key_is(earlier, key))
                .then_some(entries[j])
        });
    }
    if let Some(verdict) = by_fingerprint(tree, entries, scratch) {
        return verdict;
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

/// [`first_repeat`] of an object none of whose keys has escapes, through
/// fingerprint buckets (see the module docs); `None` when it cannot tell:
/// a key has escapes, or a bucket outgrew [`BUCKET_MAX`].
fn by_fingerprint(tree: &Tree<'_>, entries: &[u32], scratch: &mut Scratch) -> Option<Option<u32>> {
    if scratch.buckets.is_empty() {
        scratch.buckets = vec![0; BUCKETS];
    }
    scratch.stamp = scratch.stamp.wrapping_add(1);
    if scratch.stamp == 0 {
        // Stamps came round: forget every earlier object's.
        scratch.buckets.fill(0);
        scratch.stamp = 1;
    }
    let stamp = u64::from(scratch.stamp) << 32;
    let buckets: &mut [u64; BUCKETS] = (&mut scratch.buckets[..])
        .try_into()
        .expect("BUCKETS buckets");
    // Each key links to the one before it in its bucket in `earlier`.
    scratch.earlier.clear();
    for (j, &e) in entries.iter().enumerate() {
        if tree.has_escapes(e) {
            return None;
        }
        let key = tree.string_body(e);
        let bucket = &mut buckets[fingerprint(key)];
        let first = if *bucket & !0xFFFF_FFFF == stamp {
            *bucket as u32
        } else {
            0
        };
        let mut at = first;
        let mut held = 0;
        while at != 0 {
            scratch.work += 1;
            let earlier = entries[at as usize - 1];
            if tree.key_is(earlier, key) {
                return Some(Some(e));
            }
            held += 1;
            if held == BUCKET_MAX {
                return None;
            }
            at = scratch.earlier[at as usize - 1];
        }
        scratch.earlier.push(first);
        *bucket = stamp | (j as u64 + 1);
    }
    Some(None)
}

/// A cheap, unkeyed fingerprint of a key's bytes, below [`BUCKETS`]: its
/// length and up to its first and last eight bytes (all of a key of up to
/// 16), mixed by one multiply. Keys chosen to share one cost only a fall
/// back to the keyed table (see [`by_fingerprint`]).
#[inline(always)]
fn fingerprint(key: &[u8]) -> usize {
    let n = key.len();
    let (head, tail) = match n {
        0 => (0, 0),
        1..=3 => (
            u64::from(key[0]) | u64::from(key[n / 2]) << 8 | u64::from(key[n - 1]) << 16,
            0,
        ),
        4..=7 => (
            u64::from(u32::from_le_bytes(key[..4].try_into().expect("4 bytes"))),
            u64::from(u32::from_le_bytes(
                key[n - 4..].try_into().expect("4 bytes"),
            )),
        ),
        _ => (
            u64::from_le_bytes(key[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(key[n - 8..].try_into().expect("8 bytes")),
        ),
    };
    let mixed = (head ^ tail.rotate_left(29) ^ (n as u64).rotate_right(7))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (64 - BUCKET_BITS)) as usize
}

#[cfg(test)]
mod tests {
    use super::{BUCKET_MAX, PAIRWISE_CHECK_MAX};
    use crate::error::{Error, ErrorCode};
    use crate::index::Index;
    use crate::testing::Rng;
    use crate::validate::{DuplicateKeys, Options, validate};

    /// An object of `keys` (raw JSON string bodies) and where each key's
    /// opening quote is.
    fn object(keys: &[String]) -> (Vec<u8>, Vec<usize>) {
        let mut text = b"{".to_vec();
        let mut at = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                text.push(b',');
            }
            at.push(text.len());
            text.extend_from_slice(format!("\"{k}\":{i}").as_bytes());
        }
        text.push(b'}');
        (text, at)
    }

    /// What validation under "error" says of `text`, and the work its
    /// duplicate checks took, through `scratch`.
    fn check(text: &[u8], scratch: &mut crate::validate::Scratch) -> (Result<(), Error>, u64) {
        let opts = Options {
            duplicate_keys: DuplicateKeys::Error,
            ..Options::default()
        };
        let mut index = Index::default();
        crate::scan::scan(text, &mut index).unwrap();
        let before = scratch.duplicate_work();
        let verdict = validate(text, &mut index, &opts, scratch);
        (verdict, scratch.duplicate_work() - before)
    }

    /// The reference: the first key equal, once decoded, to an earlier one.
    fn first_repeat_at(decoded: &[String], at: &[usize]) -> Option<usize> {
        (1..decoded.len()).find_map(|j| decoded[..j].contains(&decoded[j]).then_some(at[j]))
    }

    #[test]
    fn every_way_of_checking_finds_the_first_repeat() {
        // Keys from few letters, so that repeats and shared lengths and
        // fingerprints are common; some spelled with an escape, which is
        // the same key decoded.
        let mut rng = Rng::new(21);
        let mut scratch = crate::validate::Scratch::default();
        let mut repeats = 0;
        for round in 0..3_000 {
            let n = 2 + rng.below(if round % 2 == 0 {
                2 * PAIRWISE_CHECK_MAX
            } else {
                400
            });
            let spread = 1 + rng.below(4 * n);
            let (mut raw, mut decoded) = (Vec::new(), Vec::new());
            for _ in 0..n {
                let k = rng.below(spread);
                let key = format!("{}{k}", "ab".repeat(rng.below(3)));
                raw.push(if rng.one_in(50) {
                    format!("\\u0061{}", &key[1..])
                } else {
                    key.clone()
                });
                decoded.push(if raw.last().unwrap().starts_with('\\') {
                    format!("a{}", &key[1..])
                } else {
                    key
                });
            }
            let (text, at) = object(&raw);
            let want = first_repeat_at(&decoded, &at);
            repeats += want.is_some() as usize;
            let (got, _) = check(&text, &mut scratch);
            assert_eq!(
                got.err(),
                want.map(|at| Error::new(ErrorCode::DuplicateKey, at)),
                "{}",
                String::from_utf8_lossy(&text)
            );
        }
        assert!(
            repeats > 1_000 && repeats < 2_900,
            "{repeats} objects with repeats"
        );
    }

    #[test]
    fn keys_chosen_to_share_a_fingerprint_cost_linear_work() {
        let mut scratch = crate::validate::Scratch::default();
        for n in [300, 1_200] {
            // One length, one first and last eight bytes: one bucket.
            let keys: Vec<String> = (0..n).map(|i| format!("aaaaaaaa{i:06}bbbbbbbb")).collect();
            let (text, _) = object(&keys);
            let (verdict, work) = check(&text, &mut scratch);
            assert!(verdict.is_ok());
            // BUCKET_MAX comparisons a key at most before the object goes to
            // the keyed table, then a few probes a key there.
            assert!(
                work < (BUCKET_MAX as u64 + 4) * n as u64,
                "{n} keys: {work}"
            );
        }
    }

    #[test]
    fn distinct_fingerprints_settle_an_object_without_the_table() {
        let mut scratch = crate::validate::Scratch::default();
        let keys: Vec<String> = (0..500).map(|i| format!("field_{i}")).collect();
        let (text, _) = object(&keys);
        let (verdict, work) = check(&text, &mut scratch);
        assert!(verdict.is_ok());
        // A table costs at least one probe a key; fingerprints cost only
        // the comparisons within buckets (about n * n / 256 for n keys
        // spread over 128 buckets).
        assert!(work < 500 * 500 / 128, "{work}");
    }

    #[test]
    fn buckets_left_by_earlier_objects_read_as_empty() {
        let mut scratch = crate::validate::Scratch::default();
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let (text, _) = object(&keys);
        // Around the stamp's wrap, and with stamps the buckets already hold.
        for start in [0, u32::MAX - 2] {
            scratch.duplicates.stamp = start;
            for _ in 0..5 {
                assert!(check(&text, &mut scratch).0.is_ok());
            }
        }
        let mut repeated = keys.clone();
        repeated.push("k7".into());
        let (text, at) = object(&repeated);
        assert_eq!(
            check(&text, &mut scratch).0.err(),
            Some(Error::new(ErrorCode::DuplicateKey, at[40]))
        );
    }

    #[test]
    fn the_scratch_counts_its_buckets() {
        let mut validation = crate::validate::Scratch::default();
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        check(&object(&keys).0, &mut validation).0.unwrap();
        let buckets = validation.duplicates.buckets.capacity() * 8;
        assert!(buckets >= 128 * 8);
        assert!(validation.duplicates.retained_bytes() >= buckets);
    }
}
