//! Lookup paths, parsed in place without allocating.
//!
//! Two spellings:
//!
//! * **Dotted**: `""` is the value itself; `a.b[0].c` steps into key `a`,
//!   key `b`, element 0, key `c`. A key is one or more bytes other than
//!   `.` and `[`; an index is `[0]` or `[` a digit 1–9 then digits `]`.
//! * **JSON Pointer** (RFC 6901), for any path starting with `/`: tokens
//!   separated by `/`, with `~1` for `/` and `~0` for `~`. On an array a
//!   token is an index when it is spelled like one (`0`, `12`); anything
//!   else, including `-`, finds nothing.
//!
//! A malformed path is a programming error ([`ErrorCode::BadPath`], with
//! the offset in the path); a well-formed one that names nothing in the
//! document is just "not found".

use crate::error::{Error, ErrorCode, Result};
use crate::values::string::position_of_either;

/// One step of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'p> {
    /// An object key, as written in a dotted path (no escapes).
    Key(&'p [u8]),
    /// A JSON Pointer token: a key with `~0`/`~1` escapes, or an index.
    Token(&'p [u8]),
    /// An array index from `[n]`; saturates for absurd values (finds
    /// nothing).
    Index(usize),
}

/// An iterator over the steps of a path.
#[derive(Clone, Debug)]
pub struct Path<'p> {
    bytes: &'p [u8],
    at: usize,
    pointer: bool,
}

impl<'p> Path<'p> {
    /// The steps of `path`. Syntax is checked as the steps are taken.
    pub fn new(path: &'p [u8]) -> Path<'p> {
        Path {
            bytes: path,
            at: 0,
            pointer: path.first() == Some(&b'/'),
        }
    }

    fn bad(&self, at: usize) -> Option<Result<Step<'p>>> {
        Some(Err(Error::new(ErrorCode::BadPath, at)))
    }

    fn next_pointer_token(&mut self) -> Option<Result<Step<'p>>> {
        // self.bytes[self.at] is '/'.
        let start = self.at + 1;
        let end = self.bytes[start..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(self.bytes.len(), |k| start + k);
        let token = &self.bytes[start..end];
        let mut k = 0;
        while k < token.len() {
            if token[k] == b'~' {
                if !matches!(token.get(k + 1), Some(b'0' | b'1')) {
                    return self.bad(start + k);
                }
                k += 1;
            }
            k += 1;
        }
        self.at = end;
        Some(Ok(Step::Token(token)))
    }

    fn next_index(&mut self) -> Option<Result<Step<'p>>> {
        // self.bytes[self.at] is '['.
        let start = self.at + 1;
        let digits = self.bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = start + digits;
        if digits == 0 || (digits > 1 && self.bytes[start] == b'0') {
            return self.bad(start);
        }
        if self.bytes.get(end) != Some(&b']') {
            return self.bad(end);
        }
        self.at = end + 1;
        Some(Ok(Step::Index(parse_index(&self.bytes[start..end]))))
    }

    #[inline(always)]
    fn next_key(&mut self, start: usize) -> Option<Result<Step<'p>>> {
        let len = key_len(&self.bytes[start..]);
        if len == 0 {
            return self.bad(start);
        }
        self.at = start + len;
        Some(Ok(Step::Key(&self.bytes[start..start + len])))
    }
}

impl<'p> Iterator for Path<'p> {
    type Item = Result<Step<'p>>;

    #[inline(always)]
    fn next(&mut self) -> Option<Result<Step<'p>>> {
        if self.at >= self.bytes.len() {
            return None;
        }
        if self.pointer {
            return self.next_pointer_token();
        }
        match self.bytes[self.at] {
            b'[' => self.next_index(),
            b'.' if self.at > 0 => self.next_key(self.at + 1),
            _ if self.at == 0 => self.next_key(0),
            _ => self.bad(self.at),
        }
    }
}

/// The length of the dotted-path key `rest` starts with: the bytes before
/// the first `.` or `[`, found eight bytes at a time (byte by byte, this
/// took a fifth of a small document's path lookup).
#[inline(always)]
fn key_len(rest: &[u8]) -> usize {
    position_of_either(rest, b'.', b'[').unwrap_or(rest.len())
}

/// The index a canonical decimal spelling stands for, saturating.
pub fn parse_index(digits: &[u8]) -> usize {
    digits.iter().fold(0usize, |acc, &d| {
        acc.saturating_mul(10).saturating_add((d - b'0') as usize)
    })
}

/// Whether a pointer token is spelled as an array index (`0` or no
/// leading zero).
pub fn is_index_token(token: &[u8]) -> bool {
    !token.is_empty()
        && token.iter().all(u8::is_ascii_digit)
        && (token.len() == 1 || token[0] != b'0')
}

