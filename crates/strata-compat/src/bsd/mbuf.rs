//! mbufs: BSD's packet buffers (4.4BSD `sys/mbuf.h`, `kern/uipc_mbuf.c`).
//!
//! A packet is a chain of mbufs linked by `m_next`. A small mbuf holds up to
//! [`MLEN`] bytes ([`MHLEN`] when it carries the packet header); larger data
//! lives in a [`MCLBYTES`] cluster shared by reference count, so `m_copym`
//! copies small mbufs and shares clusters. Storage comes from an
//! [`MbufStorage`]: the native BSD subsystem's bounded, counted pool
//! ([`NativeMbufs`]), or — inside an encapsulation module — the host's
//! buffers (seed 004 §4.2.1). Every mbuf returns its storage to the pool when
//! dropped, so the counts are exact.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::errno::Errno;
use crate::kmem::Block;

/// Bytes of data in a small mbuf (4.4BSD: `MSIZE` 128 less the header).
pub const MLEN: usize = 108;
/// Bytes of data in a small mbuf that carries the packet header.
pub const MHLEN: usize = 100;
/// Bytes in a cluster.
pub const MCLBYTES: usize = 2048;
/// Below this many bytes, `m_copym` copies instead of sharing a cluster.
pub const MINCLSIZE: usize = MHLEN + MLEN + 1;

/// What an mbuf's data is (`m_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MbufType {
    /// `MT_DATA`: data.
    Data,
    /// `MT_HEADER`: a packet header prepended by a protocol.
    Header,
    /// `MT_SONAME`: a socket address.
    Soname,
    /// `MT_CONTROL`: control (ancillary) data.
    Control,
}

/// Which storage an mbuf has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MbufKind {
    /// The mbuf's own small buffer.
    Small,
    /// An external cluster (`M_EXT`).
    Cluster,
}

impl MbufKind {
    /// The storage size of this kind.
    pub fn size(self) -> usize {
        match self {
            MbufKind::Small => MLEN,
            MbufKind::Cluster => MCLBYTES,
        }
    }
}

/// The packet header (`m_pkthdr`) of the first mbuf of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PktHdr {
    /// The interface a received packet came in on (`rcvif`).
    pub rcvif: Option<usize>,
}

/// Counts of a pool, as `netstat -m` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MbufStats {
    /// Small mbufs allocated and not yet freed.
    pub small_in_use: usize,
    /// Clusters allocated and not yet freed.
    pub clusters_in_use: usize,
    /// Small mbufs allocated in all.
    pub small_allocs: u64,
    /// Clusters allocated in all.
    pub cluster_allocs: u64,
    /// Allocations refused because the pool was at its limit (`m_drops`).
    pub drops: u64,
}

/// Where mbuf storage comes from and returns to.
pub trait MbufStorage: Send + Sync + fmt::Debug {
    /// A block for one mbuf of `kind`, or `None` when the pool is exhausted.
    fn alloc(&self, kind: MbufKind) -> Option<Block>;
    /// Count one more mbuf of `kind` whose storage already exists (a shared
    /// cluster, or a host buffer wrapped without copying); `false` when the
    /// pool is at its limit.
    fn charge(&self, kind: MbufKind) -> bool;
    /// An mbuf of `kind` was freed.
    fn free(&self, kind: MbufKind);
    /// The pool's counts.
    fn stats(&self) -> MbufStats;
    /// Count one more mbuf of `kind` whose storage, and its count, move
    /// from a buffer of the host pool this storage is charged to, which is
    /// being freed: in use does not grow. Storage charged to no host pool
    /// charges as usual.
    fn adopt(&self, kind: MbufKind) -> bool {
        self.charge(kind)
    }
    /// Whether small mbufs' storage is shared by reference count too (as
    /// every data block is in STREAMS), so `m_copym` shares small mbufs as
    /// it shares clusters instead of copying them. BSD's own pool: no.
    fn shares_small(&self) -> bool {
        false
    }
}

/// A handle on a pool; every mbuf holds one.
pub type MbufPool = Arc<dyn MbufStorage>;

/// Allocation counts a pool keeps (shared by the native pool and the
/// encapsulated ones).
#[derive(Debug, Default)]
pub struct NativeCounts {
    // Allocations and frees, each one atomic add: in use is their difference.
    small_allocs: AtomicU64,
    small_frees: AtomicU64,
    cluster_allocs: AtomicU64,
    cluster_frees: AtomicU64,
    drops: AtomicU64,
}

