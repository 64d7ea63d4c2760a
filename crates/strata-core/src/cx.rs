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
use crate::engine::{Core, Delivery, Owner, Path, Slots, Work, call_proto};
use crate::error::UpiError;
use crate::graph::Lower;
use crate::ids::{AppId, LinkId, PathId, ProtoId, SessionId, SessionRef, TimerId, Upper};
use crate::message::Message;
use crate::meta::{PacketMeta, Priority};
use crate::participant::{Addr, Participants};
use crate::time::Instant;
use crate::upi::{Open, Qos};

/// A protocol's context during a UPI call.
pub struct Cx<'a> {
    core: &'a mut Core,
    slots: &'a mut Slots,
    me: ProtoId,
    /// The session the call is about, when the engine knows it.
    current: Option<SessionRef>,
}

/// DAA: makes a path for `app` (and `session`), with an identifier assigned by the
/// first link protocol that assigns them. Without DAA, or without such a protocol
/// (a plain Ethernet stack under `--arch daa`), nothing is made and packets take
/// the layered way, counted as `daa-no-path` when they arrive.
pub(crate) fn make_path(
    core: &mut Core,
    slots: &mut Slots,
    app: AppId,
    session: Option<SessionRef>,
    qos: Qos,
    remote_id: u32,
    listening: bool,
) -> Result<(), UpiError> {
    if core.arch != Arch::Daa {
        return Ok(());
    }
    let pid = core.paths.insert(Path {
        app,
        session,
        local_id: 0,
        remote_id,
        priority: qos.priority,
        bottom: ProtoId(0),
        listening,
        record: None,
    });
    let mut bottoms: Vec<ProtoId> = core.links.iter().map(|l| l.node.upper).collect();
    bottoms.dedup();
    let mut refused = None;
    for bottom in bottoms {
        match call_proto(core, slots, bottom, |p, cx| {
            p.assign_app_id(pid, qos.app_id, cx)
        }) {
            Ok(Ok(id)) => {
                if let Some(path) = core.paths.get_mut(pid) {
                    path.local_id = id;
                    path.bottom = bottom;
                }
                return Ok(());
            }
            Ok(Err(UpiError::Unsupported(_))) | Err(_) => {}
            Ok(Err(e)) => refused = Some(e),
        }
    }
    core.paths.remove(pid);
    match refused {
        Some(e) => Err(e),
        None => {
            core.stats.event("daa-no-app-id");
            Ok(())
        }
    }
}

/// DAA: removes the path of `session`, if any, and releases its identifier.
pub(crate) fn forget_path(core: &mut Core, slots: &mut Slots, session: SessionRef) {
    let Some(pid) = core.paths.of_session(session) else {
        return;
    };
    if let Some(path) = core.paths.remove(pid) {
        let _ = call_proto(core, slots, path.bottom, |p, cx| {
            p.release_app_id(path.local_id, cx)
        });
    }
}

