//! A parsed document: the text, its index, and the reusable memory for
//! reading values out of it.
//!
//! [`Document::load`] runs the whole pipeline (stage 1, then validation)
//! and either leaves a fully validated document or an error: no value is
//! ever read from a document that failed. Lookups take a cursor and a
//! path ([`crate::navigate::path`]) and return a cursor.
//!
//! Everything a document allocates is kept for the next one: the index
//! vectors and the lookup tables (validation's stack is one per thread,
//! see [`with_scratch`]). The FFI parks freed documents in a small
//! [`pool`], so a steady stream of similar documents parses without
//! allocating.
//!
//! What reads hand back (decoded strings, member lists, tapes) goes into
//! buffers the caller passes in, not into the document: results read
//! through one caller's buffers stay intact while another caller reads the
//! same document (the FFI gives each its own `qjson_reader`).

use core::cell::RefCell;

use crate::error::{Error, ErrorCode, Result};
use crate::index::Index;
use crate::navigate::lookup::Lookup;
use crate::navigate::path::{Path, Step, is_index_token, parse_index, unescape_token};
use crate::navigate::{Tree, ValueType, spans, tape};
use crate::scan;
use crate::validate::{self, DuplicateKeys, Isa, Options};
use crate::values::{number, string};

/// A validated JSON text and the memory to read it.
///
/// The fields a parse touches come first, in declaration order
/// (`repr(C)`), and the pool reads only `held`: see "Cold documents" in
/// [`pool`]. Every method that reads through `lookup` sets `read` and
/// then calls `remeasure`.
#[derive(Debug)]
#[repr(C)]
pub struct Document<'a> {
    src: &'a [u8],
    /// [`Document::retained_bytes`], kept current by every load and read:
    /// the pool's measure of the document, which it takes without
    /// touching anything else.
    held: usize,
    /// Bytes the last [`Document::load`] allocated beyond what the
    /// document already held.
    grown: usize,
    opts: Options,
    /// Whether reads since the last load may have left state in `lookup`
    /// (which a load then clears; otherwise its memory is not touched).
    read: bool,
    index: Index,
    lookup: Lookup,
    /// The text [`Document::load_copy`] made its own (empty after any
    /// other load); its memory is kept for the next copy, as the index's
    /// is, and counted in `held` with it.
    copy: Vec<u8>,
    /// 1 + how many containers deep the text nests, once
    /// [`Document::nests_deeper_than`] measured it; 0 before.
    nesting: u32,
}

impl Default for Document<'_> {
    fn default() -> Self {
        Document::new()
    }
}

