//! The AVX-512 kernel (AVX-512F + AVX-512BW + AVX-512 VBMI and VBMI2,
//! with PCLMULQDQ): a 64-byte block is one 512-bit vector, and every byte
//! compare yields its 64-bit mask directly, with no movemask and no
//! joining of halves.
//!
//! * Quotes, backslashes, control bytes: one compare each.
//! * Whitespace and `{ } [ ] : ,`: one `vpshufb` lookup each in the tables
//!   of [`super::classify`].
//! * In-string prefix XOR: carry-less multiply by all ones.
//! * Offsets: `vpcompressb` (VBMI2) packs a block's structural offsets
//!   into one vector, written sixteen per store (see
//!   [`write_offsets_by_compress`]).
//! * UTF-8: the nibble-table method of [`super::utf8`], skipped for blocks
//!   that are pure ASCII.
//! * Long strings of plain ASCII: four blocks per test, each byte's class
//!   looked up in a 128-byte table by `vpermi2b` (VBMI; see
//!   [`Avx512::is_plain_string_256`]).
//!
//! VBMI2 is required, not only used: it is what the offset writer needs,
//! and it marks the CPUs whose 512-bit integer instructions run without
//! the deep clock drop of the first AVX-512 generation (Ice Lake and
//! later, Zen 4 and later; simdjson draws the same line for its `icelake`
//! kernel). Skylake-SP and Cascade Lake, which lack it, run `avx2`. VBMI
//! is required too, for the test of plain ASCII: the CPUs with VBMI2
//! (Ice Lake and its successors, Zen 4 and Zen 5) have it.
//! VPCLMULQDQ is not used: with one block per step there is one prefix
//! XOR per block, which a 128-bit carry-less multiply does.

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use super::classify::{OP_TABLE, SHORT_ESCAPE_TABLE, WHITESPACE_TABLE, unicode};
use super::generic::{self, Masks, Pass, RunEscapes, Simd, UnicodeBytes, Utf8Check};
use super::utf8::{CURRENT_HIGH, INCOMPLETE_AT_END, PREV_HIGH, PREV_LOW};

/// Proof that the CPU supports AVX-512F, AVX-512BW, AVX-512 VBMI and
/// VBMI2, AVX2, PCLMULQDQ, POPCNT and BMI1 (`Kernel::is_supported`).
/// `PAIRS`: whether the run classifies two blocks a turn
/// ([`Simd::PAIRS_BLOCKS`]), which `scan::mod` chooses by the CPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512<const PAIRS: bool>(());

impl Avx512<false> {
    /// # Safety
    /// The CPU must support AVX-512F, AVX-512BW, AVX-512 VBMI and VBMI2,
    /// AVX2, PCLMULQDQ, POPCNT and BMI1 (checked at run time by
    /// `scan::mod`, the only caller).
    pub(crate) unsafe fn new_unchecked() -> Avx512<false> {
        Avx512(())
    }
}

/// Runs `pass` (stage 1, or the UTF-8 check alone) with this kernel, two
/// blocks a turn when `pairs_blocks`.
pub(crate) fn run<P: Pass>(token: Avx512<false>, pairs_blocks: bool, pass: P) -> P::Output {
    if pairs_blocks {
        // SAFETY: an `Avx512` exists, so the CPU has the features below;
        // the paired token stands for the same features.
        unsafe { run_avx512(Avx512::<true>(()), pass) }
    } else {
        // SAFETY: as above.
        unsafe { run_avx512(token, pass) }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,pclmulqdq,popcnt,bmi1")]
unsafe fn run_avx512<const PAIRS: bool, P: Pass>(token: Avx512<PAIRS>, pass: P) -> P::Output {
    // SAFETY: the enabled features are those `Avx512` stands for.
    unsafe { pass.run(token) }
}

/// A 512-bit vector repeating a 16-byte table in each 128-bit lane
/// (`vpshufb` looks up within lanes).
#[inline(always)]
fn table(t: &[u8; 16]) -> __m512i {
    // SAFETY: `t` is 16 readable bytes; AVX-512F, only compiled into this
    // kernel.
    unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().cast())) }
}

