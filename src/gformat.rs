//! Numbers for the encoder: C's `printf("%.<precision>g", x)` of a double,
//! digit for digit, in integer arithmetic.
//!
//! lua-cjson prints every number with the C library's `snprintf`, which
//! rounds the exact binary value of the double to `precision` significant
//! digits, halfway cases to even. That costs 2 500 to 5 000 instructions
//! a number (glibc 2.36 under callgrind), which made float-heavy bodies
//! (coordinates, embeddings) as slow natively as in cjson. Here the same
//! rounding is done exactly: a double is `m * 2^e` with `m < 2^53`, so
//! `x / 10^s` is a quotient of two integers, and its rounding to the
//! nearest integer, ties to even, is one `u128` division (or shift) and a
//! comparison of the remainder with half the divisor. No approximation is
//! made anywhere, so there is no case to fall back from but size: when a
//! product does not fit 128 bits (`|x|` below about `10^(precision-23)`,
//! or at or above `2^128`), [`write()`] writes nothing and returns false,
//! and the caller asks `snprintf`.
//!
//! The text is laid out as `%g` says: with exponent `X` of the rounded
//! value, fixed notation when `-4 <= X < precision`, else `d.ddde±XX`;
//! trailing zeros of the fraction and a bare decimal point removed. The
//! decimal point is `.`, as `snprintf` writes it in the C locale (the
//! encoder turns any other one-byte point into `.` anyway). The tests hold
//! it to the C library's `snprintf` at every precision, on 100 000 random
//! doubles and on the halfway cases.

/// `10^k` for `k` in `0..=38`, every power of ten a `u128` holds.
const POW10: [u128; 39] = {
    let mut table = [1u128; 39];
    let mut k = 1;
    while k < 39 {
        table[k] = table[k - 1] * 10;
        k += 1;
    }
    table
};

/// "00" to "99".
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// The most significant digits [`write()`] is asked for (`%.17g` is the
/// most any double needs; cjson's option stops at 16).
pub const MAX_PRECISION: usize = 17;

/// Appends `x` (finite) as `printf("%.<precision>g", x)` writes it in the
/// C locale, for `precision` in `1..=MAX_PRECISION`, and returns true; or
/// returns false, appending nothing, when `x` is outside the range this
/// computes in 128 bits (see the module docs) or the precision is not
/// one of those.
pub fn write(x: f64, precision: usize, out: &mut Vec<u8>) -> bool {
    if !(1..=MAX_PRECISION).contains(&precision) || !x.is_finite() {
        return false;
    }
    let negative = x.is_sign_negative();
    if x == 0.0 {
        out.extend_from_slice(if negative { b"-0" } else { b"0" });
        return true;
    }
    let (m, e) = decompose(x.abs());
    let Some((digits, exponent)) = round_to_digits(m, e, precision) else {
        return false;
    };
    let mut text = [0u8; MAX_PRECISION];
    let digits = decimal(digits, &mut text);
    if negative {
        out.push(b'-');
    }
    lay_out(digits, exponent, precision, out);
    true
}

/// `(m, e)` with `x == m * 2^e` exactly, `m` odd (or `x` zero): the
/// smaller `m`, the smaller the products below.
fn decompose(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (m, e) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | 1 << 52, biased - 1075)
    };
    if m == 0 {
        return (0, 0);
    }
    let zeros = m.trailing_zeros();
    (m >> zeros, e + zeros as i32)
}

/// The `precision` significant digits of `m * 2^e` (positive), rounded to
/// nearest with ties to even, as an integer in
/// `[10^(precision-1), 10^precision)`, and the decimal exponent of its
/// first digit; `None` when a product does not fit 128 bits.
fn round_to_digits(m: u64, e: i32, precision: usize) -> Option<(u64, i32)> {
    let p = precision as i32;
    // floor(log10(x)) or one less: x is in [2^b, 2^(b+1)).
    let b = 63 - m.leading_zeros() as i32 + e;
    let mut exponent = (f64::from(b) * core::f64::consts::LOG10_2).floor() as i32;
    let low = POW10[precision - 1];
    let high = POW10[precision];
    // The estimate is at most one short, and rounding up may carry into
    // one more digit: a few tries settle it.
    for _ in 0..4 {
        let rounded = round_scaled(m, e, exponent - p + 1)?;
        if rounded >= high {
            exponent += 1;
        } else if rounded < low {
            exponent -= 1;
        } else {
            return Some((rounded as u64, exponent));
        }
    }
    None
}