impl<'a> Document<'a> {
    /// An empty document holding no text.
    pub fn new() -> Document<'a> {
        Document {
            src: b"",
            held: 0,
            grown: 0,
            opts: Options::default(),
            read: false,
            index: Index::default(),
            lookup: Lookup::default(),
            copy: Vec::new(),
            nesting: 0,
        }
    }

    /// Parses and validates `src`.
    pub fn parse(src: &'a [u8], opts: &Options) -> Result<Document<'a>> {
        let mut doc = Document::new();
        doc.load(src, opts)?;
        Ok(doc)
    }

    /// Replaces the document with `src`, reusing all memory. On error the
    /// document is left empty.
    pub fn load(&mut self, src: &'a [u8], opts: &Options) -> Result<()> {
        with_scratch(|scratch| self.load_in(src, opts, scratch))
    }

    /// [`Document::load`] with `scratch` as validation's working memory
    /// rather than the thread's: for a caller that keeps one at hand
    /// (small documents, see [`small::Slots`]), where reaching the
    /// thread's costs a thread-local lookup a parse.
    pub fn load_in(
        &mut self,
        src: &'a [u8],
        opts: &Options,
        scratch: &mut validate::Scratch,
    ) -> Result<()> {
        self.unload();
        let kernel = scan::active_kernel()?;
        // SAFETY: the active kernel is one this CPU runs.
        unsafe { self.load_by(src, opts, scratch, kernel) }
    }

    /// [`Document::load`] with stage 1 run by `kernel` rather than the
    /// active one ([`ErrorCode::BadKernel`] if this CPU cannot run it),
    /// and stage 2 by the build beside it ([`Isa::beside`]): lets a
    /// benchmark or test time or check the full parse of every kernel in
    /// one process, where `QJSON_KERNEL` is read only once.
    pub fn load_with(&mut self, kernel: scan::Kernel, src: &'a [u8], opts: &Options) -> Result<()> {
        self.unload();
        if !kernel.is_supported() {
            return Err(Error::new(ErrorCode::BadKernel, 0));
        }
        // SAFETY: just checked.
        with_scratch(|scratch| unsafe { self.load_by(src, opts, scratch, kernel) })
    }

    /// [`Document::load`] by `kernel`: stage 1 with it, then validation,
    /// which reads the index stage 1 filled without bounds checks, in the
    /// build beside the kernel ([`Isa::beside`]). The caller has emptied
    /// the document ([`Document::unload`]), as [`Document::load_copy`]
    /// must before it copies the text.
    ///
    /// # Safety
    /// The CPU supports `kernel` ([`scan::Kernel::is_supported`]).
    #[inline(always)]
    unsafe fn load_by(
        &mut self,
        src: &'a [u8],
        opts: &Options,
        scratch: &mut validate::Scratch,
        kernel: scan::Kernel,
    ) -> Result<()> {
        let held = self.load_bytes();
        // SAFETY: the caller vouches for the kernel.
        let parsed = match unsafe { self.index_and_validate(src, opts, scratch, kernel) } {
            // SAFETY: as above.
            Err(e) => Err(unsafe { self.earliest_error(e, src, opts, scratch, kernel) }),
            ok => ok,
        };
        self.grown = self.load_bytes().saturating_sub(held);
        // A load grows only the index.
        self.held += self.grown;
        if let Err(e) = parsed {
            self.index.clear();
            return Err(e);
        }
        self.src = src;
        self.opts = *opts;
        Ok(())
    }

    /// Stage 1 over `src` into the index, then validation.
    ///
    /// # Safety
    /// The CPU supports `kernel`.
    #[inline(always)]
    unsafe fn index_and_validate(
        &mut self,
        src: &[u8],
        opts: &Options,
        scratch: &mut validate::Scratch,
        kernel: scan::Kernel,
    ) -> Result<()> {
        // SAFETY: the caller vouches for the kernel.
        unsafe { scan::stage1(kernel, src, &mut self.index) }?;
        // SAFETY: the index is stage 1's output for `src`: offsets of
        // bytes of `src`, each string's quotes consecutive entries; the
        // build beside a kernel this CPU runs is one it runs.
        unsafe {
            validate::validate_unchecked(src, &mut self.index, opts, scratch, Isa::beside(kernel))
        }
    }

    /// The first error of `src` in text order, given `error`, the one
    /// [`Document::index_and_validate`] reported.
    ///
    /// Stage 1 reports invalid UTF-8, a control byte in a string and a
    /// string left open wherever they are, before validation reads the
    /// grammar: `[1,,"\u{1}"]` named the control byte at 5, not the
    /// second comma at 3, which is where a reader (and cjson, which reads
    /// in order) looks. Its kernels also find a control byte before
    /// invalid UTF-8 earlier in the text. So the text before such an error
    /// is checked again on its own. An error there comes first and is the
    /// answer, unless cutting the text made it: the input ends, or nothing
    /// but whitespace is left; or a string is left open, the one the cut
    /// falls in, and then the text before that string is checked.
    ///
    /// Linear: each pass reads less than the one before, and there are at
    /// most three. Stage 1 reports an open string only where it found
    /// nothing else, so the text before it has no stage 1 error; the text
    /// before a control byte has none but invalid UTF-8 (the control byte
    /// is the first) and an open string, and the text before invalid
    /// UTF-8, an open string only.
    ///
    /// # Safety
    /// The CPU supports `kernel`.
    #[cold]
    #[inline(never)]
    unsafe fn earliest_error(
        &mut self,
        mut error: Error,
        src: &[u8],
        opts: &Options,
        scratch: &mut validate::Scratch,
        kernel: scan::Kernel,
    ) -> Error {
        let stage1_error = |code| {
            matches!(
                code,
                ErrorCode::InvalidUtf8
                    | ErrorCode::ControlCharacter
                    | ErrorCode::UnterminatedString
            )
        };
        if !stage1_error(error.code) {
            return error;
        }
        let mut end = error.offset;
        for _ in 0..3 {
            self.index.clear();
            // SAFETY: the caller vouches for the kernel.
            let Err(earlier) =
                (unsafe { self.index_and_validate(&src[..end], opts, scratch, kernel) })
            else {
                break;
            };
            if earlier.offset >= end || earlier.code == ErrorCode::Empty {
                break;
            }
            end = earlier.offset;
            match earlier.code {
                // The string the cut falls in: look before it.
                ErrorCode::UnterminatedString => {}
                code => {
                    error = earlier;
                    if !stage1_error(code) {
                        break;
                    }
                }
            }
        }
        error
    }

    /// Bytes of native memory the last parse should be charged to the
    /// caller's garbage collector for: what it allocated beyond what the
    /// document already held, or, in a pooled document that had the room,
    /// the part of the index this text fills. A dropped document pins its
    /// index until the collector finds it dead, and a reused one's index
    /// is garbage the collector cannot see as much as a new one's: counted
    /// as nothing, 18 000 parses of a 100 KB body with 95 MB of Lua objects
    /// alive grew VmRSS by 701 MB, still growing (`luajit tools/soak.lua
    /// heap`, in `make test`, which now sees it flat). Not the
    /// document's whole capacity: a document parked after a large body
    /// and reused for small ones would charge the large body each time.
    pub fn charged_bytes(&self) -> usize {
        self.grown.max(self.index.filled_bytes() + self.copy.len())
    }

    /// Bytes of native heap this document holds: the index, the copy of
    /// its text if it made one, and what its reads grew (lookup tables,
    /// decoded keys and tokens).
    pub fn retained_bytes(&self) -> usize {
        self.index.retained_bytes() + self.copy.capacity() + self.lookup.retained_bytes()
    }

    /// Bytes of the memory a load can grow: the index (the lookup tables
    /// and the read buffers grow on reads only, and a load keeps them as
    /// they are), so that its growth over a load is
    /// the growth [`Document::charged_bytes`] counts.
    #[inline]
    fn load_bytes(&self) -> usize {
        self.index.retained_bytes()
    }

    /// Forgets the text, keeping the memory.
    pub fn unload(&mut self) {
        self.src = b"";
        self.copy.clear();
        self.index.clear();
        self.nesting = 0;
        if core::mem::take(&mut self.read) {
            self.lookup.clear();
        }
    }

    /// The JSON text.
    pub fn src(&self) -> &'a [u8] {
        self.src
    }

    /// The structural index (for tests, tools and benchmarks).
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// A navigation view of the document.
    pub fn tree(&self) -> Tree<'_> {
        Tree {
            src: self.src,
            positions: &self.index.positions,
            links: &self.index.links,
        }
    }

    /// The cursor of the whole document's value.
    pub const ROOT: u32 = 0;

    /// Follows `path` from cursor `from`. `Ok(None)` when the path is well
    /// formed but names nothing here; [`ErrorCode::BadPath`] (offset into
    /// the path) when it is malformed, even past a missing step;
    /// [`ErrorCode::BadCursor`] when `from` is not a value of this
    /// document.
    pub fn find(&mut self, from: u32, path: &[u8]) -> Result<Option<u32>> {
        if !self.tree().is_value(from) {
            return Err(Error::new(ErrorCode::BadCursor, from as usize));
        }
        let mut steps = Path::new(path);
        let mut at = from;
        while let Some(step) = steps.next() {
            match self.step(at, step?) {
                Some(next) => at = next,
                None => {
                    // Still report a malformed remainder: a typo must not
                    // hide behind missing data.
                    for rest in steps {
                        rest?;
                    }
                    return Ok(None);
                }
            }
        }
        Ok(Some(at))
    }

    fn step(&mut self, at: u32, step: Step<'_>) -> Option<u32> {
        match (self.tree().value_type(at), step) {
            (ValueType::Object, Step::Key(key)) => self.member(at, key),
            (ValueType::Object, Step::Token(token)) if token.contains(&b'~') => {
                let mut decoded = self.lookup.take_token();
                unescape_token(token, &mut decoded);
                let found = self.member(at, &decoded);
                self.lookup.put_token(decoded);
                self.remeasure();
                found
            }
            (ValueType::Object, Step::Token(key)) => self.member(at, key),
            (ValueType::Array, Step::Index(i)) => self.element(at, i),
            (ValueType::Array, Step::Token(t)) if is_index_token(t) => {
                self.element(at, parse_index(t))
            }
            _ => None,
        }
    }

    /// Whether `at` is a cursor of this document (see [`Tree::is_value`]).
    /// Inlined: every FFI read checks its cursor first.
    #[inline(always)]
    pub fn is_value(&self, at: u32) -> bool {
        self.tree().is_value(at)
    }

    /// Whether `at` is the entry of an object key (its opening quote).
    pub fn is_key(&self, at: u32) -> bool {
        let positions = &self.index.positions;
        let at = at as usize;
        at + 2 < positions.len()
            && self.src[positions[at] as usize] == b'"'
            && self.src[positions[at + 2] as usize] == b':'
    }

    /// The value of the member named `key` (decoded bytes) of the value
    /// at `obj`, under the duplicate-key policy; `None` when `obj` is not
    /// an object or has no such key. Inlined (with the walk of a small
    /// object) into the FFI's member read, where it is most of the work.
    #[inline(always)]
    pub fn member(&mut self, obj: u32, key: &[u8]) -> Option<u32> {
        self.find_member(obj, key, false).map(|(at, _)| at)
    }

    /// [`Document::member`], and whether another member of the object
    /// has the key too (or, for an object of more than 16 members
    /// searched through its table, whether any key of it is repeated):
    /// whether a change to the member must also drop other copies of it.
    #[inline(always)]
    pub fn member_repeated(&mut self, obj: u32, key: &[u8]) -> Option<(u32, bool)> {
        self.find_member(obj, key, true)
    }

    /// [`Document::member_repeated`], whose second answer is false unless
    /// `repeats_wanted` (see [`crate::navigate::lookup::Lookup::member`]).
    #[inline(always)]
    fn find_member(&mut self, obj: u32, key: &[u8], repeats_wanted: bool) -> Option<(u32, bool)> {
        if self.tree().value_type(obj) != ValueType::Object {
            return None;
        }
        let last_wins = self.last_wins();
        self.read = true;
        let (found, repeated) = self.lookup.member(
            self.src,
            &mut self.index,
            obj,
            key,
            last_wins,
            repeats_wanted,
        );
        self.remeasure();
        found.map(|at| (at, repeated))
    }

    /// Brings `held` up to date after a read, which may have grown the
    /// lookup tables.
    #[inline(always)]
    fn remeasure(&mut self) {
        self.held = self.retained_bytes();
    }

    fn last_wins(&self) -> bool {
        self.opts.duplicate_keys == DuplicateKeys::LastWins
    }

    /// The work reads have done on this document so far (values stepped
    /// over, keys compared or hashed): tests and benchmarks check that it
    /// grows linearly with the reads, whatever their order.
    pub fn lookup_work(&self) -> u64 {
        self.lookup.work()
    }

    /// Bytes of lookup tables built for this document (see
    /// [`crate::navigate::lookup`]).
    pub fn lookup_table_bytes(&self) -> usize {
        self.lookup.table_bytes()
    }

    /// The key entries of the members of the object at `obj`, in document
    /// order, in `out`: every member when `every`, else those the
    /// duplicate-key policy reads (one per distinct key, the last one).
    /// `None` when `obj` is not an object.
    pub fn members<'s>(
        &mut self,
        obj: u32,
        every: bool,
        out: &'s mut Vec<u32>,
    ) -> Option<&'s [u32]> {
        self.object_read(obj, |lookup, src, index, last_wins| {
            lookup.members(src, index, obj, every, last_wins, out);
        })?;
        Some(out)
    }

    /// Runs `read`, a read of the object at `obj` through the lookup state
    /// (which may build its lookup table), with the document's text,
    /// index and whether "last wins"; `None` when `obj` is not an object.
    fn object_read(
        &mut self,
        obj: u32,
        read: impl FnOnce(&mut Lookup, &[u8], &mut Index, bool),
    ) -> Option<()> {
        if self.tree().value_type(obj) != ValueType::Object {
            return None;
        }
        let last_wins = self.last_wins();
        self.read = true;
        read(&mut self.lookup, self.src, &mut self.index, last_wins);
        self.remeasure();
        Some(())
    }

    /// The tape of the value at `at` ([`tape`]), built in `items` with
    /// decoded strings in `arena`.
    pub fn tape<'s>(
        &self,
        at: u32,
        items: &'s mut Vec<tape::Item>,
        arena: &mut Vec<u8>,
    ) -> &'s [tape::Item] {
        tape::build(&self.tree(), at, items, arena);
        items
    }

    /// The members (every one, in document order) or elements of the
    /// container at `at` with their byte spans ([`spans`]), built in `out`;
    /// with `keys`, objects' keys decoded into the text or `arena`.
    /// `winners` is scratch for the key entries reads see for each
    /// member's key. `None` for a scalar.
    pub fn spans<'s>(
        &mut self,
        at: u32,
        keys: bool,
        winners: &mut Vec<u32>,
        out: &'s mut Vec<spans::Span>,
        arena: &mut Vec<u8>,
    ) -> Option<&'s [spans::Span]> {
        match self.value_type(at) {
            ValueType::Object => {
                self.object_read(at, |lookup, src, index, last_wins| {
                    lookup.winners(src, index, at, last_wins, winners);
                })?;
                spans::object(&self.tree(), at, winners, keys, out, arena);
            }
            ValueType::Array => spans::array(&self.tree(), at, out),
            _ => return None,
        }
        Some(out)
    }

    /// The cursor of element `index` of the value at `array`; `None` when
    /// it is not an array or has no such element. Inlined into the FFI's
    /// element read, as [`Document::member`] is into its member read.
    #[inline(always)]
    pub fn element(&mut self, array: u32, index: usize) -> Option<u32> {
        let tree = self.tree();
        if tree.value_type(array) != ValueType::Array || index >= tree.count(array) as usize {
            return None;
        }
        self.read = true;
        let element = self
            .lookup
            .element(self.src, &mut self.index, array, index as u32);
        self.remeasure();
        Some(element)
    }

    /// The type of the value at `at` (a cursor from [`Document::find`]).
    pub fn value_type(&self, at: u32) -> ValueType {
        self.tree().value_type(at)
    }

    /// The decoded bytes of the string (or key) at entry `at`: borrowed
    /// from the text when it has no escapes, else decoded into `out`.
    /// Inlined: a read of a string value is mostly this.
    #[inline(always)]
    pub fn string<'s>(&self, at: u32, out: &'s mut Vec<u8>) -> &'s [u8]
    where
        'a: 's,
    {
        let tree = self.tree();
        let body = &self.src[tree.string_span(at)];
        if !tree.has_escapes(at) {
            return body;
        }
        string::unescape_over(body, out);
        out
    }

    /// The exact source text of the value at `at`.
    pub fn raw(&self, at: u32) -> &'a [u8] {
        &self.src[self.tree().raw(at)]
    }

    /// Whether the value at `at` nests containers more than `levels` deep,
    /// itself counted: for an encoder that copies the value's source text
    /// under a depth limit of `levels` from there. No value nests deeper
    /// than the limit its document was parsed under, nor than the
    /// document, which is measured on the first ask that limit does not
    /// settle (one walk of the index): so an encoder that copies a
    /// document many times under a lower limit walks it once, and a value
    /// again only where the document does nest past `levels`.
    pub fn nests_deeper_than(&mut self, at: u32, levels: u32) -> bool {
        if self.opts.max_depth <= levels {
            return false;
        }
        if self.nesting == 0 {
            self.nesting = self.tree().nesting(0) + 1;
        }
        self.nesting - 1 > levels && (at == 0 || self.tree().nesting(at) > levels)
    }

    /// The number at `at` (a number's cursor) as the nearest double
    /// (±infinity beyond range).
    pub fn f64(&self, at: u32) -> f64 {
        number::to_f64(&self.src[self.tree().number_raw(at)])
    }

    /// The number at `at` (a number's cursor) as an exact `i64`.
    pub fn i64(&self, at: u32) -> core::result::Result<i64, ErrorCode> {
        number::to_i64(&self.src[self.tree().number_raw(at)])
    }

    /// Elements of an array, or distinct keys of an object; `None` for
    /// other types.
    pub fn len(&mut self, at: u32) -> Option<usize> {
        let tree = self.tree();
        match tree.value_type(at) {
            ValueType::Array => Some(tree.count(at) as usize),
            ValueType::Object => {
                let last_wins = self.last_wins();
                self.read = true;
                let distinct = self
                    .lookup
                    .distinct_keys(self.src, &mut self.index, at, last_wins);
                self.remeasure();
                Some(distinct as usize)
            }
            _ => None,
        }
    }
}

