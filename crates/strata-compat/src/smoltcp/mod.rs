//! smoltcp's TCP, the crate as published, imported into Strata as the
//! protocol `smoltcp-tcp` through an encapsulation module (seed 004 §3): the
//! module emulates smoltcp's subsystem to smoltcp — a network interface, a
//! device, a clock, an application polling its sockets — and a native Strata
//! protocol to the graph — sessions, `demux`/`pop`/`push`, engine timers,
//! messages, counters. smoltcp's code is not changed, copied or patched; it
//! is a dependency, built with features it publishes (`medium-ip`, its
//! congestion controllers).
//!
//! # Using it
//!
//! Wherever Strata's `tcp` is: `strata host --stack udp+smoltcp-tcp/ip/eth
//! --serve tcp-echo:7,http:80:DIR`. It answers the same in-engine API as
//! Strata's TCP — `open`/`open_enable` with the same participants, the same
//! events, and the private operations of
//! [`strata_proto::tcp::api`] (`Write`, `SendSpace`, `Shutdown`, `Abort`,
//! `Consumed`, `ManualConsume`, `SetNodelay`, `SetKeepalive`, `Info`,
//! `SetBacklog`) — so Strata's applications and socket layer run on either.
//! IP hands it protocol 6, as it hands Strata's `tcp`.
//!
//! # How the two sides meet
//!
//! | smoltcp expects | the module gives it |
//! |---|---|
//! | a device (`phy::Device`) | [`device`]: the segments Strata's IP layer passes up, each behind a rebuilt IPv4 header; what smoltcp sends, its IPv4 header stripped, pushed to an IP session |
//! | an interface with an address and routes | [`stack`]: the host's address as a /32, a default route through it |
//! | `now` on every call, a timestamp clock | [`clock`]: the engine's time |
//! | to be polled when its `poll_at` says | one engine timer at smoltcp's deadline, and at "now" after a batch of segments or an application's call, so that a batch is answered by one egress pass |
//! | an application reading and writing its socket rings | [`control`]: `tcp::api`'s operations become `send_slice`, `recv`, `close`, `abort` … ; [`upcalls`]: what changed becomes events and deliveries |
//!
//! | Strata expects | the module gives it |
//! |---|---|
//! | a pure `demux` naming a session | [`input`]: a 4-tuple table the module keeps beside smoltcp's sockets |
//! | drops counted by reason | [`input`]: smoltcp's own parser run first on each segment, checksums verified by the module; what smoltcp then ignores silently cannot be counted (see the design notes) |
//! | `tcp::Info` | [`observe`]: what the segments crossing the module show |
//! | passive opens with a backlog | one listening socket per port, replaced when it takes a SYN (smoltcp has no backlog: a socket listens for one connection) |
//!
//! docs/design.md ("Importing smoltcp's TCP") lists what could not be
//! emulated and which of the paper's three options (§4.1.2) each got.

mod clock;
mod config;
mod control;
mod device;
mod input;
mod observe;
mod output;
mod stack;
mod table;
mod upcalls;

use std::any::Any;

use bytes::BytesMut;
use smoltcp::iface::SocketSet;
use strata_core::{
    Control, Cx, Demux, Instant, Message, Open, PacketMeta, ProtoId, Protocol, Registry, Reply,
    SessionId, Target, TimerId, Up, UpiError,
};
use strata_proto::ipv4::GetOptPayload;

pub use config::{Config, KIND, OPTIONS, SPEC};

use stack::Stack;
use table::Table;

/// The timer tokens: egress now, egress at smoltcp's deadline.
const KICK: u64 = 0;
const DEADLINE: u64 = 1;

/// IP's protocol number for TCP (RFC 9293 §3.1).
pub const IP_PROTOCOL: u32 = 6;

/// Registers `smoltcp-tcp` and its number in IP's number space.
pub fn register(reg: &mut Registry) {
    reg.register_protocol(SPEC);
    reg.numbers_mut().insert("ip", KIND, IP_PROTOCOL);
}

