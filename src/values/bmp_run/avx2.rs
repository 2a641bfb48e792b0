//! Four `\uXXXX` escapes a step with AVX2: the first two in the low
//! 128-bit lane, the next two in the high one (loaded from the third
//! escape), so that every lane holds two escapes at offsets 0 and 6 and
//! one shuffle table serves both.

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use super::{GROUP_READ, GROUP_WRITE};

/// Proof that the CPU supports AVX2.
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// # Safety
    /// The CPU must support AVX2 (the caller asked `scan::active_kernel`).
    pub(crate) unsafe fn new_unchecked() -> Avx2 {
        Avx2(())
    }
}

/// [`super::decode`] with AVX2.
pub(crate) fn run(token: Avx2, body: &[u8], r: usize, dst: &mut [u8], w: usize) -> (usize, usize) {
    // SAFETY: an `Avx2` exists, so the CPU has AVX2.
    unsafe { run_avx2(token, body, r, dst, w) }
}

/// A 256-bit vector of a 16-byte pattern in both lanes.
#[inline(always)]
fn both_lanes(t: [u8; 16]) -> __m256i {
    let mut both = [0u8; 32];
    both[..16].copy_from_slice(&t);
    both[16..].copy_from_slice(&t);
    // SAFETY: `both` is 32 readable bytes; the load has no alignment
    // requirement. Only compiled into AVX2 code.
    unsafe { _mm256_loadu_si256(both.as_ptr().cast()) }
}

/// [`run`], compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2 (an [`Avx2`] is the proof).
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(
    _token: Avx2,
    body: &[u8],
    mut r: usize,
    dst: &mut [u8],
    mut w: usize,
) -> (usize, usize) {
    // In each lane: "\u" at 0 and 6, and the positions compared.
    let marks = both_lanes(*b"\\u\0\0\0\0\\u\0\0\0\0\0\0\0\0");
    const MARKS: u32 = 0x00c3_00c3;
    // The eight digits of a lane's two escapes, to its bytes 0..8.
    let digits = both_lanes([
        2, 3, 4, 5, 8, 9, 10, 11, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    ]);
    // Each digit pair to a byte, then each byte pair to a 16-bit unit
    // (the first byte high).
    let nibbles = _mm256_set1_epi16(0x0110);
    let bytes = _mm256_set1_epi32(0x0001_0100);
    // A unit's three UTF-8 bytes, packed: 0..3 of dword 0, 4..7 of dword 1.
    let pack = both_lanes([
        0, 1, 2, 4, 5, 6, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    ]);
    while r + GROUP_READ <= body.len() && w + GROUP_WRITE <= dst.len() {
        // SAFETY: r + GROUP_READ <= body.len(): both 16-byte loads (at r
        // and r + 12) are in bounds.
        let v = unsafe {
            let p = body.as_ptr().add(r);
            _mm256_loadu2_m128i(p.add(12).cast(), p.cast())
        };
        let marked = _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, marks)) as u32;
        let d = _mm256_shuffle_epi8(v, digits);
        // Hex digits: 0-9, or a-f in either case (signed compares: bytes
        // from 0x80 up are negative and fail both).
        let lower = _mm256_or_si256(d, _mm256_set1_epi8(0x20));
        let decimal = _mm256_and_si256(
            _mm256_cmpgt_epi8(d, _mm256_set1_epi8(b'0' as i8 - 1)),
            _mm256_cmpgt_epi8(_mm256_set1_epi8(b'9' as i8 + 1), d),
        );
        let letter = _mm256_and_si256(
            _mm256_cmpgt_epi8(lower, _mm256_set1_epi8(b'a' as i8 - 1)),
            _mm256_cmpgt_epi8(_mm256_set1_epi8(b'f' as i8 + 1), lower),
        );
        let hex = _mm256_movemask_epi8(_mm256_or_si256(decimal, letter)) as u32;
        // A digit's value: its low nibble, plus 9 for a letter (bit 6).
        let six = _mm256_and_si256(_mm256_srli_epi16::<6>(d), _mm256_set1_epi8(1));
        let value = _mm256_add_epi8(
            _mm256_add_epi8(_mm256_and_si256(d, _mm256_set1_epi8(0x0f)), six),
            _mm256_slli_epi16::<3>(six),
        );
        let units = _mm256_madd_epi16(_mm256_maddubs_epi16(value, nibbles), bytes);
        // From U+0800 (three UTF-8 bytes), and no surrogate.
        let wide = _mm256_cmpgt_epi32(units, _mm256_set1_epi32(0x7ff));
        let surrogate = _mm256_cmpeq_epi32(
            _mm256_and_si256(units, _mm256_set1_epi32(0xf800)),
            _mm256_set1_epi32(0xd800),
        );
        let plain = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_andnot_si256(surrogate, wide)));
        if marked & MARKS != MARKS || hex & 0x00ff_00ff != 0x00ff_00ff || plain & 0x33 != 0x33 {
            break;
        }
        r += 24;
        // 1110xxxx 10xxxxxx 10xxxxxx, in the low three bytes of each dword.
        let lead = _mm256_or_si256(_mm256_srli_epi32::<12>(units), _mm256_set1_epi32(0xe0));
        let middle = _mm256_slli_epi32::<8>(_mm256_and_si256(
            _mm256_srli_epi32::<6>(units),
            _mm256_set1_epi32(0x3f),
        ));
        let last = _mm256_slli_epi32::<16>(_mm256_and_si256(units, _mm256_set1_epi32(0x3f)));
        let utf8 = _mm256_or_si256(
            _mm256_or_si256(lead, middle),
            _mm256_or_si256(last, _mm256_set1_epi32(0x0080_8000)),
        );
        let packed = _mm256_shuffle_epi8(utf8, pack);
        // SAFETY: w + GROUP_WRITE <= dst.len(): both 8-byte stores (at w
        // and w + 6) are in bounds.
        unsafe {
            let q = dst.as_mut_ptr().add(w);
            _mm_storel_epi64(q.cast(), _mm256_castsi256_si128(packed));
            _mm_storel_epi64(q.add(6).cast(), _mm256_extracti128_si256::<1>(packed));
        }
        w += 12;
    }
    (r, w)
}