fn remote_app_id(parts: &Participants) -> Option<u32> {
    let mut remote = parts.remote.clone();
    while let Some(a) = remote.pop() {
        if let Addr::AppId(id) = a {
            return Some(id);
        }
    }
    None
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
    pub(crate) fn new(
        core: &'a mut Core,
        slots: &'a mut Slots,
        me: ProtoId,
        current: Option<SessionRef>,
    ) -> Self {
        Cx {
            core,
            slots,
            me,
            current,
        }
    }

    /// Says that what follows is done for session `sess` of this protocol (a timer
    /// handler retransmitting for a connection): messages made from now on belong
    /// to it, and under DAA travel on its path. Push and pop calls set this already.
    pub fn acting_for(&mut self, sess: SessionId) {
        self.current = Some(SessionRef::new(self.me, sess));
    }

    /// Declares a data manipulation of this layer over `msg`, the data the layer
    /// passes up (seed 000 §2.2). Under LLM it runs now, as its own pass, and its
    /// verdict is returned (false: a checksum failed; drop the packet). Under ILLM
    /// and DAA it is kept and run fused with the other layers' stages, block by
    /// block, just before delivery, and a failed verdict drops the packet then,
    /// counted against this layer; the call returns true.
    pub fn stage(&mut self, msg: &mut Message, mut stage: crate::ilp::Stage) -> bool {
        if self.core.arch == Arch::Llm {
            return crate::ilp::run_one(&mut stage, msg);
        }
        let seen = matches!(stage, crate::ilp::Stage::Checksum(_)).then(|| msg.clone());
        self.core.stages.push(crate::engine::Deferred {
            proto: self.me,
            seen_len: msg.len(),
            stage,
            seen,
        });
        true
    }

    /// A DAA path, for the protocol that writes its identifiers into headers.
    pub fn path(&self, id: PathId) -> Option<&Path> {
        self.core.paths.get(id)
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

    /// Queues `msg` for a lower session's `push`. Under DAA a message that has no
    /// path yet takes the path of the session this call is about.
    #[inline]
    pub fn push(&mut self, lower: SessionRef, mut msg: Message) {
        if self.core.arch == Arch::Daa
            && msg.path().is_none()
            && let Some(current) = self.current
        {
            msg.set_path(self.core.paths.of_session(current));
        }
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

    /// The largest frame payload `link`'s driver cuts into MTU-sized frames
    /// (segmentation offload), 0 when it does not.
    pub fn link_segmentation(&self, link: LinkId) -> usize {
        self.core
            .links
            .get(link.index())
            .map_or(0, |l| l.segmentation)
    }

    /// Queues data for an application. Data-manipulation stages the packet's
    /// layers declared run first (fused, under ILLM and DAA).
    pub fn deliver(
        &mut self,
        app: AppId,
        session: Option<SessionRef>,
        mut msg: Message,
        meta: &PacketMeta,
    ) {
        if !self.core.fuse_stages(&mut msg) {
            return;
        }
        self.core.work.push_back(Work::Deliver(Box::new(Delivery {
            app,
            session,
            msg,
            meta: meta.clone(),
        })));
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
            Upper::App(app) => {
                let peer = self.core.reply_to;
                // A session opened for a packet answers with that packet's urgency.
                let qos = Qos {
                    priority: self.core.reply_priority,
                    app_id: None,
                };
                if make_path(self.core, self.slots, app, Some(session), qos, peer, false).is_err() {
                    self.core.stats.event("daa-path-refused");
                }
                self.notify(app, AppEvent::OpenDone { session, parts })
            }
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

    /// Counts `n` occurrences of a named event against this protocol.
    pub fn count_n(&mut self, event: &'static str, n: u64) {
        self.core.counters[self.me.index()].events.add(event, n);
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
        self.bind_with(proto, number, Qos::default())
    }

    /// Binds like [`bind`](Self::bind), asking for a quality of service: under DAA
    /// the binding gets a path whose identifier is `qos.app_id` when given (a
    /// server's well-known one).
    pub fn bind_with(&mut self, proto: ProtoId, number: u32, qos: Qos) -> Result<(), UpiError> {
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
                make_path(self.core, self.slots, self.me, None, qos, 0, false)
            }
        }
    }

    /// Opens a session on `proto` for this application. Under DAA the session
    /// gets a path, addressed to the peer's application identifier when the remote
    /// participant names one (`Addr::AppId`), or to the sender of the packet being
    /// handled when the application opens in response to one.
    pub fn open(
        &mut self,
        proto: ProtoId,
        parts: Participants,
        qos: Qos,
    ) -> Result<SessionRef, UpiError> {
        let remote = remote_app_id(&parts).unwrap_or(self.core.reply_to);
        let session = open_in(
            self.core,
            self.slots,
            Upper::App(self.me),
            proto,
            parts,
            qos,
        )?;
        if let Err(e) = make_path(
            self.core,
            self.slots,
            self.me,
            Some(session),
            qos,
            remote,
            false,
        ) {
            let _ = self.close(session);
            return Err(e);
        }
        Ok(session)
    }

    /// Enables passive opens on `proto` for this application. Under DAA the
    /// service gets a path whose identifier is `qos.app_id` when given.
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
        )?;
        make_path(self.core, self.slots, self.me, None, qos, 0, true)
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

    /// Queues `msg` for sending on `session` (under DAA, on its path).
    #[inline]
    pub fn send(&mut self, session: SessionRef, mut msg: Message) {
        if self.core.arch == Arch::Daa {
            msg.set_path(self.core.paths.of_session(session));
        }
        self.core.work.push_back(Work::Push { to: session, msg });
    }

    /// Closes a session (and its DAA path).
    pub fn close(&mut self, session: SessionRef) -> Result<(), UpiError> {
        forget_path(self.core, self.slots, session);
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
