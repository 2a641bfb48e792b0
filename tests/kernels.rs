//! Every stage-1 kernel this CPU runs gives the same verdict (error code
//! and byte offset) and the same index as the portable one, through
//! stage 1 and validation (in the build of stage 2 each kernel runs with): on JSONTestSuite, every truncation of its
//! files, and the corpus with bytes broken at many offsets. So does a
//! document parsing its own copy of the text (`Document::load_copy`,
//! what `qjson.decode_body` runs) against one parsing the text in place.
//!
//! `src/scan/tests.rs` compares stage 1 alone with the byte-at-a-time
//! oracle; this checks what a caller sees, errors included.

use std::path::PathBuf;

use qjson::document::Document;
use qjson::error::Error;
use qjson::index::Index;
use qjson::scan::{Kernel, supported_kernels};
use qjson::validate::Options;

type Verdict = Result<(Vec<u32>, Vec<u32>, Vec<u32>), Error>;

/// The full parse with `kernel`, and stage 2 in the build beside it
/// (`Isa::beside`: x86-64-v3 beside the x86 SIMD kernels, the baseline
/// beside the portable one).
fn parse(kernel: Kernel, text: &[u8]) -> Verdict {
    let mut doc = Document::new();
    doc.load_with(kernel, text, &Options::default())?;
    Ok(entries(doc.index()))
}

fn same_on_every_kernel(text: &[u8], what: &str) {
    let want = parse(Kernel::Scalar, text);
    for kernel in supported_kernels() {
        assert!(
            parse(kernel, text) == want,
            "{} differs from scalar on {what}",
            kernel.name()
        );
    }
}

/// A document's own copy of `text` parses as `text` in place does.
fn same_when_copied(text: &[u8], what: &str) {
    let opts = Options::default();
    let mut in_place = Document::new();
    let want = in_place
        .load(text, &opts)
        .map(|()| entries(in_place.index()));
    let mut copied = Document::new();
    // SAFETY: what `copied` gives out of its copy is read below, while
    // it holds that copy.
    let got = unsafe { copied.load_copy(text, &opts) }.map(|()| entries(copied.index()));
    assert!(got == want, "a copy parses otherwise on {what}");
    if want.is_ok() {
        assert_eq!(copied.src(), text);
    }
}

fn entries(index: &Index) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    (
        index.positions.clone(),
        index.escapes.clone(),
        index.links.clone(),
    )
}

/// The shared data directory's `sub` folder, if present.
fn data(sub: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(data) = std::env::var_os("QJSON_DATA") {
        dirs.push(PathBuf::from(data));
    }
    dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    dirs.push(PathBuf::from("/work/shared/data"));
    let found = dirs.into_iter().map(|d| d.join(sub)).find(|d| d.is_dir());
    if found.is_none() {
        eprintln!("{sub} not found (set QJSON_DATA): skipped");
    }
    found
}

#[test]
fn json_test_suite_and_every_truncation() {
    let Some(dir) = data("jsontestsuite") else {
        return;
    };
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read(&path).unwrap();
        same_when_copied(&text, &format!("{path:?}"));
        for end in 0..=text.len().min(4096) {
            same_on_every_kernel(&text[..end], &format!("{path:?} cut at {end}"));
        }
        files += 1;
    }
    assert!(files > 100, "only {files} JSONTestSuite files");
}

#[test]
fn corpus_with_bytes_broken_at_many_offsets() {
    let Some(dir) = data("corpus") else {
        return;
    };
    for name in ["twitter.json", "citm_catalog.json", "canada.json"] {
        let text = std::fs::read(dir.join(name)).unwrap();
        same_on_every_kernel(&text, name);
        same_when_copied(&text, name);
        // A control byte, an invalid UTF-8 byte, a quote, a backslash and
        // a bracket, each at 20 offsets spread over the text.
        for (k, bad) in [0x01u8, 0xff, b'"', b'\\', b'['].into_iter().enumerate() {
            for i in 0..20 {
                let at = (i * 104_729 + k * 7919) % text.len();
                let mut broken = text.clone();
                broken[at] = bad;
                same_on_every_kernel(&broken, &format!("{name} with {bad:#x} at {at}"));
            }
        }
    }
}
