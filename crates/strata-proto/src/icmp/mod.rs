//! ICMP for IPv4 (RFC 792) as a host needs it (RFC 1122 §3.2.2).
//!
//! - Echo: requests for our address are answered with the same identifier,
//!   sequence number and data (RFC 1122 §3.2.2.6), the checksum adjusted for the
//!   changed type rather than recomputed (RFC 1624). Requests to a broadcast
//!   address are ignored, as Linux does by default (§3.2.2.6 allows it).
//! - Ping sessions: an application opens a session with remote `[Ip(dst)]`;
//!   the session picks an identifier, each message pushed on it becomes the
//!   data of an echo request with the next sequence number (starting at 1, as
//!   ping(8) does), and each echo reply for the identifier is delivered on the
//!   session as **the 2-byte big-endian sequence number followed by the data**
//!   — the reply's ICMP message minus its first six bytes — with the replying
//!   address in its [`Ipv4Info`] record.
//! - Errors: other protocols ask for one with the private [`SendError`]; a
//!   destination-unreachable received is handed, as [`Unreachable`], to the
//!   protocol above IP that sent the datagram it quotes (see `errors`).

mod errors;
mod ratelimit;
pub mod wire;

use std::any::Any;
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use strata_core::checksum::Checksum;
use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, GraphError, Message, Next, Open, PacketMeta, Participant,
    Participants, ProtoId, Protocol, Qos, Reply, SessionId, SessionRef, Target, Up, UpiError,
    Upper,
};

use crate::info::{Ipv4Info, ip_source, link_broadcast};
use crate::ipv4::MAX_PAYLOAD;
use crate::slab::Slab;
use crate::unsupported;
pub use errors::{ErrorKind, SendError, Unreachable};
use ratelimit::TokenBucket;
use wire::{HEADER_LEN, Header, Repr, adjust_checksum};

/// Most ping sessions.
const MAX_SESSIONS: usize = 1024;

/// Most IP sessions kept for answering peers (least recently used closed first).
const PEER_LIMIT: usize = 64;

/// The timer that sends queued errors.
const TIMER_OUTBOX: u64 = 1;

/// What the echo reply's delivery strips: type, code, checksum, identifier.
const REPLY_STRIP: usize = 6;

/// The options of `icmp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "error_burst",
        doc: "errors that may be sent at once before the rate applies (default 50)",
    },
    OptionDoc {
        name: "error_rate",
        doc: "errors sent per second in the long run (default 100)",
    },
];

/// The registry entry of `icmp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "icmp",
    doc: "ICMP for IPv4: echo, ping sessions, error reports (RFC 792, RFC 1122)",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ip = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ip"))?;
    let burst: u32 = c.options.get("error_burst")?.unwrap_or(50);
    let rate: u32 = c.options.get("error_rate")?.unwrap_or(100);
    Ok(Box::new(Icmp::new(ip, burst, rate)))
}

/// A ping session.
#[derive(Debug)]
struct Session {
    upper: Upper,
    remote: Ipv4Addr,
    ident: u16,
    seq: u16,
    ip: SessionRef,
}

/// The ICMP protocol object.
pub struct Icmp {
    ip: ProtoId,
    address: Option<Ipv4Addr>,
    sessions: Slab<Session>,
    by_ident: BTreeMap<u16, SessionId>,
    peers: BTreeMap<Ipv4Addr, (SessionRef, u64)>,
    peer_clock: u64,
    outbox: VecDeque<(Ipv4Addr, Message)>,
    outbox_armed: bool,
    bucket: TokenBucket,
}

impl Icmp {
    /// ICMP over the IP protocol `ip`, sending at most `burst` errors at once
    /// and `rate` a second.
    pub fn new(ip: ProtoId, burst: u32, rate: u32) -> Icmp {
        Icmp {
            ip,
            address: None,
            sessions: Slab::new(MAX_SESSIONS),
            by_ident: BTreeMap::new(),
            peers: BTreeMap::new(),
            peer_clock: 0,
            outbox: VecDeque::new(),
            outbox_armed: false,
            bucket: TokenBucket::new(burst, rate),
        }
    }

