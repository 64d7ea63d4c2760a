//! `ddp@streams`: the STREAMS DDP module
//! ([`streams::atalk::ddp`](crate::streams::atalk::ddp), the very file the
//! native STREAMS subsystem compiles) as a node of a Strata graph, over
//! Strata's `eth` and under any Strata protocol that uses `ddp`.
//!
//! To Strata the module is a DDP (participants, [`DdpInfo`] record, demux).
//! To the STREAMS module it is the rest of a stream ([`StreamsKernel`]): one
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

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use strata_core::{
    Control, Cx, Demux, DropReason, Message, PacketMeta, Protocol, Reply, SessionId, Target, Up,
    UpiError,
};

use crate::appletalk::ddp::host::Host;
use crate::appletalk::wire::ddp::{self as wire, Header, Repr};
use crate::errno::Errno;
use crate::streams::atalk::ddp::{Ddp, DdpStats};
use crate::streams::kernel::{HZ, Side, StreamsKernel, StreamsModule};
use crate::streams::mblk::{DblkPool, Dblks, Mblk, MsgType, mkmsg};
use crate::streams::tpi::{TAddr, Tpi};

/// Service procedure rounds one call may run: a module that keeps
/// re-enabling itself cannot hold the engine.
const MAX_ROUNDS: usize = 64;

/// The kernel the STREAMS module sees: one stream's queues and Strata's
/// context for the length of one call.
struct Kernel<'k, 'c> {
    cx: &'k mut Cx<'c>,
    dblks: &'k DblkPool,
    host: &'k mut Host,
    queues: &'k mut [VecDeque<Mblk>; 2],
    enabled: [bool; 2],
    /// What the module sent upstream.
    up: Vec<Mblk>,
}

impl StreamsKernel for Kernel<'_, '_> {
    fn dblks(&self) -> &DblkPool {
        self.dblks
    }

    fn lbolt(&self) -> u64 {
        self.cx.now().as_nanos() / (1_000_000_000 / HZ)
    }

    fn putnext(&mut self, side: Side, mp: Mblk) {
        match side {
            Side::Read => self.up.push(mp),
            Side::Write if mp.mtype == MsgType::Data => {
                let bytes = mp.to_vec();
                let Ok(h) = Header::new_checked(&bytes[..]) else {
                    self.cx.count_drop(DropReason::Malformed);
                    return;
                };
                match self.host.link_to(h.dst(), self.cx) {
                    Ok(link) => self.cx.push(link, Message::from(bytes)),
                    Err(_) => self.cx.count_drop(DropReason::Unresolved),
                }
            }
            // M_FLUSH and the like end at the device.
            Side::Write => {}
        }
    }

    fn putq(&mut self, side: Side, mp: Mblk) {
        let q = &mut self.queues[side.index()];
        if mp.mtype.is_priority() {
            q.push_front(mp);
        } else {
            q.push_back(mp);
        }
        self.enabled[side.index()] = true;
    }

    fn putbq(&mut self, side: Side, mp: Mblk) {
        self.queues[side.index()].push_front(mp);
    }

    fn getq(&mut self, side: Side) -> Option<Mblk> {
        self.queues[side.index()].pop_front()
    }

    fn canputnext(&mut self, _side: Side) -> bool {
        // Strata takes what the module passes on, both ways.
        true
    }

    fn flushq(&mut self, side: Side, all: bool) {
        self.queues[side.index()].retain(|m| !all && m.mtype.is_priority());
    }

    fn qenable(&mut self, side: Side) {
        self.enabled[side.index()] = true;
    }

    fn qcount(&self, side: Side) -> usize {
        self.queues[side.index()].iter().map(Mblk::msgsize).sum()
    }

    fn timeout(&mut self, _ticks: u64, _id: u32) {
        // DDP sets none; a module that did would need Strata timers here.
        self.cx.count("streams-timeout-unsupported");
    }

    fn untimeout(&mut self, _id: u32) {}
}

/// One stream: the DDP module bound to a socket, its queue pair, and how
/// many Strata sessions use it.
struct Stream {
    ddp: Ddp,
    queues: [VecDeque<Mblk>; 2],
    sessions: u32,
}

/// The `ddp@streams` protocol object.
pub struct StreamsDdp {
    host: Host,
    dblks: DblkPool,
    streams: FxHashMap<u8, Stream>,
}

