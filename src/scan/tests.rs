//! Every kernel against the byte-at-a-time oracle, on generated texts
//! shifted across block boundaries, plus the page-boundary read check.

use super::*;
use crate::testing::{GuardedPage, Rng, VOUCHED_ESCAPES, naive_scan, random_json, random_text};

/// Stage 1 of `input` with `kernel` into a new index: its positions and
/// escapes. The `avx512` kernel runs both one block and two a turn
/// (`run_pass_turns`), which must agree, whichever this CPU is given.
///
/// `roomy`: the index starts with room for every offset (as a pooled
/// document's has), poisoned: a writer that skips a slot leaves the
/// poison there, not a right value from an earlier scan whose memory the
/// allocator handed back. A kernel that writes as it scans then does so
/// for any input. Otherwise it starts empty (a fresh document), and an
/// input of one run has its offsets written after the run
/// (`generic::scan` explains both ways).
fn run(kernel: Kernel, input: &[u8], roomy: bool) -> Result<(Vec<u32>, Vec<u32>)> {
    let turns: &[Option<bool>] = match kernel {
        Kernel::Avx512 => &[Some(false), Some(true)],
        _ => &[None],
    };
    let mut results = turns.iter().map(|&avx512_pairs| {
        let mut index = Index::default();
        if roomy {
            index.positions = vec![u32::MAX; 2 * input.len() + 256];
            index.positions.clear();
        }
        let stage1 = generic::Stage1 {
            input,
            index: &mut index,
        };
        // SAFETY: the callers pass kernels from `supported_kernels`.
        unsafe { run_pass_turns(kernel, avx512_pairs, stage1) }
            .expect("a kernel of this architecture")
            .map(|()| (index.positions, index.escapes))
    });
    let first = results.next().expect("one way at least");
    for other in results {
        assert_eq!(
            other,
            first,
            "kernel {}: one block and two a turn disagree",
            kernel.name()
        );
    }
    first
}

/// Checks every supported kernel against the oracle on `input`, and on
/// `input` with 0..=130 spaces before and after (pass `pad = false` for
/// large inputs) so each byte lands on every lane and on the tail path.
fn check_all_kernels(input: &[u8], pad: bool) {
    // Miri interprets every step: three shifts (0, 65, 130) still move
    // each byte across a block boundary and onto the tail path.
    let step = if cfg!(miri) { 65 } else { 1 };
    let shifts: Vec<(usize, usize)> = if pad {
        (0..=130)
            .step_by(step)
            .map(|n| (n, (n * 7) % 131))
            .collect()
    } else {
        vec![(0, 0)]
    };
    for (before, after) in shifts {
        let mut text = vec![b' '; before];
        text.extend_from_slice(input);
        text.extend(std::iter::repeat_n(b' ', after));
        let want = naive_scan(&text);
        // Each way of writing the offsets on every other shift, both on
        // an unshifted text.
        let ways: &[bool] = if pad {
            &[before % 2 == 0]
        } else {
            &[true, false]
        };
        for kernel in supported_kernels() {
            for &roomy in ways {
                let got = run(kernel, &text, roomy);
                assert_eq!(
                    got,
                    want,
                    "kernel {} (roomy: {roomy}) disagrees with the oracle on {:?} (shifted by {before})",
                    kernel.name(),
                    String::from_utf8_lossy(&text)
                );
            }
        }
    }
}

#[test]
fn every_kernel_is_found_again_from_its_number() {
    for kernel in Kernel::ALL {
        assert_eq!(Kernel::from_u8(kernel as u8), Some(kernel));
    }
    assert_eq!(Kernel::from_u8(0), None);
    assert_eq!(Kernel::from_u8(Kernel::ALL.len() as u8 + 1), None);
}

#[test]
fn the_machine_runs_a_simd_kernel_when_it_has_one() {
    let kernels: Vec<_> = supported_kernels().collect();
    assert!(kernels.contains(&Kernel::Scalar));
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            assert!(kernels.contains(&Kernel::Avx2));
        }
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vbmi")
            && std::is_x86_feature_detected!("avx512vbmi2")
        {
            assert!(kernels.contains(&Kernel::Avx512));
        }
    }
    #[cfg(target_arch = "aarch64")]
    assert!(kernels.contains(&Kernel::Neon));
}

