//! Test-only fixtures shared by the unit tests of every stage: a seeded
//! random generator, a byte-at-a-time reference scanner (the oracle the
//! SIMD kernels are compared with), and generators of JSON texts that put
//! quotes, escapes and multi-byte characters on every offset.

use crate::error::{Error, ErrorCode};

/// The iterations of a randomized test that runs `n` natively: under
/// Miri, which interprets every step about a million times slower, a
/// thousandth of them (at least 20), so that `make sanitize` checks each
/// test's code paths in minutes rather than hours.
pub fn rounds(n: usize) -> usize {
    if cfg!(miri) { (n / 1000).max(20) } else { n }
}

/// The sizes a test runs: every one of `all` natively; under Miri, the
/// first `under_miri` of them, the same code paths at smaller sizes.
pub fn sizes<T>(all: &[T], under_miri: usize) -> &[T] {
    if cfg!(miri) { &all[..under_miri] } else { all }
}

/// xorshift64*: small, seeded, reproducible.
pub struct Rng(u64);

impl Rng {
    /// A generator with a fixed seed (never 0).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// One element of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
    /// True with probability 1/n.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// The bytes after a backslash whose escapes stage 1 vouches for
/// (`scan::classify::SHORT_ESCAPE_TABLE`), as the tests state them: the
/// escape list leaves these out but for each string's first escape in a
/// 64-byte block ([`naive_scan`]).
pub const VOUCHED_ESCAPES: &[u8] = b"\"tf\\n/";

/// Whether stage 1 vouches for the `\uXXXX` escape whose `u` is
/// `input[at]`, as the tests state it: its four hex digits lie in the
/// 64-byte block of its `u`, and its code unit is outside D800 to DFFF.
pub fn vouched_unicode(input: &[u8], at: usize) -> bool {
    let digits = at + 1..at + 5;
    input[at] == b'u'
        && digits.end <= input.len()
        && (digits.end - 1) / 64 == at / 64
        && input[digits.clone()].iter().all(u8::is_ascii_hexdigit)
        && !matches!(
            &input[digits],
            [b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F', ..]
        )
}

/// What stage 1 must produce for `input`: (positions, escapes), or the
/// error every kernel must report. Written as the obvious state machine,
/// one byte at a time, sharing no code with the kernels.
///
/// The escapes listed are the offsets of the bytes after active
/// backslashes inside strings, except the short escapes that stage 1
/// vouches for ([`VOUCHED_ESCAPES`]) unless one is the first escape of
/// its string within its 64-byte block of the input; and of those, a
/// `\uXXXX` that it vouches for ([`vouched_unicode`]) is left out too
/// when another that would be listed comes before it in its block with no
/// `"` byte between them.
pub fn naive_scan(input: &[u8]) -> Result<(Vec<u32>, Vec<u32>), Error> {
    let mut positions = Vec::new();
    let mut escapes = Vec::new();
    // The block of the last escape since the last quote.
    let mut escape_block = None;
    // The last escape listed by the first rule above.
    let mut last_listed: Option<usize> = None;
    let mut control = None;
    let mut in_string = false;
    let mut prev_scalar = false;
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if in_string {
            if b == b'\\' {
                if let Some(&next) = input.get(i + 1) {
                    let block = (i + 1) / 64;
                    if escape_block != Some(block) || !VOUCHED_ESCAPES.contains(&next) {
                        let follows_listed = last_listed
                            .is_some_and(|p| p / 64 == block && !input[p + 1..=i].contains(&b'"'));
                        if !(follows_listed && vouched_unicode(input, i + 1)) {
                            escapes.push(i as u32 + 1);
                        }
                        last_listed = Some(i + 1);
                    }
                    escape_block = Some(block);
                    if next < 0x20 && control.is_none() {
                        control = Some(i + 1);
                    }
                }
                i += 2;
                continue;
            }
            if b == b'"' {
                positions.push(i as u32);
                in_string = false;
                escape_block = None;
            } else if b < 0x20 && control.is_none() {
                control = Some(i);
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                positions.push(i as u32);
                in_string = true;
                escape_block = None;
                prev_scalar = false;
            }
            b'{' | b'}' | b'[' | b']' | b':' | b',' => {
                positions.push(i as u32);
                prev_scalar = false;
            }
            b' ' | b'\t' | b'\n' | b'\r' => prev_scalar = false,
            _ => {
                if !prev_scalar {
                    positions.push(i as u32);
                }
                prev_scalar = true;
                if b == b'\\' && i + 1 < input.len() {
                    // Outside strings a backslash still escapes the next
                    // byte: an escaped quote is scalar garbage, not a quote.
                    let next = input[i + 1];
                    if next == b'"' || next == b'\\' {
                        i += 2;
                        continue;
                    }
                }
            }
        }
        i += 1;
    }
    let utf8 = core::str::from_utf8(input).err().map(|e| e.valid_up_to());
    match (control, utf8) {
        (Some(c), Some(u)) if u < c => Err(Error::new(ErrorCode::InvalidUtf8, u)),
        (Some(c), _) => Err(Error::new(ErrorCode::ControlCharacter, c)),
        (None, Some(u)) => Err(Error::new(ErrorCode::InvalidUtf8, u)),
        (None, None) if in_string => Err(Error::new(
            ErrorCode::UnterminatedString,
            *positions.last().unwrap() as usize,
        )),
        (None, None) => Ok((positions, escapes)),
    }
}

/// Pieces random texts are built from: structure, strings with escapes,
/// multi-byte UTF-8 (valid and broken), control bytes.
pub const PIECES: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b" ",
    b"\n",
    b"\t",
    b"\"",
    b"\"",
    b"\"",
    b"\\",
    b"\\\\",
    b"\\\"",
    b"\\\\\\",
    b"\\u00e9",
    b"\\ud83d\\ude00",
    b"a",
    b"xyz",
    b"1",
    b"-2.5e3",
    b"true",
    b"null",
    "é".as_bytes(),
    "€".as_bytes(),
    "😀".as_bytes(),
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xff",
    b"\x01",
    b"\x1f",
    b"\x00",
    b"\x0c",
    b"\x1a",
];

