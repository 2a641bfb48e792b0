//! Differential test against `serde_json`, an independent and widely used
//! strict parser: the same texts go to both, and they must agree on
//! accept/reject and, for accepted texts, on every value, type, length,
//! object key set and number.
//!
//! The texts are generated from a fixed seed: edge-case numbers (-0,
//! 1e400, 1e-400, 2^53±1, the i64/u64 limits and beyond, 10 000 digits,
//! leading zeros), unicode and escapes (surrogate pairs, lone surrogates,
//! invalid escapes, raw control and invalid UTF-8 bytes), deep and wide
//! containers, repeated keys, plus small mutations of all of these (the
//! mutator and the general generator are the unit tests' own, from
//! `src/testing.rs`).
//!
//! Where the two differ by design (see `docs/reliability.md`):
//! * numbers beyond the double range: serde_json rejects the text
//!   ("number out of range"), qjson accepts it and reads ±infinity;
//! * nesting deeper than qjson's default limit of 1000: qjson rejects, serde_json
//!   (its own limit of 128 switched off) accepts;
//! * integers written with a fraction or exponent (`1.0`, `2.5e1`): serde
//!   makes them floats, `qjson_get_i64` reads them exactly.
//!
//! serde_json keeps the last of repeated keys, like qjson's default
//! policy, so key sets and values compare directly; the `error` policy
//! must reject exactly the texts where an object has more members than
//! serde_json's map has keys.

use qjson::document::Document;
use qjson::error::ErrorCode;
use qjson::navigate::ValueType;
use qjson::validate::{DuplicateKeys, Options};
use serde::Deserialize;
use serde_json::{Number, Value};

// The unit tests' generator and mutator; their `crate::error` is ours.
use qjson::error;
#[allow(dead_code)]
#[path = "../src/testing.rs"]
mod testing;

use testing::{Rng, mutate, random_json};

/// How many generated texts, and mutations of each.
const TEXTS: usize = 2500;
const MUTATIONS: usize = 2;

const EDGE_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-0.0",
    "0e0",
    "-0E-0",
    "1e400",
    "-1e400",
    "1e-400",
    "-1e-400",
    "4.9e-324",
    "2.4703282292062328e-324",
    "2.2250738585072011e-308",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "1.7976931348623159e308",
    "9007199254740991",
    "9007199254740992",
    "9007199254740993",
    "-9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "-18446744073709551616",
    "123456789012345678901234567890",
    "0.30000000000000004",
    "1.0",
    "2.5e1",
    "1E+2",
    "1e-2",
    "100e-2",
    "01",
    "-01",
    "00",
    "1.",
    ".1",
    "+1",
    "1e",
    "1e+",
    "-",
    "--1",
    "0x10",
    "NaN",
    "Infinity",
    "1.5e0001",
];

/// A number: an edge case, a long digit string, or random digits with a
/// random exponent.
fn number(rng: &mut Rng, out: &mut Vec<u8>) {
    match rng.below(4) {
        0 | 1 => out.extend_from_slice(rng.pick(EDGE_NUMBERS).as_bytes()),
        2 => {
            if rng.one_in(2) {
                out.push(b'-');
            }
            out.push(b'1' + rng.below(9) as u8);
            let n = rng.pick(&[20, 400, 10_000]);
            out.extend((0..n).map(|_| b'0' + rng.below(10) as u8));
            if rng.one_in(2) {
                out.extend_from_slice(format!("e-{}", rng.below(10_400)).as_bytes());
            }
        }
        _ => {
            if rng.one_in(2) {
                out.push(b'-');
            }
            out.push(b'1' + rng.below(9) as u8);
            out.extend((0..rng.below(19)).map(|_| b'0' + rng.below(10) as u8));
            if rng.one_in(2) {
                out.push(b'.');
                out.extend((0..1 + rng.below(19)).map(|_| b'0' + rng.below(10) as u8));
            }
            if rng.one_in(2) {
                let e = rng.below(700) as i64 - 350;
                out.extend_from_slice(format!("{}{e}", rng.pick(&["e", "E"])).as_bytes());
            }
        }
    }
}

