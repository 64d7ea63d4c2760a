//! Inbound processing: the architectures of seed 000 as orders of demux and pop
//! over unchanged protocol code.
//!
//! - LLM: demux, pop, demux, pop … layer by layer (§3.1).
//! - ILLM: demux through every layer to the up-boundary, then every pop (§3.3,
//!   §4.3). Layers whose pop only strips the header are skipped (§5.4). A stateful
//!   demux or a new connection falls back to LLM for that packet, counted.
//! - DAA: the lowest layer's demux, run when the frame arrives, finds the path by
//!   application identifier and the frame's priority; the frame then waits in
//!   priority order, passes the early resource check, and is popped along the
//!   path (§3.2, §4.2). A path learns its pops from its first packet, which goes
//!   the layered way, counted.

use smallvec::SmallVec;

use super::core::{Core, Delivery, Slots, Work, call_proto_for, deliver};
use super::paths::{Learned, RECORD_LAYERS, Record};
use super::{Arrival, Engine, RxFrame};
use crate::arch::Arch;
use crate::counters::DropReason;
use crate::ids::{AppId, PathId, ProtoId, SessionRef, Upper};
use crate::message::Message;
use crate::meta::{PacketMeta, Priority};
use crate::upi::{Demux, Next, Target, Up};

/// Where a packet goes after a layer.
enum Follow {
    Proto(ProtoId),
    App(AppId),
    Stop,
}

/// One layer recorded by ILLM's demultiplexing phase: the protocol-independent
/// (session, message) record of seed 000 §4.3.
#[derive(Clone, Copy)]
struct Layer {
    proto: ProtoId,
    target: Target,
    hdr_len: usize,
    next: Next,
}

/// What a layered walk learned, for a DAA path to keep.
#[derive(Default)]
struct Walk {
    record: Record,
    /// False once a layer made a session or needed its own state to go on.
    repeatable: bool,
    delivered_to: Option<AppId>,
    /// The last layer kept the packet (a pure sender's ACK ends at its TCP
    /// session), which a path may learn from too.
    consumed: bool,
}

/// Decides a received frame's place in the receive queue. Without DAA every frame
/// is best effort, which keeps the queue first-in first-out. Under DAA the lowest
/// protocol demultiplexes the frame now — the only demux a path's packet gets —
/// into its arrival record, and its deadline/priority orders the queue.
pub(super) fn classify(
    core: &mut Core,
    slots: &Slots,
    frame: &Message,
    arrival: &mut Arrival,
) -> Priority {
    if core.arch != Arch::Daa {
        return Priority::BEST_EFFORT;
    }
    let Some(Some(bottom)) = core
        .links
        .get(arrival.meta.link.index())
        .and_then(|l| slots.protos.get(l.node.upper.index()))
    else {
        return Priority::BEST_EFFORT;
    };
    arrival.meta.present = frame.len();
    core.demux_calls += 1;
    arrival.early = Some(bottom.demux(frame.contiguous_at(0), &mut arrival.meta));
    arrival.meta.priority
}

impl Engine {
    pub(super) fn inbound(&mut self, frame: RxFrame) {
        let RxFrame { msg, mut arrival } = frame;
        let first = self.core.links[arrival.meta.link.index()].node.upper;
        // Stages belong to one packet: a packet that ended before delivery leaves
        // none behind for the next.
        self.core.stages.clear();
        // The metadata is lent to each step, not moved: it is a few hundred
        // bytes, and every move of it would be a copy.
        let Arrival { meta, early } = &mut *arrival;
        match (self.core.arch, early) {
            (Arch::Daa, Some(demux)) => self.daa(first, msg, demux, meta),
            (Arch::Illm, _) => self.illm(first, msg, meta),
            _ => {
                self.layered(first, msg, meta, None, None);
            }
        }
        self.core.arrivals.push(arrival);
        self.core.stages.clear();
    }

    /// Runs demux at `offset` of `msg`, gathering a header that straddles
    /// segments when the protocol asks for more contiguous bytes.
    ///
    /// This and the other per-layer steps below are forced inline: they run
    /// once per layer per packet, and only inlined do their matches on `Demux`,
    /// `Up` and `Next` fold into the caller's (plain `#[inline]` is ignored for
    /// functions this size called from three places).
    #[inline(always)]
    fn demux_at(
        &mut self,
        proto: ProtoId,
        msg: &mut Message,
        offset: usize,
        meta: &mut PacketMeta,
    ) -> Demux {
        let Some(Some(p)) = self.slots.protos.get(proto.index()) else {
            return Demux::Drop(DropReason::NoProtocol);
        };
        self.core.demux_calls += 1;
        meta.present = msg.len().saturating_sub(offset);
        let mut d = p.demux(msg.contiguous_at(offset), meta);
        if let Demux::Short(need) = d {
            let have = msg.contiguous_at(offset).len();
            if need > have && msg.len() >= offset + need && msg.pullup(offset + need).is_some() {
                d = p.demux(msg.contiguous_at(offset), meta);
            }
            if matches!(d, Demux::Short(_)) {
                d = Demux::Drop(DropReason::Truncated);
            }
        }
        d
    }

