//! `qjson.encode` of plain Lua values through the Lua C API: lua-cjson's
//! encoder (OpenResty's fork), byte for byte, the way lua-cjson itself
//! reads tables, with no per-value work on the Lua side.
//!
//! The Lua encoder (lua/qjson/encode.lua) is the specification and stays
//! the fallback: for a process whose Lua API cannot be found, for proxies
//! and other tables with a metatable of their own, for cdata (`int64_t`
//! boxes), and for nesting deeper than the Lua stack grows here. On any of
//! these the whole value is handed back ([`Fault::GiveUp`]) and encoded
//! again in Lua, so a value mixing plain tables and proxies is written
//! exactly as before; only the part before the first such value was
//! walked twice.
//!
//! # The walk
//!
//! No recursion: an explicit stack of [`Frame`]s, one per open container,
//! and the containers themselves on the Lua stack (an object's iteration
//! key above its table), grown with `lua_checkstack` as the nesting
//! deepens.
//!
//! lua-cjson counts a table's keys (`lua_array_length`) before writing
//! it, and writes an array by index; that is two passes over every
//! array. Here a table's first key decides the common cases in one: a key
//! that is not a positive integer makes it an object (the count would
//! stop there), and a first key of 1 makes it an array written as
//! `lua_next` goes on returning 2, 3... ([`Frame::Sequence`]), which is
//! how the array part of a table iterates. Any other key after that
//! undoes what was written of it, and the table is counted and written as
//! lua-cjson would. Values are therefore met in the order the Lua encoder
//! meets them, and an error is the one it raises: only a count it would
//! have made first, of a table written as a sequence, can come before
//! (see [`Encoder::first_error`]).
//!
//! Nothing in the walk runs Lua code: tables are read raw (`lua_rawgeti`,
//! `lua_next`), strings are read in place, numbers are not converted to
//! strings, so no metamethod, allocation or finalizer runs until the
//! output is pushed. Only `lua_checkstack` and `lua_pushlstring` may raise
//! (out of memory, or an error from a finalizer the allocation runs),
//! unwinding through this module as the `C-unwind` ABI allows; the Rust
//! code between Lua calls does not panic.
//!
//! # Numbers
//!
//! As lua-cjson prints them with `"%.<precision>g"`, and as the Lua encoder
//! does: an integer below `10^precision` is all its digits; any other
//! number is rounded exactly in integer arithmetic ([`crate::gformat`],
//! which the tests hold to the C library's `snprintf`). The C library's
//! `snprintf` itself, with the configured format and any byte a locale
//! puts in that is not `[0-9.+-e]` made `.`, is left for numbers out of
//! that module's range, and for those the Lua encoder gives it (see
//! [`Encoder::number`]) when the locale's decimal point is longer than a
//! byte.

use core::cell::Cell;
use core::ffi::{c_char, c_int};

use super::{Api, State};
use crate::document::SCRATCH_KEEP_BYTES;
use crate::{escape, gformat};

/// The Lua arguments, in this order (see `qjson_lua_encode` in
/// include/qjson.h): the value, the encoder's options packed into a
/// string (see [`options`]), then the values the encoder knows by
/// identity.
const VALUE: c_int = 1;
const OPTIONS: c_int = 2;
/// The JSON null light userdata (`qjson.null`).
const NULL: c_int = 3;
/// `qjson.array_mt`: a table with it is an array of `#t` elements.
const ARRAY_MT: c_int = 4;
/// `qjson.empty_array_mt`: a table with it is `[]` when empty.
const EMPTY_ARRAY_MT: c_int = 5;
/// `qjson.empty_array`, whose metatable hides behind `__metatable` (it
/// reads as `empty_array_mt`).
const EMPTY_ARRAY: c_int = 6;
/// lua-cjson's `cjson.empty_array` when lua-cjson is loaded, else nil.
const CJSON_EMPTY_ARRAY: c_int = 7;
/// The arguments a call must have.
const ARGUMENTS: c_int = 7;
/// Optional, after them: the longest string of a result in pieces (see
/// [`encode`]), at least [`MIN_PIECE_BYTES`].
const PIECE_BYTES: c_int = 8;
/// The shortest pieces asked for: a text (below 4 GiB) then has fewer
/// than 2^23 of them (each at least half of it), which a `c_int` index
/// counts.
const MIN_PIECE_BYTES: f64 = 1024.0;

/// `LUA_T*` of lua.h; LuaJIT's `lua_type` says 10 for cdata.
const LUA_TNIL: c_int = 0;
const LUA_TBOOLEAN: c_int = 1;
const LUA_TLIGHTUSERDATA: c_int = 2;
const LUA_TNUMBER: c_int = 3;
const LUA_TSTRING: c_int = 4;
const LUA_TTABLE: c_int = 5;
const LUA_TFUNCTION: c_int = 6;
const LUA_TUSERDATA: c_int = 7;
const LUA_TTHREAD: c_int = 8;

