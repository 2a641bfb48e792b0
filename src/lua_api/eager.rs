//! `qjson.decode(text, { lazy = false })` through the Lua C API: the text
//! is validated and built into Lua tables in one pass ([`crate::eager`]),
//! the way lua-cjson builds its tables, with no per-value work on the Lua
//! side and no intermediate copy of the document.
//!
//! The same build in Lua over the FFI (lua/qjson/lazy.lua) costs a
//! `ffi.string` and a few field loads per value and, for a small document,
//! more in fixed costs than cjson's whole decode; this path is what makes
//! `lazy = false` faster than cjson at every size. The FFI build stays as
//! the fallback for a Lua whose API cannot be found, and for documents
//! nested deeper than the Lua stack may grow (a few thousand levels).
//!
//! Containers under construction live on the Lua stack: an array as its
//! table, an object as its table and, while a member's value is being
//! built, the member's key above it. A finished value is stored into the
//! container below it (`rawset` / `rawseti`), so the stack holds at most
//! two slots per open level. Tables are made at their final size when the
//! walk knows it ([`crate::eager`]: every container that opens and closes
//! within one window of the text).
//!
//! Invalid text: what was built is dropped (as lua-cjson does) and the
//! text is parsed again by [`Document`](crate::document::Document) for
//! the error `qjson.parse` would report, code and offset.

use core::cell::Cell;
use core::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{Api, State};
use crate::document::pool;
use crate::eager::{self, Flow, Outcome, Scratch, Sink, Slot, Stop};
use crate::error::Error;
use crate::validate::{DuplicateKeys, Options};

/// Stack slots one more open level may need (its table, a key, a value).
const SLOTS_PER_LEVEL: c_int = 3;

/// Levels of nesting the stack is grown for at once.
const LEVELS_PER_CHECK: u32 = 32;

/// Scratch holding more than this is dropped after use, not kept.
const MAX_KEPT_BYTES: usize = 1 << 20;

