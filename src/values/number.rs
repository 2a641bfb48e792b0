//! Numbers: the JSON grammar, correctly rounded doubles, exact integers.
//!
//! `to_f64` takes Clinger's fast path when the digits fit 2^53 and the
//! decimal exponent ±22 (one exact multiplication or division), else
//! Rust's float parser, which rounds correctly (Eisel–Lemire with an
//! exact fallback); a magnitude beyond the double range becomes
//! ±infinity, as `strtod` and lua-cjson give. `to_i64` is exact:
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
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut mask = 0;
    for (k, word) in window.chunks_exact(8).enumerate() {
        // Digits become 0..=9; adding 0x76 to the low seven bits carries
        // into the high bit from 10 up, and never into the next byte.
        let d = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ 0x3030_3030_3030_3030;
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
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    // A byte above '9' reaches 0x80 when 0x46 is added.
    const PAST_NINE: u64 = 0x4646_4646_4646_4646;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
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
/// Most numbers are decided by [`exact_f64`]; the rest by Rust's parser.
pub fn to_f64(number: &[u8]) -> f64 {
    if let Some(v) = exact_f64(number) {
        return v;
    }
    // A valid JSON number is ASCII; testing that is cheaper than a full
    // UTF-8 check and keeps any other input from reaching the str parser.
    if !number.is_ascii() {
        return f64::NAN;
    }
    // SAFETY: ASCII bytes are UTF-8.
    let text = unsafe { core::str::from_utf8_unchecked(number) };
    text.parse().unwrap_or(f64::NAN)
}

/// Powers of ten a double holds exactly.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Clinger's fast path: the nearest double to the JSON number `n` when
/// its digits, read as one integer, are at most 2^53 and its decimal
/// exponent is within ±22. The integer and the power of ten are then
/// both exact doubles, so one multiplication or division rounds
/// correctly: the same double as the full parser's. `None` otherwise
/// (and for anything that is not a JSON number).
#[inline]
fn exact_f64(n: &[u8]) -> Option<f64> {
    let (negative, rest) = match n.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, n),
    };
    let mut mantissa = 0u64;
    let mut digits = 0usize;
    let mut scale = 0i32;
    let mut k = 0;
    let digit = |k: usize| {
        rest.get(k)
            .map(|&d| d.wrapping_sub(b'0'))
            .filter(|&d| d <= 9)
    };
    while let Some(d) = digit(k) {
        mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d));
        digits += 1;
        k += 1;
    }
    if k == 0 {
        return None;
    }
    if rest.get(k) == Some(&b'.') {
        k += 1;
        let from = k;
        while let Some(d) = digit(k) {
            mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d));
            digits += 1;
            k += 1;
        }
        if k == from {
            return None;
        }
        scale = -((k - from) as i32);
    }
    if let Some(&e) = rest.get(k) {
        if e | 0x20 != b'e' {
            return None;
        }
        k += 1;
        let sign = match rest.get(k) {
            Some(b'-') => {
                k += 1;
                -1
            }
            Some(b'+') => {
                k += 1;
                1
            }
            _ => 1,
        };
        // At most two digits: anything longer is out of range here.
        let (Some(high), low) = (digit(k), digit(k + 1)) else {
            return None;
        };
        let end = k + 1 + usize::from(low.is_some());
        if end != rest.len() {
            return None;
        }
        let exponent = match low {
            Some(low) => i32::from(high) * 10 + i32::from(low),
            None => i32::from(high),
        };
        scale += sign * exponent;
    }
    // At most 19 digits, so the mantissa has not wrapped.
    if digits > 19 || mantissa > 1 << 53 || !(-22..=22).contains(&scale) {
        return None;
    }
    let m = mantissa as f64;
    let magnitude = if scale >= 0 {
        m * EXACT_POWERS[scale as usize]
    } else {
        m / EXACT_POWERS[(-scale) as usize]
    };
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

    /// Random spellings: the fast path gives the parser's double, bit
    /// for bit, whenever it answers, and answers for most.
    #[test]
    fn the_exact_path_is_the_parsers() {
        let mut rng = crate::testing::Rng::new(99);
        let mut exact = 0;
        for _ in 0..200_000 {
            let s = crate::testing::random_number(&mut rng, 2, 3);
            assert_eq!(number_end(s.as_bytes(), 0), Some(s.len()), "{s}");
            let parsed: f64 = s.parse().unwrap();
            if let Some(v) = exact_f64(s.as_bytes()) {
                assert_eq!(v.to_bits(), parsed.to_bits(), "{s}");
                exact += 1;
            }
            assert_eq!(to_f64(s.as_bytes()).to_bits(), parsed.to_bits(), "{s}");
        }
        assert!(exact > 50_000, "{exact}");
        for s in [
            "0",
            "-0",
            "9007199254740992",
            "1e22",
            "0.1",
            "-0e5",
            "1.5E+2",
        ] {
            let parsed: f64 = s.parse().unwrap();
            assert_eq!(
                exact_f64(s.as_bytes()).map(f64::to_bits),
                Some(parsed.to_bits()),
                "{s}"
            );
        }
        for s in [
            "9007199254740993",
            "1e23",
            "1e100",
            "12345678901234567890",
            "",
            "-",
            "1.",
            "1e",
            ".5",
            "1x",
            "1e+",
            "0x1",
        ] {
            assert_eq!(exact_f64(s.as_bytes()), None, "{s}");
        }
    }

    #[test]
    fn doubles_round_correctly() {
        assert_eq!(to_f64(b"0.1"), 0.1);
        assert_eq!(to_f64(b"-0"), 0.0);
        assert!(to_f64(b"-0").is_sign_negative());
        assert_eq!(to_f64(b"1e400"), f64::INFINITY);
        assert_eq!(to_f64(b"-1e400"), f64::NEG_INFINITY);
        assert_eq!(to_f64(b"1e-400"), 0.0);
        assert_eq!(to_f64(b"9007199254740993"), 9007199254740992.0);
        assert_eq!(to_f64(b"2.2250738585072011e-308"), 2.225073858507201e-308);
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
