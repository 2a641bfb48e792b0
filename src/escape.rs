//! Escaping string contents for the encoder (`lua/qjson/encode.lua`),
//! byte for byte as lua-cjson 2.1 writes them.
//!
//! cjson escapes `"` and `\` with a backslash, the control bytes that have
//! a short form (`\b \f \n \r \t`) with it, every other byte below 0x20
//! and DEL (0x7f) as `\u00XX`, and `/` as `\/` unless told not to. Every
//! other byte, UTF-8 or not, is copied as is. Doing this natively keeps the
//! encoder's per-string cost at one FFI call instead of a Lua pattern scan
//! (which LuaJIT cannot compile) plus a `gsub`.

/// The longest escape of one byte (`\u00XX`).
pub const MAX_ESCAPE: usize = 6;

/// What one source byte becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Copied as is.
    Plain,
    /// A backslash and this byte.
    Short(u8),
    /// `\u00XX`.
    Unicode,
    /// `/`: `\/` or `/`, as asked.
    Slash,
}

const fn classes() -> [Class; 256] {
    let mut table = [Class::Plain; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = Class::Unicode;
        byte += 1;
    }
    table[0x7f] = Class::Unicode;
    table[b'\x08' as usize] = Class::Short(b'b');
    table[b'\x0c' as usize] = Class::Short(b'f');
    table[b'\n' as usize] = Class::Short(b'n');
    table[b'\r' as usize] = Class::Short(b'r');
    table[b'\t' as usize] = Class::Short(b't');
    table[b'"' as usize] = Class::Short(b'"');
    table[b'\\' as usize] = Class::Short(b'\\');
    table[b'/' as usize] = Class::Slash;
    table
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether any of the 8 bytes in `word` may need escaping: below 0x20,
/// `"`, `\`, `/` or DEL. False positives are fine (the byte loop decides);
/// a false negative is impossible because each test is exact per byte
/// apart from carries, which only ever add positives.
fn may_need_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    below_space
        | has_zero(word ^ (ONES * u64::from(b'"')))
        | has_zero(word ^ (ONES * u64::from(b'\\')))
        | has_zero(word ^ (ONES * u64::from(b'/')))
        | has_zero(word ^ (ONES * 0x7f))
        != 0
}

/// Writes the escaped form of a prefix of `src` into `dst` and returns
/// `(consumed, written)`: the longest prefix whose escaped form fits, so
/// an escape is never cut. `dst.len() >= MAX_ESCAPE` guarantees progress
/// on a non-empty `src`.
pub fn escape(src: &[u8], escape_slash: bool, dst: &mut [u8]) -> (usize, usize) {
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        // Copy the run of bytes that need nothing, 8 at a time where the
        // room allows.
        let mut run = read;
        while run + 8 <= src.len() && written + (run - read) + 8 <= dst.len() {
            let word = u64::from_le_bytes(src[run..run + 8].try_into().expect("8 bytes"));
            if may_need_escape(word) {
                break;
            }
            run += 8;
        }
        while run < src.len()
            && written + (run - read) < dst.len()
            && escaped_form(src[run], escape_slash).1 == 1
        {
            run += 1;
        }
        let plain = run - read;
        dst[written..written + plain].copy_from_slice(&src[read..run]);
        written += plain;
        read = run;
        if read == src.len() {
            break;
        }
        let (escaped, len) = escaped_form(src[read], escape_slash);
        // A byte copied as is: the run stopped because dst is full.
        if len == 1 || written + len > dst.len() {
            break;
        }
        dst[written..written + len].copy_from_slice(&escaped[..len]);
        written += len;
        read += 1;
    }
    (read, written)
}