/// A random text of about `len` bytes built from [`PIECES`], weighted to
/// mostly valid bytes so that errors are not always in the first block.
pub fn random_text(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        let piece = if rng.one_in(4) {
            rng.pick(PIECES)
        } else {
            rng.pick(&PIECES[..30])
        };
        out.extend_from_slice(piece);
    }
    out
}

/// A random valid JSON number spelling: an optional sign, an integer part
/// of 1 to 20 digits without leading zeros, then, each with probability
/// 1/`fraction` and 1/`exponent` (0: never), a fraction of 1 to 20 digits
/// and an exponent of 1 to 3 digits with either letter and any sign.
pub fn random_number(rng: &mut Rng, fraction: usize, exponent: usize) -> String {
    let digits = |rng: &mut Rng, most: usize| -> String {
        let n = 1 + rng.below(most);
        (0..n)
            .map(|_| char::from(b'0' + rng.below(10) as u8))
            .collect()
    };
    let mut s = String::new();
    if rng.one_in(2) {
        s.push('-');
    }
    let int = digits(rng, 20);
    s.push_str(if int.len() > 1 {
        int.trim_start_matches('0')
    } else {
        &int
    });
    if s.is_empty() || s == "-" {
        s.push('0');
    }
    if fraction != 0 && rng.one_in(fraction) {
        s.push('.');
        s.push_str(&digits(rng, 20));
    }
    if exponent != 0 && rng.one_in(exponent) {
        s.push(rng.pick(&['e', 'E']));
        if rng.one_in(2) {
            s.push(rng.pick(&['+', '-']));
        }
        s.push_str(&digits(rng, 3));
    }
    s
}

/// A random valid JSON text exercising nesting, long strings with escape
/// runs, unicode and number spellings.
pub fn random_json(rng: &mut Rng, depth: usize) -> Vec<u8> {
    let mut out = Vec::new();
    json_value(rng, depth, &mut out);
    out
}