#[test]
fn the_automatic_choice_is_the_best_supported_kernel() {
    let chosen = decide_for(None).unwrap();
    assert_eq!(decide_for(Some("")), Some(chosen));
    assert_eq!(supported_kernels().last(), Some(chosen));
    for k in supported_kernels() {
        assert_eq!(decide_for(Some(k.name())), Some(k));
    }
    assert_eq!(decide_for(Some("avx9000")), None);
}

#[test]
fn forced_kernel_is_the_one_running() {
    // The environment is read once per process; this checks the decision
    // function itself so the test does not depend on test order.
    for k in supported_kernels() {
        assert_eq!(Kernel::from_name(k.name()), Some(k));
    }
    assert_eq!(Kernel::from_name("avx9000"), None);
    if let Ok(name) = std::env::var(KERNEL_ENV) {
        assert_eq!(active_kernel().map(Kernel::name), Ok(name.as_str()));
    }
}

#[test]
fn small_documents() {
    for doc in [
        &b""[..],
        b" ",
        b"{}",
        b"[1,2,3]",
        br#"{"a":"b","c":[true,false,null,-1.5e3]}"#,
        br#""\"""#,
        br#""\\""#,
        br#""\\\"""#,
        br#"["a\\\\\"b"]"#,
        b"\"abc",
        b"\"a\x01b\"",
        b"\"\\\x01\"",
        b"[\"\xc3\"]",
        b"[\"\xed\xa0\x80\"]",
        b"\"abc\\",
        b"\\\"x\"y\"",
        b"[1 2]",
        b"\x0c[]\x1a",
        b"tru e",
    ] {
        check_all_kernels(doc, true);
    }
}

#[test]
fn quotes_and_backslash_runs_at_every_offset_around_block_boundaries() {
    for offset in 0..140 {
        for run in 0..6 {
            let mut s = vec![b'"'];
            s.extend(std::iter::repeat_n(b'a', offset));
            s.extend(std::iter::repeat_n(b'\\', run));
            s.extend_from_slice(b"\"x\"");
            s.extend(std::iter::repeat_n(b'b', 70));
            s.push(b'"');
            check_all_kernels(&s, false);
            // And as an object value, with trailing structure.
            let mut doc = b"{\"k\":".to_vec();
            doc.extend_from_slice(&s);
            doc.extend_from_slice(b",\"z\":[1,2]}");
            check_all_kernels(&doc, false);
        }
    }
}

#[test]
fn multibyte_characters_at_every_offset() {
    for ch in ["é", "€", "😀", "\u{10FFFF}"] {
        for broken in [false, true] {
            for offset in 0..140 {
                let mut s = vec![b'"'];
                s.extend(std::iter::repeat_n(b'a', offset));
                let bytes = ch.as_bytes();
                s.extend_from_slice(if broken {
                    &bytes[..bytes.len() - 1]
                } else {
                    bytes
                });
                // A whole plain block follows the character, then a block
                // with valid non-ASCII bytes that must not hide an open
                // sequence carried across the skipped block.
                s.extend(std::iter::repeat_n(b'a', 140));
                s.extend_from_slice("é".as_bytes());
                s.push(b'"');
                check_all_kernels(&s, false);
            }
        }
    }
}

#[test]
fn random_texts_match_the_oracle() {
    let mut rng = Rng::new(1);
    for round in 0..400 {
        let len = rng.below(300);
        let text = random_text(&mut rng, len);
        check_all_kernels(&text, round % 8 == 0);
    }
}

#[test]
fn random_json_matches_the_oracle() {
    let mut rng = Rng::new(2);
    for round in 0..300 {
        let doc = random_json(&mut rng, 4);
        assert!(naive_scan(&doc).is_ok());
        check_all_kernels(&doc, round % 10 == 0);
    }
}

