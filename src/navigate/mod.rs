//! Moving around a validated document: cursors are index entries.
//!
//! A cursor is the entry of a value's first structural (see
//! [`crate::index`]). Thanks to the links built by validation, stepping
//! over any value is O(1): a container jumps to its close, a string is two
//! entries, any other scalar one. Finding a key walks the object's members
//! comparing keys after unescaping ([`crate::values::string::unescaped_eq`]);
//! finding element `k` steps over `k` elements. [`lookup`] keeps both O(1)
//! per read whatever the order of reads, with tables built on demand.
//!
//! Duplicate keys: under "last wins" a lookup keeps walking after a match
//! and returns the last one, so lookups, counts and iteration read the
//! document the way lua-cjson and most servers do. Under "error" the
//! document has no repeats and the first match is the only one.

pub mod lookup;
pub mod path;
pub mod spans;
pub mod tape;

use core::ops::Range;

use crate::values::number::number_end;
use crate::values::string::unescaped_eq;

/// The JSON type of a value. `#[repr(i32)]`, mirrored in `include/qjson.h`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// `null`
    Null = 1,
    /// `false`
    False = 2,
    /// `true`
    True = 3,
    /// any number
    Number = 4,
    /// a string
    String = 5,
    /// an array
    Array = 6,
    /// an object
    Object = 7,
}

/// A read-only view of a validated document for navigation.
#[derive(Clone, Copy)]
pub struct Tree<'a> {
    /// The JSON text.
    pub src: &'a [u8],
    /// Stage-1 positions.
    pub positions: &'a [u32],
    /// Stage-2 links.
    pub links: &'a [u32],
}

impl<'a> Tree<'a> {
    #[inline(always)]
    fn byte(&self, e: u32) -> u8 {
        self.src[self.positions[e as usize] as usize]
    }

    /// Whether `e` can be a cursor: an entry that starts a value (the
    /// first entry, or one right after `[`, `,` or `:`). Cursors come from
    /// this library, but they cross the FFI as plain integers.
    pub fn is_value(&self, e: u32) -> bool {
        let Some(&p) = self.positions.get(e as usize) else {
            return false;
        };
        let starts_value = matches!(
            self.src[p as usize],
            b'{' | b'[' | b'"' | b't' | b'f' | b'n' | b'-' | b'0'..=b'9'
        );
        starts_value && (e == 0 || matches!(self.byte(e - 1), b'[' | b',' | b':'))
    }

    /// The type of the value at cursor `e`.
    #[inline]
    pub fn value_type(&self, e: u32) -> ValueType {
        match self.byte(e) {
            b'{' => ValueType::Object,
            b'[' => ValueType::Array,
            b'"' => ValueType::String,
            b't' => ValueType::True,
            b'f' => ValueType::False,
            b'n' => ValueType::Null,
            _ => ValueType::Number,
        }
    }

    /// The entry just after the value at `e`.
    #[inline(always)]
    pub fn skip(&self, e: u32) -> u32 {
        match self.byte(e) {
            b'{' | b'[' => self.links[e as usize] + 1,
            b'"' => e + 2,
            _ => e + 1,
        }
    }

    /// Members (object) or elements (array) of the container at `e`,
    /// counting repeated keys.
    #[inline]
    pub fn count(&self, e: u32) -> u32 {
        self.links[self.links[e as usize] as usize]
    }

