//! Decoding string bodies: escapes to UTF-8, into a caller's reused buffer.
//!
//! Only bodies that validation accepted reach here, and validation records
//! which strings contain escapes ([`crate::index`] links), so strings
//! without escapes are returned as slices of the input and never copied.

use crate::error::ErrorCode;
use crate::values::{bmp_run, unescape_blocks};

/// Appends the decoded form of the string body `body` (the bytes between
/// the quotes) to `out`.
///
/// `body` must have passed validation; on anything else this still
/// terminates without panicking, but the bytes produced are unspecified.
pub fn unescape_into(body: &[u8], out: &mut Vec<u8>) {
    unescape_at(body, out, out.len());
}

/// Decodes the string body `body` (as [`unescape_into`]) into `buf` in
/// place of what it held. Those bytes are room for the decoding: a
/// buffer reused from read to read is zeroed only where it grows, where
/// making room after a `clear` zeroed the whole body's length every
/// time (on a 100 KB message with an escape every 21 bytes, a sixth of
/// a read's instructions).
pub fn unescape_over(body: &[u8], buf: &mut Vec<u8>) {
    unescape_at(body, buf, 0);
}

/// Decodes `body` into `buf` from offset `start` (at most its length),
/// leaving `buf` cut to the end of the decoded bytes.
fn unescape_at(body: &[u8], buf: &mut Vec<u8>, start: usize) {
    // The output is never longer than the body, and an escape's decoded
    // bytes are stored as a fixed-size block of ESCAPE_SLACK (see
    // `Decoded`): room for both, written by index and cut to length after.
    // (Appending to `out` escape by escape checked its capacity and moved
    // its length each time: with this and a plain `\uXXXX` taken first,
    // `tools/lua_insns.sh esc-read` went from 210 784 instructions to
    // 197 924 at 9b90f3e.)
    let end = start + body.len() + ESCAPE_SLACK;
    if buf.len() < end {
        buf.resize(end, 0);
    }
    let written = unescape_to::<true>(body, &mut buf[start..end]);
    buf.truncate(start + written);
}

/// [`unescape_into`] one escape at a time, never by groups
/// ([`bmp_run`]): what the groups are tested against.
#[cfg(test)]
pub(crate) fn unescape_one_at_a_time(body: &[u8]) -> Vec<u8> {
    let mut out = vec![0; body.len() + ESCAPE_SLACK];
    let written = unescape_to::<false>(body, &mut out);
    out.truncate(written);
    out
}

/// Checks a SIMD decoder of string bodies that decodes a prefix of
/// `body` and gives where its reading and writing stopped (`bmp_run`'s
/// groups, `unescape_blocks`): what it wrote, then the rest decoded one
/// escape at a time, and `unescape_into` of the whole after other bytes,
/// each against one escape at a time throughout. Returns where it
/// stopped reading.
#[cfg(test)]
pub(crate) fn check_prefix_decoder(
    body: &[u8],
    decode: impl FnOnce(&[u8], &mut [u8]) -> (usize, usize),
) -> usize {
    let want = unescape_one_at_a_time(body);
    let mut dst = vec![0u8; body.len() + 4];
    let (r, w) = decode(body, &mut dst);
    assert!(w <= r && r <= body.len(), "{r} {w}");
    dst.truncate(w);
    dst.extend_from_slice(&unescape_one_at_a_time(&body[r..]));
    assert_eq!(dst, want, "{}", String::from_utf8_lossy(body));
    let mut whole = b"before".to_vec();
    unescape_into(body, &mut whole);
    assert_eq!(&whole[6..], want, "{}", String::from_utf8_lossy(body));
    r
}

