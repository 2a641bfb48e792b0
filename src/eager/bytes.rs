//! Finding the end of a string and of a run of whitespace, and decoding a
//! string with escapes ([`decode_escaped`]), a chunk of bytes at a time:
//! 16 with SSE2 on x86-64 (part of every x86-64 CPU, so no detection is
//! needed), 8 in a `u64` word elsewhere. A string still
//! going after 64 bytes goes on in the active SIMD kernel's 64-byte
//! blocks, four per test through plain ASCII, as stage 1 skips strings
//! ([`scan::string_content_run`]): `qjson.decode(text, { lazy = false })`
//! of the 1 MB chat request (a base64 image) went from 5 515 to 21 818
//! decodes a second, 7.5x to 20.9x OpenResty's cjson
//! (`luajit benches/lua_bench.lua "chat 1 MB"`, AVX-512; 10 MB: 5.9x to
//! 14.5x), and `tools/lua_insns.sh cjk-eager` (AVX2) from 30 514 to
//! 24 871 instructions.
//!
//! Every function reads the text with `get` only: they run between calls
//! into Lua's API and must not panic.

use crate::scan;
use crate::values::{bmp_run, string, unescape_blocks};

/// Chunks of string content [`next_special`] reads itself before it hands
/// the rest of a string to the SIMD kernel's 64-byte blocks
/// ([`scan::string_content_run`]): past these a string is long enough that
/// the kernel's call pays for itself.
const LONG_STRING_CHUNKS: usize = 64 / SCAN;

/// Bytes of JSON whitespace.
#[inline(always)]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The offset of the first byte at or after `i` that is not whitespace
/// (the text's length if none is). Most values follow their separator at
/// once; indentation is skipped a chunk at a time.
#[inline(always)]
pub(super) fn skip_space(src: &[u8], mut i: usize) -> usize {
    match src.get(i) {
        Some(&b) if b > b' ' => return i,
        None => return i,
        _ => {}
    }
    while let Some(chunk) = src.get(i..i + SCAN) {
        let not_space = !spaces(chunk) & ((1 << SCAN) - 1);
        if not_space != 0 {
            return i + not_space.trailing_zeros() as usize;
        }
        i += SCAN;
    }
    while src.get(i).copied().is_some_and(is_space) {
        i += 1;
    }
    i
}

/// The first byte at or after `i` that is `"`, `\` or below 0x20 (its
/// offset), and whether a byte of 0x80 or more may come before it (then
/// the string is to be checked as UTF-8); `None` at the end of the text.
#[inline(always)]
fn next_special(src: &[u8], mut i: usize) -> Option<(usize, bool)> {
    let mut non_ascii = false;
    let mut chunks = 0;
    // Texts shorter than a chunk are read byte by byte.
    let last_chunk = src.len().checked_sub(SCAN);
    loop {
        // A chunk at a time while it holds no quote, backslash or control
        // byte. Near the end, the text's last chunk, without the bytes
        // before `i`.
        let (special, high) = match (src.get(i..i + SCAN), last_chunk) {
            (Some(chunk), _) => specials(chunk),
            (None, Some(from)) if i < src.len() => {
                let (special, high) = specials(src.get(from..)?);
                let shift = (i - from) as u32;
                (special >> shift, high >> shift)
            }
            (None, Some(_)) => return None,
            (None, None) => return next_special_bytes(src, i, non_ascii),
        };
        non_ascii |= high != 0;
        if special != 0 {
            return Some((i + special.trailing_zeros() as usize, non_ascii));
        }
        i += SCAN;
        chunks += 1;
        if chunks == LONG_STRING_CHUNKS {
            // A long string (a base64 image, a long message): its whole
            // blocks by the SIMD kernel, as stage 1 skips them.
            let (run, high) = scan::string_content_run(src.get(i..).unwrap_or_default());
            i += run;
            non_ascii |= high;
        }
    }
}

/// [`next_special`] byte by byte, from `i` on.
fn next_special_bytes(src: &[u8], mut i: usize, mut non_ascii: bool) -> Option<(usize, bool)> {
    loop {
        match *src.get(i)? {
            b'"' | b'\\' | 0..=0x1f => return Some((i, non_ascii)),
            b => {
                non_ascii |= b > 0x7f;
                i += 1;
            }
        }
    }
}