    #[inline(always)]
    fn pop(
        &mut self,
        proto: ProtoId,
        target: Target,
        msg: &mut Message,
        meta: &mut PacketMeta,
        demuxed: bool,
    ) -> Up {
        meta.demuxed = demuxed;
        self.core.keep_seen(msg);
        let c = &mut self.core.counters[proto.index()];
        c.packets_in += 1;
        c.bytes_in += msg.len() as u64;
        let current = session_of(proto, target);
        call_proto_for(&mut self.core, &mut self.slots, proto, current, |p, cx| {
            p.pop(target, msg, meta, cx)
        })
        .unwrap_or(Up::Drop(DropReason::NoProtocol))
    }

    fn drop_at(&mut self, proto: ProtoId, reason: DropReason) {
        self.core.counters[proto.index()].drop(reason);
    }

    #[inline(always)]
    fn follow(&mut self, proto: ProtoId, next: Next) -> Follow {
        match next {
            Next::Number(n) => match self.core.nodes[proto.index()].upper_for(n) {
                Some(Upper::Proto(p)) => Follow::Proto(p),
                Some(Upper::App(a)) => Follow::App(a),
                None => {
                    self.drop_at(proto, DropReason::NoProtocol);
                    Follow::Stop
                }
            },
            Next::Proto(p) => Follow::Proto(p),
            Next::App(a) => Follow::App(a),
            Next::Here => {
                self.core.counters[proto.index()].consumed += 1;
                Follow::Stop
            }
        }
    }

    /// Applies a pop's verdict: where the packet goes next, or `None` when it ends.
    #[inline(always)]
    fn after_pop(&mut self, proto: ProtoId, up: Up, demuxed: Option<Next>) -> Option<Next> {
        match up {
            Up::Continue => match demuxed {
                Some(next) => Some(next),
                None => {
                    // A stateful demux leaves the decision to pop; Continue there
                    // names nowhere to go.
                    self.drop_at(proto, DropReason::Other("stateful-pop-without-redirect"));
                    None
                }
            },
            Up::Redirect(next) => Some(next),
            // `opened` has turned this into Continue on the new session already.
            Up::Opened(_) => demuxed,
            Up::Consumed => {
                self.core.counters[proto.index()].consumed += 1;
                None
            }
            Up::Drop(reason) => {
                self.drop_at(proto, reason);
                None
            }
        }
    }

    /// Layered logical multiplexing: demux and pop alternate, layer by layer. The
    /// first layer's demux may have been done already (DAA's early demux, which
    /// filled `meta`, so that layer's pop is told its demux ran). When
    /// `walk` is given, the pops are recorded for a DAA path. Returns the
    /// application the packet was delivered to.
    fn layered(
        &mut self,
        mut proto: ProtoId,
        mut msg: Message,
        meta: &mut PacketMeta,
        mut first: Option<Demux>,
        mut walk: Option<&mut Walk>,
    ) -> Option<AppId> {
        loop {
            let demux = match first.take() {
                Some(d) => d,
                None => self.demux_at(proto, &mut msg, 0, meta),
            };
            // `next` is read from the demux's answer only after the pop: the
            // protocol stored it a field at a time, and an 8-byte load of it
            // right after the demux returned stalled (store forwarding fails;
            // it was a fifth of this walk's samples). By the pop's end the
            // stores have long reached the cache.
            let (target, stateful) = match demux {
                Demux::To { target, .. } => (target, false),
                Demux::Stateful { target } => (target, true),
                Demux::Drop(reason) => {
                    self.drop_at(proto, reason);
                    return None;
                }
                Demux::Short(_) => {
                    self.drop_at(proto, DropReason::Truncated);
                    return None;
                }
            };
            if let Some(w) = walk.as_deref_mut() {
                w.record.push((proto, target));
                if stateful || matches!(target, Target::Enable(_)) {
                    w.repeatable = false;
                }
            }
            let up = self.pop(proto, target, &mut msg, meta, true);
            if let Some(w) = walk.as_deref_mut() {
                match up {
                    Up::Redirect(_) | Up::Opened(_) => w.repeatable = false,
                    Up::Consumed => w.consumed = true,
                    _ => {}
                }
            }
            let fresh = matches!(up, Up::Opened(_));
            let (up, target) = opened(up, target);
            let demuxed = match demux {
                Demux::To { next, .. } => Some(next),
                _ => None,
            };
            let next = self.after_pop(proto, up, demuxed)?;
            meta.lower = session_of(proto, target);
            match self.follow(proto, next) {
                Follow::Proto(p) => proto = p,
                Follow::App(app) => {
                    let session = session_of(proto, target);
                    if fresh {
                        // The pop announced the new session with an event, which
                        // is queued: queue the data behind it, so the application
                        // hears of the session before it hears from it.
                        self.core.work.push_back(Work::Deliver(Box::new(Delivery {
                            app,
                            session,
                            msg,
                            meta: meta.clone(),
                        })));
                    } else {
                        deliver(&mut self.core, &mut self.slots, app, session, msg, meta);
                    }
                    if let Some(w) = walk {
                        w.delivered_to = Some(app);
                    }
                    return Some(app);
                }
                Follow::Stop => return None,
            }
        }
    }

