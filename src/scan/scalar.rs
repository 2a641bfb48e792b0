//! The portable kernel: runs on every CPU, in `u64` words.
//!
//! A block is first *bit-sliced*: transposed into eight 64-bit planes,
//! plane `b` holding bit `b` of every byte (bit `i` of a plane describes
//! byte `i`, as the masks do). Each class is then a boolean formula over
//! the planes that tests all 64 bytes at once, so classifying costs about
//! as much as one byte at a time would cost for a single byte:
//!
//! * the high nibble: `0x0_`, `0x2_`, `0x3_`, `0x5_`/`0x7_`; below 0x20 is
//!   bits 7, 6, 5 clear;
//! * the low nibble: `0`, `2`, `9`, `A`, `B`, `C`, `D`;
//! * `"` = `2|2`, `\` = `5|C`, whitespace = `2|0` or `0|9`, `0|A`, `0|D`,
//!   `{ } [ ] : ,` = `2|C`, `3|A`, `5|B`, `5|D`, `7|B`, `7|D` (exact: no
//!   control byte matches).
//!
//! The transpose is two three-step ladders of masked swaps (Hacker's
//! Delight's `transpose8`): within each word, an 8 x 8 bit transpose of
//! its bytes; then across the eight words, an 8 x 8 transpose of bytes.
//! Measured against the previous design (per word, equality tests that
//! flag bytes in bit 7, then one multiply per class gathering the flags):
//! stage 1 instructions per byte 14.6 / 13.3 / 13.7 down to 10.0 / 8.3 /
//! 8.7 on twitter / citm_catalog / canada, and 27-35% faster.
//!
//! The prefix XOR is six shift-XOR steps (`generic::prefix_xor_by_shifts`).
//! UTF-8 is validated up front by `core::str::from_utf8` (whose ASCII path
//! is word-at-a-time too), so the per-block checker only reports that
//! verdict. The byte-at-a-time
//! reference the kernels are tested against is `crate::testing::naive_scan`.

use super::generic::{self, Masks, Simd, UnicodeBytes, Utf8Check};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// `c` in every byte.
const fn splat(c: u8) -> u64 {
    ONES * c as u64
}

/// Bit 7 of each byte set where the byte of `x7` (bit 7 clear in every
/// byte) differs from `c` (below 0x80).
#[inline(always)]
fn differs(x7: u64, c: u8) -> u64 {
    (x7 ^ splat(c)) + splat(0x7f)
}

/// Swaps the bits of `x` selected by `mask` with those `shift` places
/// above them (a delta swap).
#[inline(always)]
fn delta_swap(x: u64, mask: u64, shift: u32) -> u64 {
    let t = (x ^ (x >> shift)) & mask;
    x ^ t ^ (t << shift)
}

/// Exchanges the bits of `lo` selected by `mask` shifted up by `shift`
/// with the bits of `hi` selected by `mask`: one step of a transpose
/// across two words.
#[inline(always)]
fn cross_swap(lo: &mut u64, hi: &mut u64, mask: u64, shift: u32) {
    let t = ((*lo >> shift) ^ *hi) & mask;
    *hi ^= t;
    *lo ^= t << shift;
}

/// The eight bit planes of a block: plane `b` has bit `8 k + j` set when
/// bit `b` of byte `j` of word `k` (byte `8 k + j` of the block) is.
#[inline(always)]
fn bit_planes(block: &[u64; 8]) -> [u64; 8] {
    // Within each word: byte j, bit b moves to byte b, bit j. (A loop,
    // not `array::map`, which LLVM left as an out-of-line call.)
    let mut w = *block;
    for x in &mut w {
        *x = delta_swap(*x, 0x00AA_00AA_00AA_00AA, 7);
        *x = delta_swap(*x, 0x0000_CCCC_0000_CCCC, 14);
        *x = delta_swap(*x, 0x0000_0000_F0F0_F0F0, 28);
    }
    // Across words: byte b of word k moves to byte k of word b. Spelled
    // out on locals: as a loop over the array LLVM kept it in memory.
    let [
        mut w0,
        mut w1,
        mut w2,
        mut w3,
        mut w4,
        mut w5,
        mut w6,
        mut w7,
    ] = w;
    const BYTES: u64 = 0x00FF_00FF_00FF_00FF;
    cross_swap(&mut w0, &mut w1, BYTES, 8);
    cross_swap(&mut w2, &mut w3, BYTES, 8);
    cross_swap(&mut w4, &mut w5, BYTES, 8);
    cross_swap(&mut w6, &mut w7, BYTES, 8);
    const PAIRS: u64 = 0x0000_FFFF_0000_FFFF;
    cross_swap(&mut w0, &mut w2, PAIRS, 16);
    cross_swap(&mut w1, &mut w3, PAIRS, 16);
    cross_swap(&mut w4, &mut w6, PAIRS, 16);
    cross_swap(&mut w5, &mut w7, PAIRS, 16);
    const QUADS: u64 = 0x0000_0000_FFFF_FFFF;
    cross_swap(&mut w0, &mut w4, QUADS, 32);
    cross_swap(&mut w1, &mut w5, QUADS, 32);
    cross_swap(&mut w2, &mut w6, QUADS, 32);
    cross_swap(&mut w3, &mut w7, QUADS, 32);
    [w0, w1, w2, w3, w4, w5, w6, w7]
}

