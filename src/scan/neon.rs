//! The NEON kernel (aarch64): a 64-byte block is four 128-bit vectors.
//!
//! * **Loaded de-interleaved.** `ld4` puts byte `4j + k` in lane `j` of
//!   vector `k`. Classes are per byte, so the order does not matter to
//!   them, and it makes the 64-bit masks cheap: NEON has no `movemask`,
//!   but three shift-right-inserts fold the four vectors into one whose
//!   byte `j` holds the flag of byte `4j + k` in bit `4 + k`, a fourth
//!   copies that nibble into the low one, and one narrowing shift packs
//!   two lanes per byte, in input order: 6 instructions per mask with the
//!   move to a general register, where the AND-with-weights and
//!   pairwise-add reduction of in-order vectors takes 9. (LLVM merges
//!   these folds with the compares feeding them; what runs is counted by
//!   `tools/aarch64.sh count`.)
//! * Quotes, backslashes and control bytes: one compare each. Whitespace
//!   and `{ } [ ] : ,`: one lookup by low nibble ANDed with one by high
//!   nibble, each class bit chosen so that its set of bytes is exactly a
//!   product (high nibbles x low nibbles), so the classes are exact.
//! * In-string prefix XOR: carry-less multiply by all ones (`pmull`, part
//!   of the optional `aes` extension, detected at run time by
//!   `scan::mod`), else six shift-XOR steps. The multiply executes 4
//!   instructions fewer per block (1.5% of stage 1 on the corpus files,
//!   counted under emulation), so it is worth its second instance of the
//!   scan loop.
//! * UTF-8: the nibble-table method of [`super::utf8`], skipped for blocks
//!   that are pure ASCII. In de-interleaved order, the byte `n` places
//!   before each byte of vector `k` is vector `k - n` itself when
//!   `k >= n`, else vector `k + 4 - n` moved by one lane with its last lane
//!   from the previous block.

use core::arch::aarch64::*;

use super::classify::{SHORT_ESCAPE_TABLE, unicode};
use super::generic::{self, Masks, Pass, Simd, UnicodeBytes, Utf8Check};
use super::utf8::{CURRENT_HIGH, PREV_HIGH, PREV_LOW};

/// Proof that the CPU runs this kernel: NEON is part of every aarch64 CPU;
/// `PMULL` says it also has the carry-less multiply (`aes` feature).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neon<const PMULL: bool>(());

impl Neon<false> {
    /// The kernel without `pmull`, which every aarch64 CPU runs.
    pub(crate) fn new() -> Neon<false> {
        Neon(())
    }
}

impl Neon<true> {
    /// # Safety
    /// The CPU must support the `aes` feature (checked at run time by
    /// `scan::mod`, the only caller).
    pub(crate) unsafe fn new_unchecked() -> Neon<true> {
        Neon(())
    }
}

/// Runs `pass` (stage 1, or the UTF-8 check alone) with this kernel,
/// multiplying when `pmull` is given.
pub(crate) fn run<P: Pass>(pmull: Option<Neon<true>>, pass: P) -> P::Output {
    match pmull {
        // SAFETY: a `Neon<true>` exists, so the CPU has NEON and PMULL.
        Some(token) => unsafe { run_pmull(token, pass) },
        // SAFETY: NEON is baseline on aarch64, the only target compiling
        // this file.
        None => unsafe { pass.run(Neon::new()) },
    }
}

#[target_feature(enable = "aes")]
unsafe fn run_pmull<P: Pass>(token: Neon<true>, pass: P) -> P::Output {
    // SAFETY: the enabled feature is the one `Neon<true>` stands for.
    unsafe { pass.run(token) }
}

/// The prefix XOR as a carry-less multiply by all ones.
///
/// # Safety
/// The CPU must support the `aes` feature.
#[target_feature(enable = "aes")]
#[inline]
unsafe fn prefix_xor_pmull(bits: u64) -> u64 {
    vmull_p64(bits, u64::MAX) as u64
}