impl NativeCounts {
    fn of(&self, kind: MbufKind) -> (&AtomicU64, &AtomicU64) {
        match kind {
            MbufKind::Small => (&self.small_allocs, &self.small_frees),
            MbufKind::Cluster => (&self.cluster_allocs, &self.cluster_frees),
        }
    }

    /// Count an allocation of `kind`.
    pub fn allocated(&self, kind: MbufKind) {
        self.of(kind).0.fetch_add(1, Relaxed);
    }

    /// Count a free of `kind`.
    pub fn freed(&self, kind: MbufKind) {
        self.of(kind).1.fetch_add(1, Relaxed);
    }

    /// Count a refused allocation.
    pub fn refused(&self) {
        self.drops.fetch_add(1, Relaxed);
    }

    /// In use of `kind`.
    pub fn in_use(&self, kind: MbufKind) -> usize {
        let (a, f) = self.of(kind);
        a.load(Relaxed).saturating_sub(f.load(Relaxed)) as usize
    }

    /// The counts.
    pub fn stats(&self) -> MbufStats {
        MbufStats {
            small_in_use: self.in_use(MbufKind::Small),
            clusters_in_use: self.in_use(MbufKind::Cluster),
            small_allocs: self.small_allocs.load(Relaxed),
            cluster_allocs: self.cluster_allocs.load(Relaxed),
            drops: self.drops.load(Relaxed),
        }
    }
}

/// The native BSD pool: bounded (`nmbufs`, `nmbclusters`) and counted.
#[derive(Debug)]
pub struct NativeMbufs {
    max_small: usize,
    max_clusters: usize,
    counts: NativeCounts,
}

impl NativeMbufs {
    /// A pool of at most `max_small` small mbufs and `max_clusters` clusters.
    pub fn pool(max_small: usize, max_clusters: usize) -> MbufPool {
        Arc::new(NativeMbufs {
            max_small,
            max_clusters,
            counts: NativeCounts::default(),
        })
    }
}

impl MbufStorage for NativeMbufs {
    fn alloc(&self, kind: MbufKind) -> Option<Block> {
        self.charge(kind).then(|| Block::new(kind.size()))
    }

    fn charge(&self, kind: MbufKind) -> bool {
        let max = match kind {
            MbufKind::Small => self.max_small,
            MbufKind::Cluster => self.max_clusters,
        };
        if self.counts.in_use(kind) >= max {
            self.counts.refused();
            return false;
        }
        self.counts.allocated(kind);
        true
    }

    fn free(&self, kind: MbufKind) {
        self.counts.freed(kind);
    }

    fn stats(&self) -> MbufStats {
        self.counts.stats()
    }
}

/// One mbuf and, through `m_next`, the rest of its chain.
pub struct Mbuf {
    /// `m_type`.
    pub ty: MbufType,
    kind: MbufKind,
    block: Block,
    off: usize,
    len: usize,
    /// `m_pkthdr`, present on the first mbuf of a packet (`M_PKTHDR`).
    pub pkthdr: Option<PktHdr>,
    next: Option<Box<Mbuf>>,
    pool: MbufPool,
}

impl fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mbuf")
            .field("ty", &self.ty)
            .field("kind", &self.kind)
            .field("len", &self.len)
            .field("chain_len", &self.m_length())
            .finish()
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        self.pool.free(self.kind);
        // Unlink iteratively so a long chain cannot overflow the stack.
        let mut next = self.next.take();
        while let Some(mut m) = next {
            next = m.next.take();
        }
    }
}

/// `m_get`: a small mbuf of type `ty`.
pub fn m_get(pool: &MbufPool, ty: MbufType) -> Result<Mbuf, Errno> {
    let block = pool.alloc(MbufKind::Small).ok_or(Errno::Enobufs)?;
    Ok(Mbuf::with(pool, ty, MbufKind::Small, block, None))
}

/// `m_gethdr`: a small mbuf that carries the packet header.
pub fn m_gethdr(pool: &MbufPool, ty: MbufType) -> Result<Mbuf, Errno> {
    let block = pool.alloc(MbufKind::Small).ok_or(Errno::Enobufs)?;
    Ok(Mbuf::with(
        pool,
        ty,
        MbufKind::Small,
        block,
        Some(PktHdr::default()),
    ))
}

/// `m_getcl`: an mbuf with a cluster, with a packet header if `pkthdr`.
pub fn m_getcl(pool: &MbufPool, ty: MbufType, pkthdr: bool) -> Result<Mbuf, Errno> {
    let block = pool.alloc(MbufKind::Cluster).ok_or(Errno::Enobufs)?;
    let hdr = pkthdr.then(PktHdr::default);
    Ok(Mbuf::with(pool, ty, MbufKind::Cluster, block, hdr))
}