/// Free stack slots a C function may use without asking: Lua promises
/// LUA_MINSTACK (20) above the arguments.
const ROOM_ON_ENTRY: c_int = 16;

/// Slots a container needs above its table: an object's key and value
/// (the array-length pass needs as many; the metatable one).
const SLOTS_PER_CONTAINER: c_int = 3;

/// Slots the stack is grown by when the nesting needs more.
const ROOM_PER_CHECK: c_int = 64;

/// Arrays are written up to a length below this (`lua_rawgeti` takes an
/// `int`, and the index after the last must be one too); no table holds
/// that many elements.
const MAX_LENGTH: c_int = c_int::MAX;

/// The longest number `snprintf` writes for `%.16g` of a finite double is
/// 23 bytes ("-2.225073858507201e-308"); cjson's buffer is 32.
const NUMBER_MAX: usize = 32;

/// `"%.<precision>g"` for each precision cjson's option accepts (1 to 16).
const FORMATS: [&core::ffi::CStr; 17] = [
    c"%.0g", c"%.1g", c"%.2g", c"%.3g", c"%.4g", c"%.5g", c"%.6g", c"%.7g", c"%.8g", c"%.9g",
    c"%.10g", c"%.11g", c"%.12g", c"%.13g", c"%.14g", c"%.15g", c"%.16g",
];

/// `10^precision`: integers below it print as all their digits.
const EXACT_INTEGERS: [f64; 17] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
];

/// The first member of C's `struct lconv`, the only one read.
#[repr(C)]
struct LocaleConventions {
    decimal_point: *const c_char,
}

unsafe extern "C" {
    fn snprintf(s: *mut c_char, n: usize, format: *const c_char, ...) -> c_int;
    fn localeconv() -> *const LocaleConventions;
}