/// A string heavy in escapes and non-ASCII text, sometimes broken.
fn string(rng: &mut Rng, out: &mut Vec<u8>) {
    out.push(b'"');
    for _ in 0..rng.below(8) {
        match rng.below(12) {
            0 => {
                let c = char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('\u{FFFD}');
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            }
            1 => {
                let c = rng.below(0x1_0000);
                if !(0xD800..0xE000).contains(&c) {
                    out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
                }
            }
            2 => {
                let c = 0x1_0000 + rng.below(0x10_0000) as u32;
                let (hi, lo) = (0xD800 + ((c - 0x1_0000) >> 10), 0xDC00 + (c & 0x3FF));
                out.extend_from_slice(format!("\\u{hi:04X}\\u{lo:04x}").as_bytes());
            }
            3 => out.extend_from_slice(rng.pick(&[
                &b"\\n"[..],
                b"\\\"",
                b"\\\\",
                b"\\/",
                b"\\b",
                b"\\f",
                b"\\r",
                b"\\t",
                b"\\u0000",
                b"\\u001f",
            ])),
            4 if rng.one_in(6) => out.extend_from_slice(rng.pick(&[
                // Broken: lone or reversed surrogates, bad escapes, raw
                // control characters, bytes that are not UTF-8.
                &b"\\ud800"[..],
                b"\\udc00",
                b"\\udc00\\ud800",
                b"\\ud800\\u0041",
                b"\\ud800\\n",
                b"\\x41",
                b"\\u12",
                b"\\U0041",
                b"\\u00g0",
                b"\\'",
                b"\x01",
                b"\x1f",
                b"\xc3",
                b"\xed\xa0\x80",
                b"\xf4\x90\x80\x80",
                b"\xc0\xaf",
                b"\xff",
            ])),
            _ => out.extend_from_slice(
                rng.pick(&["a", "key", "é", "日本", "😀", "\u{7f}", " "])
                    .as_bytes(),
            ),
        }
    }
    out.push(b'"');
}

/// A value of at most `depth` levels.
fn value(rng: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    match rng.below(if depth == 0 { 4 } else { 7 }) {
        0 => number(rng, out),
        1 => string(rng, out),
        2 => out.extend_from_slice(rng.pick(&[&b"true"[..], b"false", b"null"])),
        3 => out.extend_from_slice(rng.pick(&[&b"0"[..], b"\"\"", b"[]", b"{}"])),
        4 => {
            out.push(b'[');
            let n = if rng.one_in(20) { 1000 } else { rng.below(5) };
            for i in 0..n {
                if i > 0 {
                    out.push(b',');
                }
                value(rng, if n > 10 { 0 } else { depth - 1 }, out);
            }
            out.push(b']');
        }
        _ => {
            out.push(b'{');
            for i in 0..rng.below(6) {
                if i > 0 {
                    out.extend_from_slice(rng.pick(&[&b","[..], b" , "]));
                }
                // Few distinct keys, some spelled with escapes: repeats
                // (equal only after decoding) are common.
                if rng.one_in(3) {
                    string(rng, out);
                } else {
                    let key: &[u8] = rng.pick(&[
                        &b"\"a\""[..],
                        b"\"\\u0061\"",
                        b"\"b\"",
                        b"\"\"",
                        b"\"\\ud83d\\ude00\"",
                        "\"😀\"".as_bytes(),
                    ]);
                    out.extend_from_slice(key);
                }
                out.push(b':');
                value(rng, depth - 1, out);
            }
            out.push(b'}');
        }
    }
}

