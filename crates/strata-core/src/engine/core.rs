//! The engine's state and its data path: every call into a protocol or an
//! application object goes through the functions here, whether the engine
//! makes it (a received frame, a timer) or a protocol does through its
//! [`Cx`] (a push, a delivery). `Cx` and `AppCx` are views on this state and
//! call only these functions; the engine's loop and its architectures
//! (`mod.rs`, `inbound.rs`) call them too. Nothing here calls back into the
//! loop, so the dependency runs one way: loop → core ← contexts.
//!
//! What runs at once and what is queued: a push or a delivery runs at once,
//! as a direct call, when nothing is queued before it and its protocol or
//! application is not on the call stack already; otherwise it joins the FIFO
//! work queue behind what is there, so the order in which work was emitted is
//! the order in which it runs, and no object is ever entered twice. Events
//! (`AppEvent`) are always queued: an application told of a new session acts
//! on it (a control call on the very protocol that announced it), which must
//! wait until that protocol's call has returned.

use std::collections::VecDeque;

use rand_chacha::ChaCha8Rng;

use super::paths::Paths;
use super::queues::{Arrival, RxFrame, UrgencyQueue};
use super::timers::Timers;
use crate::app::{App, AppEvent};
use crate::arch::Arch;
use crate::counters::{Counters, DropReason};
use crate::cx::{AppCx, Cx};
use crate::error::UpiError;
use crate::graph::{LinkNode, Node};
use crate::ids::{AppId, ProtoId, SessionRef, Upper};
use crate::message::Message;
use crate::meta::PacketMeta;
use crate::participant::{Addr, Participants};
use crate::time::Instant;
use crate::upi::Protocol;
use crate::upi::{Open, Qos};

/// Frame counts of one link, as the engine sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames received from the driver.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames refused because the receive queue was full.
    pub rx_dropped: u64,
    /// Frames handed to the driver.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Frames refused because the link's send queue was full.
    pub tx_dropped: u64,
}

pub(crate) struct LinkState {
    pub node: LinkNode,
    pub txq: UrgencyQueue<Message>,
    pub stats: LinkStats,
    /// The largest frame payload the link's driver cuts into MTU-sized
    /// frames (segmentation offload), 0 when it does not.
    pub segmentation: usize,
}

/// Work that could not run at once, run in order by the engine.
pub(crate) enum Work {
    Push {
        to: SessionRef,
        msg: Message,
    },
    /// Boxed: a delivery is queued only behind an event (a connection's first
    /// data after its announcement), and an inline `PacketMeta` would make
    /// every queued push as large.
    Deliver(Box<Delivery>),
    Event {
        app: AppId,
        event: AppEvent,
    },
}

/// A delivery that waits in the queue.
pub(crate) struct Delivery {
    pub app: AppId,
    pub session: Option<SessionRef>,
    pub msg: Message,
    pub meta: PacketMeta,
}

/// A data-manipulation stage a layer declared, waiting to run fused.
pub(crate) struct Deferred {
    pub proto: ProtoId,
    pub stage: crate::ilp::Stage,
    /// How long the data was when the layer saw it.
    pub seen_len: usize,
    /// For a checksum, the message as the layer saw it, kept when a layer
    /// above pops (`Core::keep_seen`): the part of its data upper layers strip
    /// as their headers is summed from here before the fused pass. Other
    /// stages must cover exactly the delivered data and keep nothing.
    pub seen: Option<Message>,
}

impl AsMut<crate::ilp::Stage> for Deferred {
    fn as_mut(&mut self) -> &mut crate::ilp::Stage {
        &mut self.stage
    }
}

