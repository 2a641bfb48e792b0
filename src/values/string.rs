//! Decoding string bodies: escapes to UTF-8, into a caller's reused buffer.
//!
//! Only bodies that validation accepted reach here, and validation records
//! which strings contain escapes ([`crate::index`] links), so strings
//! without escapes are returned as slices of the input and never copied.

/// Appends the decoded form of the string body `body` (the bytes between
/// the quotes) to `out`.
///
/// `body` must have passed validation; on anything else this still
/// terminates without panicking, but the bytes produced are unspecified.
pub fn unescape_into(body: &[u8], out: &mut Vec<u8>) {
    let mut rest = body;
    while let Some(at) = rest.iter().position(|&b| b == b'\\') {
        out.extend_from_slice(&rest[..at]);
        let (bytes, used) = decode_escape(&rest[at..]);
        out.extend_from_slice(bytes.as_slice());
        rest = &rest[at + used..];
    }
    out.extend_from_slice(rest);
}

/// [`unescape_into`] for a body whose escapes are already known: `escaped`
/// gives, in increasing order, the offset in `body` of each byte that
/// follows an active backslash (stage 1's escape list, shifted to the
/// body). The bytes between escapes are copied without being searched.
/// The low half of a surrogate pair is the pair's second escape and is
/// skipped.
pub fn unescape_known(body: &[u8], escaped: impl Iterator<Item = usize>, out: &mut Vec<u8>) {
    out.reserve(body.len());
    let mut done = 0;
    for at in escaped {
        let Some(backslash) = at.checked_sub(1).filter(|&b| b >= done) else {
            continue;
        };
        out.extend_from_slice(body.get(done..backslash).unwrap_or_default());
        let (bytes, used) = decode_escape(body.get(backslash..).unwrap_or_default());
        out.extend_from_slice(bytes.as_slice());
        done = backslash + used.max(1);
    }
    out.extend_from_slice(body.get(done..).unwrap_or_default());
}

/// Whether the validated string body `body` decodes to exactly `want`,
/// without decoding into memory.
pub fn unescaped_eq(body: &[u8], want: &[u8]) -> bool {
    let (mut rest, mut want) = (body, want);
    while let Some(at) = rest.iter().position(|&b| b == b'\\') {
        if want.get(..at) != Some(&rest[..at]) {
            return false;
        }
        let (bytes, used) = decode_escape(&rest[at..]);
        let Some(tail) = want[at..].strip_prefix(bytes.as_slice()) else {
            return false;
        };
        want = tail;
        rest = &rest[at + used..];
    }
    rest == want
}

/// The UTF-8 of one decoded escape (at most 4 bytes).
struct Decoded {
    buf: [u8; 4],
    len: u8,
}

impl Decoded {
    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

/// Decodes the escape at the start of `esc` (which begins with `\`) and
/// returns its UTF-8 and how many input bytes it used.
fn decode_escape(esc: &[u8]) -> (Decoded, usize) {
    let byte = |b: u8| Decoded {
        buf: [b, 0, 0, 0],
        len: 1,
    };
    let simple = match esc.get(1) {
        Some(b'"') => b'"',
        Some(b'\\') => b'\\',
        Some(b'/') => b'/',
        Some(b'b') => 0x08,
        Some(b'f') => 0x0c,
        Some(b'n') => b'\n',
        Some(b'r') => b'\r',
        Some(b't') => b'\t',
        Some(b'u') => {
            let Some(unit) = hex4(esc, 2) else {
                return (
                    Decoded {
                        buf: [0; 4],
                        len: 0,
                    },
                    esc.len().min(2),
                );
            };
            let (code, used) = match (unit, hex4_after_backslash_u(esc, 6)) {
                (0xd800..=0xdbff, Some(low @ 0xdc00..=0xdfff)) => {
                    (0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00), 12)
                }
                _ => (unit, 6),
            };
            let c = char::from_u32(code).unwrap_or('\u{fffd}');
            let mut buf = [0u8; 4];
            let len = c.encode_utf8(&mut buf).len() as u8;
            return (Decoded { buf, len }, used);
        }
        _ => {
            return (
                Decoded {
                    buf: [0; 4],
                    len: 0,
                },
                esc.len().min(2),
            );
        }
    };
    (byte(simple), 2)
}

/// The four hex digits at `bytes[at..at + 4]` as a number.
pub(crate) fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc << 4 | v)
    })
}

/// The code unit of a `\uXXXX` escape starting at `bytes[at]`, if there is one.
fn hex4_after_backslash_u(bytes: &[u8], at: usize) -> Option<u32> {
    match bytes.get(at..at + 2) {
        Some(b"\\u") => hex4(bytes, at + 2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unescape(body: &str) -> String {
        let mut out = Vec::new();
        unescape_into(body.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn known_escapes_decode_as_found_ones() {
        for body in [
            r#"a\"b\\c\/d\be\ff\ng\rh\ti"#,
            r#"\u00e9\uD83D\uDE00x\uD83D\uDE00"#,
            r#"\\\\\\"#,
            "plain",
            "",
            r#"\n"#,
        ] {
            let bytes = body.as_bytes();
            let mut escaped = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\\' {
                    escaped.push(i + 1);
                    i += 2;
                } else {
                    i += 1;
                }
            }
            let mut known = Vec::new();
            unescape_known(bytes, escaped.into_iter(), &mut known);
            let mut found = Vec::new();
            unescape_into(bytes, &mut found);
            assert_eq!(known, found, "{body}");
        }
    }

    #[test]
    fn simple_escapes() {
        assert_eq!(
            unescape(r#"a\"b\\c\/d\be\ff\ng\rh\ti"#),
            "a\"b\\c/d\u{8}e\u{c}f\ng\rh\ti"
        );
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape(""), "");
    }

    #[test]
    fn unicode_escapes_and_surrogate_pairs() {
        assert_eq!(unescape(r"\u0041\u00e9\u20AC"), "Aé€");
        assert_eq!(unescape(r"\ud83d\ude00!"), "😀!");
        assert_eq!(unescape(r"\uDBFF\uDFFF"), "\u{10FFFF}");
        assert_eq!(unescape(r"mod\u0065l"), "model");
        assert_eq!(unescape(r"\u0000"), "\0");
    }

    #[test]
    fn comparison_without_decoding_agrees_with_decoding() {
        for body in [
            r"model",
            r"mod\u0065l",
            r"a\nb",
            r"\ud83d\ude00",
            r"\/",
            r"",
            r"x\\",
        ] {
            let decoded = unescape(body);
            assert!(unescaped_eq(body.as_bytes(), decoded.as_bytes()), "{body}");
            assert!(!unescaped_eq(
                body.as_bytes(),
                format!("{decoded}x").as_bytes()
            ));
            if !decoded.is_empty() {
                assert!(!unescaped_eq(body.as_bytes(), &decoded.as_bytes()[1..]));
            }
        }
        assert!(!unescaped_eq(br"a\\b", br"a\\b"));
    }

    #[test]
    fn garbage_never_panics() {
        for body in [
            r"\",
            r"\u",
            r"\u12",
            r"\uZZZZ",
            r"\ud800",
            r"\ud800\u",
            r"\x",
        ] {
            let mut out = Vec::new();
            unescape_into(body.as_bytes(), &mut out);
        }
    }
}
