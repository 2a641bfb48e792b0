//! The AVX2 + PCLMULQDQ kernel: a 64-byte block is two 256-bit vectors.
//!
//! * Quotes and backslashes: one byte compare each.
//! * Whitespace and `{ } [ ] : ,`: one `vpshufb` lookup each in the
//!   tables of [`super::classify`].
//! * In-string prefix XOR: carry-less multiply by all ones.
//! * UTF-8: the nibble-table method of [`super::utf8`], skipped for blocks
//!   that are pure ASCII.

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use super::classify::{OP_TABLE, SHORT_ESCAPE_TABLE, WHITESPACE_TABLE, unicode};
use super::generic::{
    self, Masks, Pass, RunEscapes, Simd, UnicodeBytes, Utf8Check, write_offsets_one_by_one_counted,
};
use super::utf8::{CURRENT_HIGH, INCOMPLETE_AT_END, PREV_HIGH, PREV_LOW};

/// Proof that the CPU supports AVX2, PCLMULQDQ, POPCNT and BMI1.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// # Safety
    /// The CPU must support AVX2, PCLMULQDQ, POPCNT and BMI1 (checked at
    /// run time by `scan::mod`, the only caller).
    pub(crate) unsafe fn new_unchecked() -> Avx2 {
        Avx2(())
    }
}

/// Runs `pass` (stage 1, or the UTF-8 check alone) with this kernel.
pub(crate) fn run<P: Pass>(token: Avx2, pass: P) -> P::Output {
    // SAFETY: an `Avx2` exists, so the CPU has the features below.
    unsafe { run_avx2(token, pass) }
}

#[target_feature(enable = "avx2,pclmulqdq,popcnt,bmi1")]
unsafe fn run_avx2<P: Pass>(token: Avx2, pass: P) -> P::Output {
    // SAFETY: the enabled features are those `Avx2` stands for.
    unsafe { pass.run(token) }
}

/// 32 copies of `b`, hidden from the compiler behind an empty `asm!`.
///
/// A byte constant the compiler sees it rebuilds where it is used, with
/// `vpbroadcastb` from a one-byte constant, and on Intel's cores that is
/// a load and a shuffle on port 5, the shuffle port: the loop did so for
/// the quote and control constants at every block and for four more in
/// the UTF-8 check. Hidden, the vector is a value like any other, kept in
/// a register or reloaded (one load, `vbroadcastss`): one of the three
/// changes of docs/benchmarks.md, "AVX2 stage 1 and port 1".
#[inline(always)]
fn splat(b: i8) -> __m256i {
    // SAFETY: only compiled into the AVX2 kernel, whose CPU has AVX2.
    unsafe { splat_avx(b) }
}

