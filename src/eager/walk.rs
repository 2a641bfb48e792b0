//! The walk of eager decode: the grammar of [`crate::validate`] and the
//! string checks of stage 1, read straight from the bytes, each value
//! handed to the [`Stack`] as it completes.
//!
//! What stage 1 checks over every byte is checked where it can matter:
//! inside strings, raw control bytes and UTF-8 (a string with a byte of
//! 0x80 or more is checked as a whole); outside strings any byte that is
//! not whitespace, structure or the start of a number or literal fails
//! the grammar, as its stage-1 entry (a scalar start) would. Escapes go
//! through validation's own check (`validate::escapes`), given the
//! offsets of the string's escaped bytes as stage 1 would list them;
//! numbers and literals through its number and literal checks. Strings
//! are searched 16 bytes at a time (SSE2 on x86-64, which every x86-64
//! CPU has; eight bytes in a `u64` elsewhere), whitespace runs eight
//! spaces at a time.
//!
//! Bytes are read with `get`, a read past the text giving 0, which
//! nothing accepts; so nothing here can panic or read outside the text:
//! this code runs between calls into the sink (Lua's API).

use super::{CHUNK, Flow, Stack, Stop};
use crate::validate::{ends_scalar, escapes, literal};
use crate::values::{number, string};

/// An open container that is not the innermost one (see the locals of
/// [`decode`], which hold the innermost).
#[derive(Clone, Copy, Debug)]
struct Open {
    close: u8,
    count: u32,
    stored: u32,
    keys_from: u32,
    distinct: bool,
    seen: u64,
}

/// The walk's reusable memory.
#[derive(Default, Debug)]
pub(super) struct Scratch {
    open: Vec<Open>,
    /// The keys of the open objects' current chunks, while they are all
    /// different: offset and length in the text.
    keys: Vec<(u32, u32)>,
    /// A string's escaped bytes.
    escaped: Vec<u32>,
    /// A string decoded.
    decoded: Vec<u8>,
}

impl Scratch {
    /// Bytes of heap held for the next decode.
    pub(super) fn retained_bytes(&self) -> usize {
        self.open.capacity() * size_of::<Open>()
            + self.keys.capacity() * 8
            + self.escaped.capacity() * 4
            + self.decoded.capacity()
    }
}

