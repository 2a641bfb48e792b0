use super::*;
use crate::document::Document;
use crate::navigate::tape::{self, Item};
use crate::testing::{Rng, json_string, mutate, random_json, random_text};
use crate::validate::DuplicateKeys;

/// A decoded value, members kept in order with their repeats.
#[derive(Clone, Debug, PartialEq)]
enum V {
    Null,
    Bool(bool),
    /// A double's bits, so that -0 and 0 differ.
    Num(u64),
    Str(Vec<u8>),
    Arr(Vec<V>),
    Obj(Vec<(Vec<u8>, V)>),
}

/// What is on a [`Builder`]'s stack.
#[derive(Debug)]
enum Entry {
    Key(Vec<u8>),
    Value(V),
    /// A container's slot: nothing yet, or its table so far and the size
    /// it was made for.
    Slot(Option<(V, u32)>),
}

/// A [`Stack`] of [`V`]s that checks what it is told: chunks taken by the
/// right container, counts, sizes, `distinct` only when true.
#[derive(Default)]
struct Builder {
    strict: bool,
    items: Vec<Entry>,
    /// Tables made, and those made for a size other than their final one.
    made: usize,
    resized: usize,
    /// Give up past this many open slots.
    give_up_at: usize,
}

impl Builder {
    fn new(strict: bool) -> Builder {
        Builder {
            strict,
            give_up_at: usize::MAX,
            ..Builder::default()
        }
    }

    fn push(&mut self, v: V) -> Flow {
        self.items.push(Entry::Value(v));
        Ok(())
    }
}

impl Stack for Builder {
    fn key(&mut self, key: &[u8]) -> Flow {
        self.items.push(Entry::Key(key.to_vec()));
        Ok(())
    }
    fn string(&mut self, s: &[u8]) -> Flow {
        self.push(V::Str(s.to_vec()))
    }
    fn number(&mut self, n: f64) -> Flow {
        self.push(V::Num(n.to_bits()))
    }
    fn boolean(&mut self, b: bool) -> Flow {
        self.push(V::Bool(b))
    }
    fn null(&mut self) -> Flow {
        self.push(V::Null)
    }
    fn open(&mut self) -> Flow {
        let open = self
            .items
            .iter()
            .filter(|i| matches!(i, Entry::Slot(_)))
            .count();
        if open >= self.give_up_at {
            return Err(Stop::GiveUp);
        }
        self.items.push(Entry::Slot(None));
        Ok(())
    }
    fn store(
        &mut self,
        object: bool,
        stored: u32,
        pending: u32,
        distinct: bool,
        last: bool,
    ) -> Flow {
        let per = if object { 2 } else { 1 };
        let from = self.items.len() - per * pending as usize;
        let taken = self.items.split_off(from);
        let Some(Entry::Slot(slot)) = self.items.last_mut() else {
            panic!("no slot below {taken:?}");
        };
        let (mut table, size) = match slot.take() {
            None => {
                assert_eq!(stored, 0);
                self.made += 1;
                let v = if object {
                    V::Obj(vec![])
                } else {
                    V::Arr(vec![])
                };
                (v, if last { pending } else { 2 * pending })
            }
            Some(t) => t,
        };
        match &mut table {
            V::Arr(items) => {
                assert!(!object);
                assert_eq!(items.len(), stored as usize);
                for item in taken {
                    let Entry::Value(v) = item else {
                        panic!("not a value: {item:?}")
                    };
                    items.push(v);
                }
            }
            V::Obj(members) => {
                assert!(object);
                assert_eq!(members.len(), stored as usize);
                let chunk_from = members.len();
                let mut taken = taken.into_iter();
                while let (Some(Entry::Key(k)), Some(Entry::Value(v))) =
                    (taken.next(), taken.next())
                {
                    if distinct {
                        assert!(
                            members[chunk_from..].iter().all(|(m, _)| *m != k),
                            "{k:?} repeats"
                        );
                    }
                    if self.strict && members.iter().any(|(m, _)| *m == k) {
                        return Err(Stop::Invalid);
                    }
                    members.push((k, v));
                }
                assert_eq!(members.len(), (stored + pending) as usize);
            }
            v => panic!("slot holds {v:?}"),
        }
        if last {
            let len = match &table {
                V::Arr(a) => a.len(),
                V::Obj(m) => m.len(),
                _ => unreachable!(),
            };
            self.resized += usize::from(len as u32 != size);
            self.items.pop();
            self.items.push(Entry::Value(table));
        } else {
            *self.items.last_mut().expect("the slot") = Entry::Slot(Some((table, size)));
        }
        Ok(())
    }
}