/// The protocol object: smoltcp's interface and sockets, and the module's
/// tables.
pub struct SmolTcp {
    ip: ProtoId,
    cfg: Config,
    /// smoltcp's interface and device, made on first use.
    stack: Option<Stack>,
    /// The sockets of sessions.
    sockets: SocketSet<'static>,
    /// One listening socket per listened port.
    listening: SocketSet<'static>,
    table: Table,
    /// Where data read out of smoltcp's rings is copied, one allocation for
    /// many deliveries.
    delivery: BytesMut,
    /// The engine timer that runs smoltcp's egress once the engine has run
    /// what is queued now (a batch of segments, an application's calls),
    /// while it is pending.
    kicked: Option<TimerId>,
    /// Only plain segments (no SYN, FIN or RST) of known sessions asked for
    /// the pending egress pass: the pass has nothing to do unless smoltcp's
    /// `poll_at` says it is due (an acknowledgment it will not delay).
    kicked_plain: bool,
    /// The engine timer at smoltcp's deadline (`poll_at`), and when it is
    /// due. A later deadline leaves it be: it fires early, the egress pass
    /// finds little to do and sets it again, which costs less than moving
    /// the timer at every segment (a retransmission deadline moves on with
    /// every acknowledgment).
    deadline: Option<(Instant, TimerId)>,
    /// Session ids gathered for a pass over every session, kept for reuse.
    scratch: Vec<SessionId>,
    /// Upcalls handed smoltcp something to send (data or a FIN held during
    /// a handshake): the egress pass goes round again.
    handed: bool,
}

impl SmolTcp {
    /// smoltcp's TCP over `ip`, with settings `cfg`.
    pub fn new(ip: ProtoId, cfg: Config) -> SmolTcp {
        SmolTcp {
            ip,
            cfg,
            stack: None,
            sockets: SocketSet::new(Vec::new()),
            listening: SocketSet::new(Vec::new()),
            table: Table::default(),
            delivery: BytesMut::new(),
            kicked: None,
            kicked_plain: false,
            deadline: None,
            scratch: Vec::new(),
            handed: false,
        }
    }

    /// How many sessions exist, in every state.
    pub fn connection_count(&self) -> usize {
        self.table.conns.len()
    }

    /// Connections of the listener on `port` still in SYN-RECEIVED.
    pub fn pending(&self, port: u16) -> Option<usize> {
        self.table.listeners.get(&port).map(|l| l.pending)
    }

    /// Makes smoltcp's interface if it is not made yet: the address and
    /// MTU come from Strata's IP layer.
    fn ensure_stack(&mut self, cx: &mut Cx) -> Result<(), UpiError> {
        if self.stack.is_some() {
            return Ok(());
        }
        let address = match cx.control(self.ip, None, Control::GetIpAddr)? {
            Reply::Ip(a) => a,
            _ => return Err(UpiError::Unreachable),
        };
        let payload = match cx.control(self.ip, None, Control::Private(Box::new(GetOptPayload))) {
            Ok(Reply::Size(n)) => n,
            // RFC 9293 §3.7.1: every host takes 576-byte datagrams.
            _ => 576 - device::IP_HEADER,
        };
        let now = clock::enter(cx.now());
        self.stack = Some(Stack::new(
            address,
            payload + device::IP_HEADER,
            cx.random_u64(),
            now,
        ));
        Ok(())
    }

    /// Runs smoltcp's egress once the engine has run what is queued now.
    fn kick(&mut self, cx: &mut Cx) {
        self.kick_for(false, cx);
    }

    /// [`SmolTcp::kick`], for a plain segment of a session if `plain`.
    fn kick_for(&mut self, plain: bool, cx: &mut Cx) {
        match self.kicked {
            Some(_) => self.kicked_plain &= plain,
            None => {
                self.kicked = Some(cx.set_timer(cx.now(), KICK));
                self.kicked_plain = plain;
            }
        }
    }

    /// An egress pass is running now: it does what a pending kick would.
    fn unkick(&mut self, cx: &mut Cx) {
        if let Some(id) = self.kicked.take() {
            cx.cancel_timer(id);
        }
    }

    /// Runs smoltcp's egress at `at` at the latest.
    fn wake_at(&mut self, at: Instant, cx: &mut Cx) {
        match self.deadline {
            Some((due, _)) if due <= at => return,
            Some((_, id)) => cx.cancel_timer(id),
            None => {}
        }
        self.deadline = Some((at, cx.set_timer(at, DEADLINE)));
    }
}

impl Protocol for SmolTcp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.demux_segment(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        self.pop_segment(target, msg, meta, cx)
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        self.send(sess, msg, cx);
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        self.connect(req, cx)
    }

    fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        self.listen(req, cx)
    }

    fn open_disable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        self.unlisten(req, cx)
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        self.close_session(sess, cx);
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        self.control_op(sess, op, cx)
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        if token == KICK {
            self.kicked = None;
            if self.kicked_plain && !self.due(cx) {
                // Only plain segments came, and smoltcp delays its
                // acknowledgment: the pass would send nothing.
                return;
            }
        } else {
            self.deadline = None;
        }
        self.egress(cx);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