    /// The key entries (opening quotes) of the object at `obj`, in order.
    pub fn keys(&self, obj: u32) -> impl Iterator<Item = u32> + Clone + '_ {
        let close = self.links[obj as usize];
        let mut k = Some(obj + 1);
        core::iter::from_fn(move || {
            let key = k.filter(|&key| key < close)?;
            k = self.next_key(key);
            Some(key)
        })
    }

    /// The entry after the member whose key is at `key` (the next key, or
    /// just past the object's close), from the links validation left
    /// (see [`crate::index`]): the link of the key's closing quote, or,
    /// where that is 0, two past the close of the container that is the
    /// value. No byte of the value is read. None where the link does not
    /// lead past the member (never, over validation's links): a walk ends
    /// there, whatever the links hold.
    #[inline(always)]
    pub fn next_key(&self, key: u32) -> Option<u32> {
        member_end(self.links, key as usize).map(|next| next as u32)
    }

    /// The bytes between the quotes of the string at `e`, undecoded.
    #[inline]
    pub fn string_body(&self, e: u32) -> &'a [u8] {
        &self.src[self.string_span(e)]
    }

    /// Where the bytes between the quotes of the string at `e` are.
    #[inline]
    pub fn string_span(&self, e: u32) -> Range<usize> {
        let e = e as usize;
        self.positions[e] as usize + 1..self.positions[e + 1] as usize
    }

    /// Whether the string at `e` contains escapes (must be decoded).
    #[inline]
    pub fn has_escapes(&self, e: u32) -> bool {
        self.links[e as usize] != 0
    }

    /// Whether the key at entry `key` decodes to `want`.
    #[inline(always)]
    pub fn key_is(&self, key: u32, want: &[u8]) -> bool {
        span_is(self.src, self.string_span(key), self.has_escapes(key), want)
    }

    /// Steps from element `from` (the `from_index`-th) to the
    /// `index`-th element (index >= from_index, within the array).
    #[inline]
    pub fn step_elements(&self, mut from: u32, from_index: u32, index: u32) -> u32 {
        for _ in from_index..index {
            // element, then ','.
            from = self.skip(from) + 1;
        }
        from
    }

    /// The exact source text of the value at `e`, as a byte range.
    pub fn raw(&self, e: u32) -> Range<usize> {
        let start = self.positions[e as usize] as usize;
        let end = match self.value_type(e) {
            ValueType::Object | ValueType::Array => {
                self.positions[self.links[e as usize] as usize] as usize + 1
            }
            ValueType::String => self.positions[e as usize + 1] as usize + 1,
            ValueType::True | ValueType::Null => start + 4,
            ValueType::False => start + 5,
            ValueType::Number => self.number_end(e, start),
        };
        start..end
    }

    /// How many containers deep the value at `e` nests, itself counted
    /// (`[[1]]` is 2, a scalar 0).
    pub fn nesting(&self, e: u32) -> u32 {
        self.brackets(e..self.skip(e)).0 as u32
    }

    /// Over the entries `entries`: how deep their brackets go below the
    /// first (the deepest level reached, 0 for none) and the level they
    /// end at (0 when they balance). A bracket inside a string is no entry.
    pub fn brackets(&self, entries: Range<u32>) -> (i64, i64) {
        let (mut level, mut deepest) = (0i64, 0i64);
        for k in entries {
            match self.byte(k) {
                b'{' | b'[' => {
                    level += 1;
                    deepest = deepest.max(level);
                }
                b'}' | b']' => level -= 1,
                _ => {}
            }
        }
        (deepest, level)
    }

    /// The exact source text of the number at `e`, as a byte range:
    /// [`Tree::raw`] without its look at the value's type, for a reader
    /// that knows it.
    #[inline]
    pub fn number_raw(&self, e: u32) -> Range<usize> {
        let start = self.positions[e as usize] as usize;
        start..self.number_end(e, start)
    }

    /// Where the number at entry `e`, starting at byte `start`, ends. A
    /// number ends with a digit, and only whitespace can come between it
    /// and the next entry: when the byte before that entry is a digit (the
    /// usual `1,`, `1}`), the number ends there, with no byte of it read.
    /// That test is inlined into reads; the rest is out of line.
    #[inline(always)]
    fn number_end(&self, e: u32, start: usize) -> usize {
        if let Some(&next) = self.positions.get(e as usize + 1) {
            let next = next as usize;
            if next > start && self.src.get(next - 1).is_some_and(u8::is_ascii_digit) {
                return next;
            }
        }
        self.number_end_read(start)
    }

    /// [`Tree::number_end`] read from the number's bytes: the last value
    /// of a text, or one followed by whitespace.
    #[inline(never)]
    fn number_end_read(&self, start: usize) -> usize {
        number_end(self.src, start).unwrap_or(start)
    }
}

