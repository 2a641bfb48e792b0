//! Blocks of 64 bytes with AVX-512 (F, BW, VBMI, VBMI2): one vector a
//! block, byte moves by `vpermb`, the short escapes' bytes by a 128-byte
//! table (`vpermi2b`), and the bytes kept packed by `vpcompressb`.

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use super::{DENSE, Run};
use crate::scan::escaped_bits;
use crate::values::string::{SHORT_ESCAPES, hex_digit};

/// Proof that the CPU supports AVX-512F, BW, VBMI and VBMI2, BMI1 and
/// POPCNT.
#[derive(Clone, Copy)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// # Safety
    /// The CPU must support AVX-512F, BW, VBMI and VBMI2, BMI1 and POPCNT
    /// (the caller found the `avx512` kernel active, which requires them).
    pub(crate) unsafe fn new_unchecked() -> Avx512 {
        Avx512(())
    }
}

/// [`super::decode`] with AVX-512, or [`super::decode_string`] when
/// `STRING`.
pub(crate) fn run<const STRING: bool>(
    token: Avx512,
    body: &[u8],
    r: usize,
    dst: &mut [u8],
    w: usize,
) -> Run {
    // SAFETY: an `Avx512` exists, so the CPU has the features run_avx512
    // enables.
    unsafe { run_avx512::<STRING>(token, body, r, dst, w) }
}

/// Byte `i` holds `i`: the block's positions, from which `vpermb`'s
/// indexes are made.
static POSITIONS: [u8; 64] = {
    let mut p = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        p[i] = i as u8;
        i += 1;
    }
    p
};

/// For each byte below 0x80, its value as a hex digit, or 0xff where it
/// is none.
static HEX_DIGITS: [u8; 128] = {
    let mut t = [0xffu8; 128];
    let mut b = 0;
    while b < 128 {
        if let Some(d) = hex_digit(b as u8) {
            t[b] = d;
        }
        b += 1;
    }
    t
};

/// The escapes that may run past a block's end: those from byte 59 (a
/// `\uXXXX` takes six bytes), and from byte 53 those that may be the
/// first half of a surrogate pair (twelve).
const LATE: u64 = !0 << 59;
const LATE_PAIR: u64 = !0 << 53;

/// Escapes every six bytes from a block's start, eight of them: a run of
/// them, which the blocks leave to the caller when it is of characters
/// from U+0800 (see the module docs).
const RUN: u64 = 0x0410_4104_1041;

