//! Escape sequences, checked string by string in document order.
//!
//! Stage 1 recorded the offset of escaped characters inside strings (the
//! byte after an active backslash), in increasing order: every one but
//! those it vouched for (the short escapes `\"` `\t` `\f` `\\` `\n` `\/`,
//! and a `\uXXXX` of a character that is no surrogate whose digits lie in
//! its 64-byte block), and of those the first of each string in each
//! block, which is how the walk knows that a string has escapes
//! (`crate::scan::generic`, `listed_escapes`). For a string ending at `close`, the escapes
//! still unchecked that lie before `close` are exactly its own: escapes
//! of earlier strings were consumed when those strings were validated,
//! and nothing between two strings can hold a backslash without failing
//! the walk first.

use crate::error::{Error, ErrorCode, Result};
use crate::values::string;

/// Checks the escapes `escapes[*next..]` that lie before `close` and
/// advances `*next` past them.
pub(crate) fn check(src: &[u8], escapes: &[u32], next: &mut usize, close: u32) -> Result<()> {
    while let Some(&at) = escapes.get(*next).filter(|&&e| e < close) {
        // A two-byte escape first, with one look-up: through
        // `string::escape` and its result, stage 2 took 1.7% and 1.9%
        // more instructions a pass on github-100k and twitter.json
        // (`benches/parse_insns.rs` under callgrind), and this way their
        // parse runs 1.010x and 1.016x as fast (`tools/ab_parse.sh`, 15
        // rounds, at 1367aa3). Indexed: `at` is a byte after a backslash
        // inside the text.
        if string::is_short_escape(src[at as usize]) {
            *next += 1;
            continue;
        }
        // Then a `\uXXXX` of a character that is no surrogate
        // (`string::plain_unicode`), which stage 1 lists where it is a
        // string's first escape in a block or its digits run into the
        // next block: a text escaped throughout has about two a block.
        if string::plain_unicode(src, at as usize).is_some() {
            *next += 1;
            continue;
        }
        let backslash = at as usize - 1;
        // Indexed (an escaped byte follows its backslash in the text), not
        // read with `get`: with no panic left in this function LLVM laid
        // out the walk that calls it otherwise, and the full parse took
        // 2-5% more instructions on the corpus (`benches/parse_insns.rs`:
        // citm_catalog 4.53 -> 4.65 a byte, canada 9.35 -> 9.47).
        match string::escape(&src[backslash..]) {
            Ok(e) => {
                if e.len == 12 {
                    // The pair's second backslash is the next escape.
                    if escapes.get(*next + 1) != Some(&(at + 6)) {
                        return Err(Error::new(ErrorCode::LoneSurrogate, backslash));
                    }
                    *next += 1;
                }
            }
            Err(bad) => return Err(Error::new(bad.code, backslash + usize::from(bad.at))),
        }
        *next += 1;
    }
    Ok(())
}
