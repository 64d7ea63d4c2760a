//! `seqnum`: the example protocol of `docs/writing-a-protocol.md`.
//!
//! A four-byte sequence number in front of each message, per pair of hosts, so
//! the receiver can count the messages that never arrived (`gap` events) and
//! those that arrived after a later one (`late` events). It sits on IPv4; the
//! graph config gives it its IP protocol number (`numbers = { ip = 254 }`, a
//! number RFC 3692 sets aside for experiments). Small as it is, it shows every
//! part of a Strata protocol: a checked header, a pure demux, a pop that changes
//! state, push, active and passive opens, options and counters.

use std::any::Any;
use std::net::Ipv4Addr;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Addr, Cx, Demux, DropReason, GraphError, Message, Next, Open, PacketMeta, Participants,
    ProtoId, Protocol, Qos, SessionId, SessionRef, Target, Up, UpiError, Upper,
};

use crate::info::Ipv4Info;

/// Bytes of header: the sequence number, big-endian.
pub const HEADER_LEN: usize = 4;

/// The options of `seqnum`.
pub const OPTIONS: &[OptionDoc] = &[OptionDoc {
    name: "max_peers",
    doc: "most peers with a session at once; more are dropped (default 64)",
}];

/// The registry entry of `seqnum`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "seqnum",
    doc: "example: a sequence number per message, counting gaps (docs/writing-a-protocol.md)",
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
    let max_peers = c.options.get("max_peers")?.unwrap_or(64);
    Ok(Box::new(SeqNum {
        ip,
        max_peers,
        sessions: Vec::new(),
        listener: None,
    }))
}

/// One peer: what we send it next and what we expect from it.
struct Session {
    remote: Ipv4Addr,
    upper: Upper,
    lower: SessionRef,
    next_send: u32,
    expect: u32,
}

/// The protocol object: its sessions and the passive open, if any.
pub struct SeqNum {
    ip: ProtoId,
    max_peers: usize,
    sessions: Vec<Option<Session>>,
    listener: Option<Upper>,
}

fn next_of(upper: Upper) -> Next {
    match upper {
        Upper::App(a) => Next::App(a),
        Upper::Proto(p) => Next::Proto(p),
    }
}

impl SeqNum {
    fn find(&self, remote: Ipv4Addr) -> Option<usize> {
        self.sessions
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.remote == remote))
    }

    fn add(&mut self, remote: Ipv4Addr, upper: Upper, cx: &mut Cx) -> Result<SessionId, UpiError> {
        if self.sessions.iter().flatten().count() >= self.max_peers {
            return Err(UpiError::Exhausted("seqnum peers"));
        }
        let lower = cx.open(
            self.ip,
            Participants::remote([Addr::Ip(remote)]),
            Qos::default(),
        )?;
        let session = Session {
            remote,
            upper,
            lower,
            next_send: 0,
            expect: 0,
        };
        let slot = self.sessions.iter().position(Option::is_none);
        let i = match slot {
            Some(i) => {
                self.sessions[i] = Some(session);
                i
            }
            None => {
                self.sessions.push(Some(session));
                self.sessions.len() - 1
            }
        };
        Ok(SessionId(i as u32))
    }
}

impl Protocol for SeqNum {
    /// Pure: the peer's session by source address, or the passive open.
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        if hdr.len() < HEADER_LEN {
            return Demux::Short(HEADER_LEN);
        }
        let (target, next) = match (self.find(Ipv4Info::from_meta(meta).src), self.listener) {
            (Some(i), _) => {
                let upper = self.sessions[i].as_ref().map(|s| s.upper);
                (Target::Session(SessionId(i as u32)), upper.map(next_of))
            }
            (None, Some(listener)) => (Target::Enable(0), Some(next_of(listener))),
            (None, None) => return Demux::Drop(DropReason::NoSession),
        };
        match next {
            Some(next) => Demux::To {
                target,
                hdr_len: HEADER_LEN,
                next,
            },
            None => Demux::Drop(DropReason::NoSession),
        }
    }

    /// The state change: compare the number with the one expected, count what
    /// is missing or late, strip the header.
    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(hdr) = msg.pullup(HEADER_LEN) else {
            return Up::Drop(DropReason::Truncated);
        };
        let seq = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        msg.strip(HEADER_LEN);
        let id = match target {
            Target::Session(id) => id,
            // A passive open matched: make the peer's session, announce it, and
            // deliver on it.
            Target::Enable(_) => {
                let Some(listener) = self.listener else {
                    return Up::Drop(DropReason::NoSession);
                };
                let id = match self.add(Ipv4Info::from_meta(meta).src, listener, cx) {
                    Ok(id) => id,
                    Err(e) => return Up::Drop(e.into()),
                };
                let parts = Participants::remote([Addr::Ip(Ipv4Info::from_meta(meta).src)]);
                cx.open_done(listener, id, parts);
                if let Some(s) = self.sessions[id.index()].as_mut() {
                    s.expect = seq.wrapping_add(1);
                }
                return Up::Opened(id);
            }
            Target::Protocol => return Up::Drop(DropReason::NoSession),
        };
        let Some(s) = self.sessions.get_mut(id.index()).and_then(Option::as_mut) else {
            return Up::Drop(DropReason::NoSession);
        };
        // Serial-number arithmetic (RFC 1982): "ahead" within half the space.
        let ahead = seq.wrapping_sub(s.expect);
        if ahead < 1 << 31 {
            if ahead > 0 {
                cx.count_n("gap", u64::from(ahead));
            }
            s.expect = seq.wrapping_add(1);
        } else {
            cx.count("late");
        }
        Up::Continue
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let Some(s) = self.sessions.get_mut(sess.index()).and_then(Option::as_mut) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        msg.push_slice(&s.next_send.to_be_bytes());
        s.next_send = s.next_send.wrapping_add(1);
        cx.push(s.lower, msg);
    }

    /// Active open: the remote participant names the peer's IPv4 address.
    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let remote = req.parts.remote.pop_ip().ok_or(UpiError::BadParticipant(
            "seqnum needs the peer's IPv4 address",
        ))?;
        if self.find(remote).is_some() {
            return Err(UpiError::InUse);
        }
        self.add(remote, req.upper, cx)
    }

    /// Passive open: accept every peer that writes first.
    fn open_enable(&mut self, req: Open, _cx: &mut Cx) -> Result<(), UpiError> {
        if self.listener.is_some() {
            return Err(UpiError::InUse);
        }
        self.listener = Some(req.upper);
        Ok(())
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.sessions.get_mut(sess.index()).and_then(Option::take) {
            cx.close(s.lower);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
