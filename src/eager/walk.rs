//! The grammar walk of eager decode: stage 2 over one window's entries at
//! a time, handing each value to the sink as it completes.
//!
//! The grammar is [`crate::validate`]'s, checked with the same pieces
//! (number spellings with [`number::number_end`], literals, escapes with
//! `validate::escapes`, the same depth rule), but the walk is a state
//! machine over single entries, so that it can stop at the end of a
//! window and go on with the next: the state between two entries is what
//! is expected next and the open containers. A string is its two entries,
//! always in the same window (a cut is never inside a string).
//!
//! It only says whether the text is valid; `Document` names the error
//! (see the module docs of [`super`]). Code here runs between calls into
//! the sink, which may be Lua's API, so it must not panic: slices are read
//! with `get`, and the functions it calls only read within the text.

use super::{Flow, Sink, Slot, Stop, UNKNOWN};
use crate::validate::{Options, ends_scalar, escapes, literal};
use crate::values::{number, string};

/// What the next entry must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Expect {
    /// A value (the root, after `:`, after `,` in an array).
    #[default]
    Value,
    /// A value or `]`, just after `[`.
    FirstValue,
    /// A key, after `,` in an object.
    Key,
    /// A key or `}`, just after `{`.
    FirstKey,
    /// `:` after a key.
    Colon,
    /// `,` or the container's closing byte after a value; nothing at all
    /// after the root value.
    After,
}

/// An open container that is not the innermost one.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// The byte that closes it (`}`, `]`, 0 for the root).
    close: u8,
    /// Its members or elements so far.
    count: u32,
}

/// The walk's state between windows, and its reusable memory.
#[derive(Default, Debug)]
pub(crate) struct State {
    /// The parents of the innermost container.
    frames: Vec<Frame>,
    /// The innermost container's closing byte (0: the root, no container).
    close: u8,
    /// The innermost container's members or elements so far.
    count: u32,
    expect: Expect,
    /// A string with escapes, decoded.
    decoded: Vec<u8>,
}

impl State {
    /// Bytes of heap held for the next decode.
    pub(crate) fn retained_bytes(&self) -> usize {
        self.frames.capacity() * size_of::<Frame>() + self.decoded.capacity()
    }
}

/// A decode's walk over its windows.
pub struct Walk<'s> {
    st: &'s mut State,
    max_depth: usize,
}

/// The slot of the next value of a container closed by `close` that has
/// `count` values so far.
#[inline(always)]
fn slot(close: u8, count: u32) -> Slot {
    match close {
        b']' => Slot::Element(count.wrapping_add(1)),
        b'}' => Slot::Member,
        _ => Slot::Root,
    }
}