/// Everything of the engine except the protocol and application objects, so
/// that an object being called can be handed the rest mutably.
pub(crate) struct Core {
    pub now: Instant,
    pub arch: Arch,
    pub nodes: Vec<Node>,
    /// Per protocol: its pop only strips once its demux has run (ILLM skips
    /// it), asked once when the engine is made.
    pub strip_only: Vec<bool>,
    pub links: Vec<LinkState>,
    pub counters: Vec<Counters>,
    pub stats: Counters,
    pub work: VecDeque<Work>,
    pub rx: UrgencyQueue<RxFrame>,
    pub timers: Timers,
    /// Protocols that asked for [`Protocol::on_idle`](crate::Protocol),
    /// in the order they asked (`Cx::when_idle`).
    pub idle: Vec<ProtoId>,
    pub rng: ChaCha8Rng,
    pub paths: Paths,
    /// Demux calls made, to show DAA's single demux against LLM's one per layer.
    pub demux_calls: u64,
    /// ILLM and DAA: data-manipulation stages declared by the layers of the packet
    /// being processed, fused before delivery.
    pub stages: Vec<Deferred>,
    /// Arrival records (packet metadata) not in use, boxed so that a
    /// received frame carries its metadata from its arrival (DAA's early
    /// demux fills it then) to its processing as a pointer, and lends it to
    /// every step of the walk, instead of copying a few hundred bytes at each
    /// hand-off. Grows to the most frames queued at once and stays there: no
    /// allocation per packet. (The boxes are the point: a box moves as a
    /// pointer, a `PacketMeta` as its bytes.)
    #[allow(clippy::vec_box)]
    pub arrivals: Vec<Box<Arrival>>,
}

impl Core {
    /// The arrival record of a frame received on `link` now, from the pool.
    #[inline]
    pub(crate) fn arrival(&mut self, link: crate::ids::LinkId) -> Box<Arrival> {
        match self.arrivals.pop() {
            Some(mut a) => {
                a.meta.reset(link, self.now);
                a.early = None;
                a
            }
            None => Box::new(Arrival {
                meta: PacketMeta::new(link, self.now),
                early: None,
            }),
        }
    }

    /// Before a layer above pops `msg`: checksum stages declared since the
    /// last pop keep the message as their layer saw it, since that pop may
    /// strip a header their sum covers. A checksum of the topmost layer keeps
    /// nothing (no layer above pops), so UDP's costs no clone.
    #[inline]
    pub(crate) fn keep_seen(&mut self, msg: &Message) {
        if self.stages.is_empty() {
            return;
        }
        self.keep_seen_of(msg);
    }

    fn keep_seen_of(&mut self, msg: &Message) {
        for d in self.stages.iter_mut().rev() {
            if d.seen.is_some() {
                break;
            }
            if matches!(d.stage, crate::ilp::Stage::Checksum(_)) && d.seen_len == msg.len() {
                d.seen = Some(msg.clone());
            }
        }
    }

    /// Runs the deferred stages of the packet being delivered, fused (ILP). Returns
    /// false, having counted the drop against the stage's layer, when a verdict
    /// fails or a stage's data does not line up with the delivered data.
    #[inline]
    pub(crate) fn fuse_stages(&mut self, msg: &mut Message) -> bool {
        self.stages.is_empty() || self.fuse(msg)
    }

    fn fuse(&mut self, msg: &mut Message) -> bool {
        let payload = msg.len();
        for d in self.stages.iter_mut() {
            let stripped = d.seen_len.saturating_sub(payload);
            if stripped == 0 {
                continue;
            }
            // Upper layers' headers lay inside this layer's data. A checksum
            // can still read them from the message as the layer saw it; a
            // stage that changes bytes cannot, since upper layers read them as
            // they were.
            let (crate::ilp::Stage::Checksum(sum), Some(seen)) = (&mut d.stage, &d.seen) else {
                self.counters[d.proto.index()].drop(DropReason::Other("ilp-range"));
                self.stages.clear();
                return false;
            };
            let mut head = [0u8; 256];
            let mut at = 0;
            while at < stripped {
                let n = (stripped - at).min(head.len());
                seen.copy_to_slice(at, &mut head[..n]);
                sum.add(&head[..n]);
                at += n;
            }
        }
        self.stats.ilp_fused += 1;
        let failed = crate::ilp::run_fused(&mut self.stages, msg);
        let owner = failed.map(|i| self.stages[i].proto);
        self.stages.clear();
        match owner {
            None => true,
            Some(p) => {
                self.counters[p.index()].drop(DropReason::BadChecksum);
                false
            }
        }
    }
}

/// The protocol and application objects. A slot is empty while its object is
/// being called, so a re-entrant call is refused (or queued) instead of
/// aliasing. A slot is an `Option` of the box, two words: taken and put
/// back as two registers (an enum with a third state took a 24-byte copy
/// through the stack around every delivery, which stalled; see `RxFrame`).
pub(crate) struct Slots {
    pub protos: Vec<Option<Box<dyn Protocol>>>,
    pub apps: Vec<Option<Box<dyn App>>>,
    /// Per application: removed for good (its empty slot is not a call in
    /// progress).
    pub apps_removed: Vec<bool>,
}