/// The value the tape of a parsed document describes.
fn from_tape(items: &mut core::slice::Iter<'_, Item>) -> V {
    let item = items.next().expect("an item");
    // SAFETY: each payload field is read for the type that wrote it;
    // string pointers point into the text or the arena, both alive.
    let bytes = |i: &Item| unsafe { core::slice::from_raw_parts(i.payload.str_, i.len as usize) };
    match item.type_ {
        1 => V::Null,
        2 => V::Bool(false),
        3 => V::Bool(true),
        // SAFETY: a number item's payload is its value.
        4 => V::Num(unsafe { item.payload.num }.to_bits()),
        5 => V::Str(bytes(item).to_vec()),
        6 => V::Arr((0..item.len).map(|_| from_tape(items)).collect()),
        7 => V::Obj(
            (0..item.len)
                .map(|_| {
                    let key = bytes(items.next().expect("a key")).to_vec();
                    (key, from_tape(items))
                })
                .collect(),
        ),
        t => panic!("type {t}"),
    }
}

/// What `Document` makes of `text`: its value, or None when invalid.
fn reference(text: &[u8], opts: &Options) -> Option<V> {
    let doc = Document::parse(text, opts).ok()?;
    let (mut items, mut arena) = (Vec::new(), Vec::new());
    tape::build(&doc.tree(), 0, &mut items, &mut arena);
    Some(from_tape(&mut items.iter()))
}

/// Decodes `text`: the value, or None when invalid; and the tables made
/// and those made for another size than their final one.
fn eager(text: &[u8], opts: &Options) -> (Option<V>, usize, usize) {
    let mut b = Builder::new(opts.duplicate_keys == DuplicateKeys::Error);
    let mut scratch = Scratch::default();
    match decode(text, opts, &mut scratch, &mut b) {
        Outcome::Done => {
            assert_eq!(b.items.len(), 1, "{:?}", b.items);
            let Some(Entry::Value(v)) = b.items.pop() else {
                panic!("no value")
            };
            (Some(v), b.made, b.resized)
        }
        Outcome::Invalid => (None, b.made, b.resized),
        Outcome::GiveUp => panic!("gave up"),
    }
}

/// Holds eager decode to `Document` on `text`; returns whether the text
/// is valid.
fn agrees(text: &[u8], opts: &Options) -> bool {
    let want = reference(text, opts);
    let (got, _, _) = eager(text, opts);
    assert!(
        got == want,
        "{opts:?}: {:?}\n got {got:?}\nwant {want:?}",
        String::from_utf8_lossy(text)
    );
    want.is_some()
}

/// The texts a test held to validation with [`agrees`] under the default
/// options, valid and invalid: for tests that must have seen both.
#[derive(Default)]
struct Tally {
    valid: usize,
    invalid: usize,
}

impl Tally {
    /// Holds eager decode to validation on `text` and counts it.
    fn check(&mut self, text: &[u8]) {
        if agrees(text, &Options::default()) {
            self.valid += 1;
        } else {
            self.invalid += 1;
        }
    }

    /// Fails unless more than `valid` valid and `invalid` invalid texts
    /// were checked.
    fn assert_at_least(&self, valid: usize, invalid: usize) {
        assert!(
            self.valid > valid && self.invalid > invalid,
            "{} valid, {} invalid",
            self.valid,
            self.invalid
        );
    }
}

fn strict() -> Options {
    Options {
        duplicate_keys: DuplicateKeys::Error,
        ..Options::default()
    }
}

#[test]
fn decodes_what_the_tape_describes() {
    for text in [
        r#"{"a":[1,"x\n"],"b\u0021":null,"a":-2.5e1}"#,
        "[]",
        "{}",
        " [ [ ] , { } , [ [ ] ] ] ",
        r#" "\u00e9" "#,
        "[true,false,null,0,-0,1e400,-1e400,0.1,123456789012345678901234567890]",
        "7",
        "  null  ",
        "-0",
        "[-12345678901234567, 0.5, 1E2, 100000000000000000000]",
    ] {
        assert!(agrees(text.as_bytes(), &Options::default()), "{text}");
    }
}