/// [`Simd::push_unvouched`], compiled for AVX-512.
///
/// # Safety
/// As for [`generic::push_unvouched`].
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,pclmulqdq,popcnt,bmi1")]
#[inline(never)]
#[cold]
unsafe fn push_unvouched<const PAIRS: bool>(token: Avx512<PAIRS>, run: RunEscapes<'_>) {
    // SAFETY: the caller's contract; the enabled features are those
    // `Avx512` stands for.
    unsafe { generic::push_unvouched(token, run) }
}

impl<const PAIRS: bool> Simd for Avx512<PAIRS> {
    type Block = __m512i;
    type Utf8 = Utf8;

    #[inline(always)]
    unsafe fn load(self, ptr: *const u8) -> __m512i {
        // SAFETY: the caller guarantees 64 readable bytes at ptr;
        // unaligned load.
        unsafe { _mm512_loadu_si512(ptr.cast()) }
    }

    #[inline(always)]
    fn masks(self, &v: &__m512i) -> Masks {
        // SAFETY: AVX-512F/BW intrinsics; an `Avx512` token exists.
        unsafe {
            let control = _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20));
            let op = _mm512_cmpeq_epi8_mask(
                _mm512_shuffle_epi8(table(&OP_TABLE), v),
                _mm512_or_si512(v, _mm512_set1_epi8(0x20)),
            );
            Masks {
                quote: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8)),
                backslash: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8)),
                op: op & !control,
                whitespace: _mm512_cmpeq_epi8_mask(
                    _mm512_shuffle_epi8(table(&WHITESPACE_TABLE), v),
                    v,
                ),
                control,
            }
        }
    }

    #[inline(always)]
    fn short_escapes(self, &v: &__m512i) -> u64 {
        // SAFETY: AVX-512BW intrinsics; an `Avx512` token exists.
        unsafe { _mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(table(&SHORT_ESCAPE_TABLE), v), v) }
    }

    #[inline(always)]
    fn unicode_bytes(self, &v: &__m512i) -> UnicodeBytes {
        // SAFETY: AVX-512F/BW intrinsics; an `Avx512` token exists.
        unsafe {
            let high = _mm512_and_si512(_mm512_srli_epi16::<4>(v), _mm512_set1_epi8(0x0f));
            let class = _mm512_and_si512(
                _mm512_shuffle_epi8(table(&unicode::BY_HIGH_NIBBLE), high),
                _mm512_shuffle_epi8(table(&unicode::BY_LOW_NIBBLE), v),
            );
            let any = |bits: u8| _mm512_test_epi8_mask(class, _mm512_set1_epi8(bits as i8));
            UnicodeBytes::from_classes(any)
        }
    }

    #[inline(always)]
    unsafe fn push_unvouched(self, run: RunEscapes<'_>) {
        // SAFETY: the caller's contract; an `Avx512` token exists.
        unsafe { push_unvouched(self, run) }
    }

    #[inline(always)]
    fn is_plain_string(self, &v: &__m512i) -> bool {
        // SAFETY: AVX-512F/BW intrinsics; an `Avx512` token exists.
        unsafe {
            // Signed compare: 0x20 > byte holds below 0x20 and, the byte
            // being negative, from 0x80.
            let special = _mm512_cmplt_epi8_mask(v, _mm512_set1_epi8(0x20))
                | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8))
                | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
            special == 0
        }
    }

    /// One test for the four blocks: each byte's class looked up by its
    /// low seven bits in a 128-byte table (`vpermi2b`, VBMI), ORed with the
    /// bytes themselves (their top bit: from 0x80) across the blocks, three
    /// ternary ORs, then one mask. Tested block by block, twelve compares
    /// into masks and eleven mask ORs made stage 1 of the 10 MB chat
    /// request (its base64 image) 45-49 GB/s on an AMD EPYC (Zen 4), where
    /// mask registers are few and slow, against 52-57 GB/s with AVX2; this
    /// way 72-77 (`cargo bench --bench core -- DIR/chat-10MB.json`, the
    /// file from `luajit benches/payloads.lua DIR`).
    #[cfg(not(miri))]
    #[inline(always)]
    unsafe fn is_plain_string_256(self, ptr: *const u8) -> bool {
        // SAFETY: AVX-512F/BW/VBMI intrinsics (an `Avx512` token exists);
        // 256 readable bytes at ptr (the caller's contract) and 128 in
        // the table.
        unsafe {
            let low = _mm512_loadu_si512(STRING_SPECIAL.0.as_ptr().cast());
            let high = _mm512_loadu_si512(STRING_SPECIAL.0.as_ptr().add(64).cast());
            let special = |v: __m512i| _mm512_permutex2var_epi8(low, v, high);
            let block = |k: usize| _mm512_loadu_si512(ptr.add(64 * k).cast());
            let (a, b, c, d) = (block(0), block(1), block(2), block(3));
            // 0xFE: x | y | z.
            let ab = _mm512_ternarylogic_epi64::<0xFE>(special(a), special(b), a);
            let cd = _mm512_ternarylogic_epi64::<0xFE>(special(c), special(d), b);
            let any = _mm512_ternarylogic_epi64::<0xFE>(ab, cd, _mm512_or_si512(c, d));
            _mm512_movepi8_mask(any) == 0
        }
    }

    #[inline(always)]
    fn is_string_content(self, &v: &__m512i) -> bool {
        // SAFETY: AVX-512F/BW intrinsics; an `Avx512` token exists.
        unsafe {
            let breaks = _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20))
                | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8))
                | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
            breaks == 0
        }
    }

    #[inline(always)]
    fn has_non_ascii(self, &v: &__m512i) -> bool {
        // SAFETY: AVX-512BW intrinsics; an `Avx512` token exists.
        unsafe { _mm512_movepi8_mask(v) != 0 }
    }

    #[inline(always)]
    fn prefix_xor(self, bits: u64) -> u64 {
        // SAFETY: PCLMULQDQ and SSE2 intrinsics; an `Avx512` token exists.
        unsafe {
            let product =
                _mm_clmulepi64_si128(_mm_set_epi64x(0, bits as i64), _mm_set1_epi8(-1), 0x00);
            _mm_cvtsi128_si64(product) as u64
        }
    }

    #[inline(always)]
    fn utf8(self) -> Utf8 {
        // SAFETY: AVX-512F intrinsics; an `Avx512` token exists.
        unsafe {
            Utf8 {
                error: _mm512_setzero_si512(),
                prev: _mm512_setzero_si512(),
                incomplete: _mm512_setzero_si512(),
            }
        }
    }

    /// The writer is a compress and a store, cheap enough to run
    /// between the blocks' classifying (see `generic::scan`).
    const WRITES_AS_IT_SCANS: bool = true;

    /// Chosen by the CPU (`scan::mod`'s `avx512_pairs_blocks`): the late
    /// writer already overlaps one block's write with the next block's
    /// classifying, and whether a second block a turn helps beyond that
    /// depends on the core (docs/benchmarks.md, "Two blocks a turn on
    /// Intel, one on AMD").
    const PAIRS_BLOCKS: bool = PAIRS;

    /// [`write_offsets_by_compress`] stores 16 at a time.
    const WRITE_SLACK: usize = 16;

    #[inline(always)]
    unsafe fn write_offsets(self, out: *mut u32, base: u32, bits: u64) -> *mut u32 {
        // Miri emulates AVX-512F and BW but not VBMI2's compress: under
        // Miri (`make sanitize`) this kernel writes with the AVX2 table,
        // whose instructions it has.
        #[cfg(miri)]
        // SAFETY: forwarded from the caller; an `Avx512` token exists, so
        // the CPU has AVX2 and POPCNT.
        return unsafe { super::avx2::write_offsets_by_bytes(out, base, bits) };
        #[cfg(not(miri))]
        // SAFETY: forwarded from the caller; an `Avx512` token exists.
        return unsafe { write_offsets_by_compress(out, base, bits) };
    }
}