/// [`splat`], compiled with AVX, which the `ymm_reg` operand needs.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn splat_avx(b: i8) -> __m256i {
    let mut v = _mm256_set1_epi8(b);
    // SAFETY: an empty asm statement: it reads and writes only `v`.
    unsafe {
        core::arch::asm!(
            "/* {0} */",
            inout(ymm_reg) v,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    v
}

/// Builds a 256-bit vector that repeats a 16-byte table in both lanes
/// (`vpshufb` looks up within each 128-bit lane).
#[inline(always)]
fn table(t: &[u8; 16]) -> __m256i {
    let mut both = [0u8; 32];
    both[..16].copy_from_slice(t);
    both[16..].copy_from_slice(t);
    // SAFETY: `both` is 32 readable bytes; the unaligned load has no
    // alignment requirement. Only compiled into AVX2 code paths.
    unsafe { _mm256_loadu_si256(both.as_ptr().cast()) }
}

/// For byte `k` of a mask (0..8) and every value of that byte, the
/// positions of its set bits within the 64-bit mask (`8 k` + bit), lowest
/// first, padded with zeros. 16 KiB: one row per byte of the mask, so the
/// writer adds only the block's base; row `k` is a constant displacement
/// from the table's start.
#[repr(C, align(64))]
struct ByteOffsets([[[u8; 8]; 256]; 8]);

static BYTE_OFFSETS: ByteOffsets = {
    let mut table = [[[0u8; 8]; 256]; 8];
    let mut k = 0;
    while k < 8 {
        let mut byte = 0;
        while byte < 256 {
            let mut count = 0;
            let mut bit = 0;
            while bit < 8 {
                if byte >> bit & 1 == 1 {
                    table[k][byte][count] = (8 * k + bit) as u8;
                    count += 1;
                }
                bit += 1;
            }
            byte += 1;
        }
        k += 1;
    }
    ByteOffsets(table)
};

/// [`Simd::write_offsets`] branch-free: per byte of `bits`, its set bits'
/// offsets come from [`BYTE_OFFSETS`], are widened to eight `u32`s, have
/// the base added and are stored at once; the cursor moves by the byte's
/// popcount. Measured against the default (one by one) for every block,
/// AVX2 stage 1: twitter +13%, citm +3%, canada +12%, from fewer
/// mispredicted "more than 8" branches; the kernel now uses it for blocks
/// of more than 8 offsets only (see `Avx2::write_offsets`).
///
/// # Safety
/// The CPU must support AVX2 and POPCNT (the caller holds a token that
/// says so); `out` as for [`Simd::write_offsets`].
#[inline(always)]
pub(crate) unsafe fn write_offsets_by_bytes(out: *mut u32, base: u32, bits: u64) -> *mut u32 {
    // SAFETY: AVX2 intrinsics, available per the contract. Before byte k
    // the cursor is past the offsets of bytes 0..k, at most count slots
    // from `out`, and the store writes 8 slots: every store stays within
    // the count + WRITE_SLACK (8, or 16 for AVX-512 under Miri) the
    // caller provides.
    unsafe {
        let base = _mm256_set1_epi32(base as i32);
        let mut cursor = out;
        for k in 0..8 {
            let byte = (bits >> (8 * k)) as u8;
            let offsets = _mm_loadl_epi64(BYTE_OFFSETS.0[k][byte as usize].as_ptr().cast());
            let offsets = _mm256_add_epi32(_mm256_cvtepu8_epi32(offsets), base);
            _mm256_storeu_si256(cursor.cast(), offsets);
            cursor = cursor.add(byte.count_ones() as usize);
        }
        cursor
    }
}

/// Two 256-bit halves of a 64-byte block.
#[derive(Clone, Copy)]
pub(crate) struct Block {
    lo: __m256i,
    hi: __m256i,
}

#[inline(always)]
fn mask64(lo: __m256i, hi: __m256i) -> u64 {
    // SAFETY: movemask on AVX2 vectors; only compiled into AVX2 code.
    unsafe {
        let lo = _mm256_movemask_epi8(lo) as u32 as u64;
        let hi = _mm256_movemask_epi8(hi) as u32 as u64;
        lo | (hi << 32)
    }
}

/// Per-byte class vectors of 32 bytes: quote, backslash, operator (may
/// include 0x0C and 0x1A), whitespace, control (below 0x20).
#[inline(always)]
fn classify(v: __m256i) -> (__m256i, __m256i, __m256i, __m256i, __m256i) {
    // SAFETY: AVX2 intrinsics; only compiled into the AVX2 kernel.
    unsafe {
        (
            _mm256_cmpeq_epi8(v, splat(b'"' as i8)),
            _mm256_cmpeq_epi8(v, splat(b'\\' as i8)),
            _mm256_cmpeq_epi8(
                _mm256_shuffle_epi8(table(&OP_TABLE), v),
                _mm256_or_si256(v, splat(0x20)),
            ),
            _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(&WHITESPACE_TABLE), v), v),
            _mm256_cmpeq_epi8(_mm256_min_epu8(v, splat(0x1f)), v),
        )
    }
}

/// `"` and `\` at the index of their low nibble, 0xFF (which no ASCII
/// byte is) at the others: see [`quote_or_backslash`].
const QUOTE_OR_BACKSLASH: [u8; 16] = {
    let mut t = [0xFF; 16];
    t[(b'"' & 0x0F) as usize] = b'"';
    t[(b'\\' & 0x0F) as usize] = b'\\';
    t
};

