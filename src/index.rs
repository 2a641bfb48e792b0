//! The structural index: the one data structure every stage shares.
//!
//! Stage 1 ([`crate::scan`]) fills [`Index::positions`] and
//! [`Index::escapes`]; stage 2 ([`crate::validate`]) fills [`Index::links`];
//! navigation only reads. No vector is freed between documents, so a
//! pooled index parses again without allocating; `links` is not even
//! cleared, validation setting every link.
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
//! links     10  0     0  .  9  .  .  1            .  2  1
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
//!   opening quote it is 1 when the string contains escapes, else 0; for
//!   a key's closing quote it is the entry after its member (the next
//!   key, or the entry past the object's `}`), or 0 when the value is a
//!   container: the member then ends two entries after the container's
//!   close (in the example, key `a`'s member ends at entry 11). Other
//!   entries hold 0.
//! * `escapes` holds, in increasing order, the offset of every escaped
//!   character inside a string (the byte after the backslash).
//! * The links of separators (`:` and `,`) are 0 after validation. Reads
//!   may later keep a container's lookup state in the link of its first
//!   separator, and back links in the commas of an object they walked
//!   ([`crate::navigate::lookup`]); nothing else reads them.
//! * Through the links of its keys' closing quotes, a search of an
//!   object ([`crate::navigate::find_key`]) steps from key to key without
//!   looking at a value.
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
    /// The links keep their values until validation sets them all: so it
    /// need not zero them first.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.escapes.clear();
    }

    /// Bytes of the index the current text fills (its entries, links
    /// and escapes), whatever room the vectors have beyond them.
    pub fn filled_bytes(&self) -> usize {
        4 * (self.positions.len() + self.escapes.len() + self.links.len())
    }

    /// Bytes of heap this index holds on to.
    pub fn retained_bytes(&self) -> usize {
        4 * (self.positions.capacity() + self.escapes.capacity() + self.links.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_keeps_capacity() {
        let mut ix = Index::default();
        ix.positions.extend(0..10_000);
        let cap = ix.positions.capacity();
        ix.clear();
        assert_eq!(ix.positions.capacity(), cap);
    }
}
