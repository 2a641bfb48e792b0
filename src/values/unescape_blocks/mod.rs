//! String bodies decoded 64 bytes at a time: every escape of a block
//! decoded in place at once, and the block's bytes packed together by the
//! mask of those that stay. What text with an escape every few bytes needs
//! (Python's `json.dumps` writes every non-ASCII character as `\uXXXX`: a
//! word in French or German has one, one in Russian or Greek is made of
//! them), where a read that decoded one escape at a time
//! ([`super::string`]) took longer than cjson's whole decode of the
//! message.
//!
//! Only the `avx512` kernel has the instruction that packs a block's bytes
//! by a mask (`vpcompressb`, VBMI2); every other kernel decodes here
//! nothing, and the one-at-a-time loop takes the whole string.
//!
//! # A block
//!
//! The escapes that start in the block are its active backslashes (the
//! first, third, ... of a run, as stage 1 finds them:
//! [`crate::scan::escaped_bits`]). Each is decoded where it stands: its
//! UTF-8 bytes (one for a two-byte escape, one to three for a `\uXXXX`,
//! four for a surrogate pair) replace its first bytes, and the rest of it
//! is dropped from the mask of bytes kept. Each output byte is worked out
//! at every position of the block at once, as if an escape started there,
//! and kept where one does.
//!
//! A block ends before an escape that may run past it (the next block
//! starts with it), and the blocks stop, for the caller to go on one
//! escape at a time, before an escape they do not take (a lone surrogate,
//! or an invalid escape: garbage, whose output is unspecified) and at a
//! block where they do not pay:
//!
//! * **Few escapes.** A block of fewer than four escapes is left to the
//!   one-at-a-time loop: by blocks, a message with a line feed every 72
//!   bytes was decoded and read at about 0.8 times the speed, source code
//!   (an escape every 21 bytes) at 0.76 times.
//! * **Runs of characters from U+0800.** Chinese escaped throughout
//!   decodes faster by the groups of four of [`super::bmp_run`]: by
//!   blocks it was decoded and read at about 0.85 times their speed.
//!
//! (docs/benchmarks.md, "Escaped text by blocks", has the figures.)
//!
//! The callers try the blocks once a string (reads from the body's start,
//! the eager decoder where [`worth_trying`] finds escapes dense at its
//! first one): a text tends to be one kind throughout, and a string whose
//! start has few escapes is decoded one at a time.
//!
//! The eager decoder (`lazy = false`) decodes strings of text it has not
//! validated with them too ([`decode_string`]): there a block also ends
//! at the string's closing quote, and stops at a raw control byte, and
//! every escape it takes it has checked as validation would (hex digits,
//! surrogates in pairs, the eight short escapes).

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx512;

#[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri)))]
use crate::scan::{self, Kernel};

/// Whether this CPU decodes blocks here (the `avx512` kernel is active).
/// Never under Miri, which does not emulate `vpermb` and `vpcompressb`.
#[inline]
pub(crate) fn available() -> bool {
    #[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri)))]
    if let Ok(Kernel::Avx512) = scan::active_kernel() {
        return true;
    }
    false
}

/// A block with fewer escapes than this is left to the caller, whose loop
/// takes text with an escape every 16 bytes or more faster than a block
/// does (see the module docs).
const DENSE: u32 = 4;

/// Whether to decode the string of `text` whose first escape is at
/// `text[at]` by blocks ([`decode_string`]): this CPU has them
/// ([`available`]) and the 64 bytes from there hold [`DENSE`] backslashes
/// or more, so that the first block is likely to pay. Asked by the eager
/// decoder of every string with an escape, whose end it does not know
/// yet: a string with fewer escapes pays for this count only, not for a
/// block's setup. (Reads know the body, and try the blocks on every body
/// of a block or more: `string::unescape_to`. They go through a long
/// escape-free start 64 bytes at a time, and meet the count of escapes
/// at the first block that has one.)
#[inline]
pub(crate) fn worth_trying(text: &[u8], at: usize) -> bool {
    available()
        && text
            .get(at..at + 64)
            .is_some_and(|window| window.iter().filter(|&&b| b == b'\\').count() >= DENSE as usize)
}

