//! Native throughput of the core, beside a bandwidth reference and
//! simdjson.
//!
//! For each payload: stage 1 alone (`scan`), stage 2 alone (`validate`
//! over a prepared index), the full validating parse
//! (`Document::load_with`: stage 1 + stage 2), and `memchr` looking for a
//! byte that never occurs, i.e. one plain SIMD pass over the same bytes.
//! All three are measured with every kernel this CPU supports (so
//! `scalar`'s full parse meets simdjson's `fallback` DOM), stage 2 in the
//! build that runs beside the kernel (`validate::Isa::beside`); figures are GB/s (10^9 bytes/s), the best of 7 rounds of
//! at least 50 ms each (best, as simdjson's own benchmark reports).
//!
//! With `QJSON_SIMDJSON` naming `libsimdjson_shim.so` (simdjson 3.9.4
//! behind benches/simdjson_shim.cpp, built by `tools/bench.sh`),
//! simdjson's stage 1 (`ondemand::parser::iterate`) and DOM parse run in
//! this process beside the qjson kernel of the same instruction set
//! (`scalar` beside simdjson's `fallback`, `avx2` beside `haswell`,
//! `avx512` beside `icelake`), their rounds alternating with qjson's: on
//! a shared machine, what runs at another time meets other neighbours.
//! Beside the best rounds, `s1/sj` and `full/DOM` give qjson's speed over
//! simdjson's as the median of their rounds taken in pairs, each pair run
//! back to back: the best rounds of the two may come from different
//! moments, and on this shared machine they moved the ratio by a tenth
//! from run to run.
//!
//! Run with `cargo bench --bench core [-- FILE...]`: the corpus from
//! `$QJSON_DATA/corpus` (default `../shared/data/corpus`) and the files
//! named on the command line (`make bench` passes the Lua benchmark's
//! payloads, written by `luajit benches/payloads.lua DIR`).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::hint::black_box;
use std::time::{Duration, Instant};

use qjson::document::Document;
use qjson::index::Index;
use qjson::scan::{self, Kernel};
use qjson::validate::{self, Isa, Options};

/// Rounds counted per task, after one to warm up.
const ROUNDS: usize = 7;

/// Seconds per call of each of `tasks`, one figure per round: rounds of at
/// least 50 ms, the tasks' rounds alternating (after one round each to
/// warm up).
fn round_secs(tasks: &mut [&mut dyn FnMut()]) -> Vec<[f64; ROUNDS]> {
    let mut secs = vec![[0.0; ROUNDS]; tasks.len()];
    for round in 0..=ROUNDS {
        for (task, secs) in tasks.iter_mut().zip(&mut secs) {
            let start = Instant::now();
            let mut calls = 0u32;
            while start.elapsed() < Duration::from_millis(50) || calls < 3 {
                task();
                calls += 1;
            }
            if round > 0 {
                secs[round - 1] = start.elapsed().as_secs_f64() / f64::from(calls);
            }
        }
    }
    secs
}

/// GB/s over `len` bytes of the best of `secs`' rounds.
fn best(len: usize, secs: &[f64; ROUNDS]) -> f64 {
    len as f64 / secs.iter().copied().fold(f64::INFINITY, f64::min) / 1e9
}

/// How many times faster `ours` ran than `theirs`: the median over the
/// rounds of the two tasks' round against each other. Their rounds ran
/// back to back, so a spell of a busy neighbour slows both halves of a
/// pair, where the best rounds of each may come from different moments
/// (see `tools/ab_parse.c`, which compares two qjson builds this way).
fn paired(ours: &[f64; ROUNDS], theirs: &[f64; ROUNDS]) -> f64 {
    let mut ratios: Vec<f64> = theirs.iter().zip(ours).map(|(t, o)| t / o).collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ROUNDS / 2]
}

/// GB/s of `task` alone over `len` bytes: the best of its rounds.
fn gbps(len: usize, mut task: impl FnMut()) -> f64 {
    best(len, &round_secs(&mut [&mut task])[0])
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

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}

const RTLD_NOW: c_int = 2;

type OpenFn = unsafe extern "C" fn(*const c_char, *const u8, usize) -> *mut c_void;
type ParseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut c_void);