/// Decodes the `~1` and `~0` escapes of a pointer token into `out`.
pub fn unescape_token(token: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut k = 0;
    while k < token.len() {
        if token[k] == b'~' {
            out.push(if token.get(k + 1) == Some(&b'1') {
                b'/'
            } else {
                b'~'
            });
            k += 2;
        } else {
            out.push(token[k]);
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(path: &str) -> Result<Vec<Step<'_>>> {
        Path::new(path.as_bytes()).collect()
    }

    #[test]
    fn dotted_paths() {
        use Step::*;
        assert_eq!(steps(""), Ok(vec![]));
        assert_eq!(steps("model"), Ok(vec![Key(b"model")]));
        assert_eq!(
            steps("messages[1].content[0].text"),
            Ok(vec![
                Key(b"messages"),
                Index(1),
                Key(b"content"),
                Index(0),
                Key(b"text")
            ])
        );
        assert_eq!(steps("[0][12]"), Ok(vec![Index(0), Index(12)]));
        assert_eq!(steps("a]b.c d"), Ok(vec![Key(b"a]b"), Key(b"c d")]));
        assert_eq!(
            steps("[99999999999999999999999]"),
            Ok(vec![Index(usize::MAX)])
        );
    }

    #[test]
    fn keys_end_at_the_first_dot_or_bracket_at_every_offset() {
        for len in 0..20 {
            for stop in [b'.', b'['] {
                // Bytes that differ from the stops by one bit, and from
                // each other, then a stop, then more stops and keys.
                let mut path: Vec<u8> =
                    (0..len).map(|i| [b'/', b'Z', b'\\', b'a'][i % 4]).collect();
                path.push(stop);
                path.extend_from_slice(b"[.x");
                assert_eq!(key_len(&path), len, "{len} {}", stop as char);
                assert_eq!(key_len(&path[..len]), len, "{len} without the stop");
            }
        }
        // A stop just past one whose byte borrows: 0x2e - 1 is '-'.
        assert_eq!(key_len(b"-.["), 1);
        assert_eq!(key_len(b"\x01.x"), 1);
        // The same inside a whole word, and a stop followed by the byte one
        // above it ('/' after '.', '\\' after '['), which the borrow out of
        // the stop's byte flags too: the stop is still the first.
        assert_eq!(key_len(b"-.[xxxxx"), 1);
        assert_eq!(key_len(b"\x01.xxxxxx"), 1);
        assert_eq!(key_len(b"ab./xxxxyy"), 2);
        assert_eq!(key_len(b"abc[\\xxxxyy"), 3);
    }

    #[test]
    fn key_len_matches_a_byte_loop_on_random_paths() {
        let mut rng = crate::testing::Rng::new(7);
        let alphabet = [
            b'.', b'[', b']', b'-', b'/', b'Z', b'\\', b'a', 0x00, 0x01, 0x2f, 0xff,
        ];
        for _ in 0..crate::testing::rounds(20_000) {
            let len = rng.below(40);
            let path: Vec<u8> = (0..len).map(|_| rng.pick(&alphabet)).collect();
            let expected = path.iter().take_while(|&&b| b != b'.' && b != b'[').count();
            assert_eq!(key_len(&path), expected, "{path:?}");
        }
    }

    #[test]
    fn malformed_dotted_paths_name_the_offset() {
        for (path, at) in [
            (".a", 0),
            ("a.", 2),
            ("a..b", 2),
            ("a[", 2),
            ("a[]", 2),
            ("a[01]", 2),
            ("a[-1]", 2),
            ("a[1", 3),
            ("a[1]b", 4),
            ("a[x]", 2),
        ] {
            assert_eq!(
                steps(path),
                Err(Error::new(ErrorCode::BadPath, at)),
                "{path}"
            );
        }
    }

    #[test]
    fn json_pointers() {
        use Step::*;
        assert_eq!(steps("/"), Ok(vec![Token(b"")]));
        assert_eq!(
            steps("/a~1b/0/~0"),
            Ok(vec![Token(b"a~1b"), Token(b"0"), Token(b"~0")])
        );
        assert_eq!(steps("/a.b[0]"), Ok(vec![Token(b"a.b[0]")]));
        assert_eq!(
            steps("/a//b"),
            Ok(vec![Token(b"a"), Token(b""), Token(b"b")])
        );
        assert_eq!(steps("/a~2"), Err(Error::new(ErrorCode::BadPath, 2)));
        assert_eq!(steps("/x/~"), Err(Error::new(ErrorCode::BadPath, 3)));
        let mut out = Vec::new();
        unescape_token(b"a~1b~0c~01", &mut out);
        assert_eq!(out, b"a/b~c~1");
        assert!(is_index_token(b"0") && is_index_token(b"10"));
        assert!(!is_index_token(b"01") && !is_index_token(b"-") && !is_index_token(b""));
    }
}