/// 0xFF where a byte is `"` or `\`, with one byte compare: a `vpshufb`
/// of the byte's low nibble in `wanted` (`table(&QUOTE_OR_BACKSLASH)`)
/// gives the one of the two it could be (0 for a byte from 0x80),
/// compared with the byte.
#[inline(always)]
fn quote_or_backslash(wanted: __m256i, v: __m256i) -> __m256i {
    // SAFETY: AVX2 intrinsics; only compiled into the AVX2 kernel.
    unsafe { _mm256_cmpeq_epi8(_mm256_shuffle_epi8(wanted, v), v) }
}

/// Whether no byte of `vs` is `"`, `\`, below 0x20 or from 0x80: the
/// quotes and backslashes by [`quote_or_backslash`], the others by one
/// signed compare of the minimum of all the vectors with 0x20 (bytes from
/// 0x80 are negative). The compares are what limits this test, and so how
/// fast stage 1 skips a long base64 string: three a vector, as one for
/// each kind of byte, made the 10 MB chat request's stage 1 1.10-1.13x
/// slower (docs/benchmarks.md).
#[inline(always)]
fn is_plain_ascii<const N: usize>(vs: &[__m256i; N]) -> bool {
    const { assert!(N.is_power_of_two()) };
    // SAFETY: AVX2 intrinsics; only compiled into the AVX2 kernel.
    unsafe {
        // Reduced pairwise, so that no chain of ORs or minima is longer
        // than log2(N): one chain of eight ran the 10 MB request at 0.98x
        // (tools/ab_parse.sh, twice). Loops, not `array::map`, whose
        // closure was not inlined into the AVX2 code: 1.3 GB/s.
        let wanted = table(&QUOTE_OR_BACKSLASH);
        let (mut hits, mut min) = (*vs, *vs);
        for hit in &mut hits {
            *hit = quote_or_backslash(wanted, *hit);
        }
        let mut n = N;
        while n > 1 {
            n /= 2;
            for i in 0..n {
                hits[i] = _mm256_or_si256(hits[i], hits[i + n]);
            }
        }
        n = N;
        while n > 1 {
            n /= 2;
            for i in 0..n {
                min[i] = _mm256_min_epi8(min[i], min[i + n]);
            }
        }
        let any = _mm256_or_si256(hits[0], _mm256_cmpgt_epi8(splat(0x20), min[0]));
        _mm256_testz_si256(any, any) == 1
    }
}

/// 0xFF where a byte is `"`, `\` or below 0x20.
#[inline(always)]
fn string_breaks(v: __m256i) -> __m256i {
    // SAFETY: AVX2 intrinsics; only compiled into the AVX2 kernel.
    unsafe {
        _mm256_or_si256(
            quote_or_backslash(table(&QUOTE_OR_BACKSLASH), v),
            _mm256_cmpeq_epi8(_mm256_min_epu8(v, splat(0x1f)), v),
        )
    }
}

/// [`Simd::push_unvouched`], compiled for AVX2.
///
/// # Safety
/// As for [`generic::push_unvouched`].
#[target_feature(enable = "avx2,pclmulqdq,popcnt,bmi1")]
#[inline(never)]
#[cold]
unsafe fn push_unvouched(token: Avx2, run: RunEscapes<'_>) {
    // SAFETY: the caller's contract; the enabled features are those
    // `Avx2` stands for.
    unsafe { generic::push_unvouched(token, run) }
}

impl Simd for Avx2 {
    type Block = Block;
    type Utf8 = Utf8;

    #[inline(always)]
    unsafe fn load(self, ptr: *const u8) -> Block {
        // SAFETY: the caller guarantees 64 readable bytes at ptr;
        // unaligned loads.
        unsafe {
            Block {
                lo: _mm256_loadu_si256(ptr.cast()),
                hi: _mm256_loadu_si256(ptr.add(32).cast()),
            }
        }
    }

