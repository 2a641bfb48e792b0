//! Parse: any bytes, both duplicate-key policies, a random nesting limit.
//!
//! Input: `[policy, depth, text...]`. Checks that
//! * every kernel this CPU runs (scalar, avx2, avx512) gives the same verdict
//!   (the same first error) and the same index (positions, escapes, links)
//!   for stage 1 + validation (in the build of stage 2 beside the kernel:
//!   the baseline beside scalar, x86-64-v3 beside the others), through
//!   `Document::load_with` because `QJSON_KERNEL` is read once per process;
//! * `qjson_parse` (C ABI, active kernel) agrees with that verdict;
//! * the policies and limits nest: what `error` accepts `last wins` accepts,
//!   and the only extra rejections are `QJSON_E_DUPLICATE_KEY` and
//!   `QJSON_E_DEPTH_EXCEEDED`;
//! * an accepted text's root `qjson_raw` is the text without its
//!   surrounding whitespace.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qjson::document::Document;
use qjson::error::ErrorCode;
use qjson::scan::supported_kernels;
use qjson_fuzz::{Doc, Rejected, options, take};

fuzz_target!(|data: &[u8]| {
    let Some(([policy, depth], text)) = take::<2>(data) else {
        return;
    };
    let (opts, policy, depth) = options(policy, depth);

    let mut first = None;
    for kernel in supported_kernels() {
        let mut doc = Document::new();
        let got = doc.load_with(kernel, text, &opts).map(|()| {
            let index = doc.index();
            (
                index.positions.clone(),
                index.escapes.clone(),
                index.links.clone(),
            )
        });
        match &first {
            None => first = Some(got),
            Some(want) => assert!(*want == got, "kernel {} disagrees", kernel.name()),
        }
    }
    let rust = first.expect("the scalar kernel always runs");

    let verdict = Doc::parse(text, depth, policy).map(|doc| {
        let mut doc = doc;
        let root = doc.raw(0, b"").expect("the root of a parsed text");
        let trimmed = text.trim_ascii();
        assert_eq!(root.bytes, trimmed, "root raw is not the trimmed text");
        assert_eq!(
            root.i64_ as usize,
            text.len() - text.trim_ascii_start().len()
        );
    });
    match (&rust, verdict) {
        (Ok(_), Ok(())) => {}
        (Err(e), Err(r)) => assert_eq!(
            (e.code as i32, e.offset as u64),
            (r.code, r.offset),
            "C ABI verdict differs from the pipeline's"
        ),
        (want, got) => panic!("pipeline says {:?}, C ABI says {got:?}", want.is_ok()),
    }

    let loose = |text, depth| Doc::parse(text, depth, 0).map(drop);
    let strict = Doc::parse(text, depth, 1).map(drop);
    implies(strict, loose(text, depth), ErrorCode::DuplicateKey);
    if depth != 0 {
        implies(loose(text, depth), loose(text, 0), ErrorCode::DepthExceeded);
    }
});

/// `narrow` accepts only what `wide` accepts, and rejects more only with
/// `extra`.
fn implies(narrow: Result<(), Rejected>, wide: Result<(), Rejected>, extra: ErrorCode) {
    match (narrow, wide) {
        (Ok(()), Err(r)) => panic!("the narrower options accept, the wider reject with {r:?}"),
        (Err(r), Ok(())) => assert_eq!(r.code, extra as i32, "unexpected extra rejection"),
        _ => {}
    }
}
