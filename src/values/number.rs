//! Numbers: the JSON grammar, correctly rounded doubles, exact integers.
//!
//! `to_f64` reads the digits once, eight at a time, then takes Clinger's
//! fast path when the digits fit 2^53 and the decimal exponent ±22 (one
//! exact multiplication or division), else the Eisel–Lemire algorithm
//! (one 64×128-bit product with a compile-time table of powers of five),
//! and leaves what neither can decide to Rust's float parser, which
//! rounds every input correctly: the result is always that parser's. A
//! magnitude beyond the double range becomes ±infinity, as `strtod` and
//! lua-cjson give. `to_i64` is exact:
//! it accepts any spelling of an integer (`12`, `-0`, `1.0`, `2.5e1`,
//! `1E3`) whose value fits, and says why otherwise, without ever going
//! through a double.

use crate::error::ErrorCode;

/// The end of the JSON number that starts at `src[start]`, or `None` if
/// the bytes there are not a number. The caller checks what follows.
///
/// Validation calls this for every number of a text, so the usual case,
/// a number of fewer than 32 bytes, is decided from one mask of
/// the window's non-digits, a few bit scans and no loop over the digits.
#[inline(always)]
pub fn number_end(src: &[u8], start: usize) -> Option<usize> {
    if let Some(window) = src.get(start..start + WINDOW) {
        let window = window.try_into().expect("WINDOW bytes");
        if let Some(end) = end_in_window(window) {
            return end.map(|end| start + end);
        }
    }
    number_end_bytes(src, start)
}

/// Whether `src[start..end]` is a JSON number of one of the two commonest
/// shapes, an integer or a decimal fraction without exponent, of at most
/// [`WINDOW`] bytes; `false` means "not decided here", and [`number_end`]
/// decides (an exponent, whitespace before `end`, a wrong spelling, a
/// number within [`WINDOW`] bytes of the end of the text).
///
/// Validation knows where a number ends when it knows where the next
/// entry of the index starts, so only the spelling is left to check: one
/// mask of the window's non-digits, cut at the end, must be empty (an
/// integer) or hold only a point with digits on both sides, which saves
/// [`number_end`]'s bit scans from each part of the number to the next.
/// Dense JSON's ids, counts and coordinates take this path.
#[inline(always)]
pub fn is_plain_number(src: &[u8], start: usize, end: usize) -> bool {
    let Some(window) = src.get(start..start + WINDOW) else {
        return false;
    };
    let window: &[u8; WINDOW] = window.try_into().expect("WINDOW bytes");
    let len = end.wrapping_sub(start);
    if len > WINDOW {
        return false;
    }
    let sign = usize::from(window[0] == b'-');
    // The number's bytes that are no digit, its sign aside.
    let odd = non_digits(window) & ((1u64 << len) - 1) & !(sign as u64);
    // A leading 0 is the whole integer part.
    let zero = window[sign] == b'0';
    if odd == 0 {
        return len > sign && (!zero || len == sign + 1);
    }
    let point = odd.trailing_zeros() as usize;
    odd & (odd - 1) == 0
        && window[point % WINDOW] == b'.'
        && point > sign
        && point + 1 < len
        && (!zero || point == sign + 1)
}

/// Bytes [`number_end`] decides at once: coordinates (`-65.613616999999977`)
/// and 64-bit ids fit.
const WINDOW: usize = 32;

/// [`number_end`] for the number that starts `window`, relative to it:
/// `Some(None)` when it is not a number, `None` when it may run past the
/// window (the caller then reads byte by byte).
#[inline(always)]
fn end_in_window(window: &[u8; WINDOW]) -> Option<Option<usize>> {
    // Bit WINDOW stands for "past the window" and stops every run.
    let stops = non_digits(window) | 1 << WINDOW;
    // The first non-digit at or after `from` (at most WINDOW).
    let run = |from: usize| (stops >> from).trailing_zeros() as usize + from;
    let sign = usize::from(window[0] == b'-');
    let int_end = run(sign);
    if int_end == WINDOW {
        return None;
    }
    if int_end == sign {
        return Some(None);
    }
    if window[sign] == b'0' && int_end > sign + 1 {
        // A leading 0 is the whole integer part; the caller sees a digit
        // follow it.
        return Some(Some(sign + 1));
    }
    let mut end = int_end;
    if window[end] == b'.' {
        let frac_end = run(end + 1);
        if frac_end == WINDOW {
            return None;
        }
        if frac_end == end + 1 {
            return Some(None);
        }
        end = frac_end;
    }
    if window[end] | 0x20 == b'e' {
        let mut digits = end + 1;
        if digits < WINDOW && matches!(window[digits], b'+' | b'-') {
            digits += 1;
        }
        let exp_end = run(digits);
        if exp_end == WINDOW {
            return None;
        }
        if exp_end == digits {
            return Some(None);
        }
        end = exp_end;
    }
    Some(Some(end))
}

/// Bit `k` set when byte `k` of `window` is not an ASCII digit: two SSE2
/// compares (part of every x86-64 CPU, so no detection is needed).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn non_digits(window: &[u8; WINDOW]) -> u64 {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_set1_epi8,
        _mm_sub_epi8,
    };
    // SAFETY: SSE2 is part of every x86-64 target, so the intrinsics can
    // run; the two unaligned loads read the window's 32 bytes.
    let (low, high) = unsafe {
        let digits = |half: __m128i| {
            // A digit is a byte whose distance above '0' is at most 9.
            let above = _mm_sub_epi8(half, _mm_set1_epi8(b'0' as i8));
            let digit = _mm_cmpeq_epi8(_mm_min_epu8(above, _mm_set1_epi8(9)), above);
            u64::from(_mm_movemask_epi8(digit) as u16)
        };
        let at = window.as_ptr().cast::<__m128i>();
        (
            digits(_mm_loadu_si128(at)),
            digits(_mm_loadu_si128(at.add(1))),
        )
    };
    !(low | high << 16) & 0xffff_ffff
}

/// Bit `k` set when byte `k` of `window` is not an ASCII digit, eight
/// bytes at a time: the portable [`non_digits`] (compiled on x86-64 for
/// the test that holds the two to the same answers).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn non_digits(window: &[u8; WINDOW]) -> u64 {
    non_digits_by_words(window)
}

#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn non_digits_by_words(window: &[u8; WINDOW]) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut mask = 0;
    for (k, word) in window.chunks_exact(8).enumerate() {
        // Digits become 0..=9; adding 0x76 to the low seven bits carries
        // into the high bit from 10 up, and never into the next byte.
        let d = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ ZEROS;
        let high = (((d & LOW7) + 0x7676_7676_7676_7676) | d) & HIGHS;
        // Gathers the eight high bits into one byte.
        mask |= (high.wrapping_mul(0x0002_0408_1020_4081) >> 56) << (8 * k);
    }
    mask
}

