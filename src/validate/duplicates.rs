//! Which keys of an object are the same key, compared after unescaping
//! (`"mod\u0065l"` and `"model"` are one key).
//!
//! One structure answers that wherever it is asked: [`KeyTable`], an
//! open-addressing hash table of key entries over slots its owner
//! provides, filled by [`fill`] and read by [`find`]. Navigation keeps one
//! per object it searches often, counts or iterates
//! ([`crate::navigate::lookup`]); validation under `duplicate_keys =
//! "error"` ([`first_repeat`]) falls back to one for objects its cheaper
//! checks cannot settle.
//!
//! A table first places keys [`Placement::Quick`]ly: by a hash of the
//! key's length and first and last eight bytes (all of a key of up to
//! 16), under a key drawn at random once per process, a few instructions
//! a key. Keys that share those bytes share a slot, and keys chosen to
//! do so would make probing quadratic; so no key may probe more than
//! [`MAX_PROBES`] slots, and a table where one would is filled again with
//! [`Placement::Sip`]: SipHash of the whole key under another random key,
//! which keys chosen by an attacker cannot make collide (inserts and
//! lookups O(1 + key length) expected, whatever the keys). The quick
//! attempt costs at most `MAX_PROBES` probes a key, and a lookup in a
//! quick table at most as many, so an object costs O(its size) either
//! way. SipHash costs a few hundred instructions a key.
//!
//! Validation, which only asks whether an object repeats a key, compares
//! the keys of an object of at most [`PAIRWISE_CHECK_MAX`] pair by pair
//! (cheaper than anything else at that size, and O(1) all the same). A
//! larger object's keys go first into [`BUCKETS`] buckets by an unkeyed
//! fingerprint of the same bytes, each compared only with the earlier
//! keys of its bucket ([`by_fingerprint`]): no table to clear, and keys
//! of real objects mostly differ there, so a few comparisons settle the
//! object. A key with escapes, or a bucket holding [`BUCKET_MAX`] keys
//! when another arrives (which keys chosen to share a fingerprint make),
//! sends the object to a table: at most `BUCKET_MAX` comparisons a key
//! are spent first. With the buckets, the parse of twitter.json under
//! "error" runs 1.9 times as fast as with SipHash for every object
//! (`DUPLICATE_KEYS=error tools/ab_parse.sh`, docs/benchmarks.md);
//! a quick table for every such object instead took 4.9 million
//! instructions a parse where the buckets take 3.8 (callgrind: a table to
//! clear, and more probes, each a key comparison). Navigation
//! walks objects of at most [`PAIRWISE_MAX`] keys.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use crate::navigate::Tree;
use crate::values::string::unescape_into;

/// Objects up to this many keys are walked by navigation and compared
/// pair by pair by its counts (`crate::navigate::lookup`).
pub const PAIRWISE_MAX: usize = 16;

/// Objects of up to this many keys are checked pair by pair by
/// [`first_repeat`]; larger ones by fingerprint.
const PAIRWISE_CHECK_MAX: usize = 8;

/// Fingerprint buckets of [`by_fingerprint`]: 128.
const BUCKET_BITS: u32 = 7;
const BUCKETS: usize = 1 << BUCKET_BITS;

/// The most keys a fingerprint bucket holds before the object goes to a
/// [`KeyTable`] instead.
const BUCKET_MAX: usize = 8;

/// The most slots a key probes in a [`Placement::Quick`] table. At the
/// table's load (at most 4/7) linear probing rarely goes this far: tables
/// of 20 000 keys of three real shapes stayed within it in 600 runs of
/// their test, where a bound of 64 put about one run in 150 over it
/// (`keys_of_real_objects_are_placed_quickly`). An object that does go
/// over only falls back to SipHash; an attacker's keys cost at most this
/// many probes each before that.
const MAX_PROBES: u32 = 128;

/// The number of slots a table for `keys` keys (at least 2) needs: 1.75
/// per key, so the table is at most 4/7 full and takes 7 bytes per key.
pub fn table_len(keys: usize) -> usize {
    keys + keys / 2 + keys / 4
}

