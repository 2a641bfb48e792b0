//! qjson core (work in progress).
pub mod error;
pub mod index;
pub mod scan;
#[cfg(test)]
mod testing;
pub mod validate;
pub mod values;
