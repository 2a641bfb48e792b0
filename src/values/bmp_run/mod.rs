//! Runs of `\uXXXX` escapes of characters from U+0800 to U+FFFF, decoded
//! four at a time with SIMD: what a text in Chinese, Japanese or Korean
//! is made of when escaped throughout, as Python's `json.dumps` writes
//! non-ASCII by default. Checked and decoded one at a time
//! ([`super::string`]), the escaped chat request of
//! `benches/lua_bench.lua` ("cjk-escaped 9k") read slower than cjson,
//! which decodes each escape once where qjson checks it at the parse and
//! decodes it at the read; by groups, a read of every message of the
//! 4.5 KB request takes 63 instructions less an escape
//! (docs/benchmarks.md, "Escaped text", has the command).
//!
//! The x86 kernels (`avx2`, `avx512`) use `avx2.rs`, the `neon` kernel
//! `neon.rs`; the `scalar` kernel, or none usable, decodes nothing here
//! and leaves the run to the one-at-a-time loop, which also takes the
//! escapes a group of four does not cover (fewer than four left, another
//! kind of escape, a character below U+0800 or a surrogate).

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx2;
#[cfg(target_arch = "aarch64")]
mod neon;

#[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64"))]
use crate::scan::{self, Kernel};

/// Bytes a group reads from its first backslash: four escapes of six
/// bytes, the second half loaded as 16 bytes from the third escape.
#[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64"))]
const GROUP_READ: usize = 28;

/// Bytes from where a group writes to the end of its stores: its twelve
/// UTF-8 bytes, the second half's six stored as eight.
pub(crate) const GROUP_WRITE: usize = 14;

/// Decodes the whole groups of four such escapes that start at
/// `body[r]` into `dst[w..]`, three bytes each; returns where reading and
/// writing stop (`(r, w)` when the first group is not one). A group is
/// decoded while `dst` has [`GROUP_WRITE`] bytes from `w`; writing never
/// overtakes reading (`w <= r` on entry stays so). Every escape of a
/// group is a valid one, of a character (no surrogate) from U+0800 up.
#[inline]
pub(crate) fn decode(body: &[u8], r: usize, dst: &mut [u8], w: usize) -> (usize, usize) {
    // No group unless four backslashes lie six bytes apart from `r`: a
    // word of three escapes or fewer between ASCII bytes (Chinese with
    // ASCII punctuation) entered the kernel's code, a call and its
    // constants, for nothing at every word, and read at half cjson's
    // speed (`luajit benches/trailing.lua`).
    if !matches!(body.get(r..r + 19), Some(s) if s[0] == b'\\' && s[6] == b'\\'
                 && s[12] == b'\\' && s[18] == b'\\')
    {
        return (r, w);
    }
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if let Ok(Kernel::Avx2 | Kernel::Avx512) = scan::active_kernel() {
        // SAFETY: active_kernel() only returns kernels this CPU supports,
        // and both x86 kernels require AVX2.
        let token = unsafe { avx2::Avx2::new_unchecked() };
        return avx2::run(token, body, r, dst, w);
    }
    #[cfg(target_arch = "aarch64")]
    if let Ok(Kernel::Neon) = scan::active_kernel() {
        return neon::run(body, r, dst, w);
    }
    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = (body, dst);
    (r, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::values::string::check_prefix_decoder;

    /// What [`decode`] gives for the groups at the start of `body`, then
    /// the rest decoded one at a time, and what `unescape_into` (which
    /// takes groups where a run starts) gives, against one escape at a
    /// time throughout.
    fn check(body: &[u8]) {
        check_prefix_decoder(body, |body, dst| decode(body, 0, dst, 0));
    }

    fn escaped(units: &[u32]) -> Vec<u8> {
        units
            .iter()
            .flat_map(|u| format!("\\u{u:04x}").into_bytes())
            .collect()
    }

    #[test]
    fn groups_decode_as_one_at_a_time() {
        // Every kind of unit in every position of a group, upper and lower
        // case digits, runs cut at every length.
        let units = [
            0x41, 0x7f, 0x80, 0x7ff, 0x800, 0x4f60, 0x597d, 0xd7ff, 0xd800, 0xdbff, 0xdc00, 0xdfff,
            0xe000, 0xfffd, 0xffff,
        ];
        for &u in &units {
            for pos in 0..6 {
                let mut run = [0x4e16; 6];
                run[pos] = u;
                for len in 0..=run.len() {
                    let mut body = escaped(&run[..len]);
                    check(&body);
                    body.extend_from_slice(b"tail");
                    check(&body);
                    check(&body.to_ascii_uppercase());
                }
            }
        }
    }

    #[test]
    fn groups_stop_at_anything_else() {
        // Another escape, or a byte that breaks the pattern, at every
        // offset of a long run (what follows decodes one at a time).
        let run = escaped(&[0x4f60; 12]);
        for at in 0..run.len() {
            for b in [b'a', b'\\', b'u', b'"', b'n', 0xe4] {
                let mut body = run.clone();
                body[at] = b;
                check(&body);
            }
            let mut body = run.clone();
            body.splice(at..at, *b"\\n");
            check(&body);
        }
    }

    #[test]
    fn garbage_never_panics() {
        // Unvalidated bytes decode to something unspecified, but within
        // bounds: every group of 28 bytes drawn from the pattern's bytes.
        let alphabet = *b"\\u0dDfF8zx";
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            let body: Vec<u8> = (0..36)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            let mut dst = vec![0u8; body.len() + 4];
            let (r, w) = decode(&body, 0, &mut dst, 0);
            assert!(w <= r && r <= body.len());
        }
    }
}