    #[inline(always)]
    fn masks(self, b: &Block) -> Masks {
        let (q0, b0, o0, w0, c0) = classify(b.lo);
        let (q1, b1, o1, w1, c1) = classify(b.hi);
        let control = mask64(c0, c1);
        // Most blocks have no backslash: one `vpmovmskb` of the two
        // halves ORed tells them, where making the mask takes two and
        // their join (`vpmovmskb` runs on port 0 alone, and a block
        // takes eleven; docs/benchmarks.md, "AVX2 stage 1 and port 1").
        // SAFETY: AVX2 intrinsics; an `Avx2` token exists.
        let any_backslash = unsafe { _mm256_movemask_epi8(_mm256_or_si256(b0, b1)) != 0 };
        Masks {
            quote: mask64(q0, q1),
            backslash: if any_backslash { mask64(b0, b1) } else { 0 },
            op: mask64(o0, o1) & !control,
            whitespace: mask64(w0, w1),
            control,
        }
    }

    #[inline(always)]
    fn short_escapes(self, b: &Block) -> u64 {
        let wanted = table(&SHORT_ESCAPE_TABLE);
        // SAFETY: AVX2 intrinsics; an `Avx2` token exists.
        let is = |v| unsafe { _mm256_cmpeq_epi8(_mm256_shuffle_epi8(wanted, v), v) };
        mask64(is(b.lo), is(b.hi))
    }

    #[inline(always)]
    fn unicode_bytes(self, b: &Block) -> UnicodeBytes {
        let (by_high, by_low) = (
            table(&unicode::BY_HIGH_NIBBLE),
            table(&unicode::BY_LOW_NIBBLE),
        );
        // SAFETY: AVX2 intrinsics; an `Avx2` token exists.
        let class = |v| unsafe {
            let high = _mm256_and_si256(_mm256_srli_epi16::<4>(v), _mm256_set1_epi8(0x0f));
            _mm256_and_si256(
                _mm256_shuffle_epi8(by_high, high),
                _mm256_shuffle_epi8(by_low, v),
            )
        };
        let (lo, hi) = (class(b.lo), class(b.hi));
        // SAFETY: AVX2 intrinsics; an `Avx2` token exists.
        let none = |v, bits: u8| unsafe {
            _mm256_cmpeq_epi8(
                _mm256_and_si256(v, _mm256_set1_epi8(bits as i8)),
                _mm256_setzero_si256(),
            )
        };
        let any = |bits| !mask64(none(lo, bits), none(hi, bits));
        UnicodeBytes::from_classes(any)
    }

    #[inline(always)]
    unsafe fn push_unvouched(self, run: RunEscapes<'_>) {
        // SAFETY: the caller's contract; an `Avx2` token exists.
        unsafe { push_unvouched(self, run) }
    }

    #[inline(always)]
    fn is_plain_string(self, b: &Block) -> bool {
        is_plain_ascii(&[b.lo, b.hi])
    }

    /// Four blocks in one test ([`is_plain_ascii`] of their eight vectors)
    /// rather than one a block.
    #[inline(always)]
    unsafe fn is_plain_string_256(self, ptr: *const u8) -> bool {
        // SAFETY: AVX2 intrinsics (an `Avx2` token exists); 256 readable
        // bytes at ptr (the caller's contract), unaligned loads.
        let vs = core::array::from_fn::<_, 8, _>(|k| unsafe {
            _mm256_loadu_si256(ptr.add(32 * k).cast())
        });
        is_plain_ascii(&vs)
    }

    #[inline(always)]
    fn is_string_content(self, b: &Block) -> bool {
        // SAFETY: AVX2 intrinsics; an `Avx2` token exists.
        unsafe {
            let any = _mm256_or_si256(string_breaks(b.lo), string_breaks(b.hi));
            _mm256_testz_si256(any, any) == 1
        }
    }