#[test]
fn rejects_what_validation_rejects() {
    for text in [
        "",
        " ",
        "[",
        "]",
        "[1,]",
        "[,1]",
        "{,}",
        r#"{"a"}"#,
        r#"{"a":}"#,
        r#"{"a" 1}"#,
        r#"{"a":1,}"#,
        "[1 2]",
        "1 2",
        "[1]]",
        "[[1]",
        "01",
        "1.",
        "-",
        "1e",
        "tru",
        "nul",
        "truex",
        "[1x]",
        r#""\x""#,
        r#""\ud800""#,
        r#"["a"]x"#,
        "{1:2}",
        r#"{"a":1 "b":2}"#,
        "[\"\u{1}\"]",
        "\"abc",
        "[\x00]",
        r#"{"a":1}}"#,
        "[}",
        "{]",
        "\"\\",
        "[1,\x0c2]",
    ] {
        assert_eq!(
            eager(text.as_bytes(), &Options::default()).0,
            None,
            "{text:?}"
        );
        assert!(
            reference(text.as_bytes(), &Options::default()).is_none(),
            "{text:?}"
        );
    }
    for bad in [
        &b" \xff1"[..],
        b"\"\xc3\"",
        b"[\"\xed\xa0\x80\"]",
        b"\"\\\xc3\xa9\"",
    ] {
        assert_eq!(eager(bad, &Options::default()).0, None);
        assert!(reference(bad, &Options::default()).is_none());
    }
}

#[test]
fn depth_and_duplicate_keys_follow_the_options() {
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    // Under Miri up to 64: the limit is the same code as at 1000.
    for &depth in crate::testing::sizes(&[1, 2, 5, 64, 1000], 4) {
        let opts = Options {
            max_depth: depth,
            ..Options::default()
        };
        for n in [depth as usize - 1, depth as usize, depth as usize + 1] {
            agrees(nested(n).as_bytes(), &opts);
            agrees(
                format!("{}{}", "[".repeat(n), "]".repeat(n)).as_bytes(),
                &opts,
            );
        }
    }
    for text in [
        r#"{"a":1,"a":2}"#,
        r#"{"a":1,"\u0061":2}"#,
        r#"[{"a":1},{"a":2}]"#,
        r#"{"a":{"a":{}},"b":[{"x":1,"y":2,"x":3}]}"#,
    ] {
        agrees(text.as_bytes(), &Options::default());
        agrees(text.as_bytes(), &strict());
    }
}

#[test]
fn agrees_with_validation_on_generated_and_mutated_texts() {
    let mut rng = Rng::new(0xea9e);
    let mut valid = [0; 4];
    for round in 0..20_000 {
        let doc = random_json(&mut rng, 5);
        let text = match round % 4 {
            0 => doc,
            3 => random_text(&mut rng, 200),
            _ => mutate(&mut rng, &doc),
        };
        let opts = match round % 5 {
            0 => strict(),
            1 => Options {
                max_depth: 3,
                ..Options::default()
            },
            _ => Options::default(),
        };
        valid[round % 4] += usize::from(agrees(&text, &opts));
    }
    // Generated texts are valid (but for the depth limit), mutated ones
    // about half the time, random ones rarely.
    assert!(
        valid[0] > 3000 && (1000..4000).contains(&valid[1]),
        "{valid:?}"
    );
}

#[test]
fn a_text_broken_at_every_offset_is_refused_as_validation_refuses_it() {
    let mut rng = Rng::new(7);
    let mut text = b"[".to_vec();
    for k in 0..60 {
        if k > 0 {
            text.extend_from_slice(b", ");
        }
        match k % 4 {
            0 => json_string(&mut rng, &mut text),
            1 => text.extend_from_slice(b"{\"k\\u00e9y\" : [1.5e3, -0, true] }"),
            2 => text.extend_from_slice("\"日本語😀\\\\\\\"\"".as_bytes()),
            _ => text.extend_from_slice(b"123456789.125e-2"),
        }
    }
    text.push(b']');
    assert!(agrees(&text, &Options::default()));
    // Under Miri, every 97th offset: each is a dozen parses of the text.
    let step = if cfg!(miri) { 97 } else { 1 };
    for at in (0..text.len()).step_by(step) {
        for byte in [b'\x01', b'"', b'\\', b'}', 0xc3] {
            let mut bad = text.clone();
            bad.insert(at, byte);
            agrees(&bad, &Options::default());
        }
        agrees(&text[..at], &Options::default());
    }
}