/// How a [`KeyTable`] places its keys (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// By a keyed hash of the key's length and ends; no key probes more
    /// than [`MAX_PROBES`] slots.
    Quick,
    /// By keyed SipHash of the whole key.
    Sip,
}

/// The process's random keys: SipHash's, and the quick hash's two words.
fn keys() -> &'static (RandomState, u64, u64) {
    static KEYS: OnceLock<(RandomState, u64, u64)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let sip = RandomState::new();
        let quick = RandomState::new();
        (sip, quick.hash_one(1u8), quick.hash_one(2u8))
    })
}

/// The first and last eight bytes of `key` as words (four, or one byte
/// at each end and in the middle, for shorter keys): all of a key of up
/// to 16 bytes.
#[inline(always)]
fn ends(key: &[u8]) -> (u64, u64) {
    let n = key.len();
    match n {
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
    }
}

/// The hash of a decoded key under `placement`.
#[inline(always)]
fn hash(placement: Placement, key: &[u8]) -> u64 {
    let (sip, k0, k1) = keys();
    match placement {
        Placement::Sip => sip.hash_one(key),
        Placement::Quick => {
            // A folded multiply of the two keyed words, and another to
            // spread what structured keys (`k1`, `k2`, ...) leave in it:
            // with the first alone, 8 000 numbered keys probed 1.5 to 2.1
            // slots on average depending on the random key, against
            // SipHash's 1.65-1.75 (a throwaway count; with both, 1.6-1.7).
            let (head, tail) = ends(key);
            let b = tail ^ k1 ^ (key.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            fold(fold(head ^ k0, b) ^ k1, 0x2D35_8DCC_AA6C_78A5)
        }
    }
}

/// The 128-bit product of `a` and `b`, its halves XORed: every bit of
/// both reaches the high half.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product >> 64) as u64 ^ product as u64
}

/// The slot where probing for `key` starts in a table of `len` slots: its
/// hash scaled to the table (no power-of-two size needed).
#[inline(always)]
fn home(len: usize, placement: Placement, key: &[u8]) -> usize {
    ((u128::from(hash(placement, key)) * len as u128) >> 64) as usize
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

/// Fills `out[..keys.len()]` with the length between the quotes of each
/// key at `keys`, or `u32::MAX` for one with escapes (decoding shortens
/// a key): keys of different lengths, neither with escapes, differ, so
/// most pairs of a small object are told apart by these alone (see
/// [`repeats_earlier`]).
pub fn raw_lengths(tree: &Tree<'_>, keys: &[u32], out: &mut [u32]) {
    for (len, &e) in out.iter_mut().zip(keys) {
        *len = if tree.has_escapes(e) {
            u32::MAX
        } else {
            tree.string_span(e).len() as u32
        };
    }
}

/// Whether key `j` of `keys`, whose [`raw_lengths`] are `lens`, is the
/// same key as an earlier one. It is decoded (by `decode`, given its
/// entry) only when an earlier key may match by length, and compared
/// with those alone.
pub fn repeats_earlier<'k>(
    tree: &Tree<'_>,
    keys: &[u32],
    lens: &[u32],
    j: usize,
    decode: impl FnOnce(u32) -> &'k [u8],
) -> bool {
    let lj = lens[j];
    let alike = |i: usize| lens[i] == lj || lens[i] == u32::MAX || lj == u32::MAX;
    if !(0..j).any(alike) {
        return false;
    }
    let key = decode(keys[j]);
    (0..j).any(|i| alike(i) && tree.key_is(keys[i], key))
}

/// An open-addressing (linear probing) hash table of key entries: each
/// slot holds the entry of a key's opening quote, or 0 for empty (entry 0
/// is never a key). Lookups compare keys after unescaping.
struct KeyTable<'s> {
    slots: &'s mut [u32],
    placement: Placement,
}

/// A [`Placement::Quick`] insert would have probed past [`MAX_PROBES`].
struct Crowded;