    #[inline(always)]
    fn has_non_ascii(self, b: &Block) -> bool {
        // SAFETY: AVX2 intrinsics; an `Avx2` token exists.
        unsafe { _mm256_movemask_epi8(_mm256_or_si256(b.lo, b.hi)) != 0 }
    }

    #[inline(always)]
    fn prefix_xor(self, bits: u64) -> u64 {
        // SAFETY: PCLMULQDQ and SSE2 intrinsics; an `Avx2` token exists.
        unsafe {
            let product =
                _mm_clmulepi64_si128(_mm_set_epi64x(0, bits as i64), _mm_set1_epi8(-1), 0x00);
            _mm_cvtsi128_si64(product) as u64
        }
    }

    /// Up to 8 offsets one by one (the default's eight unconditional
    /// stores, about 35 instructions), more by [`write_offsets_by_bytes`]
    /// (about 60, however few the offsets): dense JSON averages under 10
    /// offsets a block, many blocks hold 8 or fewer, and the branch is
    /// predicted well enough to pay. On the AMD EPYC (Zen
    /// 4), against the byte table for every block, `tools/stage1_insns.sh`
    /// per block: twitter 162.7 -> 155.6 instructions, citm_catalog
    /// 149.6 -> 130.9, canada 149.4 -> 145.7; stage 1 against simdjson's
    /// `haswell` (`cargo bench --bench core`, two A/B runs): 0.82-0.83 ->
    /// 0.90-0.93, 0.81-0.83 -> 0.98-1.00, 0.96-0.97 -> 0.99-1.02. A second
    /// tier (one by one up to 16) or a threshold of 12 measured slower.
    #[inline(always)]
    unsafe fn write_offsets(self, out: *mut u32, base: u32, bits: u64) -> *mut u32 {
        // SAFETY: forwarded from the caller; the count is the mask's.
        unsafe { self.write_offsets_counted(out, base, bits, bits.count_ones()) }
    }

    /// On the Intel Xeon (family 6, model 207) the writer after the run is
    /// bound by port 1, the only one that runs TZCNT and POPCNT: a block
    /// of up to 8 offsets takes eight TZCNT and a POPCNT there. With the
    /// POPCNT done in the classifying loop, whose vector work can go to
    /// ports 0 and 5, the writer runs off that port (docs/benchmarks.md,
    /// "AVX2 stage 1 and port 1").
    const KEEPS_COUNTS: bool = true;

    /// The choice of `write_offsets` above, on the count kept.
    #[inline(always)]
    unsafe fn write_offsets_counted(
        self,
        out: *mut u32,
        base: u32,
        bits: u64,
        count: u32,
    ) -> *mut u32 {
        // SAFETY: forwarded from the caller; an `Avx2` token exists.
        unsafe {
            if count <= 8 {
                write_offsets_one_by_one_counted(out, base, bits, count)
            } else {
                write_offsets_by_bytes(out, base, bits)
            }
        }
    }

    #[inline(always)]
    fn utf8(self) -> Utf8 {
        // SAFETY: AVX2 intrinsics; an `Avx2` token exists.
        unsafe {
            Utf8 {
                error: _mm256_setzero_si256(),
                prev: _mm256_setzero_si256(),
                incomplete: 0,
            }
        }
    }
}

/// Streaming UTF-8 state: accumulated error bits, the previous 32 bytes,
/// and whether the previous block's last three bytes start a sequence it
/// does not complete (1) or not (0).
///
/// While a sequence is open the next block gets the whole check even if
/// it is ASCII, which finds the sequence cut short; so an ASCII block
/// costs one test and updates nothing but `prev`. A flag rather than the
/// vector of open positions (which AVX-512 keeps): with 16 vector
/// registers the loop spilled and reloaded that vector and the constants
/// around it at every block. As a flag, callgrind counts 161.0, 147.1 and
/// 146.9 instructions a block of AVX2 stage 1 on twitter, citm_catalog
/// and canada (`tools/stage1_insns.sh`), against 165.8, 154.5 and 154.3,
/// and `cargo bench --bench core` times it at 0.81, 0.83 and 1.03 of
/// simdjson's haswell stage 1, against 0.80, 0.80 and 0.99 (medians of
/// three runs, the two builds alternating).
pub(crate) struct Utf8 {
    error: __m256i,
    prev: __m256i,
    incomplete: u32,
}

