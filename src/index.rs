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

/// Appends, for each `(base, bits)` of `masks` in order, `base + i` for
/// every set bit `i` of `bits`, lowest first: stage 1's index writer.
///
/// Room for 64 offsets per mask is reserved once, so the loop keeps its
/// cursor in a register: through `Vec::push` (or `reserve` and `set_len`
/// per mask) the length goes to memory and back for every block, a
/// loop-carried trip that each block's writes wait on. Each mask writes 8
/// slots unconditionally, 8 more only past 8 bits and loops only past 16,
/// then the cursor moves by the real count: most blocks of dense JSON hold
/// fewer than 16 structurals, so this is at most two predictable branches
/// per block instead of one mispredicted branch per bit.
///
/// Always inlined, so that it is compiled for the kernel calling it (with
/// POPCNT and BMI1 in the AVX2 kernel).
#[inline(always)]
pub(crate) fn push_masks(out: &mut Vec<u32>, masks: &[(u32, u64)]) {
    out.reserve(64 * masks.len());
    let start = out.len();
    let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u32>();
    let mut n = 0;
    for &(base, mut bits) in masks {
        let count = bits.count_ones() as usize;
        // SAFETY: before mask k, n <= 64 k (each mask adds at most 64), so
        // the at most 64 slots written from n lie within the 64 *
        // masks.len() reserved above.
        let slots = unsafe { dst.add(n) };
        let mut fill = |from: usize, to: usize| {
            for i in from..to {
                // Volatile only so that LLVM keeps these plain 4-byte
                // stores: it otherwise packs the 8 offsets into a vector
                // with `vpinsrd`, measured 15-25% slower on the corpus.
                // SAFETY: i < 64, see above.
                unsafe {
                    slots
                        .add(i)
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
        n += count;
    }
    // SAFETY: slots start..start + n were written above, within capacity.
    unsafe { out.set_len(start + n) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_masks_appends_offsets_in_order() {
        let mut v = vec![7];
        push_masks(
            &mut v,
            &[
                (100, 0b1010_0001),
                (0, 0),
                (64, u64::MAX),
                (200, 0xFFFF_0000_0001_FFFF),
            ],
        );
        push_masks(&mut v, &[]);
        push_masks(&mut v, &[(1000, 1 << 63)]);
        let mut want = vec![7, 100, 105, 107];
        want.extend(64..128);
        want.extend((200..217).chain(248..264));
        want.push(1063);
        assert_eq!(v, want);
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