#[test]
fn every_three_byte_sequence_inside_a_string() {
    // Exhaustive over the UTF-8 decision space of a pair plus a third
    // byte, in the middle of a 64-byte block and across a boundary.
    let mut rng = Rng::new(3);
    for a in 0x80..=0xffu8 {
        for b in 0..=0xffu8 {
            let c = rng.pick(&[0x41u8, 0x80, 0x9f, 0xa0, 0xbf, 0xc2]);
            for at in [20, 62] {
                let mut s = vec![b'"'; 1];
                s.extend(std::iter::repeat_n(b'a', at));
                s.extend_from_slice(&[a, b, c]);
                s.extend(std::iter::repeat_n(b'a', 70));
                s.push(b'"');
                check_all_kernels(&s, false);
            }
        }
    }
}

#[test]
fn inputs_of_4_gib_are_rejected_before_reading() {
    // calloc'd zero pages: untouched, so this costs no memory.
    let huge = vec![0u8; MAX_INPUT];
    let mut index = Index::default();
    for kernel in supported_kernels() {
        assert_eq!(
            scan_with(kernel, &huge, &mut index),
            Err(Error::new(ErrorCode::TooLarge, MAX_INPUT))
        );
    }
    assert!(index.positions.is_empty());
}

#[cfg(unix)]
#[cfg_attr(miri, ignore)] // mprotect is not emulated
#[test]
fn never_reads_outside_the_input() {
    // Every length 0..=300 (so every length mod 64, through the tail
    // path) plus generated documents, placed so the input ends at the
    // last readable byte, and again so it starts at the first one.
    let mut page = GuardedPage::new();
    let mut rng = Rng::new(4);
    for len in 0..=300 {
        let text = if len % 3 == 0 {
            random_json(&mut rng, 3)
        } else {
            random_text(&mut rng, len)
        };
        let text = &text[..text.len().min(GuardedPage::SIZE)];
        let want = naive_scan(text);
        for kernel in supported_kernels() {
            assert_eq!(run(kernel, page.at_end(text), true), want);
            assert_eq!(run(kernel, page.at_start(text), false), want);
        }
    }
}

#[test]
fn long_texts_across_runs_and_a_tail_after_a_full_run() {
    // generic::scan works in runs of 64 blocks (4096 bytes): texts of
    // every length around one and two runs, so the tail follows a full
    // run, a partial one, or none.
    let mut rng = Rng::new(5);
    let mut doc = b"[".to_vec();
    while doc.len() < 8400 {
        doc.extend_from_slice(&random_json(&mut rng, 2));
        doc.push(b',');
    }
    for end in (4000..4200).chain(8100..8300) {
        let mut text = doc[..end].to_vec();
        text.extend_from_slice(b"0]");
        check_all_kernels(&text, false);
    }
    // The same lengths with an escape in every block, so that a full
    // run's escapes fill their array as its structurals do (a kernel that
    // writes as it scans once took the tail into a full run).
    for escapes in (1990..2110).chain(4040..4160) {
        for extra in [&b""[..], b"a"] {
            let text = [&b"[\""[..], extra, &br"\n".repeat(escapes), b"\"]"].concat();
            check_all_kernels(&text, false);
        }
    }
    // A plain ASCII string skipped past the end of its run, closed at
    // every offset around the end of one and of two runs, with a value
    // after it that the skip must not pass.
    for len in (3900..4300).chain(8050..8350) {
        let text = [
            &b"[\""[..],
            &b"QUJD".repeat(len / 4),
            &b"xyz"[..len % 4],
            b"\",1]",
        ]
        .concat();
        check_all_kernels(&text, false);
    }
}

#[test]
fn specials_at_every_offset_of_a_long_string() {
    // Long strings are skipped several blocks per test: a quote,
    // backslash, control or non-ASCII byte anywhere in one must stop the
    // skip at its block.
    for special in [&b"\""[..], b"\\n", b"\x01", "\u{e9}".as_bytes(), b"\xc3"] {
        for at in 0..700 {
            let mut s = b"[\"".to_vec();
            s.extend(std::iter::repeat_n(b'a', at));
            s.extend_from_slice(special);
            s.extend(std::iter::repeat_n(b'b', 700 - at));
            s.extend_from_slice(b"\",1]");
            check_all_kernels(&s, false);
        }
    }
}