impl Utf8 {
    /// Checks one 32-byte vector against its predecessor `prev`.
    #[inline(always)]
    fn check_vector(&mut self, input: __m256i, prev: __m256i) {
        // SAFETY: AVX2 intrinsics; a `Utf8` only exists inside the AVX2
        // kernel.
        unsafe {
            // The bytes 1, 2 and 3 positions earlier, across the vector
            // boundary: lane-crossing permute, then per-lane alignr.
            let joined = _mm256_permute2x128_si256(prev, input, 0x21);
            let prev1 = _mm256_alignr_epi8(input, joined, 15);
            let prev2 = _mm256_alignr_epi8(input, joined, 14);
            let prev3 = _mm256_alignr_epi8(input, joined, 13);

            let low_nibble = splat(0x0f);
            let special = _mm256_and_si256(
                _mm256_and_si256(
                    _mm256_shuffle_epi8(table(&PREV_HIGH), high_nibbles(prev1)),
                    _mm256_shuffle_epi8(table(&PREV_LOW), _mm256_and_si256(prev1, low_nibble)),
                ),
                _mm256_shuffle_epi8(table(&CURRENT_HIGH), high_nibbles(input)),
            );
            let must_continue = _mm256_or_si256(
                _mm256_subs_epu8(prev2, splat((0xe0u8 - 1) as i8)),
                _mm256_subs_epu8(prev3, splat((0xf0u8 - 1) as i8)),
            );
            // The saturated differences are at most 0x3F, so a signed
            // compare with zero is exact.
            let must_continue_80 = _mm256_and_si256(
                _mm256_cmpgt_epi8(must_continue, _mm256_setzero_si256()),
                splat(0x80u8 as i8),
            );
            self.error = _mm256_or_si256(self.error, _mm256_xor_si256(special, must_continue_80));
        }
    }
}

/// The high nibble of every byte.
#[inline(always)]
fn high_nibbles(v: __m256i) -> __m256i {
    // SAFETY: AVX2 intrinsics; only compiled into the AVX2 kernel.
    unsafe { _mm256_and_si256(_mm256_srli_epi16(v, 4), splat(0x0f)) }
}

impl Utf8Check<Block> for Utf8 {
    #[inline(always)]
    fn check(&mut self, b: &Block) {
        // SAFETY: AVX2 intrinsics; a `Utf8` only exists inside the AVX2
        // kernel; INCOMPLETE_AT_END is 32 readable bytes.
        unsafe {
            // ASCII after a complete sequence: nothing to check.
            let either = _mm256_or_si256(b.lo, b.hi);
            if _mm256_movemask_epi8(either) as u32 | self.incomplete != 0 {
                self.check_vector(b.lo, self.prev);
                self.check_vector(b.hi, b.lo);
                let open =
                    _mm256_subs_epu8(b.hi, _mm256_loadu_si256(INCOMPLETE_AT_END.as_ptr().cast()));
                self.incomplete = (_mm256_testz_si256(open, open) == 0) as u32;
            }
            self.prev = b.hi;
        }
    }

    #[inline(always)]
    fn skip_ascii(&mut self) {
        // SAFETY: AVX2 intrinsics; a `Utf8` only exists inside the AVX2
        // kernel.
        unsafe {
            // The skipped ASCII cut an open sequence short.
            if self.incomplete != 0 {
                self.error = _mm256_set1_epi8(-1);
                self.incomplete = 0;
            }
            self.prev = _mm256_setzero_si256();
        }
    }

    #[inline(always)]
    fn finish(&mut self) -> bool {
        // SAFETY: AVX2 intrinsics; a `Utf8` only exists inside the AVX2
        // kernel.
        unsafe { _mm256_testz_si256(self.error, self.error) == 0 || self.incomplete != 0 }
    }
}
