//! The walk of eager decode: the grammar of [`crate::validate`] and the
//! string checks of stage 1, read straight from the bytes, each value
//! handed to the [`Stack`] as it completes.
//!
//! What stage 1 checks over every byte is checked where it can matter:
//! inside strings, raw control bytes and UTF-8 (a string with a byte of
//! 0x80 or more is checked as a whole); outside strings any byte that is
//! not whitespace, structure or the start of a number or literal fails
//! the grammar, as its stage-1 entry (a scalar start) would. Escapes are
//! checked by the rules validation checks them with
//! (`values::string::escape`) as they are decoded; numbers and literals
//! through validation's number and literal checks. Strings
//! and whitespace are searched a chunk of bytes at a time ([`super::bytes`]).
//!
//! Bytes are read with `get`, a read past the text giving 0, which
//! nothing accepts; so nothing here can panic or read outside the text:
//! this code runs between calls into the sink (Lua's API).

use super::bytes::{Body, decode_escaped, scan_string, skip_space};
use super::{CHUNK, Flow, Stack, Stop};
use crate::scan;
use crate::validate::{ends_scalar, literal};
use crate::values::number;

/// An open container: the innermost is [`decode`]'s `cur`, the ones
/// around it wait in [`Scratch::open`].
#[derive(Clone, Copy, Debug)]
struct Open {
    /// Its closing byte (0 for the root, which is no container).
    close: u8,
    /// Its values so far.
    count: u32,
    /// How many of them are in its table.
    stored: u32,
    /// Where its current chunk's keys start in [`Scratch::keys`].
    keys_from: u32,
    /// Whether those keys are all different.
    distinct: bool,
    /// One bit per hash of each of those keys (see [`key_hash`]).
    seen: [u64; 4],
}

impl Open {
    /// A container closed by `close` whose first chunk's keys start at
    /// `keys_from`, with nothing in it yet.
    fn new(close: u8, keys_from: u32) -> Open {
        Open {
            close,
            count: 0,
            stored: 0,
            keys_from,
            distinct: true,
            seen: [0; 4],
        }
    }
}

/// The walk's reusable memory.
#[derive(Default, Debug)]
pub(super) struct Scratch {
    open: Vec<Open>,
    /// The keys of the open objects' current chunks, while they are all
    /// different: hash, offset and length in the text.
    keys: Vec<(u64, u32, u32)>,
    /// A string decoded.
    decoded: Vec<u8>,
}

impl Scratch {
    /// Bytes of heap held for the next decode.
    pub(super) fn retained_bytes(&self) -> usize {
        self.open.capacity() * size_of::<Open>()
            + self.keys.capacity() * 16
            + self.decoded.capacity()
    }
}

