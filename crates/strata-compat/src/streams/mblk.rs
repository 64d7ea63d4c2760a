//! STREAMS messages: `mblk_t` message blocks over shared `dblk_t` data
//! blocks (SVR4 `sys/stream.h`).
//!
//! A message is a chain of blocks linked by `b_cont`; each block reads
//! `b_rptr..b_wptr` of a data block that several blocks may share (`dupb`
//! raises its reference count, nothing is copied). Data blocks come from a
//! bounded, counted pool ([`Dblks`]); `esballoc` wraps storage someone else
//! owns — the way an encapsulated mbuf's storage becomes a `dblk` without a
//! copy (seed 004 Figure 3).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::bsd::mbuf::MbufKind;
use crate::errno::Errno;
use crate::kmem::Block;

/// A message's type (`db_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgType {
    /// `M_DATA`: user data.
    Data,
    /// `M_PROTO`: a protocol primitive (TPI), flow-controlled.
    Proto,
    /// `M_PCPROTO`: a high-priority protocol primitive (acks, errors).
    Pcproto,
    /// `M_FLUSH`: flush queues; the first byte holds `FLUSHR`/`FLUSHW`.
    Flush,
    /// `M_START`: restart output.
    Start,
    /// `M_STOP`: stop output.
    Stop,
    /// `M_HANGUP`: the device hung up.
    Hangup,
    /// `M_ERROR`: a fatal error; the first byte is the errno.
    Error,
    /// `M_SETOPTS`: stream head options from a module; here `SO_WROFF`,
    /// the write offset (headroom the head leaves in front of the data it
    /// writes, for headers below), a big-endian u16.
    Setopts,
}

impl MsgType {
    /// High-priority messages (`>= QPCTL`) jump the queue and are never
    /// flow-controlled.
    pub fn is_priority(self) -> bool {
        !matches!(self, MsgType::Data | MsgType::Proto)
    }
}

/// `FLUSHR`: flush the read side.
pub const FLUSHR: u8 = 0x01;
/// `FLUSHW`: flush the write side.
pub const FLUSHW: u8 = 0x02;
/// `FLUSHRW`: flush both sides.
pub const FLUSHRW: u8 = FLUSHR | FLUSHW;

/// Counts of the data block pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DblkStats {
    /// Data blocks in use.
    pub in_use: usize,
    /// Data blocks allocated in all (`allocb` and `esballoc`).
    pub allocs: u64,
    /// Allocations refused: the pool was at its limit.
    pub fails: u64,
}

/// The data block pool: bounded and counted.
#[derive(Debug)]
pub struct Dblks {
    max: usize,
    // Allocations and frees, each one atomic add: in use is their difference.
    allocs: AtomicU64,
    frees: AtomicU64,
    fails: AtomicU64,
    /// The blocks that are encapsulated mbufs (seed 004 Figure 3), counted
    /// by kind where they are counted as blocks too: an encapsulated mbuf
    /// costs one count, as a native one does (`encap::mbuf_mblk`).
    pub mbufs: crate::bsd::mbuf::NativeCounts,
}

/// A handle on the data block pool; every block holds one.
pub type DblkPool = Arc<Dblks>;

impl Dblks {
    /// A pool of at most `max` data blocks.
    pub fn pool(max: usize) -> DblkPool {
        Arc::new(Dblks {
            max,
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
            fails: AtomicU64::new(0),
            mbufs: Default::default(),
        })
    }

    fn in_use(&self) -> usize {
        let blocks = self
            .allocs
            .load(Relaxed)
            .saturating_sub(self.frees.load(Relaxed)) as usize;
        blocks + self.mbufs.in_use(MbufKind::Small) + self.mbufs.in_use(MbufKind::Cluster)
    }

    /// Count one more encapsulated mbuf of `kind` in use (a data block of
    /// this pool); `false` when the pool is at its limit.
    pub fn charge_mbuf(&self, kind: MbufKind) -> bool {
        if self.in_use() >= self.max {
            self.fails.fetch_add(1, Relaxed);
            self.mbufs.refused();
            return false;
        }
        self.mbufs.allocated(kind);
        true
    }

    /// Count one more data block in use; `false` when the pool is at its
    /// limit (an encapsulation module allocating storage in the pool's name).
    pub fn charge(&self) -> bool {
        if self.in_use() >= self.max {
            self.fails.fetch_add(1, Relaxed);
            return false;
        }
        self.allocs.fetch_add(1, Relaxed);
        true
    }

    /// Count one more data block in use whose count moves from an
    /// encapsulated mbuf of this pool being freed: in use does not grow, so
    /// there is no limit to check.
    fn adopt(&self) {
        self.allocs.fetch_add(1, Relaxed);
    }

    /// Count one data block fewer in use (the undo of [`Dblks::charge`]).
    pub fn release(&self) {
        self.frees.fetch_add(1, Relaxed);
    }

