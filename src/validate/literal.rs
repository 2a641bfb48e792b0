//! `true`, `false` and `null`.

use super::ends_scalar;
use crate::error::{Error, ErrorCode, Result};

/// Checks that the literal starting with `first` at `src[at]` is spelled
/// out and ends there.
#[inline(always)]
pub(super) fn check(src: &[u8], at: usize, first: u8) -> Result<()> {
    let word: &[u8] = match first {
        b't' => b"true",
        b'f' => b"false",
        _ => b"null",
    };
    let end = at + word.len();
    if src.get(at..end) == Some(word) && ends_scalar(src, end) {
        Ok(())
    } else {
        Err(Error::new(ErrorCode::InvalidLiteral, at))
    }
}