/// Appends `"`, the escaped form of all of `src` and `"` to `out`: a JSON
/// string for the native encoder (`crate::lua_api::encode`), which writes
/// into a growable buffer.
///
/// Sixteen bytes at a time, each chunk tested at once for bytes that may
/// need an escape ([`specials`]). Most strings the encoder meets are short
/// keys and values with nothing to escape: one chunk, gathered from at
/// most two overlapping loads ([`partial_chunk`], never reading past
/// `src`), tested, and stored whole with its quotes into room reserved
/// beforehand, with no loop and no call to `memcpy`. Longer strings go
/// through [`escape_from`], kept out of line so that this path saves no
/// registers it does not use.
#[inline]
pub fn escape_into(src: &[u8], escape_slash: bool, out: &mut Vec<u8>) {
    let n = src.len();
    if n > CHUNK {
        out.push(b'"');
        return escape_from(src, 0, escape_slash, out);
    }
    // The string, its quotes, and slack for a whole-chunk store.
    out.reserve(CHUNK + 2);
    let chunk = match src.first_chunk::<CHUNK>() {
        Some(chunk) => *chunk,
        None => partial_chunk(src),
    };
    let special = specials_of(&chunk, n);
    let start = out.len();
    // SAFETY: the stores end at start + 1 + CHUNK, within the room
    // reserved above; the length then covers the quote and the plain
    // prefix of src stored (all n bytes and the closing quote when the
    // chunk is plain).
    unsafe {
        let dst = out.as_mut_ptr().add(start);
        dst.write(b'"');
        dst.add(1).cast::<[u8; CHUNK]>().write_unaligned(chunk);
        if special == 0 {
            dst.add(1 + n).write(b'"');
            out.set_len(start + n + 2);
            return;
        }
        let plain = special.trailing_zeros() as usize;
        out.set_len(start + 1 + plain);
        escape_from(src, plain, escape_slash, out);
    }
}

/// Appends the escaped form of `src[read..]` and the closing quote to
/// `out`, which holds the opening quote and the escaped `src[..read]`:
/// [`escape_into`] for strings longer than a chunk, and for a short one
/// from its first flagged byte on.
///
/// Room is reserved for the rest as it is, its closing quote, a chunk's
/// slack and what [`ESCAPE_GROWTH`] escapes add, so each plain chunk is
/// stored whole with no check and each flagged byte's escape written in
/// place (or the byte copied: a `/` kept as asked, a byte flagged in
/// error), the bytes between a chunk's flagged bytes one by one, the
/// lengths kept in registers; the room is reserved again only when
/// escapes have used up their share. Storing chunk by chunk through the
/// vector's length, with a reserve per chunk, made a 1 MB chat request
/// (a base64 image, a `/` every 64 bytes or so) encode at 0.9x cjson's
/// speed on an AMD EPYC; with a reserve per escape, and a chunk loaded
/// for each, strings of `\"` or `\\` encoded at 0.54-0.58x cjson's on an
/// Intel Xeon, and now at 2.0x (`luajit benches/trailing.lua`, "Where
/// qjson trailed cjson" in docs/benchmarks.md).
#[inline(never)]
fn escape_from(src: &[u8], mut read: usize, escape_slash: bool, out: &mut Vec<u8>) {
    let forms = &FORMS[usize::from(escape_slash)];
    loop {
        out.reserve(src.len() - read + 1 + CHUNK + ESCAPE_GROWTH);
        let dst = out.as_mut_ptr();
        let mut len = out.len();
        // What escapes have added since the reserve: at most ESCAPE_GROWTH.
        let mut grown = 0;
        // SAFETY: the room reserved holds every byte of `src` from `read`
        // on, the closing quote, a chunk past them and ESCAPE_GROWTH
        // more. `len` is the reserve's length plus the bytes of `src`
        // read since and `grown`: a chunk store (CHUNK bytes) starts at
        // most that many bytes past the first `len`, and an escape's
        // store (ESCAPE_STORE bytes, for a byte of `src` not yet read)
        // too, with `grown` at most ESCAPE_GROWTH - 5 before it (the
        // bytes escaped in a turn are counted before the turn), so that
        // it ends at most ESCAPE_STORE - 6 bytes into the quote's and the
        // chunk's room (asserted beside ESCAPE_STORE); `grown` is
        // ESCAPE_GROWTH at most after it. The length covers the bytes
        // stored so far.
        unsafe {
            loop {
                let rest = src.get(read..).unwrap_or_default();
                let (chunk, m) = match rest.first_chunk::<CHUNK>() {
                    Some(chunk) => (*chunk, CHUNK),
                    None if rest.is_empty() => {
                        dst.add(len).write(b'"');
                        out.set_len(len + 1);
                        return;
                    }
                    None => (partial_chunk(rest), rest.len()),
                };
                let special = specials_of(&chunk, m);
                dst.add(len).cast::<[u8; CHUNK]>().write_unaligned(chunk);
                if special == 0 {
                    len += m;
                    read += m;
                    continue;
                }
                let plain = special.trailing_zeros() as usize;
                len += plain;
                read += plain;
                // The flagged bytes of the chunk, and the bytes between
                // them, byte by byte (JSON inside JSON has a `\"` every
                // few bytes); the chunk after the last of them is loaded
                // again.
                let last = (u32::BITS - 1 - special.leading_zeros()) as usize;
                let end = read + last - plain + 1;
                if grown + 5 * (end - read) > ESCAPE_GROWTH {
                    break;
                }
                while read < end {
                    let written = write_escape(src[read], forms, dst.add(len));
                    grown += written - 1;
                    len += written;
                    read += 1;
                }
            }
            out.set_len(len);
        }
    }
}