/// Decodes `body` into `dst`, at least `ESCAPE_SLACK` bytes longer than
/// it, runs of `\uXXXX` by groups when `RUNS`; returns the bytes written.
/// Writing never overtakes reading (no escape decodes to more bytes than
/// it takes), so `w <= r` throughout and every store lands within `dst`.
fn unescape_to<const RUNS: bool>(body: &[u8], dst: &mut [u8]) -> usize {
    let (mut r, mut w) = (0, 0);
    if RUNS && body.len() >= BLOCKS_FROM && unescape_blocks::available() {
        // Text with an escape every few bytes, block by block, at twice
        // this loop's speed, up to where the blocks leave it to this loop:
        // a stretch with fewer escapes (source code, prose with a quote or
        // a line feed now and then), which this loop takes faster.
        (r, w) = unescape_blocks::decode(body, 0, dst, 0);
    }
    loop {
        // The bytes up to the next backslash, copied 16 at a time: each
        // chunk is stored whole, backslash or not (what follows it is
        // written over), so that the copy is two stores and no call.
        let at = loop {
            let Some(chunk) = body[r..].first_chunk::<16>() else {
                let Some(at) = find_backslash(&body[r..]) else {
                    let tail = &body[r..];
                    dst[w..w + tail.len()].copy_from_slice(tail);
                    return w + tail.len();
                };
                dst[w..w + at].copy_from_slice(&body[r..r + at]);
                break at;
            };
            dst[w..w + 16].copy_from_slice(chunk);
            if let Some(at) = backslash_in_16(chunk) {
                break at;
            }
            (r, w) = (r + 16, w + 16);
        };
        (r, w) = (r + at, w + at);
        // Escapes back to back need no search between them.
        while body.get(r) == Some(&b'\\') {
            // A two-byte escape first, one table look-up and one store:
            // code or markdown in a message has a `\n` on every line.
            if let Some(byte) = body.get(r + 1).and_then(|&c| short_escape(c)) {
                dst[w] = byte;
                (r, w) = (r + 2, w + 1);
                continue;
            }
            // A plain `\uXXXX` here rather than in `decode_escape` (which
            // `unescaped_eq` shares): there, esc-read took 201 166
            // instructions against 190 816.
            let (decoded, used) = match plain_unicode(body, r + 1) {
                Some(unit) => {
                    if RUNS && unit >= 0x800 {
                        // A character from U+0800: in text escaped
                        // throughout, the next ones are too; by fours while
                        // they are, from this one, so that a word of four
                        // (Chinese between ASCII commas) is one group.
                        let (after, end) = bmp_run::decode(body, r, dst, w);
                        if after != r {
                            (r, w) = (after, end);
                            continue;
                        }
                    }
                    (utf8(unit), 6)
                }
                None => decode_escape(&body[r..]),
            };
            dst[w..w + ESCAPE_SLACK].copy_from_slice(&decoded.buf);
            (r, w) = (r + used, w + usize::from(decoded.len));
        }
    }
}

/// The shortest body `unescape_to` decodes by blocks first: for a shorter
/// one the blocks' setup costs more than they save.
const BLOCKS_FROM: usize = 64;

/// The offset of the first `\` among the 16 bytes of `chunk`, if any:
/// one SSE2 compare (part of every x86-64 CPU, so no detection is needed).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn backslash_in_16(chunk: &[u8; 16]) -> Option<usize> {
    use core::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    // SAFETY: SSE2 is part of every x86-64 target; the unaligned load
    // reads the chunk's 16 bytes.
    let found = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)))
    };
    (found != 0).then(|| found.trailing_zeros() as usize)
}

/// The offset of the first `\` among the 16 bytes of `chunk`, if any:
/// two words at once (see [`position_of_either`]).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn backslash_in_16(chunk: &[u8; 16]) -> Option<usize> {
    let word = |k: usize| {
        let bytes = chunk[8 * k..8 * k + 8].try_into().unwrap_or_default();
        equal_bytes(u64::from_le_bytes(bytes), b'\\')
    };
    let found = u128::from(word(0)) | u128::from(word(1)) << 64;
    (found != 0).then(|| found.trailing_zeros() as usize / 8)
}

/// Checks and decodes the escape at the start of `esc` (which begins with
/// `\`), for text not validated yet: stores its UTF-8 at `dst[w..]`, which
/// has [`ESCAPE_SLACK`] bytes from there, and gives the bytes it takes and
/// the bytes it wrote, or `None` when it is invalid ([`escape`]).
#[inline(always)]
pub(crate) fn write_escape_checked(esc: &[u8], dst: &mut [u8], w: usize) -> Option<(usize, usize)> {
    let e = escape(esc).ok()?;
    let decoded = utf8(e.code);
    dst.get_mut(w..w + ESCAPE_SLACK)?
        .copy_from_slice(&decoded.buf);
    Some((usize::from(e.len), usize::from(decoded.len)))
}

