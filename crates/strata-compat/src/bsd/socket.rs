//! The socket layer's lower half (4.4BSD `kern/uipc_socket2.c`).
//!
//! Protocols append received records to a socket's receive buffer with
//! `sbappendaddr` and wake the reader with `sorwakeup`; the buffer is
//! bounded by `sb_hiwat` bytes of data and `sb_mbmax` mbufs, and a record
//! that does not fit is refused, never queued (seed 004 §4.2.2).

use std::collections::VecDeque;

use crate::errno::Errno;

use super::mbuf::Mbuf;
use super::protosw::SockaddrAt;

/// One record in a receive buffer: where it came from, control, data.
#[derive(Debug)]
pub struct Record {
    /// The sender.
    pub from: SockaddrAt,
    /// Control data (`MT_CONTROL`), if any.
    pub control: Option<Mbuf>,
    /// The data.
    pub m: Mbuf,
}

/// A socket buffer (`struct sockbuf`).
#[derive(Debug)]
pub struct Sockbuf {
    records: VecDeque<Record>,
    /// `sb_cc`: data bytes held.
    pub sb_cc: usize,
    /// `sb_mbcnt`: mbufs held.
    pub sb_mbcnt: usize,
    /// `sb_hiwat`: the most data bytes it may hold.
    pub sb_hiwat: usize,
    /// `sb_mbmax`: the most mbufs it may hold.
    pub sb_mbmax: usize,
}

impl Sockbuf {
    /// An empty buffer with the given limits.
    pub fn new(sb_hiwat: usize, sb_mbmax: usize) -> Sockbuf {
        Sockbuf {
            records: VecDeque::new(),
            sb_cc: 0,
            sb_mbcnt: 0,
            sb_hiwat,
            sb_mbmax,
        }
    }

    /// `sbspace`: data bytes that still fit.
    pub fn sbspace(&self) -> usize {
        if self.sb_mbcnt >= self.sb_mbmax {
            0
        } else {
            self.sb_hiwat.saturating_sub(self.sb_cc)
        }
    }

    fn size(m: &Mbuf, control: Option<&Mbuf>) -> (usize, usize) {
        // One walk over both chains for bytes and mbufs.
        m.iter()
            .chain(control.into_iter().flat_map(Mbuf::iter))
            .fold((0, 0), |(bytes, n), b| (bytes + b.m_len(), n + 1))
    }

    fn room(&self, bytes: usize, mbufs: usize) -> bool {
        bytes <= self.sbspace() && self.sb_mbcnt + mbufs <= self.sb_mbmax
    }

    /// Whether `sbappendaddr` would take a record of `m` and `control`.
    pub fn fits(&self, m: &Mbuf, control: Option<&Mbuf>) -> bool {
        let (bytes, mbufs) = Sockbuf::size(m, control);
        self.room(bytes, mbufs)
    }

    /// `sbappendaddr`: append a record, or refuse it (`ENOBUFS`) when its
    /// data would overflow `sb_hiwat` or its mbufs `sb_mbmax`.
    pub fn sbappendaddr(
        &mut self,
        from: SockaddrAt,
        m: Mbuf,
        control: Option<Mbuf>,
    ) -> Result<(), Errno> {
        let (bytes, mbufs) = Sockbuf::size(&m, control.as_ref());
        if !self.room(bytes, mbufs) {
            return Err(Errno::Enobufs);
        }
        self.sb_cc += bytes;
        self.sb_mbcnt += mbufs;
        self.records.push_back(Record { from, control, m });
        Ok(())
    }

    /// Take the first record (the upper half's `soreceive`).
    pub fn sbdroprecord(&mut self) -> Option<Record> {
        let r = self.records.pop_front()?;
        self.sb_cc -= r.m.m_length() + r.control.as_ref().map_or(0, Mbuf::m_length);
        self.sb_mbcnt -= r.m.count() + r.control.as_ref().map_or(0, Mbuf::count);
        Some(r)
    }

    /// `sbflush`: drop everything.
    pub fn sbflush(&mut self) {
        while self.sbdroprecord().is_some() {}
    }

    /// Records held.
    pub fn records(&self) -> usize {
        self.records.len()
    }
}

/// A socket (`struct socket`), as far as protocols see it.
#[derive(Debug)]
pub struct Socket {
    /// The protocol number of its switch entry (`so_proto`).
    pub proto: u8,
    /// `so_rcv`.
    pub so_rcv: Sockbuf,
    /// `so_error`: an error latched for the user.
    pub so_error: Option<Errno>,
    /// How many times `sorwakeup` was called (readers woken).
    pub rwakeups: u64,
    /// How many times `sowwakeup` was called (writers woken).
    pub wwakeups: u64,
}

/// The default receive buffer: 8 KB of data, 64 mbufs.
pub const SB_HIWAT: usize = 8192;
/// The default mbuf limit of a socket buffer.
pub const SB_MBMAX: usize = 64;

impl Socket {
    /// A socket for protocol `proto`.
    pub fn new(proto: u8) -> Socket {
        Socket {
            proto,
            so_rcv: Sockbuf::new(SB_HIWAT, SB_MBMAX),
            so_error: None,
            rwakeups: 0,
            wwakeups: 0,
        }
    }
}
