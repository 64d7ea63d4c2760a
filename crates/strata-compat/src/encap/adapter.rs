//! A subsystem adapter (seed 004 §6.3, Figure 9a; the authors' earlier
//! approach): protocols stay in their native subsystems and the subsystems
//! are joined at one boundary.
//!
//! Here BSD-native ATP, in a native [`Bsd`](crate::bsd::Bsd) subsystem,
//! runs over STREAMS-native DDP in native [`Stream`]s. The adapter is one
//! BSD switch entry standing where DDP would be: above it, BSD's interface
//! (`pr_output`, `pr_usrreq`, `pr_input` of the protocol above); below it,
//! one stream per socket, head / STREAMS DDP / device, run by its own
//! scheduler. Crossing the boundary is the only translation: an mbuf chain
//! becomes `T_UNITDATA_REQ` at the stream head (sharing its storage), a
//! `T_UNITDATA_IND` at the head becomes `pr_input` of ATP, a datagram the
//! stream's device sends becomes `if_output`, and a frame the interface
//! received becomes device input of the stream bound to its destination
//! socket (the demultiplexing a STREAMS multiplexing driver would do).
//! Nothing is emulated: each protocol sees only its own subsystem.

use crate::bsd::kernel::BsdKernel;
use crate::bsd::mbuf::{Mbuf, MbufType};
use crate::bsd::netatalk::ATPROTO_DDP;
use crate::bsd::protosw::{
    InputArg, OutputArg, PrFlags, Protosw, SockId, SockType, SockaddrAt, Usrreq, UsrreqOk,
};
use crate::errno::Errno;
use crate::streams::Stream;
use crate::streams::atalk::ddp::Ddp;
use crate::streams::mblk::{DblkPool, MsgType};
use crate::streams::tpi::{TAddr, Tpi};

use super::mbuf_mblk::{to_mblk, to_mbuf};

/// The adapter's counters (boundary crossings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdapterStats {
    /// Packets passed down into a stream.
    pub down: u64,
    /// Packets passed up out of a stream.
    pub up: u64,
    /// Frames for no stream, dropped.
    pub no_stream: u64,
    /// Errors the streams reported (`T_UDERROR_IND`, `T_ERROR_ACK`).
    pub stream_errors: u64,
}

/// BSD above, STREAMS DDP below: the adapter's switch entry.
pub struct StreamsDdpAdapter {
    dblks: DblkPool,
    streams: Vec<(SockId, u8, Stream)>,
    /// The counters.
    pub stats: AdapterStats,
}

fn sat(a: TAddr) -> SockaddrAt {
    SockaddrAt::new(a.net, a.node, a.socket)
}

impl StreamsDdpAdapter {
    /// An adapter whose streams allocate from `dblks`.
    pub fn new(dblks: DblkPool) -> StreamsDdpAdapter {
        StreamsDdpAdapter {
            dblks,
            streams: Vec::new(),
            stats: AdapterStats::default(),
        }
    }

    fn stream(&mut self, so: SockId) -> Result<&mut Stream, Errno> {
        self.streams
            .iter_mut()
            .find(|(s, _, _)| *s == so)
            .map(|(_, _, st)| st)
            .ok_or(Errno::Enotconn)
    }

    /// Move what the streams produced across the boundary: datagrams their
    /// devices send go to the interface, indications at their heads go to
    /// the protocol each socket belongs to.
    fn cross<K: BsdKernel>(&mut self, k: &mut K) {
        let StreamsDdpAdapter { streams, stats, .. } = self;
        for (so, _, s) in streams.iter_mut() {
            while let Some(mp) = s.device_output() {
                let dst = mp
                    .data()
                    .get(4..11)
                    .map(|h| SockaddrAt::new(u16::from_be_bytes([h[0], h[1]]), h[4], h[6]))
                    .unwrap_or_default();
                let Ok(mut m) = k.m_gethdr(MbufType::Data) else {
                    continue;
                };
                // The device copies the datagram out, as a driver does.
                let ifp = k.if_route(dst);
                if let (Ok(()), Some(ifp)) = (m.m_append(&mp.to_vec()), ifp) {
                    stats.down += u64::from(k.if_output(ifp, m, dst).is_ok());
                }
            }
            while let Ok(Some(mut mp)) = s.getmsg() {
                match Tpi::of(&mp) {
                    Some(Tpi::UnitdataInd { src, .. }) => {
                        // The data block becomes an mbuf: pointers only.
                        let m = match mp.unlinkb() {
                            Some(d) => to_mbuf(k.mbufs(), &d),
                            None => k.m_gethdr(MbufType::Data),
                        };
                        let Ok(m) = m else { continue };
                        stats.up += 1;
                        if let Some(proto) = k.so_proto(*so) {
                            let dst = k.if_address(0).unwrap_or_default();
                            k.pr_input(
                                proto,
                                m,
                                InputArg::Ddp {
                                    src: sat(src),
                                    dst,
                                    so: *so,
                                },
                            );
                        }
                    }
                    _ => stats.stream_errors += 1,
                }
            }
        }
    }
}