/// A hash of a key (no escapes): equal keys hash alike. From the key's
/// length and its first and last two bytes, mixed by one multiplication;
/// its top eight bits pick the key's bit in its object's `seen` filter.
#[inline(always)]
fn key_hash(key: &[u8]) -> u64 {
    let byte = |k: usize| u64::from(key.get(k).copied().unwrap_or(0));
    let n = key.len();
    let ends =
        byte(0) | byte(1) << 8 | byte(n.wrapping_sub(2)) << 16 | byte(n.wrapping_sub(1)) << 24;
    (ends | (n as u64) << 32).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The end and value of the number starting at `i` that the short
/// integer path does not take (fractions, exponents, long integers), or
/// `None` when it is invalid. Out of line, as most numbers are short: the
/// walk's hot loop stays smaller.
#[cold]
#[inline(never)]
fn long_number(src: &[u8], i: usize) -> Option<(usize, f64)> {
    let end = number::number_end(src, i).filter(|&end| ends_scalar(src, end))?;
    Some((end, number::to_f64(src.get(i..end)?)))
}

/// Strings this long or longer are checked as UTF-8 by the SIMD kernel's
/// checker (`scan::is_utf8`), shorter ones by `core::str::from_utf8`,
/// which is cheaper for a few characters but goes a character at a time
/// through text in other scripts: `tools/lua_insns.sh cjk-eager` (a chat
/// request in Chinese) 70 362 -> 29 640 instructions. (Not one pass from
/// a text's first such string to its end: a text with a few short ones
/// would pay for all the ASCII after them.)
const SIMD_UTF8_MIN: usize = 64;

/// Whether a string's body (with a byte of 0x80 or more) is valid UTF-8.
#[inline(always)]
fn is_utf8(body: &[u8]) -> bool {
    if body.len() >= SIMD_UTF8_MIN {
        scan::is_utf8(body)
    } else {
        core::str::from_utf8(body).is_ok()
    }
}

/// Decodes `src` into `stack`; `Err(Stop::Invalid)` when the text is not
/// valid JSON or nests deeper than `max_depth`.
pub(super) fn decode<S: Stack>(
    src: &[u8],
    max_depth: usize,
    scratch: &mut Scratch,
    stack: &mut S,
) -> Flow {
    let Scratch {
        open,
        keys,
        decoded,
    } = scratch;
    open.clear();
    keys.clear();
    let at = |i: usize| src.get(i).copied().unwrap_or(0);
    let skip_space = |i: usize| skip_space(src, i);
    // The innermost container (at first the root, which is none).
    let mut cur = Open::new(0, 0);
    let mut i = 0usize;

    // Reads the string whose opening quote is at `i` and calls
    // `stack.$method` with its decoded bytes; moves `i` past it. Gives
    // the decoded length when it had escapes.
    macro_rules! string {
        ($method:ident) => {{
            let start = i + 1;
            let Some((body, mut non_ascii)) = scan_string(src, start) else {
                return Err(Stop::Invalid);
            };
            let (end, escapes_in) = match body {
                Body::Plain(end) => (end, None),
                Body::Escaped(backslash) => {
                    let Some((end, len, more)) = decode_escaped(src, start, backslash, decoded)
                    else {
                        return Err(Stop::Invalid);
                    };
                    non_ascii |= more;
                    (end, Some(len))
                }
            };
            let Some(raw) = src.get(start..end) else {
                return Err(Stop::Invalid);
            };
            if non_ascii && !is_utf8(raw) {
                return Err(Stop::Invalid);
            }
            match escapes_in {
                Some(len) => stack.$method(decoded.get(..len).unwrap_or_default())?,
                None => stack.$method(raw)?,
            }
            i = end + 1;
            escapes_in
        }};
    }

    // Reads `"key" :` from `i` on (after `{` or `,` and any space).
    macro_rules! member_key {
        () => {{
            if at(i) != b'"' {
                return Err(Stop::Invalid);
            }
            let start = i + 1;
            let escapes_in = string!(key).is_some();
            if cur.distinct {
                let key = src.get(start..i - 1).unwrap_or_default();
                let hash = key_hash(key);
                // The top two bits pick one of the four words (in bounds).
                let word = &mut cur.seen[(hash >> 62) as usize];
                let bit = 1 << ((hash >> 56) & 63);
                // A key whose bit is new differs from every key before it;
                // otherwise hashes are compared, and bytes when they match.
                let repeated = *word & bit != 0
                    && keys
                        .get(cur.keys_from as usize..)
                        .unwrap_or_default()
                        .iter()
                        .any(|&(h, at, len)| {
                            h == hash
                                && src.get(at as usize..at as usize + len as usize) == Some(key)
                        });
                if escapes_in || repeated {
                    keys.truncate(cur.keys_from as usize);
                    cur.distinct = false;
                } else {
                    *word |= bit;
                    keys.push((hash, start as u32, key.len() as u32));
                }
            }
            i = skip_space(i);
            if at(i) != b':' {
                return Err(Stop::Invalid);
            }
            i += 1;
        }};
    }

    'value: loop {
        i = skip_space(i);
        let b = at(i);
        match b {
            b'"' => {
                string!(string);
            }
            b'-' | b'0'..=b'9' => {
                // Integers of up to 15 digits are exact doubles; anything
                // else (fractions, exponents, errors) takes the general
                // check and conversion.
                let sign = usize::from(b == b'-');
                let digits = i + sign;
                let mut j = digits;
                let mut value = 0u64;
                while j - digits < 16 {
                    let d = at(j).wrapping_sub(b'0');
                    if d > 9 {
                        break;
                    }
                    value = value * 10 + u64::from(d);
                    j += 1;
                }
                let n = j - digits;
                let short = (1..=15).contains(&n)
                    && (at(digits) != b'0' || n == 1)
                    && !matches!(at(j), b'.' | b'e' | b'E')
                    && ends_scalar(src, j);
                if short {
                    let v = value as f64;
                    stack.number(if sign == 1 { -v } else { v })?;
                    i = j;
                } else {
                    let Some((end, number)) = long_number(src, i) else {
                        return Err(Stop::Invalid);
                    };
                    stack.number(number)?;
                    i = end;
                }
            }
            b't' | b'f' | b'n' => {
                if !literal::is_valid(src, i) {
                    return Err(Stop::Invalid);
                }
                match b {
                    b't' => stack.boolean(true)?,
                    b'f' => stack.boolean(false)?,
                    _ => stack.null()?,
                }
                i += if b == b'f' { 5 } else { 4 };
            }
            b'[' | b'{' => {
                if open.len() >= max_depth {
                    return Err(Stop::Invalid);
                }
                stack.open()?;
                open.push(cur);
                // `{` + 2 is `}`, `[` + 2 is `]`.
                cur = Open::new(b + 2, keys.len() as u32);
                i = skip_space(i + 1);
                if at(i) != cur.close {
                    if b == b'{' {
                        member_key!();
                    }
                    continue 'value;
                }
                // Empty: closed below like any other.
                cur.count = u32::MAX;
            }
            _ => return Err(Stop::Invalid),
        }
        // A value ended (or an empty container is at its closing byte,
        // with a count that the increment makes 0).
        loop {
            cur.count = cur.count.wrapping_add(1);
            i = skip_space(i);
            let b = at(i);
            if i >= src.len() {
                return if cur.close == 0 {
                    Ok(())
                } else {
                    Err(Stop::Invalid)
                };
            }
            i += 1;
            if b == b',' && cur.close != 0 && cur.count.wrapping_sub(cur.stored) == CHUNK {
                // A full chunk, with more to come, goes into the table; the
                // next one's keys are compared afresh.
                stack.store(cur.close == b'}', cur.stored, CHUNK, cur.distinct, false)?;
                keys.truncate(cur.keys_from as usize);
                cur = Open {
                    stored: cur.count,
                    count: cur.count,
                    ..Open::new(cur.close, cur.keys_from)
                };
            }
            if b == b',' {
                if cur.close == b']' {
                    continue 'value;
                }
                if cur.close == b'}' {
                    i = skip_space(i);
                    member_key!();
                    continue 'value;
                }
            }
            if b != cur.close || cur.close == 0 {
                return Err(Stop::Invalid);
            }
            stack.store(
                b == b'}',
                cur.stored,
                cur.count.wrapping_sub(cur.stored),
                cur.distinct,
                true,
            )?;
            keys.truncate(cur.keys_from as usize);
            let Some(parent) = open.pop() else {
                return Err(Stop::Invalid);
            };
            cur = parent;
        }
    }
}
