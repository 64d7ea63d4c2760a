//! `ddp@streams`: the STREAMS DDP module
//! ([`streams::atalk::ddp`](crate::streams::atalk::ddp), the very file the
//! native STREAMS subsystem compiles) as a node of a Strata graph, over
//! Strata's `eth` and under any Strata protocol that uses `ddp`.
//!
//! To Strata the module is a DDP (participants, [`DdpInfo`] record, demux).
//! To the STREAMS module it is the rest of a stream ([`StreamsKernel`](crate::streams::StreamsKernel), [`kernel`](super::kernel)): one
//! stream per DDP socket number, bound with `T_BIND_REQ`; a Strata push is a
//! `T_UNITDATA_REQ` (DDP type in the option) with the data as `M_DATA`; the
//! module's `putnext` downstream is a push to the Ethernet session of the
//! node's address; upstream, its `T_UNITDATA_IND` is what goes up the graph.
//! The STREAMS process architecture is emulated within each Strata call:
//! `putq` queues and enables, and the enabled service procedures run before
//! the call returns (a Strata call is the module's only chance to run).
//! Received datagrams are steered to the stream of their destination socket
//! (the driver's job in a native stream).
//!
//! [`DdpInfo`]: crate::appletalk::DdpInfo

use strata_core::{
    Control, Cx, Demux, DropReason, Message, PacketMeta, Protocol, Reply, SessionId, Target, Up,
    UpiError,
};

use super::kernel::{Device, Queues, Timeouts, mblk_of, message_of, run};
use crate::appletalk::ddp::host::Host;
use crate::appletalk::endpoints::{Endpoints, dropped, with_bytes};
use crate::appletalk::wire::ddp::{self as wire, Header, Repr};
use crate::errno::Errno;
use crate::streams::atalk::ddp::{Ddp, DdpStats};
use crate::streams::kernel::{Side, StreamsModule};
use crate::streams::mblk::{DblkPool, Dblks, Mblk, MsgType, mkmsg};
use crate::streams::tpi::{TAddr, Tpi};

impl Device for Host {
    fn down(&mut self, _socket: u8, mp: Mblk, cx: &mut Cx) {
        // M_FLUSH and the like end at the device.
        if mp.mtype != MsgType::Data {
            return;
        }
        let first = Header::new_checked(mp.data()).map(|h| h.dst());
        let dst = first.or_else(|_| Header::new_checked(&mp.to_vec()[..]).map(|h| h.dst()));
        let Ok(dst) = dst else {
            cx.count_drop(DropReason::Malformed);
            return;
        };
        match self.link_to(dst, cx) {
            Ok(link) => cx.push(link, message_of(&mp)),
            Err(_) => cx.count_drop(DropReason::Unresolved),
        }
    }
}

/// One stream: the DDP module bound to a socket, its queue pair, and how
/// many Strata sessions use it.
struct Stream {
    ddp: Ddp,
    queues: Queues,
}

/// The `ddp@streams` protocol object.
pub struct StreamsDdp {
    host: Host,
    dblks: DblkPool,
    streams: Endpoints<Stream>,
    timeouts: Timeouts,
}

impl StreamsDdp {
    /// The STREAMS DDP behind `host`, with a pool of `dblks` data blocks.
    pub fn new(host: Host, dblks: usize) -> StreamsDdp {
        StreamsDdp {
            host,
            dblks: Dblks::pool(dblks),
            streams: Endpoints::default(),
            timeouts: Timeouts::default(),
        }
    }