/// `m_devget`: copy a received frame into a fresh chain (clusters when it
/// needs more than a small mbuf), recording the interface.
pub fn m_devget(pool: &MbufPool, bytes: &[u8], rcvif: Option<usize>) -> Result<Mbuf, Errno> {
    let mut m = if bytes.len() > MHLEN {
        m_getcl(pool, MbufType::Data, true)?
    } else {
        m_gethdr(pool, MbufType::Data)?
    };
    m.pkthdr = Some(PktHdr { rcvif });
    m.m_append(bytes)?;
    Ok(m)
}

impl Mbuf {
    fn with(
        pool: &MbufPool,
        ty: MbufType,
        kind: MbufKind,
        block: Block,
        pkthdr: Option<PktHdr>,
    ) -> Mbuf {
        Mbuf {
            ty,
            kind,
            block,
            off: 0,
            len: 0,
            pkthdr,
            next: None,
            pool: pool.clone(),
        }
    }

    /// An mbuf around storage the host already holds (the encapsulation
    /// modules' zero-copy path): `len` bytes of `block` from `off`. The pool
    /// is charged for it as an mbuf of `kind`, and credited when it is freed.
    pub fn wrap(
        pool: &MbufPool,
        kind: MbufKind,
        block: Block,
        off: usize,
        len: usize,
    ) -> Result<Mbuf, Errno> {
        Mbuf::around(pool.charge(kind), pool, kind, block, off, len)
    }

    /// An mbuf around `len` bytes of `block` from `off`, if `counted`.
    fn around(
        counted: bool,
        pool: &MbufPool,
        kind: MbufKind,
        block: Block,
        off: usize,
        len: usize,
    ) -> Result<Mbuf, Errno> {
        if !counted {
            return Err(Errno::Enobufs);
        }
        let off = off.min(block.size());
        let len = len.min(block.size() - off);
        Ok(Mbuf {
            ty: MbufType::Data,
            kind,
            block,
            off,
            len,
            pkthdr: None,
            next: None,
            pool: pool.clone(),
        })
    }

    /// An mbuf around storage the host already holds, whose count moves
    /// from a host buffer being freed ([`MbufStorage::adopt`]): the
    /// encapsulation modules' hand-over of a received buffer.
    pub fn adopt(
        pool: &MbufPool,
        kind: MbufKind,
        block: Block,
        off: usize,
        len: usize,
    ) -> Result<Mbuf, Errno> {
        Mbuf::around(pool.adopt(kind), pool, kind, block, off, len)
    }

    /// This mbuf's storage and the window of data in it, `(block, off, len)`:
    /// the zero-copy path out (the caller clones the block, sharing it).
    pub fn storage(&self) -> (&Block, usize, usize) {
        (&self.block, self.off, self.len)
    }

    /// The pool this mbuf came from.
    pub fn pool(&self) -> &MbufPool {
        &self.pool
    }

    /// Which storage it has (`M_EXT` or not).
    pub fn kind(&self) -> MbufKind {
        self.kind
    }

    /// The storage block (tests check sharing with it).
    pub fn block(&self) -> &Block {
        &self.block
    }

    /// `m_len`: data bytes in this mbuf.
    pub fn m_len(&self) -> usize {
        self.len
    }

    fn cap(&self) -> usize {
        match (self.kind, self.pkthdr.is_some()) {
            // A wrapped host block may be smaller than a small mbuf.
            (MbufKind::Small, true) => MHLEN.min(self.block.size()),
            _ => self.block.size(),
        }
    }

    /// Leave `n` bytes of room in front of an empty mbuf's data, for
    /// headers to come (what BSD protocols do with `m_data += max_linkhdr`).
    pub fn reserve_head(&mut self, n: usize) {
        if self.len == 0 {
            self.off = n.min(self.cap());
        }
    }

    /// `M_LEADINGSPACE`: room before the data (none in a shared cluster).
    pub fn leading_space(&self) -> usize {
        if self.block.refs() > 1 { 0 } else { self.off }
    }

    /// `M_TRAILINGSPACE`: room after the data (none in a shared cluster).
    pub fn trailing_space(&self) -> usize {
        if self.block.refs() > 1 {
            0
        } else {
            self.cap().saturating_sub(self.off + self.len)
        }
    }

    /// `mtod`: this mbuf's data.
    pub fn data(&self) -> &[u8] {
        &self.block.bytes()[self.off..self.off + self.len]
    }