/// benches/simdjson_shim.cpp's functions, from the library at a path.
struct Simdjson {
    open: OpenFn,
    stage1: ParseFn,
    dom: ParseFn,
    close: CloseFn,
}

impl Simdjson {
    fn load(path: &str) -> Result<Simdjson, String> {
        let last_error = || {
            // SAFETY: dlerror returns NULL or a C string that stays valid
            // until the next dl call, and is copied before then.
            let e = unsafe { dlerror() };
            if e.is_null() {
                "unknown error".to_string()
            } else {
                // SAFETY: non-NULL, so a C string (see above).
                unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
            }
        };
        let c_path = CString::new(path).map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated path; the library (ours) runs no code
        // at load beyond simdjson's static constructors.
        let lib = unsafe { dlopen(c_path.as_ptr(), RTLD_NOW) };
        if lib.is_null() {
            return Err(last_error());
        }
        let symbol = |name: &CStr| {
            // SAFETY: `lib` is a handle dlopen returned, never closed.
            let f = unsafe { dlsym(lib, name.as_ptr()) };
            if f.is_null() {
                Err(last_error())
            } else {
                Ok(f)
            }
        };
        // SAFETY: each symbol is the extern "C" function of that name in
        // benches/simdjson_shim.cpp, whose signature the type spells.
        unsafe {
            Ok(Simdjson {
                open: std::mem::transmute::<*mut c_void, OpenFn>(symbol(c"qjson_simdjson_open")?),
                stage1: std::mem::transmute::<*mut c_void, ParseFn>(symbol(
                    c"qjson_simdjson_stage1",
                )?),
                dom: std::mem::transmute::<*mut c_void, ParseFn>(symbol(c"qjson_simdjson_dom")?),
                close: std::mem::transmute::<*mut c_void, CloseFn>(symbol(
                    c"qjson_simdjson_close",
                )?),
            })
        }
    }

    /// simdjson's parsers of `bytes` with its kernel `kernel`; `None`
    /// when this CPU lacks it (or simdjson rejects the text).
    fn parsers(&self, kernel: &str, bytes: &[u8]) -> Option<Parsers<'_>> {
        let name = CString::new(kernel).ok()?;
        // SAFETY: a C string and a live slice; the shim copies the bytes.
        let ptr = unsafe { (self.open)(name.as_ptr(), bytes.as_ptr(), bytes.len()) };
        (!ptr.is_null()).then_some(Parsers { lib: self, ptr })
    }
}

/// A text and simdjson's two parsers of it, for one kernel.
struct Parsers<'a> {
    lib: &'a Simdjson,
    ptr: *mut c_void,
}

impl Parsers<'_> {
    fn stage1(&self) {
        // SAFETY: `ptr` came from the shim's open and is not closed yet.
        let status = unsafe { (self.lib.stage1)(self.ptr) };
        assert_eq!(status, 0, "simdjson rejects the text");
    }

    fn dom(&self) {
        // SAFETY: as in `stage1`.
        let status = unsafe { (self.lib.dom)(self.ptr) };
        assert_eq!(status, 0, "simdjson rejects the text");
    }
}

impl Drop for Parsers<'_> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from the shim's open; closed once, here.
        unsafe { (self.lib.close)(self.ptr) }
    }
}