/// The offset of the first `\` in `bytes`: eight bytes per step, as a
/// long string with a rare escape (a `\n` in a large message) would
/// otherwise be searched a byte at a time on every read.
#[inline]
fn find_backslash(bytes: &[u8]) -> Option<usize> {
    position_of_either(bytes, b'\\', b'\\')
}

/// The offset of the first byte of `bytes` equal to `a` or `b`, eight
/// bytes per step: for short searches run on every read (a string's next
/// escape, a path's next `.` or `[`), where a call to `memchr` costs more
/// than the search.
#[inline(always)]
pub(crate) fn position_of_either(bytes: &[u8], a: u8, b: u8) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
        let found = equal_bytes(word, a) | equal_bytes(word, b);
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&c| c == a || c == b)
        .map(|k| at + k)
}

/// The high bit of each byte of `word` that equals `c`: a zero byte of
/// the XOR sets it. Bytes above the first match may be flagged falsely (a
/// borrow runs upwards), below it never, so the lowest flag is exact.
#[inline(always)]
fn equal_bytes(word: u64, c: u8) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let x = word ^ (ONES * u64::from(c));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// Whether the validated string body `body` decodes to exactly `want`,
/// without decoding into memory.
pub fn unescaped_eq(body: &[u8], want: &[u8]) -> bool {
    let (mut rest, mut want) = (body, want);
    while let Some(at) = find_backslash(rest) {
        if want.get(..at) != Some(&rest[..at]) {
            return false;
        }
        let (decoded, used) = decode_escape(&rest[at..]);
        let Some(tail) = want[at..].strip_prefix(decoded.as_slice()) else {
            return false;
        };
        want = tail;
        rest = &rest[at + used..];
    }
    rest == want
}

/// Bytes of room a decoded escape needs past what it keeps: its UTF-8 is
/// stored as all of [`Decoded::buf`] ([`unescape_to`],
/// [`write_escape_checked`]).
pub(crate) const ESCAPE_SLACK: usize = 4;

/// The UTF-8 of one decoded escape (at most 4 bytes).
struct Decoded {
    buf: [u8; 4],
    len: u8,
}

impl Decoded {
    /// What garbage decodes to (see [`decode_escape`]).
    const NOTHING: Decoded = Decoded {
        buf: [0; 4],
        len: 0,
    };

