//! Where each member or element of a container is in the text, in one
//! call, for the encoder's splices (`lua/qjson/encode.lua`).
//!
//! A changed proxy is written as its source text with some values replaced,
//! some members dropped and new ones appended; the encoder needs, for every
//! member, where its key starts and where its value starts and ends.
//! Asking for them member by member costs a few FFI calls per member, more
//! than the whole splice of a small object; a span list costs one.
//!
//! ```text
//! {"a":1,"b":[2],"a":3}   key_start  value_start  value_end  cursor  live_start
//!  ^   ^ ^   ^  ^   ^ ^
//!  1   5 7  11  14 16 20
//!                     a:      1          5            6         4      20
//!                     b:      7         11           14         9      11
//!                     a:     15         20           21        18      20
//! ```
//!
//! `live_start` is where the value that reads see for the member's key
//! starts: its own `value_start`, except that under "last wins" every
//! copy of a repeated key gets the last one's. The encoder drops the
//! other copies when that key is written, and matches members with the
//! keys written by where that value starts, a number, so that no member
//! needs a Lua string of its key (LuaJIT interns every string it makes,
//! and strings alike where its hash does not look share one chain:
//! docs/reliability.md, "Strings LuaJIT interns"). Elements have no key;
//! theirs is their own `value_start`.

use super::{Tree, ValueType};
use crate::values::string;

/// One member or element (`qjson_span` in `include/qjson.h`). Offsets are
/// bytes into the text, which is under 4 GiB.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Span {
    /// The decoded key (objects, when asked for), else NULL.
    pub key: *const u8,
    /// The key's length in bytes.
    pub key_len: u32,
    /// Objects: the offset of the key's opening quote; arrays: `value_start`.
    pub key_start: u32,
    /// The offset of the value's first byte.
    pub value_start: u32,
    /// The offset just past the value's last byte.
    pub value_end: u32,
    /// The value's cursor.
    pub cursor: u32,
    /// The `value_start` of the member reads see for this key (its own
    /// when it is that member; elements: their own).
    pub live_start: u32,
}

const _: () = assert!(size_of::<Span>() == 32);

// SAFETY: a Span's pointer is only an address handed to the FFI caller;
// Rust never dereferences it, so moving spans (inside a reader) between
// threads cannot create a data race.
unsafe impl Send for Span {}

/// The value span of the entry `at`.
fn value_span(tree: &Tree<'_>, at: u32) -> (u32, u32) {
    let raw = tree.raw(at);
    (raw.start as u32, raw.end as u32)
}

/// Fills `out` with the members of the object at `obj` in document order,
/// every one of them; `winners` holds, for each, the key entry reads see
/// for its key ([`crate::navigate::lookup::Lookup::winners`]). With
/// `keys`, each key is decoded: pointing into the text, or into `arena`
/// when it has escapes (both cleared first). Key pointers are valid while
/// neither the text nor `arena` changes.
pub fn object(
    tree: &Tree<'_>,
    obj: u32,
    winners: &[u32],
    keys: bool,
    out: &mut Vec<Span>,
    arena: &mut Vec<u8>,
) {
    out.clear();
    arena.clear();
    for (key, &winner) in tree.keys(obj).zip(winners) {
        // key, closing quote, colon, value.
        let (start, end) = value_span(tree, key + 3);
        let mut span = Span {
            key: core::ptr::null(),
            key_len: 0,
            key_start: tree.positions[key as usize],
            value_start: start,
            value_end: end,
            cursor: key + 3,
            live_start: if winner == key {
                start
            } else {
                value_span(tree, winner + 3).0
            },
        };
        if keys {
            let body = tree.string_body(key);
            if tree.has_escapes(key) {
                // In `arena`, after the keys decoded before it; the
                // pointer is made once `arena` has stopped growing.
                let from = arena.len();
                string::unescape_into(body, arena);
                span.key_len = (arena.len() - from) as u32;
            } else {
                span.key = body.as_ptr();
                span.key_len = body.len() as u32;
            }
        }
        out.push(span);
    }
    if !arena.is_empty() {
        // The keys still NULL are the decoded ones, in `arena` in order.
        let (base, mut from) = (arena.as_ptr(), 0);
        for span in out.iter_mut().filter(|s| s.key.is_null()) {
            // SAFETY: the keys decoded into `arena` lie end to end in
            // member order, so `from` is where this one starts, and it
            // ends within `arena`, which has not changed since.
            span.key = unsafe { base.add(from) };
            from += span.key_len as usize;
        }
    }
}

/// Fills `out` with the elements of the array at `array` in order.
pub fn array(tree: &Tree<'_>, array: u32, out: &mut Vec<Span>) {
    out.clear();
    debug_assert_eq!(tree.value_type(array), ValueType::Array);
    let count = tree.count(array);
    out.reserve(count as usize);
    let mut at = array + 1;
    for _ in 0..count {
        let (start, end) = value_span(tree, at);
        out.push(Span {
            key: core::ptr::null(),
            key_len: 0,
            key_start: start,
            value_start: start,
            value_end: end,
            cursor: at,
            live_start: start,
        });
        // element, then ','.
        at = tree.skip(at) + 1;
    }
}

#[cfg(test)]
mod tests {
    use crate::document::Document;
    use crate::navigate::ValueType;
    use crate::testing::{Rng, random_json};
    use crate::validate::{DuplicateKeys, Options};