/// The value of member `want` of the object at `obj` in a validated
/// document: the last match when `last_wins`, else the first; and whether
/// another member has the key too (found on the way: a search under
/// `last_wins` passes every member, and the other policy rejects repeats).
///
/// It steps from key to key ([`Tree::next_key`]), reading no value: what
/// makes the several reads a handler does of one wide object cheap.
///
/// With `LINK_BACK` (under `last_wins`), the walk also leaves back links
/// in the object's commas for [`find_last_key`]: the first comma's to
/// the last member's key, every other's to the key of the member before
/// it. Separators' links are free for reads to use (see
/// [`crate::index`]), and the walk passes every comma anyway.
///
/// Inlined into [`lookup::Lookup::member`], and so into the FFI's
/// member read: a small object's read is then one function, with no
/// second prologue and no arguments passed on the stack.
#[inline(always)]
pub fn find_key<const LINK_BACK: bool>(
    src: &[u8],
    positions: &[u32],
    links: &mut [u32],
    obj: u32,
    want: &[u8],
    last_wins: bool,
) -> (Option<u32>, bool) {
    let close = links[obj as usize] as usize;
    // Every entry a member reaches is at most `close`: slicing there once
    // lets the compiler drop the bounds checks of the loop.
    let positions = &positions[..=close];
    let links = &mut links[..=close];
    let first = obj as usize + 1;
    let mut key = first;
    let mut last = first;
    let mut found = None;
    let mut repeated = false;
    while key < close {
        // SAFETY: key < close, so key + 1 <= close, and both slices hold
        // close + 1 entries.
        if unsafe { key_is(src, positions, links, key, want) } {
            repeated |= found.is_some();
            found = Some(key as u32 + 3);
            if !last_wins {
                break;
            }
        }
        let Some(next) = member_end(links, key) else {
            break;
        };
        if LINK_BACK && next < close {
            // The comma before the next key.
            links[next - 1] = key as u32;
        }
        last = key;
        key = next;
    }
    if LINK_BACK && let Some(second) = second_member(links, first, close) {
        links[second - 1] = last as u32;
    }
    (found, repeated)
}

/// [`find_key`] under "last wins", for a read of an object whose commas
/// hold back links (left by a walk with `LINK_BACK`): the value of the
/// last member named `want` of the object at `obj`, found by walking its
/// members from the last (the first comma's link) back (each other
/// comma's) and stopping at the first match.
/// It visits the members after the match, where `find_key` visits them
/// all; it cannot tell whether an earlier member has the key too, which
/// only a change needs (`find_key`).
///
/// Out of line, unlike `find_key`: it serves objects of more than
/// [`lookup::BACK_LINKS_FROM`] members, whose walks are long enough to
/// pay for a call, and inlined into `Document::find` its loop kept half
/// its state on the stack.
#[inline(never)]
pub fn find_last_key(
    src: &[u8],
    positions: &[u32],
    links: &[u32],
    obj: u32,
    want: &[u8],
) -> Option<u32> {
    let close = links[obj as usize] as usize;
    let first = obj as usize + 1;
    if first >= close {
        return None;
    }
    let positions = &positions[..=close];
    let links = &links[..=close];
    // Called with first <= key < close only.
    let is_want = |key: usize| {
        // SAFETY: key < close, so key + 1 is at most close, and both
        // slices hold close + 1 entries.
        unsafe { key_is(src, positions, links, key, want) }
    };
    if let Some(second) = second_member(links, first, close) {
        // From the last member (the second member's comma) back to the
        // second, each other comma leading to the key before it. Each step
        // goes back by a member at least, and a key outside the object
        // ends the walk: it ends whatever the links hold.
        let mut key = links[second - 1] as usize;
        while key != second {
            if !(second..close).contains(&key) {
                return None;
            }
            if is_want(key) {
                return Some(key as u32 + 3);
            }
            // SAFETY: second <= key < close, so key - 1 is an entry.
            let before = unsafe { *links.get_unchecked(key - 1) } as usize;
            if before >= key {
                return None;
            }
            key = before;
        }
        if is_want(second) {
            return Some(second as u32 + 3);
        }
    }
    is_want(first).then_some(first as u32 + 3)
}