    /// The pool's counts (encapsulated mbufs included).
    pub fn stats(&self) -> DblkStats {
        let m = self.mbufs.stats();
        DblkStats {
            in_use: self.in_use(),
            allocs: self.allocs.load(Relaxed) + m.small_allocs + m.cluster_allocs,
            fails: self.fails.load(Relaxed),
        }
    }
}

/// A message block and, through `b_cont`, the rest of its message.
pub struct Mblk {
    /// `db_type` (kept with the block; `dupb` copies it).
    pub mtype: MsgType,
    block: Block,
    rptr: usize,
    wptr: usize,
    cont: Option<Box<Mblk>>,
    pool: DblkPool,
}

impl fmt::Debug for Mblk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mblk")
            .field("mtype", &self.mtype)
            .field("len", &self.len())
            .field("msgdsize", &self.msgsize())
            .finish()
    }
}

impl Drop for Mblk {
    fn drop(&mut self) {
        self.pool.release();
        let mut next = self.cont.take();
        while let Some(mut m) = next {
            next = m.cont.take();
        }
    }
}

/// `allocb`: a block of `size` bytes, type `M_DATA`, empty.
pub fn allocb(pool: &DblkPool, size: usize) -> Result<Mblk, Errno> {
    if !pool.charge() {
        return Err(Errno::Enobufs);
    }
    Ok(Mblk {
        mtype: MsgType::Data,
        block: Block::new(size),
        rptr: 0,
        wptr: 0,
        cont: None,
        pool: pool.clone(),
    })
}

/// `esballoc`: a block over existing storage, reading `len` bytes from
/// `off` — no copy.
pub fn esballoc(pool: &DblkPool, block: Block, off: usize, len: usize) -> Result<Mblk, Errno> {
    if !pool.charge() {
        return Err(Errno::Enobufs);
    }
    Ok(over(pool, block, off, len))
}

/// `esballoc` of the storage of an encapsulated mbuf of this pool's that
/// is being freed (`encap::mbuf_mblk::into_mblk`): its count moves with
/// it, so nothing is refused — what is in use does not grow.
pub fn esballoc_moved(pool: &DblkPool, block: Block, off: usize, len: usize) -> Mblk {
    pool.adopt();
    over(pool, block, off, len)
}

/// A block of `pool` reading `len` bytes of `block` from `off`, counted
/// already.
fn over(pool: &DblkPool, block: Block, off: usize, len: usize) -> Mblk {
    let rptr = off.min(block.size());
    let wptr = rptr + len.min(block.size() - rptr);
    Mblk {
        mtype: MsgType::Data,
        block,
        rptr,
        wptr,
        cont: None,
        pool: pool.clone(),
    }
}

/// A one-block message of type `mtype` holding `bytes`.
pub fn mkmsg(pool: &DblkPool, mtype: MsgType, bytes: &[u8]) -> Result<Mblk, Errno> {
    let mut mp = allocb(pool, bytes.len())?;
    mp.mtype = mtype;
    mp.put_bytes(bytes);
    Ok(mp)
}

impl Mblk {
    /// Bytes in this block (`b_wptr - b_rptr`).
    pub fn len(&self) -> usize {
        self.wptr - self.rptr
    }

    /// Whether this block is empty.
    pub fn is_empty(&self) -> bool {
        self.rptr == self.wptr
    }

    /// This block's bytes.
    pub fn data(&self) -> &[u8] {
        &self.block.bytes()[self.rptr..self.wptr]
    }