/// Four vectors of a 64-byte block, de-interleaved: byte `4j + k` is lane
/// `j` of vector `k`.
#[derive(Clone, Copy)]
pub(crate) struct Block([uint8x16_t; 4]);

/// Per-class bits of the nibble lookups; each class is the product of the
/// high nibbles whose entry has its bit and the low nibbles whose entry has
/// it.
const BRACKET: u8 = 1; // 5B 5D 7B 7D
const COMMA: u8 = 2; // 2C
const COLON: u8 = 4; // 3A
const SPACE: u8 = 8; // 20
const TAB_LF_CR: u8 = 16; // 09 0A 0D
const OP: u8 = BRACKET | COMMA | COLON;
const WHITESPACE: u8 = SPACE | TAB_LF_CR;

const BY_LOW: [u8; 16] = {
    let mut t = [0; 16];
    t[0x0] = SPACE;
    t[0x9] = TAB_LF_CR;
    t[0xa] = COLON | TAB_LF_CR;
    t[0xb] = BRACKET;
    t[0xc] = COMMA;
    t[0xd] = BRACKET | TAB_LF_CR;
    t
};

const BY_HIGH: [u8; 16] = {
    let mut t = [0; 16];
    t[0x0] = TAB_LF_CR;
    t[0x2] = COMMA | SPACE;
    t[0x3] = COLON;
    t[0x5] = BRACKET;
    t[0x7] = BRACKET;
    t
};

/// A 16-byte table as a vector.
#[inline(always)]
fn table(t: &[u8; 16]) -> uint8x16_t {
    // SAFETY: `t` is 16 readable bytes; NEON is baseline on aarch64.
    unsafe { vld1q_u8(t.as_ptr()) }
}

/// The 64-bit mask of a block of compare results (0x00 or 0xFF per byte):
/// bit `i` is byte `i`. See the module docs for the folding.
#[inline(always)]
fn mask64(m: [uint8x16_t; 4]) -> u64 {
    // SAFETY: NEON intrinsics, baseline on aarch64.
    unsafe {
        // Bit 7 from vector 1 (3), bits 6..0 from vector 0 (2).
        let t01 = vsriq_n_u8::<1>(m[1], m[0]);
        let t23 = vsriq_n_u8::<1>(m[3], m[2]);
        // Bits 7, 6, 5, 4..0 from vectors 3, 2, 1, 0.
        let t = vsriq_n_u8::<2>(t23, t01);
        // Both nibbles: bit k (and 4 + k) from vector k.
        let t = vsriq_n_u8::<4>(t, t);
        // Byte m: low nibble from lane 2m, high nibble from lane 2m + 1.
        let packed = vshrn_n_u16::<4>(vreinterpretq_u16_u8(t));
        vget_lane_u64::<0>(vreinterpret_u64_u8(packed))
    }
}

/// Classifies one vector: quote, backslash, operator, whitespace, control.
#[inline(always)]
fn classify(v: uint8x16_t) -> [uint8x16_t; 5] {
    // SAFETY: NEON intrinsics, baseline on aarch64.
    unsafe {
        let class = vandq_u8(
            vqtbl1q_u8(table(&BY_LOW), vandq_u8(v, vdupq_n_u8(0x0f))),
            vqtbl1q_u8(table(&BY_HIGH), vshrq_n_u8::<4>(v)),
        );
        [
            vceqq_u8(v, vdupq_n_u8(b'"')),
            vceqq_u8(v, vdupq_n_u8(b'\\')),
            vtstq_u8(class, vdupq_n_u8(OP)),
            vtstq_u8(class, vdupq_n_u8(WHITESPACE)),
            vcltq_u8(v, vdupq_n_u8(0x20)),
        ]
    }
}

