//! Lookups on parsed documents: paths, pointers, duplicates, values.

use super::*;

const CHAT: &[u8] = br#"{
  "model": "gpt-4o",
  "temperature": 0.7,
  "stream": false,
  "tool_choice": null,
  "usage": {"total_tokens": 9223372036854775807, "neg": -9223372036854775808},
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "hi \u00e9\n"}, {"type": "image_url"}]}
  ],
  "a.b": {"c[0]": 1, "x/y": 2, "t~": 3, "": 4}
}"#;

fn doc(text: &[u8]) -> Document<'_> {
    Document::parse(text, &Options::default()).unwrap()
}

fn find<'a>(d: &mut Document<'a>, path: &str) -> Option<u32> {
    d.find(Document::ROOT, path.as_bytes()).unwrap()
}

fn raw_at(d: &mut Document<'_>, path: &str) -> Vec<u8> {
    let at = find(d, path).unwrap();
    d.raw(at).to_vec()
}

fn text_at(d: &mut Document<'_>, path: &str) -> Option<String> {
    let at = find(d, path)?;
    Some(String::from_utf8(d.string(at, &mut Vec::new()).to_vec()).unwrap())
}

#[test]
fn paths_reach_values_of_every_type() {
    let mut d = doc(CHAT);
    assert_eq!(text_at(&mut d, "model").as_deref(), Some("gpt-4o"));
    let t = find(&mut d, "temperature").unwrap();
    assert_eq!((d.value_type(t), d.f64(t)), (ValueType::Number, 0.7));
    let s = find(&mut d, "stream").unwrap();
    assert_eq!(d.value_type(s), ValueType::False);
    let n = find(&mut d, "tool_choice").unwrap();
    assert_eq!(d.value_type(n), ValueType::Null);
    let big = find(&mut d, "usage.total_tokens").unwrap();
    assert_eq!(d.i64(big), Ok(i64::MAX));
    let neg = find(&mut d, "usage.neg").unwrap();
    assert_eq!(d.i64(neg), Ok(i64::MIN));
    assert_eq!(
        text_at(&mut d, "messages[1].content[0].text").as_deref(),
        Some("hi é\n")
    );
    assert_eq!(
        text_at(&mut d, "messages[0].content").as_deref(),
        Some("Be brief.")
    );
    assert_eq!(find(&mut d, ""), Some(0));
}

#[test]
fn missing_paths_are_not_found() {
    let mut d = doc(CHAT);
    for path in [
        "nope",
        "model.x",
        "messages[2]",
        "messages[0][0]",
        "messages.0",
        "usage[0]",
        "[0]",
        "messages[99999999999999999999]",
    ] {
        assert_eq!(find(&mut d, path), None, "{path}");
    }
}

#[test]
fn malformed_paths_are_errors_even_after_a_missing_step() {
    let mut d = doc(CHAT);
    for path in ["a..b", "nope..b", "messages[x]", "nope[01]", "/a~2"] {
        assert_eq!(
            d.find(0, path.as_bytes()).unwrap_err().code,
            ErrorCode::BadPath,
            "{path}"
        );
    }
}

#[test]
fn json_pointers_reach_keys_with_dots_and_brackets() {
    let mut d = doc(CHAT);
    assert_eq!(raw_at(&mut d, "/a.b/c[0]"), b"1");
    assert_eq!(raw_at(&mut d, "/a.b/x~1y"), b"2");
    assert_eq!(raw_at(&mut d, "/a.b/t~0"), b"3");
    assert_eq!(raw_at(&mut d, "/a.b/"), b"4");
    assert_eq!(
        text_at(&mut d, "/messages/1/content/0/type").as_deref(),
        Some("text")
    );
    assert_eq!(find(&mut d, "/messages/-"), None);
    assert_eq!(find(&mut d, "/messages/01"), None);
    assert_eq!(find(&mut d, "/messages/x"), None);
}

#[test]
fn cursors_are_relative_and_checked() {
    let mut d = doc(CHAT);
    let m = find(&mut d, "messages[1]").unwrap();
    let t = d.find(m, b"content[0].text").unwrap().unwrap();
    assert_eq!(d.string(t, &mut Vec::new()), "hi é\n".as_bytes());
    assert_eq!(d.find(m, b"").unwrap(), Some(m));
    // An entry that is not a value start (a colon, a closing quote) or
    // lies past the end is refused.
    for bad in [1u32, 2, 3, 10_000, u32::MAX] {
        assert_eq!(
            d.find(bad, b"").unwrap_err().code,
            ErrorCode::BadCursor,
            "{bad}"
        );
    }
}