/// How a string's body, from its start, reads on: to its closing quote,
/// or to its first backslash (then [`decode_escaped`] takes over).
pub(super) enum Body {
    /// No escapes: the closing quote is at this offset.
    Plain(usize),
    /// The first escape's backslash is at this offset.
    Escaped(usize),
}

/// Reads the string whose body starts at `start` up to its closing quote
/// or its first backslash; also gives whether the body read may have
/// bytes of 0x80 or more (then to be checked as UTF-8). `None` at a raw
/// control byte or at the end of the text.
#[inline(always)]
pub(super) fn scan_string(src: &[u8], start: usize) -> Option<(Body, bool)> {
    let (at, non_ascii) = next_special(src, start)?;
    match *src.get(at)? {
        b'"' => Some((Body::Plain(at), non_ascii)),
        b'\\' => Some((Body::Escaped(at), non_ascii)),
        _ => None,
    }
}

/// Room [`decode_escaped`] keeps in its buffer past where it writes: a
/// chunk copied whole, an escape's UTF-8 stored whole
/// ([`string::ESCAPE_SLACK`]) or a group of `\uXXXX` escapes
/// ([`bmp_run::GROUP_WRITE`]).
const ROOM: usize = max(SCAN, max(string::ESCAPE_SLACK, bmp_run::GROUP_WRITE));

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// Makes `out` at least [`ROOM`] bytes longer than `w`. Its bytes are
/// room to decode into, kept from string to string (and from decode to
/// decode, in the scratch), so they are zeroed only where it grows.
#[inline(always)]
fn make_room(out: &mut Vec<u8>, w: usize) {
    if out.len() < w + ROOM {
        grow(out, w + ROOM);
    }
}

/// Lengthens `out` to `len` at least, and at least doubles it, so that
/// the zeroing is linear in the longest string decoded.
#[cold]
#[inline(never)]
fn grow(out: &mut Vec<u8>, len: usize) {
    out.resize(len.max(2 * out.len()), 0);
}

/// Decodes the groups of four `\uXXXX` escapes from U+0800 (no
/// surrogate) at `src[i]` into `out[w..]` ([`bmp_run::decode`], which
/// checks them as validation would); gives where reading and writing
/// stop.
fn decode_bmp_run(src: &[u8], mut i: usize, out: &mut Vec<u8>, mut w: usize) -> (usize, usize) {
    loop {
        let (r, end) = bmp_run::decode(src, i, out, w);
        // Stopped by the escapes (or the text's end) while room for
        // another group was left: done; else by the room.
        if r == i || end + bmp_run::GROUP_WRITE <= out.len() {
            return (r, end);
        }
        grow(out, end + ROOM);
        (i, w) = (r, end);
    }
}

