//! `to_f64` over a list of numbers, a given number of times: the workload
//! for counting the instructions of one conversion under callgrind. Two
//! runs that differ only in the number of rounds differ by exactly that
//! many rounds' conversions (start-up and reading the files cancel out),
//! so instructions per conversion = difference / (numbers × rounds).
//!
//! Usage: `numbers ROUNDS ARG...`: an ARG that names a readable file gives
//! every number of that JSON text (canada.json: 111 126 coordinates);
//! any other ARG is itself one number (`123`, `1.5`, `-0.25`). Prints how
//! many numbers one round converts.
//!
//!     cargo bench --no-run --bench numbers
//!     valgrind --tool=callgrind target/release/deps/numbers-* 10 canada.json

use std::hint::black_box;
use std::process::ExitCode;

use qjson::values::number::{number_end, to_f64};

/// Every number of a JSON text, skipping strings.
fn numbers_of(text: &[u8]) -> Vec<&[u8]> {
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => match number_end(text, i) {
                Some(end) => {
                    numbers.push(&text[i..end]);
                    i = end;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
    numbers
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((rounds, inputs)) = args.split_first() else {
        eprintln!("usage: numbers ROUNDS ARG...");
        return ExitCode::from(2);
    };
    let rounds: u32 = rounds.parse().expect("ROUNDS is a number");
    let files: Vec<Option<Vec<u8>>> = inputs.iter().map(|a| std::fs::read(a).ok()).collect();
    let mut numbers: Vec<&[u8]> = Vec::new();
    for (arg, file) in inputs.iter().zip(&files) {
        match file {
            Some(text) => numbers.extend(numbers_of(text)),
            None if number_end(arg.as_bytes(), 0) == Some(arg.len()) => {
                numbers.push(arg.as_bytes())
            }
            None => {
                eprintln!("numbers: {arg} is neither a file nor a number");
                return ExitCode::from(2);
            }
        }
    }
    let mut sum = 0.0;
    for _ in 0..rounds {
        for &n in &numbers {
            sum += to_f64(black_box(n));
        }
    }
    black_box(sum);
    println!("{} numbers a round", numbers.len());
    ExitCode::SUCCESS
}