/// The portable kernel. Always available.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalar {
    /// Result of validating the whole input as UTF-8 before scanning.
    utf8_valid: bool,
}

impl Scalar {
    /// A scalar kernel for `input`.
    pub(crate) fn new(input: &[u8]) -> Scalar {
        Scalar {
            utf8_valid: core::str::from_utf8(input).is_ok(),
        }
    }
}

impl Simd for Scalar {
    /// Eight words, byte `8 k + i` of the block in byte `i` of word `k`.
    type Block = [u64; 8];
    type Utf8 = Verdict;

    /// A second block a turn ran slower: the full parse 3-4% faster one
    /// block a turn on the corpus and github-100k (`tools/ab_parse.sh`,
    /// docs/benchmarks.md, "One block a turn when writing late").
    const PAIRS_BLOCKS: bool = false;

    /// From the bit planes the loop has made (see the trait).
    const UNVOUCHES_IN_LOOP: bool = true;

    #[inline(always)]
    unsafe fn load(self, ptr: *const u8) -> [u64; 8] {
        core::array::from_fn(|k| {
            // SAFETY: the caller guarantees 64 readable bytes at ptr;
            // unaligned reads.
            u64::from_le(unsafe { ptr.add(8 * k).cast::<u64>().read_unaligned() })
        })
    }

    #[inline(always)]
    fn masks(self, block: &[u64; 8]) -> Masks {
        let [b0, b1, b2, b3, b4, b5, b6, b7] = bit_planes(block);
        // High nibbles.
        let ascii0 = !b7 & !b6;
        let control = ascii0 & !b5;
        let h0 = control & !b4;
        let h23 = ascii0 & b5;
        let h2 = h23 & !b4;
        let h3 = h23 & b4;
        let h57 = !b7 & b6 & b4;
        let h5 = h57 & !b5;
        // Low nibbles.
        let not10 = !(b1 | b0);
        let b1_not0 = b1 & !b0;
        let not1_b0 = !b1 & b0;
        let not32 = !b3 & !b2;
        let both32 = b3 & b2;
        let b3_not2 = b3 & !b2;
        let l0 = not32 & not10;
        let l2 = not32 & b1_not0;
        let l9 = b3_not2 & not1_b0;
        let la = b3_not2 & b1_not0;
        let lb = b3_not2 & b1 & b0;
        let lc = both32 & not10;
        let ld = both32 & not1_b0;
        Masks {
            quote: h2 & l2,
            backslash: h5 & lc,
            op: (h2 & lc) | (h3 & la) | (h57 & (lb | ld)),
            whitespace: (h2 & l0) | (h0 & (l9 | la | ld)),
            control,
        }
    }

    /// From the bit planes, as `masks`: by high nibble (2, 5,
    /// 6, 7), then low.
    #[inline(always)]
    fn short_escapes(self, block: &[u64; 8]) -> u64 {
        let [b0, b1, b2, b3, b4, b5, b6, b7] = bit_planes(block);
        let h2 = !b7 & !b6 & b5 & !b4;
        let h5 = !b7 & b6 & !b5 & b4;
        let h67 = !b7 & b6 & b5;
        // `"` (0x22) and `/` (0x2F).
        let quote_slash = h2 & b1 & ((!b3 & !b2 & !b0) | (b3 & b2 & b0));
        // `\` (0x5C).
        let backslash = h5 & b3 & b2 & !b1 & !b0;
        // `f` (0x66) and `n` (0x6E); `t` (0x74).
        let f_n = h67 & !b4 & b2 & b1 & !b0;
        let t = h67 & b4 & !b3 & b2 & !b1 & !b0;
        quote_slash | backslash | f_n | t
    }

