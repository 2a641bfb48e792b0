//! Stage 1 over one file, a given number of times: the workload that
//! `tools/aarch64.sh count` runs under an emulator that counts guest
//! instructions, where time means nothing. Two runs that differ only in
//! the number of scans differ by exactly that many scans' instructions
//! (start-up, reading the file and growing the index cancel out).
//!
//! Usage: `insns KERNEL SCANS FILE`; exits non-zero if a scan fails.
//! Prints `entries N`, the index entries a scan wrote, which
//! `tools/stage1_insns.sh` sets beside simdjson's count of structurals.

use std::hint::black_box;
use std::process::ExitCode;

use qjson::index::Index;
use qjson::scan::{self, Kernel};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kernel, scans, file] = &args[..] else {
        eprintln!("usage: insns KERNEL SCANS FILE");
        return ExitCode::from(2);
    };
    let Some(kernel) = Kernel::from_name(kernel) else {
        eprintln!("insns: no kernel {kernel}");
        return ExitCode::from(2);
    };
    let scans: u32 = scans.parse().expect("SCANS is a number");
    let bytes = std::fs::read(file).expect("FILE is readable");
    let mut index = Index::default();
    for _ in 0..scans {
        index.clear();
        if let Err(e) = scan::scan_with(kernel, black_box(&bytes), &mut index) {
            eprintln!("insns: {file}: {e:?}");
            return ExitCode::FAILURE;
        }
    }
    println!("entries {}", index.positions.len());
    ExitCode::SUCCESS
}