/// For each byte below 0x80, 0x80 if it may not stand in a string as it
/// is (`"`, `\`, below 0x20), else 0: [`Avx512::is_plain_string_256`]'s
/// table.
#[cfg(not(miri))]
#[repr(C, align(64))]
struct StringSpecial([u8; 128]);

#[cfg(not(miri))]
static STRING_SPECIAL: StringSpecial = {
    let mut table = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        if b < 0x20 || b == b'"' as usize || b == b'\\' as usize {
            table[b] = 0x80;
        }
        b += 1;
    }
    StringSpecial(table)
};

/// Byte `i` holds `i`: the offsets within a block, which
/// [`write_offsets_by_compress`] packs by the block's mask.
#[cfg(not(miri))]
static BLOCK_OFFSETS: [u8; 64] = {
    let mut offsets = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        offsets[i] = i as u8;
        i += 1;
    }
    offsets
};

/// [`Simd::write_offsets`] with `vpcompressb`: the offsets of the set
/// bits, packed into the low bytes of one vector by a single instruction,
/// are widened to `u32`s sixteen at a time, the base added, and stored.
/// The first sixteen are stored unconditionally, the next only when there
/// are more (rare in dense JSON, which has 6 to 10 structurals a block),
/// so a block costs one compress and one store, with no branch on its
/// count below 17. It replaced the AVX2 kernel's byte table here, which
/// stores eight offsets per byte of the mask, whatever it holds: stage 1
/// against simdjson's `icelake` (`cargo bench --bench core`, rounds
/// alternating in one process, on a Xeon with AVX-512 VBMI2) went from
/// 0.47-0.53x to 0.86x, 0.87x and 0.88x on twitter, citm_catalog and
/// canada.
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512BW, AVX-512 VBMI2 and POPCNT (the
/// caller holds an `Avx512`); `out` must be valid for writing
/// `bits.count_ones()` plus 16 `u32`s (the kernel's `WRITE_SLACK`).
#[cfg(not(miri))]
#[inline(always)]
unsafe fn write_offsets_by_compress(out: *mut u32, base: u32, bits: u64) -> *mut u32 {
    // SAFETY: AVX-512 intrinsics, available per the contract;
    // BLOCK_OFFSETS is 64 readable bytes. Sixteen `k` is stored only when
    // more than 16 k offsets exist, so every store ends below count + 16:
    // within the caller's room.
    unsafe {
        let packed =
            _mm512_maskz_compress_epi8(bits, _mm512_loadu_si512(BLOCK_OFFSETS.as_ptr().cast()));
        let base = _mm512_set1_epi32(base as i32);
        let count = bits.count_ones() as usize;
        store_sixteen::<0>(out, packed, base);
        if count > 16 {
            store_sixteen::<1>(out, packed, base);
        }
        if count > 32 {
            store_sixteen::<2>(out, packed, base);
        }
        if count > 48 {
            store_sixteen::<3>(out, packed, base);
        }
        out.add(count)
    }
}

/// Stores offsets `16 K..16 K + 16` of a block: bytes `16 K..` of
/// `packed`, widened to `u32` with `base` added, at `out + 16 K`.
///
/// # Safety
/// As for [`write_offsets_by_compress`]; `out + 16 K` is valid for
/// writing 16 `u32`s.
#[cfg(not(miri))]
#[inline(always)]
unsafe fn store_sixteen<const K: i32>(out: *mut u32, packed: __m512i, base: __m512i) {
    // SAFETY: AVX-512F intrinsics, available per the contract; the
    // caller vouches for the 16 slots.
    unsafe {
        let sixteen = _mm512_extracti32x4_epi32::<K>(packed);
        let offsets = _mm512_add_epi32(_mm512_cvtepu8_epi32(sixteen), base);
        _mm512_storeu_si512(out.add(16 * K as usize).cast(), offsets);
    }
}

/// Streaming UTF-8 state: accumulated error bits, the previous 64 bytes,
/// and where the previous block's last three bytes start a sequence it
/// does not complete (not 0 there; an error if an ASCII block follows).
/// All three are vectors: with offsets written as the blocks are scanned,
/// two flags in general registers had the loop spill its write cursor
/// to the stack.
pub(crate) struct Utf8 {
    error: __m512i,
    prev: __m512i,
    incomplete: __m512i,
}

/// The high nibble of every byte.
#[inline(always)]
fn high_nibbles(v: __m512i) -> __m512i {
    // SAFETY: AVX-512BW intrinsics; only compiled into this kernel.
    unsafe { _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f)) }
}