    /// From the bit planes: `"` by high nibble 2, digits by 3, letters by
    /// 4 and 6 (bit 5 is the case), `u` by 7; then by low nibble.
    #[inline(always)]
    fn unicode_bytes(self, block: &[u64; 8]) -> UnicodeBytes {
        let [b0, b1, b2, b3, b4, b5, b6, b7] = bit_planes(block);
        let h3 = !b7 & !b6 & b5 & b4;
        let letters = !b7 & b6 & !b4;
        let h7 = !b7 & b6 & b5 & b4;
        // Low nibbles 0 to 9, 8 and 9, 1 to 6.
        let l0_9 = !b3 | !b2 & !b1;
        let l8_9 = b3 & !b2 & !b1;
        let l1_6 = !b3 & (b2 | b1 | b0) & !(b2 & b1 & b0);
        let hex_letter = letters & l1_6;
        UnicodeBytes {
            u: h7 & !b3 & b2 & !b1 & b0,
            hex: h3 & l0_9 | hex_letter,
            d: letters & !b3 & b2 & !b1 & !b0,
            hex_from_8: h3 & l8_9 | hex_letter,
            quote: !b7 & !b6 & b5 & !b4 & !b3 & !b2 & b1 & !b0,
        }
    }

    #[inline(always)]
    fn is_plain_string(self, block: &[u64; 8]) -> bool {
        let special = block.iter().fold(0, |acc, &w| {
            let x7 = w & !HIGH;
            // Non-ASCII bytes are special whatever the rest says.
            let quote_backslash_control =
                !(differs(x7, b'"') & differs(x7, b'\\') & (x7 + splat(0x60)));
            acc | ((quote_backslash_control | w) & HIGH)
        });
        special == 0
    }

    #[inline(always)]
    fn is_string_content(self, block: &[u64; 8]) -> bool {
        let breaks = block.iter().fold(0, |acc, &w| {
            let x7 = w & !HIGH;
            // Only bytes below 0x80 can be one of these.
            let quote_backslash_control =
                !(differs(x7, b'"') & differs(x7, b'\\') & (x7 + splat(0x60)));
            acc | (quote_backslash_control & !w & HIGH)
        });
        breaks == 0
    }

    #[inline(always)]
    fn has_non_ascii(self, block: &[u64; 8]) -> bool {
        block.iter().fold(0, |acc, &w| acc | w) & HIGH != 0
    }

    #[inline(always)]
    fn prefix_xor(self, bits: u64) -> u64 {
        generic::prefix_xor_by_shifts(bits)
    }

    fn utf8(self) -> Verdict {
        Verdict(self.utf8_valid)
    }
}

/// The up-front UTF-8 verdict, reported at the end of the scan.
pub(crate) struct Verdict(bool);

impl Utf8Check<[u64; 8]> for Verdict {
    #[inline(always)]
    fn check(&mut self, _block: &[u64; 8]) {}
    #[inline(always)]
    fn skip_ascii(&mut self) {}
    fn finish(&mut self) -> bool {
        !self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_exact_for_every_byte_in_every_lane() {
        let kernel = Scalar { utf8_valid: true };
        // Each byte value at every position, beside every other value
        // (carries between bytes would show as wrong neighbours).
        for value in 0..=255u8 {
            for other in 0..=255u8 {
                let mut block = [other; 64];
                for i in (usize::from(value) % 3..64).step_by(3) {
                    block[i] = value;
                }
                // SAFETY: `block` is 64 readable bytes.
                let words = unsafe { kernel.load(block.as_ptr()) };
                let m = kernel.masks(&words);
                for (i, &b) in block.iter().enumerate() {
                    assert_eq!(m.quote >> i & 1 == 1, b == b'"');
                    assert_eq!(m.backslash >> i & 1 == 1, b == b'\\');
                    assert_eq!(m.op >> i & 1 == 1, b"{}[]:,".contains(&b));
                    assert_eq!(m.whitespace >> i & 1 == 1, b" \t\n\r".contains(&b));
                    assert_eq!(m.control >> i & 1 == 1, b < 0x20);
                }
                let plain = block
                    .iter()
                    .all(|&b| (0x20..0x80).contains(&b) && b != b'"' && b != b'\\');
                assert_eq!(
                    kernel.is_plain_string(&words),
                    plain,
                    "{value:#x} {other:#x}"
                );
                let content = block.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\');
                assert_eq!(kernel.is_string_content(&words), content);
                assert_eq!(
                    kernel.has_non_ascii(&words),
                    block.iter().any(|&b| b >= 0x80)
                );
            }
        }
    }

    #[test]
    fn prefix_xor_marks_string_interiors() {
        let s = Scalar { utf8_valid: true };
        assert_eq!(s.prefix_xor(0b1001), 0b0111);
        assert_eq!(s.prefix_xor(1 << 63), 1 << 63);
        assert_eq!(s.prefix_xor(1), u64::MAX);
    }
}
