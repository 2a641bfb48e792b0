//! One error type for the whole crate.
//!
//! Every failure, from a stray byte in stage 1 to a malformed lookup path,
//! is an [`ErrorCode`] plus the byte offset where it was found. The numeric
//! codes are part of the C ABI (`QJSON_E_*` and `QJSON_*` in
//! `include/qjson.h`) and never change meaning once released.
//!
//! Messages are formatted here, once, so the Rust tests, the fuzzers and the
//! Lua front end all print the same words: `invalid number at byte 17`,
//! `unexpected character 'x' at byte 3, expected ',' or '}'`.

use core::fmt;

/// What went wrong. `#[repr(i32)]` and mirrored in `include/qjson.h`.
///
/// Codes below 32 reject a document; 32–63 are lookup outcomes on a valid
/// document (data, not bugs); 64 and above are API misuse.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The input holds no JSON value (empty or only whitespace).
    Empty = 1,
    /// The input is 4 GiB or larger; offsets are 32-bit.
    TooLarge = 2,
    /// A byte sequence that is not UTF-8 (overlong, surrogate, truncated, > U+10FFFF).
    InvalidUtf8 = 3,
    /// A raw byte below 0x20 inside a string.
    ControlCharacter = 4,
    /// The input ends inside a string.
    UnterminatedString = 5,
    /// A backslash followed by a character that is not a JSON escape.
    InvalidEscape = 6,
    /// `\u` not followed by four hex digits.
    InvalidUnicodeEscape = 7,
    /// A `\uD800`–`\uDFFF` escape that is not part of a high+low pair.
    LoneSurrogate = 8,
    /// A token starting like a number that does not follow the JSON number grammar.
    InvalidNumber = 9,
    /// A token that is not `true`, `false` or `null`.
    InvalidLiteral = 10,
    /// A value was expected.
    ExpectedValue = 11,
    /// A value or `]` was expected (just after `[`).
    ExpectedValueOrBracket = 12,
    /// A string key was expected (after `,` in an object).
    ExpectedKey = 13,
    /// A string key or `}` was expected (just after `{`).
    ExpectedKeyOrBrace = 14,
    /// `:` was expected after a key.
    ExpectedColon = 15,
    /// `,` or `}` was expected after a member.
    ExpectedCommaOrBrace = 16,
    /// `,` or `]` was expected after an element.
    ExpectedCommaOrBracket = 17,
    /// Something follows the top-level value.
    TrailingContent = 18,
    /// Containers nest deeper than the configured `max_depth`.
    DepthExceeded = 19,
    /// An object repeats a key and the policy is `duplicate_keys = "error"`.
    DuplicateKey = 20,

    /// The path names nothing in this document.
    NotFound = 32,
    /// The value exists but has another type than the getter reads.
    TypeMismatch = 33,
    /// An integer that does not fit the requested type.
    OutOfRange = 34,
    /// A number with a fraction that `get_i64` cannot return exactly.
    NotInteger = 35,

    /// The lookup path itself is malformed (a programming error).
    BadPath = 64,
    /// A cursor that does not belong to this document.
    BadCursor = 65,
    /// An invalid argument or option at the C ABI.
    BadArgument = 66,
    /// `QJSON_KERNEL` names a kernel this build or this CPU cannot run.
    BadKernel = 67,
    /// A bug: a Rust panic caught at the FFI boundary.
    Internal = 99,
}

impl ErrorCode {
    /// The phrase used in messages, without position.
    pub fn phrase(self) -> &'static str {
        match self {
            ErrorCode::Empty => "empty input",
            ErrorCode::TooLarge => "input too large",
            ErrorCode::InvalidUtf8 => "invalid UTF-8",
            ErrorCode::ControlCharacter => "unescaped control character in string",
            ErrorCode::UnterminatedString => "unterminated string",
            ErrorCode::InvalidEscape => "invalid escape",
            ErrorCode::InvalidUnicodeEscape => "invalid \\u escape",
            ErrorCode::LoneSurrogate => "lone surrogate in \\u escape",
            ErrorCode::InvalidNumber => "invalid number",
            ErrorCode::InvalidLiteral => "invalid literal",
            ErrorCode::ExpectedValue => "expected a value",
            ErrorCode::ExpectedValueOrBracket => "expected a value or ']'",
            ErrorCode::ExpectedKey => "expected a string key",
            ErrorCode::ExpectedKeyOrBrace => "expected a string key or '}'",
            ErrorCode::ExpectedColon => "expected ':'",
            ErrorCode::ExpectedCommaOrBrace => "expected ',' or '}'",
            ErrorCode::ExpectedCommaOrBracket => "expected ',' or ']'",
            ErrorCode::TrailingContent => "expected end of input",
            ErrorCode::DepthExceeded => "nesting too deep",
            ErrorCode::DuplicateKey => "duplicate key",
            ErrorCode::NotFound => "not found",
            ErrorCode::TypeMismatch => "type mismatch",
            ErrorCode::OutOfRange => "integer out of range",
            ErrorCode::NotInteger => "number is not an integer",
            ErrorCode::BadPath => "invalid path",
            ErrorCode::BadCursor => "invalid cursor",
            ErrorCode::BadArgument => "invalid argument",
            ErrorCode::BadKernel => "unknown or unsupported kernel in QJSON_KERNEL",
            ErrorCode::Internal => "internal error",
        }
    }

    /// Grammar errors name what was expected and are reported as
    /// "unexpected character 'x' …, expected …".
    fn is_expectation(self) -> bool {
        matches!(
            self,
            ErrorCode::ExpectedValue
                | ErrorCode::ExpectedValueOrBracket
                | ErrorCode::ExpectedKey
                | ErrorCode::ExpectedKeyOrBrace
                | ErrorCode::ExpectedColon
                | ErrorCode::ExpectedCommaOrBrace
                | ErrorCode::ExpectedCommaOrBracket
                | ErrorCode::TrailingContent
        )
    }
}