/// Decodes the string whose body starts at `start` into `out`, checking
/// each escape as it goes (`values::string::escape`), from its first
/// backslash at `backslash` on ([`scan_string`] found it): one pass,
/// however dense the escapes (a `\uXXXX`-escaped text has one every six
/// bytes). Gives the closing quote's offset, the length of the decoded
/// string (`out[..len]`; the bytes after it are room, see [`make_room`])
/// and whether the body after `backslash` may have bytes of 0x80 or more;
/// `None` at an invalid escape, a raw control byte or the end of the
/// text.
///
/// Written as reads decode (`values::string::unescape_over`): by index
/// into room made ahead, the bytes between escapes a chunk at a time as
/// they are searched, each chunk stored whole and the bytes from its
/// first special one written over next, and a two-byte escape by one
/// look-up and one store. Whether a byte of 0x80 or more was seen is
/// gathered as the chunks' masks ORed together and tested once at the
/// end: a flag set chunk by chunk stayed in memory, a dependency from
/// each chunk to the next. The eager decode of source code in a chat
/// message (an escape every 21 bytes) runs 1.5 times as fast as when
/// this appended to `out` with a `memcpy` between escapes
/// (docs/benchmarks.md, "The eager decoder on escape-dense text"). With
/// AVX-512 a string whose first 64 bytes hold four escapes or more goes
/// 64 bytes at a time first (`unescape_blocks::decode_string`, which
/// checks what it decodes and leaves the rest here): text escaped a word
/// at a time decodes about three times as fast (docs/benchmarks.md,
/// "Escaped text by blocks").
#[inline(never)]
pub(super) fn decode_escaped(
    src: &[u8],
    start: usize,
    backslash: usize,
    out: &mut Vec<u8>,
) -> Option<(usize, usize, bool)> {
    let head = src.get(start..backslash)?;
    let mut w = head.len();
    make_room(out, w);
    out.get_mut(..w)?.copy_from_slice(head);
    let mut i = backslash;
    let mut non_ascii = false;
    if unescape_blocks::worth_trying(src, i) {
        // Text with an escape every few bytes, 64 bytes at a time, as
        // reads decode it: up to the string's end, or to where the loop
        // below does better (`unescape_blocks::decode_string`).
        loop {
            if out.len() < w + 64 {
                grow(out, w + 64);
            }
            let run = unescape_blocks::decode_string(src, i, out, w);
            (i, w, non_ascii) = (run.r, run.w, non_ascii | run.high);
            if !run.room {
                break;
            }
        }
    }
    // The high bits of the chunks' bytes before their first special one.
    let mut high_bits = 0;
    loop {
        // The escape at `i` and any right after it: no search between.
        while src.get(i) == Some(&b'\\') {
            make_room(out, w);
            if let Some(byte) = src.get(i + 1).and_then(|&c| string::short_escape(c)) {
                *out.get_mut(w)? = byte;
                (i, w) = (i + 2, w + 1);
                continue;
            }
            if matches!(src.get(i + 1..i + 4), Some([b'u', d, e])
                        if (*d != b'0' || *e >= b'8') && (*d | 0x20 != b'd' || *e < b'8'))
            {
                // A `\uXXXX` of a character from U+0800 that is no
                // surrogate, by its first two digits: in text escaped
                // throughout, the next ones are too; by fours while they
                // are, from this one, as reads decode them
                // (`values::string`).
                let (r, end) = decode_bmp_run(src, i, out, w);
                if r != i {
                    (i, w) = (r, end);
                    continue;
                }
            }
            let (used, wrote) = string::write_escape_checked(src.get(i..)?, out, w)?;
            (i, w) = (i + used, w + wrote);
        }
        let mut chunks = 0;
        let at = loop {
            let chunk = match src.get(i..).and_then(<[u8]>::first_chunk::<SCAN>) {
                Some(chunk) if chunks < LONG_STRING_CHUNKS => chunk,
                // The text's last bytes, or a long run: searched on (by
                // the SIMD kernel past a few chunks), then copied.
                _ => {
                    let (at, high) = next_special(src, i)?;
                    non_ascii |= high;
                    let run = src.get(i..at)?;
                    make_room(out, w + run.len());
                    out.get_mut(w..w + run.len())?.copy_from_slice(run);
                    w += run.len();
                    break at;
                }
            };
            make_room(out, w);
            out.get_mut(w..w + SCAN)?.copy_from_slice(chunk);
            let (special, high) = specials(chunk);
            if special != 0 {
                // Of the chunk, only the bytes before its first special
                // one are kept.
                high_bits |= high & (special ^ special.wrapping_sub(1));
                let k = special.trailing_zeros() as usize;
                w += k;
                break i + k;
            }
            high_bits |= high;
            (i, w) = (i + SCAN, w + SCAN);
            chunks += 1;
        };
        match *src.get(at)? {
            b'"' => return Some((at, w, non_ascii || high_bits != 0)),
            b'\\' => i = at,
            _ => return None,
        }
    }
}

/// Bytes [`specials`] looks at once.
#[cfg(target_arch = "x86_64")]
const SCAN: usize = 16;
#[cfg(not(target_arch = "x86_64"))]
const SCAN: usize = 8;

/// For `SCAN` bytes: a mask with bit `k` set when byte `k` is `"`, `\`
/// or below 0x20, and one with bit `k` set when it is above 0x7F. SSE2
/// (part of every x86-64 CPU, so no detection is needed): three
/// compares, three masks.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn specials(chunk: &[u8]) -> (u32, u32) {
    use core::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    if chunk.len() < SCAN {
        return (1, 0);
    }
    // SAFETY: SSE2 is part of every x86-64 target; the unaligned load
    // reads the chunk's 16 bytes (just checked).
    let (quote_or_backslash, below_0x20_signed, high) = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let qb = _mm_or_si128(
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
        );
        // Signed, bytes above 0x7F are below 0x20 too: masked out below.
        let lt = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
        (
            _mm_movemask_epi8(qb) as u32,
            _mm_movemask_epi8(lt) as u32,
            _mm_movemask_epi8(v) as u32,
        )
    };
    (quote_or_backslash | (below_0x20_signed & !high), high)
}