#[test]
fn specials_at_every_offset_of_a_long_string_with_escapes() {
    // A long string with an escape in every block (source code in a chat
    // message) takes its blocks as escaped content, past the prefix XOR
    // and the writer: the string's end, a control byte (escaped or not),
    // escaped quotes and backslashes, backslash runs across blocks and
    // UTF-8, right or broken, at every offset must come out as the
    // oracle has them.
    let line = br#"  x = \"a\\b\" .. y\n"#;
    let specials: [&[u8]; 9] = [
        b"\"",
        b"\x01",
        b"\\\x01",
        br"\\\",
        br#"\\\""#,
        br#"\""#,
        "\u{e9}".as_bytes(),
        b"\xc3",
        br"\u12",
    ];
    let step = if cfg!(miri) { 41 } else { 1 };
    for special in specials {
        for at in (2..500).step_by(step) {
            check_all_kernels(&long_string_around(line, special, at, true), false);
        }
    }
}

/// `["`, then `filler` repeated up to offset `at`, `special`, `filler`
/// again to 700 bytes, and `",1]`. With `cut` the first run of fillers
/// is cut at exactly `at` (an ASCII filler); else it ends on a whole
/// filler at `at` or past it (one in another script stays UTF-8).
fn long_string_around(filler: &[u8], special: &[u8], at: usize, cut: bool) -> Vec<u8> {
    let mut s = b"[\"".to_vec();
    while s.len() < at {
        s.extend_from_slice(filler);
    }
    if cut {
        s.truncate(at);
    }
    s.extend_from_slice(special);
    while s.len() < 700 {
        s.extend_from_slice(filler);
    }
    s.extend_from_slice(b"\",1]");
    s
}

#[test]
fn long_plain_strings_at_every_alignment_of_the_input() {
    // The skip over plain ASCII tests windows aligned in memory, starting
    // up to 63 bytes before where it was asked to: the same texts placed
    // at each of the 64 alignments of a cache line, a special byte at
    // offsets all around the windows' ends, through stage 1 and through
    // the string run alone.
    let step = if cfg!(miri) { 97 } else { 5 };
    let (mut text_at, mut content_at) = (vec![0u8; 1200 + 64], vec![0u8; 1200 + 64]);
    // `bytes` copied into `buffer` at `align` bytes into a cache line.
    fn place<'a>(buffer: &'a mut [u8], bytes: &[u8], align: usize) -> &'a [u8] {
        let from = (align + 64 - buffer.as_ptr() as usize % 64) % 64;
        buffer[from..from + bytes.len()].copy_from_slice(bytes);
        &buffer[from..from + bytes.len()]
    }
    for special in [&b"\""[..], b"\\n", b"\x01", "\u{e9}".as_bytes()] {
        for at in (0..900).step_by(step) {
            let mut content = vec![b'a'; at];
            content.extend_from_slice(special);
            content.resize(1000, b'b');
            let text = [&b"[\""[..], &content, b"\",1]"].concat();
            let want = naive_scan(&text);
            let stop = content
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(content.len());
            let whole = stop / 64 * 64;
            let want_run = (whole, content[..whole].iter().any(|&b| b >= 0x80));
            // Under Miri every ninth alignment, 63 among them.
            for align in (0..64).step_by(if cfg!(miri) { 9 } else { 1 }) {
                let text = place(&mut text_at, &text, align);
                let content = place(&mut content_at, &content, align);
                for kernel in supported_kernels() {
                    assert_eq!(
                        run(kernel, text, false),
                        want,
                        "kernel {}: special at {at}, input at {align} in a line",
                        kernel.name()
                    );
                    // SAFETY: `supported_kernels` gives kernels this CPU runs.
                    let got = unsafe { run_pass(kernel, generic::StringRun(content)) };
                    assert_eq!(
                        got,
                        Some(want_run),
                        "kernel {}, {at}, {align}",
                        kernel.name()
                    );
                }
            }
        }
    }
}

#[test]
fn specials_in_long_non_ascii_text() {
    // Blocks inside a string that hold no quote, backslash or control
    // byte skip classification whatever their script; only their UTF-8
    // is checked. Text in a 3-byte script with a special at every offset,
    // sequences cut at every block boundary, some broken.
    let word = "日本語のテキスト".as_bytes();
    for special in [&b"\""[..], b"\\n", b"\x01", b"a", b"\xe6\x97", b"\xff"] {
        for at in 0..400 {
            check_all_kernels(&long_string_around(word, special, at, false), false);
        }
    }
}

