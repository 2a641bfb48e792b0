//! `qjson.decode(text, { lazy = false })` through the Lua C API: the text
//! is validated and built into Lua tables in one pass over its bytes
//! ([`crate::eager`]), the way lua-cjson builds its tables, with no
//! per-value work on the Lua side and no intermediate copy of the
//! document. (A small text of a shape seen before is built by a Lua
//! function written for its shape instead: [`crate::eager::shape`].)
//!
//! The same build in Lua over the FFI (lua/qjson/lazy.lua) costs a
//! `ffi.string` and a few field loads per value and, for a small document,
//! more in fixed costs than cjson's whole decode. The FFI build stays as
//! the fallback for a Lua whose API cannot be found, and for documents
//! nested deeper than the Lua stack may grow (a few thousand levels).
//!
//! Values wait on the Lua stack above their container's slot (a nil
//! until the container's table is made) and go into the table in chunks
//! of [`eager::CHUNK`] and when it closes: `lua_createtable` at the final
//! size for any container that closes within its first chunk, then
//! `lua_rawseti` / `lua_rawset` from the top of the stack down.
//!
//! Invalid text: what was built is dropped (as lua-cjson does) and the
//! text is parsed again by [`Document`](crate::document::Document) for
//! the error `qjson.parse` would report, code and offset.

use core::cell::Cell;
use core::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{Api, State};
use crate::document::{SCRATCH_KEEP_BYTES, pool};
use crate::eager::{self, Flow, Outcome, Scratch, Stack, Stop};
use crate::error::Error;
use crate::validate::{DuplicateKeys, Options};

/// Stack slots a container may use above the top where it opens: its
/// slot, a chunk of values (two slots per member) and three for
/// [`LuaSink::store`]. Each container asks for them when it opens
/// (`lua_checkstack` from the top, so a closed child's room serves its
/// parent again), and no value needs a check of its own: a container's
/// values and its open child's slot stay within them. A scalar at the
/// root takes one of the LUA_MINSTACK (20) slots Lua gives a C function.
/// Measured: asking once at the root for it and its children (twice the
/// room) costs more on the tool call (4571 against 4541 instructions,
/// tools/lua_insns.sh tool-eager).
const ROOM_PER_CONTAINER: c_int = 1 + 2 * eager::CHUNK as c_int + 3;

