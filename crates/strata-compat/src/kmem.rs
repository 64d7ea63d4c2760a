//! Kernel memory: reference-counted data blocks.
//!
//! A [`Block`] is what a BSD cluster (`mclrefcnt`) and a STREAMS data block
//! (`dblk_t`, `db_ref`) both are: storage shared by reference count, writable
//! only while one holder has it. Both subsystems keep their data in `Block`s,
//! which is what lets the BSD-in-STREAMS module put an mbuf's storage into a
//! `dblk` without copying (seed 004 §4.2.1, Figure 3).
//!
//! A block is either the subsystem's own storage or a host's buffer handed
//! over ([`Block::from_bytes`]: a Strata message received by an imported
//! protocol becomes its mbuf or mblk without a copy). A host buffer is never
//! written in place: it counts as shared, so it has no leading or trailing
//! space, and a write copies it first, as a shared cluster is copied.

use std::sync::Arc;

use bytes::Bytes;

/// A reference-counted block of bytes (a cluster or a `dblk`'s buffer).
#[derive(Clone, Debug)]
pub struct Block(Store);

/// Where a block's bytes live. The host variant is boxed behind its own
/// count so that a block stays two words (an mbuf or mblk carries one, and
/// every move of those copies it).
#[derive(Clone, Debug)]
enum Store {
    /// The subsystem's own storage: the count and the bytes together.
    Own(Arc<[u8]>),
    /// A host buffer, read-only.
    Host(Arc<Bytes>),
}

impl Block {
    /// A zeroed block of `size` bytes.
    #[inline]
    pub fn new(size: usize) -> Block {
        // One allocation: the count and the bytes together.
        Block(Store::Own(std::iter::repeat_n(0u8, size).collect()))
    }

    /// A block holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Block {
        Block(Store::Own(Arc::from(bytes)))
    }

    /// A host buffer handed over without copying: read-only (it counts as
    /// shared, [`Block::refs`]), copied the first time it is written.
    pub fn from_bytes(bytes: Bytes) -> Block {
        Block(Store::Host(Arc::new(bytes)))
    }

    /// The block's size in bytes (`db_lim - db_base`).
    #[inline]
    pub fn size(&self) -> usize {
        self.bytes().len()
    }

    /// How many holders share it (`db_ref`, `mclrefcnt`); a host buffer
    /// counts at least two (the host holds it too), so nothing writes it in
    /// place.
    #[inline]
    pub fn refs(&self) -> usize {
        match &self.0 {
            Store::Own(a) => Arc::strong_count(a),
            Store::Host(b) => Arc::strong_count(b) + 1,
        }
    }

    /// Its bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.0 {
            Store::Own(a) => a,
            Store::Host(b) => b,
        }
    }

    /// Its bytes for writing, when this is the only holder of storage of
    /// its own (never a host buffer's).
    #[inline]
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.0 {
            Store::Own(a) => Arc::get_mut(a),
            Store::Host(_) => None,
        }
    }

    /// Its bytes for writing, copying first if the block is shared or a
    /// host buffer (copy-on-write: a shared cluster is never written in
    /// place).
    #[inline]
    pub fn make_mut(&mut self) -> &mut [u8] {
        if let Store::Host(_) = self.0 {
            self.own_copy();
        }
        match &mut self.0 {
            Store::Own(a) => Arc::make_mut(a),
            Store::Host(_) => unreachable!("made own above"),
        }
    }

    /// A host buffer replaced by a copy of its own, to be written.
    #[cold]
    fn own_copy(&mut self) {
        if let Store::Host(b) = &self.0 {
            self.0 = Store::Own(Arc::from(&b[..]));
        }
    }

    /// `len` bytes from `off` as a `Bytes` for the host: a host buffer's
    /// own bytes, shared (no copy); a copy of the subsystem's own storage.
    pub fn to_bytes(&self, off: usize, len: usize) -> Bytes {
        match &self.0 {
            Store::Host(b) => b.slice(off..off + len),
            Store::Own(a) => Bytes::copy_from_slice(&a[off..off + len]),
        }
    }

    /// Whether two handles name the same storage (no copy was made).
    pub fn same(&self, other: &Block) -> bool {
        match (&self.0, &other.0) {
            (Store::Own(a), Store::Own(b)) => Arc::ptr_eq(a, b),
            (Store::Host(a), Store::Host(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_buffer_is_shared_read_only_and_copied_when_written() {
        let host = Bytes::from_static(b"abcdef");
        let mut b = Block::from_bytes(host.clone());
        assert_eq!(b.bytes(), b"abcdef");
        assert!(b.refs() > 1, "a host buffer counts as shared");
        assert!(b.bytes_mut().is_none(), "never written in place");
        // Handed back up without a copy: the same bytes.
        let up = b.to_bytes(2, 3);
        assert_eq!(&up[..], b"cde");
        assert_eq!(up.as_ptr(), host[2..].as_ptr());
        let kept = b.clone();
        b.make_mut()[0] = b'X';
        assert_eq!(b.bytes(), b"Xbcdef");
        assert_eq!(kept.bytes(), b"abcdef", "the host's bytes are untouched");
        assert_eq!(&host[..], b"abcdef");
        assert!(!b.same(&kept));
        assert_eq!(std::mem::size_of::<Block>(), 16, "two words");
    }
}