impl<K: BsdKernel> Protosw<K> for StreamsDdpAdapter {
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
        "ddp@streams-adapter"
    }

    fn pr_counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = vec![
            ("down", self.stats.down),
            ("up", self.stats.up),
            ("no_stream", self.stats.no_stream),
            ("stream_errors", self.stats.stream_errors),
        ];
        for (_, _, s) in &self.streams {
            c.extend(s.counters("ddp"));
        }
        c
    }

    fn pr_input(&mut self, k: &mut K, m: Mbuf, arg: InputArg) {
        let InputArg::Interface { .. } = arg else {
            return;
        };
        // A frame from the interface: to the stream bound to its socket.
        let port = {
            let mut b = [0u8; 1];
            (m.m_copydata(10, 1, &mut b) == 1).then_some(b[0])
        };
        let Some(s) = self
            .streams
            .iter_mut()
            .find(|(_, p, _)| Some(*p) == port)
            .map(|(_, _, s)| s)
        else {
            self.stats.no_stream += 1;
            return;
        };
        match to_mblk(&self.dblks, &m, MsgType::Data) {
            Ok(mp) => s.device_input(mp),
            Err(_) => self.stats.no_stream += 1,
        }
        self.cross(k);
    }

    fn pr_output(&mut self, k: &mut K, m: Mbuf, arg: OutputArg) -> Result<(), Errno> {
        let dblks = self.dblks.clone();
        let s = self.stream(arg.so)?;
        let mut req = Tpi::UnitdataReq {
            dest: TAddr::new(arg.dst.net, arg.dst.node, arg.dst.port),
            opt: vec![arg.ddp_type],
        }
        .to_msg(&dblks)?;
        req.linkb(to_mblk(&dblks, &m, MsgType::Data)?);
        s.putmsg_mblk(req)?;
        self.cross(k);
        Ok(())
    }

    fn pr_usrreq(&mut self, k: &mut K, so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        match req {
            Usrreq::Attach => {
                let me = k.if_address(0).ok_or(Errno::Eaddrnotavail)?;
                let mut s = Stream::open(self.dblks.clone());
                s.push(Box::new(Ddp::new(TAddr::new(me.net, me.node, 0))))?;
                self.streams.push((so, 0, s));
                Ok(UsrreqOk::Done)
            }
            Usrreq::Detach | Usrreq::Abort => {
                self.streams.retain(|(s, _, _)| *s != so);
                Ok(UsrreqOk::Done)
            }
            Usrreq::Bind(a) => {
                let s = self.stream(so)?;
                s.putmsg(
                    Some(&Tpi::BindReq {
                        addr: TAddr::new(a.net, a.node, a.port),
                    }),
                    None,
                )?;
                // The stream answers at once: its scheduler ran in putmsg.
                let ack = s.getmsg()?.as_ref().and_then(Tpi::of);
                match ack {
                    Some(Tpi::BindAck { addr }) => {
                        if let Some(e) = self.streams.iter_mut().find(|(s, _, _)| *s == so) {
                            e.1 = addr.socket;
                        }
                        Ok(UsrreqOk::Addr(sat(addr)))
                    }
                    Some(Tpi::ErrorAck { unix_error, .. }) => {
                        Err(Errno::from_number(unix_error).unwrap_or(Errno::Einval))
                    }
                    _ => Err(Errno::Eio),
                }
            }
            _ => Ok(UsrreqOk::Done),
        }
    }

    fn pr_fasttimo(&mut self, k: &mut K) {
        // The streams' clocks follow the BSD clock.
        let now = std::time::Duration::from_millis(k.ticks() * 1000 / crate::bsd::kernel::HZ);
        for (_, _, s) in &mut self.streams {
            s.advance_to(now);
        }
        self.cross(k);
    }
}