impl Utf8Check<__m512i> for Utf8 {
    #[inline(always)]
    fn check(&mut self, &input: &__m512i) {
        // SAFETY: AVX-512F/BW intrinsics; a `Utf8` only exists inside this
        // kernel; INCOMPLETE_AT_END is 32 readable bytes.
        unsafe {
            if _mm512_movepi8_mask(input) == 0 {
                // ASCII: nothing to check beyond an open sequence, which
                // it cuts short: an error wherever `incomplete` is set.
                self.error = _mm512_or_si512(self.error, self.incomplete);
                self.prev = input;
                return;
            }
            // The bytes 1, 2 and 3 positions earlier, across the block
            // boundary: the lanes shifted up by one (the previous block's
            // last lane first), then a per-lane align.
            let joined = _mm512_permutex2var_epi64(
                input,
                _mm512_setr_epi64(14, 15, 0, 1, 2, 3, 4, 5),
                self.prev,
            );
            let prev1 = _mm512_alignr_epi8(input, joined, 15);
            let prev2 = _mm512_alignr_epi8(input, joined, 14);
            let prev3 = _mm512_alignr_epi8(input, joined, 13);

            let low_nibble = _mm512_set1_epi8(0x0f);
            let special = _mm512_and_si512(
                _mm512_and_si512(
                    _mm512_shuffle_epi8(table(&PREV_HIGH), high_nibbles(prev1)),
                    _mm512_shuffle_epi8(table(&PREV_LOW), _mm512_and_si512(prev1, low_nibble)),
                ),
                _mm512_shuffle_epi8(table(&CURRENT_HIGH), high_nibbles(input)),
            );
            let must_continue = _mm512_or_si512(
                _mm512_subs_epu8(prev2, _mm512_set1_epi8((0xe0u8 - 1) as i8)),
                _mm512_subs_epu8(prev3, _mm512_set1_epi8((0xf0u8 - 1) as i8)),
            );
            // 0x80 where a 3rd or 4th byte is required.
            let must_continue_80 = _mm512_maskz_mov_epi8(
                _mm512_test_epi8_mask(must_continue, must_continue),
                _mm512_set1_epi8(0x80u8 as i8),
            );
            self.error = _mm512_or_si512(self.error, _mm512_xor_si512(special, must_continue_80));

            // The last three bytes against INCOMPLETE_AT_END's thresholds
            // (its last 32 bytes line up with the block's last 32).
            let last32 = _mm512_extracti64x4_epi64(input, 1);
            let open = _mm256_subs_epu8(
                last32,
                _mm256_loadu_si256(INCOMPLETE_AT_END.as_ptr().cast()),
            );
            self.incomplete = _mm512_zextsi256_si512(open);
            self.prev = input;
        }
    }

    #[inline(always)]
    fn skip_ascii(&mut self) {
        // SAFETY: AVX-512F intrinsics; a `Utf8` only exists inside this
        // kernel.
        unsafe {
            self.error = _mm512_or_si512(self.error, self.incomplete);
            self.prev = _mm512_setzero_si512();
        }
    }

    #[inline(always)]
    fn finish(&mut self) -> bool {
        // SAFETY: AVX-512F intrinsics; a `Utf8` only exists inside this
        // kernel.
        unsafe {
            let error = _mm512_or_si512(self.error, self.incomplete);
            _mm512_test_epi8_mask(error, error) != 0
        }
    }
}
