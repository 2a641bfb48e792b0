//! `qjson.decode(text, { lazy = false })` through the Lua C API: the text
//! is parsed, flattened into a tape (see [`crate::navigate::tape`]) and the
//! tape built into Lua tables on the Lua stack, the way lua-cjson builds
//! its tables, with no per-value work on the Lua side.
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
//! two slots per open level.

use core::cell::Cell;
use core::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{Api, State};
use crate::document::pool;
use crate::error::Error;
use crate::navigate::ValueType;
use crate::navigate::tape::Item;
use crate::validate::{DuplicateKeys, Options};

/// Stack slots one more open level may need (its table, a key, a value).
const SLOTS_PER_LEVEL: c_int = 3;

/// The buffers a decode works in, kept for the next one.
#[derive(Default)]
struct Scratch {
    items: Vec<Item>,
    arena: Vec<u8>,
    open: Vec<Open>,
}

/// Scratch holding more than this is dropped after use, not kept.
const MAX_KEPT_BYTES: usize = 1 << 20;

impl Scratch {
    fn bytes(&self) -> usize {
        self.items.capacity() * size_of::<Item>()
            + self.arena.capacity()
            + self.open.capacity() * size_of::<Open>()
    }
}

thread_local! {
    /// The scratch between decodes. A decode re-entered from a finalizer
    /// (which a Lua allocation may run) finds it taken and makes its own.
    static SPARE: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// A container being filled.
#[derive(Clone, Copy)]
struct Open {
    /// Members or elements still to come.
    left: u32,
    object: bool,
    /// The index the next element gets (arrays).
    next: c_int,
}

/// The Lua arguments: 1 the text, 2 `max_depth`, 3 `duplicate_keys`
/// (`QJSON_DUPLICATE_KEYS_*`), 4 the null value, 5 the metatable of empty
/// arrays.
const TEXT: c_int = 1;
const MAX_DEPTH: c_int = 2;
const DUPLICATE_KEYS: c_int = 3;
const NULL: c_int = 4;
const EMPTY_ARRAY_MT: c_int = 5;

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
    // is on the stack, which it is until this function returns; the
    // 'static is that promise, kept by giving the document back below.
    let input: &'static [u8] = unsafe { core::slice::from_raw_parts(text.cast(), len) };
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
    // Parse and flatten: Rust only, so a panic is caught here and never
    // unwinds into Lua.
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        let mut doc = pool::take();
        let result = doc.load(input, &opts).map(|()| {
            doc.tape(0, &mut scratch.items, &mut scratch.arena);
        });
        pool::give_back(doc);
        result
    }));
    let results = match parsed {
        Ok(Ok(())) => {
            // SAFETY: the caller's state and api; items came from tape,
            // whose strings point into the text (on the stack) or the
            // arena (in scratch, alive until after the build).
            if unsafe { build(api, state, &scratch.items, &mut scratch.open) } {
                1
            } else {
                give_up(api, state)
            }
        }
        Ok(Err(e)) => {
            // SAFETY: as above.
            unsafe { push_error(api, state, e, input) }
        }
        Err(_) => give_up(api, state),
    };
    if scratch.bytes() <= MAX_KEPT_BYTES {
        SPARE.with(|spare| spare.set(Some(scratch)));
    }
    results
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