#[test]
fn long_containers_are_stored_in_chunks() {
    let mut rng = Rng::new(11);
    // Under Miri the sizes around one and two chunks.
    for &n in crate::testing::sizes(&[63, 64, 65, 127, 128, 129, 1000], 6) {
        let array = format!(
            "[{}]",
            (0..n).map(|k| k.to_string()).collect::<Vec<_>>().join(",")
        );
        let (v, made, resized) = eager(array.as_bytes(), &Options::default());
        assert_eq!(v, reference(array.as_bytes(), &Options::default()));
        // Made for its size in one chunk, for two chunks at the first.
        let size = if n > CHUNK as usize {
            2 * CHUNK as usize
        } else {
            n
        };
        assert_eq!((made, resized), (1, usize::from(n != size)), "{n}");
        // Objects, with keys repeated across and within chunks.
        let members: Vec<String> = (0..n)
            .map(|k| {
                let key = if rng.one_in(8) { rng.below(n) } else { k };
                format!("\"k{key}\":{k}")
            })
            .collect();
        let object = format!("{{{}}}", members.join(","));
        agrees(object.as_bytes(), &Options::default());
        agrees(object.as_bytes(), &strict());
        let nested = format!("[{}]", [object.as_str(); 3].join(","));
        agrees(nested.as_bytes(), &Options::default());
    }
}

#[test]
fn every_container_of_a_chunk_is_made_at_its_size() {
    // Fewer under Miri, which interprets every step; a chunk is 64.
    let n = if cfg!(miri) { 500 } else { 5000 };
    let text = format!("[{}{{\"a\":1}}]", "{\"a\":1,\"b\":[1,2]},".repeat(n));
    let (v, made, resized) = eager(text.as_bytes(), &Options::default());
    assert!(v.is_some());
    // The root alone is longer than a chunk.
    assert_eq!((made, resized), (2 * n + 2, 1));
}

#[test]
fn a_sink_may_give_up() {
    let mut b = Builder::new(false);
    b.give_up_at = 3;
    let mut scratch = Scratch::default();
    let outcome = decode(b"[[[[1]]]]", &Options::default(), &mut scratch, &mut b);
    assert_eq!(outcome, Outcome::GiveUp);
}

#[test]
fn numbers_are_the_parsers() {
    // The walk reads short integers itself and gives the rest to
    // number::to_f64 (whose own tests cover its fast path).
    let mut rng = Rng::new(99);
    for _ in 0..crate::testing::rounds(50_000) {
        let s = crate::testing::random_number(&mut rng, 3, 4);
        for text in [s.clone(), format!("[{s}]"), format!("{{\"k\":{s} }}")] {
            assert!(agrees(text.as_bytes(), &Options::default()), "{text}");
        }
    }
}