    /// The identifier of ping session `sess`.
    pub fn ident_of(&self, sess: SessionId) -> Option<u16> {
        self.sessions.get(sess).map(|s| s.ident)
    }

    /// This host's address, asked of IP when first needed.
    fn address(&mut self, cx: &mut Cx) -> Option<Ipv4Addr> {
        if self.address.is_none()
            && let Ok(Reply::Ip(a)) = cx.control(self.ip, None, Control::GetIpAddr)
        {
            self.address = Some(a);
        }
        self.address
    }

    /// Sends `msg` to `dst` on a kept IP session (replies and errors).
    fn send_to(&mut self, dst: Ipv4Addr, msg: Message, cx: &mut Cx) -> Result<(), UpiError> {
        self.peer_clock += 1;
        let clock = self.peer_clock;
        if let Some((s, used)) = self.peers.get_mut(&dst) {
            *used = clock;
            cx.push(*s, msg);
            return Ok(());
        }
        let s = cx.open(
            self.ip,
            Participants::remote([Addr::Ip(dst)]),
            Qos::default(),
        )?;
        if self.peers.len() >= PEER_LIMIT {
            let lru = self
                .peers
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(a, _)| *a);
            if let Some((old, _)) = lru.and_then(|a| self.peers.remove(&a)) {
                cx.close(old);
            }
        }
        self.peers.insert(dst, (s, clock));
        cx.push(s, msg);
        Ok(())
    }

    /// Answers an echo request whose header was checked (RFC 1122 §3.2.2.6).
    fn answer_echo(
        &mut self,
        ident: u16,
        seq: u16,
        msg: &mut Message,
        meta: &PacketMeta,
        cx: &mut Cx,
    ) -> Up {
        let ip = Ipv4Info::from_meta(meta);
        if Some(ip.dst) != self.address(cx) || link_broadcast(meta) {
            return Up::Drop(DropReason::Other("broadcast-echo"));
        }
        if ip.src.is_unspecified() {
            return Up::Drop(DropReason::Other("unanswerable-source"));
        }
        let Some(checksum) = msg
            .peek(HEADER_LEN)
            .map(|h| u16::from_be_bytes([h[2], h[3]]))
        else {
            return Up::Drop(DropReason::Truncated);
        };
        msg.strip(HEADER_LEN);
        // Only the type changes, 8 → 0: the first 16-bit word goes 0x0800 → 0x0000.
        let checksum = adjust_checksum(checksum, u16::from(wire::kind::ECHO_REQUEST) << 8, 0);
        let mut reply = std::mem::take(msg);
        reply.push_slice(&Repr::EchoReply { ident, seq }.to_bytes(checksum));
        match self.send_to(ip.src, reply, cx) {
            Ok(()) => {
                cx.count("echo-replies");
                Up::Consumed
            }
            Err(e) => Up::Drop(e.into()),
        }
    }
}

fn verifies(msg: &Message) -> bool {
    let mut c = Checksum::new();
    for chunk in msg.chunks() {
        c.add(chunk);
    }
    c.sum() == 0xffff
}

