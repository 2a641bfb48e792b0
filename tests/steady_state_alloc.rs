//! Steady-state parsing allocates nothing new on the Rust side: a freed
//! document's buffers go back to a small pool, and the next parse of a
//! similar document reuses them.
//!
//! A counting `#[global_allocator]` wraps `System`. Counting is switched on
//! per thread, only around the measured region, so the test harness and
//! other tests running in parallel are never counted. The documents are
//! driven through the C ABI (`qjson::ffi`), exactly as LuaJIT drives them.
//!
//! The document pool is process-wide, so the tests of this file take a
//! lock: another test taking a pooled document mid-measurement would
//! force a fresh one on us.
//!
//! Set `QJSON_ALLOC_BACKTRACE=1` to print a backtrace at every counted
//! allocation (how to find the site when an assertion here fails).

use core::ffi::{c_char, c_int};
use core::ptr;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use qjson::ffi::{
    qjson_doc, qjson_error, qjson_find, qjson_free, qjson_get, qjson_get_i64, qjson_len,
    qjson_options, qjson_parse, qjson_parse_copy, qjson_raw, qjson_reader, qjson_reader_free,
    qjson_reader_new, qjson_value,
};

// ---------------------------------------------------------------------
// The counting allocator.

struct Counting;

thread_local! {
    /// Whether allocations on this thread are counted.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static DEALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static BACKTRACE: AtomicBool = AtomicBool::new(false);

fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

fn set_counting(on: bool) {
    let _ = COUNTING.try_with(|c| c.set(on));
}

/// Records one allocation event of `bytes` new bytes.
fn record(counter: &AtomicU64, bytes: usize) {
    if !counting() {
        return;
    }
    counter.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    if BACKTRACE.load(Ordering::Relaxed) {
        // Capturing and printing allocate: not counted, not recursive.
        set_counting(false);
        eprintln!(
            "counted allocation of {bytes} bytes at:\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        set_counting(true);
    }
}

// SAFETY: every method forwards to System unchanged; the counters are
// atomics and a const-initialised thread-local without destructor, none of
// which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(&ALLOCS, layout.size());
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(&ALLOCS, layout.size());
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(&REALLOCS, new_size.saturating_sub(layout.size()));
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counting() {
            DEALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap traffic of this thread during a measured region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    allocs: u64,
    reallocs: u64,
    deallocs: u64,
    bytes: u64,
}

const NONE: Counts = Counts {
    allocs: 0,
    reallocs: 0,
    deallocs: 0,
    bytes: 0,
};

/// Switches counting off again even if the measured region panics.
struct StopCounting;

impl Drop for StopCounting {
    fn drop(&mut self) {
        set_counting(false);
    }
}

/// Runs `f` with this thread's allocations counted.
fn measure(f: impl FnOnce()) -> Counts {
    for c in [&ALLOCS, &REALLOCS, &DEALLOCS, &BYTES] {
        c.store(0, Ordering::Relaxed);
    }
    let stop = StopCounting;
    set_counting(true);
    f();
    drop(stop);
    Counts {
        allocs: ALLOCS.load(Ordering::Relaxed),
        reallocs: REALLOCS.load(Ordering::Relaxed),
        deallocs: DEALLOCS.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
    }
}

/// Serialises the tests of this file (the document pool is global) and
/// reads the backtrace switch.
fn setup() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let trace = std::env::var_os("QJSON_ALLOC_BACKTRACE").is_some_and(|v| v != "0");
    BACKTRACE.store(trace, Ordering::Relaxed);
    guard
}

// ---------------------------------------------------------------------
// Thin wrappers over the C ABI. None of them allocates.

const OK: c_int = 0;
const E_EMPTY: i32 = 1;
const E_TOO_LARGE: i32 = 2;
const E_INVALID_UTF8: i32 = 3;
const E_UNTERMINATED_STRING: i32 = 5;
const E_INVALID_ESCAPE: i32 = 6;
const E_INVALID_NUMBER: i32 = 9;
const E_EXPECTED_KEY: i32 = 13;
const E_EXPECTED_COMMA_OR_BRACKET: i32 = 17;
const E_TRAILING_CONTENT: i32 = 18;
const E_DEPTH_EXCEEDED: i32 = 19;
const E_DUPLICATE_KEY: i32 = 20;
const NOT_FOUND: c_int = 32;
const NOT_INTEGER: c_int = 35;
const BAD_PATH: c_int = 64;
const BAD_ARGUMENT: i32 = 66;
const TYPE_NUMBER: i32 = 4;
const TYPE_STRING: i32 = 5;
const TYPE_ARRAY: i32 = 6;
const TYPE_OBJECT: i32 = 7;
const ROOT: u32 = 0;

/// A reader (where every call leaves its results); freed on drop.
struct Reader(*mut qjson_reader);

impl Reader {
    fn new() -> Reader {
        let reader = qjson_reader_new();
        assert!(!reader.is_null());
        // SAFETY: a live reader used by this thread only.
        unsafe { (*reader).error.code = -1 };
        Reader(reader)
    }

    fn error(&self) -> &qjson_error {
        // SAFETY: self.0 is live until drop; the borrow of self ends
        // before the next call through this reader.
        unsafe { &(*self.0).error }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: self.0 came from qjson_reader_new and is freed once.
        unsafe { qjson_reader_free(self.0) }
    }
}

thread_local! {
    /// The reader lookups go through; made before any measured region
    /// (every test warms up first).
    static LOOKUPS: Reader = Reader::new();
}

/// The NUL-terminated message of `e`, as bytes.
fn message(e: &qjson_error) -> &[u8] {
    let bytes: &[u8; 256] = {
        // c_char is i8 or u8 depending on the target; both are one byte.
        let p: *const [c_char; 256] = &e.message;
        // SAFETY: [c_char; 256] and [u8; 256] have the same size, alignment
        // and validity; the reference lives as long as `e`.
        unsafe { &*p.cast::<[u8; 256]>() }
    };
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// The signature every lookup function of the C ABI shares.
type Lookup =
    unsafe extern "C" fn(*mut qjson_doc, u32, *const c_char, usize, *mut qjson_reader) -> c_int;

/// A parsed document; freed on drop.
struct Doc(*mut qjson_doc);

impl Doc {
    fn parse(json: &[u8]) -> Doc {
        LOOKUPS.with(|err| {
            let doc = try_parse(json, None, Some(err));
            assert!(
                !doc.is_null(),
                "parse failed: code {} {:?}",
                err.error().code,
                String::from_utf8_lossy(message(err.error()))
            );
            Doc(doc)
        })
    }

    /// `qjson_parse_copy`: the document and where its copy of the text
    /// starts.
    fn parse_copy(json: &[u8]) -> (Doc, *const c_char) {
        LOOKUPS.with(|reader| {
            // SAFETY: json is readable for its length during the call;
            // reader.0 is a live reader used by this thread only.
            let doc = unsafe {
                qjson_parse_copy(json.as_ptr().cast(), json.len(), ptr::null(), reader.0)
            };
            assert!(!doc.is_null(), "parse failed: code {}", reader.error().code);
            // SAFETY: as above.
            let copy = unsafe { (*reader.0).value };
            assert_eq!(copy.len, json.len());
            (Doc(doc), copy.str_)
        })
    }

    /// Calls one lookup function; returns its status and output.
    fn call(&self, f: Lookup, cursor: u32, path: &[u8]) -> (c_int, qjson_value) {
        LOOKUPS.with(|reader| {
            // SAFETY: self.0 is a live document and reader.0 a live reader,
            // both used by this thread only; the path slice is readable for
            // its length.
            let rc = unsafe { f(self.0, cursor, path.as_ptr().cast(), path.len(), reader.0) };
            // SAFETY: as above.
            (rc, unsafe { (*reader.0).value })
        })
    }

    /// `qjson_get` on a string: its decoded bytes.
    fn string(&self, cursor: u32, path: &[u8]) -> &[u8] {
        let (rc, v) = self.call(qjson_get, cursor, path);
        assert_eq!(rc, OK, "get {:?}", String::from_utf8_lossy(path));
        assert_eq!(v.type_, TYPE_STRING);
        // SAFETY: on success str_/len describe bytes owned by the text or
        // the document, valid until the next call on it; the borrow of self
        // ends before the caller can make another call.
        unsafe { core::slice::from_raw_parts(v.str_.cast::<u8>(), v.len) }
    }

    fn number(&self, cursor: u32, path: &[u8]) -> f64 {
        let (rc, v) = self.call(qjson_get, cursor, path);
        assert_eq!(rc, OK);
        assert_eq!(v.type_, TYPE_NUMBER);
        v.num
    }

    fn i64(&self, cursor: u32, path: &[u8]) -> (c_int, i64) {
        let (rc, v) = self.call(qjson_get_i64, cursor, path);
        (rc, v.i64_)
    }

    fn len(&self, cursor: u32, path: &[u8]) -> usize {
        let (rc, v) = self.call(qjson_len, cursor, path);
        assert_eq!(rc, OK, "len {:?}", String::from_utf8_lossy(path));
        v.len
    }

    fn raw(&self, cursor: u32, path: &[u8]) -> &[u8] {
        let (rc, v) = self.call(qjson_raw, cursor, path);
        assert_eq!(rc, OK);
        // SAFETY: raw text points into the caller's JSON text, which
        // outlives the document.
        unsafe { core::slice::from_raw_parts(v.str_.cast::<u8>(), v.len) }
    }

    fn find(&self, cursor: u32, path: &[u8]) -> (c_int, qjson_value) {
        self.call(qjson_find, cursor, path)
    }
}

impl Drop for Doc {
    fn drop(&mut self) {
        // SAFETY: self.0 came from qjson_parse and is freed exactly once.
        unsafe { qjson_free(self.0) }
    }
}

/// `qjson_parse` with optional options and a reader for the error.
fn try_parse(json: &[u8], opts: Option<&qjson_options>, err: Option<&Reader>) -> *mut qjson_doc {
    let opts = opts.map_or(ptr::null(), ptr::from_ref);
    let err = err.map_or(ptr::null_mut(), |r| r.0);
    // SAFETY: json is readable for its length and outlives every document
    // made from it (the callers free documents before dropping the text);
    // opts is NULL or valid, err NULL or a live reader.
    unsafe { qjson_parse(json.as_ptr().cast(), json.len(), opts, err) }
}

// ---------------------------------------------------------------------
// Inputs.

/// A deterministic pseudo-random generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const MESSAGES: usize = 8;

/// A ~1 MB OpenAI-style chat-completion request, with what reading it
/// must return.
struct Chat {
    json: Vec<u8>,
    texts: Vec<Vec<u8>>,
    urls: Vec<Vec<u8>>,
    text_paths: Vec<Vec<u8>>,
    url_pointers: Vec<Vec<u8>>,
    content_paths: Vec<Vec<u8>>,
    role_paths: Vec<Vec<u8>>,
}

fn chat() -> Chat {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut json = String::from(
        r#"{"model":"gpt-4o","temperature":0.7,"max_tokens":1024,"metadata":{"x/y~z":"tilde"},"messages":["#,
    );
    let (mut texts, mut urls) = (Vec::new(), Vec::new());
    for i in 0..MESSAGES {
        // The JSON spelling and the decoded text, with every kind of escape.
        let (mut raw, mut text) = (String::new(), String::new());
        for line in 0..40 {
            let words = format!("message {i} line {line}: describe the image, please ");
            raw.push_str(&words);
            text.push_str(&words);
            raw.push_str(r#"\"quoted\" caf\u00e9 \ud83d\ude00 tab\t\\ end\n"#);
            text.push_str("\"quoted\" caf\u{e9} \u{1f600} tab\t\\ end\n");
        }
        let mut url = String::from("data:image/jpeg;base64,");
        for _ in 0..128_000 {
            url.push(B64[(rng.next() % 64) as usize] as char);
        }
        url.push_str("==");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            r#"{{"role":"{role}","content":[{{"type":"text","text":"{raw}"}},{{"type":"image_url","image_url":{{"url":"{url}","detail":"high"}}}}]}}"#
        ));
        texts.push(text.into_bytes());
        urls.push(url.into_bytes());
    }
    json.push_str("]}");
    let paths = |f: &dyn Fn(usize) -> String| -> Vec<Vec<u8>> {
        (0..MESSAGES).map(|i| f(i).into_bytes()).collect()
    };
    Chat {
        json: json.into_bytes(),
        texts,
        urls,
        text_paths: paths(&|i| format!("messages[{i}].content[0].text")),
        url_pointers: paths(&|i| format!("/messages/{i}/content/1/image_url/url")),
        content_paths: paths(&|i| format!("messages[{i}].content")),
        role_paths: paths(&|i| format!("[{i}].role")),
    }
}

/// Reads everything a gateway reads from the chat request.
fn read_chat(doc: &Doc, chat: &Chat) {
    assert_eq!(doc.string(ROOT, b"model"), b"gpt-4o");
    assert_eq!(doc.number(ROOT, b"temperature"), 0.7);
    assert_eq!(doc.i64(ROOT, b"max_tokens"), (OK, 1024));
    assert_eq!(doc.i64(ROOT, b"temperature").0, NOT_INTEGER);
    assert_eq!(doc.string(ROOT, b"/metadata/x~1y~0z"), b"tilde");
    assert_eq!(doc.len(ROOT, b""), 5);
    assert_eq!(doc.len(ROOT, b"messages"), MESSAGES);
    assert_eq!(doc.raw(ROOT, b""), &chat.json[..]);
    assert_eq!(doc.find(ROOT, b"missing.key").0, NOT_FOUND);
    assert_eq!(doc.find(ROOT, b"messages[x]").0, BAD_PATH);
    let (rc, messages) = doc.find(ROOT, b"messages");
    assert_eq!((rc, messages.type_), (OK, TYPE_ARRAY));
    for i in 0..MESSAGES {
        assert_eq!(doc.string(ROOT, &chat.text_paths[i]), &chat.texts[i][..]);
        assert_eq!(doc.string(ROOT, &chat.url_pointers[i]), &chat.urls[i][..]);
        assert_eq!(doc.len(ROOT, &chat.content_paths[i]), 2);
        let role: &[u8] = if i % 2 == 0 {
            b"\"user\""
        } else {
            b"\"assistant\""
        };
        assert_eq!(doc.raw(messages.cursor, &chat.role_paths[i]), role);
    }
}

/// twitter.json from the shared corpus, if present.
fn twitter() -> Option<Vec<u8>> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(data) = std::env::var_os("QJSON_DATA") {
        dirs.push(PathBuf::from(data).join("corpus"));
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    dirs.push(manifest.join("../shared/data/corpus"));
    dirs.push(PathBuf::from("/work/shared/data/corpus"));
    let found = dirs
        .iter()
        .find_map(|d| std::fs::read(d.join("twitter.json")).ok());
    if found.is_none() {
        eprintln!("twitter.json not found (set QJSON_DATA): chat document only");
    }
    found
}

/// twitter.json and the paths read from it.
struct Twitter {
    json: Vec<u8>,
    statuses: usize,
    text_paths: Vec<Vec<u8>>,
    name_paths: Vec<Vec<u8>>,
    id_paths: Vec<Vec<u8>>,
    user_pointers: Vec<Vec<u8>>,
}

fn twitter_doc() -> Option<Twitter> {
    let json = twitter()?;
    let statuses = Doc::parse(&json).len(ROOT, b"statuses");
    let paths = |f: &dyn Fn(usize) -> String| -> Vec<Vec<u8>> {
        (0..statuses).map(|i| f(i).into_bytes()).collect()
    };
    Some(Twitter {
        text_paths: paths(&|i| format!("statuses[{i}].text")),
        name_paths: paths(&|i| format!("statuses[{i}].user.name")),
        id_paths: paths(&|i| format!("statuses[{i}].id")),
        user_pointers: paths(&|i| format!("/statuses/{i}/user")),
        json,
        statuses,
    })
}

fn read_twitter(doc: &Doc, t: &Twitter) {
    assert_eq!(doc.len(ROOT, b"statuses"), t.statuses);
    assert_eq!(doc.i64(ROOT, b"search_metadata.count"), (OK, 100));
    for i in 0..t.statuses {
        assert!(!doc.string(ROOT, &t.text_paths[i]).is_empty());
        let _ = doc.string(ROOT, &t.name_paths[i]);
        assert_eq!(doc.i64(ROOT, &t.id_paths[i]).0, OK);
        let (rc, user) = doc.find(ROOT, &t.user_pointers[i]);
        assert_eq!((rc, user.type_), (OK, TYPE_OBJECT));
        assert!(doc.len(user.cursor, b"") > 10);
        assert_eq!(doc.raw(user.cursor, b"")[0], b'{');
    }
}

/// One parse + read + free of every input.
fn cycle(chat: &Chat, twitter: Option<&Twitter>) {
    let doc = Doc::parse(&chat.json);
    read_chat(&doc, chat);
    drop(doc);
    if let Some(t) = twitter {
        let doc = Doc::parse(&t.json);
        read_twitter(&doc, t);
    }
}

const ROUNDS: usize = 100;

fn assert_no_allocation(what: &str, counts: Counts) {
    assert_eq!(
        counts, NONE,
        "{what}: steady state touched the heap (rerun with QJSON_ALLOC_BACKTRACE=1 to see where)"
    );
}

// ---------------------------------------------------------------------
// The tests.

/// The counter sees this thread's heap traffic, and only inside
/// `measure`: a zero below is not a broken counter.
#[test]
fn counter_sees_allocations() {
    let _serial = setup();
    let mut kept = Vec::new();
    let counts = measure(|| {
        let mut v: Vec<u8> = Vec::with_capacity(100);
        v.extend_from_slice(&[1; 200]);
        kept = std::hint::black_box(v);
        drop(std::hint::black_box(Box::new(7_u64)));
    });
    assert_eq!(
        counts,
        Counts {
            allocs: 2,
            reallocs: 1,
            deallocs: 1,
            bytes: 100 + 100 + 8,
        }
    );
    drop(kept);
    // A first parse of a new size does allocate, and is counted.
    let big = format!("[{}1]", "1,".repeat(100_000));
    let counts = measure(|| drop(Doc::parse(big.as_bytes())));
    assert!(counts.allocs + counts.reallocs > 0, "{counts:?}");
}

#[test]
fn parse_read_free_allocates_nothing_in_steady_state() {
    let _serial = setup();
    let chat = chat();
    assert!(chat.json.len() > 1_000_000, "{}", chat.json.len());
    let twitter = twitter_doc();

    for _ in 0..3 {
        cycle(&chat, twitter.as_ref());
    }
    let counts = measure(|| {
        for _ in 0..ROUNDS {
            cycle(&chat, twitter.as_ref());
        }
    });
    assert_no_allocation("parse, read, free", counts);
}

/// A body copied into its document (as `qjson.decode_body` copies
/// nginx's) reads as the body after the original is overwritten, and a
/// pooled document copies the next one into the room the last left.
#[test]
fn copied_bodies_allocate_nothing_in_steady_state() {
    let _serial = setup();
    let chat = chat();
    let mut body = Vec::with_capacity(chat.json.len());
    let cycle = |body: &mut Vec<u8>| {
        body.clear();
        body.extend_from_slice(&chat.json);
        let (doc, copy) = Doc::parse_copy(body);
        assert_ne!(copy, body.as_ptr().cast());
        body.fill(b' ');
        read_chat(&doc, &chat);
        // SAFETY: the copy is the document's, alive until it is freed.
        let copied = unsafe { core::slice::from_raw_parts(copy.cast::<u8>(), chat.json.len()) };
        assert!(copied == chat.json.as_slice());
    };
    for _ in 0..3 {
        cycle(&mut body);
    }
    let counts = measure(|| {
        for _ in 0..ROUNDS {
            cycle(&mut body);
        }
    });
    assert_no_allocation("copy, parse, read, free", counts);
}

#[test]
fn four_live_documents_allocate_nothing_in_steady_state() {
    let _serial = setup();
    let chat = chat();
    let twitter = twitter_doc();
    // Two texts alternate when twitter.json is present, so every pooled
    // document meets both sizes during the warm-up.
    let texts: [&[u8]; 4] = match &twitter {
        Some(t) => [&chat.json, &t.json, &chat.json, &t.json],
        None => [&chat.json; 4],
    };
    let round = || {
        let docs = texts.map(Doc::parse);
        for (doc, text) in docs.iter().zip(texts) {
            if text.as_ptr() == chat.json.as_ptr() {
                read_chat(doc, &chat);
            } else if let Some(t) = &twitter {
                read_twitter(doc, t);
            }
        }
        // Interleaved reads across live documents.
        for doc in docs.iter().rev() {
            assert_eq!(doc.find(ROOT, b"").1.type_, TYPE_OBJECT);
        }
        drop(docs);
    };
    for _ in 0..4 {
        round();
    }
    let counts = measure(|| {
        for _ in 0..ROUNDS {
            round();
        }
    });
    assert_no_allocation("four live documents", counts);
}

/// Invalid inputs, what `qjson_parse` must report for them, and the
/// options to parse them with.
struct Bad {
    json: Vec<u8>,
    opts: Option<qjson_options>,
    code: i32,
    offset: u64,
}

fn bad_inputs(chat: &Chat) -> Vec<Bad> {
    let bad = |json: &[u8], code, offset| Bad {
        json: json.to_vec(),
        opts: None,
        code,
        offset,
    };
    let truncated = &chat.json[..chat.json.len() / 2];
    let mut trailing = chat.json.clone();
    trailing.extend_from_slice(b" x");
    let dup_error = qjson_options {
        max_depth: 0,
        duplicate_keys: 1,
    };
    let shallow = qjson_options {
        max_depth: 4,
        duplicate_keys: 0,
    };
    let bad_option = qjson_options {
        max_depth: 0,
        duplicate_keys: 7,
    };
    // Where the cut lands in the chat text: inside a base64 string.
    let open_quote = truncated.iter().rposition(|&b| b == b'"').unwrap() as u64;
    vec![
        bad(b"", E_EMPTY, 0),
        bad(b"  \n ", E_EMPTY, 4),
        bad(br#"{"a":1,}"#, E_EXPECTED_KEY, 7),
        bad(b"[1,2", E_EXPECTED_COMMA_OR_BRACKET, 4),
        bad(br#"{"a":01}"#, E_INVALID_NUMBER, 5),
        bad(b"[\"\xff\"]", E_INVALID_UTF8, 2),
        bad(br#"["a\x"]"#, E_INVALID_ESCAPE, 3),
        bad(truncated, E_UNTERMINATED_STRING, open_quote),
        bad(&trailing, E_TRAILING_CONTENT, chat.json.len() as u64 + 1),
        Bad {
            opts: Some(dup_error),
            ..bad(br#"{"model":1,"mod\u0065l":2}"#, E_DUPLICATE_KEY, 11)
        },
        Bad {
            opts: Some(shallow),
            ..bad(b"[[[[[[1]]]]]]", E_DEPTH_EXCEEDED, 4)
        },
        Bad {
            opts: Some(bad_option),
            ..bad(b"{}", BAD_ARGUMENT, 0)
        },
    ]
}

/// Parses every bad input, checking the reported error when `err` is set.
fn parse_bad(inputs: &[Bad], messages: &[Vec<u8>], err: Option<&Reader>) {
    for (bad, expected) in inputs.iter().zip(messages) {
        let doc = try_parse(&bad.json, bad.opts.as_ref(), err);
        assert!(doc.is_null());
        if let Some(e) = err.map(Reader::error) {
            assert_eq!((e.code, e.offset), (bad.code, bad.offset));
            assert_eq!(message(e), &expected[..]);
        }
    }
}

/// The parse error path, the document going straight back to the pool,
/// allocates nothing when the caller asks for no error report.
#[test]
fn parse_errors_without_report_allocate_nothing_in_steady_state() {
    let _serial = setup();
    let chat = chat();
    let inputs = bad_inputs(&chat);
    let messages = vec![Vec::new(); inputs.len()];
    for _ in 0..3 {
        parse_bad(&inputs, &messages, None);
    }
    let counts = measure(|| {
        for _ in 0..ROUNDS {
            parse_bad(&inputs, &messages, None);
        }
    });
    assert_no_allocation("parse errors, error = NULL", counts);
}

/// The same, with the message written into the caller's `qjson_error`.
#[test]
fn parse_errors_with_report_allocate_nothing_in_steady_state() {
    let _serial = setup();
    let chat = chat();
    let inputs = bad_inputs(&chat);
    let messages = reported_messages(&inputs);
    let err = Reader::new();
    for _ in 0..3 {
        parse_bad(&inputs, &messages, Some(&err));
    }
    let counts = measure(|| {
        for _ in 0..ROUNDS {
            parse_bad(&inputs, &messages, Some(&err));
        }
    });
    assert_no_allocation("parse errors, reported", counts);
}

/// The messages the bad inputs get, checked against a few exact texts.
fn reported_messages(inputs: &[Bad]) -> Vec<Vec<u8>> {
    let messages: Vec<Vec<u8>> = inputs
        .iter()
        .map(|bad| {
            let err = Reader::new();
            assert!(try_parse(&bad.json, bad.opts.as_ref(), Some(&err)).is_null());
            let e = err.error();
            assert_eq!((e.code, e.offset), (bad.code, bad.offset));
            message(e).to_vec()
        })
        .collect();
    let text = |i: usize| String::from_utf8_lossy(&messages[i]).into_owned();
    assert_eq!(text(0), "empty input (no JSON value)");
    assert_eq!(
        text(2),
        "unexpected character '}' at byte 7, expected a string key"
    );
    assert_eq!(
        text(3),
        "unexpected end of input at byte 4, expected ',' or ']'"
    );
    assert_eq!(text(4), "invalid number at byte 5");
    assert_eq!(text(9), r#"duplicate key "mod\u0065l" at byte 11"#);
    assert_eq!(text(11), "invalid argument at byte 0");
    messages
}

/// The reported messages are right (whatever the allocation count).
#[test]
fn parse_errors_report_code_offset_and_message() {
    let _serial = setup();
    let chat = chat();
    let inputs = bad_inputs(&chat);
    let messages = reported_messages(&inputs);
    let err = Reader::new();
    parse_bad(&inputs, &messages, Some(&err));
}

/// Inputs of 4 GiB - 1 bytes or more are refused before a byte is read.
///
/// The text is a real 4 GiB read-only anonymous mapping, reserved but
/// never touched, so the call is sound whether or not the guard works.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
#[test]
fn too_large_input_is_refused() {
    use core::ffi::c_void;
    unsafe extern "C" {
        fn mmap(
            addr: *mut c_void,
            len: usize,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            offset: i64,
        ) -> *mut c_void;
        fn munmap(addr: *mut c_void, len: usize) -> c_int;
    }
    const PROT_READ: c_int = 1;
    const MAP_PRIVATE: c_int = 0x02;
    const MAP_ANONYMOUS: c_int = 0x20;
    const MAP_NORESERVE: c_int = 0x4000;
    const FOUR_GIB: usize = 1 << 32;

    let _serial = setup();
    // SAFETY: a fresh private anonymous mapping; no existing memory is
    // affected.
    let base = unsafe {
        mmap(
            ptr::null_mut(),
            FOUR_GIB,
            PROT_READ,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base as isize == -1 {
        eprintln!("cannot map 4 GiB of address space: too-large check skipped");
        return;
    }
    for len in [FOUR_GIB, FOUR_GIB - 1] {
        let reader = Reader::new();
        // SAFETY: base[0..len) is a readable mapping that outlives the
        // call (no document is returned); reader.0 is a live reader.
        let doc = unsafe { qjson_parse(base.cast::<c_char>(), len, ptr::null(), reader.0) };
        assert!(doc.is_null());
        let err = reader.error();
        assert_eq!((err.code, err.offset), (E_TOO_LARGE, len as u64));
        assert_eq!(
            String::from_utf8_lossy(message(err)),
            format!("input of {len} bytes is too large (inputs must be under 4 GiB - 1)")
        );
    }
    // SAFETY: unmaps exactly the mapping made above, no longer used.
    assert_eq!(unsafe { munmap(base, FOUR_GIB) }, 0);
}
