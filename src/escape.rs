//! Escaping string contents for the encoder (`lua/qjson/encode.lua`),
//! byte for byte as lua-cjson 2.1 writes them.
//!
//! cjson escapes `"` and `\` with a backslash, the control bytes that have
//! a short form (`\b \f \n \r \t`) with it, every other byte below 0x20
//! and DEL (0x7f) as `\u00XX`, and `/` as `\/` unless told not to. Every
//! other byte, UTF-8 or not, is copied as is. Doing this natively keeps the
//! encoder's per-string cost at one FFI call instead of a Lua pattern scan
//! (which LuaJIT cannot compile) plus a `gsub`.

/// The longest escape of one byte (`\u00XX`).
pub const MAX_ESCAPE: usize = 6;

/// What one source byte becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Copied as is.
    Plain,
    /// A backslash and this byte.
    Short(u8),
    /// `\u00XX`.
    Unicode,
    /// `/`: `\/` or `/`, as asked.
    Slash,
}

const fn classes() -> [Class; 256] {
    let mut table = [Class::Plain; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = Class::Unicode;
        byte += 1;
    }
    table[0x7f] = Class::Unicode;
    table[b'\x08' as usize] = Class::Short(b'b');
    table[b'\x0c' as usize] = Class::Short(b'f');
    table[b'\n' as usize] = Class::Short(b'n');
    table[b'\r' as usize] = Class::Short(b'r');
    table[b'\t' as usize] = Class::Short(b't');
    table[b'"' as usize] = Class::Short(b'"');
    table[b'\\' as usize] = Class::Short(b'\\');
    table[b'/' as usize] = Class::Slash;
    table
}

static CLASSES: [Class; 256] = classes();

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether any of the 8 bytes in `word` may need escaping: below 0x20,
/// `"`, `\`, `/` or DEL. False positives are fine (the byte loop decides);
/// a false negative is impossible because each test is exact per byte
/// apart from carries, which only ever add positives.
fn may_need_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    below_space
        | has_zero(word ^ (ONES * u64::from(b'"')))
        | has_zero(word ^ (ONES * u64::from(b'\\')))
        | has_zero(word ^ (ONES * u64::from(b'/')))
        | has_zero(word ^ (ONES * 0x7f))
        != 0
}

fn copied_as_is(class: Class, escape_slash: bool) -> bool {
    class == Class::Plain || (class == Class::Slash && !escape_slash)
}

/// Writes the escaped form of a prefix of `src` into `dst` and returns
/// `(consumed, written)`: the longest prefix whose escaped form fits, so
/// an escape is never cut. `dst.len() >= MAX_ESCAPE` guarantees progress
/// on a non-empty `src`.
pub fn escape(src: &[u8], escape_slash: bool, dst: &mut [u8]) -> (usize, usize) {
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        // Copy the run of bytes that need nothing, 8 at a time where the
        // room allows.
        let mut run = read;
        while run + 8 <= src.len() && written + (run - read) + 8 <= dst.len() {
            let word = u64::from_le_bytes(src[run..run + 8].try_into().expect("8 bytes"));
            if may_need_escape(word) {
                break;
            }
            run += 8;
        }
        while run < src.len()
            && written + (run - read) < dst.len()
            && copied_as_is(CLASSES[src[run] as usize], escape_slash)
        {
            run += 1;
        }
        let plain = run - read;
        dst[written..written + plain].copy_from_slice(&src[read..run]);
        written += plain;
        read = run;
        if read == src.len() {
            break;
        }
        let byte = src[read];
        let short;
        let unicode;
        let escaped: &[u8] = match CLASSES[byte as usize] {
            Class::Short(c) => {
                short = [b'\\', c];
                &short
            }
            Class::Unicode => {
                unicode = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 15)],
                ];
                &unicode
            }
            Class::Slash if escape_slash => b"\\/",
            // A byte copied as is: the run stopped because dst is full.
            Class::Plain | Class::Slash => break,
        };
        if written + escaped.len() > dst.len() {
            break;
        }
        dst[written..written + escaped.len()].copy_from_slice(escaped);
        written += escaped.len();
        read += 1;
    }
    (read, written)
}

/// The same escaping written out one byte at a time, as lua-cjson's table
/// reads: the definition the unit tests and the `escape` fuzz target hold
/// [`escape`] to.
#[doc(hidden)]
pub fn escape_reference(src: &[u8], escape_slash: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in src {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' if escape_slash => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..0x20 | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The escaped form of `src` through a destination of `room` bytes at
    /// a time, as the encoder's loop calls it.
    fn escaped(src: &[u8], escape_slash: bool, room: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = 0;
        let mut dst = vec![0; room];
        while at < src.len() {
            let (read, written) = escape(&src[at..], escape_slash, &mut dst);
            assert!(read > 0, "no progress at {at} with room {room}");
            out.extend_from_slice(&dst[..written]);
            at += read;
        }
        out
    }

    #[test]
    fn matches_cjson_escapes() {
        assert_eq!(
            escaped(b"a\"b\\c/d\x01\x7f\n", true, 64),
            b"a\\\"b\\\\c\\/d\\u0001\\u007f\\n"
        );
        assert_eq!(escaped(b"http://x/", false, 64), b"http://x/");
        assert_eq!(
            escaped("h\u{e9}\u{1F600}".as_bytes(), true, 64),
            "h\u{e9}\u{1F600}".as_bytes()
        );
    }

    #[test]
    fn every_byte_in_every_position_and_room() {
        for byte in 0..=255u8 {
            for position in 0..20 {
                let mut src = vec![b'x'; 19];
                src.insert(position, byte);
                for slash in [true, false] {
                    let want = escape_reference(&src, slash);
                    for room in [MAX_ESCAPE, 7, 8, 9, 15, 16, 17, 200] {
                        assert_eq!(
                            escaped(&src, slash, room),
                            want,
                            "{byte} at {position}, {room}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn random_text_matches_the_reference() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 100) as usize;
            let src: Vec<u8> = (0..len)
                .map(|i| {
                    let r = seed.rotate_left(i as u32 * 5) as u8;
                    // Mostly plain text, with escapes sprinkled in.
                    if r.is_multiple_of(7) {
                        r % 0x30
                    } else {
                        b'a' + r % 26
                    }
                })
                .collect();
            for room in [MAX_ESCAPE, 11, 64, 1000] {
                assert_eq!(escaped(&src, true, room), escape_reference(&src, true));
                assert_eq!(escaped(&src, false, room), escape_reference(&src, false));
            }
        }
    }
}