/// What escapes may add to a string (each at most 5 bytes: `\u00XX` for
/// one byte) between two reserves of [`escape_from`]: a reserve for every
/// 64 escapes or more.
const ESCAPE_GROWTH: usize = 5 * 64;

/// Bytes [`escape_into`] tests at once.
const CHUNK: usize = 16;

/// The bytes of `src` (shorter than a chunk) at the start of a chunk,
/// zeros after them, from two overlapping loads of 8, 4 or 1 bytes.
#[inline(always)]
fn partial_chunk(src: &[u8]) -> [u8; CHUNK] {
    let n = src.len();
    let load8 = |at: usize| match src.get(at..at + 8) {
        Some(w) => u64::from_le_bytes(w.try_into().unwrap_or_default()),
        None => 0,
    };
    let load4 = |at: usize| match src.get(at..at + 4) {
        Some(w) => u64::from(u32::from_le_bytes(w.try_into().unwrap_or_default())),
        None => 0,
    };
    let byte = |at: usize| u64::from(src.get(at).copied().unwrap_or(0));
    // The two loads overlap (or meet) in the middle; bytes both put in
    // place are the same, so OR-ing them is exact.
    let (low, high) = if n >= 8 {
        // The last 8 bytes, shifted so that only those past the first 8
        // stay (none when n is 8).
        let tail = load8(n - 8)
            .checked_shr(8 * (CHUNK - n) as u32)
            .unwrap_or(0);
        (load8(0), tail)
    } else if n >= 4 {
        (load4(0) | load4(n - 4) << (8 * (n - 4)), 0)
    } else if n > 0 {
        (
            byte(0) | byte(n / 2) << (8 * (n / 2)) | byte(n - 1) << (8 * (n - 1)),
            0,
        )
    } else {
        (0, 0)
    };
    let mut chunk = [0; CHUNK];
    let (first, second) = chunk.split_at_mut(8);
    first.copy_from_slice(&low.to_le_bytes());
    second.copy_from_slice(&high.to_le_bytes());
    chunk
}