/// [`run`], compiled for AVX-512.
///
/// # Safety
/// The CPU must support what an [`Avx512`] stands for.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi1,popcnt")]
unsafe fn run_avx512<const STRING: bool>(
    _token: Avx512,
    body: &[u8],
    mut r: usize,
    dst: &mut [u8],
    mut w: usize,
) -> Run {
    // Writing stays within `dst` because it never overtakes reading, or
    // (`STRING`) because a block is taken only with 64 bytes of room.
    if w > r || !STRING && dst.len() < body.len() {
        return Run {
            r,
            w,
            high: false,
            room: false,
        };
    }
    let (mut high_bytes, mut room) = (0, false);
    let splat = |b: u8| _mm512_set1_epi8(b as i8);
    // SAFETY: POSITIONS is 64 readable bytes, HEX_DIGITS 128 and
    // SHORT_ESCAPES 256 (its first 128, the bytes below 0x80, are read).
    let (positions, short_low, short_high, hex_low, hex_high) = unsafe {
        (
            _mm512_loadu_si512(POSITIONS.as_ptr().cast()),
            _mm512_loadu_si512(SHORT_ESCAPES.as_ptr().cast()),
            _mm512_loadu_si512(SHORT_ESCAPES.as_ptr().add(64).cast()),
            _mm512_loadu_si512(HEX_DIGITS.as_ptr().cast()),
            _mm512_loadu_si512(HEX_DIGITS.as_ptr().add(64).cast()),
        )
    };
    // `vpermb` indexes: byte i of `ahead(v, k)` is byte i + k of v, of
    // `behind(v, k)` byte i - k (modulo 64: the bytes that wrap are never
    // kept).
    let index = |k: i8| _mm512_add_epi8(positions, _mm512_set1_epi8(k));
    let (ahead1, ahead2, ahead3, ahead4, ahead6) =
        (index(1), index(2), index(3), index(4), index(6));
    let (behind1, behind2, behind3) = (index(-1), index(-2), index(-3));
    let ahead = |x: __m512i, by: __m512i| _mm512_permutexvar_epi8(by, x);
    // A byte shifted left or right within itself (AVX-512BW shifts 16-bit
    // lanes: the bits that cross into the next byte are masked off).
    macro_rules! left {
        ($x:expr, $k:literal, $keep:expr) => {
            _mm512_and_si512(_mm512_slli_epi16::<$k>($x), splat($keep))
        };
    }
    macro_rules! right {
        ($x:expr, $k:literal, $keep:expr) => {
            _mm512_and_si512(_mm512_srli_epi16::<$k>($x), splat($keep))
        };
    }
    let or3 = |a, b, c| _mm512_or_si512(_mm512_or_si512(a, b), c);
    // The bytes before `n`.
    let before = |n: usize| if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    while r < body.len() {
        if STRING && w + 64 > dst.len() {
            room = true;
            break;
        }
        let rest = body.len() - r;
        let len = rest.min(64);
        let in_block = before(len);
        // SAFETY: r < body.len(); the loads read the `len` bytes from r,
        // within `body`, and (masked when fewer than 64) no byte past them.
        // (Masked for every block, the loads cost a read of escaped text
        // more time on an AMD EPYC, Zen 5.)
        let v = unsafe {
            let at = body.as_ptr().add(r);
            if len == 64 {
                _mm512_loadu_si512(at.cast())
            } else {
                _mm512_maskz_loadu_epi8(in_block, at.cast())
            }
        };
        let backslashes = _mm512_cmpeq_epi8_mask(v, splat(b'\\')) & in_block;
        let escaped = escaped_bits(backslashes, &mut 0);
        // In a string of a text (`STRING`): where it ends, at its closing
        // quote, or at a raw control byte (an error, for the caller to
        // report).
        let end = if STRING {
            let quotes = _mm512_cmpeq_epi8_mask(v, splat(b'"')) & !escaped;
            let controls = _mm512_cmplt_epu8_mask(v, splat(0x20));
            (quotes | controls) & in_block
        } else {
            0
        };
        if backslashes == 0
            || STRING && end != 0 && end.trailing_zeros() < backslashes.trailing_zeros()
        {
            // No escape before the end of the block, or of the string.
            let n = if end == 0 {
                len
            } else {
                end.trailing_zeros() as usize
            };
            high_bytes |= _mm512_movepi8_mask(v) & before(n);
            // SAFETY: w + n <= r + n <= body.len() <= dst.len(), or (STRING)
            // w + 64 <= dst.len().
            unsafe { store(dst, w, v, n) };
            (r, w) = (r + n, w + n);
            if n < len {
                break;
            }
            continue;
        }
        // The escapes' backslashes: the first of each run, and every
        // other one after it (the block starts outside any escape).
        let starts = backslashes & !escaped;
        if starts.count_ones() < DENSE
            || starts & RUN == RUN
                && matches!(body[r..], [_, b'u', d, e, ..] if d != b'0' || e >= b'8')
        {
            // Few escapes (a line feed or a quote now and then); or a run of
            // `\uXXXX` from U+0800 (Chinese, Japanese, Korean escaped
            // throughout), which the caller's groups of four (`bmp_run`)
            // decode faster.
            break;
        }
        let after = ahead(v, ahead1);
        // Where the block ends: before an escape that may run past it (one
        // from byte 59, or from byte 53 one that may be the first half of a
        // surrogate pair, `\uD8` to `\uDB`), for the next block to start
        // with; or at the body's end. Found from the bytes alone, so that
        // the next block's load need not wait for the rest of this one's
        // work. (Not before a pair's second half: the pair is taken whole.)
        let at_end = rest <= 64;
        let taken = if at_end {
            len
        } else {
            let lower = |k| _mm512_or_si512(ahead(v, k), splat(0x20));
            let third = lower(ahead3);
            let maybe_high = _mm512_cmpeq_epi8_mask(lower(ahead2), splat(b'd'))
                & (_mm512_cmpeq_epi8_mask(_mm512_and_si512(third, splat(0xfe)), splat(b'8'))
                    | _mm512_cmplt_epu8_mask(_mm512_sub_epi8(third, splat(b'a')), splat(2)));
            let late = starts & (LATE | maybe_high & LATE_PAIR);
            if late == 0 {
                64
            } else {
                late.trailing_zeros() as usize
            }
        };
        // (An end in the string comes before any escape after it.)
        let (taken, at_string_end) = if end != 0 && (end.trailing_zeros() as usize) < taken {
            (end.trailing_zeros() as usize, true)
        } else {
            (taken, false)
        };
        let unicode = starts & _mm512_cmpeq_epi8_mask(after, splat(b'u'));
        let short = starts & !unicode;
        let short_byte = _mm512_permutex2var_epi8(short_low, after, short_high);
        let bad_short =
            _mm512_cmpeq_epi8_mask(short_byte, _mm512_setzero_si512()) | _mm512_movepi8_mask(after);
        // Every byte's value as a hex digit (the table's, by its low seven
        // bits), and where it is none (0xff, or a byte from 0x80); then each
        // pair of digits as a byte, and where a `\uXXXX` starts the high
        // and low bytes of its code unit.
        let digits = _mm512_permutex2var_epi8(hex_low, v, hex_high);
        let not_hex = _mm512_cmpeq_epi8_mask(digits, splat(0xff)) | _mm512_movepi8_mask(v);
        let pairs = _mm512_or_si512(left!(digits, 4, 0xf0), ahead(digits, ahead1));
        let (high, low) = (ahead(pairs, ahead2), ahead(pairs, ahead4));
        let bad_unicode = not_hex >> 2 | not_hex >> 3 | not_hex >> 4 | not_hex >> 5;
        let surrogate = _mm512_cmpeq_epi8_mask(_mm512_and_si512(high, splat(0xf8)), splat(0xd8));
        // A high surrogate (D800 to DBFF) followed at once by a low one
        // (DC00 to DFFF): one character, its four bytes in place of the
        // pair's twelve.
        let pair = if unicode & surrogate == 0 {
            0
        } else {
            let is_low = |x| _mm512_cmpeq_epi8_mask(_mm512_and_si512(x, splat(0xfc)), splat(0xdc));
            unicode
                & surrogate
                & !is_low(high)
                & !bad_unicode
                & (unicode & !bad_unicode & is_low(high)) >> 6
        };
        // What the blocks leave to the caller: a lone surrogate, an
        // invalid escape, or one that the body's end cuts short (garbage).
        let cut = if at_end {
            (unicode & !(in_block >> 5)) | (short & !(in_block >> 1)) | pair & !(in_block >> 11)
        } else {
            0
        };
        let left_over =
            short & bad_short | unicode & !pair & !(pair << 6) & (bad_unicode | surrogate) | cut;
        let left_over = left_over & before(taken);
        // Decodes the escapes before `$taken` and writes the block's bytes
        // up to there; gives where reading and writing go on. (A macro,
        // not a closure: the closure, called twice, was not inlined, and
        // every vector went through the stack.)
        macro_rules! write {
            ($taken:expr) => {{
                let taken: usize = $taken;
                let before = before(taken);
                let (short, pair) = (short & before, pair & before);
                let unicode = unicode & before & !pair & !(pair << 6);
                // The UTF-8 length of each code unit: one byte below U+0080,
                // three from U+0800, two between.
                let one = unicode
                    & _mm512_cmpeq_epi8_mask(high, _mm512_setzero_si512())
                    & _mm512_cmplt_epu8_mask(low, splat(0x80));
                let three = unicode & _mm512_cmpge_epu8_mask(high, splat(0x08));
                let two = unicode & !one & !three;
                // The bytes of each length's encoding, at every position.
                let low_top = right!(low, 6, 0x03);
                let last = _mm512_or_si512(_mm512_and_si512(low, splat(0x3f)), splat(0x80));
                let lead_two = or3(left!(high, 2, 0xfc), low_top, splat(0xc0));
                let lead_three = _mm512_or_si512(right!(high, 4, 0x0f), splat(0xe0));
                let middle_three = or3(left!(high, 2, 0x3c), low_top, splat(0x80));
                // Each escape's first byte where it starts, its second and
                // third after it.
                let mut out = _mm512_mask_mov_epi8(v, short, short_byte);
                out = _mm512_mask_mov_epi8(out, one, low);
                out = _mm512_mask_mov_epi8(out, two, lead_two);
                out = _mm512_mask_mov_epi8(out, three, lead_three);
                let mut second = _mm512_mask_mov_epi8(last, three, middle_three);
                let mut third = last;
                let mut dropped = short << 1
                    | one << 1
                    | (one | two) << 2
                    | unicode << 3
                    | unicode << 4
                    | unicode << 5;
                if pair != 0 {
                    // The code point less 0x10000 is the high unit's low ten
                    // bits, then the low unit's; plus 0x10000, its bits 10 and
                    // up are the high unit's ten plus 0x40: `top` (bits 8 to 10)
                    // and `mid` (bits 2 to 9, as a byte), from the unit's bytes
                    // with the carry of adding 0x40 to its low byte.
                    let mid = _mm512_add_epi8(low, splat(0x40));
                    let carry = _mm512_cmpge_epu8_mask(low, splat(0xc0));
                    let high_bits = _mm512_and_si512(high, splat(0x03));
                    let top = _mm512_mask_add_epi8(high_bits, carry, high_bits, splat(1));
                    let (next_high, next_low) = (ahead(high, ahead6), ahead(low, ahead6));
                    out = _mm512_mask_mov_epi8(out, pair, _mm512_or_si512(top, splat(0xf0)));
                    second = _mm512_mask_mov_epi8(
                        second,
                        pair,
                        _mm512_or_si512(right!(mid, 2, 0x3f), splat(0x80)),
                    );
                    third = _mm512_mask_mov_epi8(
                        third,
                        pair,
                        or3(
                            left!(mid, 4, 0x30),
                            left!(next_high, 2, 0x0c),
                            _mm512_or_si512(right!(next_low, 6, 0x03), splat(0x80)),
                        ),
                    );
                    let fourth =
                        _mm512_or_si512(_mm512_and_si512(next_low, splat(0x3f)), splat(0x80));
                    out = _mm512_mask_mov_epi8(out, pair << 3, ahead(fourth, behind3));
                    dropped |= (4..12).fold(0, |d, k| d | pair << k);
                }
                out = _mm512_mask_mov_epi8(out, (two | three | pair) << 1, ahead(second, behind1));
                out = _mm512_mask_mov_epi8(out, (three | pair) << 2, ahead(third, behind2));
                // Every escape taken ends before `taken`: no shift carries a
                // bit out of the mask.
                let kept = before & !dropped;
                high_bytes |= _mm512_movepi8_mask(v) & before;
                let packed = _mm512_maskz_compress_epi8(kept, out);
                let count = kept.count_ones() as usize;
                // SAFETY: the bytes kept lie before `taken`: w + count <= r +
                // taken <= body.len() <= dst.len(), or (STRING) w + 64 <=
                // dst.len().
                unsafe { store(dst, w, packed, count) };
                (r + taken, w + count)
            }};
        }
        if left_over != 0 {
            // Up to the escape left over, which the caller decodes.
            (r, w) = write!(left_over.trailing_zeros() as usize);
            break;
        }
        (r, w) = write!(taken);
        if at_string_end {
            break;
        }
    }
    Run {
        r,
        w,
        high: high_bytes != 0,
        room,
    }
}

/// Stores the first `n` (at most 64) bytes of `v` at `dst[w..]`, and
/// perhaps more of them after those where `dst` has the room.
///
/// # Safety
/// `w + n <= dst.len()`; the CPU supports AVX-512F and BW.
#[inline(always)]
unsafe fn store(dst: &mut [u8], w: usize, v: __m512i, n: usize) {
    // SAFETY: dst[w..w + 64] is in bounds when tested so; else the masked
    // store writes only dst[w..w + n], in bounds by the contract.
    unsafe {
        let p = dst.as_mut_ptr().add(w);
        if w + 64 <= dst.len() {
            _mm512_storeu_si512(p.cast(), v);
        } else {
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            _mm512_mask_storeu_epi8(p.cast(), mask, v);
        }
    }
}