/// Bytes of JSON whitespace.
#[inline(always)]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The offset of the first byte at or after `i` that is not whitespace
/// (the text's length if none is). Most values follow their separator at
/// once; indentation is skipped a chunk at a time.
#[inline(always)]
fn skip_space(src: &[u8], mut i: usize) -> usize {
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

/// The bit of a key (no escapes) in its object's [`Open::seen`]: equal
/// keys have the same bit.
#[inline(always)]
fn key_bit(key: &[u8]) -> u64 {
    let first = key.first().copied().unwrap_or(0);
    let last = key.last().copied().unwrap_or(0);
    let h = (key.len() as u32)
        .wrapping_mul(7)
        .wrapping_add(u32::from(first).wrapping_mul(31))
        .wrapping_add(u32::from(last).wrapping_mul(17));
    1 << (h & 63)
}

/// Decodes `src` into `stack`; `Err(Stop::Invalid)` when the text is not
/// valid JSON or nests deeper than `max_depth`.
pub(super) fn decode<S: Stack>(
    src: &[u8],
    max_depth: usize,
    scratch: &mut Scratch,
    stack: &mut S,
) -> Flow {
    let Scratch {
        open,
        keys,
        escaped,
        decoded,
    } = scratch;
    open.clear();
    keys.clear();
    let at = |i: usize| src.get(i).copied().unwrap_or(0);
    let skip_space = |i: usize| skip_space(src, i);
    // The innermost container: its closing byte (0 for the root, which is
    // no container), its values so far, how many of them are in its table,
    // where its current chunk's keys start in `keys`, whether they are all
    // different, and one bit per hash of each (see `key_bit`).
    let mut close = 0u8;
    let mut count = 0u32;
    let mut stored = 0u32;
    let mut keys_from = 0u32;
    let mut distinct = true;
    let mut seen = 0u64;
    let mut i = 0usize;

    // Reads the string whose opening quote is at `i` and calls
    // `stack.$method` with its decoded bytes; moves `i` past it. Gives
    // whether it had escapes.
    macro_rules! string {
        ($method:ident) => {{
            let start = i + 1;
            let Some((end, escapes_in, non_ascii)) = scan_string(src, start, escaped) else {
                return Err(Stop::Invalid);
            };
            let Some(body) = src.get(start..end) else {
                return Err(Stop::Invalid);
            };
            if non_ascii && core::str::from_utf8(body).is_err() {
                return Err(Stop::Invalid);
            }
            if escapes_in {
                let mut next = 0;
                if escapes::check(src, escaped, &mut next, end as u32).is_err() {
                    return Err(Stop::Invalid);
                }
                decoded.clear();
                let offsets = escaped.iter().map(|&e| (e as usize).wrapping_sub(start));
                string::unescape_known(body, offsets, decoded);
                stack.$method(decoded)?;
            } else {
                stack.$method(body)?;
            }
            i = end + 1;
            escapes_in
        }};
    }

    // Reads `"key" :` from `i` on (after `{` or `,` and any space).
    macro_rules! member_key {
        () => {{
            if at(i) != b'"' {
                return Err(Stop::Invalid);
            }
            let start = i + 1;
            let escapes_in = string!(key);
            if distinct {
                let key = src.get(start..i - 1).unwrap_or_default();
                let bit = key_bit(key);
                // A key whose bit is new differs from every key before it.
                let repeated = seen & bit != 0
                    && keys
                        .get(keys_from as usize..)
                        .unwrap_or_default()
                        .iter()
                        .any(|&(at, len)| {
                            src.get(at as usize..at as usize + len as usize) == Some(key)
                        });
                if escapes_in || repeated {
                    keys.truncate(keys_from as usize);
                    distinct = false;
                } else {
                    seen |= bit;
                    keys.push((start as u32, key.len() as u32));
                }
            }
            i = skip_space(i);
            if at(i) != b':' {
                return Err(Stop::Invalid);
            }
            i += 1;
        }};
    }

    'value: loop {
        i = skip_space(i);
        let b = at(i);
        match b {
            b'"' => {
                string!(string);
            }
            b'-' | b'0'..=b'9' => {
                // Integers of up to 15 digits are exact doubles; anything
                // else (fractions, exponents, errors) takes the general
                // check and conversion.
                let sign = usize::from(b == b'-');
                let digits = i + sign;
                let mut j = digits;
                let mut value = 0u64;
                while j - digits < 16 {
                    let d = at(j).wrapping_sub(b'0');
                    if d > 9 {
                        break;
                    }
                    value = value * 10 + u64::from(d);
                    j += 1;
                }
                let n = j - digits;
                let short = (1..=15).contains(&n)
                    && (at(digits) != b'0' || n == 1)
                    && !matches!(at(j), b'.' | b'e' | b'E')
                    && ends_scalar(src, j);
                if short {
                    let v = value as f64;
                    stack.number(if sign == 1 { -v } else { v })?;
                    i = j;
                } else {
                    let number = number::number_end(src, i)
                        .filter(|&end| ends_scalar(src, end))
                        .and_then(|end| Some((end, src.get(i..end)?)));
                    let Some((end, number)) = number else {
                        return Err(Stop::Invalid);
                    };
                    stack.number(number_value(number))?;
                    i = end;
                }
            }
            b't' | b'f' | b'n' => {
                if !literal::is_valid(src, i) {
                    return Err(Stop::Invalid);
                }
                match b {
                    b't' => stack.boolean(true)?,
                    b'f' => stack.boolean(false)?,
                    _ => stack.null()?,
                }
                i += if b == b'f' { 5 } else { 4 };
            }
            b'[' | b'{' => {
                if open.len() >= max_depth {
                    return Err(Stop::Invalid);
                }
                stack.open()?;
                open.push(Open {
                    close,
                    count,
                    stored,
                    keys_from,
                    distinct,
                    seen,
                });
                // `{` + 2 is `}`, `[` + 2 is `]`.
                close = b + 2;
                count = 0;
                stored = 0;
                keys_from = keys.len() as u32;
                distinct = true;
                seen = 0;
                i = skip_space(i + 1);
                if at(i) != close {
                    if b == b'{' {
                        member_key!();
                    }
                    continue 'value;
                }
                // Empty: closed below like any other.
                count = u32::MAX;
            }
            _ => return Err(Stop::Invalid),
        }
        // A value ended (or an empty container is at its closing byte,
        // with a count that the increment makes 0).
        loop {
            count = count.wrapping_add(1);
            i = skip_space(i);
            let b = at(i);
            if i >= src.len() {
                return if close == 0 {
                    Ok(())
                } else {
                    Err(Stop::Invalid)
                };
            }
            i += 1;
            if b == b',' && close != 0 && count.wrapping_sub(stored) == CHUNK {
                // A full chunk, with more to come, goes into the table; the
                // next one's keys are compared afresh.
                stack.store(close == b'}', stored, CHUNK, distinct, false)?;
                stored = count;
                keys.truncate(keys_from as usize);
                distinct = true;
                seen = 0;
            }
            if b == b',' {
                if close == b']' {
                    continue 'value;
                }
                if close == b'}' {
                    i = skip_space(i);
                    member_key!();
                    continue 'value;
                }
            }
            if b != close || close == 0 {
                return Err(Stop::Invalid);
            }
            stack.store(
                b == b'}',
                stored,
                count.wrapping_sub(stored),
                distinct,
                true,
            )?;
            keys.truncate(keys_from as usize);
            let Some(parent) = open.pop() else {
                return Err(Stop::Invalid);
            };
            Open {
                close,
                count,
                stored,
                keys_from,
                distinct,
                seen,
            } = parent;
        }
    }
}