/// Decodes `body[r..]` into `dst[w..]` block by block until its end, an
/// escape a block does not take or a block where blocks do not pay (see
/// the module docs); returns where reading and writing stopped, outside
/// any escape, for the caller to go on from. Writing never overtakes
/// reading (`w <= r` on entry stays so), and nothing is written past
/// `dst`'s end. Decodes nothing unless [`available`], or when `dst` is
/// shorter than `body`.
#[inline]
pub(crate) fn decode(body: &[u8], r: usize, dst: &mut [u8], w: usize) -> (usize, usize) {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if available() {
        // SAFETY: the `avx512` kernel is active, so the CPU has what it
        // requires: AVX-512F, BW, VBMI and VBMI2, and BMI1 and POPCNT.
        let token = unsafe { avx512::Avx512::new_unchecked() };
        let run = avx512::run::<false>(token, body, r, dst, w);
        return (run.r, run.w);
    }
    let _ = (body, dst);
    (r, w)
}

/// Where [`decode_string`] stopped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// Where reading stopped: outside any escape.
    pub r: usize,
    /// Where writing stopped.
    pub w: usize,
    /// Whether a byte read (not written) was 0x80 or more.
    pub high: bool,
    /// Whether it stopped for want of room: 64 bytes from `w`.
    pub room: bool,
}