fn json_value(rng: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    let ws = |rng: &mut Rng, out: &mut Vec<u8>| {
        for _ in 0..rng.below(3) {
            out.push(rng.pick(b" \n\t\r"));
        }
    };
    ws(rng, out);
    match rng.below(if depth == 0 { 5 } else { 7 }) {
        0 => json_string(rng, out),
        1 => out.extend_from_slice(rng.pick(&[
            &b"0"[..],
            b"-0",
            b"12",
            b"-3.25",
            b"1e9",
            b"6.02E+23",
            b"-1.5e-7",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"18446744073709551616",
        ])),
        2 => out.extend_from_slice(rng.pick(&[&b"true"[..], b"false", b"null"])),
        3 | 4 => json_string(rng, out),
        5 => {
            out.push(b'[');
            let n = rng.below(5);
            for i in 0..n {
                if i > 0 {
                    out.push(b',');
                }
                json_value(rng, depth - 1, out);
            }
            ws(rng, out);
            out.push(b']');
        }
        _ => {
            out.push(b'{');
            let n = rng.below(5);
            for i in 0..n {
                if i > 0 {
                    out.push(b',');
                }
                ws(rng, out);
                json_string(rng, out);
                ws(rng, out);
                out.push(b':');
                json_value(rng, depth - 1, out);
            }
            ws(rng, out);
            out.push(b'}');
        }
    }
    ws(rng, out);
}

/// A string whose body has long plain runs (to hit the skip path) and
/// escapes, including backslash runs of every length.
pub fn json_string(rng: &mut Rng, out: &mut Vec<u8>) {
    out.push(b'"');
    for _ in 0..rng.below(6) {
        match rng.below(8) {
            0 => {
                let n = rng.below(150);
                out.extend((0..n).map(|i| b"ABCDEFGHIJKLMNOPQRSTUVWXYZ+/0123456789"[i % 38]));
            }
            1 => {
                for _ in 0..rng.below(6) {
                    out.extend_from_slice(b"\\\\");
                }
                out.extend_from_slice(b"\\\"");
            }
            2 => out.extend_from_slice(rng.pick(&[
                &b"\\n"[..],
                b"\\t",
                b"\\/",
                b"\\b",
                b"\\f",
                b"\\r",
                b"\\u0041",
                b"\\u00e9",
                b"\\uD83D\\uDE00",
                b"\\u0000",
            ])),
            3 => out.extend_from_slice(
                rng.pick(&["é", "日本語", "😀", "\u{10FFFF}", "\u{7FF}", "\u{800}"])
                    .as_bytes(),
            ),
            _ => out.extend_from_slice(rng.pick(&[
                &b"model"[..],
                b"text",
                b" ",
                b"a.b",
                b"x[0]",
                b"~/",
            ])),
        }
    }
    out.push(b'"');
}

