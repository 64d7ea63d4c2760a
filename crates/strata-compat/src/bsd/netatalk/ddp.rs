//! DDP, the Datagram Delivery Protocol, as a BSD protocol (4.4BSD
//! `netatalk/ddp_input.c`, `ddp_output.c`, `ddp_usrreq.c`).
//!
//! Input: `pr_input` from the interface pulls the long header up, checks
//! length and checksum, finds the pcb bound to the destination socket and
//! either appends the datagram to that DDP socket or calls the `pr_input` of
//! the protocol the socket belongs to (ATP). Output: `pr_output` (from ATP)
//! or `PRU_SEND` (from a DDP socket) prepends the checksummed header and calls
//! the interface's `if_output`; errors return at once. Bad datagrams are
//! dropped and counted by reason, never trusted.

use crate::appletalk::wire::ddp::{self, Addr, Header, Repr};
use crate::errno::Errno;

use super::super::kernel::BsdKernel;
use super::super::mbuf::{Mbuf, MbufType};
use super::super::protosw::{
    InputArg, OutputArg, PrFlags, Protosw, SockId, SockType, SockaddrAt, Usrreq, UsrreqOk,
};
use super::ATPROTO_DDP;

/// The first dynamically assigned DDP socket.
pub const DDP_DYNAMIC_FIRST: u8 = 128;
/// The last dynamically assigned DDP socket.
pub const DDP_DYNAMIC_LAST: u8 = 254;
/// The most DDP pcbs (sockets) at once.
pub const DDP_MAXPCB: usize = 256;

/// DDP's counters (`ddpstat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DdpStats {
    /// Datagrams received.
    pub ipackets: u64,
    /// Datagrams delivered to a socket or the protocol above.
    pub delivered: u64,
    /// Datagrams sent.
    pub opackets: u64,
    /// Dropped: shorter than a header, or than their length field.
    pub short: u64,
    /// Dropped: a header field out of range.
    pub malformed: u64,
    /// Dropped: bad checksum.
    pub bad_checksum: u64,
    /// Dropped: addressed to another node.
    pub not_for_us: u64,
    /// Dropped: no socket bound to the destination.
    pub no_socket: u64,
    /// Dropped: the socket's receive buffer was full.
    pub sb_full: u64,
    /// Dropped: no mbufs.
    pub nobufs: u64,
}

impl DdpStats {
    /// The counters by name.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("ipackets", self.ipackets),
            ("delivered", self.delivered),
            ("opackets", self.opackets),
            ("short", self.short),
            ("malformed", self.malformed),
            ("bad_checksum", self.bad_checksum),
            ("not_for_us", self.not_for_us),
            ("no_socket", self.no_socket),
            ("sb_full", self.sb_full),
            ("nobufs", self.nobufs),
        ]
    }
}

struct DdpPcb {
    so: SockId,
    port: u8,
    peer: Option<SockaddrAt>,
}

/// DDP's switch entry and its pcbs.
#[derive(Default)]
pub struct Ddp {
    pcbs: Vec<DdpPcb>,
    /// Whether to compute checksums on output (receive always verifies a
    /// non-zero one).
    pub checksum: bool,
    /// The counters.
    pub stats: DdpStats,
}

fn to_sat(a: Addr) -> SockaddrAt {
    SockaddrAt::new(a.net, a.node, a.socket)
}

fn to_addr(a: SockaddrAt) -> Addr {
    Addr::new(a.net, a.node, a.port)
}

impl Ddp {
    /// DDP with output checksums on.
    pub fn new() -> Ddp {
        Ddp {
            pcbs: Vec::new(),
            checksum: true,
            stats: DdpStats::default(),
        }
    }

    fn pcb(&self, so: SockId) -> Option<&DdpPcb> {
        self.pcbs.iter().find(|p| p.so == so)
    }