/// Whether the key at entry `key` (its quotes at `positions[key]` and
/// `positions[key + 1]`, whether it has escapes in `links[key]`) is
/// `want`: a search's compare. Only a key of the wanted length, or one
/// with escapes (which decoding shortens), can match, and its bytes are
/// compared from the entries already read.
///
/// # Safety
/// `key + 1` is an index of both `positions` and `links`.
#[inline(always)]
unsafe fn key_is(src: &[u8], positions: &[u32], links: &[u32], key: usize, want: &[u8]) -> bool {
    // SAFETY: key and key + 1 are in both slices (the caller's contract).
    let (open, shut, escaped) = unsafe {
        (
            *positions.get_unchecked(key),
            *positions.get_unchecked(key + 1),
            *links.get_unchecked(key) != 0,
        )
    };
    (escaped || (shut - open) as usize == want.len() + 1)
        && span_is(src, open as usize + 1..shut as usize, escaped, want)
}

/// Whether the string body at `span` of `src` (with escapes or not) is
/// `want` once decoded.
#[inline(always)]
fn span_is(src: &[u8], span: Range<usize>, escaped: bool, want: &[u8]) -> bool {
    // Most keys differ in length from the one wanted: no bytes read.
    let len = span.end - span.start;
    if !escaped {
        return len == want.len() && same_bytes(&src[span], want);
    }
    // Decoding never lengthens a string.
    len >= want.len() && unescaped_eq(&src[span], want)
}

/// [`Tree::next_key`] in `usize`, as [`find_key`]'s walk counts, so that
/// the bound its loop tests also covers the link it reads. A member spans
/// four entries at least: a link that leads less far (never one of
/// validation's) gives None, which ends a walk whatever the links hold.
///
/// None rather than clamping the link to four entries on: a walk's time is
/// its chain of loads from key to key, and the clamp put a conditional
/// move on that chain where the test is a branch the CPU predicts. The
/// reads of `benches/insn_loops.lua`'s `twitter-get` and `github-get`
/// (three and four keys of each of 100 statuses and 54 issues) took
/// about an eighth and a sixth less time (docs/benchmarks.md, "Walks
/// without a conditional move").
#[inline(always)]
fn member_end(links: &[u32], key: usize) -> Option<usize> {
    let next = match links[key + 1] {
        0 => links.get(key + 3).map_or(0, |&close| close as usize + 2),
        next => next as usize,
    };
    (next >= key + 4).then_some(next)
}

/// The key of the second member of the object whose first key is at
/// `first` and whose close is at `close`, or None when it has fewer than
/// two members. The comma before it, the object's first, is where a walk
/// with back links leaves the last member's key ([`find_key`]) and where
/// [`find_last_key`] starts.
#[inline(always)]
fn second_member(links: &[u32], first: usize, close: usize) -> Option<usize> {
    if first >= close {
        return None;
    }
    member_end(links, first).filter(|&second| second < close)
}