    /// Integrated layered multiplexing: the demultiplexing phase through every
    /// layer to the up-boundary, then the state-change phase.
    fn illm(&mut self, first: ProtoId, mut msg: Message, meta: &mut PacketMeta) {
        let mut layers: SmallVec<[Layer; 6]> = SmallVec::new();
        let mut proto = first;
        let mut offset = 0;
        // Demultiplexing phase: pure, so nothing has changed if we fall back.
        let fell_back = loop {
            match self.demux_at(proto, &mut msg, offset, meta) {
                Demux::To {
                    target: Target::Enable(_),
                    ..
                }
                | Demux::Stateful { .. } => {
                    self.core.stats.event("illm-fallback");
                    break true;
                }
                Demux::To {
                    target,
                    hdr_len,
                    next,
                } => {
                    layers.push(Layer {
                        proto,
                        target,
                        hdr_len,
                        next,
                    });
                    offset += hdr_len;
                    meta.lower = session_of(proto, target);
                    match next {
                        Next::Number(n) => match self.core.nodes[proto.index()].upper_for(n) {
                            Some(Upper::Proto(p)) => proto = p,
                            Some(Upper::App(_)) | None => break false,
                        },
                        Next::Proto(p) => proto = p,
                        Next::App(_) | Next::Here => break false,
                    }
                }
                Demux::Drop(reason) => {
                    // Lower layers accepted the packet; count them as LLM would.
                    for l in &layers {
                        self.core.counters[l.proto.index()].packets_in += 1;
                    }
                    self.drop_at(proto, reason);
                    return;
                }
                Demux::Short(_) => {
                    self.drop_at(proto, DropReason::Truncated);
                    return;
                }
            }
        };
        if layers.is_empty() {
            self.layered(first, msg, meta, None, None);
            return;
        }

        // State-change phase: every recorded layer pops, lowest first.
        let count = layers.len();
        // By reference, a field at a time: moving the layers out (`into_iter`)
        // copied all of them, just written, with wide loads that stall (see
        // `RxFrame`).
        for (i, l) in layers.iter().enumerate() {
            let up = if self.core.strip_only[l.proto.index()] {
                self.core.keep_seen(&msg);
                let c = &mut self.core.counters[l.proto.index()];
                c.packets_in += 1;
                c.bytes_in += msg.len() as u64;
                self.core.stats.illm_pop_skipped += 1;
                if msg.strip(l.hdr_len) {
                    Up::Continue
                } else {
                    Up::Drop(DropReason::Truncated)
                }
            } else {
                // Every demux of the packet ran before any pop, each
                // recording its own kind of record, and lower pops only strip
                // their headers: this layer's demux still holds for its pop.
                self.pop(l.proto, l.target, &mut msg, meta, true)
            };
            let (up, target) = opened(up, l.target);
            let Some(next) = self.after_pop(l.proto, up, Some(l.next)) else {
                return;
            };
            let last = i + 1 == count;
            if next != l.next || last {
                if next != l.next {
                    // The layer changed its mind (only stateful layers should):
                    // carry on layer by layer from where it points.
                    self.core.stats.event("illm-fallback");
                }
                match self.follow(l.proto, next) {
                    Follow::Proto(p) if next != l.next || fell_back => {
                        self.layered(p, msg, meta, None, None);
                    }
                    Follow::App(app) => {
                        let session = session_of(l.proto, target);
                        deliver(&mut self.core, &mut self.slots, app, session, msg, meta);
                    }
                    Follow::Proto(_) | Follow::Stop => {}
                }
                return;
            }
        }
    }