/// Calls protocol `id` with a context for it.
pub(crate) fn call_proto<R>(
    core: &mut Core,
    slots: &mut Slots,
    id: ProtoId,
    f: impl FnOnce(&mut dyn Protocol, &mut Cx) -> R,
) -> Result<R, UpiError> {
    call_proto_for(core, slots, id, None, f)
}

/// Calls protocol `id` about one of its sessions: messages it makes while
/// handling the call belong to that session (and, under DAA, to its path).
/// Forced inline: it is the glue of every layer's pop and push, and its
/// callers are few.
#[inline(always)]
pub(crate) fn call_proto_for<R>(
    core: &mut Core,
    slots: &mut Slots,
    id: ProtoId,
    current: Option<SessionRef>,
    f: impl FnOnce(&mut dyn Protocol, &mut Cx) -> R,
) -> Result<R, UpiError> {
    let slot = slots
        .protos
        .get_mut(id.index())
        .ok_or_else(|| UpiError::NoSuchObject(id.to_string()))?;
    let mut proto = slot.take().ok_or(UpiError::Busy)?;
    let result = {
        let mut cx = Cx::new(core, slots, id, current);
        f(proto.as_mut(), &mut cx)
    };
    slots.protos[id.index()] = Some(proto);
    Ok(result)
}

/// Calls application `id` with a context for it.
#[inline]
pub(crate) fn call_app<R>(
    core: &mut Core,
    slots: &mut Slots,
    id: AppId,
    f: impl FnOnce(&mut dyn App, &mut AppCx) -> R,
) -> Result<R, UpiError> {
    let slot = slots
        .apps
        .get_mut(id.index())
        .ok_or_else(|| UpiError::NoSuchObject(id.to_string()))?;
    let Some(mut app) = slot.take() else {
        return Err(if slots.apps_removed[id.index()] {
            UpiError::NoSuchObject(id.to_string())
        } else {
            UpiError::Busy
        });
    };
    let result = {
        let mut cx = AppCx::new(core, slots, id);
        f(app.as_mut(), &mut cx)
    };
    slots.apps[id.index()] = Some(app);
    Ok(result)
}

/// The DAA application identifier the remote participant names, if any.
pub(crate) fn remote_app_id(parts: &Participants) -> Option<u32> {
    let mut remote = parts.remote.clone();
    while let Some(a) = remote.pop() {
        if let Addr::AppId(id) = a {
            return Some(id);
        }
    }
    None
}

/// Opens a session of `lower` for `upper`, with `upper`'s number in `lower`.
pub(crate) fn open_in(
    core: &mut Core,
    slots: &mut Slots,
    upper: Upper,
    lower: ProtoId,
    parts: Participants,
    qos: Qos,
) -> Result<SessionRef, UpiError> {
    let number = core
        .nodes
        .get(lower.index())
        .ok_or_else(|| UpiError::NoSuchObject(lower.to_string()))?
        .number_of(upper);
    open_with(core, slots, upper, lower, number, parts, qos)
}

/// Opens a session of `lower` for `upper` carrying `number`.
pub(crate) fn open_with(
    core: &mut Core,
    slots: &mut Slots,
    upper: Upper,
    lower: ProtoId,
    number: Option<u32>,
    parts: Participants,
    qos: Qos,
) -> Result<SessionRef, UpiError> {
    let req = Open {
        upper,
        number,
        parts,
        qos,
    };
    let sess = call_proto(core, slots, lower, |p, cx| p.open(req, cx))??;
    Ok(SessionRef::new(lower, sess))
}

/// Enables (or withdraws) passive opens on `lower` for `upper`.
pub(crate) fn enable_in(
    core: &mut Core,
    slots: &mut Slots,
    upper: Upper,
    lower: ProtoId,
    parts: Participants,
    qos: Qos,
    enable: bool,
) -> Result<(), UpiError> {
    let number = core
        .nodes
        .get(lower.index())
        .ok_or_else(|| UpiError::NoSuchObject(lower.to_string()))?
        .number_of(upper);
    let req = Open {
        upper,
        number,
        parts,
        qos,
    };
    call_proto(core, slots, lower, |p, cx| {
        if enable {
            p.open_enable(req, cx)
        } else {
            p.open_disable(req, cx)
        }
    })?
}

