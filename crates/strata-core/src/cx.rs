//! What a protocol or application may do while the engine calls it.
//!
//! [`Cx`] is a protocol's window on the engine: push to a lower session, transmit
//! on its link, deliver upward, open lower sessions, set timers, read `now`, draw
//! random numbers, count. [`AppCx`] is the same for an application anchor. Data-path
//! work (push, deliver, events) is queued and run later by the engine; control-path
//! calls (open, control) run at once, since they are rare and need an answer.

use rand::RngExt;

use crate::app::AppEvent;
use crate::arch::Arch;
use crate::control::{Control, Reply};
use crate::counters::DropReason;
use crate::engine::{Core, Owner, Slots, Work, call_proto};
use crate::error::UpiError;
use crate::graph::Lower;
use crate::ids::{AppId, LinkId, ProtoId, SessionId, SessionRef, TimerId, Upper};
use crate::message::Message;
use crate::meta::{PacketMeta, Priority};
use crate::participant::Participants;
use crate::time::Instant;
use crate::upi::{Open, Qos};

/// A protocol's context during a UPI call.
pub struct Cx<'a> {
    core: &'a mut Core,
    slots: &'a mut Slots,
    me: ProtoId,
}

fn open_in(
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

fn open_with(
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

fn enable_in(
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

fn proto_by_name(core: &Core, name: &str) -> Option<ProtoId> {
    core.nodes
        .iter()
        .position(|n| n.name == name)
        .map(|i| ProtoId(i as u16))
}

impl<'a> Cx<'a> {
    pub(crate) fn new(core: &'a mut Core, slots: &'a mut Slots, me: ProtoId) -> Self {
        Cx { core, slots, me }
    }

    /// The protocol being called.
    pub fn me(&self) -> ProtoId {
        self.me
    }

    /// Its instance name.
    pub fn name(&self) -> &str {
        &self.core.nodes[self.me.index()].name
    }

    /// Engine time.
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// The engine's architecture (protocols rarely need it; the engine applies it).
    pub fn arch(&self) -> Arch {
        self.core.arch
    }

    /// What sits below this protocol, in config order.
    pub fn lowers(&self) -> &[Lower] {
        &self.core.nodes[self.me.index()].lowers
    }

    /// This protocol's number in `lower`'s number space.
    pub fn number_in(&self, lower: ProtoId) -> Option<u32> {
        self.core
            .nodes
            .get(lower.index())?
            .number_of(Upper::Proto(self.me))
    }

    /// Who is registered above this protocol under `number`.
    pub fn upper_for(&self, number: u32) -> Option<Upper> {
        self.core.nodes[self.me.index()].upper_for(number)
    }

    /// The first protocol of the graph of kind `kind` (a companion such as ICMP).
    pub fn find_kind(&self, kind: &str) -> Option<ProtoId> {
        self.core
            .nodes
            .iter()
            .position(|n| n.kind == kind)
            .map(|i| ProtoId(i as u16))
    }

    /// Queues `msg` for a lower session's `push`.
    pub fn push(&mut self, lower: SessionRef, msg: Message) {
        self.core.work.push_back(Work::Push { to: lower, msg });
    }

    /// Queues a frame for `link` at the given urgency; a full queue drops it and
    /// counts the drop on the link.
    pub fn transmit(&mut self, link: LinkId, frame: Message, priority: Priority) {
        let Some(state) = self.core.links.get_mut(link.index()) else {
            self.core.counters[self.me.index()].drop(DropReason::Other("no-link"));
            return;
        };
        if state.txq.push(priority, frame).is_err() {
            state.stats.tx_dropped += 1;
            self.core.counters[self.me.index()].drop(DropReason::QueueFull);
        }
    }

    /// Queues data for an application.
    pub fn deliver(
        &mut self,
        app: AppId,
        session: Option<SessionRef>,
        msg: Message,
        meta: &PacketMeta,
    ) {
        self.core.work.push_back(Work::Deliver {
            app,
            session,
            msg,
            meta: meta.clone(),
        });
    }

    /// Queues an event for an application.
    pub fn notify(&mut self, app: AppId, event: AppEvent) {
        self.core.work.push_back(Work::Event { app, event });
    }

    /// Announces a session this protocol made through a passive open to the upper
    /// that enabled it (the x-kernel's `openDone` upcall).
    pub fn open_done(&mut self, upper: Upper, sess: SessionId, parts: Participants) {
        let session = SessionRef::new(self.me, sess);
        match upper {
            Upper::App(app) => self.notify(app, AppEvent::OpenDone { session, parts }),
            Upper::Proto(p) => {
                let called = call_proto(self.core, self.slots, p, |proto, cx| {
                    proto.open_done(session, parts, cx)
                });
                if called.is_err() {
                    self.core.counters[self.me.index()].event("open-done-refused");
                }
            }
        }
    }

    /// Opens a session on lower protocol `lower` for this protocol.
    pub fn open(
        &mut self,
        lower: ProtoId,
        parts: Participants,
        qos: Qos,
    ) -> Result<SessionRef, UpiError> {
        open_in(
            self.core,
            self.slots,
            Upper::Proto(self.me),
            lower,
            parts,
            qos,
        )
    }

    /// Opens a session on `lower` that carries another protocol's number: how a
    /// neighbour-resolution protocol sends packets it held for the network layer
    /// (ARP's pending queue sends IP packets with IP's ethertype).
    pub fn open_numbered(
        &mut self,
        lower: ProtoId,
        number: u32,
        parts: Participants,
        qos: Qos,
    ) -> Result<SessionRef, UpiError> {
        open_with(
            self.core,
            self.slots,
            Upper::Proto(self.me),
            lower,
            Some(number),
            parts,
            qos,
        )
    }

    /// Enables passive opens on lower protocol `lower` for this protocol.
    pub fn open_enable(
        &mut self,
        lower: ProtoId,
        parts: Participants,
        qos: Qos,
    ) -> Result<(), UpiError> {
        enable_in(
            self.core,
            self.slots,
            Upper::Proto(self.me),
            lower,
            parts,
            qos,
            true,
        )
    }

    /// Closes a session of another protocol.
    pub fn close(&mut self, s: SessionRef) {
        if call_proto(self.core, self.slots, s.proto, |p, cx| p.close(s.sess, cx)).is_err() {
            self.core.counters[self.me.index()].event("close-refused");
        }
    }

    /// A control operation on another protocol or one of its sessions.
    pub fn control(
        &mut self,
        target: ProtoId,
        sess: Option<SessionId>,
        op: Control,
    ) -> Result<Reply, UpiError> {
        call_proto(self.core, self.slots, target, |p, cx| {
            p.control(sess, op, cx)
        })?
    }

    /// Sets a timer that calls this protocol's `on_timer(token)` at `at`.
    pub fn set_timer(&mut self, at: Instant, token: u64) -> TimerId {
        self.core.timers.set(at, Owner::Proto(self.me), token)
    }

    /// Cancels a timer (harmless if it already fired).
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.core.timers.cancel(id);
    }

    /// A random number from the engine's generator (seeded, so simulations repeat).
    pub fn random_u32(&mut self) -> u32 {
        self.core.rng.random()
    }

    /// A random 64-bit number from the engine's generator.
    pub fn random_u64(&mut self) -> u64 {
        self.core.rng.random()
    }

    /// Counts a named event against this protocol.
    pub fn count(&mut self, event: &'static str) {
        self.core.counters[self.me.index()].event(event);
    }

    /// Counts a drop against this protocol (for drops outside demux and pop, whose
    /// results the engine counts itself).
    pub fn count_drop(&mut self, reason: DropReason) {
        self.core.counters[self.me.index()].drop(reason);
    }
}

/// An application's context during a callback, or when acting for it from outside
/// through `Engine::with_app`.
pub struct AppCx<'a> {
    core: &'a mut Core,
    slots: &'a mut Slots,
    me: AppId,
}

impl<'a> AppCx<'a> {
    pub(crate) fn new(core: &'a mut Core, slots: &'a mut Slots, me: AppId) -> Self {
        AppCx { core, slots, me }
    }

    /// The application being called.
    pub fn me(&self) -> AppId {
        self.me
    }

    /// Engine time.
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// The engine's architecture.
    pub fn arch(&self) -> Arch {
        self.core.arch
    }

    /// The protocol called `name`.
    pub fn proto(&self, name: &str) -> Option<ProtoId> {
        proto_by_name(self.core, name)
    }

    /// Binds this application above `proto` under `number` (an ethertype, an IP
    /// protocol number), for applications that sit directly on a demultiplexing
    /// layer (seed 000's ETH and IP-ETH stacks).
    pub fn bind(&mut self, proto: ProtoId, number: u32) -> Result<(), UpiError> {
        let node = self
            .core
            .nodes
            .get_mut(proto.index())
            .ok_or_else(|| UpiError::NoSuchObject(proto.to_string()))?;
        match node.upper_for(number) {
            Some(Upper::App(a)) if a == self.me => Ok(()),
            Some(_) => Err(UpiError::InUse),
            None => {
                node.above.push((number, Upper::App(self.me)));
                Ok(())
            }
        }
    }

    /// Opens a session on `proto` for this application.
    pub fn open(
        &mut self,
        proto: ProtoId,
        parts: Participants,
        qos: Qos,
    ) -> Result<SessionRef, UpiError> {
        open_in(
            self.core,
            self.slots,
            Upper::App(self.me),
            proto,
            parts,
            qos,
        )
    }

    /// Enables passive opens on `proto` for this application.
    pub fn open_enable(
        &mut self,
        proto: ProtoId,
        parts: Participants,
        qos: Qos,
    ) -> Result<(), UpiError> {
        enable_in(
            self.core,
            self.slots,
            Upper::App(self.me),
            proto,
            parts,
            qos,
            true,
        )
    }

    /// Withdraws a passive open.
    pub fn open_disable(
        &mut self,
        proto: ProtoId,
        parts: Participants,
        qos: Qos,
    ) -> Result<(), UpiError> {
        enable_in(
            self.core,
            self.slots,
            Upper::App(self.me),
            proto,
            parts,
            qos,
            false,
        )
    }

    /// Queues `msg` for sending on `session`.
    pub fn send(&mut self, session: SessionRef, msg: Message) {
        self.core.work.push_back(Work::Push { to: session, msg });
    }

    /// Closes a session.
    pub fn close(&mut self, session: SessionRef) -> Result<(), UpiError> {
        call_proto(self.core, self.slots, session.proto, |p, cx| {
            p.close(session.sess, cx)
        })
    }

    /// A control operation on a protocol or one of its sessions.
    pub fn control(
        &mut self,
        proto: ProtoId,
        sess: Option<SessionId>,
        op: Control,
    ) -> Result<Reply, UpiError> {
        call_proto(self.core, self.slots, proto, |p, cx| {
            p.control(sess, op, cx)
        })?
    }

    /// Sets a timer that calls this application's `timer(token)` at `at`.
    pub fn set_timer(&mut self, at: Instant, token: u64) -> TimerId {
        self.core.timers.set(at, Owner::App(self.me), token)
    }

    /// Cancels a timer.
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.core.timers.cancel(id);
    }
}
