//! What a protocol or application may do while the engine calls it.
//!
//! [`Cx`] is a protocol's window on the engine: push to a lower session, transmit
//! on its link, deliver upward, open lower sessions, set timers, read `now`, draw
//! random numbers, count. [`AppCx`] is the same for an application anchor. Both
//! are views on the engine's core: every operation is a call of the engine's
//! own data path (`engine/core.rs`), which decides what runs at once — a push
//! or a delivery, when nothing waits before it and its target is not on the
//! call stack — and what is queued (events, and work that would overtake or
//! re-enter). Control-path calls (open, control) always run at once, since
//! they are rare and need an answer.

use rand::RngExt;

use crate::app::AppEvent;
use crate::arch::Arch;
use crate::control::{Control, Reply};
use crate::counters::DropReason;
use crate::engine::Path;
use crate::engine::core::{
    Core, Deferred, Slots, call_proto, deliver_from, enable_in, notify, open_in, open_with,
    proto_by_name, push as push_work, remote_app_id,
};
use crate::engine::paths;
use crate::engine::timers::Owner;
use crate::error::UpiError;
use crate::graph::Lower;
use crate::ids::{AppId, LinkId, PathId, ProtoId, SessionId, SessionRef, TimerId, Upper};
use crate::message::Message;
use crate::meta::{PacketMeta, Priority};
use crate::participant::Participants;
use crate::time::Instant;
use crate::upi::Qos;