/// For `SCAN` bytes: a mask with bit `k` set when byte `k` is JSON
/// whitespace. SSE2, four compares.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn spaces(chunk: &[u8]) -> u32 {
    use core::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    if chunk.len() < SCAN {
        return 0;
    }
    // SAFETY: SSE2 is part of every x86-64 target; the unaligned load
    // reads the chunk's 16 bytes (just checked).
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let is = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
        let ws = _mm_or_si128(
            _mm_or_si128(is(b' '), is(b'\n')),
            _mm_or_si128(is(b'\r'), is(b'\t')),
        );
        _mm_movemask_epi8(ws) as u32
    }
}

/// [`specials`] eight bytes at a time in a `u64` word. Exact in every
/// byte, not only the lowest flagged one (the usual `(v - 0x01..) & !v`
/// test lets a borrow flag the byte above a match): a string's tail is
/// read as the text's last chunk with its first bytes shifted out, which
/// would bring such a byte to the bottom. Each byte's low seven bits are
/// added to a constant that carries into its own high bit only, never
/// into the next byte.
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn specials_by_word(chunk: &[u8]) -> (u32, u32) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let Some(word) = chunk.get(..8) else {
        return (1, 0);
    };
    let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
    // High bit set where the byte is 0.
    let zero = |v: u64| !(((v & LOW7) + LOW7) | v) & HIGHS;
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let backslash = zero(w ^ (ONES * u64::from(b'\\')));
    // A byte below 0x80 reaches 0x80 with 0x60 added from 0x20 up.
    let control = !(((w & LOW7) + ONES * 0x60) | w) & HIGHS;
    // Bit 8k + 7 becomes bit k.
    let gather = |flags: u64| ((flags >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32;
    (gather(quote | backslash | control), gather(w & HIGHS))
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn specials(chunk: &[u8]) -> (u32, u32) {
    specials_by_word(chunk)
}

/// [`spaces`] eight bytes at a time: runs of indentation.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn spaces(chunk: &[u8]) -> u32 {
    const SPACES: u64 = u64::from_le_bytes([b' '; 8]);
    match chunk.get(..8) {
        Some(word) if u64::from_le_bytes(word.try_into().unwrap_or_default()) == SPACES => 0xff,
        Some(word) => word
            .iter()
            .take_while(|&&b| is_space(b))
            .fold(0, |m, _| m << 1 | 1),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// Both chunk scanners find the first quote, backslash or control byte
    /// exactly, and whether any byte is above 0x7F.
    #[test]
    fn specials_find_the_first_special_byte() {
        let mut rng = Rng::new(5);
        let alphabet = b"ab \"\\\x00\x1f\x20\x7f\x80\xc3\xa9\xff~!\n\r\t      ";
        let first = |bytes: &[u8]| {
            bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .map_or(64, |k| k as u32)
        };
        let found = |special: u32| {
            if special == 0 {
                64
            } else {
                special.trailing_zeros()
            }
        };
        for _ in 0..crate::testing::rounds(100_000) {
            let chunk: Vec<u8> = (0..SCAN).map(|_| rng.pick(alphabet)).collect();
            let high_mask = |bytes: &[u8]| {
                bytes
                    .iter()
                    .enumerate()
                    .fold(0u32, |m, (k, &b)| m | u32::from(b > 0x7f) << k)
            };
            let special_mask = |bytes: &[u8]| {
                bytes.iter().enumerate().fold(0u32, |m, (k, &b)| {
                    m | u32::from(b == b'"' || b == b'\\' || b < 0x20) << k
                })
            };
            // Exact in every byte: the tail of a string is read shifted.
            let (special, high) = specials(&chunk);
            assert_eq!(found(special), first(&chunk), "{chunk:?}");
            assert_eq!(special, special_mask(&chunk), "{chunk:?}");
            assert_eq!(high, high_mask(&chunk));
            let (special, high) = specials_by_word(&chunk[..8]);
            assert_eq!(found(special), first(&chunk[..8]), "{chunk:?}");
            assert_eq!(special, special_mask(&chunk[..8]), "{chunk:?}");
            assert_eq!(high, high_mask(&chunk[..8]));
            let ws = chunk
                .iter()
                .enumerate()
                .fold(0u32, |m, (k, &b)| m | u32::from(is_space(b)) << k);
            let got = spaces(&chunk);
            let run = |m: u32| (!m).trailing_zeros();
            assert_eq!(run(got), run(ws), "{chunk:?}");
        }
    }
}
