//! Native throughput of the core, beside a bandwidth reference.
//!
//! For each payload: stage 1 alone (`scan`), stage 2 alone (`validate`
//! over a prepared index), the full validating parse (`Document::load`:
//! stage 1 + stage 2), and `memchr` looking for a byte
//! that never occurs, i.e. one plain SIMD pass over the same bytes. Every
//! kernel this CPU supports is measured; figures are GB/s (10^9 bytes/s),
//! the median of 7 rounds of at least 50 ms each. With `--best`, the
//! fastest of 200 rounds of at least 2 ms each instead: on a machine
//! shared with other work that is the figure least disturbed by it, and
//! the one to set beside simdjson's `sjbench` (best of its rounds).
//!
//! Run with `cargo bench --bench core [-- [--best] FILE...]`: the corpus from
//! `$QJSON_DATA/corpus` (default `../shared/data/corpus`) and the files
//! named on the command line (`make bench` passes the Lua benchmark's
//! payloads, written by `luajit benches/payloads.lua DIR`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use qjson::document::Document;
use qjson::index::Index;
use qjson::scan::{self, Kernel};
use qjson::validate::{self, Options};

/// How [`gbps`] sums up its rounds.
#[derive(Clone, Copy)]
enum Rounds {
    /// The median of 7 rounds of at least 50 ms.
    Median,
    /// The fastest of 200 rounds of at least 2 ms.
    Best,
}

/// GB/s of `f` over `len` bytes (see [`Rounds`]); a first round warms up.
fn gbps(len: usize, rounds: Rounds, mut f: impl FnMut()) -> f64 {
    let (count, least) = match rounds {
        Rounds::Median => (7, Duration::from_millis(50)),
        Rounds::Best => (200, Duration::from_millis(2)),
    };
    let mut per_call = Vec::new();
    for round in 0..=count {
        let start = Instant::now();
        let mut calls = 0u32;
        while start.elapsed() < least || calls < 3 {
            f();
            calls += 1;
        }
        if round > 0 {
            per_call.push(start.elapsed().as_secs_f64() / f64::from(calls));
        }
    }
    per_call.sort_by(f64::total_cmp);
    let pick = match rounds {
        Rounds::Median => per_call[per_call.len() / 2],
        Rounds::Best => per_call[0],
    };
    len as f64 / pick / 1e9
}

fn main() {
    let data = std::env::var("QJSON_DATA").unwrap_or_else(|_| "../shared/data".into());
    let mut payloads: Vec<(String, Vec<u8>)> = Vec::new();
    for name in ["twitter.json", "citm_catalog.json", "canada.json"] {
        match std::fs::read(format!("{data}/corpus/{name}")) {
            Ok(bytes) => payloads.push((name.into(), bytes)),
            Err(e) => eprintln!("skipping {name}: {e}"),
        }
    }
    for path in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        let name = std::path::Path::new(&path)
            .file_stem()
            .map_or(path.clone(), |stem| stem.to_string_lossy().into_owned());
        match std::fs::read(&path) {
            Ok(bytes) => payloads.push((name, bytes)),
            Err(e) => eprintln!("skipping {path}: {e}"),
        }
    }

    let rounds = if std::env::args().any(|a| a == "--best") {
        Rounds::Best
    } else {
        Rounds::Median
    };
    let opts = Options::default();
    println!(
        "{:<18} {:>7} {:>9} {:>9} {:>9} {:>10} {:>9} {:>11}",
        "payload", "kernel", "MB", "stage 1", "stage 2", "full parse", "memchr", "s1/memchr"
    );
    for (name, bytes) in &payloads {
        let reference = gbps(bytes.len(), rounds, || {
            black_box(memchr::memchr(0xff, black_box(bytes)));
        });
        for kernel in scan::supported_kernels() {
            let mut index = Index::default();
            let stage1 = gbps(bytes.len(), rounds, || {
                index.clear();
                scan::scan_with(kernel, black_box(bytes), &mut index).unwrap();
            });
            // Stage 2 does not depend on the kernel: measured once, with
            // the full parse, on the active kernel's row.
            let (stage2, full) = if kernel == scan::active_kernel().unwrap_or(Kernel::Scalar) {
                let mut scratch = validate::Scratch::default();
                let stage2 = gbps(bytes.len(), rounds, || {
                    // SAFETY: `index` is stage 1's output for `bytes`.
                    unsafe {
                        validate::validate_unchecked(
                            black_box(bytes),
                            &mut index,
                            &opts,
                            &mut scratch,
                        )
                    }
                    .unwrap()
                });
                let mut doc = Document::new();
                let full = gbps(bytes.len(), rounds, || {
                    doc.load(black_box(bytes), &opts).unwrap()
                });
                (format!("{stage2:.2}"), format!("{full:.2}"))
            } else {
                ("-".into(), "-".into())
            };
            println!(
                "{:<18} {:>7} {:>9.2} {:>9.2} {:>9} {:>10} {:>9.2} {:>10.2}x",
                name,
                kernel.name(),
                bytes.len() as f64 / 1e6,
                stage1,
                stage2,
                full,
                reference,
                stage1 / reference
            );
        }
    }
    println!(
        "(GB/s; full parse uses the active kernel, {}; QJSON_KERNEL=scalar pins it)",
        scan::active_kernel().map_or("?", Kernel::name)
    );
}