/// A protocol's context during a UPI call.
pub struct Cx<'a> {
    core: &'a mut Core,
    slots: &'a mut Slots,
    me: ProtoId,
    /// The session the call is about, when the engine knows it.
    current: Option<SessionRef>,
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
    #[inline]
    pub fn acting_for(&mut self, sess: SessionId) {
        self.current = Some(SessionRef::new(self.me, sess));
    }

    /// Declares a data manipulation of this layer over `msg`, the data the layer
    /// passes up (seed 000 §2.2). Under LLM it runs now, as its own pass, and its
    /// verdict is returned (false: a checksum failed; drop the packet). Under ILLM
    /// and DAA it is kept and run fused with the other layers' stages, block by
    /// block, just before delivery, and a failed verdict drops the packet then,
    /// counted against this layer; the call returns true.
    #[inline]
    pub fn stage(&mut self, msg: &mut Message, mut stage: crate::ilp::Stage) -> bool {
        if self.core.arch == Arch::Llm {
            return crate::ilp::run_one(&mut stage, msg);
        }
        // Should a layer above pop, the engine keeps the message as this
        // layer saw it for a checksum first (`Deferred::seen`).
        self.core.stages.push(Deferred {
            proto: self.me,
            seen_len: msg.len(),
            stage,
            seen: None,
        });
        true
    }

    /// A DAA path, for the protocol that writes its identifiers into headers.
    #[inline]
    pub fn path(&self, id: PathId) -> Option<&Path> {
        self.core.paths.get(id)
    }

    /// The protocol being called.
    #[inline]
    pub fn me(&self) -> ProtoId {
        self.me
    }

    /// Its instance name.
    #[inline]
    pub fn name(&self) -> &str {
        &self.core.nodes[self.me.index()].name
    }

    /// Engine time.
    #[inline]
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// The engine's architecture (protocols rarely need it; the engine applies it).
    #[inline]
    pub fn arch(&self) -> Arch {
        self.core.arch
    }

    /// What sits below this protocol, in config order.
    #[inline]
    pub fn lowers(&self) -> &[Lower] {
        &self.core.nodes[self.me.index()].lowers
    }

    /// This protocol's number in `lower`'s number space.
    #[inline]
    pub fn number_in(&self, lower: ProtoId) -> Option<u32> {
        self.core
            .nodes
            .get(lower.index())?
            .number_of(Upper::Proto(self.me))
    }

    /// Who is registered above this protocol under `number`.
    #[inline]
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

    /// Pushes `msg` to a lower session: its protocol's `push` runs at once, or,
    /// when work waits before it or that protocol is on the call stack, later
    /// in order. Under DAA a message that has no path yet takes the path of the
    /// session this call is about.
    #[inline]
    pub fn push(&mut self, lower: SessionRef, mut msg: Message) {
        if self.core.arch == Arch::Daa
            && msg.path().is_none()
            && let Some(current) = self.current
        {
            msg.set_path(self.core.paths.of_session_sending(current));
        }
        push_work(self.core, self.slots, lower, msg);
    }

    /// Queues a frame for `link` at the given urgency; a full queue drops it and
    /// counts the drop on the link.
    #[inline]
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
    #[inline]
    pub fn link_segmentation(&self, link: LinkId) -> usize {
        self.core
            .links
            .get(link.index())
            .map_or(0, |l| l.segmentation)
    }

    /// Delivers data to an application: at once, or queued behind work that
    /// waits (an event announcing the session comes first). Data-manipulation
    /// stages the packet's layers declared run first (fused, under ILLM and DAA).
    #[inline]
    pub fn deliver(
        &mut self,
        app: AppId,
        session: Option<SessionRef>,
        msg: Message,
        meta: &PacketMeta,
    ) {
        deliver_from(self.core, self.slots, app, session, msg, meta);
    }

    /// Queues an event for an application.
    pub fn notify(&mut self, app: AppId, event: AppEvent) {
        notify(self.core, app, event);
    }

    /// Announces a session this protocol made through a passive open to the upper
    /// that enabled it (the x-kernel's `openDone` upcall). Under DAA an
    /// application's new session gets a path answering the packet being handled.
    pub fn open_done(&mut self, upper: Upper, sess: SessionId, parts: Participants) {
        let session = SessionRef::new(self.me, sess);
        match upper {
            Upper::App(app) => {
                paths::make_answering(self.core, self.slots, app, session);
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
    #[inline]
    pub fn set_timer(&mut self, at: Instant, token: u64) -> TimerId {
        self.core.timers.set(at, Owner::Proto(self.me), token)
    }

    /// Cancels a timer (harmless if it already fired).
    #[inline]
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.core.timers.cancel(id);
    }

    /// Asks for one call of this protocol's `on_idle` once the engine's
    /// current run is over: at the start of its next run, before timers
    /// and frames, after the driver has taken the frames this run made.
    /// Asking again before the call changes nothing. Cheaper than a timer
    /// for work that only has to wait until the engine is idle (seed 003's
    /// deferred post-processing).
    pub fn when_idle(&mut self) {
        if !self.core.idle.contains(&self.me) {
            self.core.idle.push(self.me);
        }
    }

    /// A random number from the engine's generator (seeded, so simulations repeat).
    #[inline]
    pub fn random_u32(&mut self) -> u32 {
        self.core.rng.random()
    }

    /// A random 64-bit number from the engine's generator.
    #[inline]
    pub fn random_u64(&mut self) -> u64 {
        self.core.rng.random()
    }

    /// Counts a named event against this protocol.
    #[inline]
    pub fn count(&mut self, event: &'static str) {
        self.core.counters[self.me.index()].event(event);
    }

    /// Counts `n` occurrences of a named event against this protocol.
    #[inline]
    pub fn count_n(&mut self, event: &'static str, n: u64) {
        self.core.counters[self.me.index()].add_event(event, n);
    }

    /// Counts a drop against this protocol (for drops outside demux and pop, whose
    /// results the engine counts itself).
    #[inline]
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
    #[inline]
    pub fn me(&self) -> AppId {
        self.me
    }

    /// Engine time.
    #[inline]
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// The engine's architecture.
    #[inline]
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
                paths::make(self.core, self.slots, self.me, None, qos, 0, false)
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
        let remote = remote_app_id(&parts).unwrap_or(self.core.paths.answering().peer);
        let session = open_in(
            self.core,
            self.slots,
            Upper::App(self.me),
            proto,
            parts,
            qos,
        )?;
        if let Err(e) = paths::make(
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
        paths::make(self.core, self.slots, self.me, None, qos, 0, true)
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

    /// Sends `msg` on `session` (under DAA, on its path): the session's
    /// protocol pushes it at once, or later in order (see [`Cx::push`]).
    #[inline]
    pub fn send(&mut self, session: SessionRef, mut msg: Message) {
        if self.core.arch == Arch::Daa {
            msg.set_path(self.core.paths.of_session_sending(session));
        }
        push_work(self.core, self.slots, session, msg);
    }

    /// Closes a session (and its DAA path).
    pub fn close(&mut self, session: SessionRef) -> Result<(), UpiError> {
        paths::forget(self.core, self.slots, session);
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
    #[inline]
    pub fn set_timer(&mut self, at: Instant, token: u64) -> TimerId {
        self.core.timers.set(at, Owner::App(self.me), token)
    }

    /// Cancels a timer.
    #[inline]
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.core.timers.cancel(id);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::checksum::Checksum;
    use crate::engine::tests::{toy, with_cx};
    use crate::ilp::Stage;

    fn bad_sum() -> Stage {
        let mut sum = Checksum::new();
        sum.add_u16(0x1234);
        Stage::Checksum(sum)
    }

    #[test]
    fn a_stage_runs_at_once_under_llm_and_waits_for_the_delivery_otherwise() {
        for arch in Arch::ALL {
            let (mut e, _, _) = toy(arch);
            let (tx, rx) = mpsc::channel();
            with_cx(&mut e, move |cx| {
                let mut msg = Message::from_slice(b"data");
                let verdict = cx.stage(&mut msg, bad_sum());
                tx.send((verdict, cx.core.stages.len())).unwrap();
                cx.core.stages.clear();
            });
            let expected = if arch == Arch::Llm {
                (false, 0)
            } else {
                (true, 1)
            };
            assert_eq!(rx.recv().unwrap(), expected, "{arch}");
        }
    }

    #[test]
    fn a_checksum_keeps_its_message_only_when_a_layer_above_pops() {
        let (mut e, _, _) = toy(Arch::Illm);
        let (tx, rx) = mpsc::channel();
        with_cx(&mut e, move |cx| {
            let mut msg = Message::from_slice(b"hdr+data");
            cx.stage(&mut msg, bad_sum());
            let before = cx.core.stages[0].seen.is_some();
            // The layer above is about to pop (and perhaps strip a header).
            cx.core.keep_seen(&msg);
            let after = cx.core.stages[0].seen.as_ref().map(Message::to_vec);
            cx.core.stages.clear();
            tx.send((before, after)).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), (false, Some(b"hdr+data".to_vec())));
    }

    #[test]
    fn a_push_to_the_protocol_being_called_waits_in_the_queue() {
        let (mut e, _, _) = toy(Arch::Llm);
        let (tx, rx) = mpsc::channel();
        with_cx(&mut e, move |cx| {
            let me = SessionRef::new(cx.me(), SessionId(0));
            cx.push(me, Message::from_slice(b"x"));
            tx.send(cx.core.work.len()).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), 1, "queued, not re-entered");
        assert_eq!(e.transmit_backlog(LinkId(0)), 0);
        e.run(Instant::ZERO);
        assert_eq!(
            e.poll_transmit(LinkId(0)).map(|m| m.to_vec()),
            Some(b"\x07x".to_vec())
        );
    }
}
