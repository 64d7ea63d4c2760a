//! DDP as a STREAMS module (Inside AppleTalk ch. 4), over the same wire
//! code as every other DDP.
//!
//! Write side: `T_BIND_REQ` binds the stream's DDP socket and is answered
//! with `T_BIND_ACK` or `T_ERROR_ACK`; `T_UNITDATA_REQ` (DDP type in the
//! first option byte) with its `M_DATA` becomes a datagram — a header block
//! linked in front of the user's blocks, nothing copied — queued for the
//! write service procedure, which sends while the device can take it. A
//! datagram that cannot be sent is answered with `T_UDERROR_IND`.
//!
//! Read side: a datagram (`M_DATA`) from the device is checked (length,
//! checksum, address) and becomes `T_UNITDATA_IND` + data, queued for the
//! read service procedure, which passes it up while the module above has
//! room. Bad datagrams are dropped and counted by reason.

use crate::appletalk::wire::ddp::{self, Addr, Header, Repr};
use crate::errno::Errno;

use super::super::kernel::{ModuleInfo, Side, StreamsKernel, StreamsModule};
use super::super::mblk::{FLUSHR, FLUSHW, Mblk, MsgType};
use super::super::tpi::{
    T_BIND_REQ, T_UNBIND_REQ, T_UNITDATA_IND, T_UNITDATA_REQ, TAddr, Tpi, unitdata, unitdata_msg,
};
use super::reply;

/// The first dynamically assigned DDP socket.
pub const DDP_DYNAMIC_FIRST: u8 = 128;

/// The DDP module's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DdpStats {
    /// Datagrams received from the device.
    pub ipackets: u64,
    /// Datagrams passed up.
    pub delivered: u64,
    /// Datagrams built and queued for the device.
    pub opackets: u64,
    /// Dropped: shorter than a header or than their length field.
    pub short: u64,
    /// Dropped: a header field out of range.
    pub malformed: u64,
    /// Dropped: bad checksum.
    pub bad_checksum: u64,
    /// Dropped: addressed to another node or socket.
    pub not_for_us: u64,
    /// Dropped: the module's read queue was over its high water mark.
    pub flow_drops: u64,
    /// Dropped: no data blocks.
    pub nobufs: u64,
    /// Messages of a kind DDP does not take, dropped.
    pub bad_prim: u64,
    /// `T_UDERROR_IND`s sent up.
    pub uderrors: u64,
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
            ("flow_drops", self.flow_drops),
            ("nobufs", self.nobufs),
            ("bad_prim", self.bad_prim),
            ("uderrors", self.uderrors),
        ]
    }
}

/// The DDP module of one stream.
pub struct Ddp {
    /// This node's address (set when the module is configured; socket 0).
    pub node: TAddr,
    port: u8,
    /// Whether output datagrams carry a checksum.
    pub checksum: bool,
    /// The counters.
    pub stats: DdpStats,
}

impl Ddp {
    /// DDP for the node at `node`, unbound.
    pub fn new(node: TAddr) -> Ddp {
        Ddp {
            node,
            port: 0,
            checksum: true,
            stats: DdpStats::default(),
        }
    }

    /// The bound socket (0: unbound).
    pub fn port(&self) -> u8 {
        self.port
    }

    fn wput<K: StreamsKernel>(&mut self, k: &mut K, mut mp: Mblk) {
        match mp.mtype {
            MsgType::Flush => {
                if mp.data().first().is_some_and(|f| f & FLUSHW != 0) {
                    k.flushq(Side::Write, false);
                }
                k.putnext(Side::Write, mp);
            }
            MsgType::Proto if unitdata(&mp).is_some_and(|(p, ..)| p == T_UNITDATA_REQ) => {
                let data = mp.unlinkb();
                let Some((_, dest, opt)) = unitdata(&mp) else {
                    return;
                };
                let ddp_type = opt.first().copied().unwrap_or(0);
                if let Err(e) = self.output(k, dest, ddp_type, data) {
                    self.stats.uderrors += 1;
                    let opt = opt.to_vec();
                    reply(
                        k,
                        Side::Write,
                        &Tpi::UderrorInd {
                            dest,
                            opt,
                            error: e.number(),
                        },
                    );
                }
            }
            MsgType::Proto | MsgType::Pcproto => match Tpi::of(&mp) {
                Some(Tpi::BindReq { addr }) => {
                    let answer = if self.port != 0 {
                        Tpi::error_ack(T_BIND_REQ, Errno::Einval)
                    } else {
                        self.port = if addr.socket == 0 {
                            DDP_DYNAMIC_FIRST
                        } else {
                            addr.socket
                        };
                        Tpi::BindAck {
                            addr: TAddr::new(self.node.net, self.node.node, self.port),
                        }
                    };
                    reply(k, Side::Write, &answer);
                }
                Some(Tpi::UnbindReq) => {
                    self.port = 0;
                    reply(
                        k,
                        Side::Write,
                        &Tpi::OkAck {
                            correct_prim: T_UNBIND_REQ,
                        },
                    );
                }
                Some(other) => {
                    reply(
                        k,
                        Side::Write,
                        &Tpi::error_ack(other.prim(), Errno::Eopnotsupp),
                    );
                }
                None => self.stats.bad_prim += 1,
            },
            MsgType::Data => {
                // Data without a destination: TPI has no datagram for it.
                self.stats.bad_prim += 1;
                reply(
                    k,
                    Side::Write,
                    &Tpi::error_ack(T_UNITDATA_REQ, Errno::Einval),
                );
            }
            _ => k.putnext(Side::Write, mp),
        }
    }

