//! `qjson_escape`, the encoder's string escaping, through the C ABI.
//!
//! Input: `[flags, bytes...]`; bit 0 of `flags` asks for `\/`, the other
//! bits pick the output room per call (6 to 133 bytes), so escapes land on
//! every slice boundary. The escaped bytes must equal lua-cjson's escaping
//! written out byte by byte (`escape_reference`), and when the input is UTF-8, the escaped text
//! in quotes must parse as one JSON string that decodes to the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qjson::escape::escape_reference;
use qjson::ffi::{qjson_escape, qjson_reader_free, qjson_reader_new};
use qjson_fuzz::{Doc, take};

fuzz_target!(|data: &[u8]| {
    let Some(([flags], src)) = take::<1>(data) else {
        return;
    };
    let escape_slash = flags & 1 == 1;
    let room = 6 + usize::from(flags >> 1);
    let mut out = b"\"".to_vec();
    let mut dst = vec![0u8; room];
    let reader = qjson_reader_new();
    assert!(!reader.is_null());
    let mut at = 0;
    while at < src.len() {
        // SAFETY: src[at..] and dst are valid for the lengths passed and do
        // not overlap; reader is live until freed below.
        let written = unsafe {
            qjson_escape(
                src[at..].as_ptr().cast(),
                src.len() - at,
                i32::from(escape_slash),
                dst.as_mut_ptr().cast(),
                room,
                reader,
            )
        };
        // SAFETY: as above.
        let consumed = unsafe { (*reader).count };
        assert!(consumed > 0, "no progress at {at} with room {room}");
        assert!(written <= room && consumed <= src.len() - at);
        out.extend_from_slice(&dst[..written]);
        at += consumed;
    }
    // SAFETY: made by qjson_reader_new above, freed once.
    unsafe { qjson_reader_free(reader) };
    assert_eq!(&out[1..], &escape_reference(src, escape_slash)[..]);
    out.push(b'"');
    if std::str::from_utf8(src).is_ok() {
        let mut doc = Doc::parse(&out, 0, 0).expect("escaped UTF-8 parses as a JSON string");
        let value = doc.get(0, b"").expect("the root string reads back");
        assert_eq!(value.bytes, src);
    }
});