impl Document<'static> {
    /// Copies `text` into memory the document owns and parses the copy:
    /// for a text that lives shorter than the document, as nginx's
    /// request body lives only as long as its request while a document
    /// lives until Lua's collector finds it dead. The copy's memory stays
    /// with the document for the next text, as the index's does, so a
    /// pooled document copies a body of the same size without
    /// allocating: where LuaJIT maps fresh memory for every string of
    /// 128 KB or more, whose page faults cost more than the parse.
    ///
    /// # Safety
    ///
    /// What the document then gives out of its text ([`Document::src`],
    /// [`Document::raw`], a string [`Document::string`] reads without
    /// escapes) is typed `&'static` but lies in the copy: it must not be
    /// used once the document loads another text, is unloaded or is
    /// dropped, the C ABI's rule for everything read from a document.
    /// (A safe `load_copy` let safe code read freed memory that way: an
    /// audit's finding.)
    ///
    /// ```compile_fail,E0133
    /// let mut doc = qjson::document::Document::new();
    /// doc.load_copy(b"[1]", &Default::default()).unwrap();
    /// ```
    pub unsafe fn load_copy(&mut self, text: &[u8], opts: &Options) -> Result<()> {
        self.unload();
        let kernel = scan::active_kernel()?;
        let capacity = self.copy.capacity();
        self.copy.extend_from_slice(text);
        let grown = self.copy.capacity() - capacity;
        // SAFETY: the slice is `copy`'s bytes, which nothing changes or
        // frees while `src` holds them: `copy` changes only here and in
        // `unload`, each of which first points `src` elsewhere (`unload`
        // at `b""`), and the document owns `copy`. ('static stands for
        // "as long as `src` is this copy", which the caller keeps to.)
        let src: &'static [u8] =
            unsafe { core::slice::from_raw_parts(self.copy.as_ptr(), self.copy.len()) };
        // SAFETY: the active kernel is one this CPU runs.
        let loaded = with_scratch(|scratch| unsafe { self.load_by(src, opts, scratch, kernel) });
        if loaded.is_err() {
            self.copy.clear();
        }
        self.grown += grown;
        self.held += grown;
        loaded
    }
}

