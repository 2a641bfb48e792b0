//! The byte-class tables of the shuffle-based kernels (`vpshufb` on x86; a
//! NEON `tbl` of the low nibble works the same way, and the NEON kernel
//! uses the short escapes' table): a byte is looked up by its low nibble
//! and belongs to the class when the entry equals the byte.
//!
//! * Whitespace: `' '`, `\t`, `\n`, `\r` have distinct low nibbles.
//! * `{ } [ ] : ,`: looked up by the byte, compared with `byte | 0x20`,
//!   which folds `[` onto `{` and `]` onto `}`. That also matches 0x0C and
//!   0x1A (as `,` and `:`); kernels remove them with the control mask, so
//!   the classes stay exact.
//!
//! Entries not listed hold 0xFF, which never equals a byte below 0x80,
//! and a shuffle yields 0 for bytes from 0x80: no false matches.

const fn nibble_table(entries: &[(u8, u8)]) -> [u8; 16] {
    let mut t = [0xff; 16];
    let mut i = 0;
    while i < entries.len() {
        t[entries[i].0 as usize] = entries[i].1;
        i += 1;
    }
    t
}

/// Whitespace, by low nibble.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) const WHITESPACE_TABLE: [u8; 16] =
    nibble_table(&[(0x0, b' '), (0x9, b'\t'), (0xa, b'\n'), (0xd, b'\r')]);
/// `{ } [ ] : ,` OR 0x20, by low nibble.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) const OP_TABLE: [u8; 16] =
    nibble_table(&[(0xa, b':'), (0xb, b'{'), (0xc, b','), (0xd, b'}')]);
/// The bytes after a backslash that make a two-byte escape, by low
/// nibble, those whose nibbles differ: `"` `t` `f` `\` `n` `/`. `b` and
/// `r` share `"`'s nibble and are left out: stage 1 vouches for the
/// escapes of this table alone ([`super::generic::Simd::short_escapes`]).
pub(crate) const SHORT_ESCAPE_TABLE: [u8; 16] = nibble_table(&[
    (0x2, b'"'),
    (0x4, b't'),
    (0x6, b'f'),
    (0xc, b'\\'),
    (0xe, b'n'),
    (0xf, b'/'),
]);

/// The bytes that tell whether a `\uXXXX` escape is one stage 1 vouches
/// for (`generic::unlist_vouched`), as bits of a class
/// looked up twice, by the byte's high nibble and by its low nibble, the
/// two entries ANDed: a byte is in the class of a bit when both entries
/// have it. (A hex digit needs two bits, digits and letters having
/// different low nibbles.) Bytes from 0x80 have high nibbles whose entries
/// are 0.
pub(crate) mod unicode {
    /// `0` to `7`.
    pub(crate) const DIGIT_0_7: u8 = 1;
    /// `8` and `9`.
    pub(crate) const DIGIT_8_9: u8 = 2;
    /// `a` to `f` and `A` to `F`.
    pub(crate) const HEX_LETTER: u8 = 4;
    /// `d` and `D`.
    pub(crate) const LETTER_D: u8 = 8;
    /// `u`.
    pub(crate) const LETTER_U: u8 = 16;
    /// `"`.
    pub(crate) const QUOTE: u8 = 32;
    /// Any hex digit.
    pub(crate) const HEX: u8 = DIGIT_0_7 | DIGIT_8_9 | HEX_LETTER;
    /// A hex digit from 8: what follows the `d` of a surrogate.
    pub(crate) const HEX_FROM_8: u8 = DIGIT_8_9 | HEX_LETTER;

    /// The entry of each high nibble: 2 for `"`, 3 for digits, 4 and 6
    /// for letters (upper and lower case), 7 for `u`.
    pub(crate) const BY_HIGH_NIBBLE: [u8; 16] = {
        let mut t = [0; 16];
        t[2] = QUOTE;
        t[3] = DIGIT_0_7 | DIGIT_8_9;
        t[4] = HEX_LETTER | LETTER_D;
        t[6] = HEX_LETTER | LETTER_D;
        t[7] = LETTER_U;
        t
    };
    /// The entry of each low nibble.
    pub(crate) const BY_LOW_NIBBLE: [u8; 16] = {
        let mut t = [0; 16];
        let mut n = 0;
        while n < 16 {
            if n < 8 {
                t[n] |= DIGIT_0_7;
            } else if n < 10 {
                t[n] |= DIGIT_8_9;
            }
            if n >= 1 && n <= 6 {
                t[n] |= HEX_LETTER;
            }
            n += 1;
        }
        t[2] |= QUOTE;
        t[4] |= LETTER_D;
        t[5] |= LETTER_U;
        t
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_classify_every_byte_exactly() {
        for b in 0..=255u8 {
            // A shuffle yields 0 for bytes from 0x80.
            let entry = |t: &[u8; 16]| if b < 0x80 { t[usize::from(b & 15)] } else { 0 };
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            {
                assert_eq!(entry(&WHITESPACE_TABLE) == b, b" \t\n\r".contains(&b));
                let op = entry(&OP_TABLE) == b | 0x20 && b >= 0x20;
                assert_eq!(op, b"{}[]:,".contains(&b), "{b:#x}");
            }
            let vouched = crate::testing::VOUCHED_ESCAPES.contains(&b);
            assert_eq!(entry(&SHORT_ESCAPE_TABLE) == b, vouched, "{b:#x}");
            let class = unicode::BY_HIGH_NIBBLE[usize::from(b >> 4)]
                & unicode::BY_LOW_NIBBLE[usize::from(b & 15)];
            let hex_from_8 = b"89abcdefABCDEF".contains(&b);
            assert_eq!(class & unicode::HEX != 0, b.is_ascii_hexdigit(), "{b:#x}");
            assert_eq!(class & unicode::HEX_FROM_8 != 0, hex_from_8, "{b:#x}");
            assert_eq!(class & unicode::LETTER_D != 0, b"dD".contains(&b), "{b:#x}");
            assert_eq!(class & unicode::LETTER_U != 0, b == b'u', "{b:#x}");
            assert_eq!(class & unicode::QUOTE != 0, b == b'"', "{b:#x}");
        }
    }
}