/// An independent reference validator: plain recursive descent over the
/// bytes, following RFC 8259 literally. Accepts exactly what the library
/// must accept (with the nesting limit `max_depth`).
pub fn naive_is_valid(input: &[u8], max_depth: usize) -> bool {
    struct P<'a> {
        s: &'a [u8],
        i: usize,
        max_depth: usize,
    }
    impl P<'_> {
        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }
        fn ws(&mut self) {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.i += 1;
            }
        }
        fn eat(&mut self, b: u8) -> bool {
            let ok = self.peek() == Some(b);
            self.i += ok as usize;
            ok
        }
        fn value(&mut self, depth: usize) -> bool {
            self.ws();
            let ok = match self.peek() {
                Some(b'{') => {
                    if depth >= self.max_depth {
                        return false;
                    }
                    self.i += 1;
                    self.ws();
                    if self.eat(b'}') {
                        true
                    } else {
                        loop {
                            self.ws();
                            if !self.string() {
                                return false;
                            }
                            self.ws();
                            if !self.eat(b':') || !self.value(depth + 1) {
                                return false;
                            }
                            if self.eat(b',') {
                                continue;
                            }
                            break self.eat(b'}');
                        }
                    }
                }
                Some(b'[') => {
                    if depth >= self.max_depth {
                        return false;
                    }
                    self.i += 1;
                    self.ws();
                    if self.eat(b']') {
                        true
                    } else {
                        loop {
                            if !self.value(depth + 1) {
                                return false;
                            }
                            if self.eat(b',') {
                                continue;
                            }
                            break self.eat(b']');
                        }
                    }
                }
                Some(b'"') => self.string(),
                Some(b't') => self.word(b"true"),
                Some(b'f') => self.word(b"false"),
                Some(b'n') => self.word(b"null"),
                _ => self.number(),
            };
            self.ws();
            ok
        }
        fn word(&mut self, w: &[u8]) -> bool {
            let ok = self.s[self.i..].starts_with(w);
            self.i += w.len();
            ok
        }
        fn digits(&mut self) -> usize {
            let start = self.i;
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.i += 1;
            }
            self.i - start
        }
        fn number(&mut self) -> bool {
            self.eat(b'-');
            if self.eat(b'0') {
            } else if self.digits() == 0 {
                return false;
            }
            if self.eat(b'.') && self.digits() == 0 {
                return false;
            }
            if matches!(self.peek(), Some(b'e' | b'E')) {
                self.i += 1;
                if !self.eat(b'+') {
                    self.eat(b'-');
                }
                if self.digits() == 0 {
                    return false;
                }
            }
            true
        }
        fn hex4(&mut self) -> Option<u32> {
            let h = self.s.get(self.i..self.i + 4)?;
            let v = u32::from_str_radix(core::str::from_utf8(h).ok()?, 16).ok()?;
            if !h.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            self.i += 4;
            Some(v)
        }
        fn string(&mut self) -> bool {
            if !self.eat(b'"') {
                return false;
            }
            let start = self.i;
            loop {
                match self.peek() {
                    None => return false,
                    Some(b'"') => break,
                    Some(b'\\') => {
                        self.i += 1;
                        match self.peek() {
                            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                                self.i += 1
                            }
                            Some(b'u') => {
                                self.i += 1;
                                match self.hex4() {
                                    Some(0xd800..=0xdbff) => {
                                        if !self.eat(b'\\') || !self.eat(b'u') {
                                            return false;
                                        }
                                        if !matches!(self.hex4(), Some(0xdc00..=0xdfff)) {
                                            return false;
                                        }
                                    }
                                    Some(0xdc00..=0xdfff) | None => return false,
                                    Some(_) => {}
                                }
                            }
                            _ => return false,
                        }
                    }
                    Some(b) if b < 0x20 => return false,
                    Some(_) => self.i += 1,
                }
            }
            let ok = core::str::from_utf8(&self.s[start..self.i]).is_ok();
            self.i += 1;
            ok
        }
    }
    let mut p = P {
        s: input,
        i: 0,
        max_depth,
    };
    p.value(0) && p.i == input.len()
}