impl<'s> Walk<'s> {
    /// A walk from the start of a text, in `st`'s memory.
    pub(crate) fn new(st: &'s mut State, opts: &Options) -> Walk<'s> {
        st.frames.clear();
        st.close = 0;
        st.count = 0;
        st.expect = Expect::Value;
        Walk {
            st,
            max_depth: opts.max_depth as usize,
        }
    }

    /// Whether the text may end here: the root value is complete.
    pub(crate) fn finish(&self) -> bool {
        self.st.expect == Expect::After && self.st.close == 0
    }

    /// Walks the entries `positions` of `text` (its escapes `escapes`,
    /// the sizes of its containers `sizes` in the order they open).
    pub(crate) fn run<S: Sink>(
        &mut self,
        text: &[u8],
        positions: &[u32],
        escapes: &[u32],
        sizes: &[u32],
        sink: &mut S,
    ) -> Flow {
        let max_depth = self.max_depth;
        let State {
            frames,
            close: st_close,
            count: st_count,
            expect: st_expect,
            decoded,
        } = &mut *self.st;
        let (mut close, mut count, mut expect) = (*st_close, *st_count, *st_expect);
        let mut next_escape = 0usize;
        let mut escape_at = escapes.first().copied().unwrap_or(u32::MAX);
        let mut sizes = sizes.iter();
        let byte = |p: u32| text.get(p as usize).copied().unwrap_or(0);

        // The decoded body of the string whose quotes are at `open` and
        // `end`.
        macro_rules! string_body {
            ($open:expr, $end:expr) => {{
                let (open, end) = ($open, $end);
                let Some(body) = text.get(open as usize + 1..end as usize) else {
                    return Err(Stop::Invalid);
                };
                if escape_at < end {
                    if escapes::check(text, escapes, &mut next_escape, end).is_err() {
                        return Err(Stop::Invalid);
                    }
                    escape_at = escapes.get(next_escape).copied().unwrap_or(u32::MAX);
                    decoded.clear();
                    string::unescape_into(body, decoded);
                    &decoded[..]
                } else {
                    body
                }
            }};
        }

        // Ends the innermost container.
        macro_rules! close_container {
            () => {{
                let object = close == b'}';
                let Some(parent) = frames.pop() else {
                    return Err(Stop::Invalid);
                };
                let n = count;
                close = parent.close;
                count = parent.count;
                sink.close(object, n, slot(close, count))?;
                count = count.wrapping_add(1);
                expect = Expect::After;
            }};
        }

        let mut i = 0usize;
        while let Some(&p) = positions.get(i) {
            let b = byte(p);
            match expect {
                Expect::After => {
                    if b == b',' && close != 0 {
                        expect = if close == b'}' {
                            Expect::Key
                        } else {
                            Expect::Value
                        };
                    } else if b == close && close != 0 {
                        close_container!();
                    } else {
                        return Err(Stop::Invalid);
                    }
                    i += 1;
                }
                Expect::Key | Expect::FirstKey => {
                    if b == b'"' {
                        let Some(&end) = positions.get(i + 1) else {
                            return Err(Stop::Invalid);
                        };
                        sink.key(string_body!(p, end))?;
                        expect = Expect::Colon;
                        i += 2;
                    } else if b == b'}' && expect == Expect::FirstKey {
                        close_container!();
                        i += 1;
                    } else {
                        return Err(Stop::Invalid);
                    }
                }
                Expect::Colon => {
                    if b != b':' {
                        return Err(Stop::Invalid);
                    }
                    expect = Expect::Value;
                    i += 1;
                }
                Expect::Value | Expect::FirstValue => {
                    let at = slot(close, count);
                    match b {
                        b'"' => {
                            let Some(&end) = positions.get(i + 1) else {
                                return Err(Stop::Invalid);
                            };
                            sink.string(string_body!(p, end), at)?;
                            i += 2;
                        }
                        b'-' | b'0'..=b'9' => {
                            let start = p as usize;
                            let value = number::number_end(text, start)
                                .filter(|&end| ends_scalar(text, end))
                                .and_then(|end| text.get(start..end));
                            let Some(value) = value else {
                                return Err(Stop::Invalid);
                            };
                            sink.number(number_value(value), at)?;
                            i += 1;
                        }
                        b't' | b'f' | b'n' => {
                            if !literal::is_valid(text, p as usize) {
                                return Err(Stop::Invalid);
                            }
                            match b {
                                b't' => sink.boolean(true, at)?,
                                b'f' => sink.boolean(false, at)?,
                                _ => sink.null(at)?,
                            }
                            i += 1;
                        }
                        b'[' | b'{' => {
                            if frames.len() >= max_depth {
                                return Err(Stop::Invalid);
                            }
                            let object = b == b'{';
                            let hint = match sizes.next() {
                                Some(&n) if n != UNKNOWN => n,
                                _ => 0,
                            };
                            sink.open(object, hint)?;
                            frames.push(Frame { close, count });
                            // `{` + 2 is `}`, `[` + 2 is `]`.
                            close = b + 2;
                            count = 0;
                            expect = if object {
                                Expect::FirstKey
                            } else {
                                Expect::FirstValue
                            };
                            i += 1;
                            continue;
                        }
                        b']' if expect == Expect::FirstValue => {
                            close_container!();
                            i += 1;
                            continue;
                        }
                        _ => return Err(Stop::Invalid),
                    }
                    count = count.wrapping_add(1);
                    expect = Expect::After;
                }
            }
        }
        *st_close = close;
        *st_count = count;
        *st_expect = expect;
        Ok(())
    }
}

/// Powers of ten a double holds exactly.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The nearest double to the valid JSON number `n`, as
/// [`number::to_f64`] gives it.
///
/// Most numbers are decided here (Clinger's fast path): when the digits,
/// read as one integer, are below 2^53 and the decimal exponent is within
/// ±22, the integer and the power of ten are both exact doubles and one
/// multiplication or division rounds correctly. The rest go to the
/// general parser.
#[inline]
pub(crate) fn number_value(n: &[u8]) -> f64 {
    let (negative, digits) = match n.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, n),
    };
    let mut mantissa = 0u64;
    let mut used = 0usize;
    let mut scale = 0i32;
    let mut k = 0;
    // At most 19 digits fit a u64 without overflow; past that (or past an
    // exponent of more than two digits) the general parser decides.
    let mut fast = true;
    while let Some(&d) = digits.get(k) {
        match d {
            b'0'..=b'9' => {
                mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                used += 1;
            }
            b'.' => {
                let frac_start = k + 1;
                k = frac_start;
                while let Some(&d) = digits.get(k).filter(|d| d.is_ascii_digit()) {
                    mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                    used += 1;
                    k += 1;
                }
                scale -= (k - frac_start) as i32;
                continue;
            }
            _ => {
                // The exponent: [eE][+-]?digits.
                let mut e = k + 1;
                let sign = match digits.get(e) {
                    Some(b'-') => {
                        e += 1;
                        -1
                    }
                    Some(b'+') => {
                        e += 1;
                        1
                    }
                    _ => 1,
                };
                let exp_digits = digits.get(e..).unwrap_or_default();
                if exp_digits.len() > 2 {
                    fast = false;
                }
                let mut exp = 0i32;
                for &d in exp_digits {
                    exp = exp * 10 + i32::from(d.wrapping_sub(b'0'));
                }
                scale += sign * exp;
                break;
            }
        }
        k += 1;
    }
    if fast && used <= 19 && mantissa <= 1 << 53 && (-22..=22).contains(&scale) {
        let m = mantissa as f64;
        let magnitude = if scale >= 0 {
            m * EXACT_POWERS[scale as usize]
        } else {
            m / EXACT_POWERS[(-scale) as usize]
        };
        return if negative { -magnitude } else { magnitude };
    }
    number::to_f64(n)
}
