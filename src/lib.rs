//! qjson's native core: a structural index of a JSON text, strict
//! validation over it, and lazy reads of values by path.
//!
//! The Lua side (LuaJIT FFI, `lua/qjson*.lua`) calls the C ABI in
//! [`ffi`] (declared in `include/qjson.h`); everything else is safe Rust
//! behind it. A parse runs the pipeline once, front to back:
//!
//! | stage | module | in → out |
//! |---|---|---|
//! | 1. scan | [`scan`] (`generic` + one file per instruction set) | bytes → [`index::Index`] positions and escapes; UTF-8, control characters, string termination checked |
//! | 2. validate | [`validate`] | index → RFC 8259 grammar, numbers, escapes, depth, duplicate keys checked; container links |
//! | navigate | [`navigate`] | cursor + path or JSON Pointer → cursor, O(1) steps over values |
//! | values | [`values`] | cursor → unescaped string, exact `i64`, correctly rounded `f64` |
//! | document | [`document`] | owns one text's index and scratch; pooled for reuse |
//! | escape | [`escape`] | Lua string → JSON string contents, escaped like lua-cjson (for `qjson.encode`) |
//! | gformat | [`gformat`] | double → its `%.<precision>g` text, exactly as the C library prints it (for `qjson.encode`) |
//! | eager | [`eager`] | bytes → values handed to a sink in document order, in one walk over the bytes that validates as it goes (eager decode) |
//! | Lua API | [`lua_api`] | eager decode's values → Lua tables built with the Lua C API, the API found at run time; plain Lua values → JSON text (`qjson.encode`) |
//! | errors | [`error`] | one code enum (mirrored in `include/qjson.h`) and its messages |
//!
//! Nothing is read out of a document before the whole text has been
//! validated, so a getter never sees malformed JSON, and no value is built
//! until it is asked for. `docs/architecture.md` walks through the index
//! with a worked example.
//!
//! These docs are for the library's maintainers (its interface is the C
//! ABI): read them with `cargo doc --document-private-items`, which is
//! why a public item's docs may link to private ones.
#![allow(rustdoc::private_intra_doc_links)]
pub mod document;
pub mod eager;
pub mod error;
pub mod escape;
pub mod ffi;
pub mod gformat;
pub mod index;
pub mod lua_api;
pub mod navigate;
pub mod scan;
#[cfg(test)]
mod testing;
pub mod validate;
pub mod values;
