//! Reading values out of validated text: string unescaping and numbers.

pub mod number;
pub mod string;