/// A nest of `levels` arrays and objects around a small value.
fn deep(rng: &mut Rng, levels: usize) -> Vec<u8> {
    let kinds: Vec<bool> = (0..levels).map(|_| rng.one_in(2)).collect();
    let mut out = Vec::new();
    for &object in &kinds {
        out.extend_from_slice(if object { b"{\"k\":" } else { b"[" });
    }
    value(rng, 1, &mut out);
    for &object in kinds.iter().rev() {
        out.push(if object { b'}' } else { b']' });
    }
    out
}

/// The generated texts: a mix of every family, then mutations of each.
fn texts() -> Vec<Vec<u8>> {
    let mut rng = Rng::new(0x5e7d_e500);
    let mut texts = Vec::new();
    for i in 0..TEXTS {
        let text = match i % 10 {
            0 => random_json(&mut rng, 4),
            1 => {
                let levels = rng.pick(&[127, 128, 129, 999, 1000, 1001, 1100]);
                deep(&mut rng, levels)
            }
            _ => {
                let mut out = Vec::new();
                value(&mut rng, 4, &mut out);
                out
            }
        };
        for _ in 0..MUTATIONS {
            texts.push(mutate(&mut rng, &text));
        }
        texts.push(text);
    }
    texts
}

/// serde_json's reading of `text`, with its recursion limit off so only
/// qjson's limit applies.
fn serde_parse(text: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let v = Value::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Nesting depth of a serde value (the root container is 1).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Whether any object of the qjson document repeats a key.
fn has_repeats(doc: &mut Document<'_>, at: u32) -> bool {
    match doc.value_type(at) {
        ValueType::Array => (0..doc.len(at).unwrap())
            .map(|i| doc.element(at, i).unwrap())
            .collect::<Vec<_>>()
            .into_iter()
            .any(|e| has_repeats(doc, e)),
        ValueType::Object => {
            let every = doc.members(at, true, &mut Vec::new()).unwrap().len();
            every != doc.len(at).unwrap() || {
                let values: Vec<u32> = doc
                    .members(at, true, &mut Vec::new())
                    .unwrap()
                    .iter()
                    .map(|&k| k + 3)
                    .collect();
                values.into_iter().any(|v| has_repeats(doc, v))
            }
        }
        _ => false,
    }
}

/// Checks that qjson reads `want` at `at`; `path` names the spot.
fn same(doc: &mut Document<'_>, at: u32, want: &Value, path: &str) {
    let t = doc.value_type(at);
    match want {
        Value::Null => assert_eq!(t, ValueType::Null, "{path}"),
        Value::Bool(b) => assert_eq!(
            t,
            if *b {
                ValueType::True
            } else {
                ValueType::False
            },
            "{path}"
        ),
        Value::String(s) => {
            assert_eq!(t, ValueType::String, "{path}");
            assert_eq!(doc.string(at, &mut Vec::new()), s.as_bytes(), "{path}");
        }
        Value::Number(n) => {
            assert_eq!(t, ValueType::Number, "{path}");
            same_number(doc, at, n, path);
        }
        Value::Array(a) => {
            assert_eq!(t, ValueType::Array, "{path}");
            assert_eq!(doc.len(at), Some(a.len()), "{path}");
            for (i, v) in a.iter().enumerate() {
                let e = doc.element(at, i).unwrap();
                same(doc, e, v, &format!("{path}[{i}]"));
            }
        }
        Value::Object(m) => {
            assert_eq!(t, ValueType::Object, "{path}");
            assert_eq!(doc.len(at), Some(m.len()), "{path}");
            let entries = doc.members(at, false, &mut Vec::new()).unwrap().to_vec();
            let mut keys: Vec<Vec<u8>> = entries
                .iter()
                .map(|&k| doc.string(k, &mut Vec::new()).to_vec())
                .collect();
            keys.sort();
            let mut want_keys: Vec<&[u8]> = m.keys().map(|k| k.as_bytes()).collect();
            want_keys.sort();
            assert_eq!(keys, want_keys, "{path}: key sets");
            for (k, v) in m {
                let found = doc.member(at, k.as_bytes()).unwrap();
                same(doc, found, v, &format!("{path}.{k:?}"));
            }
        }
    }
}

fn same_number(doc: &Document<'_>, at: u32, n: &Number, path: &str) {
    let raw = String::from_utf8_lossy(doc.raw(at)).into_owned();
    let (f, i) = (doc.f64(at), doc.i64(at));
    if let Some(v) = n.as_i64() {
        assert_eq!(i, Ok(v), "{path}: i64 of {raw}");
        assert_eq!(f, v as f64, "{path}: f64 of {raw}");
    } else if let Some(v) = n.as_u64() {
        assert_eq!(i, Err(ErrorCode::OutOfRange), "{path}: i64 of {raw}");
        assert_eq!(f, v as f64, "{path}: f64 of {raw}");
    } else {
        let v = n.as_f64().unwrap();
        assert_eq!(f.to_bits(), v.to_bits(), "{path}: f64 of {raw}");
        // Integral spellings such as 1.0 or 2.5e1 read exactly.
        if let Ok(exact) = i {
            assert_eq!(exact as f64, v, "{path}: i64 of {raw}");
        }
    }
}

/// What happened to one text, for the tallies.
#[derive(Default, Debug)]
struct Tally {
    both_accept: usize,
    both_reject: usize,
    beyond_double: usize,
    too_deep: usize,
    repeats: usize,
}

fn compare(text: &[u8], tally: &mut Tally) {
    let shown = || String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
    let theirs = serde_parse(text);
    let last_wins = Options::default();
    let strict = Options {
        duplicate_keys: DuplicateKeys::Error,
        ..last_wins
    };
    let strict_ok = Document::parse(text, &strict).is_ok();
    match (Document::parse(text, &last_wins), theirs) {
        (Ok(mut doc), Ok(v)) => {
            tally.both_accept += 1;
            same(&mut doc, 0, &v, "$");
            let repeats = has_repeats(&mut doc, 0);
            tally.repeats += usize::from(repeats);
            assert_eq!(strict_ok, !repeats, "error policy on {}", shown());
        }
        (Err(_), Err(_)) => {
            tally.both_reject += 1;
            assert!(!strict_ok);
        }
        (Ok(mut doc), Err(e)) => {
            assert!(
                e.to_string().starts_with("number out of range"),
                "only qjson accepts {}: serde says {e}",
                shown()
            );
            assert!(
                has_infinite(&mut doc, 0),
                "serde: {e}, but qjson reads no infinity"
            );
            tally.beyond_double += 1;
        }
        (Err(e), Ok(v)) => {
            assert_eq!(
                e.code,
                ErrorCode::DepthExceeded,
                "only serde accepts {}",
                shown()
            );
            assert!(depth(&v) > 1000);
            tally.too_deep += 1;
        }
    }
}

/// Whether some number of the document reads as ±infinity.
fn has_infinite(doc: &mut Document<'_>, at: u32) -> bool {
    let (mut items, mut arena) = (Vec::new(), Vec::new());
    let tape = doc.tape(at, &mut items, &mut arena);
    tape.iter().any(|item| {
        // SAFETY: a number item's payload is its double.
        item.type_ == ValueType::Number as i32 && unsafe { item.payload.num }.is_infinite()
    })
}

#[test]
fn qjson_and_serde_json_agree() {
    // serde_json recurses once per level; give 1100 levels room.
    let tally = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let mut tally = Tally::default();
            for text in texts() {
                compare(&text, &mut tally);
            }
            tally
        })
        .unwrap()
        .join()
        .unwrap();
    // Every family is exercised, so none of the checks above is vacuous.
    assert!(tally.both_accept >= 2000, "{tally:?}");
    assert!(tally.both_reject >= 2000, "{tally:?}");
    assert!(tally.beyond_double >= 100, "{tally:?}");
    assert!(tally.too_deep >= 50, "{tally:?}");
    assert!(tally.repeats >= 100, "{tally:?}");
}
