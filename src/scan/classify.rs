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
        }
    }
}
