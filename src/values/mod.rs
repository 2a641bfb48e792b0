//! Reading values out of validated text: string unescaping and numbers.

pub(crate) mod bmp_run;
pub mod number;
pub mod string;
pub(crate) mod unescape_blocks;
