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

use rustc_hash::FxHashMap;
use strata_core::graph::{BuildInfo, ProtocolConfig};
use strata_core::{Cx, DropReason, GraphError, Message, Protocol, UpiError};

use super::kernel::{Device, Kernel, Queues, Timeouts, mblk_of, message_of, run};
use crate::appletalk::DdpInfo;
use crate::appletalk::atp::Settings;
use crate::appletalk::atp::host::{Code, Host, Imported, Input, Outgoing};
use crate::appletalk::endpoints::{dropped, with_bytes};
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
        let data = mp.unlinkb().map_or_else(Message::new, |d| message_of(&d));
        match self.ddp_to(socket, wire::Addr::new(dest.net, dest.node, dest.socket)) {
            Some(ddp) => cx.push(ddp, data),
            None => cx.count_drop(DropReason::Unresolved),
        }
    }
}

/// One stream: the ATP module and its queues.
struct Stream {
    atp: Atp,
    queues: Queues,
}

/// The STREAMS ATP module, a stream per socket: the [`Code`] of
/// `atp@streams`.
pub struct Streams {
    dblks: DblkPool,
    streams: FxHashMap<u8, Stream>,
    timeouts: Timeouts,
}

/// The `atp@streams` protocol object.
pub type StreamsAtp = Imported<Streams>;

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

/// A TPI unit data primitive with `data` as its `M_DATA`.
fn unitdata_with(
    dblks: &DblkPool,
    prim: u32,
    addr: TAddr,
    opt: &[u8],
    data: &[u8],
) -> Result<Mblk, Errno> {
    let mut mp = unitdata_msg(dblks, prim, addr, opt)?;
    mp.linkb(mkmsg(dblks, MsgType::Data, data)?);
    Ok(mp)
}

impl Streams {
    /// Streams with a pool of `dblks` data blocks.
    pub fn new(dblks: usize) -> Streams {
        Streams {
            dblks: Dblks::pool(dblks),
            streams: FxHashMap::default(),
            timeouts: Timeouts::default(),
        }
    }

    /// Runs `call` on stream `socket`'s ATP, then its service procedures;
    /// what came out upstream.
    fn call(
        &mut self,
        host: &mut Host,
        socket: u8,
        cx: &mut Cx,
        call: impl FnOnce(&mut Atp, &mut Kernel<'_, '_, Host>),
    ) -> Vec<Mblk> {
        let Some(s) = self.streams.get_mut(&socket) else {
            return Vec::new();
        };
        run(
            cx,
            &self.dblks,
            host,
            socket,
            &mut s.queues,
            &mut self.timeouts,
            &mut s.atp,
            call,
        )
    }
}

impl StreamsAtp {
    /// The counters of every stream's ATP module, summed by name.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut sum = AtpStats::default().named();
        for s in self.code.streams.values() {
            for ((_, total), (_, v)) in sum.iter_mut().zip(s.atp.stats.named()) {
                *total += v;
            }
        }
        sum
    }
}

impl Code for Streams {
    fn attach(&mut self, _host: &mut Host, socket: u8, _cx: &mut Cx) -> Result<(), UpiError> {
        let atp = Atp::new();
        let queues = Queues::default();
        self.streams.insert(socket, Stream { atp, queues });
        Ok(())
    }

    fn detach(&mut self, _host: &mut Host, socket: u8, cx: &mut Cx) {
        self.streams.remove(&socket);
        self.timeouts.cancel_all(socket, cx);
    }

    fn input(&mut self, host: &mut Host, info: &DdpInfo, msg: &mut Message, cx: &mut Cx) -> Input {
        let socket = info.dst.socket;
        let Some(before) = self.streams.get(&socket).map(|s| s.atp.stats) else {
            return Input::Dropped(DropReason::NoSession);
        };
        // What DDP sends up the stream: T_UNITDATA_IND, the packet as M_DATA.
        let src = TAddr::new(info.src.net, info.src.node, info.src.socket);
        // The packet handed over as the M_DATA block, without a copy.
        let built =
            unitdata_msg(&self.dblks, T_UNITDATA_IND, src, &[DDP_TYPE]).and_then(|mut mp| {
                mp.linkb(mblk_of(&self.dblks, msg)?);
                Ok(mp)
            });
        let Ok(mp) = built else {
            return Input::Dropped(DropReason::NoRoom);
        };
        let mut up = self.call(host, socket, cx, |atp, k| atp.put(k, Side::Read, mp));
        let Some(mut ind) = up.pop() else {
            let after = self.streams.get(&socket).map_or(before, |s| s.atp.stats);
            // Most packets that go no further were kept (a response, a
            // release): name the drop only when a drop counter moved.
            let drops = |s: &AtpStats| s.malformed + s.no_transaction + s.table_full + s.flow_drops;
            if drops(&after) == drops(&before) {
                return Input::Consumed;
            }
            return match dropped(&before.named(), &after.named()) {
                Some(r) => Input::Dropped(r),
                None => Input::Consumed,
            };
        };
        count_late(&up, cx);
        let Some(Tpi::UnitdataInd { src, opt }) = Tpi::of(&ind) else {
            return Input::Dropped(DropReason::Other("unexpected-primitive"));
        };
        let Some(rec) = AtpService::decode(&opt) else {
            return Input::Dropped(DropReason::Other("no-record"));
        };
        *msg = ind.unlinkb().map_or_else(Message::new, |d| message_of(&d));
        Input::Indication(wire::Addr::new(src.net, src.node, src.socket), rec)
    }

    fn output(&mut self, host: &mut Host, send: Outgoing, msg: Message, cx: &mut Cx) {
        let dest = TAddr::new(send.dst.net, send.dst.node, send.dst.socket);
        let opt = send.rec.encode();
        let built = with_bytes(&msg, |b| {
            unitdata_with(&self.dblks, T_UNITDATA_REQ, dest, &opt, b)
        });
        let Ok(mp) = built else {
            cx.count_drop(DropReason::NoRoom);
            return;
        };
        let up = self.call(host, send.socket, cx, |atp, k| atp.put(k, Side::Write, mp));
        count_late(&up, cx);
    }

    fn timer(&mut self, host: &mut Host, token: u64, cx: &mut Cx) {
        let (socket, id) = self.timeouts.fired(token);
        let up = self.call(host, socket, cx, |atp, k| atp.timeout(k, id));
        count_late(&up, cx);
    }
}

/// The registry's factory of `atp@streams` (`atp`'s options).
pub(super) fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ddp = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ddp"))?;
    let host = Host::new(ddp, Settings::from_config(c)?);
    let dblks: usize = c.options.get("dblks")?.unwrap_or(8192);
    Ok(Box::new(StreamsAtp::new(host, Streams::new(dblks))))
}