thread_local! {
    /// The memory between encodes. An encode re-entered from a finalizer
    /// (which `lua_pushlstring` may run) finds it taken and makes its own.
    static SPARE: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// What an encode keeps between calls.
#[derive(Default)]
struct Scratch {
    /// The JSON text being written.
    out: Vec<u8>,
    /// The open containers, outermost first.
    frames: Vec<Frame>,
}

/// An open container; its table is at stack index `table`. Those read
/// with `lua_next` have the key it returned last at `table + 1`.
#[derive(Clone, Copy)]
enum Frame {
    /// An object: members are written in `lua_next` order.
    Object { table: c_int },
    /// A table whose keys `lua_next` has returned so far are 1 to `count`
    /// in order, written as the elements of an array that began at byte
    /// `start` of the output. The usual table built as an array (its
    /// array part is iterated first, in order) is written in that one
    /// pass; any other key after them undoes it (see [`Encoder::run`]).
    Sequence {
        table: c_int,
        start: usize,
        count: c_int,
    },
    /// An array whose elements `next..=len` are still to be written,
    /// read with `lua_rawgeti`.
    Array {
        table: c_int,
        next: c_int,
        len: c_int,
    },
}

/// Why the walk stopped before the end.
enum Fault {
    /// The Lua encoder is to encode the whole value.
    GiveUp,
    /// "Cannot serialise `<type>`: type not supported".
    Unsupported(&'static str),
    /// "Cannot serialise `<type>`: table key must be a number or string".
    BadKey(&'static str),
    /// A NaN or an infinity.
    NotFinite,
    /// An array sparser than `encode_sparse_array` allows.
    Sparse,
    /// A table entered deeper than `encode_max_depth`, at this depth.
    TooDeep(u32),
}

impl Fault {
    /// The message the Lua encoder raises (lua-cjson's), if this is an
    /// error.
    fn message(&self) -> Option<String> {
        Some(match self {
            Fault::GiveUp => return None,
            Fault::Unsupported(kind) => format!("Cannot serialise {kind}: type not supported"),
            Fault::BadKey(kind) => {
                format!("Cannot serialise {kind}: table key must be a number or string")
            }
            Fault::NotFinite => "Cannot serialise number: must not be NaN or Infinity".to_owned(),
            Fault::Sparse => "Cannot serialise table: excessively sparse array".to_owned(),
            Fault::TooDeep(depth) => format!("Cannot serialise, excessive nesting ({depth})"),
        })
    }
}

/// The encoder's options, read from the arguments once per call.
struct Options {
    /// Index into [`FORMATS`] and [`EXACT_INTEGERS`].
    precision: usize,
    sparse_convert: bool,
    sparse_ratio: f64,
    sparse_safe: f64,
    escape_slash: bool,
    empty_table_as_object: bool,
    max_depth: u32,
    /// `encode_invalid_numbers` is not "off": a NaN or an infinity is
    /// written by the Lua encoder.
    invalid_numbers_in_lua: bool,
    /// `encode_skip_unsupported_value_types`: a value of a type JSON
    /// lacks is left out, by the Lua encoder.
    skip_unsupported_in_lua: bool,
}

impl Options {
    /// The fault `fault` is, under these options: the Lua encoder's to
    /// deal with, where an option makes it no error.
    fn judge(&self, fault: Fault) -> Fault {
        match fault {
            Fault::NotFinite if self.invalid_numbers_in_lua => Fault::GiveUp,
            Fault::Unsupported(_) if self.skip_unsupported_in_lua => Fault::GiveUp,
            fault => fault,
        }
    }
}

/// Encodes the value at argument 1 and returns the Lua results: the JSON
/// text; or nil and the error message the Lua encoder raises; or nothing
/// when the Lua encoder is to encode it (see the module docs), including
/// when the arguments are not what lua/qjson/encode.lua passes.
///
/// With an eighth argument `n` (`qjson.encode_pieces`), the text comes
/// back as an array of strings of at most `n` bytes each, in order, and
/// its length: no Lua string of the whole text is made, and LuaJIT's
/// allocator maps and unmaps fresh memory for every string of 128 KB or
/// more (see docs/architecture.md, "Encode in pieces"). Piece `k` (from
/// 0) is `n - k % (n / 2)` bytes long (the last one shorter), as the Lua
/// encoder cuts them: pieces of one length whose bytes differ only where
/// LuaJIT's string hash does not read would share a hash chain, each
/// compared with all before it, which text from a client can arrange.
///
/// # Safety
/// `state` is the `lua_State` that called the `lua_CFunction` this runs
/// in, and `api` its API.
pub unsafe fn encode(api: &Api, state: State) -> c_int {
    // SAFETY: a live state.
    let base = unsafe { (api.gettop)(state) };
    let piece_bytes = match base {
        ARGUMENTS => None,
        // SAFETY: live state; the index exists (base == PIECE_BYTES).
        PIECE_BYTES => match unsafe { (api.tonumber)(state, PIECE_BYTES) } {
            n if (MIN_PIECE_BYTES..=f64::from(u32::MAX)).contains(&n) => Some(n as usize),
            _ => return 0,
        },
        _ => return 0,
    };
    // SAFETY: live state; the indices exist (base >= ARGUMENTS).
    let Some(options) = (unsafe { options(api, state) }) else {
        return 0;
    };
    let mut scratch = SPARE.with(Cell::take).unwrap_or_default();
    scratch.out.clear();
    scratch.frames.clear();
    let mut encoder = Encoder {
        api,
        state,
        options,
        out: &mut scratch.out,
        frames: &mut scratch.frames,
        ensured: base + ROOM_ON_ENTRY,
        wide_decimal_point: None,
    };
    // SAFETY: the caller's state and api; the stack holds the arguments.
    let walked = unsafe { encoder.run() }.map_err(|fault| encoder.options.judge(fault));
    // SAFETY: as above; the frames describe the stack the walk left.
    let walked = unsafe { encoder.first_error(walked) };
    // SAFETY: base is a height the stack had.
    unsafe { (api.settop)(state, base) };
    let results = match walked {
        Ok(()) => match piece_bytes {
            // SAFETY: live state with free slots (the walk's are popped);
            // out is out.len() readable bytes. May run finalizers, which
            // may encode: they find SPARE empty.
            None => unsafe {
                (api.pushlstring)(state, scratch.out.as_ptr().cast(), scratch.out.len());
                1
            },
            // SAFETY: as above; each piece is popped into the table
            // before the next is pushed, so two slots are used.
            Some(n) => unsafe {
                // Fewer than 2^23 pieces (see MIN_PIECE_BYTES): the
                // casts to c_int are exact.
                let out = &scratch.out;
                (api.createtable)(state, out.len().div_ceil(n / 2) as c_int, 0);
                let (mut at, mut k) = (0, 0);
                while at < out.len() {
                    let piece = &out[at..out.len().min(at + n - k % (n / 2))];
                    (api.pushlstring)(state, piece.as_ptr().cast(), piece.len());
                    k += 1;
                    (api.rawseti)(state, -2, k as c_int);
                    at += piece.len();
                }
                (api.pushnumber)(state, scratch.out.len() as f64);
                2
            },
        },
        Err(fault) => match fault.message() {
            Some(message) => {
                // SAFETY: live state with free slots; message is
                // message.len() readable bytes.
                unsafe {
                    (api.pushnil)(state);
                    (api.pushlstring)(state, message.as_ptr().cast(), message.len());
                }
                2
            }
            None => 0,
        },
    };
    if scratch.out.capacity() <= SCRATCH_KEEP_BYTES {
        SPARE.with(|spare| spare.set(Some(scratch)));
    }
    results
}

/// The options, from the string at argument 2 that lua/qjson/encode.lua
/// packs whenever one changes (one argument read, not seven): 14 bytes,
/// `encode_number_precision`; flags, 1 `sparse_convert`, 2
/// `escape_slash`, 4 `empty_table_as_object`, 8 `encode_invalid_numbers`
/// other than "off", 16 `encode_skip_unsupported_value_types`; then
/// `sparse_ratio`, `sparse_safe` and `encode_max_depth` as little-endian
/// `u32`s. `None` when it is not such a string or a value is out of its
/// setter's range.
///
/// # Safety
/// `state` is live, `api` its API, and the stack holds the arguments.
unsafe fn options(api: &Api, state: State) -> Option<Options> {
    let mut len = 0usize;
    // SAFETY: live state, an existing index; the bytes of a string are
    // alive while it is on the stack (a number would be converted in
    // place, and then fail the length check).
    let packed = unsafe {
        let s = (api.tolstring)(state, OPTIONS, &mut len);
        if s.is_null() {
            return None;
        }
        core::slice::from_raw_parts(s.cast::<u8>(), len)
    };
    let &[precision, flags, ref numbers @ ..] = packed else {
        return None;
    };
    let number = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            numbers.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    let (ratio, safe, max_depth) = (number(0)?, number(4)?, number(8)?);
    if numbers.len() != 12 || !(1..=16).contains(&precision) || max_depth == 0 {
        return None;
    }
    Some(Options {
        precision: usize::from(precision),
        sparse_convert: flags & 1 != 0,
        sparse_ratio: f64::from(ratio),
        sparse_safe: f64::from(safe),
        escape_slash: flags & 2 != 0,
        empty_table_as_object: flags & 4 != 0,
        max_depth,
        invalid_numbers_in_lua: flags & 8 != 0,
        skip_unsupported_in_lua: flags & 16 != 0,
    })
}

/// The walk of one encode.
struct Encoder<'a> {
    api: &'a Api,
    /// The state that called `encode`.
    state: State,
    options: Options,
    out: &'a mut Vec<u8>,
    frames: &'a mut Vec<Frame>,
    /// The stack has room up to this index (`lua_checkstack`).
    ensured: c_int,
    /// See [`Encoder::wide_decimal_point`].
    wide_decimal_point: Option<bool>,
}

impl Encoder<'_> {
    /// Writes the value at argument 1 into `out`.
    ///
    /// # Safety
    /// The stack holds the arguments and nothing above them.
    unsafe fn run(&mut self) -> Result<(), Fault> {
        let (api, state) = (self.api, self.state);
        // SAFETY: live state; one slot of ROOM_ON_ENTRY.
        unsafe {
            (api.pushvalue)(state, VALUE);
            self.value_at_top()?;
        }
        while let Some(frame) = self.frames.last_mut() {
            match frame {
                Frame::Object { table } => {
                    let table = *table;
                    // SAFETY: live state; the stack is [.. table key] with
                    // the key lua_next returned last, and a slot ensured
                    // for the value.
                    if unsafe { (api.next)(state, table) } == 0 {
                        self.close(b'}', table);
                        continue;
                    }
                    self.out.push(b',');
                    // SAFETY: live state; the stack is [.. table key value].
                    unsafe {
                        self.key(table + 1)?;
                        self.value_at_top()?;
                    }
                }
                Frame::Sequence {
                    table,
                    start,
                    count,
                } => {
                    let (table, start, expected) = (*table, *start, *count + 1);
                    // SAFETY: as for an object.
                    if unsafe { (api.next)(state, table) } == 0 {
                        self.close(b']', table);
                        continue;
                    }
                    // SAFETY: live state; the stack is [.. table key value].
                    if unsafe { self.number_key(table + 1) } == Some(f64::from(expected)) {
                        if let Some(Frame::Sequence { count, .. }) = self.frames.last_mut() {
                            *count = expected;
                        }
                        self.out.push(b',');
                        // SAFETY: the value is on top.
                        unsafe { self.value_at_top()? };
                    } else {
                        // Not keys 1, 2, 3... in order after all: what was
                        // written of it goes, and it is read again as the
                        // Lua encoder reads it.
                        self.out.truncate(start);
                        self.frames.pop();
                        // SAFETY: live state; the table is at `table`, with
                        // the slots ensured when it was opened.
                        unsafe {
                            (api.settop)(state, table);
                            self.open_counted(table, false)?;
                        }
                    }
                }
                Frame::Array { table, next, len } => {
                    let (table, i) = (*table, *next);
                    if i > *len {
                        self.close(b']', table);
                        continue;
                    }
                    *next = i + 1;
                    if i > 1 {
                        self.out.push(b',');
                    }
                    // SAFETY: live state; the table is at `table` and the
                    // top, with a slot ensured above.
                    unsafe {
                        (api.rawgeti)(state, table, i);
                        self.value_at_top()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The error the Lua encoder raises first, given the walk's outcome.
    ///
    /// A table written as a [`Frame::Sequence`] was entered before all its
    /// keys were seen; the Lua encoder counts them first, and stops there
    /// if they make an array too sparse. So when the walk stopped on an
    /// error inside such tables, each one's keys are counted, outermost
    /// first: the first one too sparse is the error. Were none, the Lua
    /// encoder meets the same error: it reads the same values in the same
    /// order whether it writes such a table as an array or an object.
    ///
    /// # Safety
    /// The stack is as the walk left it, and the frames describe it.
    unsafe fn first_error(&mut self, walked: Result<(), Fault>) -> Result<(), Fault> {
        let Err(fault) = walked else {
            return Ok(());
        };
        if matches!(fault, Fault::GiveUp) {
            return Err(fault);
        }
        let (api, state) = (self.api, self.state);
        for i in 0..self.frames.len() {
            let Some(&Frame::Sequence { table, .. }) = self.frames.get(i) else {
                continue;
            };
            // SAFETY: live state; the table is at `table`. The count needs
            // two slots above the top, which is put back after it.
            unsafe {
                let top = (api.gettop)(state);
                if (api.checkstack)(state, 2) == 0 {
                    return Err(Fault::GiveUp);
                }
                let counted = self.array_length(table);
                (api.settop)(state, top);
                counted?;
            }
        }
        Err(fault)
    }

    /// Ends the innermost container with `bracket` and pops its table (at
    /// `table`) and what lies above it.
    #[inline(always)]
    fn close(&mut self, bracket: u8, table: c_int) {
        self.out.push(bracket);
        self.frames.pop();
        // SAFETY: live state; table - 1 is a height the stack had.
        unsafe { (self.api.settop)(self.state, table - 1) };
    }

    /// Writes the value on top of the stack and pops it; a table is
    /// opened instead (its frame pushed, the table left as its slot).
    ///
    /// # Safety
    /// The value is at the top of a live stack, and the frames describe
    /// the slots below it.
    #[inline(always)]
    unsafe fn value_at_top(&mut self) -> Result<(), Fault> {
        let (api, state) = (self.api, self.state);
        // SAFETY: a live state whose top (index -1) is the value; a
        // string's bytes stay alive while it is on the stack, which it is
        // until popped at the end. `open` is given a table on top.
        unsafe {
            match (api.type_)(state, -1) {
                LUA_TSTRING => {
                    let mut len = 0usize;
                    let s = (api.tolstring)(state, -1, &mut len);
                    self.string(core::slice::from_raw_parts(s.cast::<u8>(), len));
                }
                LUA_TNUMBER => self.number((api.tonumber)(state, -1))?,
                // `qjson.empty_array` is a value, as `cjson.empty_array`
                // is: no level of nesting for `encode_max_depth`.
                LUA_TTABLE if (api.rawequal)(state, -1, EMPTY_ARRAY) != 0 => {
                    self.out.extend_from_slice(b"[]");
                }
                LUA_TTABLE => return self.open(),
                LUA_TBOOLEAN => {
                    let b = (api.toboolean)(state, -1) != 0;
                    self.out
                        .extend_from_slice(if b { b"true" } else { b"false" });
                }
                LUA_TNIL => self.out.extend_from_slice(b"null"),
                LUA_TLIGHTUSERDATA => {
                    if (api.rawequal)(state, -1, NULL) != 0 {
                        self.out.extend_from_slice(b"null");
                    } else if (api.rawequal)(state, -1, CJSON_EMPTY_ARRAY) != 0 {
                        self.out.extend_from_slice(b"[]");
                    } else {
                        return Err(Fault::Unsupported("userdata"));
                    }
                }
                LUA_TFUNCTION => return Err(Fault::Unsupported("function")),
                LUA_TUSERDATA => return Err(Fault::Unsupported("userdata")),
                LUA_TTHREAD => return Err(Fault::Unsupported("thread")),
                // cdata: int64_t and uint64_t boxes, or an error, in Lua.
                _ => return Err(Fault::GiveUp),
            }
            (api.settop)(state, -2);
        }
        Ok(())
    }

    /// Opens the table on top of the stack as the Lua encoder's
    /// `put_table` would, writing its first value when it has one.
    ///
    /// Its first key decides most tables: a key that is not a positive
    /// integer makes an object (the array-length pass would stop there),
    /// so it is written as one from that member on; a key of 1 starts a
    /// [`Frame::Sequence`]. Only a table whose first key is another
    /// positive integer gets the array-length pass first.
    ///
    /// # Safety
    /// The table is at the top of a live stack, and the frames describe
    /// the slots below it.
    unsafe fn open(&mut self) -> Result<(), Fault> {
        let (api, state) = (self.api, self.state);
        let depth = self.frames.len() as u32 + 1;
        if depth > self.options.max_depth {
            return Err(Fault::TooDeep(depth));
        }
        // SAFETY: live state.
        let table = unsafe { (api.gettop)(state) };
        if table + SLOTS_PER_CONTAINER > self.ensured {
            // SAFETY: live state.
            if unsafe { (api.checkstack)(state, SLOTS_PER_CONTAINER + ROOM_PER_CHECK) } == 0 {
                // Deeper than this C function's stack may grow: the Lua
                // encoder starts a new stack every few hundred levels.
                return Err(Fault::GiveUp);
            }
            self.ensured = table + SLOTS_PER_CONTAINER + ROOM_PER_CHECK;
        }
        // SAFETY: a live state with the table at `table`, the top, and
        // SLOTS_PER_CONTAINER slots above it: the metatable, or lua_next's
        // key and value, take two. The first value is on top when written;
        // `open_counted` is given the table on top.
        unsafe {
            let mut empty_array = false;
            if (api.getmetatable)(state, table) != 0 {
                let array = (api.rawequal)(state, -1, ARRAY_MT) != 0;
                // (`qjson.empty_array` itself is written as a value.)
                empty_array = (api.rawequal)(state, -1, EMPTY_ARRAY_MT) != 0;
                (api.settop)(state, table);
                if array {
                    // `#t`: what lies past its border is not written.
                    let len = (api.objlen)(state, table);
                    let len = c_int::try_from(len)
                        .ok()
                        .filter(|&len| len < MAX_LENGTH)
                        .ok_or(Fault::GiveUp)?;
                    self.open_array(table, len);
                    return Ok(());
                }
                if !empty_array {
                    // A proxy, or a metatable the Lua encoder asks about.
                    return Err(Fault::GiveUp);
                }
            }
            (api.pushnil)(state);
            if (api.next)(state, table) == 0 {
                let array = empty_array || !self.options.empty_table_as_object;
                self.out
                    .extend_from_slice(if array { b"[]" } else { b"{}" });
                (api.settop)(state, table - 1);
                return Ok(());
            }
            // The stack is [.. table key value].
            // A table marked as an empty array but holding something is
            // counted first (`open_counted`): lua-cjson writes it as an
            // array by its keys, else of `#t` elements.
            match self.number_key(table + 1) {
                Some(1.0) if !empty_array => {
                    let start = self.out.len();
                    self.out.push(b'[');
                    self.frames.push(Frame::Sequence {
                        table,
                        start,
                        count: 1,
                    });
                    self.value_at_top()
                }
                Some(k) if k >= 1.0 && is_integral(k) => {
                    (api.settop)(state, table);
                    self.open_counted(table, empty_array)
                }
                // Not an array by its first key: `#t` elements, which the
                // Lua encoder writes for this rare table.
                _ if empty_array => Err(Fault::GiveUp),
                _ => {
                    self.out.push(b'{');
                    self.frames.push(Frame::Object { table });
                    self.key(table + 1)?;
                    self.value_at_top()
                }
            }
        }
    }

    /// Starts writing the table at `table` as an array of `len` elements,
    /// read by index from 1.
    fn open_array(&mut self, table: c_int, len: c_int) {
        self.out.push(b'[');
        self.frames.push(Frame::Array {
            table,
            next: 1,
            len,
        });
    }

    /// Opens the table at `table` (the top) after lua-cjson's array-length
    /// pass over all its keys: as an array of that length, or an object
    /// (or, when it is marked as an empty array, `empty_array`, not at
    /// all: the Lua encoder writes its `#t` elements).
    ///
    /// # Safety
    /// The table is at the top of a live stack, with
    /// SLOTS_PER_CONTAINER slots above it, and the frames describe the
    /// slots below it.
    unsafe fn open_counted(&mut self, table: c_int, empty_array: bool) -> Result<(), Fault> {
        let (api, state) = (self.api, self.state);
        // SAFETY: the caller's guarantees; lua_next's first key is nil,
        // and its key and value take two of the slots above the table.
        unsafe {
            let len = self.array_length(table)?;
            if len > 0 || (len == 0 && !self.options.empty_table_as_object) {
                self.open_array(table, len);
                return Ok(());
            }
            if empty_array {
                // Marked as an empty array, not one by its keys: `#t`
                // elements, the Lua encoder's to write.
                return Err(Fault::GiveUp);
            }
            self.out.push(b'{');
            (api.pushnil)(state);
            if (api.next)(state, table) == 0 {
                self.out.push(b'}');
                (api.settop)(state, table - 1);
                return Ok(());
            }
            self.frames.push(Frame::Object { table });
            self.key(table + 1)?;
            self.value_at_top()
        }
    }

    /// The number at stack index `at`, if it is one.
    ///
    /// # Safety
    /// `at` is a valid index of a live stack.
    #[inline(always)]
    unsafe fn number_key(&self, at: c_int) -> Option<f64> {
        // SAFETY: live state, valid index.
        unsafe {
            if (self.api.type_)(self.state, at) == LUA_TNUMBER {
                Some((self.api.tonumber)(self.state, at))
            } else {
                None
            }
        }
    }

    /// lua-cjson's `lua_array_length` of the table at `table`: the largest
    /// key when every key is a positive integer and the array is not too
    /// sparse, -1 for an object (or a sparse array to convert). The stack
    /// is as it was after.
    ///
    /// # Safety
    /// `table` is a valid index of a live stack with two slots above its
    /// top.
    unsafe fn array_length(&mut self, table: c_int) -> Result<c_int, Fault> {
        let (api, state) = (self.api, self.state);
        let (mut max, mut items) = (0.0f64, 0.0f64);
        // SAFETY: a live state, two slots for lua_next's key and value;
        // the stack is [.. key] between lua_next calls, [.. key value]
        // after one that returned nonzero, and lua_next pops the key when
        // it returns 0.
        unsafe {
            (api.pushnil)(state);
            while (api.next)(state, table) != 0 {
                (api.settop)(state, -2);
                match self.number_key(-1) {
                    Some(k) if k >= 1.0 && is_integral(k) => {
                        max = max.max(k);
                        items += 1.0;
                    }
                    _ => {
                        (api.settop)(state, -2);
                        return Ok(-1);
                    }
                }
            }
        }
        let Options {
            sparse_ratio: ratio,
            sparse_safe: safe,
            ..
        } = self.options;
        if ratio > 0.0 && max > items * ratio && max > safe {
            if !self.options.sparse_convert {
                return Err(Fault::Sparse);
            }
            return Ok(-1);
        }
        // A length past what lua_rawgeti takes (sparse arrays allowed, a
        // key of 2^40): the Lua encoder's business.
        c_int::try_from(max as i64)
            .ok()
            .filter(|&len| f64::from(len) == max && len < MAX_LENGTH)
            .ok_or(Fault::GiveUp)
    }

    /// Writes the key at stack index `at` and its colon.
    ///
    /// # Safety
    /// `at` is a valid index of a live stack.
    unsafe fn key(&mut self, at: c_int) -> Result<(), Fault> {
        let (api, state) = (self.api, self.state);
        // SAFETY: live state, valid index; a string's bytes stay alive
        // while it is on the stack, which it is (lua_next's key).
        unsafe {
            match (api.type_)(state, at) {
                LUA_TSTRING => {
                    let mut len = 0usize;
                    let s = (api.tolstring)(state, at, &mut len);
                    self.string(core::slice::from_raw_parts(s.cast::<u8>(), len));
                }
                LUA_TNUMBER => {
                    self.out.push(b'"');
                    self.number((api.tonumber)(state, at))?;
                    self.out.push(b'"');
                }
                LUA_TBOOLEAN => return Err(Fault::BadKey("boolean")),
                LUA_TLIGHTUSERDATA | LUA_TUSERDATA => return Err(Fault::BadKey("userdata")),
                LUA_TTABLE => return Err(Fault::BadKey("table")),
                LUA_TFUNCTION => return Err(Fault::BadKey("function")),
                LUA_TTHREAD => return Err(Fault::BadKey("thread")),
                _ => return Err(Fault::GiveUp),
            }
        }
        self.out.push(b':');
        Ok(())
    }

    /// Writes `s` as a JSON string.
    fn string(&mut self, s: &[u8]) {
        escape::escape_into(s, self.options.escape_slash, self.out);
    }

    /// Writes `n` as lua-cjson does (see the module docs).
    fn number(&mut self, n: f64) -> Result<(), Fault> {
        if !n.is_finite() {
            return Err(Fault::NotFinite);
        }
        let exact = EXACT_INTEGERS[self.options.precision];
        // Below 10^16 < 2^63 the conversion truncates exactly.
        if n < exact && n > -exact && (n as i64) as f64 == n {
            if n == 0.0 && n.is_sign_negative() {
                self.out.extend_from_slice(b"-0");
            } else {
                write_integer(n as i64, self.out);
            }
            return Ok(());
        }
        // A number that cannot be halfway between two candidates has one
        // correct rounding, whoever computes it, and the Lua encoder prints
        // it with LuaJIT's formatter, whatever the locale. The others
        // (integers too long, fractions of at most 24 bits) it gives to
        // snprintf, whose decimal point, one byte after the replacement
        // below, is `.` unless the locale's has more bytes than one.
        let may_tie = is_integral(n) || is_integral(n * 16_777_216.0);
        if (!may_tie || !self.wide_decimal_point())
            && gformat::write(n, self.options.precision, self.out)
        {
            return Ok(());
        }
        let mut text = [0u8; NUMBER_MAX];
        let format = FORMATS[self.options.precision];
        // SAFETY: text has NUMBER_MAX writable bytes; format is a
        // NUL-terminated "%.<p>g", which takes one double.
        let len = unsafe { snprintf(text.as_mut_ptr().cast(), NUMBER_MAX, format.as_ptr(), n) };
        let len = usize::try_from(len).unwrap_or(0).min(NUMBER_MAX - 1);
        for byte in &mut text[..len] {
            if !matches!(byte, b'0'..=b'9' | b'.' | b'-' | b'+' | b'e') {
                // The locale's decimal point, as cjson writes it.
                *byte = b'.';
            }
        }
        self.out.extend_from_slice(&text[..len]);
        Ok(())
    }

    /// Whether the C library's decimal point (the locale's) is longer than
    /// one byte; asked once per encode, when first needed.
    fn wide_decimal_point(&mut self) -> bool {
        *self.wide_decimal_point.get_or_insert_with(|| {
            // SAFETY: localeconv returns NULL or a struct whose first
            // member, decimal_point, is a NUL-terminated string (C89); it
            // is read at once, before anything may change the locale.
            unsafe {
                let conventions = localeconv();
                if conventions.is_null() || (*conventions).decimal_point.is_null() {
                    return true;
                }
                core::ffi::CStr::from_ptr((*conventions).decimal_point).count_bytes() != 1
            }
        })
    }
}

/// Whether `x` (not NaN) is an integer, as `math.floor(x) == x` says
/// (infinities are), without a call to `floor`: every double from 2^52 on
/// is one, and below that the conversion to `i64` truncates exactly.
fn is_integral(x: f64) -> bool {
    x.abs() >= 4_503_599_627_370_496.0 || (x as i64) as f64 == x
}

/// Appends the decimal digits of `n`, two at a time.
fn write_integer(n: i64, out: &mut Vec<u8>) {
    /// "00" to "99".
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    while rest >= 100 {
        let pair = (rest % 100) as usize * 2;
        rest /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if rest >= 10 {
        let pair = rest as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + rest as u8;
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn integer(n: i64) -> String {
        let mut out = Vec::new();
        write_integer(n, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers_print_all_their_digits() {
        for n in [
            0,
            1,
            -1,
            9,
            10,
            -10,
            99,
            100,
            101,
            12345,
            99_999_999_999_999,
            -99_999_999_999_999,
            i64::MIN + 1,
            i64::MAX,
        ] {
            assert_eq!(integer(n), n.to_string());
        }
    }

    #[test]
    fn integral_as_floor_says() {
        for x in [
            0.0,
            -0.0,
            1.0,
            1.5,
            -2.5,
            2f64.powi(52),
            2f64.powi(52) + 1.0,
            2f64.powi(53) - 0.5,
            1e300,
            f64::INFINITY,
            -f64::INFINITY,
            0.1,
            4503599627370495.5,
        ] {
            assert_eq!(is_integral(x), x.floor() == x, "{x}");
        }
    }

    #[test]
    fn formats_are_precisions() {
        for (p, format) in FORMATS.iter().enumerate() {
            assert_eq!(format.to_str().unwrap(), format!("%.{p}g"));
            // From an exact integer: `powi` need not round exactly (Miri
            // makes it err by an ulp at random).
            assert_eq!(EXACT_INTEGERS[p], 10u64.pow(p as u32) as f64);
        }
    }

    #[test]
    fn messages_are_cjsons() {
        assert_eq!(
            Fault::TooDeep(1001).message().unwrap(),
            "Cannot serialise, excessive nesting (1001)"
        );
        assert_eq!(
            Fault::BadKey("boolean").message().unwrap(),
            "Cannot serialise boolean: table key must be a number or string"
        );
        assert!(Fault::GiveUp.message().is_none());
    }
}