impl KeyTable<'_> {
    /// Inserts the key at entry `key` whose decoded bytes are `bytes`.
    /// When the table already holds the same key, returns its entry and,
    /// if `replace`, puts `key` in its place. Adds the slots it probed to
    /// `work`.
    fn insert(
        &mut self,
        tree: &Tree<'_>,
        key: u32,
        bytes: &[u8],
        replace: bool,
        work: &mut u64,
    ) -> Result<Option<u32>, Crowded> {
        let mut at = home(self.slots.len(), self.placement, bytes);
        let mut probes = 0;
        loop {
            *work += 1;
            probes += 1;
            let held = self.slots[at];
            if held == 0 {
                if self.placement == Placement::Quick && probes > MAX_PROBES {
                    return Err(Crowded);
                }
                self.slots[at] = key;
                return Ok(None);
            }
            if tree.key_is(held, bytes) {
                if replace {
                    self.slots[at] = key;
                }
                return Ok(Some(held));
            }
            at += 1;
            if at == self.slots.len() {
                at = 0;
            }
        }
    }
}

/// What [`fill`] made of an object's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filled {
    /// How the table places them, for [`find`].
    pub placement: Placement,
    /// How many distinct keys it put in (all of them unless a repeat
    /// ended the fill).
    pub distinct: u32,
    /// The first key that repeats an earlier one, in `keys` order.
    pub first_repeat: Option<u32>,
}

/// Fills `slots` (all 0, at least [`table_len`] of them for `keys`) with
/// the keys at entries `keys`: quickly if no key probes too far, else
/// again with SipHash. With `replace` ("last wins") a repeated key keeps
/// its last entry; without, the first repeat ends the fill, leaving the
/// table partly filled (under "error" a repeat rejects the document, and
/// a validated one has none). Adds the slots probed to `work`.
pub fn fill(
    slots: &mut [u32],
    tree: &Tree<'_>,
    keys: impl Iterator<Item = u32> + Clone,
    replace: bool,
    buf: &mut Vec<u8>,
    work: &mut u64,
) -> Filled {
    debug_assert!(!slots.is_empty());
    'placement: for placement in [Placement::Quick, Placement::Sip] {
        let mut table = KeyTable {
            slots: &mut *slots,
            placement,
        };
        let mut filled = Filled {
            placement,
            distinct: 0,
            first_repeat: None,
        };
        for key in keys.clone() {
            let bytes = decoded(tree, key, buf);
            match table.insert(tree, key, bytes, replace, work) {
                Ok(None) => filled.distinct += 1,
                Ok(Some(_)) if !replace => {
                    filled.first_repeat = Some(key);
                    return filled;
                }
                Ok(Some(_)) => {
                    filled.first_repeat.get_or_insert(key);
                }
                Err(Crowded) => {
                    slots.fill(0);
                    continue 'placement;
                }
            }
        }
        return filled;
    }
    unreachable!("SipHash placement is never crowded")
}