/// `m * 2^e / 10^s` rounded to the nearest integer, ties to even; `None`
/// when it cannot be computed exactly in 128 bits.
fn round_scaled(m: u64, e: i32, s: i32) -> Option<u128> {
    let m = u128::from(m);
    // numerator / denominator, one of them a power of two times the rest.
    let (numerator, denominator) = if s >= 0 {
        let tens = *POW10.get(s as usize)?;
        if e >= 0 {
            (shift_left(m, e as u32)?, tens)
        } else {
            (m, shift_left(tens, e.unsigned_abs())?)
        }
    } else {
        let scaled = m.checked_mul(*POW10.get(s.unsigned_abs() as usize)?)?;
        if e >= 0 {
            return shift_left(scaled, e as u32);
        }
        let j = e.unsigned_abs();
        if j >= 128 {
            return None;
        }
        // A power of two below: a shift and a mask.
        let quotient = scaled >> j;
        let remainder = scaled & ((1u128 << j) - 1);
        let half = 1u128 << (j - 1);
        return Some(round_half_even(quotient, remainder.cmp(&half)));
    };
    let (quotient, remainder) =
        if let (Ok(n), Ok(d)) = (u64::try_from(numerator), u64::try_from(denominator)) {
            (u128::from(n / d), u128::from(n % d))
        } else {
            (numerator / denominator, numerator % denominator)
        };
    // remainder < denominator, so denominator - remainder does not wrap;
    // comparing it with the remainder compares the remainder with half.
    Some(round_half_even(
        quotient,
        remainder.cmp(&(denominator - remainder)),
    ))
}

/// `value << by`, or `None` if bits would be lost.
fn shift_left(value: u128, by: u32) -> Option<u128> {
    if by >= 128 || value.leading_zeros() < by {
        return None;
    }
    Some(value << by)
}

/// The quotient rounded by how its remainder compares with one half.
fn round_half_even(quotient: u128, against_half: core::cmp::Ordering) -> u128 {
    use core::cmp::Ordering::{Equal, Greater};
    match against_half {
        Greater => quotient + 1,
        Equal if quotient & 1 == 1 => quotient + 1,
        _ => quotient,
    }
}