    /// The counters of every stream's DDP module, summed by name.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut sum = DdpStats::default().named();
        for (_, s) in self.streams.iter() {
            for ((_, total), (_, v)) in sum.iter_mut().zip(s.ddp.stats.named()) {
                *total += v;
            }
        }
        sum
    }

    /// Puts `mp` to stream `port`'s DDP on `side`, runs the enabled service
    /// procedures, and returns what came out upstream.
    fn put(&mut self, port: u8, side: Side, mp: Mblk, cx: &mut Cx) -> Vec<Mblk> {
        let Some(s) = self.streams.get_mut(port) else {
            return Vec::new();
        };
        let (queues, timeouts) = (&mut s.queues, &mut self.timeouts);
        run(
            cx,
            &self.dblks,
            &mut self.host,
            port,
            queues,
            timeouts,
            &mut s.ddp,
            |ddp, k| ddp.put(k, side, mp),
        )
    }

    /// The stream for DDP socket `port`, opened and bound the first time.
    fn stream(&mut self, port: u8, cx: &mut Cx) -> Result<(), UpiError> {
        if self.streams.hold(port) {
            return Ok(());
        }
        let me = self.host.me(0);
        self.streams.insert(
            port,
            Stream {
                ddp: Ddp::new(TAddr::new(me.net, me.node, 0)),
                queues: Queues::default(),
            },
        );
        let bind = Tpi::BindReq {
            addr: TAddr::new(me.net, me.node, port),
        };
        let answer = bind
            .to_msg(&self.dblks)
            .map(|mp| self.put(port, Side::Write, mp, cx));
        let bound = answer.as_ref().is_ok_and(|up| {
            up.iter()
                .any(|m| matches!(Tpi::of(m), Some(Tpi::BindAck { addr }) if addr.socket == port))
        });
        if !bound {
            self.streams.release(port);
            return Err(UpiError::Refused);
        }
        Ok(())
    }

    /// Drops one session's hold on stream `port`; the last one closes it.
    fn release(&mut self, port: u8) {
        self.streams.release(port);
    }
}

impl Protocol for StreamsDdp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.host.demux(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        self.host.learn_node(cx);
        let read = with_bytes(msg, |b| {
            Header::new_checked(b).ok().map(|h| (h.dst(), h.src()))
        });
        let Some((dst, from)) = read else {
            return Up::Drop(DropReason::Truncated);
        };
        let port = dst.socket;
        self.host.glean(from, meta, cx);
        // The driver's part: the stream bound to the destination socket.
        let Some(before) = self.streams.get(port).map(|s| s.ddp.stats) else {
            return Up::Drop(DropReason::NoSession);
        };
        // The received buffer handed over as the stream's M_DATA block.
        let Ok(mp) = mblk_of(&self.dblks, msg) else {
            return Up::Drop(DropReason::NoRoom);
        };
        let up = self.put(port, Side::Read, mp, cx);
        let mut delivered = None;
        for mut m in up {
            if let Some(Tpi::UnitdataInd { src, opt }) = Tpi::of(&m) {
                let data = m.unlinkb().map_or_else(Message::new, |d| message_of(&d));
                delivered = Some((src, opt.first().copied().unwrap_or(0), data));
            }
        }
        let Some((from, ddp_type, data)) = delivered else {
            let after = self.streams.get(port).map_or(before, |s| s.ddp.stats);
            return Up::Drop(
                dropped(&before.named(), &after.named())
                    .unwrap_or(DropReason::Other("streams-dropped")),
            );
        };
        let src = wire::Addr::new(from.net, from.node, from.socket);
        let Ok(r) = Repr::new(src, dst, ddp_type, 0) else {
            return Up::Drop(DropReason::Malformed);
        };
        *msg = data;
        self.host.up(target, port, &r, meta)
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        let Some(out) = self.host.outgoing(sess, cx) else {
            return;
        };
        let (port, remote, ddp_type) = (out.socket, out.remote, out.ddp_type);
        let req = Tpi::UnitdataReq {
            dest: TAddr::new(remote.net, remote.node, remote.socket),
            opt: vec![ddp_type],
        };
        let built: Result<Mblk, Errno> = with_bytes(&msg, |b| mkmsg(&self.dblks, MsgType::Data, b))
            .and_then(|data| {
                req.to_msg(&self.dblks).map(|mut mp| {
                    mp.linkb(data);
                    mp
                })
            });
        let Ok(mp) = built else {
            cx.count_drop(DropReason::NoRoom);
            return;
        };
        let up = self.put(port, Side::Write, mp, cx);
        if up
            .iter()
            .any(|m| matches!(Tpi::of(m), Some(Tpi::UderrorInd { .. })))
        {
            cx.count_drop(DropReason::Other("uderror"));
        }
    }

    fn open(&mut self, mut req: strata_core::Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let s = self.host.session(&mut req, cx)?;
        let port = s.socket;
        self.stream(port, cx)?;
        match self.host.table.insert(s) {
            Some(id) => Ok(id),
            None => {
                self.release(port);
                Err(UpiError::Exhausted("ddp sessions"))
            }
        }
    }

    fn close(&mut self, sess: SessionId, _cx: &mut Cx) {
        if let Some(s) = self.host.table.remove(sess) {
            self.release(s.socket);
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        self.host.control(sess, op, cx)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
