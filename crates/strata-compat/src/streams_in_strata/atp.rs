//! `atp@streams`: the STREAMS ATP module
//! ([`streams::atalk::atp`](crate::streams::atalk::atp), the very file the
//! native STREAMS subsystem compiles) as a node of a Strata graph, over any
//! Strata DDP (`ddp`, `ddp@bsd`, `ddp@streams`) and usable wherever Strata's
//! `atp` is.
//!
//! To Strata the module is an ATP (the sessions, participants and demux of
//! [`atp::host`](crate::appletalk::atp::host)). To the STREAMS module it is
//! the rest of a stream ([`kernel`](super::kernel)): one stream per local DDP
//! socket; a Strata push is a `T_UNITDATA_REQ` whose option is an
//! [`AtpService`] record, with the data as `M_DATA`; the module's
//! `T_UNITDATA_REQ`s downstream (DDP type 3) are pushes to the Strata DDP
//! session of that socket and peer; a received packet is the
//! `T_UNITDATA_IND` DDP would send up; the module's indications upstream
//! (read service procedure) are what goes up the graph; its `timeout`s are
//! Strata timers. Errors come back as `T_UDERROR_IND`, counted.

use strata_core::graph::{BuildInfo, ProtocolConfig};
use strata_core::{
    Control, Cx, Demux, DropReason, GraphError, Message, Open, PacketMeta, Protocol, Reply,
    SessionId, Target, Up, UpiError,
};

use super::kernel::{Device, Queues, Timeouts, run};
use crate::appletalk::DdpInfo;
use crate::appletalk::atp::Settings;
use crate::appletalk::atp::host::Host;
use crate::appletalk::endpoints::Endpoints;
use crate::appletalk::wire::atp::DDP_TYPE;
use crate::appletalk::wire::ddp as wire;
use crate::atp_service::AtpService;
use crate::errno::Errno;
use crate::streams::atalk::atp::{Atp, AtpStats};
use crate::streams::kernel::{Side, StreamsModule};
use crate::streams::mblk::{DblkPool, Dblks, Mblk, MsgType, mkmsg};
use crate::streams::tpi::{T_UNITDATA_IND, T_UNITDATA_REQ, TAddr, Tpi, unitdata, unitdata_msg};

impl Device for Host {
    fn down(&mut self, socket: u8, mut mp: Mblk, cx: &mut Cx) {
        let Some((T_UNITDATA_REQ, dest, _)) = unitdata(&mp) else {
            // M_FLUSH and the like end here: DDP below is Strata's.
            return;
        };
        let data = mp.unlinkb().map(|d| d.to_vec()).unwrap_or_default();
        match self.ddp_to(socket, wire::Addr::new(dest.net, dest.node, dest.socket)) {
            Some(ddp) => cx.push(ddp, Message::from(data)),
            None => cx.count_drop(DropReason::Unresolved),
        }
    }
}

/// One stream: the ATP module and its queues.
struct Stream {
    atp: Atp,
    queues: Queues,
}

/// The `atp@streams` protocol object.
pub struct StreamsAtp {
    host: Host,
    dblks: DblkPool,
    streams: Endpoints<Stream>,
    timeouts: Timeouts,
}

/// Counts what came up outside a pop (a failure) or as an error message.
fn count_late(up: &[Mblk], cx: &mut Cx) {
    for m in up {
        match Tpi::of(m) {
            Some(Tpi::UnitdataInd { opt, .. })
                if matches!(
                    AtpService::decode(&opt),
                    Some(AtpService::RequestFailed { .. })
                ) =>
            {
                cx.count("transaction-failed")
            }
            Some(Tpi::UderrorInd { .. } | Tpi::ErrorAck { .. }) => {
                cx.count_drop(DropReason::Other("uderror"))
            }
            _ => {}
        }
    }
}

/// Strata's drop reason for what the module counted while dropping, or
/// `None` when it kept or answered the packet.
fn reason(before: &AtpStats, after: &AtpStats) -> Option<DropReason> {
    if after.malformed > before.malformed {
        Some(DropReason::Malformed)
    } else if after.no_transaction > before.no_transaction {
        Some(DropReason::Other("no-transaction"))
    } else if after.table_full > before.table_full || after.flow_drops > before.flow_drops {
        Some(DropReason::QueueFull)
    } else {
        None
    }
}

impl StreamsAtp {
    /// The STREAMS ATP behind `host`, with a pool of `dblks` data blocks.
    pub fn new(host: Host, dblks: usize) -> StreamsAtp {
        StreamsAtp {
            host,
            dblks: Dblks::pool(dblks),
            streams: Endpoints::default(),
            timeouts: Timeouts::default(),
        }
    }