impl Protocol for Icmp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        let parsed = Header::new_checked(hdr).and_then(|h| Repr::parse(&h));
        match parsed {
            Ok(Repr::EchoRequest { .. } | Repr::DstUnreachable { .. }) => Demux::To {
                target: Target::Protocol,
                hdr_len: HEADER_LEN,
                next: Next::Here,
            },
            Ok(Repr::EchoReply { ident, .. }) => {
                let session = self.by_ident.get(&ident).and_then(|id| {
                    self.sessions
                        .get(*id)
                        .filter(|s| Some(s.remote) == ip_source(meta))
                        .map(|s| (*id, s.upper))
                });
                match session {
                    Some((id, upper)) => Demux::To {
                        target: Target::Session(id),
                        hdr_len: REPLY_STRIP,
                        next: match upper {
                            Upper::App(a) => Next::App(a),
                            Upper::Proto(p) => Next::Proto(p),
                        },
                    },
                    None => Demux::Drop(DropReason::NoSession),
                }
            }
            Ok(Repr::TimeExceeded { .. }) => Demux::Drop(DropReason::Unsupported),
            Err(e) => e.demux(),
        }
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(hdr) = msg.pullup(HEADER_LEN) else {
            return Up::Drop(DropReason::Truncated);
        };
        let repr = match Header::new_checked(hdr).and_then(|h| Repr::parse(&h)) {
            Ok(r) => r,
            Err(e) => return Up::Drop(e.into()),
        };
        if !verifies(msg) {
            return Up::Drop(DropReason::BadChecksum);
        }
        match repr {
            Repr::EchoRequest { ident, seq } => self.answer_echo(ident, seq, msg, meta, cx),
            Repr::EchoReply { ident, .. } => {
                let owner = match target {
                    Target::Session(id) => self.sessions.get(id),
                    _ => None,
                };
                if owner.is_none_or(|s| s.ident != ident) {
                    return Up::Drop(DropReason::NoSession);
                }
                msg.strip(REPLY_STRIP);
                Up::Continue
            }
            Repr::DstUnreachable { code } => {
                msg.strip(HEADER_LEN);
                let from = Ipv4Info::from_meta(meta).src;
                self.receive_unreachable(code, msg, from, cx)
            }
            Repr::TimeExceeded { .. } => Up::Drop(DropReason::Unsupported),
        }
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let Some(s) = self.sessions.get_mut(sess) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        if msg.len() > MAX_PAYLOAD - HEADER_LEN {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        }
        s.seq = s.seq.wrapping_add(1);
        let header = Repr::EchoRequest {
            ident: s.ident,
            seq: s.seq,
        }
        .to_bytes_over(msg.chunks());
        msg.push_slice(&header);
        cx.push(s.ip, msg);
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        // ICMP has no address part of its own: the participants go to IP as
        // they are, and the remote address on top names the peer to match.
        let Some(Addr::Ip(remote)) = req.parts.remote.top() else {
            return Err(UpiError::BadParticipant("icmp needs a remote IPv4 address"));
        };
        if self.sessions.len() >= MAX_SESSIONS {
            return Err(UpiError::Exhausted("icmp sessions"));
        }
        let start = cx.random_u32() as u16;
        let ident = (0..=u16::MAX)
            .map(|i| start.wrapping_add(i))
            .find(|id| !self.by_ident.contains_key(id))
            .ok_or(UpiError::Exhausted("icmp identifiers"))?;
        let ip = cx.open(self.ip, req.parts, req.qos)?;
        let session = Session {
            upper: req.upper,
            remote,
            ident,
            seq: 0,
            ip,
        };
        let Some(id) = self.sessions.insert(session) else {
            cx.close(ip);
            return Err(UpiError::Exhausted("icmp sessions"));
        };
        self.by_ident.insert(ident, id);
        Ok(id)
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.sessions.remove(sess) {
            self.by_ident.remove(&s.ident);
            cx.close(s.ip);
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(MAX_PAYLOAD - HEADER_LEN)),
            (Control::GetParticipants, Some(id)) => {
                let remote = self.sessions.get(id).ok_or(UpiError::NoSuchSession)?.remote;
                let local = self.address(cx).ok_or(UpiError::Unreachable)?;
                Ok(Reply::Participants(Participants {
                    remote: Participant::of([Addr::Ip(remote)]),
                    local: Participant::of([Addr::Ip(local)]),
                }))
            }
            (Control::Private(op), _) => match op.downcast::<SendError>() {
                Ok(e) => self.send_error(*e, cx),
                Err(_) => Err(UpiError::Unsupported("this private operation on icmp")),
            },
            (op, _) => Err(unsupported(&op)),
        }
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        if token == TIMER_OUTBOX {
            self.flush_outbox(cx);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