/// 0xFF where a byte is `"`, `\`, below 0x20 or from 0x80.
#[inline(always)]
fn string_specials(v: uint8x16_t) -> uint8x16_t {
    // SAFETY: NEON intrinsics, baseline on aarch64.
    unsafe {
        // XOR 2 moves '"' to 0x20 and keeps 00..1F below it, so one signed
        // compare catches quotes, control bytes and (negative) 80..FF.
        let flipped = vreinterpretq_s8_u8(veorq_u8(v, vdupq_n_u8(2)));
        vorrq_u8(
            vcltq_s8(flipped, vdupq_n_s8(0x21)),
            vceqq_u8(v, vdupq_n_u8(b'\\')),
        )
    }
}

impl<const PMULL: bool> Simd for Neon<PMULL> {
    type Block = Block;
    type Utf8 = Utf8;

    #[inline(always)]
    unsafe fn load(self, ptr: *const u8) -> Block {
        // SAFETY: the caller guarantees 64 readable bytes at ptr; `ld4`
        // has no alignment requirement.
        let v = unsafe { vld4q_u8(ptr) };
        Block([v.0, v.1, v.2, v.3])
    }

    #[inline(always)]
    fn masks(self, b: &Block) -> Masks {
        let c = b.0.map(classify);
        let class = |i: usize| mask64([c[0][i], c[1][i], c[2][i], c[3][i]]);
        Masks {
            quote: class(0),
            backslash: class(1),
            op: class(2),
            whitespace: class(3),
            control: class(4),
        }
    }

    #[inline(always)]
    fn short_escapes(self, b: &Block) -> u64 {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        let is = |v| unsafe {
            // A byte from 0x80 finds its nibble's entry, below 0x80 or
            // 0xFF; 0xFF itself finds `/`'s: never itself.
            vceqq_u8(
                vqtbl1q_u8(table(&SHORT_ESCAPE_TABLE), vandq_u8(v, vdupq_n_u8(0x0f))),
                v,
            )
        };
        mask64(b.0.map(is))
    }

    #[inline(always)]
    fn unicode_bytes(self, b: &Block) -> UnicodeBytes {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        let class = |v| unsafe {
            vandq_u8(
                vqtbl1q_u8(table(&unicode::BY_HIGH_NIBBLE), vshrq_n_u8::<4>(v)),
                vqtbl1q_u8(
                    table(&unicode::BY_LOW_NIBBLE),
                    vandq_u8(v, vdupq_n_u8(0x0f)),
                ),
            )
        };
        let classes = b.0.map(class);
        // SAFETY: NEON intrinsics, baseline on aarch64.
        let any = |bits| mask64(classes.map(|c| unsafe { vtstq_u8(c, vdupq_n_u8(bits)) }));
        UnicodeBytes::from_classes(any)
    }

    #[inline(always)]
    fn is_plain_string(self, b: &Block) -> bool {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe {
            let any = vorrq_u8(
                vorrq_u8(string_specials(b.0[0]), string_specials(b.0[1])),
                vorrq_u8(string_specials(b.0[2]), string_specials(b.0[3])),
            );
            vmaxvq_u8(any) == 0
        }
    }

    #[inline(always)]
    fn is_string_content(self, b: &Block) -> bool {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe {
            // As `string_specials`, with an unsigned compare: XOR 2 moves
            // '"' to 0x20 and keeps 00..1F below it, and 80..FF stay
            // above, so one compare catches quotes and control bytes.
            let breaks = |v: uint8x16_t| {
                vorrq_u8(
                    vcltq_u8(veorq_u8(v, vdupq_n_u8(2)), vdupq_n_u8(0x21)),
                    vceqq_u8(v, vdupq_n_u8(b'\\')),
                )
            };
            let any = vorrq_u8(
                vorrq_u8(breaks(b.0[0]), breaks(b.0[1])),
                vorrq_u8(breaks(b.0[2]), breaks(b.0[3])),
            );
            vmaxvq_u8(any) == 0
        }
    }

    #[inline(always)]
    fn has_non_ascii(self, b: &Block) -> bool {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe {
            let any = vorrq_u8(vorrq_u8(b.0[0], b.0[1]), vorrq_u8(b.0[2], b.0[3]));
            vmaxvq_u8(any) >= 0x80
        }
    }

