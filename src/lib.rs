//! qjson core (work in progress).
pub mod document;
pub mod error;
pub mod ffi;
pub mod index;
pub mod navigate;
pub mod scan;
#[cfg(test)]
mod testing;
pub mod validate;
pub mod values;
