//! mbufs encapsulated within STREAMS mblks (seed 004 §4.2.1, Figure 3).
//!
//! Inside the BSD-in-STREAMS module every mbuf's storage is charged to the
//! STREAMS data block pool ([`MblkMbufs`]): an encapsulated mbuf *is* a data
//! block as far as the host is concerned. Conversion either way moves no
//! bytes: an mbuf becomes an `esballoc`ed block over the same storage
//! ([`to_mblk`]), and a message block becomes an mbuf wrapped around its data
//! block ([`to_mbuf`]) — only pointers (offsets) are set.
//!
//! The consuming forms ([`into_mbuf`], [`into_mblk`], [`into_mblk_split`])
//! hand the buffer over: the old buffer is freed as the new one is made
//! over its storage, so between a data block pool and its own encapsulated
//! mbufs the count moves with it (no limit check, nothing grows) — what
//! the module does with every buffer it is given.

use std::sync::Arc;

use crate::bsd::mbuf::{MLEN, Mbuf, MbufKind, MbufPool, MbufStats, MbufStorage, PktHdr};
use crate::errno::Errno;
use crate::kmem::Block;
use crate::streams::mblk::{DblkPool, Mblk, MsgType, esballoc, esballoc_moved};

/// mbuf storage charged to a STREAMS data block pool.
///
/// Counted once: the data block pool keeps the encapsulated mbufs' counts
/// by kind ([`crate::streams::mblk::Dblks::mbufs`]) and adds them to its
/// blocks in use, so an encapsulated mbuf costs one atomic add to allocate
/// and one to free, as a native one does (counting it as an mbuf and again
/// as a block cost two of each, ≈ 20 % of an allocation). The counts are
/// the pool's: every module encapsulating mbufs in the same data block pool
/// shares them.
#[derive(Debug)]
pub struct MblkMbufs {
    dblks: DblkPool,
}

impl MblkMbufs {
    /// A pool of mbufs that are data blocks of `dblks`.
    pub fn pool(dblks: &DblkPool) -> MbufPool {
        Arc::new(MblkMbufs {
            dblks: dblks.clone(),
        })
    }
}

impl MbufStorage for MblkMbufs {
    fn alloc(&self, kind: MbufKind) -> Option<Block> {
        self.charge(kind).then(|| Block::new(kind.size()))
    }

    fn charge(&self, kind: MbufKind) -> bool {
        self.dblks.charge_mbuf(kind)
    }

    fn adopt(&self, kind: MbufKind) -> bool {
        // The storage was a data block of this pool, being freed: the count
        // moves from the blocks to the mbufs, nothing grows.
        self.dblks.mbufs.allocated(kind);
        true
    }

    fn free(&self, kind: MbufKind) {
        self.dblks.mbufs.freed(kind);
    }

    fn stats(&self) -> MbufStats {
        self.dblks.mbufs.stats()
    }

    fn shares_small(&self) -> bool {
        // Every data block is shared by reference count (`dupb`).
        true
    }
}

/// The mbuf chain as a message of `mtype` over the same storage (no copy).
pub fn to_mblk(dblks: &DblkPool, m: &Mbuf, mtype: MsgType) -> Result<Mblk, Errno> {
    let mut out: Option<Mblk> = None;
    for b in m.iter() {
        let (block, off, len) = b.storage();
        let mut mp = esballoc(dblks, block.clone(), off, len)?;
        mp.mtype = mtype;
        match out.as_mut() {
            None => out = Some(mp),
            Some(o) => o.linkb(mp),
        }
    }
    out.ok_or(Errno::Einval)
}

/// The chain as a message whose first block is the first `n` bytes of its
/// first mbuf, of type `first` (a TPI primitive the module wrote in the
/// mbuf's leading space), and the rest `M_DATA` — two blocks over one data
/// block, no copy.
pub fn to_mblk_split(dblks: &DblkPool, m: &Mbuf, n: usize, first: MsgType) -> Result<Mblk, Errno> {
    let (block, off, len) = m.storage();
    if n > len {
        return Err(Errno::Einval);
    }
    let mut out = esballoc(dblks, block.clone(), off, n)?;
    out.mtype = first;
    if len > n {
        out.linkb(esballoc(dblks, block.clone(), off + n, len - n)?);
    }
    if let Some(rest) = m.next() {
        out.linkb(to_mblk(dblks, rest, MsgType::Data)?);
    }
    Ok(out)
}

/// The message's blocks (from `mp` on) as an mbuf chain over the same
/// storage (no copy), with a packet header.
pub fn to_mbuf(pool: &MbufPool, mp: &Mblk) -> Result<Mbuf, Errno> {
    let mut out: Option<Mbuf> = None;
    for b in mp.iter() {
        let (block, r, w) = b.storage();
        let m = Mbuf::wrap(pool, kind_of(block.size()), block.clone(), r, w - r)?;
        match out.as_mut() {
            None => out = Some(m),
            Some(o) => o.m_cat(m),
        }
    }
    let mut m = match out {
        Some(m) => m,
        None => crate::bsd::mbuf::m_gethdr(pool, crate::bsd::MbufType::Data)?,
    };
    m.pkthdr = Some(PktHdr::default());
    Ok(m)
}

