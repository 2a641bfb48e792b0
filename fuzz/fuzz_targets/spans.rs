//! The native pieces `lua/qjson/encode.lua` splices with: `qjson_raw`
//! spans, `qjson_members` key entries with their `qjson_member` key
//! offsets, and `qjson_tape`.
//!
//! Input: `[policy, depth, text...]`. For every container of an accepted
//! text, checks that the spans of its children lie inside its own span,
//! in document order, without overlap, separated only by what the
//! grammar allows (whitespace, `,`, and for objects `"key" :`), and that
//! the key found between them decodes to the key `qjson_member` reports.
//! Then replaces one child's span with another child's text, the edit the
//! encoder makes for a changed value, and checks that the result parses
//! and reads back the new value there and the old ones elsewhere.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qjson_fuzz::{ARRAY, Doc, OBJECT, Value, take};

/// A child of a container: the start of its key (objects) and its value.
struct Child {
    key_at: Option<usize>,
    key: Vec<u8>,
    value: Value,
}

fuzz_target!(|data: &[u8]| {
    let Some(([policy, depth], text)) = take::<2>(data) else {
        return;
    };
    let (policy, depth) = (i32::from(policy & 1), u32::from(depth));
    let Ok(mut doc) = Doc::parse(text, depth, policy) else {
        return;
    };
    let mut todo = vec![0u32];
    let mut splice = None;
    while let Some(cursor) = todo.pop() {
        let outer = doc.raw(cursor, b"").expect("raw of a reached value");
        let children = match outer.type_ {
            ARRAY => elements(&mut doc, cursor),
            OBJECT => members(&mut doc, cursor),
            _ => continue,
        };
        check_layout(text, &outer, &children);
        todo.extend(children.iter().map(|c| c.value.cursor));
        if splice.is_none() && children.len() >= 2 {
            splice = Some((
                children[0].value.clone(),
                children[children.len() - 1].value.clone(),
            ));
        }
    }
    if let Some((target, source)) = splice {
        check_splice(&mut doc, &target, &source, depth, policy);
    }
});

fn elements(doc: &mut Doc<'_>, cursor: u32) -> Vec<Child> {
    let n = doc.len(cursor, b"").expect("array length").len;
    (0..n)
        .map(|i| {
            let e = doc.get_index(cursor, i).expect("element below the length");
            let value = doc.raw(e.cursor, b"").expect("raw of an element");
            Child {
                key_at: None,
                key: Vec::new(),
                value,
            }
        })
        .collect()
}

fn members(doc: &mut Doc<'_>, cursor: u32) -> Vec<Child> {
    let entries = doc.members(cursor, true).expect("members of an object");
    entries
        .into_iter()
        .map(|entry| {
            let (key, value) = doc.member(entry).expect("member of a listed entry");
            let value = doc.raw(value.cursor, b"").expect("raw of a member value");
            Child {
                key_at: Some(key.i64_ as usize),
                key: key.bytes,
                value,
            }
        })
        .collect()
}

/// `outer` is `open ws child (ws , ws child)* ws close`, each object child
/// being `"key" ws : ws value`, with every span where the calls said.
fn check_layout(text: &[u8], outer: &Value, children: &[Child]) {
    let start = outer.i64_ as usize;
    let end = start + outer.bytes.len();
    let (open, close) = if outer.type_ == ARRAY {
        (b'[', b']')
    } else {
        (b'{', b'}')
    };
    assert_eq!((text[start], text[end - 1]), (open, close));
    let mut at = start + 1;
    for (i, child) in children.iter().enumerate() {
        let gap_end = child.key_at.unwrap_or(child.value.i64_ as usize);
        assert!(
            gap_end >= at,
            "child {i} starts before the previous one ends"
        );
        let sep: &[u8] = if i == 0 { b"" } else { b"," };
        assert_eq!(text[at..gap_end].trim_ascii(), sep, "between children {i}");
        let value_at = child.value.i64_ as usize;
        if let Some(key_at) = child.key_at {
            assert!(key_at < value_at);
            let between = &text[key_at..value_at];
            let key_text = between
                .trim_ascii_end()
                .strip_suffix(b":")
                .expect("a colon");
            let mut key = Doc::parse(key_text.trim_ascii_end(), 0, 0).expect("the key parses");
            assert_eq!(
                key.get(0, b"").expect("key text").bytes,
                child.key,
                "key text"
            );
        }
        at = value_at + child.value.bytes.len();
        assert!(at < end, "child {i} runs past its container");
    }
    assert!(
        text[at..end - 1].trim_ascii().is_empty(),
        "junk before the close"
    );
}

/// Puts `source`'s text in place of `target`'s span, as the encoder does
/// for a changed value: the result parses (the two are siblings, so the
/// nesting limit still holds) to the original tape with the target's
/// subtree replaced by the source's.
fn check_splice(doc: &mut Doc<'_>, target: &Value, source: &Value, depth: u32, policy: i32) {
    let text = doc.text();
    let at = target.i64_ as usize;
    let mut edited = text[..at].to_vec();
    edited.extend_from_slice(&source.bytes);
    edited.extend_from_slice(&text[at + target.bytes.len()..]);
    let mut after = match Doc::parse(&edited, depth, policy) {
        Ok(d) => d,
        Err(r) => panic!("a splice of valid spans is rejected: {r:?}"),
    };
    let source_tape = doc.tape(source.cursor).expect("source tape");
    let mut want = Vec::new();
    doc.walk(0, Some((target.cursor, &source_tape)), &mut want);
    assert_eq!(
        after.tape(0).expect("root tape"),
        want,
        "spliced document reads differently"
    );
}