/// The error stage 2 must report for `input`, whose stage-1 entries are
/// `positions` (from [`naive_scan`]), under the last-wins policy and the
/// nesting limit `max_depth`: the code and offset of the first problem met
/// reading the entries in order. Recursive descent over the entries, with
/// strings, numbers and literals read byte by byte; it shares no code with
/// the walk.
pub fn naive_stage2(input: &[u8], positions: &[u32], max_depth: usize) -> Result<(), Error> {
    use ErrorCode::*;
    struct V<'a> {
        s: &'a [u8],
        pos: &'a [u32],
        i: usize,
        max_depth: usize,
    }
    impl V<'_> {
        fn at(&self, i: usize) -> usize {
            self.pos.get(i).map_or(self.s.len(), |&p| p as usize)
        }
        fn byte(&self, i: usize) -> Option<u8> {
            self.pos.get(i).map(|&p| self.s[p as usize])
        }
        fn fail(&self, code: ErrorCode, i: usize) -> Result<(), Error> {
            Err(Error::new(code, self.at(i)))
        }
        /// After a number or literal: the end, whitespace, a structural
        /// byte or a quote.
        fn ends(&self, at: usize) -> bool {
            self.s
                .get(at)
                .is_none_or(|b| b" \t\n\r,:[]{}\"".contains(b))
        }
        fn value(&mut self, depth: usize, missing: ErrorCode) -> Result<(), Error> {
            let i = self.i;
            let at = self.at(i);
            match self.byte(i) {
                Some(open @ (b'{' | b'[')) => {
                    if depth >= self.max_depth {
                        return self.fail(DepthExceeded, i);
                    }
                    let object = open == b'{';
                    let close = if object { b'}' } else { b']' };
                    self.i += 1;
                    if self.byte(self.i) == Some(close) {
                        self.i += 1;
                        return Ok(());
                    }
                    let mut first = true;
                    loop {
                        if object {
                            let k = self.i;
                            let missing = if first {
                                ExpectedKeyOrBrace
                            } else {
                                ExpectedKey
                            };
                            if self.byte(k) != Some(b'"') {
                                return self.fail(missing, k);
                            }
                            self.string()?;
                            if self.byte(self.i) != Some(b':') {
                                return self.fail(ExpectedColon, self.i);
                            }
                            self.i += 1;
                            self.value(depth + 1, ExpectedValue)?;
                        } else {
                            let missing = if first {
                                ExpectedValueOrBracket
                            } else {
                                ExpectedValue
                            };
                            self.value(depth + 1, missing)?;
                        }
                        first = false;
                        match self.byte(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b) if b == close => {
                                self.i += 1;
                                return Ok(());
                            }
                            _ if object => return self.fail(ExpectedCommaOrBrace, self.i),
                            _ => return self.fail(ExpectedCommaOrBracket, self.i),
                        }
                    }
                }
                Some(b'"') => self.string(),
                Some(first @ (b't' | b'f' | b'n')) => {
                    let word: &[u8] = match first {
                        b't' => b"true",
                        b'f' => b"false",
                        _ => b"null",
                    };
                    if !self.s[at..].starts_with(word) || !self.ends(at + word.len()) {
                        return self.fail(InvalidLiteral, i);
                    }
                    self.i += 1;
                    Ok(())
                }
                Some(b'-' | b'0'..=b'9') => {
                    let s = self.s;
                    let digits = |from: usize| {
                        from + s[from..].iter().take_while(|b| b.is_ascii_digit()).count()
                    };
                    let mut j = at + usize::from(s[at] == b'-');
                    let int_end = digits(j);
                    let mut ok = int_end > j && (s[j] != b'0' || int_end == j + 1);
                    j = int_end;
                    if ok && s.get(j) == Some(&b'.') {
                        let frac_end = digits(j + 1);
                        ok = frac_end > j + 1;
                        j = frac_end;
                    }
                    if ok && matches!(s.get(j), Some(b'e' | b'E')) {
                        j += 1;
                        if matches!(s.get(j), Some(b'+' | b'-')) {
                            j += 1;
                        }
                        let exp_end = digits(j);
                        ok = exp_end > j;
                        j = exp_end;
                    }
                    if !ok || !self.ends(j) {
                        return self.fail(InvalidNumber, i);
                    }
                    self.i += 1;
                    Ok(())
                }
                _ => self.fail(missing, i),
            }
        }
        /// The string whose quotes are entries i and i + 1: its escapes,
        /// byte by byte.
        fn string(&mut self) -> Result<(), Error> {
            let s = self.s;
            let hex4 = |at: usize| {
                let h = s.get(at..at + 4)?;
                h.iter()
                    .all(u8::is_ascii_hexdigit)
                    .then(|| u32::from_str_radix(core::str::from_utf8(h).unwrap(), 16).unwrap())
            };
            let end = self.pos[self.i + 1] as usize;
            let mut j = self.pos[self.i] as usize + 1;
            while j < end {
                if s[j] != b'\\' {
                    j += 1;
                    continue;
                }
                let fail = |code| Err(Error::new(code, j));
                match s[j + 1] {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                    b'u' => match hex4(j + 2) {
                        None => return fail(InvalidUnicodeEscape),
                        Some(0xd800..=0xdbff) => {
                            if s.get(j + 6..j + 8) != Some(b"\\u") {
                                return fail(LoneSurrogate);
                            }
                            match hex4(j + 8) {
                                None => return Err(Error::new(InvalidUnicodeEscape, j + 6)),
                                Some(0xdc00..=0xdfff) => j += 12,
                                Some(_) => return fail(LoneSurrogate),
                            }
                        }
                        Some(0xdc00..=0xdfff) => return fail(LoneSurrogate),
                        Some(_) => j += 6,
                    },
                    _ => return fail(InvalidEscape),
                }
            }
            self.i += 2;
            Ok(())
        }
    }
    if positions.is_empty() {
        return Err(Error::new(Empty, input.len()));
    }
    let mut v = V {
        s: input,
        pos: positions,
        i: 0,
        max_depth,
    };
    v.value(0, ExpectedValue)?;
    if v.i < positions.len() {
        return v.fail(TrailingContent, v.i);
    }
    Ok(())
}