/// What each byte becomes in a JSON string, packed in a word: the bytes
/// of its form from the lowest up (2 for a short escape, 6 for `\u00XX`,
/// the byte itself for a `/` kept as asked or a byte that needs no
/// escape) and their count in the top byte. Indexed by whether `/` is
/// escaped, then by the byte.
///
/// A word, not a match on the byte's class: [`write_escape`] stores it
/// whole and adds its count, with no branch. Text whose escapes come every
/// few bytes at no fixed distance (JSON inside a string, HTML) made the
/// match's branches mispredict at about every escape: tool-call arguments
/// encoded at 0.94-0.97x cjson's speed and a line of HTML at 0.83-0.86x on
/// an AMD EPYC (Zen 5), and at 1.27-1.30x and 1.23x this way (`luajit
/// benches/trailing.lua`; docs/benchmarks.md, "Where qjson trailed
/// cjson").
static FORMS: [[u64; 256]; 2] = [forms(false), forms(true)];

const fn forms(escape_slash: bool) -> [u64; 256] {
    let classes = classes();
    let mut table = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let (bytes, len) = match classes[b] {
            Class::Short(c) => ([b'\\', c, 0, 0, 0, 0], 2),
            Class::Unicode => ([b'\\', b'u', b'0', b'0', HEX[b >> 4], HEX[b & 15]], 6),
            Class::Slash if escape_slash => ([b'\\', b'/', 0, 0, 0, 0], 2),
            Class::Slash | Class::Plain => ([b as u8, 0, 0, 0, 0, 0], 1),
        };
        let mut word = (len as u64) << 56;
        let mut i = 0;
        while i < len {
            word |= (bytes[i] as u64) << (8 * i);
            i += 1;
        }
        table[b] = word;
        b += 1;
    }
    table
}

/// What byte `b` becomes in a JSON string, in the first bytes of the
/// array, and how many ([`FORMS`]).
#[inline(always)]
fn escaped_form(b: u8, escape_slash: bool) -> ([u8; MAX_ESCAPE], usize) {
    let word = FORMS[usize::from(escape_slash)][usize::from(b)];
    let mut bytes = [0; MAX_ESCAPE];
    bytes.copy_from_slice(&word.to_le_bytes()[..MAX_ESCAPE]);
    (bytes, (word >> 56) as usize)
}

/// How many bytes [`write_escape`] stores: its form's word, whole.
const ESCAPE_STORE: usize = 8;

// An escape's store ends within the room `escape_from` reserves past the
// string for its closing quote and a chunk (see its Safety comment).
const _: () = assert!(ESCAPE_STORE - 6 <= 1 + CHUNK);

/// Writes what byte `b` (one [`specials`] flagged) becomes at `dst`, by
/// `forms` (a table of [`FORMS`]), and returns its length. Stores
/// [`ESCAPE_STORE`] bytes whatever the length.
///
/// # Safety
/// `dst` is valid for writing `ESCAPE_STORE` bytes.
#[inline(always)]
unsafe fn write_escape(b: u8, forms: &[u64; 256], dst: *mut u8) -> usize {
    let word = forms[usize::from(b)];
    // SAFETY: ESCAPE_STORE writable bytes at dst (the caller's contract).
    unsafe {
        dst.cast::<[u8; ESCAPE_STORE]>()
            .write_unaligned(word.to_le_bytes())
    };
    (word >> 56) as usize
}

/// [`specials`] of the first `len` bytes of `chunk`, those of the string
/// (`len <= CHUNK`: the shift stays below 32, for the empty string too).
#[inline(always)]
fn specials_of(chunk: &[u8; CHUNK], len: usize) -> u32 {
    specials(chunk) & ((1u32 << len) - 1)
}

/// Bit `k` set when byte `k` of `chunk` may need an escape: below 0x20,
/// `"`, `\`, `/` or DEL. Exact for the lowest flagged byte; a byte above
/// it may be flagged in error (the word version's borrows), which
/// [`escaped_form`] then copies as is. SSE2, part of every x86-64 CPU.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn specials(chunk: &[u8; CHUNK]) -> u32 {
    use core::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of every x86-64 target; the unaligned load
    // reads the chunk's 16 bytes.
    let (flagged, below_0x20_signed, high) = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let is = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
        let flagged = _mm_or_si128(
            _mm_or_si128(is(b'"'), is(b'\\')),
            _mm_or_si128(is(b'/'), is(0x7f)),
        );
        // Signed: bytes above 0x7F are below 0x20 too, masked out below.
        let lt = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
        (
            _mm_movemask_epi8(flagged) as u32,
            _mm_movemask_epi8(lt) as u32,
            _mm_movemask_epi8(v) as u32,
        )
    };
    flagged | (below_0x20_signed & !high)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn specials(chunk: &[u8; CHUNK]) -> u32 {
    specials_by_word(chunk)
}