fn main() {
    let data = std::env::var("QJSON_DATA").unwrap_or_else(|_| "../shared/data".into());
    let mut payloads: Vec<(String, Vec<u8>)> = Vec::new();
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
            Ok(bytes) => payloads.push((name, bytes)),
            Err(e) => eprintln!("skipping {path}: {e}"),
        }
    }
    let simdjson_path = std::env::var("QJSON_SIMDJSON")
        .ok()
        .filter(|s| !s.is_empty());
    let simdjson = simdjson_path.as_deref().and_then(|path| {
        Simdjson::load(path)
            .map_err(|e| println!("(no simdjson figures: {path}: {e})"))
            .ok()
    });

    let opts = Options::default();
    println!(
        "{:<18} {:>7} {:>9} {:>9} {:>9} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9} {:>7} {:>9}",
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
        "sj DOM",
        "s1/sj",
        "full/DOM"
    );
    for (name, bytes) in &payloads {
        let reference = gbps(bytes.len(), || {
            black_box(memchr::memchr(0xff, black_box(bytes)));
        });
        // Every kernel makes the same index: stage 2 runs over one made
        // once, in the build beside each kernel (`Isa::beside`).
        let mut prepared = Index::default();
        scan::scan(bytes, &mut prepared).unwrap();
        let mut scratch = validate::Scratch::default();
        let mut index = Index::default();
        for kernel in scan::supported_kernels() {
            let isa = Isa::beside(kernel);
            let stage2 = gbps(bytes.len(), || {
                // SAFETY: `prepared` is stage 1's output for `bytes`; `isa`
                // was made for this CPU.
                unsafe {
                    validate::validate_unchecked(
                        black_box(bytes),
                        &mut prepared,
                        &opts,
                        &mut scratch,
                        isa,
                    )
                }
                .unwrap()
            });
            let sj = simdjson_kernel(kernel);
            let mut doc = Document::new();
            let mut stage1 = || {
                index.clear();
                scan::scan_with(kernel, black_box(bytes), &mut index).unwrap();
            };
            let mut full = || doc.load_with(kernel, black_box(bytes), &opts).unwrap();
            let parsers = simdjson.as_ref().and_then(|s| s.parsers(sj, bytes));
            let len = bytes.len();
            // simdjson's stage 1 and DOM GB/s, and qjson's speed over them.
            let (s1, full, [sj_s1, sj_dom, s1_ratio, full_ratio]) = match &parsers {
                Some(parsers) => {
                    let secs = round_secs(&mut [
                        &mut stage1,
                        &mut || parsers.stage1(),
                        &mut full,
                        &mut || parsers.dom(),
                    ]);
                    let [s1, sj_s1, full, sj_dom] = &secs[..] else {
                        unreachable!("four tasks")
                    };
                    (
                        best(len, s1),
                        best(len, full),
                        [
                            format!("{:.2}", best(len, sj_s1)),
                            format!("{:.2}", best(len, sj_dom)),
                            format!("{:.2}x", paired(s1, sj_s1)),
                            format!("{:.2}x", paired(full, sj_dom)),
                        ],
                    )
                }
                None => {
                    let secs = round_secs(&mut [&mut stage1, &mut full]);
                    (
                        best(len, &secs[0]),
                        best(len, &secs[1]),
                        ["-", "-", "-", "-"].map(String::from),
                    )
                }
            };
            println!(
                "{:<18} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>10.2} {:>9.2} {:>10.2}x {:>9} {:>9} {:>9} {:>7} {:>9}",
                name,
                kernel.name(),
                len as f64 / 1e6,
                s1,
                stage2,
                full,
                reference,
                s1 / reference,
                sj,
                sj_s1,
                sj_dom,
                s1_ratio,
                full_ratio
            );
        }
    }
    println!(
        "(GB/s, best of 7 rounds; stage 1, stage 2 and the full parse with each kernel \
         (Document::load_with; stage 2 in the build beside the kernel: x86-64-v3 beside \
         avx2 and avx512 where the CPU has it, the baseline beside the others); \
         the active kernel is {})",
        scan::active_kernel().map_or("?", Kernel::name)
    );
    match (&simdjson, simdjson_path) {
        (Some(_), Some(path)) => println!(
            "(simdjson 3.9.4 from {path}, in this process, its rounds alternating with \
             the qjson kernel's beside it: stage 1 = ondemand::parser::iterate, DOM = \
             dom::parser::parse, best of 7 rounds; s1/sj and full/DOM: how many times \
             faster qjson's stage 1 and full parse ran than simdjson's stage 1 and DOM \
             parse, the median of the 7 rounds each ran against the other back to back; \
             '-' where this CPU lacks the kernel)"
        ),
        (None, None) => println!(
            "(no simdjson figures: QJSON_SIMDJSON is not set; make bench sets it when \
             tools/baselines.sh finds the baselines)"
        ),
        // Said above, with why.
        _ => {}
    }
}