#[test]
fn escaped_keys_match_their_decoded_form() {
    let text = br#"{"mod\u0065l":"x","a\/b":1,"\ud83d\ude00":2,"q\"":3}"#;
    let mut d = doc(text);
    assert_eq!(text_at(&mut d, "model").as_deref(), Some("x"));
    assert_eq!(raw_at(&mut d, "/a~1b"), b"1");
    assert_eq!(raw_at(&mut d, "😀"), b"2");
    assert_eq!(raw_at(&mut d, "q\""), b"3");
    assert_eq!(find(&mut d, "mod\\u0065l"), None);
}

#[test]
fn duplicate_keys_last_wins_everywhere() {
    let text = br#"{"model":"allowed","x":1,"mod\u0065l":"sneaky"}"#;
    let mut d = doc(text);
    assert_eq!(text_at(&mut d, "model").as_deref(), Some("sneaky"));
    assert_eq!(d.len(0), Some(2));
    let strict = Options {
        duplicate_keys: DuplicateKeys::Error,
        ..Options::default()
    };
    assert_eq!(
        Document::parse(text, &strict).unwrap_err().code,
        ErrorCode::DuplicateKey
    );
}

#[test]
fn lengths() {
    let mut d = doc(CHAT);
    let m = find(&mut d, "messages").unwrap();
    assert_eq!(d.len(m), Some(2));
    assert_eq!(d.len(0), Some(7));
    let e = doc(b"[[],{}]");
    let mut e = e;
    assert_eq!(e.len(1), Some(0));
    assert_eq!(e.len(4), Some(0));
    let model = find(&mut d, "model").unwrap();
    assert_eq!(d.len(model), None);
    let wide: String = format!(
        "{{{}}}",
        (0..100)
            .map(|i| format!("\"k{}\":{i}", i % 40))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut w = doc(wide.as_bytes());
    assert_eq!(w.len(0), Some(40));
}

#[test]
fn raw_returns_exact_source_text() {
    let mut d = doc(CHAT);
    assert_eq!(
        raw_at(&mut d, "messages[0]"),
        br#"{"role": "system", "content": "Be brief."}"#
    );
    assert_eq!(raw_at(&mut d, "temperature"), b"0.7");
    assert_eq!(raw_at(&mut d, "stream"), b"false");
    assert_eq!(
        raw_at(&mut d, "messages[1].content[0].text"),
        br#""hi \u00e9\n""#
    );
    assert_eq!(d.raw(0), CHAT);
}

#[test]
fn sequential_and_random_element_access_agree() {
    let text: String = format!(
        "[{}]",
        (0..500)
            .map(|i| format!("{{\"v\":{i}}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut d = doc(text.as_bytes());
    let mut rng = crate::testing::Rng::new(5);
    for i in (0..500).chain((0..500).map(|_| rng.below(500))) {
        let at = d.find(0, format!("[{i}].v").as_bytes()).unwrap().unwrap();
        assert_eq!(d.i64(at), Ok(i as i64));
    }
}

#[test]
fn failed_parse_leaves_an_empty_document() {
    let mut d = doc(b"[1]");
    assert!(d.load(b"[1,", &Options::default()).is_err());
    assert_eq!(d.find(0, b"").unwrap_err().code, ErrorCode::BadCursor);
    assert!(d.load(b"{\"a\":2}", &Options::default()).is_ok());
    assert_eq!(raw_at(&mut d, "a"), b"2");
}

#[test]
fn pooled_documents_parse_without_new_allocations() {
    let mut doc = pool::take();
    let read_all = |doc: &mut Document<'static>| {
        doc.load(CHAT, &Options::default()).unwrap();
        let m = doc
            .find(0, b"messages[1].content[0].text")
            .unwrap()
            .unwrap();
        assert_eq!(doc.string(m, &mut Vec::new()), "hi \u{e9}\n".as_bytes());
        assert_eq!(doc.len(0), Some(7));
    };
    let capacities = |doc: &Document<'static>| {
        (
            doc.index.positions.capacity(),
            doc.index.links.capacity(),
            doc.index.escapes.capacity(),
            doc.retained_bytes(),
        )
    };
    read_all(&mut doc);
    let warm = capacities(&doc);
    for _ in 0..100 {
        read_all(&mut doc);
    }
    assert_eq!(capacities(&doc), warm);
    pool::give_back(doc);
}

/// The decoded keys `members` reports, with each member's raw value.
fn member_list(d: &mut Document<'_>, obj: u32) -> Vec<(String, String)> {
    assert_eq!(
        d.members(obj, true, &mut Vec::new()).unwrap().len(),
        d.tree().count(obj) as usize
    );
    let keys = d.members(obj, false, &mut Vec::new()).unwrap().to_vec();
    keys.into_iter()
        .map(|k| {
            assert!(d.is_key(k));
            let name = String::from_utf8(d.string(k, &mut Vec::new()).to_vec()).unwrap();
            (name, String::from_utf8(d.raw(k + 3).to_vec()).unwrap())
        })
        .collect()
}

#[test]
fn members_keep_the_last_of_each_repeated_key_in_document_order() {
    let text = br#"{"a":1,"b":2,"mod\u0065l":"x","a":3,"model":"y","c":4}"#;
    let mut d = doc(text);
    let want = [("b", "2"), ("a", "3"), ("model", "\"y\""), ("c", "4")];
    let got = member_list(&mut d, 0);
    assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));
    assert_eq!(d.len(0), Some(want.len()));
    assert_eq!(
        d.member(0, b"model").map(|at| d.raw(at)),
        Some(&b"\"y\""[..])
    );

    // The same above the pairwise threshold: the sorted path.
    let big: String = (0..40).map(|i| format!(r#""k{}":{i},"#, i % 13)).collect();
    let big = format!("{{{}\"end\":0}}", big);
    let mut d = doc(big.as_bytes());
    let got = member_list(&mut d, 0);
    assert_eq!(got.len(), 14);
    assert_eq!(got.len(), d.len(0).unwrap());
    // k0 last appears at i = 39: after k1..k12 (last at 27..38).
    assert_eq!(got[12], ("k0".to_string(), "39".to_string()));
    assert_eq!(got[13], ("end".to_string(), "0".to_string()));

    let mut strict = Document::parse(
        br#"{"a":1,"b":2}"#,
        &Options {
            duplicate_keys: DuplicateKeys::Error,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(member_list(&mut strict, 0).len(), 2);
}

#[test]
fn member_and_element_check_the_container_type() {
    let mut d = doc(br#"{"a":[10,20,30],"s":"t"}"#);
    let a = d.member(0, b"a").unwrap();
    assert_eq!(d.member(a, b"a"), None);
    assert_eq!(d.element(0, 0), None);
    assert_eq!(d.members(a, false, &mut Vec::new()), None);
    let third = d.element(a, 2).unwrap();
    assert_eq!(d.raw(third), b"30");
    assert_eq!(d.element(a, 3), None);
    let first = d.element(a, 0).unwrap();
    assert_eq!(d.raw(first), b"10");
    assert!(!d.is_key(a) && d.is_key(1) && !d.is_key(0));
    // A string element is not a key.
    let mut d = doc(br#"["x","y"]"#);
    assert!(!d.is_key(1) && !d.is_key(3));
    assert_eq!(d.members(0, true, &mut Vec::new()), None);
}

#[cfg(unix)]
#[cfg_attr(miri, ignore)] // mprotect is not emulated
#[test]
fn no_stage_reads_outside_the_input() {
    // Every prefix of these texts cuts a token (number, literal, escape,
    // surrogate pair, multi-byte character) at each of its bytes; each is
    // shifted by 0..64 spaces so every length mod 64 occurs, and placed
    // against an unmapped page on either side. The whole pipeline runs
    // (active kernel; make test runs each) and every value is read.
    use crate::testing::GuardedPage;
    let texts: [&[u8]; 4] = [
        b"{\"a\":[1,-2.5e-3,1e400,true,false,null,\"x\\u00e9\\ud83d\\ude00\\n\\\"\",\"\xc3\xa9\xf0\x9f\x98\x80\"],\"b\":{\"c\":123456789012345678901234,\"c\":-0}}",
        b"[-9223372036854775808,9223372036854775807,0.1e1,1E+2]",
        br#""\\\\\"\/\b\f\n\r\t\u0000""#,
        b"  -0.0e-0  ",
    ];
    let mut page = GuardedPage::new();
    let mut parsed = 0;
    for text in texts {
        for end in 0..=text.len() {
            for shift in 0..64 {
                let mut shifted = vec![b' '; shift];
                shifted.extend_from_slice(&text[..end]);
                for at_end in [true, false] {
                    let input = if at_end {
                        page.at_end(&shifted)
                    } else {
                        page.at_start(&shifted)
                    };
                    let Ok(mut d) = Document::parse(input, &Options::default()) else {
                        continue;
                    };
                    read_everything(&mut d, Document::ROOT);
                    parsed += 1;
                }
            }
        }
    }
    // Whole texts and the valid prefixes (numbers, the padded one).
    assert!(parsed >= 4 * 2 * 64, "only {parsed} inputs parsed");
}

/// Reads every value under `at` through every getter.
fn read_everything(d: &mut Document<'_>, at: u32) {
    let _ = d.tape(at, &mut Vec::new(), &mut Vec::new()).len();
    let _ = d.raw(at).len();
    match d.value_type(at) {
        ValueType::Number => {
            let _ = (d.f64(at), d.i64(at));
        }
        ValueType::String => {
            let _ = d.string(at, &mut Vec::new()).len();
        }
        ValueType::Array => {
            for i in 0..d.len(at).unwrap() {
                let e = d.element(at, i).unwrap();
                read_everything(d, e);
            }
        }
        ValueType::Object => {
            let entries = d.members(at, true, &mut Vec::new()).unwrap().to_vec();
            for k in entries {
                let _ = d.string(k, &mut Vec::new()).len();
                read_everything(d, k + 3);
            }
        }
        _ => {}
    }
}

#[test]
fn a_parse_is_charged_what_it_allocates_or_the_index_its_text_fills() {
    // Its index ten times CHAT's at least (a tenth of it under Miri,
    // which interprets every step).
    let items = if cfg!(miri) { 1_000 } else { 10_000 };
    let big = format!("[{}0]", "0,".repeat(items));
    let mut doc = Document::new();
    doc.load(big.as_bytes(), &Options::default()).unwrap();
    // New: everything it allocated.
    assert_eq!(doc.charged_bytes(), doc.retained_bytes());
    let big_fills = doc.index.filled_bytes();
    assert!(big_fills > 8 * items);
    doc.load(CHAT, &Options::default()).unwrap();
    let chat_fills = doc.index.filled_bytes();
    let held = doc.retained_bytes();
    // Reused: the entries its text fills, however much room was there;
    // neither nothing (the collector must pace reused documents too) nor
    // the room a larger text left.
    for (text, fills) in [
        (big.as_bytes(), big_fills),
        (CHAT, chat_fills),
        (big.as_bytes(), big_fills),
    ] {
        doc.load(text, &Options::default()).unwrap();
        assert_eq!((doc.charged_bytes(), doc.retained_bytes()), (fills, held));
    }
    assert!(chat_fills > 0 && chat_fills < held / 10);
}

/// `doc.load_copy(text, opts)`, for the tests below, which read what the
/// document gives out of a copy before its next load.
fn load_copy(doc: &mut Document<'static>, text: &[u8], opts: &Options) -> Result<()> {
    // SAFETY: the callers read slices of the copy only before the
    // document's next load.
    unsafe { doc.load_copy(text, opts) }
}

#[test]
fn a_copied_text_reads_as_the_text_after_the_original_is_gone() {
    let mut doc: Document<'static> = Document::new();
    let mut text = CHAT.to_vec();
    load_copy(&mut doc, &text, &Options::default()).unwrap();
    // The document reads its own bytes: overwriting the original, as
    // nginx reuses a request's memory, changes nothing.
    assert_ne!(doc.src().as_ptr(), text.as_ptr());
    text.fill(b' ');
    drop(text);
    let mut want = Document::new();
    want.load(CHAT, &Options::default()).unwrap();
    assert_eq!(doc.src(), CHAT);
    assert_eq!(doc.index().positions, want.index().positions);
    assert_eq!(doc.index().links, want.index().links);
    let model = doc.find(0, b"model").unwrap().unwrap();
    let want_model = want.find(0, b"model").unwrap().unwrap();
    assert_eq!(doc.raw(model), want.raw(want_model));
    // Errors as a borrowed load gives them, and nothing of the text kept.
    let bad = br#"{"a":[1,2}"#;
    let got = load_copy(&mut doc, bad, &Options::default()).unwrap_err();
    assert_eq!(
        got,
        Document::new().load(bad, &Options::default()).unwrap_err()
    );
    assert_eq!((doc.src(), doc.copy.len()), (&b""[..], 0));
}

#[test]
fn a_copy_is_charged_and_held_with_the_index() {
    // Larger than CHAT, whose load must fit in the room it leaves (70 KB;
    // 7 KB under Miri, which interprets every step).
    let items = if cfg!(miri) { 1_000 } else { 10_000 };
    let big = format!("[{}0]", "\"x\\n\",".repeat(items));
    let opts = Options::default();
    let mut doc: Document<'static> = Document::new();
    load_copy(&mut doc, big.as_bytes(), &opts).unwrap();
    // New: everything it allocated, the copy included.
    assert_eq!(doc.charged_bytes(), doc.retained_bytes());
    assert_eq!(doc.held, doc.retained_bytes());
    assert!(doc.charged_bytes() >= doc.index.filled_bytes() + big.len());
    // Again: the room is there, so the index it fills and the copy.
    let held = doc.retained_bytes();
    load_copy(&mut doc, big.as_bytes(), &opts).unwrap();
    assert_eq!(doc.retained_bytes(), held);
    assert_eq!(doc.charged_bytes(), doc.index.filled_bytes() + big.len());
    // A borrowed text after it: the copy's room stays, uncharged.
    doc.load(CHAT, &opts).unwrap();
    assert_eq!((doc.held, doc.retained_bytes()), (held, held));
    assert_eq!(doc.charged_bytes(), doc.index.filled_bytes());
}

#[test]
fn load_with_runs_the_named_kernel_and_agrees_with_load() {
    let text = br#"{"a":[1,"x\n",{"b":null}],"c":"\u00e9t\u00e9"}"#;
    let want = doc(text);
    for kernel in scan::supported_kernels() {
        let mut d = Document::new();
        d.load_with(kernel, text, &Options::default()).unwrap();
        let (got, want) = (d.index(), want.index());
        assert_eq!(got.positions, want.positions, "{}", kernel.name());
        assert_eq!(got.escapes, want.escapes, "{}", kernel.name());
        assert_eq!(got.links, want.links, "{}", kernel.name());
        // Errors come through too, with their offsets.
        let err = d.load_with(kernel, b"[1,\"\x01\"]", &Options::default());
        assert_eq!(err.unwrap_err().code, ErrorCode::ControlCharacter);
    }
    if let Some(missing) = scan::Kernel::ALL.into_iter().find(|k| !k.is_supported()) {
        let err = Document::new().load_with(missing, text, &Options::default());
        assert_eq!(err.unwrap_err().code, ErrorCode::BadKernel);
    }
}

/// Stage 1 finds invalid UTF-8, control bytes in strings and a string
/// left open before validation reads the grammar, yet none of them may
/// hide an earlier error: a text `head` ending in a space that fails
/// before its end fails the same way whatever follows it (its tokens end
/// at the space), with every kernel. `[1,, ` then `"\x01"` named the
/// control byte at 6, not the comma at 3.
#[test]
fn the_first_error_is_reported_whatever_follows_it() {
    use crate::testing::{Rng, random_text, rounds};
    let mut rng = Rng::new(41);
    let opts = Options {
        max_depth: 6,
        ..Options::default()
    };
    let (mut checked, mut hidden) = (0, 0);
    for _ in 0..rounds(20_000) {
        let head_len = 1 + rng.below(120);
        let mut head = random_text(&mut rng, head_len);
        head.push(b' ');
        let Err(want) = Document::new().load(&head, &opts) else {
            continue;
        };
        if want.offset + 1 >= head.len() || want.code == ErrorCode::UnterminatedString {
            continue;
        }
        let mut text = head.clone();
        let tail_len = rng.below(200);
        text.extend(random_text(&mut rng, tail_len));
        // The texts that test the rule: stage 1 alone finds an error after
        // `head`'s.
        if let Err(e) = scan::scan(&text, &mut Index::default()) {
            hidden += usize::from(e.offset > want.offset);
        }
        for kernel in scan::supported_kernels() {
            let got = Document::new().load_with(kernel, &text, &opts).unwrap_err();
            assert_eq!(
                got,
                want,
                "{} on {:?}",
                kernel.name(),
                String::from_utf8_lossy(&text)
            );
        }
        checked += 1;
    }
    assert!(checked > rounds(20_000) / 4, "{checked} texts checked");
    assert!(
        hidden > checked / 10,
        "{hidden} of {checked} had a later stage 1 error"
    );
}

/// Under `duplicate_keys = "error"` an object's keys are checked when it
/// closes, yet a repeat comes before whatever follows it: an object that
/// repeats a key and is still open, then anything, fails at the repeat.
/// `{"a":1,"a":2,"b":x}` named the `x`, and `{"x":1,"x":2,"y":{"b":1,"b":2}}`
/// the inner `b`.
#[test]
fn under_error_the_first_repeat_is_reported_whatever_follows_it() {
    use crate::testing::{Rng, random_text, rounds};
    const VALUES: &[&str] = &["1", "\"s\"", "[1,{\"z\":2}]", "{\"z\":1,\"y\":[]}", "null"];
    let mut rng = Rng::new(43);
    let opts = Options {
        duplicate_keys: DuplicateKeys::Error,
        ..Options::default()
    };
    for _ in 0..rounds(5_000) {
        // An open object whose keys repeat: the first repeat is where the
        // key drawn is one drawn before.
        let mut head = String::from("{");
        let mut seen = Vec::new();
        let mut repeat_at = None;
        for _ in 0..2 + rng.below(6) {
            let key = format!("k{}", rng.below(4));
            if repeat_at.is_none() && seen.contains(&key) {
                repeat_at = Some(head.len());
            }
            seen.push(key.clone());
            head.push_str(&format!("\"{key}\":{},", rng.pick(VALUES)));
        }
        let Some(at) = repeat_at else { continue };
        let mut text = head.into_bytes();
        let tail_len = rng.below(100);
        text.extend(random_text(&mut rng, tail_len));
        for kernel in scan::supported_kernels() {
            let got = Document::new().load_with(kernel, &text, &opts).unwrap_err();
            assert_eq!(
                (got.code, got.offset),
                (ErrorCode::DuplicateKey, at),
                "{} on {:?}",
                kernel.name(),
                String::from_utf8_lossy(&text)
            );
        }
    }
}

#[test]
fn nesting_is_counted_from_a_value_down_past_brackets_in_strings() {
    let text = br#"{"a":[[1,{"b":"]]]["}],[]],"c":"[[[[","d":7}"#;
    let mut d = doc(text);
    let depth = |d: &mut Document<'_>, at: u32| (0..6).find(|&n| !d.nests_deeper_than(at, n));
    assert_eq!(depth(&mut d, 0), Some(4));
    let a = find(&mut d, "a").unwrap();
    assert_eq!(depth(&mut d, a), Some(3));
    let b = find(&mut d, "a[0][1]").unwrap();
    assert_eq!(depth(&mut d, b), Some(1));
    for scalar in ["c", "d", "a[0][1].b"] {
        let at = find(&mut d, scalar).unwrap();
        assert_eq!(depth(&mut d, at), Some(0), "{scalar}");
    }
    // Nothing nests past the limit the document was parsed under.
    let opts = Options {
        max_depth: 4,
        ..Options::default()
    };
    let mut shallow = Document::parse(text, &opts).unwrap();
    assert!(!shallow.nests_deeper_than(0, 4));
    assert!(shallow.nests_deeper_than(0, 3));
    // Measured once, forgotten by the next load.
    assert!(!shallow.nests_deeper_than(a, 3));
    shallow.load(b"[[[[[]]]]]", &Options::default()).unwrap();
    assert!(shallow.nests_deeper_than(0, 4));
}

#[test]
fn the_pools_measure_follows_every_load_and_read() {
    let wide = format!(
        "{{{}\"k~\":[{}0]}}",
        (0..40)
            .map(|i| format!("\"key{i}\":{i},"))
            .collect::<String>(),
        "7,".repeat(1_000)
    );
    fn load<'a>(d: &mut Document<'a>, text: &'a [u8]) {
        d.load(text, &Options::default()).unwrap();
        assert_eq!(d.held, d.retained_bytes(), "after a load");
        assert_eq!(d.lookup_table_bytes(), 0, "a load clears the tables");
    }
    let mut d = Document::new();
    let check = |d: &Document<'_>, what: &str| {
        assert_eq!(d.held, d.retained_bytes(), "after {what}");
    };
    for text in [wide.as_bytes(), CHAT, wide.as_bytes()] {
        load(&mut d, text);
        // The wide object's table (after its walks), the array's (a read
        // far from the last), a decoded pointer token, a member list.
        for _ in 0..12 {
            let _ = d.find(0, b"key33");
        }
        check(&d, "member reads");
        let _ = d.find(0, b"/k~0/900");
        check(&d, "a pointer and an element far on");
        let _ = d.members(0, false, &mut Vec::new());
        check(&d, "members");
        load(&mut d, text);
        // The wide object's table again, built by len alone.
        let _ = d.len(0);
        check(&d, "len");
        assert!(d.lookup_table_bytes() > 0 || text == CHAT);
        load(&mut d, text);
    }
}