/// Builds the value `items` describes on top of the Lua stack; false (with
/// the stack as it was) when the stack cannot grow enough or the tape is
/// malformed.
///
/// # Safety
/// `state` is live and `api` its API; every string item points to `len`
/// readable bytes.
unsafe fn build(api: &Api, state: State, items: &[Item], open: &mut Vec<Open>) -> bool {
    // SAFETY: live state.
    let base = unsafe { (api.gettop)(state) };
    open.clear();
    let mut next_item = items.iter();
    loop {
        // The member or element to build next, attached to `open.last()`.
        let in_object = match open.last_mut() {
            None => false,
            Some(top) if top.left == 0 => {
                open.pop();
                // SAFETY: the finished table is on top, its container (and
                // an object's key) below it.
                unsafe { attach(api, state, open.last_mut()) };
                if open.is_empty() {
                    return true;
                }
                continue;
            }
            Some(top) => {
                top.left -= 1;
                top.object
            }
        };
        if in_object {
            let Some(key) = next_item.next() else {
                return abandon(api, state, base);
            };
            // SAFETY: a key item is a string item (tape's invariant).
            unsafe { push_string(api, state, key) };
        }
        let Some(item) = next_item.next() else {
            return abandon(api, state, base);
        };
        // SAFETY: live state; this level's slots were checked on entry.
        let opened = unsafe { push_item(api, state, item) };
        if let Some(level) = opened {
            // SAFETY: live state.
            if unsafe { (api.checkstack)(state, SLOTS_PER_LEVEL) } == 0 {
                return abandon(api, state, base);
            }
            open.push(level);
        } else if open.is_empty() {
            // A scalar or empty root.
            return true;
        } else {
            // SAFETY: the value is on top, its container below.
            unsafe { attach(api, state, open.last_mut()) };
        }
    }
}

/// Stores the value on top of the stack into the container `parent` below
/// it (under the key between them, for an object), popping both.
///
/// # Safety
/// The stack is laid out as the module docs say.
unsafe fn attach(api: &Api, state: State, parent: Option<&mut Open>) {
    if let Some(parent) = parent {
        // SAFETY: the caller's layout: [table key value] or [table value].
        unsafe {
            if parent.object {
                (api.rawset)(state, -3);
            } else {
                (api.rawseti)(state, -2, parent.next);
                parent.next += 1;
            }
        }
    }
}

/// Drops whatever was built and reports failure.
fn abandon(api: &Api, state: State, base: c_int) -> bool {
    // SAFETY: live state; base is a height the stack had.
    unsafe { (api.settop)(state, base) };
    false
}

/// Pushes a string item.
///
/// # Safety
/// Live state with a free slot; the item is a string of `len` readable
/// bytes.
unsafe fn push_string(api: &Api, state: State, item: &Item) {
    // SAFETY: the caller's guarantees; a string item's payload is its
    // bytes.
    unsafe { (api.pushlstring)(state, item.payload.str_.cast(), item.len as usize) };
}

/// Pushes the value of `item`: a scalar, or a new table; returns the
/// level to fill for a non-empty container.
///
/// # Safety
/// Live state with a free slot; string items as for `push_string`.
unsafe fn push_item(api: &Api, state: State, item: &Item) -> Option<Open> {
    const NULL_T: i32 = ValueType::Null as i32;
    const FALSE_T: i32 = ValueType::False as i32;
    const TRUE_T: i32 = ValueType::True as i32;
    const NUMBER_T: i32 = ValueType::Number as i32;
    const STRING_T: i32 = ValueType::String as i32;
    const ARRAY_T: i32 = ValueType::Array as i32;
    const OBJECT_T: i32 = ValueType::Object as i32;
    let n = item.len;
    // SAFETY: the caller's state has a free slot for each push; the payload
    // read matches the item's type.
    unsafe {
        match item.type_ {
            STRING_T => push_string(api, state, item),
            NUMBER_T => (api.pushnumber)(state, item.payload.num),
            TRUE_T => (api.pushboolean)(state, 1),
            FALSE_T => (api.pushboolean)(state, 0),
            NULL_T => (api.pushvalue)(state, NULL),
            ARRAY_T => {
                let size = c_int::try_from(n).unwrap_or(0);
                (api.createtable)(state, size, 0);
                if n == 0 {
                    // Empty arrays re-encode as [], as cjson's fork does.
                    (api.pushvalue)(state, EMPTY_ARRAY_MT);
                    (api.setmetatable)(state, -2);
                    return None;
                }
                return Some(Open {
                    left: n,
                    object: false,
                    next: 1,
                });
            }
            OBJECT_T => {
                let size = c_int::try_from(n).unwrap_or(0);
                (api.createtable)(state, 0, size);
                if n == 0 {
                    return None;
                }
                return Some(Open {
                    left: n,
                    object: true,
                    next: 1,
                });
            }
            // Not a type a tape holds; null keeps the stack balanced.
            _ => (api.pushnil)(state),
        }
    }
    None
}
