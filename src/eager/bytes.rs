//! Finding the end of a string and of a run of whitespace, a chunk of
//! bytes at a time: 16 with SSE2 on x86-64 (part of every x86-64 CPU, so
//! no detection is needed), 8 in a `u64` word elsewhere.
//!
//! Every function reads the text with `get` only: they run between calls
//! into Lua's API and must not panic.

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

/// Finds the closing quote of the string whose body starts at `start`:
/// returns its offset, whether the body has escapes (their escaped
/// bytes' offsets are then in `escaped`) and whether it may have bytes of
/// 0x80 or more (then to be checked as UTF-8); `None` at a raw control
/// byte or at the end of the text.
#[inline(always)]
pub(super) fn scan_string(
    src: &[u8],
    start: usize,
    escaped: &mut Vec<u32>,
) -> Option<(usize, bool, bool)> {
    let mut i = start;
    let mut non_ascii = false;
    let mut escapes_in = false;
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
            (None, None) => return scan_string_bytes(src, i, escaped, escapes_in, non_ascii),
        };
        non_ascii |= high != 0;
        if special == 0 {
            i += SCAN;
            continue;
        }
        i += special.trailing_zeros() as usize;
        match *src.get(i)? {
            b'"' => return Some((i, escapes_in, non_ascii)),
            b'\\' => {
                note_escape(escaped, &mut escapes_in, i);
                i += 2;
            }
            _ => return None,
        }
    }
}

/// Records the backslash at `i` (the offset of the byte it escapes); the
/// string's first one clears what an earlier string left in `escaped`.
#[inline(always)]
fn note_escape(escaped: &mut Vec<u32>, escapes_in: &mut bool, i: usize) {
    if !*escapes_in {
        *escapes_in = true;
        escaped.clear();
    }
    escaped.push((i + 1) as u32);
}

/// [`scan_string`] byte by byte, from `i` on.
fn scan_string_bytes(
    src: &[u8],
    mut i: usize,
    escaped: &mut Vec<u32>,
    mut escapes_in: bool,
    mut non_ascii: bool,
) -> Option<(usize, bool, bool)> {
    loop {
        match *src.get(i)? {
            b'"' => return Some((i, escapes_in, non_ascii)),
            b'\\' => {
                note_escape(escaped, &mut escapes_in, i);
                i += 2;
            }
            0..=0x1f => return None,
            b => {
                non_ascii |= b > 0x7f;
                i += 1;
            }
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
        for _ in 0..100_000 {
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
