//! Kernel memory: reference-counted data blocks.
//!
//! A [`Block`] is what a BSD cluster (`mclrefcnt`) and a STREAMS data block
//! (`dblk_t`, `db_ref`) both are: storage shared by reference count, writable
//! only while one holder has it. Both subsystems keep their data in `Block`s,
//! which is what lets the BSD-in-STREAMS module put an mbuf's storage into a
//! `dblk` without copying (seed 004 §4.2.1, Figure 3).

use std::sync::Arc;

/// A reference-counted block of bytes (a cluster or a `dblk`'s buffer).
#[derive(Clone, Debug)]
pub struct Block(Arc<[u8]>);

impl Block {
    /// A zeroed block of `size` bytes.
    pub fn new(size: usize) -> Block {
        // One allocation: the count and the bytes together.
        Block(std::iter::repeat_n(0u8, size).collect())
    }

    /// A block holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Block {
        Block(Arc::from(bytes))
    }

    /// The block's size in bytes (`db_lim - db_base`).
    pub fn size(&self) -> usize {
        self.0.len()
    }

    /// How many holders share it (`db_ref`, `mclrefcnt`).
    pub fn refs(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its bytes for writing, when this is the only holder.
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Arc::get_mut(&mut self.0)
    }

    /// Its bytes for writing, copying first if the block is shared
    /// (copy-on-write: a shared cluster is never written in place).
    pub fn make_mut(&mut self) -> &mut [u8] {
        Arc::make_mut(&mut self.0)
    }

    /// Whether two handles name the same storage (no copy was made).
    pub fn same(&self, other: &Block) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