thread_local! {
    /// The scratch between decodes. A decode re-entered from a finalizer
    /// (which a Lua allocation may run) finds it taken and makes its own.
    static SPARE: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// The Lua arguments: 1 the text, 2 `max_depth`, 3 `duplicate_keys`
/// (`QJSON_DUPLICATE_KEYS_*`), 4 the null value, 5 the metatable of empty
/// arrays, 6 the metatable of every array (nil or absent unless
/// `decode_array_with_array_mt` is on); 7 and 8, when given, the byte
/// offsets `[from, to)` of the part of the text to decode: a value that
/// qjson.materialize finds unchanged in a document parsed before.
const TEXT: c_int = 1;
const MAX_DEPTH: c_int = 2;
const DUPLICATE_KEYS: c_int = 3;
const NULL: c_int = 4;
const EMPTY_ARRAY_MT: c_int = 5;
const ARRAY_MT: c_int = 6;
const FROM: c_int = 7;
const TO: c_int = 8;

/// `LUA_TNIL` of lua.h.
const LUA_TNIL: c_int = 0;

/// Decodes the text at argument 1 into plain tables and returns the Lua
/// results: the value; or nil and the error message ("invalid number at
/// byte 17"); or nil alone when this path does not build it (bad
/// arguments, nesting deeper than the Lua stack allows), for the caller
/// to take the FFI path instead.
///
/// # Safety
/// `state` is the `lua_State` that called the `lua_CFunction` this runs
/// in, and `api` its API.
pub unsafe fn decode(api: &Api, state: State) -> c_int {
    let mut len = 0usize;
    // SAFETY: a live state; index 1 exists or tolstring returns NULL. (The
    // caller passes a string: a number would be converted in place.)
    let text = unsafe { (api.tolstring)(state, TEXT, &mut len) };
    if text.is_null() {
        return give_up(api, state);
    }
    // SAFETY: lua_tolstring's string is len bytes and stays alive while it
    // is on the stack, which it is until this function returns.
    let text: &[u8] = unsafe { core::slice::from_raw_parts(text.cast(), len) };
    // SAFETY: live state; an index above the top reads as none.
    let spanned = unsafe { (api.type_)(state, FROM) } > LUA_TNIL;
    let input = if spanned {
        // SAFETY: live state, existing indices (a missing TO reads as 0).
        let (from, to) = unsafe { ((api.tonumber)(state, FROM), (api.tonumber)(state, TO)) };
        let whole = |x: f64| x.fract() == 0.0;
        if !(0.0 <= from && from <= to && to <= len as f64 && whole(from) && whole(to)) {
            return give_up(api, state);
        }
        &text[from as usize..to as usize]
    } else {
        text
    };
    // SAFETY: live state, existing indices.
    let (max_depth, duplicate_keys) = unsafe {
        (
            (api.tonumber)(state, MAX_DEPTH),
            (api.tonumber)(state, DUPLICATE_KEYS),
        )
    };
    let duplicate_keys = match duplicate_keys as i32 {
        0 => DuplicateKeys::LastWins,
        1 => DuplicateKeys::Error,
        _ => return give_up(api, state),
    };
    if !(1.0..=f64::from(u32::MAX)).contains(&max_depth) {
        return give_up(api, state);
    }
    let opts = Options {
        max_depth: max_depth as u32,
        duplicate_keys,
    };

    let mut scratch = SPARE.with(Cell::take).unwrap_or_default();
    // SAFETY: live state.
    let base = unsafe { (api.gettop)(state) };
    let mut sink = LuaSink {
        api,
        state,
        strict: duplicate_keys == DuplicateKeys::Error,
        // SAFETY: live state; an index above the top reads as none.
        arrays_mt: unsafe { (api.type_)(state, ARRAY_MT) } > LUA_TNIL,
    };
    let outcome = eager::decode(input, &opts, &mut scratch, &mut sink);
    if scratch.retained_bytes() <= SCRATCH_KEEP_BYTES {
        SPARE.with(|spare| spare.set(Some(scratch)));
    }
    match outcome {
        Outcome::Done => 1,
        // A part of a text that a document holds is valid; were it not,
        // an error's offset would be the part's, not the text's, so a
        // part gives up as for any other reason (below).
        Outcome::Invalid if !spanned => {
            // SAFETY: base is a height the stack had.
            unsafe { (api.settop)(state, base) };
            // Rust only: a panic is caught here and never unwinds into Lua.
            let parsed = catch_unwind(AssertUnwindSafe(|| {
                let mut doc = pool::take();
                let result = doc.load(input, &opts);
                pool::give_back(doc);
                result
            }));
            match parsed {
                // SAFETY: the caller's state and api.
                Ok(Err(e)) => unsafe { push_error(api, state, e, input) },
                // Validation accepts what the walk refused: a bug, which
                // the FFI path (built on validation) does not share.
                _ => give_up(api, state),
            }
        }
        Outcome::Invalid | Outcome::GiveUp => {
            // SAFETY: base is a height the stack had.
            unsafe { (api.settop)(state, base) };
            give_up(api, state)
        }
    }
}

/// Pushes nil: "take the other path".
fn give_up(api: &Api, state: State) -> c_int {
    // SAFETY: the caller's live state; one slot is always available.
    unsafe { (api.pushnil)(state) };
    1
}

/// Pushes nil and the message of `e`.
///
/// # Safety
/// `state` is live and `api` its API.
unsafe fn push_error(api: &Api, state: State, e: Error, input: &[u8]) -> c_int {
    let message = e.display(input).to_string();
    // SAFETY: live state; two slots are within LUA_MINSTACK.
    unsafe {
        (api.pushnil)(state);
        (api.pushlstring)(state, message.as_ptr().cast::<c_char>(), message.len());
    }
    2
}

/// Builds values on the Lua stack, as the module docs describe.
struct LuaSink<'a> {
    api: &'a Api,
    /// The state that called `decode`.
    state: State,
    /// Whether a repeated key makes the text invalid.
    strict: bool,
    /// Whether every array gets the metatable at [`ARRAY_MT`] (else an
    /// empty one gets the one at [`EMPTY_ARRAY_MT`]).
    arrays_mt: bool,
}

impl LuaSink<'_> {
    /// Pushes the bytes `s` as a string.
    #[inline(always)]
    fn push_string(&mut self, s: &[u8]) -> Flow {
        // SAFETY: live state with a free slot (ROOM_PER_CONTAINER); s is
        // s.len() readable bytes.
        unsafe { (self.api.pushlstring)(self.state, s.as_ptr().cast::<c_char>(), s.len()) };
        Ok(())
    }
}

