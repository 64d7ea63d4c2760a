//! The uniform protocol interface (UPI): what every protocol implements and what
//! the engine calls.
//!
//! Inbound processing is split in two, and everything in the engine rests on it:
//! [`Protocol::demux`] is *pure* — it reads this layer's header, says which session
//! pops it, how long the header is and where the rest goes — and
//! [`Protocol::pop`] is the state change. Because demux cannot change state, the
//! engine decides the order of work: LLM alternates demux and pop layer by layer;
//! ILLM demuxes through every layer first and pops afterwards; DAA demuxes once at
//! the lowest layer and pops along a path (seed 000 §3, §4).

use std::any::Any;

use crate::control::{Control, Reply};
use crate::cx::Cx;
use crate::error::UpiError;
use crate::ids::{AppId, PathId, ProtoId, SessionId, SessionRef, Upper};
use crate::message::Message;
use crate::meta::{PacketMeta, Priority};
use crate::participant::Participants;

pub use crate::counters::DropReason;

/// Which session of a protocol pops a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The protocol itself, for packets that belong to no session (an ARP request,
    /// an ICMP echo, a datagram on its way to a number-bound upper protocol).
    Protocol,
    /// An existing session.
    Session(SessionId),
    /// A passive open (`open_enable`) matched: pop creates the session, a new
    /// connection. The number is the protocol's own key for the enable.
    Enable(u32),
}

/// Where a packet goes after this layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// To the protocol registered above this one under this number (an ethertype,
    /// an IP protocol number), looked up in the graph's protocol-number table.
    Number(u32),
    /// To this protocol (a session whose upper is a protocol of the graph).
    Proto(ProtoId),
    /// To this application: the session is at the up-boundary (seed 000 §4.3).
    App(AppId),
    /// Nowhere: the packet ends at this layer.
    Here,
}

/// The result of a pure demux.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demux {
    /// The header is `hdr_len` bytes long, `target` pops it, and the rest goes to
    /// `next`.
    To {
        /// Who pops the packet.
        target: Target,
        /// Length of this layer's header.
        hdr_len: usize,
        /// Where the rest goes.
        next: Next,
    },
    /// Only pop can tell what comes next (an IP fragment, out-of-order TCP data):
    /// `target` must pop before any upper header is read. ILLM and DAA fall back to
    /// layer-by-layer processing for this packet, and count it.
    Stateful {
        /// Who pops the packet.
        target: Target,
    },
    /// The header needs this many contiguous bytes; the engine gathers them and asks
    /// again, or drops the packet as truncated when it is shorter.
    Short(usize),
    /// The packet dies here, for this reason (counted against this protocol).
    Drop(DropReason),
}

/// The result of a pop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Up {
    /// Pass what is left upward, where demux said.
    Continue,
    /// Pass what is left upward to this place instead (a stateful layer that has
    /// just completed a packet decides here).
    Redirect(Next),
    /// Pop made this session for the packet (a passive open matched by a
    /// `Target::Enable`): pass what is left upward where demux said, on it.
    Opened(SessionId),
    /// This layer kept or answered the packet; nothing goes up.
    Consumed,
    /// The packet dies here, for this reason (counted against this protocol).
    Drop(DropReason),
}

/// Quality of service asked for in an `open`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Qos {
    /// Urgency of this session's packets.
    pub priority: Priority,
    /// A demanded DAA application identifier (servers use well-known ones).
    pub app_id: Option<u32>,
}

/// An `open` or `open_enable` request arriving at a protocol.
#[derive(Clone, Debug)]
pub struct Open {
    /// Who sits above the new session.
    pub upper: Upper,
    /// The opener's number in this protocol's number space (ethertype, IP protocol
    /// number), from the graph's table or given by an application.
    pub number: Option<u32>,
    /// The addresses: each layer pops its own part and passes the rest down.
    pub parts: Participants,
    /// Quality of service.
    pub qos: Qos,
}

/// A protocol object: owns its sessions and implements the UPI.
///
/// Methods other than `demux` get a [`Cx`], through which they push to lower
/// sessions, deliver upward, set timers and count. Work they emit is queued and run
/// to completion by the engine: no protocol calls another's data path directly.
pub trait Protocol: Send + 'static {
    /// Pure demultiplexing: read this layer's header from `hdr` (the contiguous
    /// bytes from the header on), record what upper layers need in `meta`, and say
    /// who pops the packet and where the rest goes. Must not panic on any input.
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux;

    /// The state change for an inbound packet: validate, strip this layer's header
    /// from the front of `msg`, update the session, say what goes up. Under DAA no
    /// demux of this layer ran before, so pop must not rely on this layer's demux
    /// having filled `meta`; it fills what upper pops need itself — unless
    /// `meta.demuxed` says the engine has just run this layer's demux on this
    /// very header, when pop may skip the checks demux made.
    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up;

    /// True when this protocol's pop, once its demux has run, does nothing but
    /// strip the header. ILLM then skips the call altogether (seed 000 §5.4:
    /// "if a protocol does not do any useful processing in the state-change phase
    /// … the state-change phase can be eliminated").
    fn pop_is_strip(&self) -> bool {
        false
    }

    /// Outbound: add this layer's header to `msg` and push it to the lower session
    /// (or transmit it on the link). Failures are counted drops.
    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx);

    /// Active open: create a session for `req.upper` with the given participants,
    /// opening lower sessions as needed.
    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError>;

    /// Passive open: accept sessions matching the (local) participants for
    /// `req.upper`; each new one is announced with an `open_done` upcall.
    fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let _ = (req, cx);
        Err(UpiError::Unsupported("open_enable"))
    }

    /// Withdraws a passive open.
    fn open_disable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let _ = (req, cx);
        Err(UpiError::Unsupported("open_disable"))
    }

    /// Upcall: a lower protocol created `lower` for this protocol through a passive
    /// open this protocol made.
    fn open_done(&mut self, lower: SessionRef, parts: Participants, cx: &mut Cx) {
        let _ = (lower, parts, cx);
    }

    /// Closes a session.
    fn close(&mut self, sess: SessionId, cx: &mut Cx);

    /// A typed control operation on the protocol (`sess` is `None`) or a session.
    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        let _ = (sess, cx);
        Err(UpiError::Unsupported(op.name()))
    }

    /// DAA: assigns an application identifier for `path` — `demand`ed (a server's
    /// well-known one) or fresh — and maps it to the path for demux. Only a
    /// protocol that demultiplexes by application identifier (ETHDAA) does this.
    fn assign_app_id(
        &mut self,
        path: PathId,
        demand: Option<u32>,
        cx: &mut Cx,
    ) -> Result<u32, UpiError> {
        let _ = (path, demand, cx);
        Err(UpiError::Unsupported("assign_app_id"))
    }

    /// DAA: forgets an identifier `assign_app_id` gave out.
    fn release_app_id(&mut self, id: u32, cx: &mut Cx) {
        let _ = (id, cx);
    }

    /// A timer this protocol set has fired.
    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let _ = (token, cx);
    }

    /// The engine is idle after a run in which this protocol asked for
    /// this call (`Cx::when_idle`): once per asking.
    fn on_idle(&mut self, cx: &mut Cx) {
        let _ = cx;
    }

    /// The protocol as `Any`, so tests and tools can look inside.
    fn as_any(&self) -> &dyn Any;
}