/// An error code and the byte offset it refers to (0-based).
///
/// For parse errors the offset points into the JSON text; for
/// [`ErrorCode::BadPath`] into the path; for [`ErrorCode::TooLarge`] it is
/// the input length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// What went wrong.
    pub code: ErrorCode,
    /// Where, in bytes from the start.
    pub offset: usize,
}

/// Crate-wide result alias.
pub type Result<T> = core::result::Result<T, Error>;

impl Error {
    /// An error at `offset`.
    #[inline]
    pub fn new(code: ErrorCode, offset: usize) -> Error {
        Error { code, offset }
    }

    /// Formats the message for this error. `input` is the text the offset
    /// points into, used to quote the offending character.
    pub fn display<'a>(&'a self, input: &'a [u8]) -> Message<'a> {
        Message { err: self, input }
    }
}

/// A displayable error message; see [`Error::display`].
pub struct Message<'a> {
    err: &'a Error,
    input: &'a [u8],
}

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Error { code, offset } = *self.err;
        match code {
            ErrorCode::TooLarge => write!(
                f,
                "input of {offset} bytes is too large (inputs must be under 4 GiB - 1)"
            ),
            ErrorCode::Empty => write!(f, "empty input (no JSON value)"),
            _ if code.is_expectation() => {
                match self.input.get(offset) {
                    None => write!(f, "unexpected end of input at byte {offset}")?,
                    Some(&b) => {
                        f.write_str("unexpected character ")?;
                        write_char(f, b)?;
                        write!(f, " at byte {offset}")?;
                    }
                }
                write!(f, ", {}", code.phrase())
            }
            ErrorCode::UnterminatedString => {
                write!(f, "unterminated string starting at byte {offset}")
            }
            ErrorCode::DuplicateKey => {
                f.write_str("duplicate key ")?;
                write_key(f, self.input, offset)?;
                write!(f, " at byte {offset}")
            }
            _ => write!(f, "{} at byte {offset}", code.phrase()),
        }
    }
}

/// Quotes one byte for a message: printable ASCII as `'x'`, anything else
/// as `'\xHH'` so messages stay ASCII and single-line.
fn write_char(f: &mut fmt::Formatter<'_>, b: u8) -> fmt::Result {
    if (0x20..0x7f).contains(&b) {
        write!(f, "'{}'", b as char)
    } else {
        write!(f, "'\\x{b:02x}'")
    }
}

/// Quotes the raw key that starts at `offset` (its opening quote), cut to
/// 40 bytes, with non-printable bytes escaped.
fn write_key(f: &mut fmt::Formatter<'_>, input: &[u8], offset: usize) -> fmt::Result {
    const SHOWN: usize = 40;
    let body = input.get(offset + 1..).unwrap_or(&[]);
    let mut end = 0;
    let mut escaped = false;
    while end < body.len() && (escaped || body[end] != b'"') {
        escaped = !escaped && body[end] == b'\\';
        end += 1;
    }
    f.write_str("\"")?;
    for &b in &body[..end.min(SHOWN)] {
        if (0x20..0x7f).contains(&b) {
            write!(f, "{}", b as char)?;
        } else {
            write!(f, "\\x{b:02x}")?;
        }
    }
    if end > SHOWN {
        f.write_str("...")?;
    }
    f.write_str("\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(code: ErrorCode, offset: usize, input: &[u8]) -> String {
        Error::new(code, offset).display(input).to_string()
    }

    #[test]
    fn expectation_messages_quote_the_character() {
        assert_eq!(
            msg(ErrorCode::ExpectedCommaOrBrace, 3, b"{\"a\"x"),
            "unexpected character '\"' at byte 3, expected ',' or '}'"
        );
        assert_eq!(
            msg(ErrorCode::ExpectedColon, 5, b"{\"a\" x"),
            "unexpected character 'x' at byte 5, expected ':'"
        );
        assert_eq!(
            msg(ErrorCode::ExpectedValue, 1, b"[\x01"),
            "unexpected character '\\x01' at byte 1, expected a value"
        );
    }

    #[test]
    fn end_of_input_is_named() {
        assert_eq!(
            msg(ErrorCode::ExpectedCommaOrBracket, 2, b"[1"),
            "unexpected end of input at byte 2, expected ',' or ']'"
        );
    }

    #[test]
    fn positional_messages() {
        assert_eq!(
            msg(ErrorCode::InvalidNumber, 17, b""),
            "invalid number at byte 17"
        );
        assert_eq!(
            msg(ErrorCode::UnterminatedString, 4, b""),
            "unterminated string starting at byte 4"
        );
        assert_eq!(
            msg(ErrorCode::TooLarge, 1 << 32, b""),
            "input of 4294967296 bytes is too large (inputs must be under 4 GiB - 1)"
        );
    }

    #[test]
    fn duplicate_key_message_names_the_key() {
        let input = br#"{"a":1,"mod\u0065l":2}"#;
        assert_eq!(
            msg(ErrorCode::DuplicateKey, 7, input),
            r#"duplicate key "mod\u0065l" at byte 7"#
        );
        let long = format!("{{\"{}\":1}}", "k".repeat(50));
        assert_eq!(
            msg(ErrorCode::DuplicateKey, 1, long.as_bytes()),
            format!("duplicate key \"{}...\" at byte 1", "k".repeat(40))
        );
    }
}
