//! The structural index: the one data structure every stage shares.
//!
//! Stage 1 ([`crate::scan`]) fills [`Index::positions`] and
//! [`Index::escapes`]; stage 2 ([`crate::validate`]) fills [`Index::links`];
//! navigation only reads. All three vectors are cleared, never freed,
//! between documents, so a pooled index parses again without allocating.
//!
//! # Invariants after a successful parse
//!
//! For the text `{"a":[1,"x\n"]}` (offsets under each byte):
//!
//! ```text
//! text       {  "  a  "  :  [  1  ,  "  x  \  n  "  ]  }
//! offset     0  1  2  3  4  5  6  7  8  9 10 11 12 13 14
//! positions  0  1     3  4  5  6  7  8           12 13 14
//! entry i    0  1     2  3  4  5  6  7            8  9 10
//! links     10  0     .  .  9  .  .  1            .  2  1
//! escapes   [11]
//! ```
//!
//! * `positions` holds, in increasing order, the offset of every structural
//!   byte outside strings (`{ } [ ] : ,`), of both quotes of every string,
//!   and of the first byte of every other scalar (`1`, `true`, …). Every
//!   JSON value therefore starts at an entry; a string always occupies two
//!   consecutive entries (opening, closing quote).
//! * `links[i]` for an opening `{`/`[` is the entry of its matching close;
//!   for a closing `}`/`]` it is the number of members or elements; for an
//!   opening quote it is 1 when the string contains escapes, else 0. Other
//!   entries hold 0.
//! * `escapes` holds, in increasing order, the offset of every escaped
//!   character inside a string (the byte after the backslash).
//! * The links of separators (`:` and `,`) are 0 after validation. Reads
//!   may later keep a container's lookup state in the link of its first
//!   separator ([`crate::navigate::lookup`]); nothing else reads them.
//!
//! Offsets are `u32`: inputs of 4 GiB or more are rejected before scanning.

/// Stage 1 and stage 2 output for one document; see the module docs.
#[derive(Default, Debug)]
pub struct Index {
    /// Offsets of structural bytes, string quotes and scalar starts.
    pub positions: Vec<u32>,
    /// Offsets of escaped characters inside strings.
    pub escapes: Vec<u32>,
    /// Per-entry links computed by validation.
    pub links: Vec<u32>,
}

impl Index {
    /// Empties the index, keeping every allocation for the next document.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.escapes.clear();
        self.links.clear();
    }

    /// Bytes of heap this index holds on to.
    pub fn retained_bytes(&self) -> usize {
        4 * (self.positions.capacity() + self.escapes.capacity() + self.links.capacity())
    }
}

/// Appends offsets to a `Vec<u32>` through a cursor kept in registers.
///
/// Stage 1 appends up to 64 offsets per 64-byte block. Going through
/// `Vec::push` (or even `Vec::reserve` and `set_len`) per block stores the
/// length to memory and loads it back in the next block, a loop-carried
/// trip through memory that the index writes of every block wait on. An
/// `Appender` reserves room for a run of blocks once, writes through a raw
/// pointer, and sets the vector's length when dropped.
pub(crate) struct Appender<'a> {
    vec: &'a mut Vec<u32>,
    /// The vector's buffer: `len` initialised entries, then spare room.
    ptr: *mut u32,
    len: usize,
    /// Slots writable at `ptr` (the capacity).
    cap: usize,
}

impl<'a> Appender<'a> {
    /// An appender with room for `blocks` calls of [`Appender::push_bits`].
    pub(crate) fn new(vec: &'a mut Vec<u32>, blocks: usize) -> Appender<'a> {
        vec.reserve(64 * blocks);
        Appender {
            ptr: vec.as_mut_ptr(),
            len: vec.len(),
            cap: vec.capacity(),
            vec,
        }
    }

    /// Appends `base + i` for every set bit `i` of `bits`, lowest first.
    ///
    /// Writes 8 slots unconditionally, then 8 more only when there are more
    /// than 8 bits, and loops only past 16; the length then moves by the
    /// real count. Most blocks of dense JSON hold fewer than 16
    /// structurals, so this is at most two predictable branches per block
    /// instead of one mispredicted branch per bit.
    ///
    /// Panics (before writing) when called more often than the appender
    /// has room for.
    #[inline(always)]
    pub(crate) fn push_bits(&mut self, base: u32, mut bits: u64) {
        assert!(self.cap - self.len >= 64, "appender overrun");
        let count = bits.count_ones() as usize;
        // SAFETY: the 64 slots from `len` are inside the buffer (checked
        // above) and at most 64 of them are written.
        let out = unsafe { self.ptr.add(self.len) };
        let mut fill = |from: usize, to: usize| {
            for i in from..to {
                // Volatile only so that LLVM keeps these plain 4-byte
                // stores: it otherwise packs the 8 offsets into a vector
                // with `vpinsrd`, measured 15-25% slower on the corpus.
                // SAFETY: i < 64, see above.
                unsafe {
                    out.add(i)
                        .write_volatile(base.wrapping_add(bits.trailing_zeros()))
                };
                bits &= bits.wrapping_sub(1);
            }
        };
        fill(0, 8);
        if count > 8 {
            fill(8, 16);
            if count > 16 {
                fill(16, count);
            }
        }
        self.len += count;
    }
}

impl Drop for Appender<'_> {
    fn drop(&mut self) {
        // SAFETY: entries up to `len` were initialised by push_bits (or
        // were the vector's own), within the capacity reserved in `new`.
        unsafe { self.vec.set_len(self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_bits_appends_offsets_in_order() {
        let mut v = vec![7];
        {
            let mut out = Appender::new(&mut v, 4);
            out.push_bits(100, 0b1010_0001);
            out.push_bits(0, 0);
            out.push_bits(64, u64::MAX);
            out.push_bits(200, 0xFFFF_0000_0001_FFFF);
        }
        let mut want = vec![7, 100, 105, 107];
        want.extend(64..128);
        want.extend((200..217).chain(248..264));
        assert_eq!(v, want);
    }

    #[test]
    #[should_panic(expected = "appender overrun")]
    fn push_bits_past_the_reserved_room_panics() {
        let mut v = Vec::new();
        let mut out = Appender::new(&mut v, 1);
        for _ in 0..=out.cap / 64 {
            out.push_bits(0, u64::MAX);
        }
    }

    #[test]
    fn clear_keeps_capacity() {
        let mut ix = Index::default();
        ix.positions.extend(0..10_000);
        let cap = ix.positions.capacity();
        ix.clear();
        assert_eq!(ix.positions.capacity(), cap);
    }
}