/// [`specials`] in two `u64` words, for targets without SSE2 (and tested
/// against it on x86-64).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn specials_by_word(chunk: &[u8; CHUNK]) -> u32 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let flags = |w: u64| {
        (w.wrapping_sub(ONES * 0x20) & !w & HIGHS)
            | has_zero(w ^ (ONES * u64::from(b'"')))
            | has_zero(w ^ (ONES * u64::from(b'\\')))
            | has_zero(w ^ (ONES * u64::from(b'/')))
            | has_zero(w ^ (ONES * 0x7f))
    };
    // Bit 8k + 7 becomes bit k.
    let gather = |f: u64| ((f >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32;
    let (lo, hi) = chunk.split_at(8);
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    gather(flags(word(lo))) | gather(flags(word(hi))) << 8
}

/// The same escaping written out one byte at a time, as lua-cjson's table
/// reads: the definition the unit tests and the `escape` fuzz target hold
/// [`escape`] to.
#[doc(hidden)]
pub fn escape_reference(src: &[u8], escape_slash: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in src {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' if escape_slash => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..0x20 | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The escaped form of `src` through a destination of `room` bytes at
    /// a time, as the encoder's loop calls it.
    fn escaped(src: &[u8], escape_slash: bool, room: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = 0;
        let mut dst = vec![0; room];
        while at < src.len() {
            let (read, written) = escape(&src[at..], escape_slash, &mut dst);
            assert!(read > 0, "no progress at {at} with room {room}");
            out.extend_from_slice(&dst[..written]);
            at += read;
        }
        out
    }

    #[test]
    fn matches_cjson_escapes() {
        assert_eq!(
            escaped(b"a\"b\\c/d\x01\x7f\n", true, 64),
            b"a\\\"b\\\\c\\/d\\u0001\\u007f\\n"
        );
        assert_eq!(escaped(b"http://x/", false, 64), b"http://x/");
        assert_eq!(
            escaped("h\u{e9}\u{1F600}".as_bytes(), true, 64),
            "h\u{e9}\u{1F600}".as_bytes()
        );
    }

    #[test]
    fn every_byte_in_every_position_and_room() {
        // Within the first chunk, a later whole one and a partial last one.
        for byte in 0..=255u8 {
            for position in 0..40 {
                let mut src = vec![b'x'; 39];
                src.insert(position, byte);
                for slash in [true, false] {
                    let want = escape_reference(&src, slash);
                    for room in [MAX_ESCAPE, 7, 8, 9, 15, 16, 17, 200] {
                        assert_eq!(
                            escaped(&src, slash, room),
                            want,
                            "{byte} at {position}, {room}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn escape_into_matches_the_reference_on_strings_dense_in_escapes() {
        // Chunks with several flagged bytes (escaped byte by byte), and
        // strings long enough that their escapes outgrow a reserve's
        // share (ESCAPE_GROWTH) several times, at every density.
        let alphabet = b"\"\\/\x00\x01\x1f\x7fab\xc3\xa9 ";
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for round in 0..crate::testing::rounds(3_000) {
            let len = round % 700;
            // One byte in `1 << density` drawn from the alphabet, the
            // others plain.
            let density = round % 4;
            let src: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if seed >> 60 & ((1 << density) - 1) == 0 {
                        alphabet[(seed % alphabet.len() as u64) as usize]
                    } else {
                        b'x'
                    }
                })
                .collect();
            for slash in [true, false] {
                let mut out = b"kept".to_vec();
                escape_into(&src, slash, &mut out);
                let mut want = b"kept\"".to_vec();
                want.extend(escape_reference(&src, slash));
                want.push(b'"');
                assert_eq!(out, want, "round {round}");
            }
        }
    }

    #[test]
    fn escape_into_matches_the_reference() {
        // Miri, which interprets every step, takes the ends and the middle.
        let positions: Vec<usize> = if cfg!(miri) {
            vec![0, 1, 10, 18, 19]
        } else {
            (0..20).collect()
        };
        for slash in [true, false] {
            let mut out = b"kept".to_vec();
            escape_into(b"", slash, &mut out);
            assert_eq!(out, b"kept\"\"", "the empty string");
        }
        for byte in 0..=255u8 {
            for &position in &positions {
                let mut src = vec![b'x'; 19];
                src.insert(position, byte);
                for slash in [true, false] {
                    let mut out = b"kept".to_vec();
                    escape_into(&src[..position + 1], slash, &mut out);
                    escape_into(&src, slash, &mut out);
                    let mut want = b"kept\"".to_vec();
                    want.extend(escape_reference(&src[..position + 1], slash));
                    want.extend(b"\"\"");
                    want.extend(escape_reference(&src, slash));
                    want.push(b'"');
                    assert_eq!(out, want, "{byte} at {position}");
                }
            }
        }
    }

    #[test]
    fn specials_flag_the_first_special_byte_exactly() {
        let alphabet = b"ab\"\\/\x00\x1f\x20\x7f\x80\xff~\n";
        let classes = classes();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..crate::testing::rounds(50_000) {
            let mut chunk = [0u8; CHUNK];
            for b in &mut chunk {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = alphabet[(seed % alphabet.len() as u64) as usize];
            }
            let first = chunk
                .iter()
                .position(|&b| classes[b as usize] != Class::Plain)
                .map_or(32, |k| k as u32);
            for special in [specials(&chunk), specials_by_word(&chunk)] {
                assert_eq!(special.trailing_zeros().min(32), first, "{chunk:?}");
                // No byte that needs an escape is missed.
                for (k, &b) in chunk.iter().enumerate() {
                    if classes[b as usize] != Class::Plain {
                        assert_ne!(special & (1 << k), 0, "{chunk:?} at {k}");
                    }
                }
            }
        }
    }

    #[test]
    fn partial_chunks_are_the_bytes_then_zeros() {
        let src: Vec<u8> = (1..=16).collect();
        for n in 0..CHUNK {
            let mut want = [0u8; CHUNK];
            want[..n].copy_from_slice(&src[..n]);
            assert_eq!(partial_chunk(&src[..n]), want, "{n}");
        }
    }

    #[test]
    fn escape_into_long_and_dense_strings() {
        for len in [15, 16, 17, 31, 32, 33, 100, 1000] {
            for text in [
                vec![b'a'; len],
                vec![1u8; len],
                (0..len)
                    .map(|i| b"a/\"\\\n\x7f\xc3\xa9xyz"[i % 11])
                    .collect(),
            ] {
                for slash in [true, false] {
                    let mut out = Vec::new();
                    escape_into(&text, slash, &mut out);
                    let mut want = b"\"".to_vec();
                    want.extend(escape_reference(&text, slash));
                    want.push(b'"');
                    assert_eq!(out, want);
                }
            }
        }
    }

    #[test]
    fn random_text_matches_the_reference() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 100) as usize;
            let src: Vec<u8> = (0..len)
                .map(|i| {
                    let r = seed.rotate_left(i as u32 * 5) as u8;
                    // Mostly plain text, with escapes sprinkled in.
                    if r.is_multiple_of(7) {
                        r % 0x30
                    } else {
                        b'a' + r % 26
                    }
                })
                .collect();
            for room in [MAX_ESCAPE, 11, 64, 1000] {
                assert_eq!(escaped(&src, true, room), escape_reference(&src, true));
                assert_eq!(escaped(&src, false, room), escape_reference(&src, false));
            }
        }
    }
}