/// Validation's working memory (its stack of open containers, the keys of
/// the objects being checked), one per thread, lent to each load.
///
/// Per document it was cold: the FFI's documents are freed by the Lua
/// collector a cycle after their parse, thousands at once, so each parse
/// meets its document's memory after thousands of others have passed
/// through the cache, and every line it touches is a miss (see "Cold
/// documents" in [`pool`]). Shared, it stays in cache. A load that grew
/// it past [`SCRATCH_KEEP_BYTES`] (a body of millions of keys under
/// `duplicate_keys = "error"`) gives that memory back at once.
fn with_scratch<R>(f: impl FnOnce(&mut validate::Scratch) -> R) -> R {
    thread_local! {
        static SCRATCH: RefCell<validate::Scratch> = const { RefCell::new(validate::Scratch::new()) };
    }
    let mut f = Some(f);
    let shared = SCRATCH.try_with(|cell| {
        let mut scratch = cell.try_borrow_mut().ok()?;
        let result = f.take().map(|f| f(&mut scratch));
        if scratch.retained_bytes() > SCRATCH_KEEP_BYTES {
            *scratch = validate::Scratch::new();
        }
        result
    });
    match (shared, f) {
        (Ok(Some(result)), _) => result,
        // The thread is exiting (its scratch is gone), or a load runs
        // inside another on this thread (none does today).
        (_, Some(f)) => f(&mut validate::Scratch::new()),
        (_, None) => unreachable!("the load ran, so it returned"),
    }
}