/// [`decode`] of the string of a text that is not validated yet, from
/// `src[r]` (inside the string, outside any escape) on: up to its closing
/// quote or a raw control byte (an error), also stopping where `decode`
/// stops and where `dst` has no 64 bytes of room from `w` (`room`, for
/// the caller to make some and call again). Every escape it decodes is
/// valid; what it leaves, the caller checks. What the eager decoder
/// (`lazy = false`) decodes strings with.
#[inline]
pub(crate) fn decode_string(src: &[u8], r: usize, dst: &mut [u8], w: usize) -> Run {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if available() {
        // SAFETY: as in `decode`.
        let token = unsafe { avx512::Avx512::new_unchecked() };
        return avx512::run::<true>(token, src, r, dst, w);
    }
    let _ = (src, dst);
    Run {
        r,
        w,
        high: false,
        room: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Rng, rounds};
    use crate::values::string::{check_prefix_decoder, unescape_into, unescape_one_at_a_time};

    /// `body` decoded by blocks from its start, the rest one at a time,
    /// and by `unescape_into`, against one escape at a time throughout.
    fn check(body: &[u8]) {
        check_prefix_decoder(body, |body, dst| decode(body, 0, dst, 0));
    }

    /// Valid escapes of every kind, and plain pieces, one of each.
    const PIECES: &[&str] = &[
        r"\n",
        r#"\""#,
        r"\\",
        r"\/",
        r"\b",
        r"\f",
        r"\r",
        r"\t",
        r"\u0000",
        r"\u0041",
        r"\u007f",
        r"\u0080",
        r"\u00e9",
        r"\u00E8",
        r"\u03b3",
        r"\u043F",
        r"\u07ff",
        r"\u0800",
        r"\u4f60",
        r"\uFFFD",
        r"\uffff",
        r"\ud83d\ude00",
        r"\uDBFF\uDFFF",
        "a",
        " ",
        "caf",
        "é",
        "中",
        "0123456789abcdef",
    ];

    #[test]
    fn blocks_decode_as_one_at_a_time() {
        let mut rng = Rng::new(1);
        for _ in 0..rounds(20_000) {
            let n = rng.below(60);
            let body: String = (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect();
            check(body.as_bytes());
        }
    }

    #[test]
    fn an_escape_at_every_offset_of_a_block() {
        // Each escape, or two back to back, at every offset of the first
        // blocks, after plain bytes and before more, cut at every length.
        for esc in PIECES.iter().take(23) {
            for second in [r"\u00e9", r"\n", "x", r"\ud83d\ude00"] {
                for at in 0..140 {
                    let body = format!("{}{esc}{second}{}", "p".repeat(at), "q".repeat(70));
                    for len in [
                        at,
                        at + 1,
                        at + 3,
                        at + 5,
                        at + 6,
                        at + 7,
                        at + 12,
                        body.len(),
                    ] {
                        if let Some(cut) = body.as_bytes().get(..len) {
                            check(cut);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn runs_escaped_throughout_decode_by_groups_and_blocks() {
        // A run of escapes of characters from U+0800 (which blocks leave
        // to the groups of `bmp_run`) or below (which they take), long and
        // short, at every offset, between other text.
        for unit in ["\\u4f60", "\\u043f", "\\u00e9", "\\u0800", "\\u07ff"] {
            for n in [1, 3, 4, 7, 8, 9, 12, 25] {
                for at in 0..70 {
                    let body = format!(
                        "{}{}\\n{}x\\ud83d\\ude00{}",
                        "p".repeat(at),
                        unit.repeat(n),
                        "\\u4e16".repeat(n % 5),
                        unit.repeat(n / 2)
                    );
                    check(body.as_bytes());
                }
            }
        }
    }

    /// `body` as the string of a text, followed by `after`, decoded by
    /// [`decode_string`] from the body's start in as little room as it
    /// takes (made 64 bytes at a time, as it asks): it stops at the
    /// closing quote or before, at an escape or byte a check must see,
    /// and what it wrote, then the rest of the body one escape at a
    /// time, is the body's decoding; it saw a byte from 0x80 where the
    /// part it read has one.
    fn check_string(body: &[u8], after: &[u8]) {
        let src = [&b"\""[..], body, b"\"", after].concat();
        // Where the string ends: its first quote no backslash escapes (an
        // invalid piece may have cut an escape in two, and the body's last
        // backslash may escape the quote after it).
        let mut close = 1;
        while let Some(&b) = src.get(close).filter(|&&b| b != b'"') {
            close += if b == b'\\' { 2 } else { 1 };
        }
        let close = close.min(src.len());
        let body = &src[1..close];
        let (mut r, mut w, mut high) = (1, 0, false);
        let mut dst = Vec::new();
        loop {
            let run = decode_string(&src, r, &mut dst, w);
            assert!(
                run.w <= w + (run.r - r) && run.r <= close,
                "{run:?} {:?}",
                String::from_utf8_lossy(&src)
            );
            (r, w, high) = (run.r, run.w, high | run.high);
            if !run.room {
                break;
            }
            dst.resize(w + 64, 0);
        }
        dst.truncate(w);
        dst.extend_from_slice(&unescape_one_at_a_time(&body[r - 1..]));
        assert_eq!(
            dst,
            unescape_one_at_a_time(body),
            "{}",
            String::from_utf8_lossy(body)
        );
        assert_eq!(high, body[..r - 1].iter().any(|&b| b >= 0x80));
        if !available() {
            assert_eq!((r, w), (1, 0));
        }
    }

    #[test]
    fn strings_of_a_text_decode_up_to_their_end() {
        let mut rng = Rng::new(3);
        let afters: [&[u8]; 4] = [
            b"",
            b",\"x\\u00e9\\u00e9\\u00e9\\u00e9\"",
            b"}",
            b"\\u00e9\\u00e9\\u00e9\\u00e9",
        ];
        for _ in 0..rounds(20_000) {
            let n = rng.below(60);
            let mut body: Vec<u8> = (0..n)
                .flat_map(|_| PIECES[rng.below(PIECES.len())].bytes())
                .collect();
            if rng.one_in(4) && !body.is_empty() {
                // A raw control byte, or an invalid escape, somewhere.
                let at = rng.below(body.len());
                let bad: &[u8] = rng.pick(&[&b"\x01"[..], b"\\x", b"\\u12G4", b"\\ud800!"]);
                body.splice(at..at, bad.iter().copied());
            }
            check_string(&body, rng.pick(&afters));
        }
    }

    #[test]
    fn garbage_never_panics() {
        // Unvalidated bytes decode to something unspecified, but within
        // bounds, and the rest one at a time agrees with the whole.
        let alphabet = *b"\\u0dDfF8zx\"n ";
        let mut rng = Rng::new(2);
        for _ in 0..rounds(20_000) {
            let n = rng.below(150);
            let body: Vec<u8> = (0..n)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            let mut dst = vec![0u8; body.len() + 4];
            let (r, w) = decode(&body, 0, &mut dst, 0);
            assert!(w <= r && r <= body.len());
            let mut whole = Vec::new();
            unescape_into(&body, &mut whole);
        }
    }
}