#[test]
fn an_escape_carried_into_a_skipped_block() {
    // A backslash run that ends a block escapes byte 0 of the next; when
    // that block is then skipped as plain string content, its escape must
    // still be recorded (and a run of even length escapes nothing).
    for run in 1..=4 {
        for end in [63, 127, 191] {
            let mut s = b"[\"".to_vec();
            s.extend(std::iter::repeat_n(b'a', end + 1 - run - s.len()));
            s.extend(std::iter::repeat_n(b'\\', run));
            s.extend(std::iter::repeat_n(b'n', 300));
            s.extend_from_slice(b"\",1]");
            check_all_kernels(&s, false);
            // And a skipped block of non-ASCII text after the escape.
            let mut t = s[..end + 1].to_vec();
            t.extend_from_slice("é".repeat(150).as_bytes());
            t.extend_from_slice(b"\",1]");
            check_all_kernels(&t, false);
        }
    }
}

#[test]
fn blocks_of_every_density() {
    // Offsets are written per block, 8 or 16 at a time past a count test:
    // blocks holding exactly 0 to 64 structurals, at random places, each
    // pattern shifted across every lane.
    let mut rng = Rng::new(6);
    for density in 0..=64 {
        let mut text = Vec::new();
        for _ in 0..3 {
            let mut block = [b' '; 64];
            let mut placed = 0;
            while placed < density {
                let at = rng.below(64);
                if block[at] == b' ' {
                    block[at] = rng.pick(b"[]{},:");
                    placed += 1;
                }
            }
            text.extend_from_slice(&block);
        }
        text.extend_from_slice(b"[]{},:[]");
        check_all_kernels(&text, density % 8 == 0);
    }
}

