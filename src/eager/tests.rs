use super::walk::number_value;
use super::*;
use crate::document::Document;
use crate::navigate::tape::{self, Item};
use crate::testing::{Rng, json_string, mutate, random_json, random_text};
use crate::validate::DuplicateKeys;
use crate::values::number;

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

/// A sink that builds [`V`]s and checks what it is told: slots in order,
/// counts, and every size hint (when given) equal to the final count.
#[derive(Default)]
struct Builder {
    strict: bool,
    /// Open containers: the value, its hint, a key waiting for its value.
    open: Vec<(V, u32, Option<Vec<u8>>)>,
    root: Option<V>,
    /// Containers opened, and those opened without a hint.
    opened: usize,
    no_size: usize,
    /// Give up past this depth.
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

    fn place(&mut self, v: V, slot: Slot) -> Flow {
        match (slot, self.open.last_mut()) {
            (Slot::Root, None) => {
                assert!(self.root.is_none());
                self.root = Some(v);
            }
            (Slot::Element(n), Some((V::Arr(items), _, None))) => {
                assert_eq!(n as usize, items.len() + 1);
                items.push(v);
            }
            (Slot::Member, Some((V::Obj(members), _, key))) => {
                let key = key.take().expect("a key before the value");
                if self.strict && members.iter().any(|(k, _)| *k == key) {
                    return Err(Stop::Invalid);
                }
                members.push((key, v));
            }
            (slot, top) => panic!("value for {slot:?} placed in {top:?}"),
        }
        Ok(())
    }
}

