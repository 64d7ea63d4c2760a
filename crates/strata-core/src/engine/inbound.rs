//! Inbound processing: the architectures of seed 000 as orders of demux and pop
//! over unchanged protocol code.
//!
//! - LLM: demux, pop, demux, pop … layer by layer (§3.1).
//! - ILLM: demux through every layer to the up-boundary, then every pop (§3.3,
//!   §4.3). Layers whose pop only strips the header are skipped (§5.4). A stateful
//!   demux or a new connection falls back to LLM for that packet, counted.

use smallvec::SmallVec;

use super::{Engine, RxFrame, call_proto};
use crate::arch::Arch;
use crate::counters::DropReason;
use crate::ids::{AppId, LinkId, ProtoId, SessionRef, Upper};
use crate::message::Message;
use crate::meta::{PacketMeta, Priority};
use crate::upi::{Demux, Next, Target, Up};

use super::{Core, Slots};

/// The event counted when a packet ends at a layer without a drop: every received
/// frame is delivered, dropped with a reason, or consumed, and the three add up.
pub const CONSUMED: &str = "consumed";

/// Where a packet goes after a layer.
enum Follow {
    Proto(ProtoId),
    App(AppId),
    Stop,
}

/// One layer recorded by ILLM's demultiplexing phase: the protocol-independent
/// (session, message) record of seed 000 §4.3.
#[derive(Clone, Copy)]
struct Record {
    proto: ProtoId,
    target: Target,
    hdr_len: usize,
    next: Next,
}

/// Decides a received frame's place in the receive queue. Without QoS every frame
/// is best effort, which keeps the queue first-in first-out.
pub(super) fn classify(core: &Core, _slots: &Slots, _link: LinkId, _frame: &Message) -> Priority {
    match core.arch {
        Arch::Llm | Arch::Illm | Arch::Daa => Priority::BEST_EFFORT,
    }
}

impl Engine {
    pub(super) fn inbound(&mut self, frame: RxFrame) {
        let RxFrame {
            link,
            msg,
            received,
        } = frame;
        let meta = PacketMeta::new(link, received);
        let first = self.core.links[link.index()].node.upper;
        match self.core.arch {
            Arch::Llm | Arch::Daa => self.llm(first, msg, meta),
            Arch::Illm => self.illm(first, msg, meta),
        }
    }

    /// Runs demux at `offset` of `msg`, gathering a header that straddles
    /// segments when the protocol asks for more contiguous bytes.
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

    fn pop(
        &mut self,
        proto: ProtoId,
        target: Target,
        msg: &mut Message,
        meta: &mut PacketMeta,
    ) -> Up {
        let c = &mut self.core.counters[proto.index()];
        c.packets_in += 1;
        c.bytes_in += msg.len() as u64;
        call_proto(&mut self.core, &mut self.slots, proto, |p, cx| {
            p.pop(target, msg, meta, cx)
        })
        .unwrap_or(Up::Drop(DropReason::NoProtocol))
    }