    /// The counters of every stream's ATP module, summed by name.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut sum = AtpStats::default().named();
        for (_, s) in self.streams.iter() {
            for ((_, total), (_, v)) in sum.iter_mut().zip(s.atp.stats.named()) {
                *total += v;
            }
        }
        sum
    }

    /// How many sessions are open.
    pub fn session_count(&self) -> usize {
        self.host.session_count()
    }

    /// Runs `call` on stream `socket`'s ATP, then its service procedures;
    /// what came out upstream.
    fn call(
        &mut self,
        socket: u8,
        cx: &mut Cx,
        call: impl FnOnce(&mut Atp, &mut super::kernel::Kernel<'_, '_, Host>),
    ) -> Vec<Mblk> {
        let Some(s) = self.streams.get_mut(socket) else {
            return Vec::new();
        };
        run(
            cx,
            &self.dblks,
            &mut self.host,
            socket,
            &mut s.queues,
            &mut self.timeouts,
            &mut s.atp,
            call,
        )
    }

    /// One more holder of stream `socket`, opened the first time.
    fn attach(&mut self, socket: u8) {
        if !self.streams.hold(socket) {
            let atp = Atp::new();
            let queues = Queues::default();
            self.streams.insert(socket, Stream { atp, queues });
        }
    }

    /// One holder fewer of stream `socket`; the last closes it.
    fn detach(&mut self, socket: u8, cx: &mut Cx) {
        if self.streams.release(socket).is_some() {
            self.timeouts.cancel_all(socket, cx);
        }
    }
}

impl Protocol for StreamsAtp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.host.demux(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(info) = DdpInfo::of(meta) else {
            return Up::Drop(DropReason::Other("no-ddp"));
        };
        let socket = info.dst.socket;
        let Some(before) = self.streams.get(socket).map(|s| s.atp.stats) else {
            return Up::Drop(DropReason::NoSession);
        };
        // What DDP sends up the stream: T_UNITDATA_IND, the packet as M_DATA.
        let src = TAddr::new(info.src.net, info.src.node, info.src.socket);
        let built =
            unitdata_msg(&self.dblks, T_UNITDATA_IND, src, &[DDP_TYPE]).and_then(|mut mp| {
                mkmsg(&self.dblks, MsgType::Data, &msg.to_vec()).map(|d| {
                    mp.linkb(d);
                    mp
                })
            });
        let Ok(mp) = built else {
            return Up::Drop(DropReason::NoRoom);
        };
        let mut up = self.call(socket, cx, |atp, k| atp.put(k, Side::Read, mp));
        let Some(mut ind) = up.pop() else {
            let after = self.streams.get(socket).map_or(before, |s| s.atp.stats);
            return match reason(&before, &after) {
                Some(r) => Up::Drop(r),
                None => Up::Consumed,
            };
        };
        count_late(&up, cx);
        let Some(Tpi::UnitdataInd { src, opt }) = Tpi::of(&ind) else {
            return Up::Drop(DropReason::Other("unexpected-primitive"));
        };
        let Some(rec) = AtpService::decode(&opt) else {
            return Up::Drop(DropReason::Other("no-record"));
        };
        *msg = Message::from(ind.unlinkb().map(|d| d.to_vec()).unwrap_or_default());
        let from = wire::Addr::new(src.net, src.node, src.socket);
        let up = self.host.indicated(target, socket, from, rec, cx);
        if let Up::Opened(_) = up {
            // The new responder session holds the stream too.
            let _ = self.streams.hold(socket);
        }
        up
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        let Some(send) = self.host.outgoing(sess, cx) else {
            return;
        };
        let dest = TAddr::new(send.dst.net, send.dst.node, send.dst.socket);
        let built: Result<Mblk, Errno> =
            unitdata_msg(&self.dblks, T_UNITDATA_REQ, dest, &send.rec.encode()).and_then(
                |mut mp| {
                    mkmsg(&self.dblks, MsgType::Data, &msg.to_vec()).map(|d| {
                        mp.linkb(d);
                        mp
                    })
                },
            );
        let Ok(mp) = built else {
            cx.count_drop(DropReason::NoRoom);
            return;
        };
        let up = self.call(send.socket, cx, |atp, k| atp.put(k, Side::Write, mp));
        count_late(&up, cx);
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let (id, socket) = self.host.open(req, cx)?;
        self.attach(socket);
        Ok(id)
    }

    fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = self.host.open_enable(req, cx)?;
        self.attach(socket);
        Ok(())
    }

    fn open_disable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = self.host.open_disable(req, cx)?;
        self.detach(socket, cx);
        Ok(())
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.host.close(sess, cx) {
            self.detach(s.socket, cx);
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        _cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        self.host.control(sess, op)
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let (socket, id) = self.timeouts.fired(token);
        let up = self.call(socket, cx, |atp, k| atp.timeout(k, id));
        count_late(&up, cx);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The registry's factory of `atp@streams` (`atp`'s options).
pub(super) fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ddp = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ddp"))?;
    let host = Host::new(ddp, Settings::from_config(c)?);
    Ok(Box::new(StreamsAtp::new(host, 8192)))
}