/// `a == b` for slices of equal length, without a call to `memcmp` for
/// the short ones keys mostly are (a call costs more than the compare).
/// Up to 16 bytes are two loads per side that may overlap: the first and
/// the last 8 (or 4, or 2) bytes, covering the whole slice between them.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    #[inline(always)]
    fn ends<const W: usize>(s: &[u8]) -> ([u8; W], [u8; W]) {
        let head = s[..W].try_into().expect("W bytes");
        let tail = s[s.len() - W..].try_into().expect("W bytes");
        (head, tail)
    }
    match n {
        0 => true,
        1 => a[0] == b[0],
        2..=3 => ends::<2>(a) == ends::<2>(b),
        4..=7 => ends::<4>(a) == ends::<4>(b),
        8..=16 => ends::<8>(a) == ends::<8>(b),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::{Tree, find_key, find_last_key};
    use crate::document::Document;
    use crate::index::Index;
    use crate::validate::{self, Options, Scratch};

    #[test]
    fn same_bytes_finds_a_difference_at_every_offset_of_every_length() {
        for n in 0..40 {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(super::same_bytes(&a, &a.clone()), "length {n}");
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!super::same_bytes(&a, &b), "length {n}, byte {at}");
            }
        }
    }

    #[test]
    fn raw_numbers_end_where_they_end_whatever_follows() {
        for number in [
            "0",
            "7",
            "-12",
            "3.25",
            "1e5",
            "-0.5E-3",
            "12345678901234567890",
        ] {
            for (before, after) in [
                ("[", "]"),
                ("[", ",1]"),
                ("[", " ]"),
                ("[", "\n,1]"),
                ("{\"k\":", "}"),
                ("{\"k\":", " }"),
                ("{\"k\":", ",\"j\":2}"),
                ("", ""),
                (" ", " "),
            ] {
                let text = format!("{before}{number}{after}");
                let doc = Document::parse(text.as_bytes(), &Options::default()).unwrap();
                let tree = doc.tree();
                let offset = before.len() as u32;
                let at = tree.positions.iter().position(|&p| p == offset).unwrap() as u32;
                assert_eq!(&text.as_bytes()[tree.raw(at)], number.as_bytes(), "{text}");
            }
        }
    }

    /// The index of `text` after stage 1 and validation, as a document
    /// holds it.
    fn validated(text: &[u8]) -> Index {
        let mut index = Index::default();
        crate::scan::scan(text, &mut index).unwrap();
        validate::validate(
            text,
            &mut index,
            &Options::default(),
            &mut Scratch::default(),
        )
        .unwrap();
        index
    }

    /// Every object of random texts whose keys repeat (some escaped),
    /// with values of every kind: a read from the last member finds what
    /// a walk of every member finds, for keys present and absent.
    #[test]
    fn a_read_from_the_last_member_finds_what_a_whole_walk_finds() {
        const KEYS: [&str; 6] = ["a", "b", "ab", "\\u0061", "\\u0062b", "ba"];
        const VALUES: [&str; 9] = [
            "1",
            "\"s\"",
            "[1,{\"a\":2,\"a\":5}]",
            "{\"a\":3,\"b\":[],\"a\":{}}",
            "{}",
            "[]",
            "null",
            "\"\\u0061\"",
            "{\"ab\":{\"b\":1}}",
        ];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for _ in 0..crate::testing::rounds(3000) {
            let members: Vec<String> = (0..next(12))
                .map(|_| {
                    format!(
                        "\"{}\":{}",
                        KEYS[next(KEYS.len())],
                        VALUES[next(VALUES.len())]
                    )
                })
                .collect();
            let text = format!("{{{}}}", members.join(","));
            let text = text.as_bytes();
            let mut index = validated(text);
            let positions = index.positions.clone();
            for (e, &p) in positions.iter().enumerate() {
                if text[p as usize] != b'{' {
                    continue;
                }
                // The first walk leaves the back links; it finds what a
                // walk that leaves none finds.
                let mut unlinked = index.links.clone();
                let first =
                    find_key::<false>(text, &positions, &mut unlinked, e as u32, b"a", true);
                let linking =
                    find_key::<true>(text, &positions, &mut index.links, e as u32, b"a", true);
                assert_eq!(first, linking);
                for want in [&b"a"[..], b"b", b"ab", b"bb", b"ba", b""] {
                    let whole =
                        find_key::<false>(text, &positions, &mut unlinked, e as u32, want, true);
                    let from_last = find_last_key(text, &positions, &index.links, e as u32, want);
                    assert_eq!(
                        from_last,
                        whole.0,
                        "{} at entry {e}, key {:?}",
                        String::from_utf8_lossy(text),
                        String::from_utf8_lossy(want)
                    );
                }
            }
        }
    }

    /// A read from the last member ends and stays inside its object
    /// whatever the commas' links hold.
    #[test]
    fn a_read_from_the_last_member_ends_whatever_the_links_hold() {
        let text = br#"{"a":1,"b":2,"c":3,"d":4}"#;
        let clean = validated(text);
        let close = clean.links[0];
        let commas: Vec<usize> = (0..clean.positions.len())
            .filter(|&e| text[clean.positions[e] as usize] == b',')
            .collect();
        for &comma in &commas {
            for held in [0, 1, 2, 5, 9, close - 1, close, close + 1, u32::MAX] {
                let mut links = clean.links.clone();
                links[comma] = held;
                for want in [&b"a"[..], b"d", b"z"] {
                    let found = find_last_key(text, &clean.positions, &links, 0, want);
                    assert!(found.is_none_or(|at| at < close), "{held} at {comma}");
                }
            }
        }
    }

    /// A walk from the first member, with or without leaving back links,
    /// ends whatever the link of a key's closing quote holds (a link that
    /// does not lead past its member ends it), and finds nothing outside
    /// the object.
    #[test]
    fn a_walk_from_the_first_member_ends_whatever_the_links_hold() {
        let text = br#"{"a":1,"b":{"x":2},"c":"s","d":[3]}"#;
        let clean = validated(text);
        let close = clean.links[0];
        let quotes: Vec<usize> = (1..close as usize)
            .filter(|&e| text[clean.positions[e] as usize] == b':')
            .map(|colon| colon - 1)
            .collect();
        for &quote in &quotes {
            for held in [
                0,
                1,
                2,
                quote as u32,
                quote as u32 + 2,
                close,
                close + 1,
                u32::MAX,
            ] {
                for want in [&b"a"[..], b"d", b"z"] {
                    let mut links = clean.links.clone();
                    links[quote] = held;
                    let (found, _) =
                        find_key::<false>(text, &clean.positions, &mut links, 0, want, true);
                    assert!(found.is_none_or(|at| at < close), "{held} at {quote}");
                    let (found, _) =
                        find_key::<true>(text, &clean.positions, &mut links, 0, want, true);
                    assert!(found.is_none_or(|at| at < close), "{held} at {quote}");
                }
            }
        }
    }

    #[test]
    fn a_search_under_last_wins_says_whether_its_key_repeats() {
        let text = br#"{"a":1,"b":2,"\u0061":3,"c":{"a":4}}"#;
        let mut index = validated(text);
        let positions = index.positions.clone();
        let value = |entry: Option<u32>| entry.map(|e| text[positions[e as usize] as usize]);
        // The escaped "a" is the same key, and wins; the "a" nested in
        // "c" is another object's.
        let (found, repeated) =
            find_key::<false>(text, &positions, &mut index.links, 0, b"a", true);
        assert_eq!((value(found), repeated), (Some(b'3'), true));
        let (found, repeated) =
            find_key::<false>(text, &positions, &mut index.links, 0, b"b", true);
        assert_eq!((value(found), repeated), (Some(b'2'), false));
        let (found, repeated) =
            find_key::<false>(text, &positions, &mut index.links, 0, b"c", true);
        assert_eq!((value(found), repeated), (Some(b'{'), false));
        assert_eq!(
            find_key::<false>(text, &positions, &mut index.links, 0, b"d", true),
            (None, false)
        );
    }

    #[test]
    fn searches_step_from_key_to_key_through_the_links() {
        let text =
            br#"{"a":[1,{"x":2}],"b":{"c":"\u0041"},"\u0064":"s","e":1.5,"f":null,"g":{},"h":[]}"#;
        let mut index = validated(text);
        let tree = Tree {
            src: text,
            positions: &index.positions,
            links: &index.links,
        };
        let keys: Vec<u32> = tree.keys(0).collect();
        assert_eq!(keys.len(), 7);
        let search = |index: &Index, want: &[u8], last_wins| {
            let mut links = index.links.clone();
            find_key::<false>(text, &index.positions, &mut links, 0, want, last_wins)
        };
        // An escaped key is compared decoded; a missing key passes every
        // member; a first-match search stops at its key.
        assert_eq!(search(&index, b"zz", true), (None, false));
        assert_eq!(search(&index, b"d", true), (Some(keys[2] + 3), false));
        assert_eq!(search(&index, b"h", true), (Some(keys[6] + 3), false));
        assert_eq!(search(&index, b"b", false), (Some(keys[1] + 3), false));
        // A member of one-entry or string value links to the next key; one
        // whose value is a container, to 0, its close's link leading on.
        assert_eq!(index.links[keys[2] as usize + 1], keys[3]);
        assert_eq!(index.links[keys[3] as usize + 1], keys[4]);
        assert_eq!(index.links[keys[1] as usize + 1], 0);
        assert_eq!(tree.next_key(keys[1]), Some(keys[2]));
        // The walk reads the links and no value: with the link of "b"
        // pointing at "e" (skipping "d"), "d" is not found, and "e" is.
        index.links[keys[1] as usize + 1] = keys[3];
        assert_eq!(search(&index, b"d", true), (None, false));
        assert_eq!(search(&index, b"e", true), (Some(keys[3] + 3), false));
        // A link that would step back moves on by the least a member
        // spans, so the walk ends whatever the links hold, and anything
        // it finds lies inside the object.
        index.links[keys[1] as usize + 1] = 1;
        let (found, _) = search(&index, b"h", true);
        assert!(found.is_none_or(|e| e < index.links[0]));
    }
}