/// Kind of mbuf a host block of `size` bytes stands for.
fn kind_of(size: usize) -> MbufKind {
    if size > MLEN {
        MbufKind::Cluster
    } else {
        MbufKind::Small
    }
}

/// The message as an mbuf chain with a packet header, consuming it: the
/// received buffer handed over to the protocol. Each block's storage is
/// shared by an mbuf of `mbufs` (which must be [`MblkMbufs::pool`] of
/// `dblks`) and the block freed; a block of `dblks` moves its count to the
/// mbufs (no limit check: nothing grows), one of another pool is charged
/// as [`to_mbuf`] does.
pub fn into_mbuf(mbufs: &MbufPool, dblks: &DblkPool, mp: Mblk) -> Result<Mbuf, Errno> {
    if mp.cont().is_none() {
        // One block (a datagram as received): no chain to build.
        let (block, r, w) = mp.storage();
        let kind = kind_of(block.size());
        let mut m = if Arc::ptr_eq(mp.pool(), dblks) {
            Mbuf::adopt(mbufs, kind, block.clone(), r, w - r)?
        } else {
            Mbuf::wrap(mbufs, kind, block.clone(), r, w - r)?
        };
        drop(mp);
        m.pkthdr = Some(PktHdr::default());
        return Ok(m);
    }
    let mut out: Option<Mbuf> = None;
    for b in mp.iter() {
        let (block, r, w) = b.storage();
        let kind = kind_of(block.size());
        let m = if Arc::ptr_eq(b.pool(), dblks) {
            Mbuf::adopt(mbufs, kind, block.clone(), r, w - r)?
        } else {
            Mbuf::wrap(mbufs, kind, block.clone(), r, w - r)?
        };
        match out.as_mut() {
            None => out = Some(m),
            Some(o) => o.m_cat(m),
        }
    }
    drop(mp);
    let mut m = match out {
        Some(m) => m,
        None => crate::bsd::mbuf::m_gethdr(mbufs, crate::bsd::MbufType::Data)?,
    };
    m.pkthdr = Some(PktHdr::default());
    Ok(m)
}

/// A block of `dblks` reading `len` bytes from `off` of mbuf `m`'s storage,
/// which is about to be freed: its count moves when `m` is an mbuf of
/// `mbufs` ([`MblkMbufs::pool`] of `dblks`), else the block is charged.
fn hand_over(
    mbufs: &MbufPool,
    dblks: &DblkPool,
    m: &Mbuf,
    off: usize,
    len: usize,
) -> Result<Mblk, Errno> {
    let block = m.block().clone();
    if Arc::ptr_eq(m.pool(), mbufs) {
        Ok(esballoc_moved(dblks, block, off, len))
    } else {
        esballoc(dblks, block, off, len)
    }
}

/// The chain as a message of `mtype`, consuming it: each mbuf's storage is
/// handed over to a block and the mbuf freed (see [`into_mbuf`] for the
/// counts).
pub fn into_mblk(
    mbufs: &MbufPool,
    dblks: &DblkPool,
    m: Mbuf,
    mtype: MsgType,
) -> Result<Mblk, Errno> {
    if m.next().is_none() {
        // One mbuf (a control record, a small datagram): no chain to build.
        let (_, off, len) = m.storage();
        let mut mp = hand_over(mbufs, dblks, &m, off, len)?;
        mp.mtype = mtype;
        return Ok(mp);
    }
    let mut out: Option<Mblk> = None;
    for b in m.iter() {
        let (_, off, len) = b.storage();
        let mut mp = hand_over(mbufs, dblks, b, off, len)?;
        mp.mtype = mtype;
        match out.as_mut() {
            None => out = Some(mp),
            Some(o) => o.linkb(mp),
        }
    }
    out.ok_or(Errno::Einval)
}

/// [`to_mblk_split`], consuming the chain: the first mbuf's storage is
/// handed over to the primitive's block and shared by the data block
/// after it (one new block), the rest handed over.
pub fn into_mblk_split(
    mbufs: &MbufPool,
    dblks: &DblkPool,
    m: Mbuf,
    n: usize,
    first: MsgType,
) -> Result<Mblk, Errno> {
    let (block, off, len) = m.storage();
    if n > len {
        return Err(Errno::Einval);
    }
    let mut out = hand_over(mbufs, dblks, &m, off, n)?;
    out.mtype = first;
    if len > n {
        out.linkb(esballoc(dblks, block.clone(), off + n, len - n)?);
    }
    if let Some(rest) = m.next() {
        let mut rest_mp: Option<Mblk> = None;
        for b in rest.iter() {
            let (_, off, len) = b.storage();
            let mp = hand_over(mbufs, dblks, b, off, len)?;
            match rest_mp.as_mut() {
                None => rest_mp = Some(mp),
                Some(o) => o.linkb(mp),
            }
        }
        if let Some(r) = rest_mp {
            out.linkb(r);
        }
    }
    Ok(out)
}