/// The most memory a scratch buffer shared between calls keeps once a call
/// is done with it: validation's here, eager decode's and the native
/// encoder's (src/lua_api), a reader's results' (`ffi::Scratch::trim`).
pub const SCRATCH_KEEP_BYTES: usize = 1 << 20;

pub mod small;

/// Freed documents kept for reuse by the FFI.
pub mod pool {
    use super::Document;
    use std::sync::Mutex;

    /// The pool may always hold this many bytes of documents (their
    /// buffers, the documents themselves and their places in the pool).
    const MIN_BUDGET: usize = 64 << 20;
    /// A document holding more than this is freed, not parked: a burst of
    /// large bodies must not leave its memory behind for the life of the
    /// process (an nginx worker's), and regrowing buffers costs little
    /// next to reading a text that size.
    const MAX_DOCUMENT_BYTES: usize = 2 << 20;

    /// Documents handed back, held up to a budget that follows the
    /// caller's collection cycles. Lua frees the documents it drops in
    /// sweeps after a collection, so a loop over small texts hands back a
    /// cycle's worth at once and takes them again right after; parking
    /// them saves allocating and regrowing every vector on the next
    /// parse. A cycle's worth grows with the Lua heap (the collector lets
    /// garbage grow with the live heap): about 100 000 small documents
    /// with 44 MB of Lua objects alive, and any fixed bound is passed at
    /// some heap size, after which every parse allocates anew (a tool-call
    /// decode up to 1.45 times slower at 44 MB with one of 65 536 documents;
    /// `luajit benches/heap_pacing.lua 300000`). So at the end of each
    /// cycle ([`cycle_ended`]) the budget becomes room for as many
    /// documents as were out at once during it (at their mean cost), at
    /// least `min_budget`: what was alive at once anyway, given back to
    /// the allocator once the cycles shrink. (Not what the cycle handed
    /// back: documents taken and handed back one at a time, as eager
    /// decodes do, would count again each time.)
    ///
    /// # Cold documents
    ///
    /// The same sweeps make every parked document cold: it comes back a
    /// cycle (thousands of parses) after it was last used, so each cache
    /// line a parse touches in it is likely a miss, where cjson's tables
    /// come from memory the collector's sweep has just touched. So a parse
    /// touches as few lines of a document as it can: validation's scratch
    /// is shared per thread, the lookup state is cleared only after reads
    /// used it, the fields a parse uses come first in the struct, and
    /// parking reads one field (`held`) instead of every buffer's
    /// capacity. Data misses of a simulated 512 KB L2 per decode and reads
    /// of an SSE event went from 48 to 40, of the tool call from 30 to 21
    /// (cjson: under 1; `MISSES=1 tools/lua_insns.sh sse-read tool-read`).
    struct Parked {
        /// Each document with its `cost`, measured when it was parked (a
        /// parked document's memory does not change), oldest first.
        documents: Vec<(Box<Document<'static>>, usize)>,
        /// The sum of their costs.
        bytes: usize,
        /// The most `bytes` may reach.
        budget: usize,
        /// The least `budget` may be.
        min_budget: usize,
        /// Documents taken and not handed back yet.
        out: usize,
        /// The most `out` has been since the last cycle ended.
        peak_out: usize,
        /// The number and summed cost of the documents handed back (and
        /// small enough to park) since the last cycle ended.
        returned: usize,
        returned_bytes: usize,
    }

