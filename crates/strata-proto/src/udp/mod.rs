//! UDP (RFC 768) with x-kernel sessions.
//!
//! Participants are stacks, lowest layer first: an application opens with
//! local `[Port(p)]` (0 or nothing picks an ephemeral port from 49152–65535)
//! and, for a connected session, remote `[Ip(a), Port(q)]`. UDP pops the ports
//! and opens an IP session with what remains. A session without a remote is
//! *bound*: it receives from anyone (the sender is in the packet's records:
//! [`info::source`](crate::info::source)) but cannot send, since a message
//! carries no destination.
//!
//! `open_enable` with local `[Port(p)]` is a passive open: the first datagram
//! from a new peer makes a connected session, announced with `open_done` and
//! delivered on it. Such sessions are bounded (`max_sessions`) and closed after
//! `idle_timeout` without traffic, the application told with `AppEvent::Closed`.
//!
//! Demux looks for a connected session, then a bound one or a passive open;
//! a datagram for none of them is popped by the protocol itself, which asks
//! ICMP for a port unreachable (RFC 1122 §4.1.3.1) and drops it. Checksums are
//! verified when the session (or, without one, the protocol) has them on and
//! the field is not zero (RFC 768: zero means none was computed); a session
//! can turn them off with `SetChecksum(false)`, as seed 000 §5.2 runs UDP.
//! A destination unreachable for a connected session closes it with
//! `UpiError::Refused` (or `Unreachable`) given to the application.

mod config;
mod passive;
mod sessions;
pub mod wire;

use std::any::Any;
use std::net::Ipv4Addr;
use std::time::Duration;

use strata_core::ilp::Stage;
use strata_core::{
    Addr, AppEvent, Control, Cx, Demux, DropReason, Message, Next, Open, PacketMeta, Participant,
    Participants, ProtoId, Protocol, Reply, SessionId, SessionRef, Target, Up, UpiError, Upper,
};

use crate::icmp::Unreachable;
use crate::info::{Ipv4Info, Ports};
use crate::unsupported;
use sessions::{Enable, Session, Table};
use wire::{HEADER_LEN, Header, Repr};

pub use config::{OPTIONS, SPEC};
pub use sessions::EPHEMERAL;

/// The largest datagram payload: 65535 − 20 (IP) − 8 (UDP).
pub const MAX_PAYLOAD: usize = crate::ipv4::MAX_PAYLOAD - HEADER_LEN;

/// The UDP protocol object.
pub struct Udp {
    ip: ProtoId,
    address: Option<Ipv4Addr>,
    checksum: bool,
    table: Table,
}

fn next_of(upper: Upper) -> Next {
    match upper {
        Upper::App(a) => Next::App(a),
        Upper::Proto(p) => Next::Proto(p),
    }
}

impl Udp {
    /// UDP over `ip`; `checksum` is the default for sessions, `max_sessions`
    /// bounds passively made sessions, which close after `idle` without traffic.
    pub fn new(ip: ProtoId, checksum: bool, max_sessions: usize, idle: Duration) -> Udp {
        Udp {
            ip,
            address: None,
            checksum,
            table: Table::new(max_sessions, idle),
        }
    }

    /// The local port of session `sess`.
    pub fn local_port(&self, sess: SessionId) -> Option<u16> {
        self.table.sessions.get(sess).map(|s| s.local_port)
    }

    /// How many sessions passive opens made.
    pub fn passive_sessions(&self) -> usize {
        self.table.passive
    }

    fn address(&mut self, cx: &mut Cx) -> Option<Ipv4Addr> {
        if self.address.is_none()
            && let Ok(Reply::Ip(a)) = cx.control(self.ip, None, Control::GetIpAddr)
        {
            self.address = Some(a);
        }
        self.address
    }

    fn close_session(&mut self, id: SessionId, cx: &mut Cx) -> Option<Session> {
        let s = self.table.remove(id)?;
        if let Some(t) = s.timer {
            cx.cancel_timer(t);
        }
        if let Some(ip) = s.ip {
            cx.close(ip);
        }
        Some(s)
    }
}