impl Stack for LuaSink<'_> {
    /// A key is made like any string: a cache of the key strings made
    /// before (a Lua table's slot read and compared) cost more than
    /// `lua_pushlstring` finding the string LuaJIT already holds
    /// (docs/benchmarks.md, "Small documents in instructions").
    fn key(&mut self, key: &[u8]) -> Flow {
        self.push_string(key)
    }

    fn string(&mut self, s: &[u8]) -> Flow {
        self.push_string(s)
    }

    fn number(&mut self, n: f64) -> Flow {
        // SAFETY: live state with a free slot (ROOM_PER_CONTAINER).
        unsafe { (self.api.pushnumber)(self.state, n) };
        Ok(())
    }

    fn boolean(&mut self, b: bool) -> Flow {
        // SAFETY: live state with a free slot (ROOM_PER_CONTAINER).
        unsafe { (self.api.pushboolean)(self.state, c_int::from(b)) };
        Ok(())
    }

    fn null(&mut self) -> Flow {
        // SAFETY: live state with a free slot (ROOM_PER_CONTAINER).
        unsafe { (self.api.pushvalue)(self.state, NULL) };
        Ok(())
    }

    fn open(&mut self) -> Flow {
        // SAFETY: live state.
        if unsafe { (self.api.checkstack)(self.state, ROOM_PER_CONTAINER) } == 0 {
            return Err(Stop::GiveUp);
        }
        // SAFETY: live state with a free slot (ROOM_PER_CONTAINER).
        unsafe { (self.api.pushnil)(self.state) };
        Ok(())
    }

    fn store(
        &mut self,
        object: bool,
        stored: u32,
        pending: u32,
        distinct: bool,
        last: bool,
    ) -> Flow {
        let per: u32 = if object { 2 } else { 1 };
        let (Ok(slots), Ok(count), Ok(stored)) = (
            c_int::try_from(pending * per),
            c_int::try_from(pending),
            c_int::try_from(stored),
        ) else {
            return Err(Stop::GiveUp);
        };
        let (api, state) = (self.api, self.state);
        // SAFETY: the stack is [slot v1 .. vn] with `slots` values (the
        // walk pushed them above the container's slot); three free slots
        // (ROOM_PER_CONTAINER) for the new table, its metatable or a key
        // and a value, and the strict check's copy of a key.
        unsafe {
            if stored == 0 {
                let size = if last { count } else { 2 * count };
                if object {
                    (api.createtable)(state, 0, size);
                } else {
                    (api.createtable)(state, size, 0);
                    if self.arrays_mt {
                        (api.pushvalue)(state, ARRAY_MT);
                        (api.setmetatable)(state, -2);
                    } else if last && slots == 0 {
                        // Empty arrays re-encode as [], as cjson's fork does.
                        (api.pushvalue)(state, EMPTY_ARRAY_MT);
                        (api.setmetatable)(state, -2);
                    }
                }
                // Into the slot, below the values and the new table.
                (api.replace)(state, -(slots + 2));
            }
            // The table is at -(slots + 1); each rawseti or rawset pops the
            // top value (or pair).
            if !object {
                let mut k = slots;
                while k > 0 {
                    (api.rawseti)(state, -(k + 1), stored + k);
                    k -= 1;
                }
            } else if distinct && (!self.strict || stored == 0) {
                // No key of these pairs repeats another, nor one stored
                // before (under the strict policy: nothing is stored yet),
                // so no key needs looking up first.
                let mut table = -(slots + 1);
                while table < -1 {
                    (api.rawset)(state, table);
                    table += 2;
                }
            } else {
                // In order, so that a repeated key's last value wins.
                let table = (api.gettop)(state) - slots;
                for key in (table + 1..table + slots).step_by(2) {
                    if self.strict {
                        (api.pushvalue)(state, key);
                        (api.rawget)(state, table);
                        let repeated = (api.type_)(state, -1) != LUA_TNIL;
                        (api.settop)(state, -2);
                        if repeated {
                            return Err(Stop::Invalid);
                        }
                    }
                    (api.pushvalue)(state, key);
                    (api.pushvalue)(state, key + 1);
                    (api.rawset)(state, table);
                }
                (api.settop)(state, table);
            }
        }
        Ok(())
    }
}