    /// Each span as "key key_start value live_start" (arrays: no key),
    /// the value's text checked against the cursor's raw text.
    fn render(json: &str, opts: &Options) -> Vec<String> {
        let mut doc = Document::parse(json.as_bytes(), opts).unwrap();
        let (mut winners, mut out, mut arena) = (Vec::new(), Vec::new(), Vec::new());
        let spans = doc
            .spans(0, true, &mut winners, &mut out, &mut arena)
            .unwrap();
        spans
            .iter()
            .map(|s| {
                let value = &json[s.value_start as usize..s.value_end as usize];
                assert_eq!(value.as_bytes(), doc.raw(s.cursor));
                let key = if s.key.is_null() {
                    String::from("-")
                } else {
                    // SAFETY: non-NULL keys point into `json` or `arena`,
                    // both alive and unchanged.
                    let bytes = unsafe { core::slice::from_raw_parts(s.key, s.key_len as usize) };
                    String::from_utf8_lossy(bytes).into_owned()
                };
                format!("{key} {} {value} {}", s.key_start, s.live_start)
            })
            .collect()
    }

    #[test]
    fn objects_give_every_member_with_decoded_keys() {
        let json = r#"{ "a" : 1 , "b\u0021":[2, {}] ,"c":"x\n", "a":-2.5e1 }"#;
        let lines = render(json, &Options::default());
        assert_eq!(
            lines,
            [
                "a 2 1 46",
                r#"b! 12 [2, {}] 22"#,
                r#"c 31 "x\n" 35"#,
                "a 42 -2.5e1 46",
            ]
        );
        let error = Options {
            duplicate_keys: DuplicateKeys::Error,
            ..Options::default()
        };
        assert_eq!(
            render(r#"{"a":true,"b":null}"#, &error),
            ["a 1 true 5", "b 10 null 14"]
        );
    }

    #[test]
    fn arrays_give_every_element() {
        assert_eq!(
            render(r#"[1, "s" ,[[]],{"a":2}, false]"#, &Options::default()),
            [
                "- 1 1 1",
                r#"- 4 "s" 4"#,
                "- 9 [[]] 9",
                r#"- 14 {"a":2} 14"#,
                "- 23 false 23"
            ]
        );
        assert!(render("[ ]", &Options::default()).is_empty());
    }

    #[test]
    fn scalars_have_no_spans() {
        let mut doc = Document::parse(b"\"s\"", &Options::default()).unwrap();
        let (mut winners, mut out, mut arena) = (Vec::new(), Vec::new(), Vec::new());
        assert!(
            doc.spans(0, true, &mut winners, &mut out, &mut arena)
                .is_none()
        );
    }

    /// Every container of generated documents: the spans are its members
    /// (keys decoded, values' raw text) in order, each pointing at the
    /// value of the member the duplicate-key policy reads for its key (its
    /// own for those), and only the grammar between them.
    #[test]
    fn agree_with_the_members_on_generated_documents() {
        let mut rng = Rng::new(17);
        let (mut winners, mut out, mut arena, mut keys, mut text) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..300 {
            let json = random_json(&mut rng, 4);
            let mut doc = Document::parse(&json, &Options::default()).unwrap();
            let containers: Vec<u32> = (0..doc.index().positions.len() as u32)
                .filter(|&e| {
                    doc.is_value(e)
                        && matches!(doc.value_type(e), ValueType::Object | ValueType::Array)
                })
                .collect();
            for c in containers {
                let spans = doc
                    .spans(c, true, &mut winners, &mut out, &mut arena)
                    .unwrap()
                    .to_vec();
                let outer = doc.tree().raw(c);
                let mut at = outer.start + 1;
                if doc.value_type(c) == ValueType::Object {
                    let all = doc.members(c, true, &mut keys).unwrap().to_vec();
                    let read = doc.members(c, false, &mut keys).unwrap().to_vec();
                    assert_eq!(spans.len(), all.len());
                    for (s, &k) in spans.iter().zip(&all) {
                        assert_eq!(s.key_start, doc.index().positions[k as usize]);
                        assert_eq!(s.cursor, k + 3);
                        assert_eq!(s.live_start == s.value_start, read.contains(&k));
                        // SAFETY: keys point into `json` or `arena`, both
                        // alive and unchanged since `spans`.
                        let key = unsafe { core::slice::from_raw_parts(s.key, s.key_len as usize) };
                        assert_eq!(key, doc.string(k, &mut text));
                        // The member read for this key starts there.
                        let read_for_key = doc.member(c, key).unwrap();
                        assert_eq!(s.live_start, doc.tree().raw(read_for_key).start as u32);
                        let between = &json[at..s.key_start as usize];
                        assert!(between.iter().all(|b| b" \t\r\n,".contains(b)));
                        at = s.value_end as usize;
                    }
                } else {
                    assert_eq!(spans.len(), doc.tree().count(c) as usize);
                    for (i, s) in spans.iter().enumerate() {
                        assert_eq!(Some(s.cursor), doc.element(c, i));
                        let between = &json[at..s.value_start as usize];
                        assert!(between.iter().all(|b| b" \t\r\n,".contains(b)));
                        at = s.value_end as usize;
                    }
                }
                let after = &json[at..outer.end - 1];
                assert!(after.iter().all(|b| b" \t\r\n".contains(b)));
                for s in &spans {
                    let raw = doc.tree().raw(s.cursor);
                    assert_eq!(
                        (s.value_start, s.value_end),
                        (raw.start as u32, raw.end as u32)
                    );
                    assert!(outer.start < s.value_start as usize && raw.end < outer.end);
                }
            }
        }
    }

    #[test]
    fn many_escaped_keys_point_into_the_final_arena() {
        let members: Vec<String> = (0..2000).map(|i| format!(r#""\t{i}":{i}"#)).collect();
        let json = format!("{{{}}}", members.join(","));
        let lines = render(&json, &Options::default());
        assert_eq!(lines.len(), 2000);
        assert!(lines[1999].starts_with("\t1999 "));
    }
}
