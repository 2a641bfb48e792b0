//! Escape sequences, checked string by string in document order.
//!
//! Stage 1 recorded the offset of every escaped character inside strings
//! (the byte after each active backslash), in increasing order. For a
//! string ending at `close`, the escapes still unchecked that lie before
//! `close` are exactly its own: escapes of earlier strings were consumed
//! when those strings were validated, and nothing between two strings can
//! hold a backslash without failing the walk first.

use crate::error::{Error, ErrorCode, Result};
use crate::values::string::hex4;

/// Checks the escapes `escapes[*next..]` that lie before `close` and
/// advances `*next` past them.
pub(crate) fn check(src: &[u8], escapes: &[u32], next: &mut usize, close: u32) -> Result<()> {
    while let Some(&at) = escapes.get(*next).filter(|&&e| e < close) {
        let at = at as usize;
        let backslash = at - 1;
        match src[at] {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
            b'u' => {
                let unit = hex4(src, at + 1)
                    .ok_or(Error::new(ErrorCode::InvalidUnicodeEscape, backslash))?;
                match unit {
                    0xd800..=0xdbff => {
                        // A high surrogate must be followed at once by a
                        // `\u` escape of a low one.
                        let low_at = at + 6;
                        if escapes.get(*next + 1) != Some(&(low_at as u32))
                            || src.get(low_at) != Some(&b'u')
                        {
                            return Err(Error::new(ErrorCode::LoneSurrogate, backslash));
                        }
                        let low = hex4(src, low_at + 1)
                            .ok_or(Error::new(ErrorCode::InvalidUnicodeEscape, low_at - 1))?;
                        if !(0xdc00..=0xdfff).contains(&low) {
                            return Err(Error::new(ErrorCode::LoneSurrogate, backslash));
                        }
                        *next += 1;
                    }
                    0xdc00..=0xdfff => return Err(Error::new(ErrorCode::LoneSurrogate, backslash)),
                    _ => {}
                }
            }
            _ => return Err(Error::new(ErrorCode::InvalidEscape, backslash)),
        }
        *next += 1;
    }
    Ok(())
}
