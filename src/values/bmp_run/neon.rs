//! Four `\uXXXX` escapes a step with NEON: two 128-bit halves of two
//! escapes each (at offsets 0 and 6), the second loaded from the third
//! escape, checked and decoded alike.

use core::arch::aarch64::*;

use super::{GROUP_READ, GROUP_WRITE};

/// [`super::decode`] with NEON (part of every aarch64 CPU).
pub(crate) fn run(body: &[u8], mut r: usize, dst: &mut [u8], mut w: usize) -> (usize, usize) {
    while r + GROUP_READ <= body.len() && w + GROUP_WRITE <= dst.len() {
        // SAFETY: r + GROUP_READ <= body.len(): both 16-byte loads (at r
        // and r + 12) are in bounds.
        let (lo, hi) = unsafe {
            let p = body.as_ptr().add(r);
            (vld1q_u8(p), vld1q_u8(p.add(12)))
        };
        let (Some(first), Some(second)) = (two(lo), two(hi)) else {
            break;
        };
        r += 24;
        // SAFETY: w + GROUP_WRITE <= dst.len(): both 8-byte stores (at w
        // and w + 6) are in bounds.
        unsafe {
            let q = dst.as_mut_ptr().add(w);
            vst1_u8(q, first);
            vst1_u8(q.add(6), second);
        }
        w += 12;
    }
    (r, w)
}

/// The six UTF-8 bytes (in the low ones of eight) of the two escapes at
/// offsets 0 and 6 of `v`, when both are `\uXXXX` of a character from
/// U+0800 that is no surrogate.
#[inline(always)]
fn two(v: uint8x16_t) -> Option<uint8x8_t> {
    let lanes = |t: [u8; 16]| {
        // SAFETY: `t` is 16 readable bytes.
        unsafe { vld1q_u8(t.as_ptr()) }
    };
    let words = |t: [u32; 4]| {
        // SAFETY: `t` is 4 readable words.
        unsafe { vld1q_u32(t.as_ptr()) }
    };
    const ANY: u8 = 0xff;
    // SAFETY: NEON is part of every aarch64 CPU.
    unsafe {
        // "\u" at 0 and 6; every other byte passes.
        let marks = vorrq_u8(
            vceqq_u8(v, lanes(*b"\\u\0\0\0\0\\u\0\0\0\0\0\0\0\0")),
            lanes([
                0, 0, ANY, ANY, ANY, ANY, 0, 0, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY,
            ]),
        );
        // The eight digits to bytes 0..8 (an index past 15 gives 0).
        let d = vqtbl1q_u8(
            v,
            lanes([
                2, 3, 4, 5, 8, 9, 10, 11, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY,
            ]),
        );
        let decimal = vandq_u8(vcgeq_u8(d, vdupq_n_u8(b'0')), vcleq_u8(d, vdupq_n_u8(b'9')));
        let lower = vorrq_u8(d, vdupq_n_u8(0x20));
        let letter = vandq_u8(
            vcgeq_u8(lower, vdupq_n_u8(b'a')),
            vcleq_u8(lower, vdupq_n_u8(b'f')),
        );
        let hex = vorrq_u8(
            vorrq_u8(decimal, letter),
            lanes([
                0, 0, 0, 0, 0, 0, 0, 0, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY,
            ]),
        );
        if vminvq_u8(vandq_u8(marks, hex)) != ANY {
            return None;
        }
        // A digit's value: its low nibble, plus 9 for a letter (bit 6).
        let six = vandq_u8(vshrq_n_u8::<6>(d), vdupq_n_u8(1));
        let value = vaddq_u8(
            vaddq_u8(vandq_u8(d, vdupq_n_u8(0x0f)), six),
            vshlq_n_u8::<3>(six),
        );
        // Digit pairs to bytes (the first digit high), in 16-bit lanes;
        // then byte pairs to units (the first byte high), in 32-bit lanes.
        let x = vreinterpretq_u16_u8(value);
        let pairs = vorrq_u16(
            vandq_u16(vshlq_n_u16::<4>(x), vdupq_n_u16(0xff)),
            vshrq_n_u16::<8>(x),
        );
        let y = vreinterpretq_u32_u16(pairs);
        let units = vorrq_u32(
            vandq_u32(vshlq_n_u32::<8>(y), vdupq_n_u32(0xff00)),
            vshrq_n_u32::<16>(y),
        );
        // From U+0800 (three UTF-8 bytes), and no surrogate: lanes 0, 1.
        let wide = vcgtq_u32(units, vdupq_n_u32(0x7ff));
        let surrogate = vceqq_u32(vandq_u32(units, vdupq_n_u32(0xf800)), vdupq_n_u32(0xd800));
        let plain = vorrq_u32(
            vbicq_u32(wide, surrogate),
            words([0, 0, u32::MAX, u32::MAX]),
        );
        if vminvq_u32(plain) != u32::MAX {
            return None;
        }
        // 1110xxxx 10xxxxxx 10xxxxxx, in the low three bytes of each lane.
        let lead = vorrq_u32(vshrq_n_u32::<12>(units), vdupq_n_u32(0xe0));
        let middle = vshlq_n_u32::<8>(vandq_u32(vshrq_n_u32::<6>(units), vdupq_n_u32(0x3f)));
        let last = vshlq_n_u32::<16>(vandq_u32(units, vdupq_n_u32(0x3f)));
        let utf8 = vorrq_u32(
            vorrq_u32(lead, middle),
            vorrq_u32(last, vdupq_n_u32(0x0080_8000)),
        );
        let packed = vqtbl1q_u8(
            vreinterpretq_u8_u32(utf8),
            lanes([
                0, 1, 2, 4, 5, 6, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY,
            ]),
        );
        Some(vget_low_u8(packed))
    }
}