    fn bind<K: BsdKernel>(&mut self, k: &K, so: SockId, want: u8) -> Result<SockaddrAt, Errno> {
        let idx = self
            .pcbs
            .iter()
            .position(|p| p.so == so)
            .ok_or(Errno::Einval)?;
        if self.pcbs[idx].port != 0 {
            return Err(Errno::Einval);
        }
        let port = if want == 0 {
            (DDP_DYNAMIC_FIRST..=DDP_DYNAMIC_LAST)
                .find(|&p| self.pcbs.iter().all(|q| q.port != p))
                .ok_or(Errno::Eaddrnotavail)?
        } else if self.pcbs.iter().any(|q| q.port == want) {
            return Err(Errno::Eaddrinuse);
        } else {
            want
        };
        self.pcbs[idx].port = port;
        let mut me = k.if_address(0).ok_or(Errno::Eaddrnotavail)?;
        me.port = port;
        Ok(me)
    }

    /// `ddp_output`: prepend the header and hand the datagram to the interface.
    fn output<K: BsdKernel>(
        &mut self,
        k: &mut K,
        m: Mbuf,
        so: SockId,
        dst: SockaddrAt,
        ddp_type: u8,
    ) -> Result<(), Errno> {
        let port = match self.pcb(so).map(|p| p.port) {
            Some(0) => self.bind(k, so, 0)?.port,
            Some(p) => p,
            None => return Err(Errno::Enotconn),
        };
        let ifp = k.if_route(dst).ok_or(Errno::Ehostunreach)?;
        let me = k.if_address(ifp).ok_or(Errno::Ehostunreach)?;
        let src = Addr::new(me.net, me.node, port);
        let repr =
            Repr::new(src, to_addr(dst), ddp_type, m.m_length()).map_err(|_| Errno::Emsgsize)?;
        let hdr = if self.checksum {
            repr.to_bytes_checksummed(m.iter().map(Mbuf::data))
        } else {
            repr.to_bytes()
        }
        .map_err(|_| Errno::Emsgsize)?;
        let mut m = m.m_prepend(ddp::HEADER_LEN)?;
        m.data_mut()[..ddp::HEADER_LEN].copy_from_slice(&hdr);
        self.stats.opackets += 1;
        k.if_output(ifp, m, dst)
    }

    /// `ddp_input`: check, demultiplex and deliver a datagram from `ifp`.
    fn input<K: BsdKernel>(&mut self, k: &mut K, m: Mbuf, ifp: usize) {
        self.stats.ipackets += 1;
        let total = m.m_length();
        if total < ddp::HEADER_LEN {
            self.stats.short += 1;
            return;
        }
        let Ok(mut m) = m.m_pullup(ddp::HEADER_LEN) else {
            self.stats.nobufs += 1;
            return;
        };
        let mut hb = [0u8; ddp::HEADER_LEN];
        hb.copy_from_slice(&m.data()[..ddp::HEADER_LEN]);
        let Ok(h) = Header::new_checked(hb) else {
            self.stats.short += 1;
            return;
        };
        let Ok(repr) = Repr::parse(&h) else {
            self.stats.malformed += 1;
            return;
        };
        if repr.check_datagram(total).is_err() {
            self.stats.short += 1;
            return;
        }
        if total > repr.length {
            // Ethernet padding after the datagram.
            m.m_adj(-((total - repr.length) as isize));
        }
        let data = m.iter().enumerate().map(|(i, b)| {
            if i == 0 {
                &b.data()[ddp::HEADER_LEN..]
            } else {
                b.data()
            }
        });
        if !ddp::verify(&h, data) {
            self.stats.bad_checksum += 1;
            return;
        }
        let me = k.if_address(ifp).unwrap_or_default();
        let for_us = (repr.dst.node == me.node || repr.dst.node == 0xff)
            && (repr.dst.net == me.net || repr.dst.net == 0);
        if !for_us {
            self.stats.not_for_us += 1;
            return;
        }
        let Some(pcb) = self
            .pcbs
            .iter()
            .find(|p| p.port == repr.dst.socket && p.port != 0)
        else {
            self.stats.no_socket += 1;
            return;
        };
        let so = pcb.so;
        m.m_adj(ddp::HEADER_LEN as isize);
        let (src, dst) = (to_sat(repr.src), to_sat(repr.dst));
        self.stats.delivered += 1;
        match k.so_proto(so) {
            Some(ATPROTO_DDP) | None => {
                let control = k
                    .m_get(MbufType::Control)
                    .and_then(|mut c| c.m_append(&[repr.ddp_type]).map(|_| c));
                match control.and_then(|c| k.sbappendaddr(so, src, m, Some(c))) {
                    Ok(()) => k.sorwakeup(so),
                    Err(_) => {
                        self.stats.delivered -= 1;
                        self.stats.sb_full += 1;
                    }
                }
            }
            Some(proto) => k.pr_input(proto, m, InputArg::Ddp { src, dst, so }),
        }
    }
}

