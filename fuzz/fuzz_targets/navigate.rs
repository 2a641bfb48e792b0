//! Getters, cursors and paths on random documents.
//!
//! Input: `[policy, depth, text..., 0, program...]`. The text is parsed
//! with the options; the program (the bytes after the first NUL, which
//! valid JSON never contains) is a list of lookups, each picking a
//! cursor from those reached so far (or a raw, probably bad one) and a
//! path or key from the program bytes. Paths that name a member are also
//! built from the real keys, in both path syntaxes, so lookups reach deep
//! values instead of mostly missing. Every value reached is cross-checked
//! with `check_value`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qjson::error::ErrorCode;
use qjson_fuzz::{Doc, OBJECT, Value, check_value, take};

/// Consumes program bytes; zeros when they run out.
struct Program<'a>(&'a [u8]);

impl Program<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn bytes(&mut self, max: usize) -> &[u8] {
        let n = (self.byte() as usize % (max + 1)).min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(([policy, depth], rest)) = take::<2>(data) else {
        return;
    };
    let (policy, depth) = (i32::from(policy & 1), u32::from(depth));
    let split = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let (text, program) = (&rest[..split], rest.get(split + 1..).unwrap_or(&[]));
    let Ok(mut doc) = Doc::parse(text, depth, policy) else {
        return;
    };
    let mut p = Program(program);
    let mut cursors = vec![0u32];
    check_value(&mut doc, 0, depth, policy);
    for _ in 0..64 {
        if p.0.is_empty() {
            break;
        }
        let op = p.byte();
        let pick = p.byte();
        let cursor = if pick == 0xff {
            u32::from_le_bytes([p.byte(), p.byte(), p.byte(), p.byte()])
        } else {
            cursors[pick as usize % cursors.len()]
        };
        let reached = match op % 9 {
            0 => doc.find(cursor, p.bytes(40)),
            1 => doc.get(cursor, p.bytes(40)),
            2 => doc.get_i64(cursor, p.bytes(40)),
            3 => doc.len(cursor, p.bytes(40)),
            4 => doc.raw(cursor, p.bytes(40)),
            5 => doc.get_key(cursor, p.bytes(16)),
            6 => doc.get_index(cursor, usize::from(p.byte())),
            7 => doc
                .tape(cursor)
                .map(|_| doc.find(cursor, b"").expect("tape of a value")),
            _ => by_member(&mut doc, cursor, p.byte()),
        };
        if let Ok(v) = reached
            && !cursors.contains(&v.cursor)
        {
            check_value(&mut doc, v.cursor, depth, policy);
            cursors.push(v.cursor);
        }
    }
});

/// Picks the `which`-th member the policy reads and checks that every
/// way to name it (`qjson_member`, `qjson_get_key`, a JSON Pointer, a
/// dotted path where the key allows one) reaches the same value.
fn by_member(doc: &mut Doc<'_>, cursor: u32, which: u8) -> Result<Value, i32> {
    let entries = doc.members(cursor, false)?;
    let Some(&entry) = entries.get(usize::from(which) % entries.len().max(1)) else {
        return Err(ErrorCode::NotFound as i32);
    };
    let (key, value) = doc.member(entry)?;
    let by_key = doc
        .get_key(cursor, &key.bytes)
        .expect("get_key of a listed key");
    assert_eq!(by_key.cursor, value.cursor, "get_key and member disagree");
    let mut pointer = vec![b'/'];
    for &b in &key.bytes {
        match b {
            b'~' => pointer.extend_from_slice(b"~0"),
            b'/' => pointer.extend_from_slice(b"~1"),
            _ => pointer.push(b),
        }
    }
    let found = doc
        .find(cursor, &pointer)
        .expect("a pointer to a listed key");
    assert_eq!(found.cursor, value.cursor, "pointer and member disagree");
    let plain = !key.bytes.is_empty()
        && key
            .bytes
            .iter()
            .all(|b| b.is_ascii_alphabetic() || *b == b'_');
    if plain {
        let found = doc
            .find(cursor, &key.bytes)
            .expect("a dotted path to a listed key");
        assert_eq!(
            found.cursor, value.cursor,
            "dotted path and member disagree"
        );
    }
    let every = doc.members(cursor, true)?;
    assert!(every.len() >= entries.len() && every.contains(&entry));
    assert_eq!(doc.find(cursor, b"")?.type_, OBJECT);
    Ok(value)
}
