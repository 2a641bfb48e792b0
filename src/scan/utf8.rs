//! Nibble tables for vectorised UTF-8 validation (the lookup method of
//! Keiser and Lemire, "Validating UTF-8 In Less Than One Instruction Per
//! Byte", 2021), shared by every SIMD kernel.
//!
//! Each byte is judged together with the byte before it. Every kind of
//! invalid pair is a product of three conditions, one on each nibble
//! (previous high, previous low, current high), so three 16-entry lookups
//! ANDed together leave a flag set exactly for the invalid pairs:
//!
//! | flag | previous byte | current byte | meaning |
//! |------|---------------|--------------|---------|
//! | `TOO_SHORT` | `C0..FF` | not `80..BF` | lead byte without continuation |
//! | `TOO_LONG` | `00..7F` | `80..BF` | continuation after ASCII |
//! | `OVERLONG_3` | `E0` | `80..9F` | 3-byte form of a < U+0800 code point |
//! | `TOO_LARGE` | `F4..FF` | `90..BF` | above U+10FFFF |
//! | `SURROGATE` | `ED` | `A0..BF` | U+D800..U+DFFF |
//! | `OVERLONG_2` | `C0`, `C1` | `80..BF` | 2-byte form of ASCII |
//! | `TOO_LARGE_1000` / `OVERLONG_4` | `F5..FF` or `F0` | `80..8F` | (share a bit: their union is still a product) |
//! | `TWO_CONTINUATIONS` | `80..BF` | `80..BF` | fine only as 3rd/4th byte |
//!
//! `TWO_CONTINUATIONS` is then XORed with "this byte must be a 3rd or 4th
//! byte" (two bytes back is `E0..FF`, or three back is `F0..FF`): a
//! continuation pair where none is required, or a required one that is
//! missing, leaves a bit set. A block whose last three bytes open a
//! sequence that needs more bytes marks the next block (or the end of
//! input) as having to continue it.

const TOO_SHORT: u8 = 1 << 0;
const TOO_LONG: u8 = 1 << 1;
const OVERLONG_3: u8 = 1 << 2;
const TOO_LARGE: u8 = 1 << 3;
const SURROGATE: u8 = 1 << 4;
const OVERLONG_2: u8 = 1 << 5;
const TOO_LARGE_1000: u8 = 1 << 6;
const OVERLONG_4: u8 = 1 << 6;
const TWO_CONTINUATIONS: u8 = 1 << 7;

/// Flags allowed by the high nibble of the previous byte.
pub(crate) const PREV_HIGH: [u8; 16] = [
    // 0..7: ASCII
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    // 8..B: continuation
    TWO_CONTINUATIONS,
    TWO_CONTINUATIONS,
    TWO_CONTINUATIONS,
    TWO_CONTINUATIONS,
    // C: 2-byte lead (C0, C1 overlong)
    TOO_SHORT | OVERLONG_2,
    // D: 2-byte lead
    TOO_SHORT,
    // E: 3-byte lead (E0 overlong, ED surrogate)
    TOO_SHORT | OVERLONG_3 | SURROGATE,
    // F: 4-byte lead (F0 overlong, F4+ too large)
    TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4,
];

const ANY_LOW: u8 = TOO_SHORT | TOO_LONG | TWO_CONTINUATIONS;

/// Flags allowed by the low nibble of the previous byte.
pub(crate) const PREV_LOW: [u8; 16] = [
    ANY_LOW | OVERLONG_2 | OVERLONG_3 | OVERLONG_4, // x0: C0, E0, F0
    ANY_LOW | OVERLONG_2,                           // x1: C1
    ANY_LOW,
    ANY_LOW,
    ANY_LOW | TOO_LARGE, // x4: F4
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000 | SURROGATE, // xD: ED
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
    ANY_LOW | TOO_LARGE | TOO_LARGE_1000,
];

const NOT_CONTINUATION: u8 = TOO_SHORT;
const ANY_CONTINUATION: u8 = TOO_LONG | TWO_CONTINUATIONS | OVERLONG_2;

/// Flags allowed by the high nibble of the current byte.
pub(crate) const CURRENT_HIGH: [u8; 16] = [
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    ANY_CONTINUATION | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4, // 80..8F
    ANY_CONTINUATION | OVERLONG_3 | TOO_LARGE,                   // 90..9F
    ANY_CONTINUATION | SURROGATE | TOO_LARGE,                    // A0..AF
    ANY_CONTINUATION | SURROGATE | TOO_LARGE,                    // B0..BF
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
    NOT_CONTINUATION,
];

/// Per-position thresholds for "the block ends inside a sequence": a byte
/// at or above `INCOMPLETE_AT_END[i] + 1` in one of the last three
/// positions of a 32-byte vector needs bytes beyond it (the x86 kernels'
/// layout).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) const INCOMPLETE_AT_END: [u8; 32] = {
    let mut t = [0xff; 32];
    t[29] = 0xf0 - 1;
    t[30] = 0xe0 - 1;
    t[31] = 0xc0 - 1;
    t
};

/// The scalar model of the vector check, used by the tests to verify the
/// tables exhaustively against `core::str::from_utf8`.
#[cfg(test)]
pub(crate) fn naive_lookup_check(bytes: &[u8]) -> bool {
    let at = |i: usize, back: usize| if i >= back { bytes[i - back] } else { 0 };
    let mut error = 0u8;
    for i in 0..bytes.len() {
        let prev1 = at(i, 1);
        let special = PREV_HIGH[(prev1 >> 4) as usize]
            & PREV_LOW[(prev1 & 15) as usize]
            & CURRENT_HIGH[(bytes[i] >> 4) as usize];
        let must_continue = at(i, 2) >= 0xe0 || at(i, 3) >= 0xf0;
        error |= special ^ if must_continue { 0x80 } else { 0 };
    }
    let n = bytes.len();
    let incomplete = (n >= 1 && bytes[n - 1] >= 0xc0)
        || (n >= 2 && bytes[n - 2] >= 0xe0)
        || (n >= 3 && bytes[n - 3] >= 0xf0);
    error == 0 && !incomplete
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_agree_with_core_on_every_sequence_of_up_to_three_bytes() {
        let mut buf = Vec::with_capacity(3);
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                buf.clear();
                buf.extend([a, b]);
                assert_eq!(
                    naive_lookup_check(&buf),
                    core::str::from_utf8(&buf).is_ok(),
                    "{buf:02x?}"
                );
                for c in 0..=255u8 {
                    buf.truncate(2);
                    buf.push(c);
                    assert_eq!(
                        naive_lookup_check(&buf),
                        core::str::from_utf8(&buf).is_ok(),
                        "{buf:02x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn tables_agree_with_core_on_four_byte_sequences() {
        // Leads F0..F7 with every continuation pattern that matters, plus
        // ASCII and lead bytes as fillers.
        let interesting: Vec<u8> = (0x80..=0xbf)
            .chain([0x00, 0x41, 0x7f, 0xc2, 0xe1, 0xf0])
            .collect();
        for a in 0xe0..=0xffu8 {
            for &b in &interesting {
                for &c in &interesting {
                    for &d in &interesting {
                        let buf = [a, b, c, d];
                        assert_eq!(
                            naive_lookup_check(&buf),
                            core::str::from_utf8(&buf).is_ok(),
                            "{buf:02x?}"
                        );
                    }
                }
            }
        }
    }
}
