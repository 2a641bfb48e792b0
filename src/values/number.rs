//! Numbers: the JSON grammar, correctly rounded doubles, exact integers.
//!
//! `to_f64` relies on Rust's float parser, which rounds correctly (Eisel–
//! Lemire with an exact fallback); a magnitude beyond the double range
//! becomes ±infinity, as `strtod` and lua-cjson give. `to_i64` is exact:
//! it accepts any spelling of an integer (`12`, `-0`, `1.0`, `2.5e1`,
//! `1E3`) whose value fits, and says why otherwise, without ever going
//! through a double.

use crate::error::ErrorCode;

/// The end of the JSON number that starts at `src[start]`, or `None` if
/// the bytes there are not a number. The caller checks what follows.
#[inline]
pub fn number_end(src: &[u8], start: usize) -> Option<usize> {
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
pub fn to_f64(number: &[u8]) -> f64 {
    // A valid JSON number is ASCII; testing that is cheaper than a full
    // UTF-8 check and keeps any other input from reaching the str parser.
    if !number.is_ascii() {
        return f64::NAN;
    }
    // SAFETY: ASCII bytes are UTF-8.
    let text = unsafe { core::str::from_utf8_unchecked(number) };
    text.parse().unwrap_or(f64::NAN)
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
