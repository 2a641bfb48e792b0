//! `true`, `false` and `null`.

use super::ends_scalar;

/// Whether the literal whose first byte is `src[at]` is spelled out and
/// ends there.
#[inline(always)]
pub(crate) fn is_valid(src: &[u8], at: usize) -> bool {
    // Four bytes compared at once: `true`, `null`, or `false` after its `f`.
    let (from, word) = match src[at] {
        b't' => (at, *b"true"),
        b'f' => (at + 1, *b"alse"),
        _ => (at, *b"null"),
    };
    let end = from + 4;
    let Some(got) = src.get(from..end) else {
        return false;
    };
    let got = u32::from_le_bytes(got.try_into().expect("4 bytes"));
    got == u32::from_le_bytes(word) && ends_scalar(src, end)
}