impl Protocol for Udp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        let h = match Header::new_checked(hdr) {
            Ok(h) => h,
            Err(e) => return e.demux(),
        };
        let ports = Ports {
            src: h.src_port(),
            dst: h.dst_port(),
        };
        if meta.set(ports).is_err() {
            return Demux::Drop(DropReason::Other("meta-full"));
        }
        let src = Ipv4Info::from_meta(meta).src;
        let (target, next) = match self.table.lookup(ports.dst, src, ports.src) {
            Some(id) => match self.table.sessions.get(id) {
                Some(s) => (Target::Session(id), next_of(s.upper)),
                None => (Target::Protocol, Next::Here),
            },
            None => match self.table.enables.get(&h.dst_port()) {
                // Pop opens a session for the new peer and the rest goes to the
                // listener's owner on it (`Up::Opened`).
                Some(e) => (Target::Enable(u32::from(h.dst_port())), next_of(e.upper)),
                None => (Target::Protocol, Next::Here),
            },
        };
        Demux::To {
            target,
            hdr_len: HEADER_LEN,
            next,
        }
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        // A copy of the header: the message is truncated and stripped below.
        let Some(&header) = msg
            .pullup(HEADER_LEN)
            .and_then(|h| h.first_chunk::<HEADER_LEN>())
        else {
            return Up::Drop(DropReason::Truncated);
        };
        let r = match Header::new_checked(&header[..]).and_then(|h| Repr::parse(&h)) {
            Ok(r) => r,
            Err(e) => return Up::Drop(e.into()),
        };
        if r.length > msg.len() {
            return Up::Drop(DropReason::Truncated);
        }
        msg.truncate(r.length);
        // Demux recorded the ports when it ran on this header.
        if !meta.demuxed {
            let ports = Ports {
                src: r.src_port,
                dst: r.dst_port,
            };
            if meta.set(ports).is_err() {
                return Up::Drop(DropReason::Other("meta-full"));
            }
        }
        if let Target::Session(id) = target {
            // The datagram's session, found once: it says whether to verify.
            let Some(s) = self.table.sessions.get_mut(id) else {
                return Up::Drop(DropReason::NoSession);
            };
            s.last_active = cx.now();
            let verify = s.checksum && r.checksum != 0;
            // The pseudo-header and header are summed now; the data is a
            // data-manipulation stage: its own pass under LLM, fused with the
            // other layers' under ILLM and DAA (seed 000 §2.2).
            msg.strip(HEADER_LEN);
            if verify {
                let ip = Ipv4Info::from_meta(meta);
                let sum = wire::header_sum(ip.src, ip.dst, &r);
                if !cx.stage(msg, Stage::Checksum(sum)) {
                    return Up::Drop(DropReason::BadChecksum);
                }
            }
            return Up::Continue;
        }
        let ip = Ipv4Info::from_meta(meta);
        let verify = match target {
            Target::Enable(port) => {
                let port = u16::try_from(port).unwrap_or_default();
                self.table.enables.get(&port).is_none_or(|e| e.checksum)
            }
            Target::Protocol | Target::Session(_) => self.checksum,
        };
        let verify = verify && r.checksum != 0;
        match target {
            // A datagram that opens a session, or that nobody wants, is checked
            // whole before anything is made or answered for it.
            _ if verify && wire::sum(ip.src, ip.dst, r.length, msg.chunks()).sum() != 0xffff => {
                Up::Drop(DropReason::BadChecksum)
            }
            Target::Enable(_) => self.accept(r.dst_port, msg, meta, cx),
            Target::Protocol | Target::Session(_) => {
                self.refuse(msg, meta, cx);
                Up::Drop(DropReason::NoSession)
            }
        }
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let Some(me) = self.address(cx) else {
            cx.count_drop(DropReason::NoRoute);
            return;
        };
        let now = cx.now();
        let Some(s) = self.table.sessions.get_mut(sess) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let (Some((rip, rport)), Some(ip)) = (s.remote, s.ip) else {
            cx.count_drop(DropReason::Other("unconnected"));
            return;
        };
        if msg.len() > MAX_PAYLOAD {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        }
        s.last_active = now;
        let mut header = Repr {
            src_port: s.local_port,
            dst_port: rport,
            length: HEADER_LEN + msg.len(),
            checksum: 0,
        };
        if s.checksum {
            header.checksum = match msg.peek(msg.len()) {
                Some(data) => wire::checksum_of_one(me, rip, &header, data),
                None => wire::checksum_of(me, rip, &header, msg.chunks()),
            };
        }
        msg.push_slice(&header.to_bytes());
        cx.push(ip, msg);
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let asked = req.parts.local.pop_port().filter(|p| *p != 0);
        let local_port = match asked {
            Some(p) => p,
            None => {
                let start = cx.random_u32();
                self.table
                    .ephemeral(start)
                    .ok_or(UpiError::Exhausted("udp ephemeral ports"))?
            }
        };
        let now = cx.now();
        let mut session = Session {
            upper: req.upper,
            local_port,
            remote: None,
            ip: None,
            checksum: self.checksum,
            passive: false,
            last_active: now,
            timer: None,
        };
        match req.parts.remote.pop_port() {
            None if !req.parts.remote.is_empty() => {
                return Err(UpiError::BadParticipant(
                    "udp needs the remote port on top of the remote address",
                ));
            }
            None => {
                if self.table.bound.contains_key(&local_port)
                    || self.table.enables.contains_key(&local_port)
                {
                    return Err(UpiError::InUse);
                }
            }
            Some(rport) => {
                let Some(Addr::Ip(rip)) = req.parts.remote.top() else {
                    return Err(UpiError::BadParticipant(
                        "udp needs a remote IPv4 address below the port",
                    ));
                };
                if self.table.connected.contains_key(&(local_port, rip, rport)) {
                    return Err(UpiError::InUse);
                }
                session.remote = Some((rip, rport));
                session.ip = Some(cx.open(self.ip, req.parts, req.qos)?);
            }
        }
        let ip = session.ip;
        self.table.insert(session).ok_or_else(|| {
            if let Some(ip) = ip {
                cx.close(ip);
            }
            UpiError::Exhausted("udp sessions")
        })
    }

    fn open_enable(&mut self, mut req: Open, _cx: &mut Cx) -> Result<(), UpiError> {
        let port =
            req.parts
                .local
                .pop_port()
                .filter(|p| *p != 0)
                .ok_or(UpiError::BadParticipant(
                    "a passive open needs a local port",
                ))?;
        if self.table.bound.contains_key(&port) || self.table.enables.contains_key(&port) {
            return Err(UpiError::InUse);
        }
        let enable = Enable {
            upper: req.upper,
            checksum: self.checksum,
        };
        self.table.enables.insert(port, enable);
        Ok(())
    }

    fn open_disable(&mut self, mut req: Open, _cx: &mut Cx) -> Result<(), UpiError> {
        let port = req.parts.local.pop_port().ok_or(UpiError::BadParticipant(
            "a passive open needs a local port",
        ))?;
        match self.table.enables.get(&port) {
            Some(e) if e.upper == req.upper => {
                self.table.enables.remove(&port);
                Ok(())
            }
            _ => Err(UpiError::NoSuchSession),
        }
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
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(MAX_PAYLOAD)),
            (Control::GetIpAddr, _) => self.address(cx).map(Reply::Ip).ok_or(UpiError::Unreachable),
            (Control::SetChecksum(on), None) => {
                self.checksum = on;
                Ok(Reply::Done)
            }
            (Control::SetChecksum(on), Some(id)) => {
                self.table
                    .sessions
                    .get_mut(id)
                    .ok_or(UpiError::NoSuchSession)?
                    .checksum = on;
                Ok(Reply::Done)
            }
            (Control::GetParticipants, Some(id)) => {
                let me = self.address(cx).ok_or(UpiError::Unreachable)?;
                let s = self.table.sessions.get(id).ok_or(UpiError::NoSuchSession)?;
                let remote = match s.remote {
                    Some((ip, port)) => Participant::of([Addr::Ip(ip), Addr::Port(port)]),
                    None => Participant::new(),
                };
                Ok(Reply::Participants(Participants {
                    remote,
                    local: Participant::of([Addr::Ip(me), Addr::Port(s.local_port)]),
                }))
            }
            (Control::Private(op), _) => match op.downcast::<Unreachable>() {
                Ok(u) => Ok(self.unreachable(&u, cx)),
                Err(_) => Err(UpiError::Unsupported("this private operation on udp")),
            },
            (op, _) => Err(unsupported(&op)),
        }
    }

    /// The idle timer of a passively made session.
    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let id = SessionId(token as u32);
        let now = cx.now();
        let idle = self.table.idle_timeout;
        let Some(s) = self.table.sessions.get_mut(id) else {
            return;
        };
        let due = s.last_active + idle;
        if due > now {
            s.timer = Some(cx.set_timer(due, token));
            return;
        }
        s.timer = None;
        let upper = s.upper;
        self.close_session(id, cx);
        cx.count("idle-closed");
        if let Upper::App(app) = upper {
            let session = SessionRef::new(cx.me(), id);
            cx.notify(
                app,
                AppEvent::Closed {
                    session,
                    error: None,
                },
            );
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