/// [`number_end`] read byte by byte (a number near the end of the text or
/// longer than the window).
#[inline(never)]
fn number_end_bytes(src: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    if src.get(i) == Some(&b'-') {
        i += 1;
    }
    match src.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = skip_digits(src, i + 1),
        _ => return None,
    }
    if src.get(i) == Some(&b'.') {
        let end = skip_digits(src, i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if matches!(src.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(src.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = skip_digits(src, i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

/// The index of the first byte at or after `i` that is not an ASCII
/// digit (or `src.len()`), eight bytes at a time: number-heavy texts
/// (coordinates, prices) spend most of their validation here.
#[inline]
fn skip_digits(src: &[u8], mut i: usize) -> usize {
    // A byte above '9' reaches 0x80 when 0x46 is added.
    const PAST_NINE: u64 = 0x4646_4646_4646_4646;
    while let Some(chunk) = src.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        // A byte's high bit is set when it is below '0' (the subtraction
        // wraps), above '9' (the addition reaches 0x80) or at least 0xba
        // (the subtraction leaves it at 0x8a or more). Carries and borrows
        // only move upwards, so the lowest flagged byte is exact.
        let non_digit = (word.wrapping_sub(ZEROS) | word.wrapping_add(PAST_NINE)) & HIGHS;
        if non_digit != 0 {
            return i + (non_digit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while src.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// The nearest double to a valid JSON number (±infinity past the range).
///
/// The digits are read once (up to 19 significant digits into a `u64`,
/// and a decimal exponent: [`short_f64`] for up to 8 bytes, all in
/// one word, [`decimal`] for the rest); the double is then Clinger's
/// exact quotient or product ([`clinger`]) when that applies, else
/// Eisel–Lemire's ([`eisel_lemire`]). Whatever neither decides (more
/// than 19 significant digits, a value within a hair of a rounding
/// boundary, subnormals, the edges of the range, anything that is not a
/// JSON number) goes to Rust's parser, which rounds every input
/// correctly: the fast paths answer only when they are sure, so the
/// result is always the parser's, bit for bit.
pub fn to_f64(number: &[u8]) -> f64 {
    if number.len() <= 8 {
        short_f64(number)
    } else {
        over_8_f64(number)
    }
}

/// [`to_f64`] for more than 8 bytes: a number with an exponent mostly
/// has a byte that is no digit in its last 4, and goes to [`long_f64`]
/// at once; the rest to [`fraction_or_long_f64`].
#[inline(never)]
fn over_8_f64(number: &[u8]) -> f64 {
    let last = number.last_chunk::<4>().copied().unwrap_or_default();
    let x = u32::from_le_bytes(last) ^ 0x3030_3030;
    if (x.wrapping_add(0x7676_7676) | x) & 0x8080_8080 != 0 {
        return long_f64(number);
    }
    fraction_or_long_f64(number)
}

/// [`fraction_f64`] for the usual shape, else [`long_f64`].
#[inline(never)]
fn fraction_or_long_f64(number: &[u8]) -> f64 {
    match fraction_f64(number) {
        Some(v) => v,
        None => long_f64(number),
    }
}

/// The nearest double to a number of more than 8 bytes of one of the
/// usual shapes, an integer of 9 to 19 digits (ids, timestamps) or an
/// integer part of 1 to 7 digits, a point and fraction digits to the
/// end, 19 digits in all at most (coordinates, prices, measurements), if
/// Clinger's path or Eisel–Lemire's decide it; else `None`. The same
/// steps as [`decimal`], with nothing else in the way.
#[inline(always)]
fn fraction_f64(n: &[u8]) -> Option<f64> {
    let negative = n[0] == b'-';
    let s = &n[usize::from(negative)..];
    // More than 8 bytes in all and no more than one sign: 8 here at least.
    let x = u64::from_le_bytes(s.first_chunk::<8>().copied()?) ^ ZEROS;
    let int_len = (non_digit_lanes(x).trailing_zeros() / 8) as usize;
    if int_len == 8 {
        // An integer of 9 to 19 digits (ids, timestamps), else `None`.
        let (rest, count) = digits_to_end(s, 8)?;
        if count > 11 {
            return None;
        }
        let digits = eight_digits(x) * POWERS_OF_TEN[count] + rest;
        let d = Decimal {
            negative,
            digits,
            exponent: 0,
        };
        return match clinger(d) {
            Some(v) => Some(v),
            None => eisel_lemire(d),
        };
    }
    if int_len == 0 || (x >> (8 * int_len)) as u8 != b'.' ^ b'0' {
        return None;
    }
    let next = u64::from_le_bytes(s.get(1..)?.first_chunk::<8>().copied()?) ^ ZEROS;
    let below = (1u64 << (8 * int_len)) - 1;
    let merged = (x & below) | (next & !below);
    if non_digit_lanes(merged) != 0 {
        return None;
    }
    let (rest, count) = digits_to_end(s, 9)?;
    let digits = eight_digits(merged)
        .wrapping_mul(POWERS_OF_TEN[count])
        .wrapping_add(rest);
    let frac_len = s.len() - int_len - 1;
    if int_len + frac_len > 19 {
        return None;
    }
    let d = Decimal {
        negative,
        digits,
        exponent: -(frac_len as i64),
    };
    match clinger(d) {
        Some(v) => Some(v),
        None => eisel_lemire(d),
    }
}

/// [`to_f64`] for any number: the digits read, then Clinger's path,
/// Eisel–Lemire's or Rust's parser.
#[inline(never)]
fn long_f64(number: &[u8]) -> f64 {
    let Some(d) = decimal(number) else {
        return parse_f64(number);
    };
    if let Some(v) = clinger(d) {
        return v;
    }
    match eisel_lemire(d) {
        Some(v) => v,
        None => parse_f64(number),
    }
}

/// Rust's parser on `number` (NaN for what it does not read).
#[cold]
#[inline(never)]
fn parse_f64(number: &[u8]) -> f64 {
    // A valid JSON number is ASCII; testing that is cheaper than a full
    // UTF-8 check and keeps any other input from reaching the str parser.
    if !number.is_ascii() {
        return f64::NAN;
    }
    core::str::from_utf8(number)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A JSON number as `±digits × 10^exponent`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Decimal {
    negative: bool,
    /// The significant digits as one integer: at most 19 of them, so
    /// always exact.
    digits: u64,
    exponent: i64,
}

/// The digits and decimal exponent of the JSON number `n`, read in one
/// pass, eight digits at a time where eight are there.
///
/// `None` for anything that is not a JSON number (leading zeros are let
/// through: they change no value), for more than 19 significant digits
/// and for an exponent written with more than 9 digits: the caller
/// leaves those to Rust's parser.
#[inline(always)]
fn decimal(n: &[u8]) -> Option<Decimal> {
    let (negative, n) = match n.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, n),
    };
    if n.len() >= 8 {
        return decimal_with(n, negative, |i| word_at(n, i), |i| digits_to_end(n, i));
    }
    // The whole number in one word, read once.
    let word = short_word(n);
    let word_at = |i: usize| word.checked_shr(8 * i as u32).unwrap_or(0);
    decimal_with(n, negative, word_at, |_| None)
}

/// [`to_f64`] for up to 8 bytes. All of them are in one word: the point
/// is moved out of the way of the digits, which are read at once (at
/// most 8, below 2^53: Clinger's path, see [`clinger`]). Integers
/// and decimals are done here, exponents by [`short_exponent`], anything
/// else by [`long_f64`].
#[inline(always)]
fn short_f64(n: &[u8]) -> f64 {
    let (word, len) = (short_word(n), n.len());
    let negative = word as u8 == b'-';
    let x = word ^ ZEROS;
    // A minus sign's byte counts as a leading zero.
    let x = if negative { x & !0xff } else { x };
    // The zero bytes from `len` on are no digits: the first byte that is
    // no digit is at most at `len` (8 when there is none in 8 bytes); the
    // next is exact when the first is a point (see `non_digit_lanes`).
    let stops = non_digit_lanes(x);
    let point = (stops.trailing_zeros() / 8) as usize;
    let first = usize::from(negative);
    let magnitude = if point == len {
        if len == first {
            return parse_f64(n);
        }
        eight_digits(x << (64 - 8 * len)) as f64
    } else if (x >> (8 * point)) as u8 == b'.' ^ b'0' {
        // Digits before the point and at least one after it, up to the
        // next byte that is no digit, `end`: `point` in `first + 1..end
        // - 1`, one unsigned comparison (both sides wrap below `first`).
        let end = ((stops & (stops - 1)).trailing_zeros() / 8) as usize;
        if point.wrapping_sub(first + 1) >= end.wrapping_sub(first + 2) {
            return long_f64(n);
        }
        if end != len {
            return short_exponent(n, negative, x, point, end);
        }
        // The fraction's digits moved down one byte, over the point.
        let below = (1u64 << (8 * point)) - 1;
        let digits = (x & below) | ((x >> 8) & !below);
        let places = len - 1 - point;
        eight_digits(digits << (64 - 8 * (len - 1))) as f64 / EXACT_POWERS[places & 7]
    } else {
        if point == first {
            return long_f64(n);
        }
        return short_exponent(n, negative, x, point, point);
    };
    if negative { -magnitude } else { magnitude }
}

/// [`short_f64`] for digits followed by what should be an exponent at
/// `end` (`1e9`, `-1.5e-7`), a point at `point` if `point < end`: the
/// exponent's 1 to 5 digits are read from the word `x` too (the bytes
/// XORed with '0'). Anything but an exponent goes to [`long_f64`].
#[inline(never)]
fn short_exponent(n: &[u8], negative: bool, x: u64, point: usize, end: usize) -> f64 {
    let len = n.len();
    let lane = |k: usize| (x >> (8 * k)) as u8;
    // 'e' or 'E', a sign or none, and only digits up to the end (so
    // `end + 1 < len <= 8`).
    if end + 1 >= len {
        return long_f64(n);
    }
    let sign = lane(end + 1);
    let negative_exponent = sign == b'-' ^ b'0';
    let from = end + 1 + usize::from(negative_exponent || sign == b'+' ^ b'0');
    if lane(end) | 0x20 != (b'e' ^ b'0') | 0x20 || from >= len {
        return long_f64(n);
    }
    let mut exponent = 0i64;
    for k in from..len {
        if lane(k) > 9 {
            return long_f64(n);
        }
        exponent = exponent * 10 + i64::from(lane(k));
    }
    // The digits, over the point if there is one (then `point < end`).
    let (digits, count) = if point < end {
        let below = (1u64 << (8 * point)) - 1;
        ((x & below) | ((x >> 8) & !below), end - 1)
    } else {
        (x, end)
    };
    let digits = if count <= 4 {
        four_digits((digits << (32 - 8 * count)) as u32)
    } else {
        eight_digits(digits << (64 - 8 * count))
    };
    let places = (end - point).saturating_sub(1) as i64;
    let exponent = if negative_exponent {
        -exponent
    } else {
        exponent
    } - places;
    let d = Decimal {
        negative,
        digits,
        exponent,
    };
    match clinger(d) {
        Some(v) => v,
        None => eisel_lemire_or_parse(negative, digits, exponent, n),
    }
}

/// Eisel–Lemire's double for `±digits × 10^exponent`, spelt `n`, else
/// Rust's parser's.
#[inline(never)]
fn eisel_lemire_or_parse(negative: bool, digits: u64, exponent: i64, n: &[u8]) -> f64 {
    let d = Decimal {
        negative,
        digits,
        exponent,
    };
    match eisel_lemire(d) {
        Some(v) => v,
        None => parse_f64(n),
    }
}

/// The high bit of each byte of `x` (bytes XORed with '0') that was not
/// an ASCII digit, exact up to the first such byte: a digit is 0..=9
/// now, and adding 0x76 reaches the high bit from 10 up. Only a byte of
/// 0x8a or more (no ASCII) carries into the next, which it is below.
#[inline(always)]
fn non_digit_lanes(x: u64) -> u64 {
    (x.wrapping_add(0x7676_7676_7676_7676) | x) & HIGHS
}

/// [`decimal`] for `n` without its sign, `word(i)` giving `n[i..]`'s
/// first eight bytes (the first
/// in the low byte), zero bytes standing for those past the end, and
/// `to_end(i)` the value and count of the digits `n[i..]` when they are
/// at most 16 digits (or `None`, which is always right); both are called
/// with `i <= n.len()` only.
///
/// An integer part of fewer than 8 digits (coordinates, prices) is read
/// with the fraction's first digits: the word at the integer's start and
/// the one a byte later, merged at the point, hold 8 digits of both. The
/// rest of a fraction that ends the number is read without a loop.
#[inline(always)]
fn decimal_with(
    n: &[u8],
    negative: bool,
    word: impl Fn(usize) -> u64,
    to_end: impl Fn(usize) -> Option<(u64, usize)>,
) -> Option<Decimal> {
    let x = word(0) ^ ZEROS;
    let mut int_len = (non_digit_lanes(x).trailing_zeros() / 8) as usize;
    let mut digits;
    // The end of the integer and fraction, the byte there, the number of
    // fraction digits.
    let (i, stop, frac_len);
    if int_len < 8 {
        if int_len == 0 {
            return None;
        }
        let after_int = (x >> (8 * int_len)) as u8 ^ b'0';
        if after_int == b'.' {
            let below = (1u64 << (8 * int_len)) - 1;
            let merged = (x & below) | ((word(1) ^ ZEROS) & !below);
            let stops = non_digit_lanes(merged);
            if stops == 0 {
                // All 8 are digits, so the word read from 1 was all in
                // `n`: `9 <= n.len()`.
                digits = eight_digits(merged);
                if let Some((rest, count)) = to_end(9) {
                    digits = digits.wrapping_mul(POWERS_OF_TEN[count]).wrapping_add(rest);
                    (i, stop) = (n.len(), 0);
                } else {
                    (i, stop) = digit_run(&word, 9, &mut digits);
                }
            } else {
                let run = (stops.trailing_zeros() / 8) as usize;
                if run == int_len {
                    return None;
                }
                digits = eight_digits(merged << (64 - 8 * run));
                i = 1 + run;
                stop = (merged >> (8 * run)) as u8 ^ b'0';
            }
            frac_len = i - (int_len + 1);
        } else {
            digits = eight_digits(x << (64 - 8 * int_len));
            (i, stop, frac_len) = (int_len, after_int, 0);
        }
    } else {
        // 8 integer digits or more (so `8 <= n.len()`).
        digits = eight_digits(x);
        let (int_end, after_int) = if n.len() == 8 {
            (8, 0)
        } else {
            digit_run(&word, 8, &mut digits)
        };
        int_len = int_end;
        if after_int == b'.' {
            let from = int_end + 1;
            (i, stop) = digit_run(&word, from, &mut digits);
            if i == from {
                return None;
            }
            frac_len = i - from;
        } else {
            (i, stop, frac_len) = (int_end, after_int, 0);
        }
    }
    let mut exponent = -(frac_len as i64);
    if i != n.len() {
        if stop | 0x20 != b'e' {
            return None;
        }
        exponent += read_exponent(&n[i + 1..])?;
    }
    // `digits` took every digit, wrapping past 19 of them; it is exact
    // when no more than 19 follow the leading zeros (which add nothing).
    if int_len + frac_len > 19 && significant(&n[..i]) > 19 {
        return None;
    }
    Some(Decimal {
        negative,
        digits,
        exponent,
    })
}

/// The exponent written `e` (after the `e`): an optional sign and 1 to 9
/// digits, nothing after them.
#[inline(always)]
fn read_exponent(e: &[u8]) -> Option<i64> {
    let (negative, digits) = match e.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, e),
    };
    if digits.is_empty() || digits.len() > 9 {
        return None;
    }
    let mut value = 0i64;
    for &d in digits {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        value = value * 10 + i64::from(d);
    }
    Some(if negative { -value } else { value })
}

/// How many of the digits of `mantissa` (a JSON number's digits and
/// point, without sign or exponent) follow its leading zeros.
#[cold]
fn significant(mantissa: &[u8]) -> usize {
    let zeros = mantissa
        .iter()
        .position(|&b| b != b'0' && b != b'.')
        .unwrap_or(mantissa.len());
    mantissa[zeros..]
        .iter()
        .filter(|b| b.is_ascii_digit())
        .count()
}

/// Reads the digits that start at `i` into `digits` (as further decimal
/// places, wrapping past 2^64) and returns the index of the first byte
/// after them and that byte (0 past the end): eight at a time, then the
/// last few in one go.
#[inline(always)]
fn digit_run(word: &impl Fn(usize) -> u64, mut i: usize, digits: &mut u64) -> (usize, u8) {
    loop {
        let d = word(i) ^ ZEROS;
        let non_digit = non_digit_lanes(d);
        if non_digit == 0 {
            *digits = digits
                .wrapping_mul(100_000_000)
                .wrapping_add(eight_digits(d));
            i += 8;
            continue;
        }
        let run = (non_digit.trailing_zeros() / 8) as usize;
        // The run's bytes moved to the top of the word, zeros below them:
        // the same value read as eight digits (nothing when the run is
        // empty: the two shifts move the word out whole).
        let top = (d << 1) << (63 - 8 * run);
        *digits = digits
            .wrapping_mul(POWERS_OF_TEN[run])
            .wrapping_add(eight_digits(top));
        return (i + run, (d >> (8 * run)) as u8 ^ b'0');
    }
}

/// The value and count of the digits `n[i..]` (`8 <= n.len()`,
/// `i <= n.len()`) if they are at most 16 digits: the 8 at `i` if there
/// are more than 8, and the rest from the number's last 4 or 8 bytes,
/// those before them taken as zeros. `None` otherwise.
#[inline(always)]
fn digits_to_end(n: &[u8], i: usize) -> Option<(u64, usize)> {
    let count = n.len() - i;
    if count > 16 {
        return None;
    }
    let (head, rest) = if count > 8 {
        let head = u64::from_le_bytes(n[i..i + 8].try_into().expect("8 bytes")) ^ ZEROS;
        if non_digit_lanes(head) != 0 {
            return None;
        }
        (eight_digits(head), count - 8)
    } else {
        (0, count)
    };
    let tail = if rest <= 4 {
        if rest == 0 {
            return Some((head, count));
        }
        let last = n.len() - 4;
        let tail = u32::from_le_bytes(n[last..].try_into().expect("4 bytes")) ^ 0x3030_3030;
        let tail = tail & (!0 << (8 * (4 - rest)));
        if (tail.wrapping_add(0x7676_7676) | tail) & 0x8080_8080 != 0 {
            return None;
        }
        four_digits(tail)
    } else {
        let last = n.len() - 8;
        let tail = u64::from_le_bytes(n[last..].try_into().expect("8 bytes")) ^ ZEROS;
        let tail = tail & (!0 << (8 * (8 - rest)));
        if non_digit_lanes(tail) != 0 {
            return None;
        }
        eight_digits(tail)
    };
    Some((
        head.wrapping_mul(POWERS_OF_TEN[rest]).wrapping_add(tail),
        count,
    ))
}

/// 10^k, k < 17.
const POWERS_OF_TEN: [u64; 17] = {
    let mut powers = [1u64; 17];
    let mut k = 1;
    while k < 17 {
        powers[k] = powers[k - 1] * 10;
        k += 1;
    }
    powers
};

/// ASCII '0' in every byte.
const ZEROS: u64 = 0x3030_3030_3030_3030;
/// The high bit of every byte.
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The value of eight decimal digits, one a byte (0..=9), the first (most
/// significant) in the low byte: three multiplications, each joining
/// neighbouring lanes into lanes twice as wide. A multiplication by
/// `1 + 10·2^8` puts `10·a + b` in the upper byte of each pair `a, b`
/// (at most 99, so no lane carries into the next); shifting it down and
/// masking leaves four 2-digit numbers in 16-bit lanes, then two 4-digit
/// numbers in 32-bit lanes, then one.
#[inline(always)]
fn eight_digits(d: u64) -> u64 {
    let pairs = (d.wrapping_mul(1 + (10 << 8)) >> 8) & 0x00ff_00ff_00ff_00ff;
    let quads = (pairs.wrapping_mul(1 + (100 << 16)) >> 16) & 0x0000_ffff_0000_ffff;
    quads.wrapping_mul(1 + (10_000 << 32)) >> 32
}

/// [`eight_digits`] for four (two steps, no 64-bit constants).
#[inline(always)]
fn four_digits(d: u32) -> u64 {
    let pairs = (d.wrapping_mul(1 + (10 << 8)) >> 8) & 0x00ff_00ff;
    u64::from(pairs.wrapping_mul(1 + (100 << 16)) >> 16)
}

/// `n[i..]`'s first eight bytes as a little-endian word, zero bytes
/// past the end (`8 <= n.len()`, `i <= n.len()`).
#[inline(always)]
fn word_at(n: &[u8], i: usize) -> u64 {
    if let Some(bytes) = n.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        return u64::from_le_bytes(*bytes);
    }
    // The last eight bytes, shifted down past the 1..=8 before `i`.
    let last = n.len() - 8;
    let tail = u64::from_le_bytes(n[last..].try_into().expect("8 bytes"));
    (tail >> 8) >> (8 * (i - last) - 8)
}

/// The bytes of `n` (at most 8) as a little-endian word, zero bytes
/// past the end: two reads that overlap unless there are 2, 4 or 8 bytes.
#[inline(always)]
fn short_word(n: &[u8]) -> u64 {
    let len = n.len();
    if len >= 4 {
        let u32_at = |k: usize| u64::from(u32::from_le_bytes([n[k], n[k + 1], n[k + 2], n[k + 3]]));
        u32_at(0) | u32_at(len - 4) << (8 * (len - 4))
    } else if len >= 2 {
        let u16_at = |k: usize| u64::from(u16::from_le_bytes([n[k], n[k + 1]]));
        u16_at(0) | u16_at(len - 2) << (8 * (len - 2))
    } else if len == 1 {
        u64::from(n[0])
    } else {
        0
    }
}

/// Powers of ten a double holds exactly.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Clinger's fast path: the nearest double to `d` when its digits are at
/// most 2^53 and its exponent within ±22. The integer and the power of
/// ten are then both exact doubles, so one multiplication or division
/// rounds correctly: the same double as the full parser's. `None`
/// otherwise.
#[inline(always)]
fn clinger(d: Decimal) -> Option<f64> {
    if d.digits > 1 << 53 || !(-22..=22).contains(&d.exponent) {
        return None;
    }
    let m = d.digits as f64;
    let magnitude = if d.exponent >= 0 {
        m * EXACT_POWERS[d.exponent as usize]
    } else {
        m / EXACT_POWERS[(-d.exponent) as usize]
    };
    Some(if d.negative { -magnitude } else { magnitude })
}
/// The decimal exponents [`POW5`] covers. Past them a value of at most
/// 19 digits is below half the least subnormal or above the largest
/// double; Rust's parser says which of 0 and infinity it is.
const POW5_MIN: i64 = -342;
const POW5_MAX: i64 = 308;

/// `5^q` for `q` in `POW5_MIN..=POW5_MAX`, truncated to its leading 128
/// bits: `[high, low]` with the high bit of `high` set, the value being
/// `(high·2^64 + low) · 2^(floor(log2(5^q)) − 127)` rounded down. Built
/// by [`pow5_table`] while compiling (10 KB).
static POW5: [[u64; 2]; (POW5_MAX - POW5_MIN + 1) as usize] = pow5_table();

/// Limbs (64 bits, least significant first) of the integers
/// [`pow5_table`] works with: 5^308 has 716 bits, and 2^1023 / 5^342
/// keeps 228 after its 795, more than the 128 taken.
const LIMBS: usize = 16;

/// The leading 128 bits of the nonzero integer `big`, rounded down, and
/// its bit length.
const fn leading_128(big: &[u64; LIMBS]) -> (u128, i64) {
    let mut top = LIMBS - 1;
    while big[top] == 0 {
        top -= 1;
    }
    // Three limbs hold the leading 128 bits whatever the shift; those
    // below the least significant count as zero.
    let mut limbs = [0u128; 3];
    let mut k = 0;
    while k < 3 && k <= top {
        limbs[k] = big[top - k] as u128;
        k += 1;
    }
    let shift = big[top].leading_zeros();
    let value = (((limbs[0] << 64) | limbs[1]) << shift) | ((limbs[2] << shift) >> 64);
    (value, 64 * top as i64 + 64 - shift as i64)
}

/// `big`'s entry of [`POW5`], for `q`: `big` is `5^q` (`scale` 0) or
/// `2^scale / 5^-q` rounded down. Checks [`floor_log2_pow10`] for `q`.
const fn pow5_entry(q: i64, big: &[u64; LIMBS], scale: i64) -> [u64; 2] {
    let (value, bits) = leading_128(big);
    // floor(log2(big)) is bits - 1 (never an integer when q < 0, so the
    // rounding down changes no bit of the logarithm's integer part), and
    // log2(5^q) = log2(big) - scale; log2(10^q) adds q.
    assert!(floor_log2_pow10(q) == bits - 1 - scale + q);
    [(value >> 64) as u64, value as u64]
}

/// The table [`POW5`]: `5^q` exactly for `q >= 0` (multiplying by 5),
/// and for `q = -k` the leading bits of `floor(2^1023 / 5^k)` (dividing
/// by 5: `floor(floor(x / a) / b) = floor(x / ab)`, so every step is
/// exact), whose leading 128 bits are those of `2^1023 / 5^k` rounded
/// down. Also checks, for every `q`, the exponent formula of
/// [`floor_log2_pow10`]: a mistake stops the build.
const fn pow5_table() -> [[u64; 2]; (POW5_MAX - POW5_MIN + 1) as usize] {
    let mut table = [[0; 2]; (POW5_MAX - POW5_MIN + 1) as usize];
    let mut big = [0u64; LIMBS];
    big[0] = 1;
    let mut q = 0;
    while q <= POW5_MAX {
        table[(q - POW5_MIN) as usize] = pow5_entry(q, &big, 0);
        let mut carry = 0u128;
        let mut k = 0;
        while k < LIMBS {
            let x = big[k] as u128 * 5 + carry;
            big[k] = x as u64;
            carry = x >> 64;
            k += 1;
        }
        assert!(carry == 0);
        q += 1;
    }
    let mut big = [0u64; LIMBS];
    big[LIMBS - 1] = 1 << 63;
    let mut q = -1;
    while q >= POW5_MIN {
        let mut remainder = 0u128;
        let mut k = LIMBS;
        while k > 0 {
            k -= 1;
            let x = (remainder << 64) | big[k] as u128;
            big[k] = (x / 5) as u64;
            remainder = x % 5;
        }
        table[(q - POW5_MIN) as usize] = pow5_entry(q, &big, 64 * LIMBS as i64 - 1);
        q -= 1;
    }
    table
}

/// `floor(log2(10^q))` for `q` in `POW5_MIN..=POW5_MAX` (checked for
/// each while the table is built): `q·log2(10)` in 16-bit fixed point.
#[inline(always)]
const fn floor_log2_pow10(q: i64) -> i64 {
    (q * 217_706) >> 16
}

/// The Eisel–Lemire algorithm (Daniel Lemire, "Number parsing at a
/// gigabyte per second", Software: Practice and Experience, 2021, after
/// Michael Eisel): the nearest double to `digits × 10^exponent` from one
/// 64×128-bit product, or `None` when that product cannot be sure of it.
///
/// Writing `10^q = 5^q · 2^q`, the digits (shifted so that their top bit
/// is set) times the leading 128 bits of `5^q` ([`POW5`]) give the
/// leading bits of the value; the power of two only moves the exponent.
///
/// Why the answer is right when it is given: the product's upper 128
/// bits `U` are computed exactly (both halves of the table entry are
/// multiplied). The entry is within one unit below `5^q`'s leading bits
/// and the digits are below 2^64, so the exact product, scaled as `U`,
/// lies in `[U, U + 2)`. The top 54 bits of `U` are the double's 53 and
/// the rounding bit; call the 73 or 74 bits below them `F`. If `F` is
/// neither 0 nor one of its two largest values, adding less than 2 to
/// `U` changes none of the top 54 bits and cannot make the bits below
/// them zero: the exact value has the same 54 leading bits as `U`, and
/// it is not exactly halfway between two doubles, so rounding half up at
/// the rounding bit is rounding to nearest. The other values of `F`
/// (an exact tie, an exactly representable value, or a product about
/// to carry into the rounding bit) are mostly integers from 2^53 up and
/// decimals written with trailing zeros, which [`dyadic`] rounds
/// exactly; the rest, about three inputs in 2^73, are left to Rust's
/// parser.
///
/// `None` also for subnormal and infinite results, a zero and exponents
/// past the table, all left to Rust's parser.
#[inline(always)]
fn eisel_lemire(d: Decimal) -> Option<f64> {
    if d.digits == 0 || !(POW5_MIN..=POW5_MAX).contains(&d.exponent) {
        return None;
    }
    let [high, low] = POW5[(d.exponent - POW5_MIN) as usize];
    let shift = d.digits.leading_zeros();
    let digits = u128::from(d.digits << shift);
    // At most (2^64 − 1)^2 + 2^64 − 1 < 2^128: no overflow.
    let product = digits * u128::from(high) + ((digits * u128::from(low)) >> 64);
    let upper = (product >> 64) as u64;
    // Bit 63 or bit 62 leads (the factors lead with bit 63 each).
    let lead = upper >> 63;
    // `F` is 0 or within 2 of all ones only if its low 64 bits are.
    if (product as u64).wrapping_add(2) <= 2 && !decided(product, 73 + lead as u32) {
        return dyadic(d.negative, d.digits, d.exponent);
    }
    let bits54 = upper >> (9 + lead);
    // Round half up, into [2^52, 2^53].
    let mantissa = (bits54 + 1) >> 1;
    // The value is mantissa · 2^e with e = floor(log2(10^q)) − shift
    // + lead + 11 (the 2^64 dropped with the low word, the bits shifted
    // out, the table's 2^127 scale); the biased exponent of a double is
    // e + 1075 (the bias and the 52 fraction bits). Adding the mantissa
    // to the field below that adds its leading bit back: 1, or 2 when
    // rounding carried into bit 53 (the fraction bits are then zero).
    let below = floor_log2_pow10(d.exponent) - i64::from(shift) + lead as i64 + (11 + 1075 - 1);
    // Normal doubles only: the biased exponent in 1..=2046.
    if below as u64 + (mantissa >> 53) >= 2046 {
        return None;
    }
    let bits = ((below as u64) << 52) + mantissa;
    Some(f64::from_bits(bits | u64::from(d.negative) << 63))
}

/// Whether the `bits` low bits of `product` (`F` in [`eisel_lemire`])
/// are neither 0 nor within 2 of all ones.
#[cold]
fn decided(product: u128, bits: u32) -> bool {
    let rest = product & ((1 << bits) - 1);
    rest != 0 && rest < (1 << bits) - 2
}

/// The nearest double to `±digits × 10^q` when it is an integer of at most
/// 128 bits times a power of two within ±27, else `None`: the values
/// [`eisel_lemire`] cannot round from its product, as they can lie
/// exactly on a double or halfway between two (integers from 2^53 up,
/// decimals written with trailing zeros). `u128 as f64` rounds to
/// nearest, ties to even, and the power of two then scales exactly.
#[cold]
fn dyadic(negative: bool, digits: u64, q: i64) -> Option<f64> {
    let integer = if (0..=27).contains(&q) {
        // 5^27 < 2^63: the product fits.
        u128::from(digits) * 5u128.pow(q as u32)
    } else if (-27..0).contains(&q) {
        let five = 5u64.pow(q.unsigned_abs() as u32);
        if !digits.is_multiple_of(five) {
            return None;
        }
        u128::from(digits / five)
    } else {
        return None;
    };
    let scale = f64::from_bits(((1023 + q) as u64) << 52);
    let magnitude = integer as f64 * scale;
    Some(if negative { -magnitude } else { magnitude })
}

/// The exact value of a valid JSON number as an `i64`.
///
/// Fails with [`ErrorCode::NotInteger`] when the value has a fractional
/// part and [`ErrorCode::OutOfRange`] when it lies outside the `i64` range.
pub fn to_i64(number: &[u8]) -> Result<i64, ErrorCode> {
    let (negative, rest) = match number.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, number),
    };
    let (mantissa, exponent) = match rest.iter().position(|&b| b == b'e' || b == b'E') {
        Some(e) => (&rest[..e], parse_exponent(&rest[e + 1..])),
        None => (rest, 0),
    };
    let (int_digits, frac_digits) = match mantissa.iter().position(|&b| b == b'.') {
        Some(d) => (&mantissa[..d], &mantissa[d + 1..]),
        None => (mantissa, &[][..]),
    };
    // The value is D * 10^(exponent - frac_len), D being the integer and
    // fraction digits written together. Strip D to its significant digits
    // S, moving trailing zeros into the exponent.
    let digit = |k: usize| match int_digits.get(k) {
        Some(&d) => d,
        None => frac_digits[k - int_digits.len()],
    };
    let total = int_digits.len() + frac_digits.len();
    let Some(first) = (0..total).find(|&k| digit(k) != b'0') else {
        return Ok(0);
    };
    let last = (first..total)
        .rev()
        .find(|&k| digit(k) != b'0')
        .unwrap_or(first);
    let scale = exponent
        .saturating_sub(frac_digits.len() as i64)
        .saturating_add((total - 1 - last) as i64);
    if scale < 0 {
        // S ends in a non-zero digit, so S / 10^k is never whole.
        return Err(ErrorCode::NotInteger);
    }
    // 20 or more digits is at least 10^19 > 2^63.
    let width = (last - first + 1) as i64;
    if width.saturating_add(scale) > 19 {
        return Err(ErrorCode::OutOfRange);
    }
    let mut magnitude: i128 = 0;
    for k in first..=last {
        magnitude = magnitude * 10 + (digit(k) - b'0') as i128;
    }
    magnitude *= 10i128.pow(scale as u32);
    let limit: i128 = if negative { 1 << 63 } else { (1 << 63) - 1 };
    if magnitude > limit {
        return Err(ErrorCode::OutOfRange);
    }
    Ok(if negative {
        (-magnitude) as i64
    } else {
        magnitude as i64
    })
}

/// The exponent digits as an i64, saturating (a 10 000-digit exponent is
/// just "very large").
fn parse_exponent(e: &[u8]) -> i64 {
    let (negative, digits) = match e.split_first() {
        Some((b'-', d)) => (true, d),
        Some((b'+', d)) => (false, d),
        _ => (false, e),
    };
    let v = digits.iter().fold(0i64, |acc, &d| {
        acc.saturating_mul(10).saturating_add((d - b'0') as i64)
    });
    if negative { -v } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_digits_matches_a_byte_loop() {
        for byte in 0..=255u8 {
            for position in 0..20 {
                let mut src = b"12345678901234567890".to_vec();
                src[position] = byte;
                let naive = src
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .unwrap_or(src.len());
                for from in 0..=position.min(3) {
                    let want = if from <= naive { naive } else { from };
                    assert_eq!(skip_digits(&src, from), want, "{byte:#x} at {position}");
                }
            }
        }
        assert_eq!(skip_digits(b"", 0), 0);
        assert_eq!(skip_digits(b"123", 3), 3);
    }

    #[test]
    fn the_window_agrees_with_the_byte_reader() {
        let mut rng = crate::testing::Rng::new(7);
        let alphabet = b"0123456789000-+.eE ,]x";
        for _ in 0..200_000 {
            let len = rng.below(40);
            let text: Vec<u8> = (0..len + WINDOW).map(|_| rng.pick(alphabet)).collect();
            for start in 0..3 {
                assert_eq!(
                    number_end(&text, start),
                    number_end_bytes(&text, start),
                    "{:?} at {start}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
        for window in [[b'7'; WINDOW], [b'0'; WINDOW]] {
            assert_eq!(end_in_window(&window), None);
        }
    }

    /// Every spelling `is_plain_number` accepts is a whole number by
    /// `number_end`'s reading, on random spellings cut at every length,
    /// with the end of the text at every distance after them; it accepts
    /// every integer and fraction of up to the window's size.
    #[test]
    fn plain_numbers_are_whole_numbers() {
        let mut rng = crate::testing::Rng::new(8);
        let alphabet = b"0123456789000-.eE ,x";
        let mut accepted = 0;
        for round in 0..200_000 {
            let mut text: Vec<u8> = if round % 2 == 0 {
                crate::testing::random_number(&mut rng, 2, 8).into_bytes()
            } else {
                let len = rng.below(WINDOW + 8);
                (0..len).map(|_| rng.pick(alphabet)).collect()
            };
            let end = text.len();
            let pad = rng.below(WINDOW + 2);
            // What follows cannot go on with a number (in an index, the
            // next entry: a structural byte or a quote).
            text.extend((0..pad).map(|_| rng.pick(b",]\" x")));
            if is_plain_number(&text, 0, end) {
                accepted += 1;
                assert_eq!(
                    number_end(&text, 0),
                    Some(end),
                    "{:?} to {end}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
        assert!(accepted > 10_000, "only {accepted} accepted");
        for len in 1..=WINDOW {
            for sign in ["", "-"] {
                for point in 0..len {
                    let mut number = sign.as_bytes().to_vec();
                    number.extend((0..len).map(|k| b'1' + (k % 9) as u8));
                    if point > 0 && point + 1 < len {
                        number[sign.len() + point] = b'.';
                    }
                    let end = number.len();
                    number.resize(end + WINDOW, b',');
                    let shown = String::from_utf8_lossy(&number[..end]).into_owned();
                    assert_eq!(is_plain_number(&number, 0, end), end <= WINDOW, "{shown}");
                }
            }
        }
        for (text, want) in [
            ("0,", true),
            ("-0,", true),
            ("0.5,", true),
            ("-0.05,", true),
            ("01,", false),
            ("-01,", false),
            ("00.5,", false),
            ("1.,", false),
            (".5,", false),
            ("-.5,", false),
            ("-,", false),
            ("1.2.3,", false),
            ("1e5,", false),
            ("1 ,", false),
            ("1x,", false),
        ] {
            let mut src = text.as_bytes().to_vec();
            let end = src.len() - 1;
            src.resize(end + WINDOW + 1, b' ');
            assert_eq!(is_plain_number(&src, 0, end), want, "{text}");
        }
    }

    #[test]
    fn non_digits_marks_every_other_byte() {
        for byte in 0..=255u8 {
            for at in 0..WINDOW {
                let mut window = [b'5'; WINDOW];
                window[at] = byte;
                let want = if byte.is_ascii_digit() { 0 } else { 1 << at };
                assert_eq!(non_digits(&window), want, "{byte:#x} at {at}");
                assert_eq!(non_digits_by_words(&window), want, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn grammar() {
        for ok in [
            "0",
            "-0",
            "12",
            "-3.25",
            "1e9",
            "1E+9",
            "1e-9",
            "0.5",
            "-0.0e0",
            "123456789012345678901234567890",
        ] {
            assert_eq!(number_end(ok.as_bytes(), 0), Some(ok.len()), "{ok}");
        }
        for (text, end) in [
            ("01", Some(1)),
            ("1.", None),
            (".5", None),
            ("-", None),
            ("1e", None),
            ("1e+", None),
            ("+1", None),
            ("1.5.", Some(3)),
            ("-a", None),
            ("1x", Some(1)),
        ] {
            assert_eq!(number_end(text.as_bytes(), 0), end, "{text}");
        }
    }

    /// `to_f64(s)` is `s.parse::<f64>()`, bit for bit.
    #[track_caller]
    fn agrees(s: &str) {
        let parsed: f64 = s.parse().unwrap();
        assert_eq!(
            to_f64(s.as_bytes()).to_bits(),
            parsed.to_bits(),
            "{s}: {} != {parsed:e}",
            to_f64(s.as_bytes())
        );
    }

    /// Which path decided `s`: 0 Clinger, 1 Eisel–Lemire, 2 the parser;
    /// each fast path's answer, whenever it gives one, is the parser's,
    /// and they leave to the parser nothing of at most 19 significant
    /// digits whose double is normal (bar about three inputs in 2^73 and
    /// the least normal double).
    #[track_caller]
    fn path(s: &str) -> usize {
        agrees(s);
        let parsed: f64 = s.parse().unwrap();
        let Some(d) = decimal(s.as_bytes()) else {
            return 2;
        };
        let eisel_lemire = eisel_lemire(d);
        if let Some(v) = eisel_lemire {
            assert_eq!(v.to_bits(), parsed.to_bits(), "Eisel–Lemire on {s}");
        }
        if let Some(v) = clinger(d) {
            assert_eq!(v.to_bits(), parsed.to_bits(), "Clinger on {s}");
            return 0;
        }
        if eisel_lemire.is_some() {
            return 1;
        }
        // (Values just below the least normal double may round up to
        // it: Eisel–Lemire leaves them with the subnormals.)
        let normal = parsed.is_normal() && parsed.abs() != f64::MIN_POSITIVE;
        assert!(!normal, "{s} left to the parser");
        2
    }

    #[test]
    fn decimal_reads_every_spelling() {
        let d = |negative, digits, exponent| {
            Some(Decimal {
                negative,
                digits,
                exponent,
            })
        };
        for (s, want) in [
            ("0", d(false, 0, 0)),
            ("-0", d(true, 0, 0)),
            ("7", d(false, 7, 0)),
            ("-65.613616999999977", d(true, 65613616999999977, -15)),
            ("12345678", d(false, 12345678, 0)),
            ("123456789", d(false, 123456789, 0)),
            ("1234567.8", d(false, 12345678, -1)),
            ("1.5", d(false, 15, -1)),
            ("-0.25", d(true, 25, -2)),
            ("1e9", d(false, 1, 9)),
            ("1E+9", d(false, 1, 9)),
            ("2.5e-3", d(false, 25, -4)),
            ("0e400", d(false, 0, 400)),
            ("1e999999999", d(false, 1, 999_999_999)),
            (
                "9999999999999999999",
                d(false, 9_999_999_999_999_999_999, 0),
            ),
            ("0.00000000000000000000012345", d(false, 12345, -26)),
            ("000000000000000000001.5", d(false, 15, -1)),
            (
                "1234567890.123456789e-5",
                d(false, 1_234_567_890_123_456_789, -14),
            ),
        ] {
            assert_eq!(decimal(s.as_bytes()), want, "{s}");
        }
        // More than 19 significant digits, a 10-digit exponent and
        // anything that is not a number go to the parser.
        for s in [
            "12345678901234567890",
            "1.2345678901234567890",
            "0.00012345678901234567890",
            "1e1000000000",
            "",
            "-",
            "1.",
            "1e",
            ".5",
            "1x",
            "1e+",
            "0x1",
            "1.5.",
            "12345678x",
            "1234567.",
            "1e5x",
            "--1",
            "+1",
            "1 ",
        ] {
            assert_eq!(decimal(s.as_bytes()), None, "{s}");
        }
        // Any 8-byte window reaching past the end reads zero bytes there.
        for len in 0..20 {
            let n: Vec<u8> = (1..=len as u8).collect();
            for i in 0..=len {
                let mut want = [0u8; 8];
                for (k, b) in n.iter().skip(i).take(8).enumerate() {
                    want[k] = *b;
                }
                let want = u64::from_le_bytes(want);
                if len >= 8 {
                    assert_eq!(word_at(&n, i), want, "{len} {i}");
                }
                if len <= 8 {
                    let short = short_word(&n).checked_shr(8 * i as u32).unwrap_or(0);
                    assert_eq!(short, want, "{len} {i}");
                }
            }
        }
    }

    /// Any bytes at all, numbers or not, short or long, ASCII or not:
    /// `to_f64` is Rust's parser, NaN where that fails (its own
    /// extensions, `1.`, `.5`, `+1` or `inf`, reach it through the
    /// fallback).
    #[test]
    fn any_bytes_as_the_parser_reads_them() {
        let agrees = |bytes: &[u8]| {
            let parsed = std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.parse::<f64>().ok())
                .unwrap_or(f64::NAN);
            let got = to_f64(bytes);
            assert!(
                got.to_bits() == parsed.to_bits() || got.is_nan() && parsed.is_nan(),
                "{:?}: {got} != {parsed}",
                String::from_utf8_lossy(bytes)
            );
        };
        let mut rng = crate::testing::Rng::new(8);
        let alphabet = b"0123456789012345678900000-.eE+x \0\xc3\xa9\xff";
        for k in 0..400_000 {
            let len = if k % 2 == 0 {
                rng.below(9)
            } else {
                rng.below(30)
            };
            let bytes: Vec<u8> = (0..len).map(|_| rng.pick(alphabet)).collect();
            agrees(&bytes);
        }
        for s in [
            "0", "-0", "-", "", "1.", ".5", "-.5", "-1.", "1.5.", "1..5", "1-", "12-4", "1é", "1.é",
        ] {
            agrees(s.as_bytes());
        }
    }

    #[test]
    fn eight_and_four_digits_at_once() {
        let mut rng = crate::testing::Rng::new(5);
        for k in 0..crate::testing::rounds(100_000) as u64 {
            let v = if k < 1000 {
                k
            } else {
                rng.next_u64() % 100_000_000
            };
            let text = format!("{v:08}");
            let word = u64::from_le_bytes(text.as_bytes().try_into().unwrap());
            assert_eq!(eight_digits(word - ZEROS), v, "{text}");
            let four = u32::from_le_bytes(text.as_bytes()[4..].try_into().unwrap());
            assert_eq!(four_digits(four - 0x3030_3030), v % 10_000, "{text}");
        }
    }

    /// The table against plain integer arithmetic where that reaches:
    /// 5^q itself for q <= 55, and for 5^-k (k <= 27) the property that
    /// defines a rounded-down 2^b / 5^k: entry · 5^k <= 2^b < (entry + 1)
    /// · 5^k.
    #[test]
    fn pow5_table_entries() {
        let entry = |q: i64| {
            let [high, low] = POW5[(q - POW5_MIN) as usize];
            u128::from(high) << 64 | u128::from(low)
        };
        for q in 0..=55 {
            let exact = 5u128.pow(q);
            assert_eq!(entry(q.into()), exact << exact.leading_zeros(), "5^{q}");
        }
        for k in 1..=27u32 {
            let entry = entry(-i64::from(k));
            assert!(entry >> 127 == 1, "5^-{k}");
            let five = u128::from(5u64.pow(k));
            // entry · 5^k as 192 bits: (high, low) with high the upper 128.
            let product = |e: u128| {
                let low = (e as u64 as u128) * five;
                let high = (e >> 64) * five + (low >> 64);
                (high, low as u64)
            };
            let (high, _) = product(entry);
            let (next_high, _) = product(entry + 1);
            // 2^b: the power of two (entry + 1) · 5^k passes (it is no
            // power of two itself, and below 2^(b + 1) as 5^k < entry).
            let b = 191 - next_high.leading_zeros();
            assert!(high < 1u128 << (b - 64), "5^-{k}");
        }
        // Every entry leads with its top bit.
        assert!(POW5.iter().all(|[high, _]| high >> 63 == 1));
    }

    /// The bits below the rounding bit decide unless they are 0 or one
    /// of their two largest values, and the quick test on the low word
    /// lets through every product that is not decided.
    #[test]
    fn undecided_products() {
        let mut rng = crate::testing::Rng::new(4);
        for bits in [73, 74] {
            let all = (1u128 << bits) - 1;
            for (rest, want) in [
                (0, false),
                (1, true),
                (2, true),
                (1 << 64, true),
                (all - 2, true),
                (all - 1, false),
                (all, false),
            ] {
                for _ in 0..100 {
                    let high = u128::from(rng.next_u64()) << bits;
                    let product = high | rest;
                    assert_eq!(decided(product, bits), want, "{rest:#x}");
                    if !want {
                        assert!((product as u64).wrapping_add(2) <= 2);
                    }
                }
            }
        }
    }

    /// `dyadic` answers exactly when the value is an integer times a
    /// power of two within ±27, and then with the parser's double (its
    /// callers only reach it for values near a rounding boundary, rare
    /// among random ones, so it is tested on its own).
    #[test]
    fn dyadic_values_round_exactly() {
        let mut rng = crate::testing::Rng::new(3);
        let mut answered = 0;
        for k in 0..200_000 {
            let digits = match k % 3 {
                0 => rng.next_u64() % 10_000_000_000_000_000_000,
                1 => (rng.next_u64() >> rng.below(64)) << rng.below(20),
                // Multiples of a power of five.
                _ => (rng.next_u64() >> 34) * 5u64.pow(rng.below(14) as u32),
            };
            let exponent = rng.below(61) as i64 - 30;
            let d = Decimal {
                negative: rng.one_in(2),
                digits,
                exponent,
            };
            let s = format!("{}{digits}e{exponent}", if d.negative { "-" } else { "" });
            let parsed: f64 = s.parse().unwrap();
            let exact = match exponent {
                0..=27 => true,
                -27..0 => digits.is_multiple_of(5u64.pow(exponent.unsigned_abs() as u32)),
                _ => false,
            };
            match dyadic(d.negative, d.digits, d.exponent) {
                Some(v) => {
                    assert!(exact, "{s}");
                    assert_eq!(v.to_bits(), parsed.to_bits(), "{s}");
                    answered += 1;
                }
                None => assert!(!exact, "{s}"),
            }
        }
        assert!(answered > 80_000, "{answered}");
        // A tie (2^53 + 1), u64::MAX, the largest product, 3 · 2^-26.
        for (digits, exponent) in [
            (9_007_199_254_740_993, 0),
            (u64::MAX, 0),
            (9_999_999_999_999_999_999, 27),
            (3 * 5u64.pow(26), -26),
        ] {
            let s = format!("{digits}e{exponent}");
            let parsed: f64 = s.parse().unwrap();
            let d = Decimal {
                negative: false,
                digits,
                exponent,
            };
            let got = dyadic(d.negative, d.digits, d.exponent);
            assert_eq!(got.map(f64::to_bits), Some(parsed.to_bits()), "{s}");
        }
    }

    #[test]
    fn doubles_round_correctly() {
        assert_eq!(to_f64(b"0.1"), 0.1);
        assert!(to_f64(b"-0").is_sign_negative());
        assert_eq!(to_f64(b"1e400"), f64::INFINITY);
        assert_eq!(to_f64(b"-1e400"), f64::NEG_INFINITY);
        assert_eq!(to_f64(b"1e-400"), 0.0);
        assert_eq!(to_f64(b"9007199254740993"), 9007199254740992.0);
        assert_eq!(to_f64(b"2.2250738585072011e-308"), 2.225073858507201e-308);
        assert!(to_f64(b"1x").is_nan());
        for s in [
            "0",
            "-0",
            "-0.0",
            "0e5",
            "-0e5",
            "0e400",
            "-0e-400",
            "0.000",
            "9007199254740992",
            "9007199254740993",
            "9007199254740994",
            "9007199254740995",
            "18014398509481985",
            "18014398509481986",
            "18446744073709551615",
            "9223372036854776833",
            "9223372036854775808",
            "1e22",
            "1e23",
            "8e23",
            "1.5E+2",
            "2.2250738585072011e-308",
            "2.2250738585072012e-308",
            "2.2250738585072014e-308",
            "2.225073858507201e-308",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "-1.7976931348623157e308",
            "179769313486231570000e288",
            "4.9e-324",
            "5e-324",
            "2.4703282292062327e-324",
            "2.4703282292062328e-324",
            "2.47032822920623272e-324",
            "1e-324",
            "3e-324",
            "1e400",
            "1e-400",
            "-1e400",
            "1e308",
            "1e309",
            "1e-307",
            "1e-308",
            "1e-342",
            "1e-343",
            "9999999999999999999e-343",
            "9999999999999999999e-362",
            "1e-999999999",
            "1e999999999",
            "0.1",
            "0.3",
            "1.1",
            "123456789012345678",
            "7.2057594037927933e16",
            "-65.613616999999977",
            "3.141592653589793",
            "2.718281828459045235360287",
            "1.00000000000000011102230246251565404236316680908203125",
            "1.00000000000000011102230246251565404236316680908203124",
            "1.00000000000000011102230246251565404236316680908203126",
            "123456789012345678901234567890",
        ] {
            path(s);
        }
    }

    /// Random spellings from the crate's generator (up to 20 integer and
    /// 20 fraction digits, exponents up to 999): the parser's double
    /// every time, and the fast paths decide most of them.
    #[test]
    fn the_fast_paths_are_the_parsers() {
        let mut rng = crate::testing::Rng::new(99);
        let (mut paths, n) = ([0; 3], crate::testing::rounds(300_000));
        for _ in 0..n {
            let s = crate::testing::random_number(&mut rng, 2, 3);
            assert_eq!(number_end(s.as_bytes(), 0), Some(s.len()), "{s}");
            paths[path(&s)] += 1;
        }
        // The rest have more than 19 digits, or their double is 0,
        // subnormal or infinite.
        assert!(paths[0] > n / 3 && paths[1] > n / 10, "{paths:?}");
    }

    /// A random spelling of a number of 1..=25 significant digits whose
    /// value lies anywhere from below the least subnormal to past the
    /// largest double, with or without a point, an exponent, leading
    /// zeros, an exponent sign or zeros in the exponent.
    fn random_spelling(rng: &mut crate::testing::Rng) -> String {
        let count = 1 + rng.below(25);
        let mut digits: Vec<u8> = (0..count).map(|_| b'0' + rng.below(10) as u8).collect();
        digits[0] = b'1' + rng.below(9) as u8;
        if rng.one_in(4) {
            let keep = 1 + rng.below(count);
            digits[keep..].fill(b'0');
        }
        // The value is about 10^magnitude.
        let magnitude: i64 = match rng.below(4) {
            0 => -330 + rng.below(30) as i64,
            1 => 295 + rng.below(20) as i64,
            _ => -345 + rng.below(660) as i64,
        };
        let mut s = String::new();
        if rng.one_in(2) {
            s.push('-');
        }
        let digits = String::from_utf8(digits).unwrap();
        // Where the point goes: after `point` digits (0: "0." and zeros).
        let point = rng.below(count + 1);
        let exponent = if point == 0 {
            let zeros = rng.below(4);
            s.push_str("0.");
            s.push_str(&"0".repeat(zeros));
            s.push_str(&digits);
            magnitude + 1 + zeros as i64
        } else {
            s.push_str(&digits[..point]);
            if point < count {
                s.push('.');
                s.push_str(&digits[point..]);
            }
            magnitude - (point as i64 - 1)
        };
        if exponent != 0 || rng.one_in(4) {
            s.push(rng.pick(&['e', 'E']));
            if exponent >= 0 && rng.one_in(3) {
                s.push('+');
            }
            if exponent < 0 {
                s.push('-');
            }
            if rng.one_in(8) {
                s.push('0');
            }
            s.push_str(&exponent.unsigned_abs().to_string());
        }
        s
    }

    #[test]
    fn random_numbers_across_the_whole_range() {
        let mut rng = crate::testing::Rng::new(2021);
        let (mut paths, n) = ([0; 3], crate::testing::rounds(1_000_000));
        for _ in 0..n {
            let s = random_spelling(&mut rng);
            assert_eq!(number_end(s.as_bytes(), 0), Some(s.len()), "{s}");
            paths[path(&s)] += 1;
        }
        // 19 digits or fewer (about 3/4), a normal double (about 3/4 of
        // those): decided without the parser.
        assert!(paths[0] + paths[1] > n / 2, "{paths:?}");
    }

    /// The exact decimal digits of the point halfway between the positive
    /// double `x` and the next one up: (digits, exponent) with value
    /// digits × 10^exponent. Long multiplication in base 10^9.
    fn midpoint(x: f64) -> (String, i64) {
        let bits = x.to_bits();
        let (fraction, biased) = (bits & ((1 << 52) - 1), (bits >> 52) as i64);
        let (m, e) = if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | 1 << 52, biased - 1075)
        };
        // (2m + 1) · 2^(e - 1)
        let (odd, e) = (2 * m + 1, e - 1);
        let mut limbs = vec![odd % 1_000_000_000, odd / 1_000_000_000];
        let multiply = |limbs: &mut Vec<u64>, by: u64| {
            let mut carry = 0;
            for limb in limbs.iter_mut() {
                let x = *limb * by + carry;
                *limb = x % 1_000_000_000;
                carry = x / 1_000_000_000;
            }
            while carry > 0 {
                limbs.push(carry % 1_000_000_000);
                carry /= 1_000_000_000;
            }
        };
        // 2^e, or 5^-e · 10^e, a few factors at a time.
        let (factor, chunk, mut left) = if e >= 0 { (2u64, 28, e) } else { (5, 12, -e) };
        while left > 0 {
            let k = left.min(chunk);
            multiply(&mut limbs, factor.pow(k as u32));
            left -= k;
        }
        let mut digits = String::new();
        for (k, limb) in limbs.iter().rev().enumerate() {
            if k == 0 {
                digits.push_str(&limb.to_string());
            } else {
                digits.push_str(&format!("{limb:09}"));
            }
        }
        let digits = digits.trim_start_matches('0').to_string();
        (digits, e.min(0))
    }

    /// Numbers within a hair of halfway between two doubles, where the
    /// rounding is decided by the last digits: the exact midpoint when
    /// it has at most 25 digits, and its first 15..=25 digits rounded
    /// down and up.
    #[test]
    fn near_halfway_between_doubles() {
        let mut rng = crate::testing::Rng::new(1);
        assert_eq!(
            midpoint(1.0),
            (
                "100000000000000011102230246251565404236316680908203125".to_string(),
                -53
            )
        );
        let mut decided = 0;
        for k in 0..30_000 {
            let x = match k % 10 {
                // Subnormals.
                0 => f64::from_bits(rng.next_u64() % (1 << 52)),
                // Integers past 2^53, where exact midpoints are short.
                1 => (rng.next_u64() >> rng.below(11)) as f64,
                _ => f64::from_bits(rng.next_u64() >> 1),
            };
            if !x.is_finite() || x == f64::MAX {
                continue;
            }
            let (digits, exponent) = midpoint(x);
            let mut spellings = Vec::new();
            if digits.len() <= 25 {
                spellings.push((digits.clone(), exponent));
            }
            for count in 15..=25.min(digits.len()) {
                let dropped = (digits.len() - count) as i64;
                let down: u128 = digits[..count].parse().unwrap();
                spellings.push((down.to_string(), exponent + dropped));
                spellings.push(((down + 1).to_string(), exponent + dropped));
            }
            for (digits, exponent) in spellings {
                let s = if rng.one_in(2) {
                    format!("{digits}e{exponent}")
                } else {
                    let exponent = exponent + digits.len() as i64 - 1;
                    format!("{}.{}e{exponent}", &digits[..1], &digits[1..])
                };
                let s = s.replace(".e", "e");
                decided += usize::from(path(&s) < 2);
            }
        }
        assert!(decided > 100_000, "{decided}");
    }

    /// Every number of canada.json (coordinates of 16 and 17 digits),
    /// from the shared corpus if it is there.
    #[test]
    #[cfg_attr(miri, ignore)] // reads a corpus file, which Miri's isolation refuses
    fn canada_coordinates() {
        let mut dirs = Vec::new();
        if let Some(data) = std::env::var_os("QJSON_DATA") {
            dirs.push(std::path::PathBuf::from(data));
        }
        dirs.push(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
        dirs.push("/work/shared/data".into());
        let Some(text) = dirs
            .iter()
            .find_map(|d| std::fs::read(d.join("corpus/canada.json")).ok())
        else {
            eprintln!("canada.json not found (set QJSON_DATA): skipped");
            return;
        };
        let mut paths = [0; 3];
        let mut i = 0;
        while i < text.len() {
            if matches!(text[i], b'-' | b'0'..=b'9') {
                let end = number_end(&text, i).expect("a number");
                paths[path(std::str::from_utf8(&text[i..end]).unwrap())] += 1;
                i = end;
            } else {
                i += 1;
            }
        }
        eprintln!("canada.json: {paths:?} by Clinger, Eisel–Lemire, the parser");
        assert_eq!(paths.iter().sum::<usize>(), 111_126);
        assert_eq!(paths[2], 0);
    }

    #[test]
    fn integers_are_exact_across_the_whole_range() {
        assert_eq!(to_i64(b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(to_i64(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(to_i64(b"9223372036854775808"), Err(ErrorCode::OutOfRange));
        assert_eq!(to_i64(b"-9223372036854775809"), Err(ErrorCode::OutOfRange));
        assert_eq!(to_i64(b"9007199254740993"), Ok(9007199254740993));
        assert_eq!(to_i64(b"-0"), Ok(0));
        assert_eq!(to_i64(b"0"), Ok(0));
    }

    #[test]
    fn integral_spellings_with_fraction_or_exponent() {
        assert_eq!(to_i64(b"1.0"), Ok(1));
        assert_eq!(to_i64(b"2.50e1"), Ok(25));
        assert_eq!(to_i64(b"1E3"), Ok(1000));
        assert_eq!(to_i64(b"-1.5e1"), Ok(-15));
        assert_eq!(to_i64(b"0e400"), Ok(0));
        assert_eq!(to_i64(b"0.000"), Ok(0));
        assert_eq!(to_i64(b"92233720368547758.07e2"), Ok(i64::MAX));
        assert_eq!(to_i64(b"1.5"), Err(ErrorCode::NotInteger));
        assert_eq!(to_i64(b"1e-1"), Err(ErrorCode::NotInteger));
        assert_eq!(to_i64(b"1e400"), Err(ErrorCode::OutOfRange));
        assert_eq!(
            to_i64(b"1e99999999999999999999999"),
            Err(ErrorCode::OutOfRange)
        );
        assert_eq!(
            to_i64(b"1e-99999999999999999999999"),
            Err(ErrorCode::NotInteger)
        );
        let long = format!("1{}", "0".repeat(10_000));
        assert_eq!(to_i64(long.as_bytes()), Err(ErrorCode::OutOfRange));
    }
}
