//! Stage 1 over one file, a given number of times: the workload that
//! `tools/aarch64.sh count` runs under an emulator that counts guest
//! instructions, where time means nothing. Two runs that differ only in
//! the number of scans differ by exactly that many scans' instructions
//! (start-up, reading the file and growing the index cancel out).
//!
//! Usage: `insns KERNEL SCANS FILE`; exits non-zero if a scan fails.
//! Prints `entries N`, the index entries a scan wrote, which
//! `tools/stage1_insns.sh` sets beside simdjson's count of structurals;
//! then how those entries fall into the file's 64-byte blocks: the share
//! of blocks holding more than 8 and more than 12 (where the `avx2`
//! writer changes its way, `Avx2::write_offsets`), and how often the
//! first answer differs from the block before's.

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
    print_entries_per_block(&index.positions, bytes.len());
    ExitCode::SUCCESS
}

/// The shares of the input's blocks with more than 8 and more than 12
/// of the `positions`, and of neighbouring blocks on either side of 8.
fn print_entries_per_block(positions: &[u32], len: usize) {
    let mut per_block = vec![0u32; len.div_ceil(64)];
    for &p in positions {
        per_block[p as usize / 64] += 1;
    }
    let blocks = per_block.len().max(1) as f64;
    let share = |n: usize| 100.0 * n as f64 / blocks;
    let over = |k: u32| share(per_block.iter().filter(|&&n| n > k).count());
    let crossings = per_block
        .windows(2)
        .filter(|w| (w[0] > 8) != (w[1] > 8))
        .count();
    println!(
        "blocks {}: over 8 entries {:.1}%, over 12 {:.1}%, 8 crossed from the block before {:.1}%",
        per_block.len(),
        over(8),
        over(12),
        share(crossings)
    );
}