    /// This mbuf's data for writing (copied first if the cluster is shared).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (off, len) = (self.off, self.len);
        &mut self.block.make_mut()[off..off + len]
    }

    /// `m_pkthdr.len`: bytes in the whole chain.
    pub fn m_length(&self) -> usize {
        self.iter().map(|m| m.len).sum()
    }

    /// The next mbuf of the chain (`m_next`).
    pub fn next(&self) -> Option<&Mbuf> {
        self.next.as_deref()
    }

    /// The mbufs of the chain, this one first.
    pub fn iter(&self) -> impl Iterator<Item = &Mbuf> {
        std::iter::successors(Some(self), |m| m.next.as_deref())
    }

    /// How many mbufs the chain has.
    pub fn count(&self) -> usize {
        self.iter().count()
    }

    /// The chain's bytes, copied out (for delivery to a user, and tests).
    pub fn to_vec(&self) -> Vec<u8> {
        if self.next.is_none() {
            return self.data().to_vec();
        }
        let mut v = Vec::with_capacity(self.m_length());
        for m in self.iter() {
            v.extend_from_slice(m.data());
        }
        v
    }

    /// `m_free`: free this mbuf, returning the rest of its chain.
    pub fn m_free(mut self) -> Option<Mbuf> {
        self.next.take().map(|b| *b)
    }

    /// `m_freem`: free the whole chain.
    pub fn m_freem(self) {}

    /// `m_cat`: link `tail` after the last mbuf of this chain.
    pub fn m_cat(&mut self, tail: Mbuf) {
        let mut m = self;
        while m.next.is_some() {
            m = m.next.as_deref_mut().expect("checked");
        }
        m.next = Some(Box::new(tail));
    }

    /// Append `bytes` at the end of the chain, filling trailing space first
    /// and then adding mbufs (clusters when the rest needs more than `MLEN`).
    pub fn m_append(&mut self, mut bytes: &[u8]) -> Result<(), Errno> {
        // The common case first: one mbuf, unshared, with the room.
        if self.next.is_none() {
            let end = self.off + self.len;
            let cap = self.cap();
            if let Some(buf) = self.block.bytes_mut().filter(|_| end + bytes.len() <= cap) {
                buf[end..end + bytes.len()].copy_from_slice(bytes);
                self.len += bytes.len();
                return Ok(());
            }
        }
        let mut m = self;
        while m.next.is_some() {
            m = m.next.as_deref_mut().expect("checked");
        }
        loop {
            let n = m.trailing_space().min(bytes.len());
            if n > 0 {
                let end = m.off + m.len;
                m.block.make_mut()[end..end + n].copy_from_slice(&bytes[..n]);
                m.len += n;
                bytes = &bytes[n..];
            }
            if bytes.is_empty() {
                return Ok(());
            }
            let next = if bytes.len() > MLEN {
                m_getcl(&m.pool, m.ty, false)?
            } else {
                m_get(&m.pool, m.ty)?
            };
            m.next = Some(Box::new(next));
            m = m.next.as_deref_mut().expect("just set");
        }
    }

    /// `bytes` written in front of the data in place, when the mbuf has
    /// that much leading space and its storage is not shared (`M_PREPEND`
    /// and a copy in one); false, and nothing done, otherwise.
    pub fn prepend_in_place(&mut self, bytes: &[u8]) -> bool {
        let n = bytes.len();
        if self.off < n {
            return false;
        }
        let at = self.off - n;
        let Some(buf) = self.block.bytes_mut() else {
            return false;
        };
        buf[at..at + n].copy_from_slice(bytes);
        self.off = at;
        self.len += n;
        true
    }

    /// `m_prepend`: room for `len` bytes in front of the data, in place when
    /// there is leading space, else in a new mbuf placed at the end of its
    /// buffer (`MH_ALIGN`) that takes over the packet header.
    pub fn m_prepend(mut self, len: usize) -> Result<Mbuf, Errno> {
        if self.leading_space() >= len {
            self.off -= len;
            self.len += len;
            return Ok(self);
        }
        let mut m = if len > MHLEN {
            m_getcl(&self.pool, MbufType::Header, false)?
        } else {
            m_get(&self.pool, MbufType::Header)?
        };
        m.pkthdr = self.pkthdr.take();
        let cap = m.cap();
        if len > cap {
            return Err(Errno::Emsgsize);
        }
        m.off = cap - len;
        m.len = len;
        m.next = Some(Box::new(self));
        Ok(m)
    }

    /// `m_adj`: trim `n` bytes from the head (`n > 0`) or tail (`n < 0`).
    pub fn m_adj(&mut self, n: isize) {
        if n >= 0 {
            let mut left = n as usize;
            let mut m = Some(&mut *self);
            while let Some(mb) = m {
                let k = mb.len.min(left);
                mb.off += k;
                mb.len -= k;
                left -= k;
                if left == 0 {
                    break;
                }
                m = mb.next.as_deref_mut();
            }
        } else {
            let total = self.m_length();
            let keep = total.saturating_sub(n.unsigned_abs());
            let mut seen = 0;
            let mut m = Some(&mut *self);
            while let Some(mb) = m {
                mb.len = mb.len.min(keep - seen.min(keep));
                seen += mb.len;
                m = mb.next.as_deref_mut();
            }
        }
    }

    /// `m_pullup`: make the first `len` bytes contiguous in the first mbuf.
    /// Fails (freeing the chain, as BSD does) when the chain is shorter or
    /// `len` exceeds `MHLEN`.
    pub fn m_pullup(self, len: usize) -> Result<Mbuf, Errno> {
        if self.len >= len {
            return Ok(self);
        }
        if len > MHLEN || self.m_length() < len {
            return Err(Errno::Einval);
        }
        let mut head = m_get(&self.pool, self.ty)?;
        let mut rest = self;
        head.pkthdr = rest.pkthdr.take();
        let mut pulled = vec![0u8; len];
        rest.m_copydata(0, len, &mut pulled);
        rest.m_adj(len as isize);
        head.m_append(&pulled)?;
        // Drop mbufs the pull emptied, keep the rest behind the new head.
        let mut tail = Some(rest);
        while let Some(m) = tail.take() {
            if m.len == 0 && m.next.is_some() {
                tail = m.m_free();
            } else if m.len == 0 {
                break;
            } else {
                tail = Some(m);
                break;
            }
        }
        if let Some(t) = tail {
            head.next = Some(Box::new(t));
        }
        Ok(head)
    }

    /// `m_copydata`: copy `len` bytes from offset `off` into `out`
    /// (as many as the chain has).
    pub fn m_copydata(&self, mut off: usize, len: usize, out: &mut [u8]) -> usize {
        let mut done = 0;
        let want = len.min(out.len());
        for m in self.iter() {
            if done == want {
                break;
            }
            if off >= m.len {
                off -= m.len;
                continue;
            }
            let k = (m.len - off).min(want - done);
            out[done..done + k].copy_from_slice(&m.data()[off..off + k]);
            done += k;
            off = 0;
        }
        done
    }

    /// `m_copym`: a copy of `len` bytes from `off` (`None`: to the end).
    /// Small mbufs are copied; clusters are shared by reference count (and
    /// small mbufs too where the pool's storage is shared that way, see
    /// [`MbufStorage::shares_small`]). A shared piece is never written in
    /// place: it has no leading or trailing space, and `data_mut` copies it.
    pub fn m_copym(&self, mut off: usize, len: Option<usize>) -> Result<Mbuf, Errno> {
        if self.next.is_none()
            && off == 0
            && len.is_none_or(|l| l >= self.len)
            && self.len > 0
            && (self.kind == MbufKind::Cluster || self.pool.shares_small())
        {
            // The whole of one shared mbuf (a datagram kept for
            // retransmission): one reference, no chain to build.
            let mut n = Mbuf::wrap(
                &self.pool,
                self.kind,
                self.block.clone(),
                self.off,
                self.len,
            )?;
            n.ty = self.ty;
            n.pkthdr = self.pkthdr;
            return Ok(n);
        }
        let mut left = len.unwrap_or(usize::MAX);
        let mut out: Option<Mbuf> = None;
        for m in self.iter() {
            if left == 0 {
                break;
            }
            if off >= m.len {
                off -= m.len;
                continue;
            }
            let k = (m.len - off).min(left);
            let piece = if m.kind == MbufKind::Cluster || m.pool.shares_small() {
                let mut n = Mbuf::wrap(&m.pool, m.kind, m.block.clone(), m.off + off, k)?;
                n.ty = m.ty;
                n
            } else {
                let mut n = m_get(&m.pool, m.ty)?;
                n.m_append(&m.data()[off..off + k])?;
                n
            };
            match out.as_mut() {
                None => out = Some(piece),
                Some(o) => o.m_cat(piece),
            }
            left -= k;
            off = 0;
        }
        match out {
            Some(mut o) => {
                o.pkthdr = self.pkthdr;
                Ok(o)
            }
            None => {
                let mut o = m_gethdr(&self.pool, self.ty)?;
                o.pkthdr = self.pkthdr;
                Ok(o)
            }
        }
    }
}