impl<K: BsdKernel> Protosw<K> for Ddp {
    fn pr_type(&self) -> SockType {
        SockType::Dgram
    }

    fn pr_protocol(&self) -> u8 {
        ATPROTO_DDP
    }

    fn pr_flags(&self) -> PrFlags {
        PrFlags {
            atomic: true,
            addr: true,
            connrequired: false,
        }
    }

    fn pr_name(&self) -> &'static str {
        "ddp"
    }

    fn pr_input(&mut self, k: &mut K, m: Mbuf, arg: InputArg) {
        if let InputArg::Interface { ifp } = arg {
            self.input(k, m, ifp);
        }
    }

    fn pr_output(&mut self, k: &mut K, m: Mbuf, arg: OutputArg) -> Result<(), Errno> {
        self.output(k, m, arg.so, arg.dst, arg.ddp_type)
    }

    fn pr_counters(&self) -> Vec<(&'static str, u64)> {
        self.stats.named()
    }

    fn pr_usrreq(&mut self, k: &mut K, so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        match req {
            Usrreq::Attach => {
                if self.pcb(so).is_some() {
                    return Err(Errno::Einval);
                }
                if self.pcbs.len() >= DDP_MAXPCB {
                    return Err(Errno::Enobufs);
                }
                self.pcbs.push(DdpPcb {
                    so,
                    port: 0,
                    peer: None,
                });
                Ok(UsrreqOk::Done)
            }
            Usrreq::Detach | Usrreq::Abort => {
                self.pcbs.retain(|p| p.so != so);
                Ok(UsrreqOk::Done)
            }
            Usrreq::Bind(a) => self.bind(k, so, a.port).map(UsrreqOk::Addr),
            Usrreq::Connect(a) => {
                let p = self
                    .pcbs
                    .iter_mut()
                    .find(|p| p.so == so)
                    .ok_or(Errno::Einval)?;
                p.peer = Some(a);
                Ok(UsrreqOk::Done)
            }
            Usrreq::Disconnect => {
                let p = self
                    .pcbs
                    .iter_mut()
                    .find(|p| p.so == so)
                    .ok_or(Errno::Einval)?;
                p.peer.take().map(|_| UsrreqOk::Done).ok_or(Errno::Enotconn)
            }
            Usrreq::Send { m, nam, control } => {
                let dst = nam
                    .or(self.pcb(so).and_then(|p| p.peer))
                    .ok_or(Errno::Enotconn)?;
                // A raw DDP socket names its DDP type in the control data.
                let ddp_type = control
                    .as_ref()
                    .and_then(|c| c.data().first().copied())
                    .unwrap_or(0);
                self.output(k, m, so, dst, ddp_type)?;
                Ok(UsrreqOk::Done)
            }
            Usrreq::Rcvd | Usrreq::Shutdown => Ok(UsrreqOk::Done),
            Usrreq::Sockaddr => {
                let port = self.pcb(so).ok_or(Errno::Einval)?.port;
                let mut me = k.if_address(0).ok_or(Errno::Eaddrnotavail)?;
                me.port = port;
                Ok(UsrreqOk::Addr(me))
            }
            Usrreq::Peeraddr => self
                .pcb(so)
                .and_then(|p| p.peer)
                .map(UsrreqOk::Addr)
                .ok_or(Errno::Enotconn),
        }
    }
}
