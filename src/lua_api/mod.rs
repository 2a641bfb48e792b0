//! The Lua C API, for the few entry points that build Lua values directly
//! (`qjson_lua_*` in [`crate::ffi`]) instead of handing the FFI side
//! something to convert.
//!
//! The API is looked up in the host process when first needed, not
//! linked: `libqjson.so` then loads anywhere (a Rust test, a C program, a
//! LuaJIT whose symbols are not exported), and where the lookup fails the
//! Lua side keeps to its FFI paths. LuaJIT exports the API from its shared
//! library (what nginx's Lua module and Debian's `luajit` link) and from
//! executables built with `-Wl,-E`.
//!
//! # Errors raised by Lua
//!
//! Any API call that allocates can raise a Lua error (out of memory), and
//! LuaJIT raises by unwinding the native stack (on x86-64 and arm64,
//! through the system unwinder). Every function here and every caller up
//! to the `extern "C-unwind"` entry point is therefore declared with the
//! `C-unwind` ABI, so such an unwind passes through Rust frames as Rust
//! defines it (dropping what they own). No Rust panic may cross a Lua call
//! in the other direction: code between Lua calls does not panic, and the
//! parsing before any Lua call runs under `catch_unwind`.

pub mod eager;
pub mod encode;

use core::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// A `lua_State *`.
pub type State = *mut c_void;

unsafe extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// glibc's and musl's RTLD_DEFAULT.
const RTLD_DEFAULT: *mut c_void = core::ptr::null_mut();

/// Declares [`Api`], one field per Lua function with its C signature, and
/// `find`, which looks each up by name.
macro_rules! lua_functions {
    ($($field:ident: $name:literal fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The Lua 5.1 API functions qjson calls, as found in the process.
        pub struct Api {
            $(
                #[doc = concat!("`", stringify!($field), "` of lua.h.")]
                pub $field: unsafe extern "C-unwind" fn($($arg),*) $(-> $ret)?,
            )*
        }

        fn find() -> Option<Api> {
            Some(Api {
                $($field: {
                    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated
                    // name.
                    let address = unsafe { dlsym(RTLD_DEFAULT, $name.as_ptr()) };
                    if address.is_null() {
                        return None;
                    }
                    // SAFETY: the symbol is the Lua 5.1 API function of
                    // that name, whose C signature this is (lua.h; LuaJIT's
                    // is the same).
                    unsafe {
                        core::mem::transmute::<
                            *mut c_void,
                            unsafe extern "C-unwind" fn($($arg),*) $(-> $ret)?,
                        >(address)
                    }
                },)*
            })
        }
    };
}

lua_functions! {
    gettop: c"lua_gettop" fn(State) -> c_int;
    settop: c"lua_settop" fn(State, c_int);
    checkstack: c"lua_checkstack" fn(State, c_int) -> c_int;
    tolstring: c"lua_tolstring" fn(State, c_int, *mut usize) -> *const c_char;
    tonumber: c"lua_tonumber" fn(State, c_int) -> f64;
    toboolean: c"lua_toboolean" fn(State, c_int) -> c_int;
    objlen: c"lua_objlen" fn(State, c_int) -> usize;
    rawequal: c"lua_rawequal" fn(State, c_int, c_int) -> c_int;
    getmetatable: c"lua_getmetatable" fn(State, c_int) -> c_int;
    next: c"lua_next" fn(State, c_int) -> c_int;
    rawgeti: c"lua_rawgeti" fn(State, c_int, c_int);
    createtable: c"lua_createtable" fn(State, c_int, c_int);
    pushlstring: c"lua_pushlstring" fn(State, *const c_char, usize);
    pushnumber: c"lua_pushnumber" fn(State, f64);
    pushboolean: c"lua_pushboolean" fn(State, c_int);
    pushlightuserdata: c"lua_pushlightuserdata" fn(State, *mut c_void);
    pushnil: c"lua_pushnil" fn(State);
    pushvalue: c"lua_pushvalue" fn(State, c_int);
    replace: c"lua_replace" fn(State, c_int);
    rawget: c"lua_rawget" fn(State, c_int);
    rawset: c"lua_rawset" fn(State, c_int);
    rawseti: c"lua_rawseti" fn(State, c_int, c_int);
    setmetatable: c"lua_setmetatable" fn(State, c_int) -> c_int;
    type_: c"lua_type" fn(State, c_int) -> c_int;
}

/// The API of the Lua in this process, or `None` when it has none that
/// can be found.
pub fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(find).as_ref()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_without_lua_has_no_api() {
        // The test binary links no Lua: the lookup fails cleanly.
        assert!(super::api().is_none());
    }
}