thread_local! {
    /// The scratch between decodes. A decode re-entered from a finalizer
    /// (which a Lua allocation may run) finds it taken and makes its own.
    static SPARE: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// The Lua arguments: 1 the text, 2 `max_depth`, 3 `duplicate_keys`
/// (`QJSON_DUPLICATE_KEYS_*`), 4 the null value, 5 the metatable of empty
/// arrays.
const TEXT: c_int = 1;
const MAX_DEPTH: c_int = 2;
const DUPLICATE_KEYS: c_int = 3;
const NULL: c_int = 4;
const EMPTY_ARRAY_MT: c_int = 5;

/// `LUA_TNIL` of lua.h.
const LUA_TNIL: c_int = 0;

/// Decodes the text at argument 1 into plain tables and returns the Lua
/// results: the value; or nil and the error message ("invalid number at
/// byte 17"); or nil alone when this path cannot build it (bad arguments,
/// nesting deeper than the Lua stack allows), for the caller to take the
/// FFI path instead.
///
/// # Safety
/// `state` is the `lua_State` that called the `lua_CFunction` this runs
/// in, and `api` its API.
pub unsafe fn decode(api: &Api, state: State) -> c_int {
    let mut len = 0usize;
    // SAFETY: a live state; index 1 exists or tolstring returns NULL.
    let text = unsafe { (api.tolstring)(state, TEXT, &mut len) };
    if text.is_null() {
        return give_up(api, state);
    }
    // SAFETY: lua_tolstring's string is len bytes and stays alive while it
    // is on the stack, which it is until this function returns.
    let input: &[u8] = unsafe { core::slice::from_raw_parts(text.cast(), len) };
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
        levels: 0,
    };
    let outcome = eager::decode(input, &opts, eager::WINDOW, &mut scratch, &mut sink);
    if scratch.retained_bytes() <= MAX_KEPT_BYTES {
        SPARE.with(|spare| spare.set(Some(scratch)));
    }
    match outcome {
        Outcome::Done => 1,
        Outcome::Invalid => {
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
        Outcome::GiveUp => {
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
    /// The state that called `decode`; every method pushes at most
    /// `SLOTS_PER_LEVEL` slots beyond those `levels` accounts for.
    state: State,
    /// Whether a repeated key makes the text invalid.
    strict: bool,
    /// More open levels the stack has been grown for.
    levels: u32,
}

impl LuaSink<'_> {
    /// Stores the value on top of the stack in `slot` of the container
    /// below it (under the key between them, for a member), popping it
    /// (and the key).
    #[inline(always)]
    fn place(&mut self, slot: Slot) -> Flow {
        let (api, state) = (self.api, self.state);
        // SAFETY: the stack is [table key value] for a member, [table
        // value] for an element, as the walk's calls leave it; the strict
        // check pushes one slot, within SLOTS_PER_LEVEL.
        unsafe {
            match slot {
                Slot::Root => {}
                Slot::Element(n) => {
                    let Ok(n) = c_int::try_from(n) else {
                        return Err(Stop::GiveUp);
                    };
                    (api.rawseti)(state, -2, n);
                }
                Slot::Member => {
                    if self.strict {
                        (api.pushvalue)(state, -2);
                        (api.rawget)(state, -4);
                        let repeated = (api.type_)(state, -1) != LUA_TNIL;
                        (api.settop)(state, -2);
                        if repeated {
                            return Err(Stop::Invalid);
                        }
                    }
                    (api.rawset)(state, -3);
                }
            }
        }
        Ok(())
    }

    /// Pushes the bytes `s` as a string.
    #[inline(always)]
    fn push_string(&mut self, s: &[u8]) {
        // SAFETY: live state with a free slot (see `levels`); s is
        // s.len() readable bytes.
        unsafe { (self.api.pushlstring)(self.state, s.as_ptr().cast::<c_char>(), s.len()) };
    }
}

impl Sink for LuaSink<'_> {
    fn open(&mut self, object: bool, hint: u32) -> Flow {
        let (api, state) = (self.api, self.state);
        if self.levels == 0 {
            // SAFETY: live state.
            let grown =
                unsafe { (api.checkstack)(state, SLOTS_PER_LEVEL * LEVELS_PER_CHECK as c_int + 1) };
            if grown == 0 {
                return Err(Stop::GiveUp);
            }
            self.levels = LEVELS_PER_CHECK;
        }
        self.levels -= 1;
        let hint = c_int::try_from(hint).unwrap_or(0);
        // SAFETY: live state with room for this level (just checked).
        unsafe {
            if object {
                (api.createtable)(state, 0, hint);
            } else {
                (api.createtable)(state, hint, 0);
            }
        }
        Ok(())
    }

    fn close(&mut self, object: bool, count: u32, slot: Slot) -> Flow {
        self.levels += 1;
        if !object && count == 0 {
            // Empty arrays re-encode as [], as cjson's fork does.
            // SAFETY: the empty table is on top; one free slot.
            unsafe {
                (self.api.pushvalue)(self.state, EMPTY_ARRAY_MT);
                (self.api.setmetatable)(self.state, -2);
            }
        }
        self.place(slot)
    }

    fn key(&mut self, key: &[u8]) -> Flow {
        self.push_string(key);
        Ok(())
    }

    fn string(&mut self, s: &[u8], slot: Slot) -> Flow {
        self.push_string(s);
        self.place(slot)
    }

    fn number(&mut self, n: f64, slot: Slot) -> Flow {
        // SAFETY: live state with a free slot.
        unsafe { (self.api.pushnumber)(self.state, n) };
        self.place(slot)
    }

    fn boolean(&mut self, b: bool, slot: Slot) -> Flow {
        // SAFETY: live state with a free slot.
        unsafe { (self.api.pushboolean)(self.state, c_int::from(b)) };
        self.place(slot)
    }

    fn null(&mut self, slot: Slot) -> Flow {
        // SAFETY: live state with a free slot.
        unsafe { (self.api.pushvalue)(self.state, NULL) };
        self.place(slot)
    }
}