/// Strata's drop reason for what the STREAMS DDP counted while dropping.
fn reason(before: &DdpStats, after: &DdpStats) -> DropReason {
    if after.short > before.short {
        DropReason::Truncated
    } else if after.malformed > before.malformed {
        DropReason::Malformed
    } else if after.bad_checksum > before.bad_checksum {
        DropReason::BadChecksum
    } else if after.not_for_us > before.not_for_us {
        DropReason::NotForUs
    } else if after.flow_drops > before.flow_drops {
        DropReason::QueueFull
    } else if after.nobufs > before.nobufs {
        DropReason::NoRoom
    } else {
        DropReason::Other("streams-dropped")
    }
}

impl StreamsDdp {
    /// The STREAMS DDP behind `host`, with a pool of `dblks` data blocks.
    pub fn new(host: Host, dblks: usize) -> StreamsDdp {
        StreamsDdp {
            host,
            dblks: Dblks::pool(dblks),
            streams: FxHashMap::default(),
        }
    }

    /// The counters of every stream's DDP module, summed by name.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut sum = DdpStats::default().named();
        for s in self.streams.values() {
            for ((_, total), (_, v)) in sum.iter_mut().zip(s.ddp.stats.named()) {
                *total += v;
            }
        }
        sum
    }

    /// Puts `mp` to stream `port`'s DDP on `side`, runs the enabled service
    /// procedures, and returns what came out upstream.
    fn put(&mut self, port: u8, side: Side, mp: Mblk, cx: &mut Cx) -> Vec<Mblk> {
        let Some(s) = self.streams.get_mut(&port) else {
            return Vec::new();
        };
        let mut k = Kernel {
            cx,
            dblks: &self.dblks,
            host: &mut self.host,
            queues: &mut s.queues,
            enabled: [false; 2],
            up: Vec::new(),
        };
        s.ddp.put(&mut k, side, mp);
        for _ in 0..MAX_ROUNDS {
            let Some(i) = k.enabled.iter().position(|e| *e) else {
                break;
            };
            k.enabled[i] = false;
            let side = if i == 0 { Side::Read } else { Side::Write };
            s.ddp.srv(&mut k, side);
        }
        k.up
    }

    /// The stream for DDP socket `port`, opened and bound the first time.
    fn stream(&mut self, port: u8, cx: &mut Cx) -> Result<(), UpiError> {
        if let Some(s) = self.streams.get_mut(&port) {
            s.sessions += 1;
            return Ok(());
        }
        let me = self.host.me(0);
        self.streams.insert(
            port,
            Stream {
                ddp: Ddp::new(TAddr::new(me.net, me.node, 0)),
                queues: Default::default(),
                sessions: 1,
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
            self.streams.remove(&port);
            return Err(UpiError::Refused);
        }
        Ok(())
    }

    /// Drops one session's hold on stream `port`; the last one closes it.
    fn release(&mut self, port: u8) {
        if let Some(s) = self.streams.get_mut(&port) {
            s.sessions -= 1;
            if s.sessions == 0 {
                self.streams.remove(&port);
            }
        }
    }
}

impl Protocol for StreamsDdp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.host.demux(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        self.host.learn_node(cx);
        let bytes = msg.to_vec();
        let Ok(h) = Header::new_checked(&bytes[..]) else {
            return Up::Drop(DropReason::Truncated);
        };
        let (dst, port) = (h.dst(), h.dst().socket);
        self.host.glean(h.src(), meta, cx);
        // The driver's part: the stream bound to the destination socket.
        let Some(before) = self.streams.get(&port).map(|s| s.ddp.stats) else {
            return Up::Drop(DropReason::NoSession);
        };
        let Ok(mp) = mkmsg(&self.dblks, MsgType::Data, &bytes) else {
            return Up::Drop(DropReason::NoRoom);
        };
        let up = self.put(port, Side::Read, mp, cx);
        let mut delivered = None;
        for mut m in up {
            if let Some(Tpi::UnitdataInd { src, opt }) = Tpi::of(&m) {
                let data = m.unlinkb().map(|d| d.to_vec()).unwrap_or_default();
                delivered = Some((src, opt.first().copied().unwrap_or(0), data));
            }
        }
        let Some((from, ddp_type, data)) = delivered else {
            let after = self.streams.get(&port).map_or(before, |s| s.ddp.stats);
            return Up::Drop(reason(&before, &after));
        };
        let src = wire::Addr::new(from.net, from.node, from.socket);
        let Ok(r) = Repr::new(src, dst, ddp_type, 0) else {
            return Up::Drop(DropReason::Malformed);
        };
        *msg = Message::from(data);
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
        let built: Result<Mblk, Errno> =
            mkmsg(&self.dblks, MsgType::Data, &msg.to_vec()).and_then(|data| {
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