    fn byte(b: u8) -> Decoded {
        Decoded {
            buf: [b, 0, 0, 0],
            len: 1,
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

/// A valid escape: the character it stands for and how many bytes it
/// takes (12 for a surrogate pair, whose halves are one character). Small,
/// like [`BadEscape`], so that [`escape`]'s result comes back in
/// registers.
#[derive(Clone, Copy)]
pub(crate) struct Escape {
    /// The code point: not a surrogate.
    code: u32,
    /// 2, 6 or 12.
    pub len: u8,
}

/// Why an escape is invalid, and where: the error's offset from the
/// escape's backslash.
#[derive(Clone, Copy)]
pub(crate) struct BadEscape {
    pub code: ErrorCode,
    pub at: u8,
}

impl BadEscape {
    fn new(code: ErrorCode, at: u8) -> BadEscape {
        BadEscape { code, at }
    }
}

/// For each byte that makes a two-byte escape after a backslash (`\"`,
/// `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`), the byte it stands for; 0
/// for every other byte (no short escape stands for 0). Also the table
/// `unescape_blocks` looks short escapes up in, 128 bytes at a time.
pub(crate) static SHORT_ESCAPES: [u8; 256] = {
    let mut table = [0; 256];
    let pairs = [
        (b'"', b'"'),
        (b'\\', b'\\'),
        (b'/', b'/'),
        (b'b', 0x08),
        (b'f', 0x0c),
        (b'n', b'\n'),
        (b'r', b'\r'),
        (b't', b'\t'),
    ];
    let mut i = 0;
    while i < pairs.len() {
        table[pairs[i].0 as usize] = pairs[i].1;
        i += 1;
    }
    table
};

/// The byte a backslash followed by `c` stands for, if that is a
/// two-byte escape: one table look-up.
#[inline(always)]
pub(crate) fn short_escape(c: u8) -> Option<u8> {
    match SHORT_ESCAPES[usize::from(c)] {
        0 => None,
        byte => Some(byte),
    }
}

/// Whether a backslash followed by `c` is a two-byte escape, which
/// validation tests before anything else for the newlines of chat
/// messages and issue bodies and the `\/` of URLs (`validate::escapes`).
#[inline(always)]
pub(crate) fn is_short_escape(c: u8) -> bool {
    short_escape(c).is_some()
}

/// The escape at the start of `esc` (which begins with `\`) by JSON's
/// rules, or why it is invalid. The one statement of those rules:
/// validation checks escapes with it (`validate::escapes`), the eager
/// decoder checks and decodes with it.
#[inline(always)]
pub(crate) fn escape(esc: &[u8]) -> Result<Escape, BadEscape> {
    let c = esc.get(1).copied().unwrap_or(0);
    if let Some(byte) = short_escape(c) {
        return Ok(Escape {
            code: u32::from(byte),
            len: 2,
        });
    }
    if c != b'u' {
        return Err(BadEscape::new(ErrorCode::InvalidEscape, 0));
    }
    let unit = hex4(esc, 2).ok_or(BadEscape::new(ErrorCode::InvalidUnicodeEscape, 0))?;
    if !is_surrogate(unit) {
        return Ok(Escape { code: unit, len: 6 });
    }
    // A high surrogate must be followed at once by a `\u` escape of a low
    // one.
    if unit >= 0xdc00 || esc.get(6..8) != Some(b"\\u") {
        return Err(BadEscape::new(ErrorCode::LoneSurrogate, 0));
    }
    let low = hex4(esc, 8).ok_or(BadEscape::new(ErrorCode::InvalidUnicodeEscape, 6))?;
    if !(0xdc00..=0xdfff).contains(&low) {
        return Err(BadEscape::new(ErrorCode::LoneSurrogate, 0));
    }
    Ok(Escape {
        code: 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00),
        len: 12,
    })
}

/// The code unit of the `\uXXXX` whose `u` is `bytes[at]`, when it is a
/// valid one of a character that is no surrogate: every escape of a text
/// escaped throughout (Python's `json.dumps`), which validation and reads
/// ([`unescape_into`]) take before the general case ([`escape`]) for the
/// result handling that saves.
#[inline(always)]
pub(crate) fn plain_unicode(bytes: &[u8], at: usize) -> Option<u32> {
    if bytes.get(at) != Some(&b'u') {
        return None;
    }
    hex4(bytes, at + 1).filter(|&unit| !is_surrogate(unit))
}

/// Whether the code unit of a `\uXXXX` is half of a surrogate pair
/// (0xD800 to 0xDFFF).
#[inline(always)]
fn is_surrogate(unit: u32) -> bool {
    unit & 0xf800 == 0xd800
}

/// [`escape`] for validated text, decoded: an invalid escape (garbage,
/// which only the unspecified output of [`unescape_into`] sees) decodes
/// to nothing and takes at most 2 bytes, so that decoding always moves
/// on.
#[inline(always)]
fn decode_escape(esc: &[u8]) -> (Decoded, usize) {
    match escape(esc) {
        Ok(e) => (utf8(e.code), usize::from(e.len)),
        Err(_) => (Decoded::NOTHING, esc.len().min(2)),
    }
}

/// The UTF-8 of the code point `code`: below 0x110000 and not a surrogate
/// (which [`escape`] never gives).
#[inline(always)]
fn utf8(code: u32) -> Decoded {
    // Each byte of the result is a u32 cut to its low 8 bits.
    let b = |v: u32| v as u8;
    if code < 0x80 {
        Decoded::byte(b(code))
    } else if code < 0x800 {
        Decoded {
            buf: [b(0xc0 | code >> 6), b(0x80 | code & 0x3f), 0, 0],
            len: 2,
        }
    } else if code < 0x10000 {
        Decoded {
            buf: [
                b(0xe0 | code >> 12),
                b(0x80 | code >> 6 & 0x3f),
                b(0x80 | code & 0x3f),
                0,
            ],
            len: 3,
        }
    } else {
        Decoded {
            buf: [
                b(0xf0 | code >> 18),
                b(0x80 | code >> 12 & 0x3f),
                b(0x80 | code >> 6 & 0x3f),
                b(0x80 | code & 0x3f),
            ],
            len: 4,
        }
    }
}

/// Byte `b`'s value as a hex digit (either case), if it is one: what
/// the tables of hex digits are built from (here, and the one of
/// `unescape_blocks`).
pub(crate) const fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Each byte's value as a hex digit, or [`NOT_HEX`] for a byte that is
/// none.
static HEX_DIGITS: [u32; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut b = 0;
    while b < 256 {
        if let Some(d) = hex_digit(b as u8) {
            table[b] = d as u32;
        }
        b += 1;
    }
    table
};

/// A bit above any four digits' value, however far it is shifted.
const NOT_HEX: u32 = 0x1_0000;

/// The four hex digits at `bytes[at..at + 4]` as a number: four table
/// reads and one comparison (a `\uXXXX`-escaped text, as Python's
/// `json.dumps` writes non-ASCII by default, has one every six bytes).
#[inline(always)]
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let &[a, b, c, d] = bytes.get(at..at + 4)? else {
        return None;
    };
    let digit = |x: u8| HEX_DIGITS[usize::from(x)];
    let value = digit(a) << 12 | digit(b) << 8 | digit(c) << 4 | digit(d);
    (value < NOT_HEX).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unescape(body: &str) -> String {
        let mut out = Vec::new();
        unescape_into(body.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    /// The decoded bytes of the escape at the start of `esc`, or its error.
    fn checked(esc: &str) -> Result<(Vec<u8>, usize), (ErrorCode, u8)> {
        let mut out = Vec::new();
        match escape(esc.as_bytes()) {
            Ok(e) => {
                out.extend_from_slice(utf8(e.code).as_slice());
                Ok((out, usize::from(e.len)))
            }
            Err(bad) => Err((bad.code, bad.at)),
        }
    }

    #[test]
    fn every_unicode_escape_decodes_as_std_does() {
        // Miri, which interprets every step, takes every 97th unit and
        // those at the edges of the ranges.
        let units: Vec<u32> = if cfg!(miri) {
            (0..=0xffff)
                .step_by(97)
                .chain([0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xd800, 0xdbff])
                .chain([0xdc00, 0xdfff, 0xe000, 0xffff])
                .collect()
        } else {
            (0..=0xffff).collect()
        };
        for unit in units {
            // Upper and lower case digits alike.
            let hex = if unit % 2 == 0 {
                format!("{unit:04x}")
            } else {
                format!("{unit:04X}")
            };
            let esc = format!("\\u{hex}\"");
            match unit {
                0xd800..=0xdbff => {
                    assert_eq!(checked(&esc), Err((ErrorCode::LoneSurrogate, 0)));
                    for low in [0xdc00, 0xdd0f, 0xdfff] {
                        let want: String = char::decode_utf16([unit as u16, low as u16])
                            .map(|c| c.unwrap())
                            .collect();
                        let pair = format!("\\u{hex}\\u{low:04x}");
                        assert_eq!(checked(&pair), Ok((want.into_bytes(), 12)), "{pair}");
                    }
                }
                0xdc00..=0xdfff => {
                    assert_eq!(checked(&esc), Err((ErrorCode::LoneSurrogate, 0)))
                }
                _ => {
                    let want = char::from_u32(unit).unwrap().to_string().into_bytes();
                    assert_eq!(checked(&esc), Ok((want, 6)), "{esc}");
                }
            }
        }
    }

    #[test]
    fn invalid_escapes_are_found_where_validation_reports_them() {
        for (esc, code, at) in [
            (r"\x", ErrorCode::InvalidEscape, 0),
            (r"\", ErrorCode::InvalidEscape, 0),
            (r"\U0041", ErrorCode::InvalidEscape, 0),
            (r"\u12G4", ErrorCode::InvalidUnicodeEscape, 0),
            (r"\u12", ErrorCode::InvalidUnicodeEscape, 0),
            (r"\u00e", ErrorCode::InvalidUnicodeEscape, 0),
            (r"\ud800", ErrorCode::LoneSurrogate, 0),
            (r"\ud800x", ErrorCode::LoneSurrogate, 0),
            (r"\ud800\n", ErrorCode::LoneSurrogate, 0),
            (r"\ud800\ud800", ErrorCode::LoneSurrogate, 0),
            (r"\ud800\u0041", ErrorCode::LoneSurrogate, 0),
            (r"\ud800\u12", ErrorCode::InvalidUnicodeEscape, 6),
            (r"\ud800\uzzzz", ErrorCode::InvalidUnicodeEscape, 6),
            (r"\udc00\ud800", ErrorCode::LoneSurrogate, 0),
        ] {
            assert_eq!(checked(esc), Err((code, at)), "{esc}");
        }
    }

    #[test]
    fn the_first_backslash_is_found_at_every_offset() {
        for len in 0..40 {
            for at in 0..=len {
                let mut bytes = vec![b'a'; len];
                // Bytes that a word-at-a-time search could mistake for `\`.
                for (k, b) in bytes.iter_mut().enumerate() {
                    *b = [b'a', 0x5b, 0x5d, 0xdc, 0x00, 0x5c ^ 0x80][k % 6];
                }
                if at < len {
                    bytes[at] = b'\\';
                    for b in &mut bytes[at + 1..] {
                        if *b == 0x5c ^ 0x80 {
                            *b = b'\\';
                        }
                    }
                }
                let want = bytes.iter().position(|&b| b == b'\\');
                assert_eq!(find_backslash(&bytes), want, "{bytes:?}");
            }
        }
    }

    #[test]
    fn escapes_at_every_offset_of_the_copied_chunks_decode_as_serde_does() {
        // The bytes between escapes are copied 16 at a time: an escape,
        // or two back to back, at every offset of the first chunks of
        // bodies of every length, decoded in place of a buffer's old
        // bytes (reused, as a read's is) and appended after others.
        let escapes = [
            r"\n",
            r#"\""#,
            r"\\",
            r"\u00e9",
            r"\u4e2d",
            r"\ud83d\ude00",
            r"\b",
        ];
        let step = if cfg!(miri) { 7 } else { 1 };
        let mut reused = b"old bytes, longer than some bodies and shorter than others".to_vec();
        for len in (0..48).step_by(step) {
            for at in (0..=len).step_by(step) {
                for (k, esc) in escapes.iter().enumerate() {
                    let second = escapes[(k + 3) % escapes.len()];
                    let filler = |n: usize| {
                        "0123456789abcdéf"
                            .chars()
                            .cycle()
                            .take(n)
                            .collect::<String>()
                    };
                    let body = format!(
                        "{}{esc}{}{second}{}",
                        filler(at),
                        filler(k),
                        filler(len - at)
                    );
                    let want: String = serde_json::from_str(&format!("\"{body}\"")).unwrap();
                    unescape_over(body.as_bytes(), &mut reused);
                    assert_eq!(reused, want.as_bytes(), "{body}");
                    let mut appended = b"before".to_vec();
                    unescape_into(body.as_bytes(), &mut appended);
                    assert_eq!(&appended[6..], want.as_bytes(), "{body}");
                    assert_eq!(unescape_one_at_a_time(body.as_bytes()), want.as_bytes());
                }
            }
        }
    }

    #[test]
    fn hex_digits_are_read_as_std_reads_them() {
        let want = |digits: &[u8; 4]| {
            digits.iter().try_fold(0, |acc, &d| {
                char::from(d).to_digit(16).map(|v| acc << 4 | v)
            })
        };
        for pos in 0..4 {
            for b in 0..=255u8 {
                let mut digits = *b"09aF";
                digits[pos] = b;
                assert_eq!(hex4(&digits, 0), want(&digits), "{digits:?}");
            }
        }
        // Two bytes at a time across the ranges' edges.
        let edges = [
            0, b'/', b'0', b'9', b':', b'@', b'A', b'F', b'G', b'`', b'a', b'f', b'g', 0x7f, 0x80,
            0xff,
        ];
        for &p in &edges {
            for &q in &edges {
                let digits = [b'7', p, q, b'c'];
                assert_eq!(hex4(&digits, 0), want(&digits), "{digits:?}");
            }
        }
        assert_eq!(hex4(b"\\u12", 2), None, "cut short");
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