#[test]
fn strings_of_every_escape_density() {
    // A run's escapes are written as they are, or without the `\u` that
    // stage 1 vouches for where a block lists two or more
    // (`generic::push_unvouched`): strings of 0 to 32 escapes per block,
    // runs of them spanning several blocks and runs.
    let mut rng = Rng::new(7);
    // Under Miri, which interprets every step, every fourth density.
    for density in (0..=32).step_by(if cfg!(miri) { 4 } else { 1 }) {
        let mut text = b"[\"".to_vec();
        while text.len() < 5000 {
            if rng.below(64) < density {
                text.extend_from_slice(rng.pick(&[&br"\u4e2d"[..], br"\n", br"\\", br#"\""#]));
            } else {
                text.push(b'a');
            }
        }
        text.extend_from_slice(b"\",1]");
        check_all_kernels(&text, density % 8 == 0);
    }
}

#[test]
fn unicode_escapes_of_every_kind_are_listed_as_the_oracle_lists_them() {
    // Which `\uXXXX` stage 1 vouches for and leaves out of the list
    // (`generic::unlist_vouched`): code units on each side of the
    // surrogates' bounds, in either case, digits that are no hex digits,
    // and the escapes and quotes that decide which escape is a string's
    // first in a block, in random strings that each kernel scans at every
    // shift against the oracle.
    const PIECES: &[&str] = &[
        r"\u0041", r"\u00e9", r"\u0800", r"\uCFFF", r"\ud000", r"\uD7FF", r"\ud800", r"\uDBFF",
        r"\udc00", r"\uDFFF", r"\ue000", r"\uFFFF", r"\u00G0", r"\u12", r"\U0041", r"\n", r#"\""#,
        r"\\", r"\r", "a", "\",\"", "\":\"",
    ];
    let mut rng = Rng::new(12);
    for _ in 0..if cfg!(miri) { 4 } else { 60 } {
        let mut text = b"[\"".to_vec();
        while text.len() < 300 {
            text.extend_from_slice(rng.pick(PIECES).as_bytes());
        }
        text.extend_from_slice(b"\"]");
        check_all_kernels(&text, true);
    }
}

/// The room past its offsets that `kernel`'s writer may use, asked of
/// the kernel's `Simd` through the one map from kernels to their code.
fn write_slack(kernel: Kernel) -> usize {
    struct Slack;
    impl generic::Pass for Slack {
        type Output = usize;
        fn input(&self) -> &[u8] {
            &[]
        }
        unsafe fn run<S: generic::Simd>(self, _: S) -> usize {
            S::WRITE_SLACK
        }
    }
    // SAFETY: called for supported kernels only.
    unsafe { run_pass(kernel, Slack) }.expect("a kernel of this architecture")
}

#[test]
fn a_fresh_index_holds_its_entries_and_the_writers_slack() {
    // What a pooled document keeps for good: not 64 slots per block.
    let sse = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1763700000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#;
    let tool = br#"{"order_id":"A-20931","options":{"history":true,"max_items":25}}"#;
    for text in [
        &tool[..],
        sse,
        b"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19]",
    ] {
        for kernel in supported_kernels() {
            let mut index = Index::default();
            scan_with(kernel, text, &mut index).unwrap();
            let (len, capacity) = (index.positions.len(), index.positions.capacity());
            assert!(
                capacity <= len + write_slack(kernel),
                "kernel {}: {len} entries in {capacity} slots",
                kernel.name()
            );
        }
    }
}

#[test]
fn every_kernel_judges_utf8_as_core_does() {
    // Random texts (PIECES holds valid and invalid sequences), each also
    // cut at every length up to 130 bytes, so a sequence lands on every
    // lane, straddles blocks and is cut short at the end.
    let mut rng = Rng::new(9);
    let count = if cfg!(miri) { 4 } else { 400 };
    for _ in 0..count {
        let text = random_text(&mut rng, 160);
        for len in (0..=text.len().min(130)).chain([text.len()]) {
            let bytes = &text[..len];
            let want = core::str::from_utf8(bytes).is_ok();
            for kernel in supported_kernels() {
                // SAFETY: `supported_kernels` gives kernels this CPU runs.
                let got = unsafe { run_pass(kernel, generic::Utf8(bytes)) }.unwrap();
                assert_eq!(got, want, "kernel {} on {bytes:02x?}", kernel.name());
            }
        }
    }
}

#[test]
fn every_kernel_finds_where_string_content_stops() {
    // Plain ASCII of random lengths with, at random places, a byte that
    // ends string content (a quote, a backslash, a control byte) and bytes
    // from 0x80: the run is the whole blocks before the first such byte,
    // and says whether it holds a byte from 0x80.
    let mut rng = Rng::new(21);
    let count = if cfg!(miri) { 4 } else { 3000 };
    for _ in 0..count {
        let len = rng.below(700);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.pick(b"aZ09+/= .,")).collect();
        for _ in 0..rng.below(3) {
            if len > 0 {
                let at = rng.below(len);
                bytes[at] = rng.pick(&[0x80, 0xc3, 0xa9, 0xff, 0x7f]);
            }
        }
        if len > 0 && !rng.one_in(4) {
            let at = rng.below(len);
            bytes[at] = rng.pick(&[b'"', b'\\', 0x00, 0x1f, b'\n']);
        }
        let stop = bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(len);
        let run = stop / 64 * 64;
        let want = (run, bytes[..run].iter().any(|&b| b >= 0x80));
        for kernel in supported_kernels() {
            // SAFETY: `supported_kernels` gives kernels this CPU runs.
            let got = unsafe { run_pass(kernel, generic::StringRun(&bytes)) }.unwrap();
            assert_eq!(got, want, "kernel {} on {bytes:02x?}", kernel.name());
        }
    }
}

#[test]
fn every_kernel_vouches_for_the_short_escapes_alone() {
    // Every byte value at each of the 64 places of a block of other
    // bytes: its bit in `short_escapes` is set exactly for the vouched
    // escapes' bytes, and no other bit is.
    struct ShortEscapes<'a>(&'a [u8; 64]);
    impl generic::Pass for ShortEscapes<'_> {
        type Output = u64;
        fn input(&self) -> &[u8] {
            self.0
        }
        unsafe fn run<S: generic::Simd>(self, simd: S) -> u64 {
            // SAFETY: 64 readable bytes; the caller vouches for the CPU.
            unsafe { simd.short_escapes(&simd.load(self.0.as_ptr())) }
        }
    }
    let mut bytes = [b'a'; 64];
    let step = if cfg!(miri) { 13 } else { 1 };
    for at in (0..64).step_by(step) {
        for b in 0..=255u8 {
            bytes[at] = b;
            let want = u64::from(VOUCHED_ESCAPES.contains(&b)) << at;
            for kernel in supported_kernels() {
                // SAFETY: `supported_kernels` gives kernels this CPU runs.
                let got = unsafe { run_pass(kernel, ShortEscapes(&bytes)) }.unwrap();
                assert_eq!(got, want, "kernel {}: {b:#04x} at {at}", kernel.name());
            }
        }
        bytes[at] = b'a';
    }
}

