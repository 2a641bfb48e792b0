//! Native throughput of the core, beside a bandwidth reference.
//!
//! For each payload: stage 1 alone (`scan`), stage 2 alone (`validate`
//! over a prepared index), the full validating parse
//! (`Document::load_with`: stage 1 + stage 2), and `memchr` looking for a
//! byte that never occurs, i.e. one plain SIMD pass over the same bytes.
//! Stage 1 and the full parse are measured with every kernel this CPU
//! supports (so `scalar`'s full parse meets simdjson's `fallback` DOM),
//! stage 2 once; figures are GB/s (10^9 bytes/s),
//! the best of 7 rounds of at least 50 ms each (best, as simdjson's own
//! benchmark reports, so that the two are compared alike on a busy
//! machine).
//!
//! With `QJSON_SJBENCH` naming simdjson's `sjbench` (built by
//! `tools/baselines.sh`), each payload is also given to it right after
//! qjson's rounds, and its stage 1 (`ondemand::parser::iterate`) and DOM
//! parse figures are printed beside the qjson kernel of the same
//! instruction set: `scalar` beside simdjson's `fallback`, `avx2` beside
//! `haswell`, `avx512` beside `icelake`.
//!
//! Run with `cargo bench --bench core [-- FILE...]`: the corpus from
//! `$QJSON_DATA/corpus` (default `../shared/data/corpus`) and the files
//! named on the command line (`make bench` passes the Lua benchmark's
//! payloads, written by `luajit benches/payloads.lua DIR`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use qjson::document::Document;
use qjson::index::Index;
use qjson::scan::{self, Kernel};
use qjson::validate::{self, Options};

/// GB/s of `f` over `len` bytes: the best of 7 rounds.
fn gbps(len: usize, mut f: impl FnMut()) -> f64 {
    let mut per_call = Vec::new();
    for round in 0..8 {
        let start = Instant::now();
        let mut calls = 0u32;
        while start.elapsed() < Duration::from_millis(50) || calls < 3 {
            f();
            calls += 1;
        }
        if round > 0 {
            per_call.push(start.elapsed().as_secs_f64() / f64::from(calls));
        }
    }
    let best = per_call.into_iter().fold(f64::INFINITY, f64::min);
    len as f64 / best / 1e9
}

/// simdjson's kernel for the same instruction set as `kernel`.
fn simdjson_kernel(kernel: Kernel) -> &'static str {
    match kernel {
        Kernel::Scalar => "fallback",
        Kernel::Avx2 => "haswell",
        Kernel::Avx512 => "icelake",
        Kernel::Neon => "arm64",
    }
}

/// `sjbench PATH`'s figures: (kernel, stage 1 GB/s, DOM GB/s) per line.
fn sjbench(tool: &str, path: &str) -> Vec<(String, f64, f64)> {
    let out = match std::process::Command::new(tool).arg(path).output() {
        Ok(out) if out.status.success() => out.stdout,
        Ok(out) => {
            eprintln!(
                "{tool} {path}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return Vec::new();
        }
        Err(e) => {
            eprintln!("{tool}: {e}");
            return Vec::new();
        }
    };
    String::from_utf8_lossy(&out)
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some((
                f.get(1)?.to_string(),
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

fn main() {
    let data = std::env::var("QJSON_DATA").unwrap_or_else(|_| "../shared/data".into());
    let mut payloads: Vec<(String, String, Vec<u8>)> = Vec::new();
    let corpus = ["twitter.json", "citm_catalog.json", "canada.json"]
        .map(|name| (name.to_string(), format!("{data}/corpus/{name}")));
    let named = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|path| {
            let name = std::path::Path::new(&path)
                .file_stem()
                .map_or(path.clone(), |stem| stem.to_string_lossy().into_owned());
            (name, path)
        });
    for (name, path) in corpus.into_iter().chain(named) {
        match std::fs::read(&path) {
            Ok(bytes) => payloads.push((name, path, bytes)),
            Err(e) => eprintln!("skipping {path}: {e}"),
        }
    }
    let simdjson = std::env::var("QJSON_SJBENCH")
        .ok()
        .filter(|s| !s.is_empty());

    let opts = Options::default();
    println!(
        "{:<18} {:>7} {:>9} {:>9} {:>9} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9}",
        "payload",
        "kernel",
        "MB",
        "stage 1",
        "stage 2",
        "full parse",
        "memchr",
        "s1/memchr",
        "simdjson",
        "sj s1",
        "sj DOM"
    );
    for (name, path, bytes) in &payloads {
        let reference = gbps(bytes.len(), || {
            black_box(memchr::memchr(0xff, black_box(bytes)));
        });
        // Stage 2 does not depend on the kernel: measured once, over the
        // active kernel's index.
        let mut index = Index::default();
        scan::scan(bytes, &mut index).unwrap();
        let mut scratch = validate::Scratch::default();
        let stage2 = gbps(bytes.len(), || {
            // SAFETY: `index` is stage 1's output for `bytes`.
            unsafe {
                validate::validate_unchecked(black_box(bytes), &mut index, &opts, &mut scratch)
            }
            .unwrap()
        });
        let mut rows = Vec::new();
        for kernel in scan::supported_kernels() {
            let stage1 = gbps(bytes.len(), || {
                index.clear();
                scan::scan_with(kernel, black_box(bytes), &mut index).unwrap();
            });
            let mut doc = Document::new();
            let full = gbps(bytes.len(), || {
                doc.load_with(kernel, black_box(bytes), &opts).unwrap()
            });
            rows.push((kernel, stage1, full));
        }
        let theirs = simdjson
            .as_deref()
            .map_or(Vec::new(), |tool| sjbench(tool, path));
        for (kernel, stage1, full) in rows {
            let sj = simdjson_kernel(kernel);
            let (sj_stage1, sj_dom) = theirs
                .iter()
                .find(|(k, _, _)| k == sj)
                .map_or(("-".into(), "-".into()), |(_, s1, dom)| {
                    (format!("{s1:.2}"), format!("{dom:.2}"))
                });
            println!(
                "{:<18} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>10.2} {:>9.2} {:>10.2}x {:>9} {:>9} {:>9}",
                name,
                kernel.name(),
                bytes.len() as f64 / 1e6,
                stage1,
                stage2,
                full,
                reference,
                stage1 / reference,
                sj,
                sj_stage1,
                sj_dom
            );
        }
    }
    println!(
        "(GB/s, best of 7 rounds; stage 1 and the full parse with each kernel \
         (Document::load_with); stage 2 does not depend on the kernel, measured once; \
         the active kernel is {})",
        scan::active_kernel().map_or("?", Kernel::name)
    );
    match simdjson {
        Some(tool) => println!(
            "(simdjson 3.9.4 by {tool}, right after qjson on each payload: stage 1 = \
             ondemand::parser::iterate, DOM = dom::parser::parse, best of 7 rounds; \
             '-' where this CPU lacks the kernel)"
        ),
        None => println!(
            "(no simdjson figures: QJSON_SJBENCH is not set; make bench sets it when \
             tools/baselines.sh finds the baselines)"
        ),
    }
}
