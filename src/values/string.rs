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
        rest = &rest[at..];
        let consumed = decode_escape(rest, out);
        rest = &rest[consumed..];
    }
    out.extend_from_slice(rest);
}

/// Decodes the escape at the start of `esc` (which begins with `\`),
/// appends its UTF-8 to `out` and returns how many input bytes it used.
fn decode_escape(esc: &[u8], out: &mut Vec<u8>) -> usize {
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
                return esc.len().min(2);
            };
            let (code, used) = match (unit, hex4_after_backslash_u(esc, 6)) {
                (0xd800..=0xdbff, Some(low @ 0xdc00..=0xdfff)) => {
                    (0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00), 12)
                }
                _ => (unit, 6),
            };
            push_utf8(char::from_u32(code).unwrap_or('\u{fffd}'), out);
            return used;
        }
        _ => return esc.len().min(2),
    };
    out.push(simple);
    2
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

fn push_utf8(c: char, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
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