    impl Parked {
        const fn new(min_budget: usize) -> Parked {
            Parked {
                documents: Vec::new(),
                bytes: 0,
                budget: min_budget,
                min_budget,
                out: 0,
                peak_out: 0,
                returned: 0,
                returned_bytes: 0,
            }
        }

        /// A parked document, if any; counts one more out either way.
        fn take(&mut self) -> Option<Box<Document<'static>>> {
            self.out += 1;
            self.peak_out = self.peak_out.max(self.out);
            let (doc, bytes) = self.documents.pop()?;
            self.bytes -= bytes;
            Some(doc)
        }

        /// Parks `doc` if it is small and the budget has room; otherwise
        /// returns it, for the caller to free once the pool is unlocked.
        #[must_use]
        fn give_back(&mut self, doc: Box<Document<'static>>) -> Option<Box<Document<'static>>> {
            self.out = self.out.saturating_sub(1);
            if doc.held > MAX_DOCUMENT_BYTES {
                return Some(doc);
            }
            let bytes = cost(&doc);
            self.returned += 1;
            self.returned_bytes = self.returned_bytes.saturating_add(bytes);
            if self.bytes + bytes > self.budget {
                return Some(doc);
            }
            self.bytes += bytes;
            self.documents.push((doc, bytes));
            None
        }

        fn cycle_ended(&mut self) {
            let mean = self.returned_bytes.checked_div(self.returned).unwrap_or(0);
            self.budget = self.peak_out.saturating_mul(mean).max(self.min_budget);
            self.peak_out = self.out;
            self.returned = 0;
            self.returned_bytes = 0;
            // The first parked go first: the last parked are taken first.
            let mut over = self.bytes.saturating_sub(self.budget);
            let mut dropped = 0;
            for (_, bytes) in &self.documents {
                if over == 0 {
                    break;
                }
                over = over.saturating_sub(*bytes);
                self.bytes -= bytes;
                dropped += 1;
            }
            self.documents.drain(..dropped);
            if self.documents.len() < self.documents.capacity() / 4 {
                self.documents.shrink_to(2 * self.documents.len());
            }
        }
    }