/// The entry of the key that decodes to `want` in the [`KeyTable`] slots
/// `slots` (filled with `placement`), if they hold one. Adds the slots it
/// probed to `work`.
pub fn find(
    slots: &[u32],
    placement: Placement,
    tree: &Tree<'_>,
    want: &[u8],
    work: &mut u64,
) -> Option<u32> {
    let mut at = home(slots.len(), placement, want);
    let mut probes = 0;
    loop {
        *work += 1;
        probes += 1;
        let held = slots[at];
        // Quick placement put every key within MAX_PROBES of its home.
        if held == 0 || (placement == Placement::Quick && probes > MAX_PROBES) {
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
    let n = entries.len();
    if let [a, b] = *entries
        && !tree.has_escapes(a)
        && !tree.has_escapes(b)
    {
        // The most common object of all, compared at once.
        scratch.work += 1;
        return (tree.string_body(a) == tree.string_body(b)).then_some(b);
    }
    if n <= PAIRWISE_CHECK_MAX {
        scratch.work += (n * n) as u64;
        let mut lens = [0u32; PAIRWISE_CHECK_MAX];
        raw_lengths(tree, entries, &mut lens);
        let buf = &mut scratch.key;
        return (1..n)
            .find(|&j| repeats_earlier(tree, entries, &lens, j, |e| decoded(tree, e, buf)))
            .map(|j| entries[j]);
    }
    if let Some(verdict) = by_fingerprint(tree, entries, scratch) {
        return verdict;
    }
    scratch.slots.clear();
    scratch.slots.resize(table_len(entries.len()), 0);
    fill(
        &mut scratch.slots,
        tree,
        entries.iter().copied(),
        false,
        &mut scratch.key,
        &mut scratch.work,
    )
    .first_repeat
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
/// length and [`ends`], mixed by one multiply. Keys chosen to share one
/// cost only a fall back to the table (see [`by_fingerprint`]).
#[inline(always)]
fn fingerprint(key: &[u8]) -> usize {
    let (head, tail) = ends(key);
    let mixed = (head ^ tail.rotate_left(29) ^ (key.len() as u64).rotate_right(7))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (64 - BUCKET_BITS)) as usize
}

#[cfg(test)]
mod tests {
    use super::{MAX_PROBES, PAIRWISE_CHECK_MAX, Placement, fill, find, table_len};
    use crate::error::{Error, ErrorCode};
    use crate::index::Index;
    use crate::navigate::Tree;
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

    /// What validation under `policy` says of `text`, its index, and the
    /// work its duplicate checks took, through `scratch`.
    fn check(
        text: &[u8],
        policy: DuplicateKeys,
        scratch: &mut crate::validate::Scratch,
    ) -> (Result<(), Error>, Index, u64) {
        let opts = Options {
            duplicate_keys: policy,
            ..Options::default()
        };
        let mut index = Index::default();
        crate::scan::scan(text, &mut index).unwrap();
        let before = scratch.duplicate_work();
        let verdict = validate(text, &mut index, &opts, scratch);
        (verdict, index, scratch.duplicate_work() - before)
    }

    /// The reference: the first key equal, once decoded, to an earlier one.
    fn first_repeat_at(decoded: &[String], at: &[usize]) -> Option<usize> {
        (1..decoded.len()).find_map(|j| decoded[..j].contains(&decoded[j]).then_some(at[j]))
    }

    #[test]
    fn every_way_of_checking_finds_the_first_repeat() {
        // Keys from few letters, so that repeats and shared lengths and
        // ends are common; some spelled with an escape, which is the same
        // key decoded.
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
            let (got, _, _) = check(&text, DuplicateKeys::Error, &mut scratch);
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

    /// The table `fill` makes of the keys of `text`, an object, and what
    /// it said.
    fn table_of(text: &[u8], work: &mut u64) -> (Vec<u32>, super::Filled, Index) {
        let mut scratch = crate::validate::Scratch::default();
        let (verdict, index, _) = check(text, DuplicateKeys::LastWins, &mut scratch);
        verdict.unwrap();
        let tree = Tree {
            src: text,
            positions: &index.positions,
            links: &index.links,
        };
        let mut slots = vec![0; table_len(tree.count(0) as usize)];
        let filled = fill(&mut slots, &tree, tree.keys(0), true, &mut Vec::new(), work);
        (slots, filled, index)
    }

    #[test]
    fn keys_sharing_their_ends_fall_back_to_siphash_in_linear_work() {
        for n in [300, 1_200] {
            // One length, one first and last eight bytes: one quick hash.
            let keys: Vec<String> = (0..n).map(|i| format!("aaaaaaaa{i:06}bbbbbbbb")).collect();
            let (text, _) = object(&keys);
            let mut work = 0;
            let (slots, filled, index) = table_of(&text, &mut work);
            assert_eq!(filled.placement, Placement::Sip);
            assert_eq!(filled.distinct, n as u32);
            // At most MAX_PROBES probes a key before the quick table gives
            // up, then a few a key with SipHash.
            assert!(
                work < (u64::from(MAX_PROBES) + 4) * n as u64,
                "{n} keys: {work}"
            );
            let tree = Tree {
                src: &text,
                positions: &index.positions,
                links: &index.links,
            };
            for k in &keys {
                assert!(find(&slots, filled.placement, &tree, k.as_bytes(), &mut work).is_some());
            }
            assert!(
                find(
                    &slots,
                    filled.placement,
                    &tree,
                    b"aaaaaaaa999999bbbbbbbb",
                    &mut work
                )
                .is_none()
            );
            // And validation, through the same tables.
            let mut scratch = crate::validate::Scratch::default();
            let (verdict, _, work) = check(&text, DuplicateKeys::Error, &mut scratch);
            assert!(verdict.is_ok());
            assert!(
                work < (u64::from(MAX_PROBES) + 4) * n as u64,
                "{n} keys: {work}"
            );
        }
    }

    #[test]
    fn keys_of_real_objects_are_placed_quickly() {
        let mut rng = Rng::new(22);
        for &n in crate::testing::sizes(&[20, 500, 20_000], 2) {
            // Field names, numeric ids of one length, random words.
            for keys in [
                (0..n).map(|i| format!("field_{i}")).collect::<Vec<_>>(),
                (0..n).map(|i| format!("{}", 100_000_000 + 7 * i)).collect(),
                (0..n)
                    .map(|i| {
                        let len = 1 + rng.below(30);
                        let word: String = (0..len)
                            .map(|_| rng.pick(&['a', 'e', 's', 't', '_']))
                            .collect();
                        format!("{word}{i}")
                    })
                    .collect(),
            ] {
                let (text, _) = object(&keys);
                let mut work = 0;
                let (slots, filled, index) = table_of(&text, &mut work);
                assert_eq!(
                    filled.placement,
                    Placement::Quick,
                    "{n} keys like {}",
                    keys[0]
                );
                assert_eq!(filled.distinct, n as u32);
                // A few probes a key (1.75 slots a key).
                assert!(work < 4 * n as u64, "{n} keys like {}: {work}", keys[0]);
                let tree = Tree {
                    src: &text,
                    positions: &index.positions,
                    links: &index.links,
                };
                for (i, k) in keys.iter().enumerate() {
                    let found = find(&slots, filled.placement, &tree, k.as_bytes(), &mut work);
                    assert_eq!(
                        found.map(|e| tree.string_body(e)),
                        Some(k.as_bytes()),
                        "key {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_repeated_key_keeps_the_last_entry_when_replacing() {
        let keys: Vec<String> = (0..40).map(|i| format!("k{}", i % 30)).collect();
        let (text, _) = object(&keys);
        let mut work = 0;
        let (slots, filled, index) = table_of(&text, &mut work);
        assert_eq!(filled.distinct, 30);
        let tree = Tree {
            src: &text,
            positions: &index.positions,
            links: &index.links,
        };
        let last_k3 = tree.keys(0).nth(33).unwrap();
        assert_eq!(
            find(&slots, filled.placement, &tree, b"k3", &mut work),
            Some(last_k3)
        );
        assert_eq!(filled.first_repeat, tree.keys(0).nth(30));
    }

    #[test]
    fn distinct_fingerprints_settle_an_object_without_a_table() {
        let mut scratch = crate::validate::Scratch::default();
        let keys: Vec<String> = (0..500).map(|i| format!("field_{i}")).collect();
        let (text, _) = object(&keys);
        let (verdict, _, work) = check(&text, DuplicateKeys::Error, &mut scratch);
        assert!(verdict.is_ok());
        // Comparisons within buckets only (about n * n / 256 for n keys
        // over 128 buckets), and no table's slots were ever made.
        assert!(work < 500 * 500 / 128, "{work}");
        assert_eq!(scratch.duplicates.slots.capacity(), 0);
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
                assert!(check(&text, DuplicateKeys::Error, &mut scratch).0.is_ok());
            }
        }
        let mut repeated = keys.clone();
        repeated.push("k7".into());
        let (text, at) = object(&repeated);
        assert_eq!(
            check(&text, DuplicateKeys::Error, &mut scratch).0.err(),
            Some(Error::new(ErrorCode::DuplicateKey, at[40]))
        );
    }

    #[test]
    fn the_scratch_counts_its_buckets() {
        let mut validation = crate::validate::Scratch::default();
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        check(&object(&keys).0, DuplicateKeys::Error, &mut validation)
            .0
            .unwrap();
        let buckets = validation.duplicates.buckets.capacity() * 8;
        assert!(buckets >= 128 * 8);
        assert!(validation.duplicates.retained_bytes() >= buckets);
    }
}
