//! The portable kernel: runs on every CPU and is the reference the SIMD
//! kernels are checked against.
//!
//! Classification is one table lookup per byte; the prefix XOR is six
//! shift-XOR steps (`generic::prefix_xor_by_shifts`). UTF-8 is validated
//! up front by `core::str::from_utf8` (whose ASCII path is word-at-a-time),
//! so the per-block checker only has to report that verdict.

use super::generic::{self, Masks, Simd, Utf8Check};

const QUOTE: u8 = 1;
const BACKSLASH: u8 = 2;
const OP: u8 = 4;
const WHITESPACE: u8 = 8;
const CONTROL: u8 = 16;
const SPECIAL_IN_STRING: u8 = 32;

/// Class bits of every byte value.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let mut c = 0;
        if b < 0x20 {
            c |= CONTROL | SPECIAL_IN_STRING;
        }
        if b >= 0x80 {
            c |= SPECIAL_IN_STRING;
        }
        match b as u8 {
            b'"' => c |= QUOTE | SPECIAL_IN_STRING,
            b'\\' => c |= BACKSLASH | SPECIAL_IN_STRING,
            b'{' | b'}' | b'[' | b']' | b':' | b',' => c |= OP,
            b' ' | b'\t' | b'\n' | b'\r' => c |= WHITESPACE,
            _ => {}
        }
        t[b] = c;
        b += 1;
    }
    t
};

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
    type Block = [u8; 64];
    type Utf8 = Verdict;

    #[inline(always)]
    unsafe fn load(self, ptr: *const u8) -> [u8; 64] {
        // SAFETY: the caller guarantees 64 readable bytes at ptr; [u8; 64]
        // has alignment 1.
        unsafe { ptr.cast::<[u8; 64]>().read() }
    }

    #[inline(always)]
    fn masks(self, block: &[u8; 64]) -> Masks {
        let mut m = Masks::default();
        for (i, &b) in block.iter().enumerate() {
            let c = CLASS[b as usize] as u64;
            m.quote |= (c & QUOTE as u64) << i;
            m.backslash |= ((c >> 1) & 1) << i;
            m.op |= ((c >> 2) & 1) << i;
            m.whitespace |= ((c >> 3) & 1) << i;
            m.control |= ((c >> 4) & 1) << i;
        }
        m
    }

    #[inline(always)]
    fn is_plain_string(self, block: &[u8; 64]) -> bool {
        block
            .iter()
            .all(|&b| CLASS[b as usize] & SPECIAL_IN_STRING == 0)
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

impl Utf8Check<[u8; 64]> for Verdict {
    #[inline(always)]
    fn check(&mut self, _block: &[u8; 64]) {}
    #[inline(always)]
    fn skip_ascii(&mut self) {}
    #[inline(always)]
    fn at_boundary(&self) -> bool {
        true
    }
    fn finish(&mut self) -> bool {
        !self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_exact() {
        let mut block = [0u8; 64];
        for (i, b) in block.iter_mut().enumerate() {
            *b = [
                b'"', b'\\', b'{', b']', b':', b',', b' ', b'\t', 0x0c, 0x1a, b'a', 0xff,
            ][i % 12];
        }
        let m = Scalar { utf8_valid: true }.masks(&block);
        for (i, &b) in block.iter().enumerate() {
            assert_eq!(m.quote >> i & 1 == 1, b == b'"');
            assert_eq!(m.backslash >> i & 1 == 1, b == b'\\');
            assert_eq!(m.op >> i & 1 == 1, b"{}[]:,".contains(&b));
            assert_eq!(m.whitespace >> i & 1 == 1, b" \t\n\r".contains(&b));
            assert_eq!(m.control >> i & 1 == 1, b < 0x20);
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