    static PARKED: Mutex<Parked> = Mutex::new(Parked::new(MIN_BUDGET));

    /// What parking `doc` counts against the budget.
    fn cost(doc: &Document<'static>) -> usize {
        doc.held
            + std::mem::size_of::<Document<'static>>()
            + std::mem::size_of::<(Box<Document<'static>>, usize)>()
    }

    /// A parked document, or a new one.
    pub fn take() -> Box<Document<'static>> {
        let parked = PARKED.lock().ok().and_then(|mut p| p.take());
        parked.unwrap_or_default()
    }

    /// Parks `doc` for reuse, or drops it when it is large or the pool is
    /// full.
    pub fn give_back(mut doc: Box<Document<'static>>) {
        // The text is the caller's to free; the index goes at the next
        // load (which empties it first).
        doc.src = b"";
        doc.copy.clear();
        let unparked = match PARKED.lock() {
            Ok(mut parked) => parked.give_back(doc),
            Err(_) => Some(doc),
        };
        drop(unparked);
    }

    /// A collection cycle of the caller's has ended and the documents it
    /// found dead have been handed back: from now on the pool holds room
    /// for as many documents as were out at once during that cycle (at
    /// least 64 MiB), and frees what it holds beyond that.
    pub fn cycle_ended() {
        if let Ok(mut parked) = PARKED.lock() {
            parked.cycle_ended();
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::validate::Options;

        const TEXT: &[u8] = br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;

        fn loaded() -> Box<Document<'static>> {
            let mut doc = Box::<Document<'static>>::default();
            doc.load(TEXT, &Options::default()).unwrap();
            doc
        }

        /// Checks the pool's bookkeeping.
        fn check(parked: &Parked) {
            assert!(parked.bytes <= parked.budget);
            assert!(parked.budget >= parked.min_budget);
            for (doc, bytes) in &parked.documents {
                assert_eq!(cost(doc), *bytes);
            }
            let sum: usize = parked.documents.iter().map(|(_, bytes)| bytes).sum();
            assert_eq!(sum, parked.bytes);
        }

        #[test]
        fn keeps_small_documents_within_its_budget() {
            let each = cost(&loaded());
            let mut parked = Parked::new(100 * each);
            for _ in 0..150 {
                let _ = parked.give_back(loaded());
            }
            check(&parked);
            assert_eq!(parked.documents.len(), 100);
        }

        /// A cycle as Lua runs one: `n` documents taken (parked ones
        /// first), all handed back at its end.
        fn cycle(parked: &mut Parked, n: usize) {
            let docs: Vec<_> = (0..n)
                .map(|_| parked.take().unwrap_or_else(loaded))
                .collect();
            for doc in docs {
                let _ = parked.give_back(doc);
            }
            parked.cycle_ended();
            check(parked);
        }

        #[test]
        fn budget_follows_the_documents_out_at_once() {
            let each = cost(&loaded());
            let mut parked = Parked::new(100 * each);
            // 300 out at once: 100 fit the least budget, and then 300 may.
            cycle(&mut parked, 300);
            assert_eq!(parked.documents.len(), 100);
            cycle(&mut parked, 300);
            assert_eq!(parked.documents.len(), 300);
            // Documents taken and handed back one at a time, however many,
            // are one out at once: the pool shrinks to its least.
            for _ in 0..1000 {
                let doc = parked.take().unwrap();
                let _ = parked.give_back(doc);
            }
            assert_eq!(parked.documents.len(), 300);
            parked.cycle_ended();
            check(&parked);
            assert_eq!(parked.documents.len(), 100);
            assert_eq!(parked.budget, 100 * each);
        }

        #[test]
        fn frees_documents_that_hold_much_memory() {
            // 1 M elements: 8 MB of index and a 4 MB element table. (Pooled
            // documents borrow 'static texts, as the FFI promises: a static
            // keeps it, where a leaked string failed LeakSanitizer.)
            static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
            let text = TEXT.get_or_init(|| format!("[{}0]", "0,".repeat(1 << 20)));
            let mut doc = take();
            doc.load(text.as_bytes(), &Options::default()).unwrap();
            doc.element(0, 1 << 19).unwrap();
            assert!(doc.retained_bytes() > MAX_DOCUMENT_BYTES);
            let before = PARKED.lock().unwrap().bytes;
            give_back(doc);
            let parked = PARKED.lock().unwrap();
            assert!(parked.bytes <= before.max(MIN_BUDGET - MAX_DOCUMENT_BYTES));
            assert!(
                parked
                    .documents
                    .iter()
                    .all(|(d, _)| d.retained_bytes() <= MAX_DOCUMENT_BYTES)
            );
        }
    }
}

#[cfg(test)]
mod tests;