    /// Direct application association: the early demux found `meta.path`; pop
    /// along it, or learn its pops from this packet.
    fn daa(&mut self, first: ProtoId, msg: Message, demux: &Demux, meta: &mut PacketMeta) {
        // Sessions opened for this packet, on a path or not, answer its sender
        // with its urgency.
        let outer = self.core.paths.answer(meta.peer, meta.priority);
        self.daa_inbound(first, msg, demux, meta);
        self.core.paths.restore(outer);
    }

    fn daa_inbound(&mut self, first: ProtoId, msg: Message, demux: &Demux, meta: &mut PacketMeta) {
        let Some(pid) = meta.path.filter(|p| self.core.paths.get(*p).is_some()) else {
            self.core.stats.event("daa-no-path");
            self.layered(first, msg, meta, Some(*demux), None);
            return;
        };
        // The path's pops are held while the packet is popped along them (the
        // path may change or go while its layers run): copied, once, in place
        // when they are as few as a stack has, else shared (two atomic
        // operations). Moving the copy about would cost more than making it:
        // see `RxFrame`.
        let mut copied = Record::new();
        let mut shared: Option<Learned> = None;
        let (app, learned, listening) = {
            let Some(path) = self.core.paths.get_mut(pid) else {
                return;
            };
            if meta.peer != 0 {
                path.remote_id = meta.peer;
            }
            match &path.record {
                Some(l) if l.len() <= RECORD_LAYERS => copied.extend_from_slice(l),
                Some(l) => shared = Some(l.clone()),
                None => {}
            }
            (path.app, path.record.is_some(), path.listening)
        };
        // The early resource check (§3.2): no room, no work.
        let room = match self.slots.apps.get(app.index()) {
            Some(Some(a)) => a.has_room(),
            _ => false,
        };
        if !room {
            self.drop_at(first, DropReason::NoRoom);
            return;
        }
        if learned {
            self.core.stats.daa_path += 1;
            let pops = shared.as_deref().unwrap_or(&copied);
            self.along(pid, pops, msg, meta, demux);
            return;
        }
        self.core.stats.event("daa-path-learning");
        let mut walk = Walk {
            repeatable: !listening,
            ..Walk::default()
        };
        self.layered(first, msg, meta, Some(*demux), Some(&mut walk));
        let Some(path) = self.core.paths.get_mut(pid) else {
            return;
        };
        let last = walk.record.last().map(|&(p, t)| session_of(p, t));
        let kept_by_its_session =
            walk.consumed && path.session.is_some() && last == Some(path.session);
        if walk.repeatable && (walk.delivered_to == Some(app) || kept_by_its_session) {
            path.record = Some(Learned::from(&walk.record[..]));
        }
    }

    /// Pops a packet along a path's recorded layers and delivers it. The
    /// lowest layer's pop is told its demux ran (the early one, into `meta`)
    /// when that demux found the target the path recorded.
    fn along(
        &mut self,
        pid: PathId,
        record: &[(ProtoId, Target)],
        mut msg: Message,
        meta: &mut PacketMeta,
        early: &Demux,
    ) {
        for (i, &(proto, target)) in record.iter().enumerate() {
            let demuxed = i == 0 && matches!(*early, Demux::To { target: t, .. } if t == target);
            let up = self.pop(proto, target, &mut msg, meta, demuxed);
            let (up, target) = opened(up, target);
            match up {
                Up::Continue => {}
                Up::Redirect(next) => {
                    // The layer holds state the path cannot predict: carry on layer
                    // by layer, counted.
                    self.core.stats.event("daa-fallback");
                    match self.follow(proto, next) {
                        Follow::Proto(p) => {
                            self.layered(p, msg, meta, None, None);
                        }
                        Follow::App(app) => {
                            let session = session_of(proto, target);
                            deliver(&mut self.core, &mut self.slots, app, session, msg, meta);
                        }
                        Follow::Stop => {}
                    }
                    return;
                }
                Up::Consumed | Up::Drop(_) | Up::Opened(_) => {
                    self.after_pop(proto, up, None);
                    return;
                }
            }
            if i + 1 == record.len() {
                let Some(path) = self.core.paths.get(pid) else {
                    return;
                };
                let (app, session) = (path.app, session_of(proto, target));
                deliver(&mut self.core, &mut self.slots, app, session, msg, meta);
                return;
            }
        }
    }
}

/// A pop that opened a session for its packet goes on as Continue, on that session.
fn opened(up: Up, target: Target) -> (Up, Target) {
    match up {
        Up::Opened(s) => (Up::Continue, Target::Session(s)),
        other => (other, target),
    }
}

fn session_of(proto: ProtoId, target: Target) -> Option<SessionRef> {
    match target {
        Target::Session(s) => Some(SessionRef::new(proto, s)),
        Target::Protocol | Target::Enable(_) => None,
    }
}