    /// Build the datagram and queue it for the write service procedure.
    fn output<K: StreamsKernel>(
        &mut self,
        k: &mut K,
        dest: TAddr,
        ddp_type: u8,
        data: Option<Mblk>,
    ) -> Result<(), Errno> {
        if self.port == 0 {
            return Err(Errno::Enotconn);
        }
        let len = data.as_ref().map_or(0, Mblk::msgsize);
        let src = Addr::new(self.node.net, self.node.node, self.port);
        let repr = Repr::new(
            src,
            Addr::new(dest.net, dest.node, dest.socket),
            ddp_type,
            len,
        )
        .map_err(|_| Errno::Emsgsize)?;
        let hdr = match (&data, self.checksum) {
            (Some(d), true) => repr.to_bytes_checksummed(d.iter().map(Mblk::data)),
            (None, true) => repr.to_bytes_checksummed([]),
            (_, false) => repr.to_bytes(),
        }
        .map_err(|_| Errno::Emsgsize)?;
        let mut mp = k.allocb(ddp::HEADER_LEN)?;
        mp.put_bytes(&hdr);
        if let Some(d) = data {
            mp.linkb(d);
        }
        self.stats.opackets += 1;
        k.putq(Side::Write, mp);
        Ok(())
    }

    fn rput<K: StreamsKernel>(&mut self, k: &mut K, mp: Mblk) {
        match mp.mtype {
            MsgType::Data => self.input(k, mp),
            MsgType::Flush => {
                if mp.data().first().is_some_and(|f| f & FLUSHR != 0) {
                    k.flushq(Side::Read, false);
                }
                k.putnext(Side::Read, mp);
            }
            // Nothing below DDP speaks TPI to it.
            MsgType::Proto => self.stats.bad_prim += 1,
            _ => k.putnext(Side::Read, mp),
        }
    }

    fn input<K: StreamsKernel>(&mut self, k: &mut K, mut mp: Mblk) {
        self.stats.ipackets += 1;
        let total = mp.msgsize();
        if total < ddp::HEADER_LEN {
            self.stats.short += 1;
            return;
        }
        if mp.pullupmsg(Some(ddp::HEADER_LEN)).is_err() {
            self.stats.nobufs += 1;
            return;
        }
        let mut hb = [0u8; ddp::HEADER_LEN];
        hb.copy_from_slice(&mp.data()[..ddp::HEADER_LEN]);
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
            mp.adjmsg(-((total - repr.length) as isize));
        }
        let data = mp.iter().enumerate().map(|(i, b)| {
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
        let node_ok = (repr.dst.node == self.node.node || repr.dst.node == 0xff)
            && (repr.dst.net == self.node.net || repr.dst.net == 0);
        if !node_ok || self.port == 0 || repr.dst.socket != self.port {
            self.stats.not_for_us += 1;
            return;
        }
        let info = ModuleInfo::default();
        if k.qcount(Side::Read) >= info.hiwat {
            self.stats.flow_drops += 1;
            return;
        }
        mp.adjmsg(ddp::HEADER_LEN as isize);
        let src = TAddr::new(repr.src.net, repr.src.node, repr.src.socket);
        let ind = unitdata_msg(k.dblks(), T_UNITDATA_IND, src, &[repr.ddp_type]).map(|mut ind| {
            ind.linkb(mp);
            ind
        });
        match ind {
            Ok(ind) => {
                self.stats.delivered += 1;
                k.putq(Side::Read, ind);
            }
            Err(_) => self.stats.nobufs += 1,
        }
    }
}

impl<K: StreamsKernel> StreamsModule<K> for Ddp {
    fn name(&self) -> &'static str {
        "ddp"
    }

    fn has_srv(&self, _side: Side) -> bool {
        true
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.stats.named()
    }

    fn put(&mut self, k: &mut K, side: Side, mp: Mblk) {
        match side {
            Side::Write => self.wput(k, mp),
            Side::Read => self.rput(k, mp),
        }
    }

    fn srv(&mut self, k: &mut K, side: Side) {
        super::super::kernel::forward(k, side);
    }
}