impl Sink for Builder {
    fn open(&mut self, object: bool, hint: u32) -> Flow {
        if self.open.len() >= self.give_up_at {
            return Err(Stop::GiveUp);
        }
        self.opened += 1;
        self.no_size += usize::from(hint == 0);
        let v = if object {
            V::Obj(vec![])
        } else {
            V::Arr(vec![])
        };
        self.open.push((v, hint, None));
        Ok(())
    }
    fn close(&mut self, object: bool, count: u32, slot: Slot) -> Flow {
        let (v, hint, key) = self.open.pop().expect("an open container");
        assert!(key.is_none());
        let len = match &v {
            V::Obj(m) if object => m.len(),
            V::Arr(a) if !object => a.len(),
            _ => panic!("closed {v:?} as object: {object}"),
        };
        assert_eq!(count as usize, len);
        assert!(hint == 0 || hint == count, "hint {hint} for {count}");
        self.place(v, slot)
    }
    fn key(&mut self, key: &[u8]) -> Flow {
        let top = self.open.last_mut().expect("an object");
        assert!(matches!(top.0, V::Obj(_)) && top.2.is_none());
        top.2 = Some(key.to_vec());
        Ok(())
    }
    fn string(&mut self, s: &[u8], slot: Slot) -> Flow {
        self.place(V::Str(s.to_vec()), slot)
    }
    fn number(&mut self, n: f64, slot: Slot) -> Flow {
        self.place(V::Num(n.to_bits()), slot)
    }
    fn boolean(&mut self, b: bool, slot: Slot) -> Flow {
        self.place(V::Bool(b), slot)
    }
    fn null(&mut self, slot: Slot) -> Flow {
        self.place(V::Null, slot)
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

/// Decodes `text` with windows of `window` bytes; the value, or None when
/// invalid. Also returns the containers opened and those without a hint.
fn eager(text: &[u8], opts: &Options, window: usize) -> (Option<V>, usize, usize) {
    let mut b = Builder::new(opts.duplicate_keys == DuplicateKeys::Error);
    let mut scratch = Scratch::default();
    match decode(text, opts, window, &mut scratch, &mut b) {
        Outcome::Done => {
            assert!(b.open.is_empty());
            (Some(b.root.expect("a root value")), b.opened, b.no_size)
        }
        Outcome::Invalid => (None, b.opened, b.no_size),
        Outcome::GiveUp => panic!("gave up"),
    }
}

const WINDOWS: [usize; 6] = [64, 65, 100, 127, 1000, WINDOW];

/// Holds eager decode to `Document` on `text` for every window size;
/// returns whether the text is valid.
fn agrees(text: &[u8], opts: &Options) -> bool {
    let want = reference(text, opts);
    for window in WINDOWS {
        let (got, _, _) = eager(text, opts, window);
        assert!(
            got == want,
            "window {window}, {opts:?}: {:?}\n got {got:?}\nwant {want:?}",
            String::from_utf8_lossy(text)
        );
    }
    want.is_some()
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
    ] {
        agrees(text.as_bytes(), &Options::default());
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
    ] {
        for window in WINDOWS {
            let (got, _, _) = eager(text.as_bytes(), &Options::default(), window);
            assert_eq!(got, None, "{text:?}");
        }
        assert!(reference(text.as_bytes(), &Options::default()).is_none());
    }
    assert_eq!(eager(&[b' ', 0xff, b'1'], &Options::default(), 64).0, None);
}

#[test]
fn depth_and_duplicate_keys_follow_the_options() {
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    for depth in [1, 2, 5, 64, 1000] {
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
    for round in 0..6000 {
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
        valid[0] > 1000 && (300..1200).contains(&valid[1]),
        "{valid:?}"
    );
}

#[test]
fn windows_cut_between_every_pair_of_bytes() {
    // Long strings, escapes, multi-byte characters and numbers laid so
    // that every window of 64 to 200 bytes ends somewhere new.
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
    let want = reference(&text, &Options::default());
    assert!(want.is_some());
    for window in 64..200 {
        assert_eq!(
            eager(&text, &Options::default(), window).0,
            want,
            "window {window}"
        );
    }
    // Broken at every position: never accepted where validation refuses.
    for at in (0..text.len()).step_by(7) {
        let mut bad = text.clone();
        bad.insert(at, b'\x01');
        let want = reference(&bad, &Options::default());
        for window in [64, 77, 128] {
            assert_eq!(eager(&bad, &Options::default(), window).0, want, "at {at}");
        }
    }
}

#[test]
fn long_strings_and_whitespace_grow_the_window() {
    let long = format!("[\"{}\",{}1]", "x".repeat(5000), " ".repeat(3000));
    agrees(long.as_bytes(), &Options::default());
    agrees(
        format!("\"{}\"", "y".repeat(3000)).as_bytes(),
        &Options::default(),
    );
    agrees(
        format!("{}7{}", " ".repeat(1000), " ".repeat(1000)).as_bytes(),
        &Options::default(),
    );
}

#[test]
fn containers_inside_a_window_get_their_size() {
    let text = format!("[{}{{\"a\":1}}]", "{\"a\":1},".repeat(5000));
    let (v, opened, no_size) = eager(text.as_bytes(), &Options::default(), 1024);
    assert!(v.is_some());
    assert_eq!(opened, 5002);
    // The root, and an object cut at most once per window.
    assert!(
        no_size < 2 + 2 * text.len() / 1024,
        "{no_size} without a size"
    );
    let (_, opened, no_size) = eager(text.as_bytes(), &Options::default(), WINDOW);
    assert_eq!((opened, no_size), (5002, 0));
}

#[test]
fn a_sink_may_give_up() {
    let mut b = Builder::new(false);
    b.give_up_at = 3;
    let mut scratch = Scratch::default();
    let outcome = decode(
        b"[[[[1]]]]",
        &Options::default(),
        WINDOW,
        &mut scratch,
        &mut b,
    );
    assert_eq!(outcome, Outcome::GiveUp);
}

#[test]
fn stage1_keeps_the_entries_before_an_unterminated_string() {
    // scan_window relies on it to cut before a string a window ends in
    // (and scans again without it otherwise).
    let mut index = Index::default();
    let err = scan::scan(br#"{"a": [1, "bc"], "d": "ef"#, &mut index).unwrap_err();
    assert_eq!(err.code, ErrorCode::UnterminatedString);
    assert_eq!(index.positions.last(), Some(&(err.offset as u32)));
    assert_eq!(index.positions.len(), 15);
}

#[test]
fn number_values_are_the_parsers() {
    let mut rng = Rng::new(99);
    let digits = |rng: &mut Rng, most: usize| -> String {
        let n = 1 + rng.below(most);
        (0..n)
            .map(|_| char::from(b'0' + rng.below(10) as u8))
            .collect()
    };
    for _ in 0..200_000 {
        let mut s = String::new();
        if rng.one_in(2) {
            s.push('-');
        }
        let int = digits(&mut rng, 20);
        s.push_str(if int.len() > 1 {
            int.trim_start_matches('0')
        } else {
            &int
        });
        if s.is_empty() || s == "-" {
            s.push('0');
        }
        if rng.one_in(2) {
            s.push('.');
            s.push_str(&digits(&mut rng, 20));
        }
        if rng.one_in(3) {
            s.push(rng.pick(&['e', 'E']));
            if rng.one_in(2) {
                s.push(rng.pick(&['+', '-']));
            }
            s.push_str(&digits(&mut rng, 3));
        }
        let s = s.as_bytes();
        assert!(number::number_end(s, 0) == Some(s.len()), "{s:?}");
        assert_eq!(
            number_value(s).to_bits(),
            number::to_f64(s).to_bits(),
            "{}",
            String::from_utf8_lossy(s)
        );
    }
    for s in [
        "0",
        "-0",
        "9007199254740993",
        "9007199254740992",
        "1e22",
        "1e23",
        "0.1",
        "-0e5",
    ] {
        assert_eq!(
            number_value(s.as_bytes()).to_bits(),
            number::to_f64(s.as_bytes()).to_bits()
        );
    }
}