    /// This block's bytes for writing (copied first if the data block is
    /// shared).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (r, w) = (self.rptr, self.wptr);
        &mut self.block.make_mut()[r..w]
    }

    /// The data block and the window read from it, `(block, rptr, wptr)`.
    pub fn storage(&self) -> (&Block, usize, usize) {
        (&self.block, self.rptr, self.wptr)
    }

    /// The data block pool this block is counted in.
    pub fn pool(&self) -> &DblkPool {
        &self.pool
    }

    /// Room after `b_wptr` (none in a shared data block).
    pub fn tailroom(&self) -> usize {
        if self.block.refs() > 1 {
            0
        } else {
            self.block.size() - self.wptr
        }
    }

    /// Room before `b_rptr` (none in a shared data block).
    pub fn headroom(&self) -> usize {
        if self.block.refs() > 1 { 0 } else { self.rptr }
    }

    /// Copy as much of `bytes` as fits after `b_wptr`; how many were copied.
    pub fn put_bytes(&mut self, bytes: &[u8]) -> usize {
        let n = self.tailroom().min(bytes.len());
        let w = self.wptr;
        self.block.make_mut()[w..w + n].copy_from_slice(&bytes[..n]);
        self.wptr += n;
        n
    }

    /// Move `b_rptr` back by `n` bytes of headroom (to prepend a header).
    pub fn prepend(&mut self, n: usize) -> bool {
        if self.headroom() < n {
            return false;
        }
        self.rptr -= n;
        true
    }

    /// Leave `n` bytes of headroom in an empty block (for headers to come).
    pub fn reserve_head(&mut self, n: usize) {
        if self.is_empty() {
            let n = n.min(self.block.size());
            self.rptr = n;
            self.wptr = n;
        }
    }

    /// `b_cont`.
    pub fn cont(&self) -> Option<&Mblk> {
        self.cont.as_deref()
    }

    /// `unlinkb`: detach and return `b_cont`.
    pub fn unlinkb(&mut self) -> Option<Mblk> {
        self.cont.take().map(|b| *b)
    }

    /// `linkb`: link `tail` after the last block.
    pub fn linkb(&mut self, tail: Mblk) {
        let mut m = self;
        while m.cont.is_some() {
            m = m.cont.as_deref_mut().expect("checked");
        }
        m.cont = Some(Box::new(tail));
    }

    /// The blocks of the message, this one first.
    pub fn iter(&self) -> impl Iterator<Item = &Mblk> {
        std::iter::successors(Some(self), |m| m.cont.as_deref())
    }

    /// Bytes in the whole message, all block types (what queues count).
    pub fn msgsize(&self) -> usize {
        self.iter().map(Mblk::len).sum()
    }

    /// `msgdsize`: bytes in the message's `M_DATA` blocks.
    pub fn msgdsize(&self) -> usize {
        self.iter()
            .filter(|b| b.mtype == MsgType::Data)
            .map(Mblk::len)
            .sum()
    }

    /// The message's bytes from this block on, copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.msgsize());
        for b in self.iter() {
            v.extend_from_slice(b.data());
        }
        v
    }

    /// `dupb`: a new block sharing this block's data block.
    pub fn dupb(&self) -> Result<Mblk, Errno> {
        let mut mp = esballoc(&self.pool, self.block.clone(), self.rptr, self.len())?;
        mp.mtype = self.mtype;
        Ok(mp)
    }

    /// `dupmsg`: `dupb` of every block.
    pub fn dupmsg(&self) -> Result<Mblk, Errno> {
        let mut out = self.dupb()?;
        for b in self.iter().skip(1) {
            out.linkb(b.dupb()?);
        }
        Ok(out)
    }

    /// `copymsg`: a message with copies of every block's bytes.
    pub fn copymsg(&self) -> Result<Mblk, Errno> {
        let mut out: Option<Mblk> = None;
        for b in self.iter() {
            let c = mkmsg(&self.pool, b.mtype, b.data())?;
            match out.as_mut() {
                None => out = Some(c),
                Some(o) => o.linkb(c),
            }
        }
        out.ok_or(Errno::Einval)
    }

    /// `adjmsg`: trim `n` bytes from the head (`n > 0`) or tail (`n < 0`);
    /// false (and nothing trimmed) when the message is shorter.
    pub fn adjmsg(&mut self, n: isize) -> bool {
        let want = n.unsigned_abs();
        if want > self.msgsize() {
            return false;
        }
        if n >= 0 {
            let mut left = want;
            let mut m = Some(&mut *self);
            while let Some(b) = m {
                let k = b.len().min(left);
                b.rptr += k;
                left -= k;
                m = b.cont.as_deref_mut();
            }
        } else {
            let keep = self.msgsize() - want;
            let mut seen = 0;
            let mut m = Some(&mut *self);
            while let Some(b) = m {
                let k = b.len().min(keep - seen);
                b.wptr = b.rptr + k;
                seen += k;
                m = b.cont.as_deref_mut();
            }
        }
        true
    }

    /// `pullupmsg`: make the first `len` bytes (all of them when `None`) of
    /// same-typed blocks contiguous in this block.
    pub fn pullupmsg(&mut self, len: Option<usize>) -> Result<(), Errno> {
        let len = len.unwrap_or(self.msgsize());
        if self.len() >= len {
            return Ok(());
        }
        if self.msgsize() < len {
            return Err(Errno::Einval);
        }
        let bytes = self.to_vec();
        let mut fresh = allocb(&self.pool, len)?;
        fresh.mtype = self.mtype;
        fresh.put_bytes(&bytes[..len]);
        self.adjmsg(len as isize);
        let rest = std::mem::replace(self, fresh);
        let mut tail = Some(rest);
        // Drop the blocks the pull emptied.
        while let Some(mut t) = tail.take() {
            if t.is_empty() {
                tail = t.unlinkb();
            } else {
                tail = Some(t);
                break;
            }
        }
        if let Some(t) = tail {
            self.cont = Some(Box::new(t));
        }
        Ok(())
    }
}