    #[inline(always)]
    fn prefix_xor(self, bits: u64) -> u64 {
        if PMULL {
            // SAFETY: a `Neon<true>` exists, so the CPU has PMULL.
            unsafe { prefix_xor_pmull(bits) }
        } else {
            generic::prefix_xor_by_shifts(bits)
        }
    }

    #[inline(always)]
    fn utf8(self) -> Utf8 {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        let zero = unsafe { vdupq_n_u8(0) };
        Utf8 {
            error: zero,
            prev: Block([zero; 4]),
            incomplete: zero,
        }
    }
}

/// Streaming UTF-8 state: accumulated error bits, the previous block (all
/// zero after a skipped one), and the "sequence left open" marker of the
/// previous block.
pub(crate) struct Utf8 {
    error: uint8x16_t,
    prev: Block,
    incomplete: uint8x16_t,
}

/// For each byte of vector `k` of `cur`, the byte `back` (1..=3) places
/// earlier in the input.
#[inline(always)]
fn earlier(cur: &Block, prev: &Block, k: usize, back: usize) -> uint8x16_t {
    if k >= back {
        cur.0[k - back]
    } else {
        let from = k + 4 - back;
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe { vextq_u8::<15>(prev.0[from], cur.0[from]) }
    }
}

/// A vector that is 0xFF except for its last lane, `last`.
#[inline(always)]
fn all_but_last(last: u8) -> uint8x16_t {
    // SAFETY: NEON intrinsics, baseline on aarch64.
    unsafe { vsetq_lane_u8::<15>(last, vdupq_n_u8(0xff)) }
}

impl Utf8 {
    /// Checks vector `k` of `cur` against the bytes before it.
    #[inline(always)]
    fn check_vector(&mut self, cur: &Block, k: usize) {
        let input = cur.0[k];
        let prev1 = earlier(cur, &self.prev, k, 1);
        let prev2 = earlier(cur, &self.prev, k, 2);
        let prev3 = earlier(cur, &self.prev, k, 3);
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe {
            let special = vandq_u8(
                vandq_u8(
                    vqtbl1q_u8(table(&PREV_HIGH), vshrq_n_u8::<4>(prev1)),
                    vqtbl1q_u8(table(&PREV_LOW), vandq_u8(prev1, vdupq_n_u8(0x0f))),
                ),
                vqtbl1q_u8(table(&CURRENT_HIGH), vshrq_n_u8::<4>(input)),
            );
            let must_continue = vorrq_u8(
                vcgeq_u8(prev2, vdupq_n_u8(0xe0)),
                vcgeq_u8(prev3, vdupq_n_u8(0xf0)),
            );
            let must_continue_80 = vandq_u8(must_continue, vdupq_n_u8(0x80));
            self.error = vorrq_u8(self.error, veorq_u8(special, must_continue_80));
        }
    }
}

impl Utf8Check<Block> for Utf8 {
    #[inline(always)]
    fn check(&mut self, b: &Block) {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe {
            let any = vorrq_u8(vorrq_u8(b.0[0], b.0[1]), vorrq_u8(b.0[2], b.0[3]));
            if vmaxvq_u8(any) < 0x80 {
                // ASCII: nothing to check beyond an open sequence.
                self.error = vorrq_u8(self.error, self.incomplete);
                self.incomplete = vdupq_n_u8(0);
            } else {
                for k in 0..4 {
                    self.check_vector(b, k);
                }
                // Bytes 63, 62, 61 (last lanes of vectors 3, 2, 1) open a
                // sequence that needs the next block from C0, E0, F0 on.
                self.incomplete = vorrq_u8(
                    vqsubq_u8(b.0[3], all_but_last(0xc0 - 1)),
                    vorrq_u8(
                        vqsubq_u8(b.0[2], all_but_last(0xe0 - 1)),
                        vqsubq_u8(b.0[1], all_but_last(0xf0 - 1)),
                    ),
                );
            }
        }
        self.prev = *b;
    }

