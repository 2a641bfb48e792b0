//! The portable kernel: runs on every CPU, eight bytes at a time in
//! `u64` words (SWAR).
//!
//! Each class is found in a whole word at once. With the high bit of every
//! byte cleared, adding 0x7F to a byte sets its bit 7 exactly when the byte
//! is not zero, and no carry crosses into the next byte; so
//! `(x ^ c) + 0x7F..7F` flags, in bit 7 of each byte, the bytes that differ
//! from `c`, and a set of values is the AND of such words. Bytes from 0x80
//! are never in a class and are masked out at the end. One multiply then
//! gathers the eight bit-7 flags of a word into eight adjacent bits.
//!
//! * `"` and `\`: one comparison each.
//! * Below 0x20: `x + 0x60` has bit 7 clear exactly for `x < 0x20`.
//! * `{ } [ ] : ,`: compared after OR 0x20, which folds `[`/`{` and
//!   `]`/`}`; it also matches 0x0C and 0x1A, removed with the control mask.
//! * Whitespace: four comparisons.
//!
//! The prefix XOR is six shift-XOR steps (`generic::prefix_xor_by_shifts`).
//! UTF-8 is validated up front by `core::str::from_utf8` (whose ASCII path
//! is word-at-a-time too), so the per-block checker only reports that
//! verdict. The byte-at-a-time
//! reference the kernels are tested against is `crate::testing::naive_scan`.

use super::generic::{self, Masks, Simd, Utf8Check};

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

/// The bit-7 flags of the eight bytes of `flags` (no other bit set), as
/// the low eight bits. Flag `i` is bit `8 i + 7`; the multiply adds copies
/// of it shifted by `7 j` for j = 0..8, and the copies with `i + j = 7`
/// land on bit `56 + i`, with no other partial product or carry reaching
/// bits 56..63.
#[inline(always)]
fn gather(flags: u64) -> u64 {
    flags.wrapping_mul(0x0002_0408_1020_4081) >> 56
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
        let mut m = Masks::default();
        for &w in block {
            // Bit 7 set in the bytes below 0x80, the only ones in a class.
            let ascii = !w & HIGH;
            let x7 = w & !HIGH;
            let control = !(x7 + splat(0x60)) & ascii;
            let folded = x7 | splat(0x20);
            let op = !(differs(folded, b'{')
                & differs(folded, b'}')
                & differs(folded, b',')
                & differs(folded, b':'))
                & ascii
                & !control;
            let whitespace =
                !(differs(x7, b' ') & differs(x7, b'\t') & differs(x7, b'\n') & differs(x7, b'\r'))
                    & ascii;
            // Each word's flags enter at the top and move down a byte per
            // word. (OR-ing them in at `8 k` instead invites LLVM to
            // vectorize across words, emulating the 64-bit multiply with
            // SSE2's 32-bit ones: measured 10% slower.)
            let push = |mask: &mut u64, flags: u64| *mask = (*mask >> 8) | (gather(flags) << 56);
            push(&mut m.quote, !differs(x7, b'"') & ascii);
            push(&mut m.backslash, !differs(x7, b'\\') & ascii);
            push(&mut m.op, op);
            push(&mut m.whitespace, whitespace);
            push(&mut m.control, control);
        }
        m
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
