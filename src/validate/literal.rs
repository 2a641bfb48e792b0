//! `true`, `false` and `null`.

use super::ends_scalar;

/// Whether the literal whose first byte is `src[at]` is spelled out and
/// ends there.
#[inline(always)]
pub(crate) fn is_valid(src: &[u8], at: usize) -> bool {
    spelled_end(src, at).is_some_and(|end| ends_scalar(src, end))
}

/// The end of the literal whose first byte is `src[at]` if it is spelled
/// out (what follows is the caller's to check).
#[inline(always)]
pub(crate) fn spelled_end(src: &[u8], at: usize) -> Option<usize> {
    // Four bytes compared at once: `true`, `null`, or `false` after its `f`.
    let (from, word) = match src[at] {
        b't' => (at, *b"true"),
        b'f' => (at + 1, *b"alse"),
        _ => (at, *b"null"),
    };
    let end = from + 4;
    let got = src.get(from..end)?;
    let got = u32::from_le_bytes(got.try_into().expect("4 bytes"));
    (got == u32::from_le_bytes(word)).then_some(end)
}
