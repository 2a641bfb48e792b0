//! A flat, pre-order description of a whole subtree, for building it in
//! one pass on the other side of the FFI (eager decode, `materialize`).
//!
//! Reading a large subtree value by value costs one FFI call per value;
//! the tape costs one call for all of them. It is the index walked in
//! order with the punctuation dropped: each container is one item holding
//! its member or element count, followed by its children (an object's
//! children alternate key, value); strings and numbers are already
//! decoded.
//!
//! ```text
//! {"a":[1,"x\n"],"b":null}
//! OBJECT 2 | STRING "a" | ARRAY 2 | NUMBER 1 | STRING "x⏎" | STRING "b" | NULL
//! ```
//!
//! An object's count includes repeated keys; a builder that assigns
//! members in order ends up with the last value of each, which is the
//! "last wins" reading.

use super::{Tree, ValueType};
use crate::values::{number, string};

/// One tape item (`qjson_item` in `include/qjson.h`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Item {
    /// `ValueType` as an integer.
    pub type_: i32,
    /// String length in bytes, or a container's member/element count.
    pub len: u32,
    /// The decoded number, or the string's bytes.
    pub payload: Payload,
}

/// What an [`Item`] carries besides its type and length.
#[repr(C)]
#[derive(Clone, Copy)]
pub union Payload {
    /// A number's nearest double.
    pub num: f64,
    /// A string's decoded bytes: in the text, or in the tape's arena.
    pub str_: *const u8,
    /// While the tape is built: an offset into the arena.
    arena_offset: usize,
}

/// Marks a string item whose payload is still an arena offset.
const IN_ARENA: i32 = 0x100;

const _: () = assert!(size_of::<Item>() == 16);

// SAFETY: an Item's pointer is only an address handed to the FFI caller;
// Rust never dereferences it after `build`, so moving items (inside a
// reader's scratch, `ffi::Scratch`) between threads cannot create a data
// race.
unsafe impl Send for Item {}

impl core::fmt::Debug for Item {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Item")
            .field("type_", &self.type_)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Appends the tape of the value at `at` to `items`, decoding escaped
/// strings into `arena` (both cleared first). String payloads point into
/// the text or into `arena`, so they are valid while neither changes.
pub fn build(tree: &Tree<'_>, at: u32, items: &mut Vec<Item>, arena: &mut Vec<u8>) {
    items.clear();
    arena.clear();
    let end = tree.skip(at);
    let mut any_in_arena = false;
    let mut e = at;
    while e < end {
        let byte = tree.src[tree.positions[e as usize] as usize];
        let (type_, len, payload) = match byte {
            b',' | b':' | b']' | b'}' => {
                e += 1;
                continue;
            }
            b'{' | b'[' => {
                let t = tree.value_type(e);
                (t, tree.count(e), Payload { num: 0.0 })
            }
            b'"' => {
                let body = tree.string_body(e);
                let item = if tree.has_escapes(e) {
                    let start = arena.len();
                    string::unescape_into(body, arena);
                    any_in_arena = true;
                    Item {
                        type_: ValueType::String as i32 | IN_ARENA,
                        len: (arena.len() - start) as u32,
                        payload: Payload {
                            arena_offset: start,
                        },
                    }
                } else {
                    Item {
                        type_: ValueType::String as i32,
                        len: body.len() as u32,
                        payload: Payload {
                            str_: body.as_ptr(),
                        },
                    }
                };
                items.push(item);
                e += 2;
                continue;
            }
            _ => {
                let t = tree.value_type(e);
                let num = if t == ValueType::Number {
                    number::to_f64(&tree.src[tree.raw(e)])
                } else {
                    0.0
                };
                (t, 0, Payload { num })
            }
        };
        items.push(Item {
            type_: type_ as i32,
            len,
            payload,
        });
        e += 1;
    }
    if any_in_arena {
        let base = arena.as_ptr();
        for item in items.iter_mut().filter(|i| i.type_ & IN_ARENA != 0) {
            item.type_ &= !IN_ARENA;
            // SAFETY: items marked IN_ARENA were written with arena_offset,
            // which is within `arena`, so the pointer stays in bounds.
            item.payload.str_ = unsafe { base.add(item.payload.arena_offset) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Document;
    use crate::validate::Options;

    /// The tape rendered as text, one item per line.
    fn render(json: &str) -> Vec<String> {
        let doc = Document::parse(json.as_bytes(), &Options::default()).unwrap();
        let (mut items, mut arena) = (Vec::new(), Vec::new());
        build(&doc.tree(), 0, &mut items, &mut arena);
        items
            .iter()
            .map(|i| {
                // SAFETY: each payload field is read for the type that wrote
                // it; string pointers point into `json` or `arena`, both alive.
                unsafe {
                    match i.type_ {
                        4 => format!("number {}", i.payload.num),
                        5 => {
                            let bytes = core::slice::from_raw_parts(i.payload.str_, i.len as usize);
                            format!("string {}", String::from_utf8_lossy(bytes))
                        }
                        t => format!("type {t} len {}", i.len),
                    }
                }
            })
            .collect()
    }

    #[test]
    fn walks_in_order_with_counts_and_decoded_values() {
        assert_eq!(
            render(r#"{"a":[1,"x\n"],"b\u0021":null,"a":-2.5e1}"#),
            [
                "type 7 len 3",
                "string a",
                "type 6 len 2",
                "number 1",
                "string x\n",
                "string b!",
                "type 1 len 0",
                "string a",
                "number -25",
            ]
        );
        assert_eq!(render("[]"), ["type 6 len 0"]);
        assert_eq!(render(r#" "\u00e9" "#), ["string é"]);
        assert_eq!(
            render("[true,false,{}]"),
            [
                "type 6 len 3",
                "type 3 len 0",
                "type 2 len 0",
                "type 7 len 0"
            ]
        );
    }

    #[test]
    fn many_escaped_strings_point_into_the_final_arena() {
        let json = format!(
            "[{}]",
            (0..2000)
                .map(|i| format!(r#""\t{i}""#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let lines = render(&json);
        assert_eq!(lines.len(), 2001);
        assert_eq!(lines[1999 + 1], "string \t1999");
    }
}