/// The decimal digits of `n` (below `10^MAX_PRECISION`), at the end of
/// `text`.
fn decimal(mut n: u64, text: &mut [u8; MAX_PRECISION]) -> &[u8] {
    let mut at = text.len();
    while n >= 100 && at >= 2 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        text[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 && at >= 2 {
        let pair = n as usize * 2;
        at -= 2;
        text[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else if at >= 1 {
        at -= 1;
        text[at] = b'0' + n as u8;
    }
    &text[at..]
}

/// Writes the significant `digits` (the first nonzero) of a number whose
/// first digit has decimal exponent `exponent`, as `%.<precision>g`.
fn lay_out(digits: &[u8], exponent: i32, precision: usize, out: &mut Vec<u8>) {
    // Trailing zeros go in either notation.
    let kept = digits.len() - digits.iter().rev().take_while(|&&d| d == b'0').count();
    let digits = &digits[..kept.max(1)];
    if exponent < -4 || exponent >= precision as i32 {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exponent < 0 { b'-' } else { b'+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude >= 100 {
            out.push(b'0' + (magnitude / 100) as u8);
        }
        let pair = (magnitude % 100) as usize * 2;
        out.extend_from_slice(&PAIRS[pair..pair + 2]);
    } else if exponent >= 0 {
        let whole = exponent as usize + 1;
        if digits.len() <= whole {
            out.extend_from_slice(digits);
            out.resize(out.len() + whole - digits.len(), b'0');
        } else {
            out.extend_from_slice(&digits[..whole]);
            out.push(b'.');
            out.extend_from_slice(&digits[whole..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (exponent.unsigned_abs() - 1) as usize, b'0');
        out.extend_from_slice(digits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ffi::{c_char, c_int};

    unsafe extern "C" {
        fn snprintf(s: *mut c_char, n: usize, format: *const c_char, ...) -> c_int;
    }

    /// What the C library writes (the tests run in the C locale).
    fn libc(x: f64, precision: usize) -> String {
        let format = std::ffi::CString::new(format!("%.{precision}g")).unwrap();
        let mut text = [0u8; 64];
        // SAFETY: 64 writable bytes; the format takes one double.
        let len = unsafe { snprintf(text.as_mut_ptr().cast(), 64, format.as_ptr(), x) };
        String::from_utf8(text[..len as usize].to_vec()).unwrap()
    }

    fn ours(x: f64, precision: usize) -> Option<String> {
        let mut out = b"kept".to_vec();
        if !write(x, precision, &mut out) {
            assert_eq!(out, b"kept");
            return None;
        }
        assert_eq!(&out[..4], b"kept");
        Some(String::from_utf8(out[4..].to_vec()).unwrap())
    }

    /// Checks x at every precision; returns how many it wrote itself.
    fn check(x: f64) -> usize {
        let mut written = 0;
        for precision in 1..=MAX_PRECISION {
            if let Some(s) = ours(x, precision) {
                assert_eq!(
                    s,
                    libc(x, precision),
                    "{x:e} ({:#x}) at {precision}",
                    x.to_bits()
                );
                written += 1;
            }
        }
        written
    }

    struct Xorshift(u64);
    impl Xorshift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // Miri cannot call the C library's snprintf
    fn special_values() {
        let values = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            0.5,
            2.5,
            1.0 / 3.0,
            123.456,
            99999999999999.0,
            999999999999999.0,
            440103099353365.0,
            24064909824598.5,
            604256559640.625,
            12345678901234.5,
            9007199254740993.0,
            1e15,
            1e16,
            1e17,
            1e21,
            1e22,
            1e38,
            3.4e38,
            1e-5,
            1e-7,
            0.0001,
            0.00001,
            0.000099999999999999,
            9.9999999999999e-5,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            (2f64).powi(53),
            (2f64).powi(63),
            (2f64).powi(64),
            (2f64).powi(127),
            (2f64).powi(128),
            -65.61361699999998, // canada.json's -65.613616999999977
            505874924095815681.0,
            0.30000000000000004,
            9.5,
            0.95,
            0.995,
            9.995,
        ];
        for x in values {
            check(x);
            check(-x);
        }
        assert_eq!(ours(0.7, 14).as_deref(), Some("0.7"));
        assert_eq!(ours(-0.0, 14).as_deref(), Some("-0"));
        assert_eq!(ours(1e300, 14), None);
        assert_eq!(ours(1.0, 0), None);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // Miri cannot call the C library's snprintf
    fn ties_round_to_even() {
        // Exactly halfway at the last digit: integers and short binary
        // fractions, the only doubles that can be.
        for (x, p, want) in [
            (0.5, 1, "0.5"),
            (2.5, 1, "2"),
            (3.5, 1, "4"),
            (0.125, 2, "0.12"),
            (0.375, 2, "0.38"),
            (440103099353365.0, 14, "4.4010309935336e+14"),
            (25.0, 1, "2e+01"),
            (35.0, 1, "4e+01"),
        ] {
            assert_eq!(ours(x, p).as_deref(), Some(want), "{x} at {p}");
            assert_eq!(libc(x, p), want);
        }
        // Every k/2^j with a few digits, at every precision.
        for j in 1..=30 {
            for k in (1u64..2000).step_by(7) {
                check(k as f64 / (1u64 << j) as f64);
            }
        }
        for digits in 2..=19u32 {
            for last in [5u64, 15, 25, 50, 500, 4999, 5001] {
                check((10u64.pow(digits) + last) as f64);
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // Miri cannot call the C library's snprintf
    fn random_doubles_match_the_c_library() {
        let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
        let mut written = 0;
        for _ in 0..100_000 {
            let r = rng.next();
            // Any bit pattern, and values in the ranges JSON holds.
            let x = match r % 4 {
                0 => f64::from_bits(rng.next()),
                1 => (rng.next() >> 11) as f64 / (1u64 << ((r >> 8) % 64)) as f64,
                2 => (rng.next() as i64) as f64 * 10f64.powi((r >> 8) as i32 % 40 - 20),
                _ => {
                    let digits = rng.next() % 10u64.pow(1 + (r >> 8) as u32 % 17);
                    digits as f64 / 10f64.powi((r >> 16) as i32 % 22)
                }
            };
            if x.is_finite() {
                written += check(x);
            }
        }
        // Most of them are within range.
        assert!(written > 100_000 * 17 / 2, "{written}");
    }
}