/// The protocol called `name`.
pub(crate) fn proto_by_name(core: &Core, name: &str) -> Option<ProtoId> {
    core.nodes
        .iter()
        .position(|n| n.name == name)
        .map(|i| ProtoId(i as u16))
}

/// Whether work for protocol `p` may run at once: nothing waits before it and
/// `p` is not on the call stack.
#[inline]
fn free_proto(core: &Core, slots: &Slots, p: ProtoId) -> bool {
    core.work.is_empty() && slots.protos.get(p.index()).is_some_and(Option::is_some)
}

/// A push to session `to`: its protocol's `push` runs at once when it may
/// (see the module docs), or later, in order, from the work queue.
#[inline]
pub(crate) fn push(core: &mut Core, slots: &mut Slots, to: SessionRef, msg: Message) {
    if free_proto(core, slots, to.proto) {
        run_push(core, slots, to, msg);
    } else {
        core.work.push_back(Work::Push { to, msg });
    }
}

/// Runs a push now: counts it against the protocol and calls its `push`.
#[inline]
pub(crate) fn run_push(core: &mut Core, slots: &mut Slots, to: SessionRef, msg: Message) {
    let Some(c) = core.counters.get_mut(to.proto.index()) else {
        core.stats.drop(DropReason::NoSession);
        return;
    };
    c.packets_out += 1;
    c.bytes_out += msg.len() as u64;
    let pushed = call_proto_for(core, slots, to.proto, Some(to), |p, cx| {
        p.push(to.sess, msg, cx)
    });
    if pushed.is_err() {
        core.stats.drop(DropReason::NoSession);
    }
}

/// Delivers a packet to an application now, after its deferred stages; the
/// application may answer on the path it came by (DAA).
#[inline]
pub(crate) fn deliver(
    core: &mut Core,
    slots: &mut Slots,
    app: AppId,
    session: Option<SessionRef>,
    mut msg: Message,
    meta: &PacketMeta,
) {
    if !core.fuse_stages(&mut msg) {
        return;
    }
    let outer = core.paths.answer(meta.peer, meta.priority);
    let delivered = call_app(core, slots, app, |a, cx| a.receive(session, msg, meta, cx));
    core.paths.restore(outer);
    match delivered {
        Ok(()) => core.stats.delivered += 1,
        Err(_) => core.stats.drop(DropReason::Other("no-app")),
    }
}

/// A delivery a protocol makes itself (`Cx::deliver`): at once when nothing
/// waits before it and the application is not on the call stack, else queued.
pub(crate) fn deliver_from(
    core: &mut Core,
    slots: &mut Slots,
    app: AppId,
    session: Option<SessionRef>,
    mut msg: Message,
    meta: &PacketMeta,
) {
    let free = core.work.is_empty() && slots.apps.get(app.index()).is_some_and(Option::is_some);
    if free {
        deliver(core, slots, app, session, msg, meta);
        return;
    }
    if !core.fuse_stages(&mut msg) {
        return;
    }
    core.work.push_back(Work::Deliver(Box::new(Delivery {
        app,
        session,
        msg,
        meta: meta.clone(),
    })));
}

/// Queues an event for an application.
pub(crate) fn notify(core: &mut Core, app: AppId, event: AppEvent) {
    core.work.push_back(Work::Event { app, event });
}

/// Runs one queued item.
pub(crate) fn exec(core: &mut Core, slots: &mut Slots, work: Work) {
    match work {
        Work::Push { to, msg } => run_push(core, slots, to, msg),
        Work::Deliver(d) => {
            let Delivery {
                app,
                session,
                msg,
                meta,
            } = *d;
            deliver(core, slots, app, session, msg, &meta);
        }
        Work::Event { app, event } => {
            if let AppEvent::Closed { session, .. } = &event {
                super::paths::forget(core, slots, *session);
            }
            if call_app(core, slots, app, |a, cx| a.event(event, cx)).is_err() {
                core.stats.event("event-for-vanished-app");
            }
        }
    }
}