    #[inline(always)]
    fn skip_ascii(&mut self) {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe {
            // As `check` on an ASCII block: an open sequence is an error.
            self.error = vorrq_u8(self.error, self.incomplete);
            self.incomplete = vdupq_n_u8(0);
            self.prev = Block([vdupq_n_u8(0); 4]);
        }
    }

    #[inline(always)]
    fn finish(&mut self) -> bool {
        // SAFETY: NEON intrinsics, baseline on aarch64.
        unsafe { vmaxvq_u8(vorrq_u8(self.error, self.incomplete)) != 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;
    use crate::testing::{Rng, naive_scan, random_json, random_text};

    #[test]
    fn masks_are_in_input_order_and_classes_exact() {
        // Every byte value at every lane: 4 blocks of 64 cover 0..=255.
        for start in (0..256).step_by(64) {
            let bytes: Vec<u8> = (start..start + 64).map(|b| b as u8).collect();
            // SAFETY: `bytes` is 64 readable bytes.
            let m = Neon::new().masks(&unsafe { Neon::new().load(bytes.as_ptr()) });
            for (i, &b) in bytes.iter().enumerate() {
                let bit = |mask: u64| mask >> i & 1 == 1;
                assert_eq!(bit(m.quote), b == b'"', "{b:02x}");
                assert_eq!(bit(m.backslash), b == b'\\', "{b:02x}");
                assert_eq!(bit(m.op), b"{}[]:,".contains(&b), "{b:02x}");
                assert_eq!(bit(m.whitespace), b" \t\n\r".contains(&b), "{b:02x}");
                assert_eq!(bit(m.control), b < 0x20, "{b:02x}");
            }
        }
        // The whole-block tests, with one byte value among plain letters
        // at every lane.
        for value in 0..=255u8 {
            for lane in 0..64 {
                let mut bytes = [b'a'; 64];
                bytes[lane] = value;
                // SAFETY: `bytes` is 64 readable bytes.
                let block = unsafe { Neon::new().load(bytes.as_ptr()) };
                let breaks = value < 0x20 || value == b'"' || value == b'\\';
                let kernel = Neon::new();
                assert_eq!(kernel.is_string_content(&block), !breaks, "{value:02x}");
                assert_eq!(
                    kernel.is_plain_string(&block),
                    !breaks && value < 0x80,
                    "{value:02x}"
                );
                assert_eq!(kernel.has_non_ascii(&block), value >= 0x80, "{value:02x}");
            }
        }
    }

    #[test]
    fn the_kernel_without_pmull_matches_the_oracle() {
        // The kernel tests of scan::tests run the variant the CPU picks
        // (with pmull under QEMU); this runs the fallback the same way.
        let mut rng = Rng::new(6);
        for round in 0..300 {
            let text = if round % 2 == 0 {
                random_json(&mut rng, 4)
            } else {
                let len = rng.below(300);
                random_text(&mut rng, len)
            };
            for shift in [0, 1, 31, 63] {
                let mut shifted = vec![b' '; shift];
                shifted.extend_from_slice(&text);
                let mut index = Index::default();
                let got = run(
                    None,
                    generic::Stage1 {
                        input: &shifted,
                        index: &mut index,
                    },
                )
                .map(|()| (index.positions, index.escapes));
                assert_eq!(
                    got,
                    naive_scan(&shifted),
                    "{:?}",
                    String::from_utf8_lossy(&shifted)
                );
            }
        }
    }

    #[test]
    fn both_prefix_xors_agree() {
        if !std::arch::is_aarch64_feature_detected!("aes") {
            return;
        }
        // SAFETY: the CPU has the `aes` feature.
        let pmull = unsafe { Neon::new_unchecked() };
        let mut rng = Rng::new(5);
        for _ in 0..crate::testing::rounds(10_000) {
            let bits = rng.next_u64() & rng.next_u64();
            assert_eq!(pmull.prefix_xor(bits), Neon::new().prefix_xor(bits));
        }
    }
}
