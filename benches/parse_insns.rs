//! Stage 2 alone, or the full validating parse, over one file a given
//! number of times: the workload for counting instructions with
//! `valgrind --tool=callgrind`. Two runs that differ only in the count
//! differ by exactly that many passes' instructions (start-up, reading
//! the file, stage 1 before the `validate` passes and growing the index
//! cancel out), so per byte:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null parse_insns validate 10 FILE
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null parse_insns validate 30 FILE
//! (second total - first total) / 20 / file size
//! ```
//!
//! Usage: `parse_insns validate|parse PASSES FILE`: `validate` is stage 2
//! over an index stage 1 built once, `parse` is `Document::load` (stage 1
//! + stage 2 with the active kernel; callgrind runs `avx2`). Exits
//!   non-zero if the text is rejected. `DUPLICATE_KEYS=error` validates
//!   under that policy (default: last wins).

use std::hint::black_box;
use std::process::ExitCode;

use qjson::document::Document;
use qjson::index::Index;
use qjson::scan;
use qjson::validate::{self, DuplicateKeys, Isa, Options};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, passes, file] = &args[..] else {
        eprintln!("usage: parse_insns validate|parse PASSES FILE");
        return ExitCode::from(2);
    };
    let passes: u32 = passes.parse().expect("PASSES is a number");
    let bytes = std::fs::read(file).expect("FILE is readable");
    // DUPLICATE_KEYS=error counts the walk under that policy, as
    // tools/ab_parse.sh times it.
    let opts = Options {
        duplicate_keys: match std::env::var("DUPLICATE_KEYS").as_deref() {
            Ok("error") => DuplicateKeys::Error,
            _ => DuplicateKeys::LastWins,
        },
        ..Options::default()
    };
    let result = match mode.as_str() {
        "validate" => {
            let mut index = Index::default();
            let mut scratch = validate::Scratch::default();
            scan::scan(&bytes, &mut index).and_then(|()| {
                (0..passes).try_for_each(|_| {
                    // SAFETY: `index` is stage 1's output for `bytes`, as
                    // in `Document::load` (whose call this is, in the
                    // build it runs).
                    unsafe {
                        validate::validate_unchecked(
                            black_box(&bytes),
                            &mut index,
                            &opts,
                            &mut scratch,
                            Isa::active(),
                        )
                    }
                })
            })
        }
        "parse" => {
            let mut doc = Document::new();
            (0..passes).try_for_each(|_| doc.load(black_box(&bytes), &opts))
        }
        _ => {
            eprintln!("parse_insns: no mode {mode} (validate or parse)");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parse_insns: {file}: {e:?}");
            ExitCode::FAILURE
        }
    }
}
