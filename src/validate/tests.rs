//! Stage 2 against the reference validator, and error codes and offsets.

use super::*;
use crate::scan;
use crate::testing::{Rng, mutate, naive_is_valid, naive_scan, naive_stage2, random_json};

/// Stage 1 then stage 2, every way: [`validate`] (every entry read with a
/// bounds check) and [`validate_unchecked`] (without, when the text ends
/// with a bracket) in each build this CPU runs ([`Isa`]), which must agree
/// on the verdict and the links.
///
/// The first validation starts from no links (all zeroed as they are
/// made); the others from links poisoned, as a pooled document's hold a
/// longer document's: the walk must set every one it keeps.
fn check(text: &[u8], opts: &Options) -> Result<Index> {
    let mut index = Index::default();
    scan::scan(text, &mut index)?;
    let checked = validate(text, &mut index, opts, &mut Scratch::default());
    let links = std::mem::take(&mut index.links);
    let poisoned = vec![u32::MAX; index.positions.len() + 7];
    index.links = poisoned.clone();
    let checked_again = validate(text, &mut index, opts, &mut Scratch::default());
    let links_again = std::mem::replace(&mut index.links, poisoned.clone());
    assert_eq!(
        checked,
        checked_again,
        "{:?}",
        String::from_utf8_lossy(text)
    );
    if checked.is_ok() {
        assert_eq!(links, links_again, "{:?}", String::from_utf8_lossy(text));
    }
    for isa in builds() {
        index.links.clone_from(&poisoned);
        // SAFETY: `index` is stage 1's output for `text`; `builds` gives
        // the builds this CPU runs.
        let unchecked =
            unsafe { validate_unchecked(text, &mut index, opts, &mut Scratch::default(), isa) };
        assert_eq!(
            checked,
            unchecked,
            "{isa:?} on {:?}",
            String::from_utf8_lossy(text)
        );
        if checked.is_ok() {
            assert_eq!(
                links,
                index.links,
                "{isa:?} on {:?}",
                String::from_utf8_lossy(text)
            );
        }
    }
    checked.map(|()| index)
}

/// The builds of the walk this CPU runs, the baseline first: it and the
/// builds beside the kernels it runs.
fn builds() -> Vec<Isa> {
    let mut builds = vec![Isa::Baseline];
    for isa in scan::supported_kernels().map(Isa::beside) {
        if !builds.contains(&isa) {
            builds.push(isa);
        }
    }
    builds
}

#[test]
fn every_build_this_cpu_runs_is_tested() {
    let names = builds();
    println!("stage 2 builds tested here: {names:?}");
    // The portable kernel runs portable code throughout.
    assert_eq!(Isa::beside(scan::Kernel::Scalar), Isa::Baseline);
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("bmi2") {
        assert!(names.contains(&Isa::X86V3));
    }
}

fn error_of(text: &str) -> (ErrorCode, usize) {
    let e = check(text.as_bytes(), &Options::default()).unwrap_err();
    (e.code, e.offset)
}

#[test]
fn accepts_valid_documents() {
    for doc in [
        "0",
        "-0",
        "\"\"",
        "true",
        "null",
        " [ ] ",
        "{}",
        "[[],{}]",
        r#"{"a":{"b":[1,2,{"c":null}]}}"#,
        r#"["\u0000\ud83d\ude00\"\\\/\b\f\n\r\t"]"#,
        "1e400",
        "-1.5E-7",
        "[1,\"x\",true,false,null]",
    ] {
        assert!(check(doc.as_bytes(), &Options::default()).is_ok(), "{doc}");
    }
}