    fn drop_at(&mut self, proto: ProtoId, reason: DropReason) {
        self.core.counters[proto.index()].drop(reason);
    }

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
                self.core.counters[proto.index()].event(CONSUMED);
                Follow::Stop
            }
        }
    }

    /// Applies a pop's verdict: where the packet goes next, or `None` when it ends.
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
            Up::Consumed => {
                self.core.counters[proto.index()].event(CONSUMED);
                None
            }
            Up::Drop(reason) => {
                self.drop_at(proto, reason);
                None
            }
        }
    }

    /// Layered logical multiplexing: demux and pop alternate, layer by layer.
    pub(super) fn llm(&mut self, mut proto: ProtoId, mut msg: Message, mut meta: PacketMeta) {
        loop {
            let (target, demuxed) = match self.demux_at(proto, &mut msg, 0, &mut meta) {
                Demux::To { target, next, .. } => (target, Some(next)),
                Demux::Stateful { target } => (target, None),
                Demux::Drop(reason) => {
                    self.drop_at(proto, reason);
                    return;
                }
                Demux::Short(_) => {
                    self.drop_at(proto, DropReason::Truncated);
                    return;
                }
            };
            let up = self.pop(proto, target, &mut msg, &mut meta);
            let Some(next) = self.after_pop(proto, up, demuxed) else {
                return;
            };
            match self.follow(proto, next) {
                Follow::Proto(p) => proto = p,
                Follow::App(app) => {
                    let session = session_of(proto, target);
                    self.deliver(app, session, msg, &meta);
                    return;
                }
                Follow::Stop => return,
            }
        }
    }

    /// Integrated layered multiplexing: the demultiplexing phase through every
    /// layer to the up-boundary, then the state-change phase.
    fn illm(&mut self, first: ProtoId, mut msg: Message, mut meta: PacketMeta) {
        let mut records: SmallVec<[Record; 6]> = SmallVec::new();
        let mut proto = first;
        let mut offset = 0;
        // Demultiplexing phase: pure, so nothing has changed if we fall back.
        let end = loop {
            match self.demux_at(proto, &mut msg, offset, &mut meta) {
                Demux::To {
                    target: Target::Enable(_),
                    ..
                }
                | Demux::Stateful { .. } => {
                    self.core.stats.event("illm-fallback");
                    break None;
                }
                Demux::To {
                    target,
                    hdr_len,
                    next,
                } => {
                    records.push(Record {
                        proto,
                        target,
                        hdr_len,
                        next,
                    });
                    offset += hdr_len;
                    match next {
                        Next::Number(n) => match self.core.nodes[proto.index()].upper_for(n) {
                            Some(Upper::Proto(p)) => proto = p,
                            Some(Upper::App(_)) => break Some(()),
                            None => break Some(()),
                        },
                        Next::Proto(p) => proto = p,
                        Next::App(_) | Next::Here => break Some(()),
                    }
                }
                Demux::Drop(reason) => {
                    // Lower layers accepted the packet; count them as LLM would.
                    for r in &records {
                        let c = &mut self.core.counters[r.proto.index()];
                        c.packets_in += 1;
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

        // State-change phase: every recorded layer pops, lowest first.
        for (i, r) in records.iter().enumerate() {
            let skip = self.slots.protos[r.proto.index()]
                .as_ref()
                .is_some_and(|p| p.pop_is_strip());
            let up = if skip {
                let c = &mut self.core.counters[r.proto.index()];
                c.packets_in += 1;
                c.bytes_in += msg.len() as u64;
                self.core.stats.event("illm-pop-skipped");
                if msg.strip(r.hdr_len) {
                    Up::Continue
                } else {
                    Up::Drop(DropReason::Truncated)
                }
            } else {
                self.pop(r.proto, r.target, &mut msg, &mut meta)
            };
            let Some(next) = self.after_pop(r.proto, up, Some(r.next)) else {
                return;
            };
            if next != r.next {
                // The layer changed its mind (only stateful layers should): carry on
                // layer by layer from where it points.
                self.core.stats.event("illm-fallback");
                match self.follow(r.proto, next) {
                    Follow::Proto(p) => self.llm(p, msg, meta),
                    Follow::App(app) => {
                        let session = session_of(r.proto, r.target);
                        self.deliver(app, session, msg, &meta);
                    }
                    Follow::Stop => {}
                }
                return;
            }
            let last = i + 1 == records.len();
            if last {
                match self.follow(r.proto, next) {
                    Follow::App(app) => {
                        let session = session_of(r.proto, r.target);
                        self.deliver(app, session, msg, &meta);
                    }
                    Follow::Proto(p) if end.is_none() => self.llm(p, msg, meta),
                    Follow::Proto(_) | Follow::Stop => {}
                }
                return;
            }
        }
        // No layer recorded: the first demux fell back.
        if records.is_empty() {
            self.llm(first, msg, meta);
        }
    }
}

fn session_of(proto: ProtoId, target: Target) -> Option<SessionRef> {
    match target {
        Target::Session(s) => Some(SessionRef::new(proto, s)),
        Target::Protocol | Target::Enable(_) => None,
    }
}