/// Finds the closing quote of the string whose body starts at `start`:
/// returns its offset, whether the body has escapes (their escaped
/// bytes' offsets are then in `escaped`) and whether it may have bytes of
/// 0x80 or more (then to be checked as UTF-8); `None` at a raw control
/// byte or at the end of the text.
#[inline(always)]
fn scan_string(src: &[u8], start: usize, escaped: &mut Vec<u32>) -> Option<(usize, bool, bool)> {
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
                if !escapes_in {
                    escapes_in = true;
                    escaped.clear();
                }
                escaped.push((i + 1) as u32);
                i += 2;
            }
            _ => return None,
        }
    }
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
                if !escapes_in {
                    escapes_in = true;
                    escaped.clear();
                }
                escaped.push((i + 1) as u32);
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

/// [`specials`] eight bytes at a time in a `u64` word. Borrows only carry
/// upwards, so the lowest flagged byte is always a true one (bytes above
/// it may be flagged falsely, which only ends the fast loop there).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn specials_by_word(chunk: &[u8]) -> (u32, u32) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let Some(word) = chunk.get(..8) else {
        return (1, 0);
    };
    let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let quote = has_zero(w ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    // Bit 8k + 7 becomes bit k.
    let gather = |flags: u64| ((flags >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32;
    (
        gather((quote | backslash | control) & HIGHS),
        gather(w & HIGHS),
    )
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

/// Powers of ten a double holds exactly.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The nearest double to the valid JSON number `n`, as
/// [`number::to_f64`] gives it.
///
/// Most numbers are decided here (Clinger's fast path): when the digits,
/// read as one integer, are below 2^53 and the decimal exponent is within
/// ±22, the integer and the power of ten are both exact doubles and one
/// multiplication or division rounds correctly. The rest go to the
/// general parser.
#[inline]
pub(super) fn number_value(n: &[u8]) -> f64 {
    let (negative, digits) = match n.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, n),
    };
    let mut mantissa = 0u64;
    let mut used = 0usize;
    let mut scale = 0i32;
    let mut k = 0;
    // At most 19 digits fit a u64 without overflow; past that (or past an
    // exponent of more than two digits) the general parser decides.
    let mut fast = true;
    while let Some(&d) = digits.get(k) {
        match d {
            b'0'..=b'9' => {
                mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                used += 1;
            }
            b'.' => {
                let frac_start = k + 1;
                k = frac_start;
                while let Some(&d) = digits.get(k).filter(|d| d.is_ascii_digit()) {
                    mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                    used += 1;
                    k += 1;
                }
                scale -= (k - frac_start) as i32;
                continue;
            }
            _ => {
                // The exponent: [eE][+-]?digits.
                let mut e = k + 1;
                let sign = match digits.get(e) {
                    Some(b'-') => {
                        e += 1;
                        -1
                    }
                    Some(b'+') => {
                        e += 1;
                        1
                    }
                    _ => 1,
                };
                let exp_digits = digits.get(e..).unwrap_or_default();
                if exp_digits.len() > 2 {
                    fast = false;
                }
                let mut exp = 0i32;
                for &d in exp_digits {
                    exp = exp * 10 + i32::from(d.wrapping_sub(b'0'));
                }
                scale += sign * exp;
                break;
            }
        }
        k += 1;
    }
    if fast && used <= 19 && mantissa <= 1 << 53 && (-22..=22).contains(&scale) {
        let m = mantissa as f64;
        let magnitude = if scale >= 0 {
            m * EXACT_POWERS[scale as usize]
        } else {
            m / EXACT_POWERS[(-scale) as usize]
        };
        return if negative { -magnitude } else { magnitude };
    }
    number::to_f64(n)
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
            let (special, high) = specials(&chunk);
            assert_eq!(found(special), first(&chunk), "{chunk:?}");
            assert_eq!(high, high_mask(&chunk));
            let (special, high) = specials_by_word(&chunk[..8]);
            assert_eq!(found(special), first(&chunk[..8]), "{chunk:?}");
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