#[test]
fn links_match_the_worked_example() {
    let ix = check(br#"{"a":[1,"x\n"]}"#, &Options::default()).unwrap();
    assert_eq!(ix.positions, [0, 1, 3, 4, 5, 6, 7, 8, 12, 13, 14]);
    assert_eq!(ix.links, [10, 0, 0, 0, 9, 0, 0, 1, 0, 2, 1]);
    assert_eq!(ix.escapes, [11]);
}

/// The links of each key lead to the entry after its member
/// ([`Tree::next_key`]), found here by stepping over the value: under
/// both duplicate-key policies, whatever the value (containers empty or
/// not, strings, scalars) and wherever the member is (first, last,
/// nested).
#[test]
fn keys_link_to_the_entry_after_their_member() {
    // Under Miri (tools/sanitize.sh), a few documents: enough to run the
    // walk's unchecked stores through every kind of member.
    let documents = if cfg!(miri) { 40 } else { 3_000 };
    let mut rng = Rng::new(29);
    let mut keys_seen = 0;
    for _ in 0..documents {
        let text = random_json(&mut rng, 5);
        for duplicate_keys in [DuplicateKeys::LastWins, DuplicateKeys::Error] {
            let opts = Options {
                duplicate_keys,
                ..Options::default()
            };
            let Ok(ix) = check(&text, &opts) else {
                continue;
            };
            let tree = Tree {
                src: &text,
                positions: &ix.positions,
                links: &ix.links,
            };
            for (e, &p) in ix.positions.iter().enumerate() {
                if text[p as usize] != b'{' || ix.links[e] == e as u32 + 1 {
                    continue;
                }
                let close = ix.links[e];
                let mut key = e as u32 + 1;
                while key < close {
                    let after = tree.skip(key + 3) + 1;
                    assert_eq!(
                        tree.next_key(key),
                        Some(after),
                        "{:?}",
                        String::from_utf8_lossy(&text)
                    );
                    keys_seen += 1;
                    key = after;
                }
                assert_eq!(key, close + 1);
            }
        }
    }
    assert!(keys_seen > documents, "only {keys_seen} keys");
}

#[test]
fn empty_containers_count_zero() {
    let ix = check(b"[{},[]]", &Options::default()).unwrap();
    assert_eq!(ix.links, [6, 2, 0, 0, 5, 0, 2]);
}

#[test]
fn grammar_errors_name_the_expectation_and_offset() {
    use ErrorCode::*;
    for (doc, want) in [
        ("", (Empty, 0)),
        ("   ", (Empty, 3)),
        ("[1,]", (ExpectedValue, 3)),
        ("[", (ExpectedValueOrBracket, 1)),
        ("[1", (ExpectedCommaOrBracket, 2)),
        ("[1 2]", (ExpectedCommaOrBracket, 3)),
        ("{\"a\" 1}", (ExpectedColon, 5)),
        ("{\"a\":1 \"b\":2}", (ExpectedCommaOrBrace, 7)),
        ("{1:2}", (ExpectedKeyOrBrace, 1)),
        ("{\"a\":1,}", (ExpectedKey, 7)),
        ("{\"a\":}", (ExpectedValue, 5)),
        // A member cut short: the key, its escapes, then the colon.
        ("{\"a\"", (ExpectedColon, 4)),
        ("{\"a\":1,\"b\"", (ExpectedColon, 10)),
        ("{\"a\\x\"", (InvalidEscape, 3)),
        ("{\"\\ud800\"", (LoneSurrogate, 2)),
        ("{\"a\":1,", (ExpectedKey, 7)),
        ("{", (ExpectedKeyOrBrace, 1)),
        ("[1]x", (TrailingContent, 3)),
        ("[1] [2]", (TrailingContent, 4)),
        ("[01]", (InvalidNumber, 1)),
        ("[1.]", (InvalidNumber, 1)),
        ("[-]", (InvalidNumber, 1)),
        ("[1x]", (InvalidNumber, 1)),
        ("[tru]", (InvalidLiteral, 1)),
        ("[nulll]", (InvalidLiteral, 1)),
        ("[x]", (ExpectedValueOrBracket, 1)),
        ("[1,x]", (ExpectedValue, 3)),
        ("]", (ExpectedValue, 0)),
        ("\"a\\x\"", (InvalidEscape, 2)),
        ("\"\\u12G4\"", (InvalidUnicodeEscape, 1)),
        ("\"\\ud800\"", (LoneSurrogate, 1)),
        ("\"\\udc00\"", (LoneSurrogate, 1)),
        ("\"\\ud800\\u0041\"", (LoneSurrogate, 1)),
        ("\"\\ud800\\uZZZZ\"", (InvalidUnicodeEscape, 7)),
        ("[\"a\x01\"]", (ControlCharacter, 3)),
        ("[\"abc", (UnterminatedString, 1)),
        ("[\"\u{e9}\"] \u{0}", (TrailingContent, 7)),
        // Texts that end with a bracket but not with their root's close
        // (the walk without bounds checks reads up to such a bracket).
        ("[[]", (ExpectedCommaOrBracket, 3)),
        ("{\"a\":{}", (ExpectedCommaOrBrace, 7)),
        ("[1,[2]", (ExpectedCommaOrBracket, 6)),
        ("[{\"a\":[]}", (ExpectedCommaOrBracket, 9)),
        ("{\"a\"]", (ExpectedColon, 4)),
        ("{\"a\":]", (ExpectedValue, 5)),
        ("[\"a\",]", (ExpectedValue, 5)),
        ("[1]]", (TrailingContent, 3)),
        ("1]", (TrailingContent, 1)),
        ("\"a\"]", (TrailingContent, 3)),
        ("{]", (ExpectedKeyOrBrace, 1)),
        ("[}", (ExpectedValueOrBracket, 1)),
    ] {
        assert_eq!(error_of(doc), want, "{doc:?}");
    }
}

#[test]
fn messages_read_like_the_spec() {
    let text = b"{\"a\":1 x";
    let e = check(text, &Options::default()).unwrap_err();
    assert_eq!(
        e.display(text).to_string(),
        "unexpected character 'x' at byte 7, expected ',' or '}'"
    );
    let text = b"[1, 2, 017]";
    let e = check(text, &Options::default()).unwrap_err();
    assert_eq!(e.display(text).to_string(), "invalid number at byte 7");
}

#[test]
fn nesting_limit_is_exact_and_configurable() {
    let nest = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
    assert!(check(nest(1000).as_bytes(), &Options::default()).is_ok());
    assert_eq!(
        check(nest(1001).as_bytes(), &Options::default()).unwrap_err(),
        Error::new(ErrorCode::DepthExceeded, 1000)
    );
    let opts = Options {
        max_depth: 3,
        ..Options::default()
    };
    assert!(check(b"[{\"a\":[]}]", &opts).is_ok());
    assert!(check(b"[{\"a\":[[]]}]", &opts).is_err());
    // Deep enough to overflow any recursive parser's native stack.
    let deep = "[".repeat(100_000);
    assert_eq!(
        check(deep.as_bytes(), &Options::default())
            .unwrap_err()
            .code,
        ErrorCode::DepthExceeded
    );
    let unlimited = Options {
        max_depth: u32::MAX,
        ..Options::default()
    };
    assert!(check(nest(100_000).as_bytes(), &unlimited).is_ok());
}

#[test]
fn a_reused_scratch_keeps_the_nesting_limit() {
    // The frame stack lives in the scratch's buffer, its limit the lower
    // of the room left there and the nesting limit: room left by a deep
    // document must not lift a lower limit, and a deeper one grows it.
    let mut scratch = Scratch::default();
    let mut nested = |depth: usize, max_depth: u32| {
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let mut index = Index::default();
        scan::scan(text.as_bytes(), &mut index).expect("stage 1 accepts it");
        let opts = Options {
            max_depth,
            ..Options::default()
        };
        validate(text.as_bytes(), &mut index, &opts, &mut scratch)
    };
    let too_deep = |at| Err(Error::new(ErrorCode::DepthExceeded, at));
    assert_eq!(nested(600, u32::MAX), Ok(()));
    assert_eq!(nested(3, 2), too_deep(2));
    assert_eq!(nested(2, 2), Ok(()));
    assert_eq!(nested(1, 0), too_deep(0));
    assert_eq!(nested(101, 100), too_deep(100));
    assert_eq!(nested(100, 100), Ok(()));
    assert_eq!(nested(2_000, 2_000), Ok(()));
    assert_eq!(nested(2_001, 2_000), too_deep(2_000));
}

#[test]
fn duplicate_keys_follow_the_policy() {
    let strict = Options {
        duplicate_keys: DuplicateKeys::Error,
        ..Options::default()
    };
    let last = Options::default();
    for (doc, repeat_at) in [
        (r#"{"a":1,"a":2}"#, Some(7)),
        (r#"{"model":1,"mod\u0065l":2}"#, Some(11)),
        (r#"{"a":{"a":1},"b":{"a":2}}"#, None),
        (r#"{"a":1,"b":{"c":1,"c":2}}"#, Some(18)),
        (r#"{"\/":1,"/":2}"#, Some(8)),
        (
            r#"{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k3":9,"k1":10}"#,
            Some(64),
        ),
        (
            r#"{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9}"#,
            None,
        ),
    ] {
        assert!(check(doc.as_bytes(), &last).is_ok(), "{doc}");
        let got = check(doc.as_bytes(), &strict).err();
        assert_eq!(
            got,
            repeat_at.map(|at| Error::new(ErrorCode::DuplicateKey, at)),
            "{doc}"
        );
    }
}

#[test]
fn verdicts_match_the_reference_on_mutated_documents() {
    let mut rng = Rng::new(11);
    let mut rejected = 0;
    for _ in 0..20_000 {
        let doc = random_json(&mut rng, 4);
        let text = if rng.one_in(5) {
            doc
        } else {
            mutate(&mut rng, &doc)
        };
        let want = naive_is_valid(&text, DEFAULT_MAX_DEPTH as usize);
        let got = check(&text, &Options::default());
        assert_eq!(
            got.is_ok(),
            want,
            "{:?}: {got:?}",
            String::from_utf8_lossy(&text)
        );
        rejected += !want as usize;
    }
    // The mutations must actually produce invalid documents.
    assert!(rejected > 5_000, "only {rejected} rejected");
}

#[test]
fn depth_verdicts_match_the_reference() {
    let mut rng = Rng::new(12);
    for _ in 0..2_000 {
        let doc = random_json(&mut rng, 6);
        for depth in 0..6 {
            let opts = Options {
                max_depth: depth,
                ..Options::default()
            };
            assert_eq!(
                check(&doc, &opts).is_ok(),
                naive_is_valid(&doc, depth as usize)
            );
        }
    }
}

#[test]
#[should_panic(expected = "the index does not belong to this text")]
fn an_index_reaching_past_the_text_is_refused() {
    let mut index = Index::default();
    scan::scan(b"[1, 2]", &mut index).unwrap();
    let _ = validate(
        b"[1]",
        &mut index,
        &Options::default(),
        &mut Scratch::default(),
    );
}

/// The code and offset of every rejection, against the recursive-descent
/// reference (`naive_stage2` after `naive_scan`), on generated texts and
/// small mutations of them, at several nesting limits.
#[test]
fn errors_match_the_reference_on_mutated_documents() {
    let mut rng = Rng::new(13);
    let mut rejected = 0;
    for round in 0..20_000 {
        let doc = random_json(&mut rng, 4);
        let text = if round % 5 == 0 {
            doc
        } else {
            mutate(&mut rng, &doc)
        };
        for max_depth in [DEFAULT_MAX_DEPTH, 2] {
            let opts = Options {
                max_depth,
                ..Options::default()
            };
            let want = naive_scan(&text)
                .and_then(|(positions, _)| naive_stage2(&text, &positions, max_depth as usize));
            let got = check(&text, &opts).map(|_| ());
            assert_eq!(
                got,
                want,
                "{:?} at depth {max_depth}",
                String::from_utf8_lossy(&text)
            );
            rejected += usize::from(want.is_err());
        }
    }
    assert!(rejected > 10_000, "only {rejected} rejected");
}

/// Numbers of every length, well or badly spelled, in arrays and objects,
/// followed by a separator, a bracket or whitespace, with and without 32
/// bytes of text after them (the window the plain-number check needs):
/// the code and offset of every verdict are the reference's.
#[test]
fn numbers_are_checked_alike_at_every_length() {
    let mut rng = Rng::new(14);
    let mut rejected = 0;
    for round in 0..30_000 {
        let number = if round % 2 == 0 {
            crate::testing::random_number(&mut rng, 3, 4)
        } else {
            let len = 1 + rng.below(36);
            (0..len)
                .map(|_| char::from(rng.pick(b"0123456789000-+.eE")))
                .collect()
        };
        let after = rng.pick(&[",1", "", " ", "\n ,2"]);
        let pad = " ".repeat(rng.pick(&[0, 40]));
        let text = match rng.below(3) {
            0 => format!("[{number}{after}]{pad}"),
            1 => format!("{{\"k\":{number}{after}}}{pad}"),
            _ => format!("[[{number}]{after}]{pad}"),
        };
        let text = text.as_bytes();
        let want = naive_scan(text)
            .and_then(|(positions, _)| naive_stage2(text, &positions, DEFAULT_MAX_DEPTH as usize));
        let got = check(text, &Options::default()).map(|_| ());
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(text));
        rejected += usize::from(want.is_err());
    }
    assert!(rejected > 5_000, "only {rejected} rejected");
}

/// Runs of `\uXXXX` escapes (which validation takes a run at a time) of
/// every length up to five, ended in every way an escape can be right or
/// wrong, in values and keys: the code and offset of every verdict are
/// the reference's.
#[test]
fn runs_of_unicode_escapes_are_checked_to_their_end() {
    let endings = [
        "",
        r"\ud83d\ude00",
        r"\ud83d",
        r"\ud83dx",
        r"\ud83d\u0041",
        r"\ude00",
        r"\u4e2g",
        r"\u4e2",
        r"\u4e",
        r"\u",
        r"\n",
        r"\x",
        "\u{1}",
        r#"\""#,
        r"\\",
        r"\/",
        "\u{e9}",
        r"\U4e2d",
        r"\u00e9",
        r"\uD83D\uDE00",
    ];
    let mut rejected = 0;
    for run in 0..=5 {
        for ending in endings {
            for after in ["", r"\u4e2d", "a"] {
                let body = format!("{}{ending}{after}", r"\u4e2d".repeat(run));
                for text in [format!(r#"["{body}"]"#), format!(r#"{{"{body}":1}}"#)] {
                    let text = text.as_bytes();
                    let want = naive_scan(text).and_then(|(positions, _)| {
                        naive_stage2(text, &positions, DEFAULT_MAX_DEPTH as usize)
                    });
                    let got = check(text, &Options::default()).map(|_| ());
                    assert_eq!(got, want, "{:?}", String::from_utf8_lossy(text));
                    rejected += usize::from(want.is_err());
                }
            }
        }
    }
    assert!(rejected > 200, "only {rejected} rejected");
}