#[test]
fn every_kernel_finds_the_bytes_of_unicode_escapes_exactly() {
    // Every byte value at each of the 64 places of a block of other
    // bytes: its bit in each mask of `unicode_bytes` is set exactly when
    // it is of that mask's class, and no other bit is.
    struct Bytes<'a>(&'a [u8; 64]);
    impl generic::Pass for Bytes<'_> {
        type Output = generic::UnicodeBytes;
        fn input(&self) -> &[u8] {
            self.0
        }
        unsafe fn run<S: generic::Simd>(self, simd: S) -> generic::UnicodeBytes {
            // SAFETY: 64 readable bytes; the caller vouches for the CPU.
            unsafe { simd.unicode_bytes(&simd.load(self.0.as_ptr())) }
        }
    }
    let mut bytes = [b'z'; 64];
    let step = if cfg!(miri) { 13 } else { 1 };
    for at in (0..64).step_by(step) {
        for b in 0..=255u8 {
            bytes[at] = b;
            let bit = |is: bool| u64::from(is) << at;
            let want = generic::UnicodeBytes {
                u: bit(b == b'u'),
                hex: bit(b.is_ascii_hexdigit()),
                d: bit(b == b'd' || b == b'D'),
                hex_from_8: bit(b.is_ascii_hexdigit() && !(b'0'..=b'7').contains(&b)),
                quote: bit(b == b'"'),
            };
            for kernel in supported_kernels() {
                // SAFETY: `supported_kernels` gives kernels this CPU runs.
                let got = unsafe { run_pass(kernel, Bytes(&bytes)) }.unwrap();
                assert_eq!(got, want, "kernel {}: {b:#04x} at {at}", kernel.name());
            }
        }
        bytes[at] = b'z';
    }
}

#[test]
fn every_kernel_tests_four_blocks_of_plain_ascii_byte_by_byte() {
    // Every byte value at positions in each of the four blocks (their
    // ends included) of 256 bytes of plain ASCII: plain only when the
    // byte is no quote, backslash, control byte or byte from 0x80. Both
    // tests: the four blocks at once, and each block alone (what the
    // four-block test of a kernel without its own is made of).
    struct Plain256<'a>(&'a [u8; 256]);
    impl generic::Pass for Plain256<'_> {
        type Output = (bool, [bool; 4]);
        fn input(&self) -> &[u8] {
            self.0
        }
        unsafe fn run<S: generic::Simd>(self, simd: S) -> (bool, [bool; 4]) {
            // SAFETY: 256 readable bytes; the caller vouches for the CPU.
            unsafe {
                let p = self.0.as_ptr();
                let block = |k: usize| simd.is_plain_string(&simd.load(p.add(64 * k)));
                (
                    simd.is_plain_string_256(p),
                    [block(0), block(1), block(2), block(3)],
                )
            }
        }
    }
    let plain = |b: u8| (0x20..0x80).contains(&b) && b != b'"' && b != b'\\';
    let mut bytes = [b'a'; 256];
    for at in [0, 1, 63, 64, 100, 127, 128, 191, 192, 200, 255] {
        for b in 0..=255u8 {
            bytes[at] = b;
            let mut blocks = [true; 4];
            blocks[at / 64] = plain(b);
            for kernel in supported_kernels() {
                // SAFETY: `supported_kernels` gives kernels this CPU runs.
                let got = unsafe { run_pass(kernel, Plain256(&bytes)) }.unwrap();
                assert_eq!(
                    got.0,
                    plain(b),
                    "kernel {}: {b:#04x} at {at}",
                    kernel.name()
                );
                assert_eq!(got.1, blocks, "kernel {}: {b:#04x} at {at}", kernel.name());
            }
        }
        bytes[at] = b'a';
    }
}