#[test]
fn strings_of_every_length_around_the_simd_check_agree_on_utf8() {
    // Bodies of 1 to 140 bytes (short ones go to core::str::from_utf8,
    // long ones to the SIMD checker) of 3-byte characters, each with a bad
    // or cut sequence at every position, as a value and as a key.
    let bad: [&[u8]; 4] = [b"\xe3\x81", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"];
    for chars in 1..=46 {
        let good = "あ".repeat(chars).into_bytes();
        for text in [
            [&b"[\""[..], &good, b"\"]"].concat(),
            [&b"{\""[..], &good, b"\":1}"].concat(),
        ] {
            assert!(agrees(&text, &Options::default()));
        }
        for at in 0..=good.len() {
            for b in bad {
                let body = [&good[..at], b, &good[at..]].concat();
                let text = [&b"[\""[..], &body, b"\"]"].concat();
                assert!(!agrees(&text, &Options::default()));
            }
        }
    }
}

#[test]
fn escapes_agree_with_validation_at_every_offset_around_the_chunks() {
    // Each escape, valid or not, at every offset of strings and keys that
    // straddle the 16-byte chunks the string search reads, alone and
    // followed by another (a `\uXXXX`-escaped text is dense with them) or
    // by bad UTF-8, and cut short by the end of the text.
    let escapes: [&[u8]; 15] = [
        br"\n",
        br#"\""#,
        br"\\",
        br"\/",
        br"\u00e9",
        br"\u4E2D",
        br"\ud83d\ude00",
        br"\u0000",
        br"\x",
        br"\ud800",
        br"\udc00",
        br"\ud800\u0041",
        br"\u12",
        br"\u12G4",
        "é".as_bytes(),
    ];
    let after: [&[u8]; 5] = [b"", br"\u4e2d", br"\t", b"\xff", b"\xe4\xb8\xad\xe4\xb8"];
    let mut tally = Tally::default();
    for len in 0..36 {
        for first in escapes {
            for second in after {
                for at in (0..=len).step_by(if len > 20 { 3 } else { 1 }) {
                    let mut body = vec![b'a'; at];
                    body.extend_from_slice(first);
                    body.extend_from_slice(second);
                    body.resize(body.len() + len - at, b'b');
                    let join = |parts: &[&[u8]]| parts.concat();
                    for text in [
                        join(&[
                            b"[\"",
                            &body,
                            b"\",{\"",
                            &body,
                            b"\":1,\"k\":\"",
                            &body,
                            b"\"}]",
                        ]),
                        join(&[b"{\"", &body]),
                        join(&[b"[\"", &body]),
                    ] {
                        tally.check(&text);
                    }
                }
            }
        }
    }
    tally.assert_at_least(1000, 1000);
}

#[test]
fn runs_of_escapes_decode_as_validation_and_reads_do() {
    // Runs of `\uXXXX` from U+0800 (decoded by groups of four, in calls
    // of a few groups: `decode_bmp_run`) of every length past a few
    // calls, broken at every place by another escape, plain text, a
    // character below U+0800 or a bad escape.
    let breaks: [&[u8]; 5] = [br"\n", b"ab", br"\u00e9", br"\ud83d\ude00", br"\u12G4"];
    let mut tally = Tally::default();
    for len in 0..80 {
        let run: Vec<u8> = (0..len)
            .flat_map(|k| format!("\\u{:04x}", 0x4e00 + k * 37).into_bytes())
            .collect();
        tally.check(&[b"[\"", &run[..], b"\"]"].concat());
        for at in (0..len).step_by(7) {
            for brk in breaks {
                let mut body = run.clone();
                body.splice(6 * at..6 * at, brk.iter().copied());
                tally.check(&[b"{\"k\":\"", &body[..], b"\"}"].concat());
            }
        }
    }
    tally.assert_at_least(1000, 50);
}

#[test]
fn long_strings_end_where_validation_ends_them() {
    // Strings long enough for the SIMD kernel's blocks (up to a few of its
    // four-block runs), of plain ASCII or with a character from 0x80,
    // ended at offsets spread over the blocks by their quote, an escape, a
    // control byte, bad UTF-8 or the end of the text, as values and as
    // keys (two alignments in the text).
    let enders: [&[u8]; 7] = [
        b"",
        br"\n",
        br"\u00e9",
        b"\x01",
        b"\xff",
        "\u{e9}".as_bytes(),
        b"\t",
    ];
    let mut tally = Tally::default();
    for len in (60..=600).step_by(7) {
        for ender in enders {
            for wide in [false, true] {
                let mut body = vec![b'A'; len];
                if wide {
                    body[len / 3] = 0xc3;
                    body[len / 3 + 1] = 0xa9;
                }
                let at = len - (len * 7919) % 61;
                body.splice(at..at, ender.iter().copied());
                for text in [
                    [&b"[\""[..], &body, b"\"]"].concat(),
                    [&b"{\"k\":1, \""[..], &body, b"\":1}"].concat(),
                    [&b"[\""[..], &body].concat(),
                ] {
                    tally.check(&text);
                }
            }
        }
    }
    tally.assert_at_least(500, 1500);
}

#[test]
fn escaped_strings_of_every_length_decode_over_the_room_of_longer_ones() {
    // The decoded bytes of each string with escapes go over the room the
    // strings before it left (`make_room`): strings of falling and rising
    // lengths in one text, each with an escape at its start and one a
    // few chunks on, so that each copies chunks past the next one's end;
    // and one that goes on for many chunks after its first escape (its
    // run handed to the SIMD kernel), then has another.
    let escaped = |len: usize| -> Vec<u8> {
        let mut body = br"\t".to_vec();
        body.extend((0..len).map(|k| b'a' + (k % 26) as u8));
        body.splice(body.len() / 2..body.len() / 2, *br"\u00e9\n");
        [&b"\""[..], &body, b"\""].concat()
    };
    let lengths: Vec<usize> = (0..70)
        .rev()
        .chain(0..70)
        .chain([4000, 3, 700, 1])
        .collect();
    let mut text = b"[".to_vec();
    for (k, &len) in lengths.iter().enumerate() {
        if k > 0 {
            text.push(b',');
        }
        text.extend_from_slice(&escaped(len));
    }
    text.push(b']');
    assert!(agrees(&text, &Options::default()));
    let keyed: Vec<u8> = lengths
        .iter()
        .enumerate()
        .flat_map(|(k, &len)| [&b","[..(k > 0) as usize], &escaped(len), b":0"].concat())
        .collect();
    assert!(agrees(
        &[&b"{"[..], &keyed, b"}"].concat(),
        &Options::default()
    ));
}