/// Small edits that turn valid JSON into near-valid JSON: the inputs that
/// find validation bugs.
pub fn mutate(rng: &mut Rng, doc: &[u8]) -> Vec<u8> {
    let mut out = doc.to_vec();
    if out.is_empty() {
        return out;
    }
    for _ in 0..1 + rng.below(2) {
        if out.is_empty() {
            break;
        }
        let at = rng.below(out.len());
        match rng.below(5) {
            0 => {
                out.remove(at);
            }
            1 => out.insert(at, rng.pick(b"{}[]:,\"\\ 0-.eE+tfnu\x01\x80")),
            2 => out[at] = rng.pick(b"{}[]:,\"\\ 0-.eE+tfnu\x01\x80"),
            3 => {
                out.truncate(at);
            }
            _ => {
                let piece = rng.pick(PIECES);
                out.splice(at..at, piece.iter().copied());
            }
        }
    }
    out
}

/// A readable page between two unmapped ones: inputs copied against either
/// edge prove that no stage reads a byte outside its input (a stray read
/// is a segfault, not a silent pass).
#[cfg(unix)]
pub struct GuardedPage {
    base: *mut u8,
}

#[cfg(unix)]
mod guard {
    unsafe extern "C" {
        pub fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64)
        -> *mut u8;
        pub fn mprotect(addr: *mut u8, len: usize, prot: i32) -> i32;
        pub fn munmap(addr: *mut u8, len: usize) -> i32;
    }
    pub const PAGE: usize = 4096;
    pub const PROT_READ_WRITE: i32 = 3;
    pub const PROT_NONE: i32 = 0;
    pub const MAP_PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
}

#[cfg(unix)]
impl GuardedPage {
    /// Inputs up to this long fit.
    pub const SIZE: usize = guard::PAGE;

    /// Maps three pages and makes the first and last inaccessible.
    pub fn new() -> GuardedPage {
        use guard::*;
        // SAFETY: an anonymous private mapping of three fresh pages.
        let base = unsafe {
            mmap(
                core::ptr::null_mut(),
                3 * PAGE,
                PROT_READ_WRITE,
                MAP_PRIVATE_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(!base.is_null() && base as isize != -1);
        // SAFETY: both pages belong to the mapping just made.
        unsafe {
            assert_eq!(mprotect(base, PAGE, PROT_NONE), 0);
            assert_eq!(mprotect(base.add(2 * PAGE), PAGE, PROT_NONE), 0);
        }
        GuardedPage { base }
    }

    /// `text` copied so that its last byte is the last readable one.
    pub fn at_end(&mut self, text: &[u8]) -> &[u8] {
        self.place(Self::SIZE - text.len(), text)
    }

    /// `text` copied so that its first byte is the first readable one.
    pub fn at_start(&mut self, text: &[u8]) -> &[u8] {
        self.place(0, text)
    }

    fn place(&mut self, at: usize, text: &[u8]) -> &[u8] {
        assert!(text.len() <= Self::SIZE && at + text.len() <= Self::SIZE);
        // SAFETY: [at, at + len) lies inside the readable middle page, and
        // the &mut self borrow ends every earlier placement's slice.
        unsafe {
            let dst = self.base.add(guard::PAGE + at);
            core::ptr::copy_nonoverlapping(text.as_ptr(), dst, text.len());
            core::slice::from_raw_parts(dst, text.len())
        }
    }
}

#[cfg(unix)]
impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in new(); no placed slice
        // outlives the borrow of self that made it.
        unsafe { guard::munmap(self.base, 3 * guard::PAGE) };
    }
}
