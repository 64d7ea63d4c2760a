//! ICMP errors: sending them for the layers around ICMP, and handing the ones
//! received to the protocol whose datagram they quote.
//!
//! Sending follows RFC 1122 §3.2.2: never about an ICMP error, a datagram sent
//! to a broadcast or multicast address or as a link-layer broadcast (the asker
//! says which, see [`SendError::broadcast`]), a fragment
//! other than the first, or a datagram whose source names no single host; and
//! never faster than the token bucket allows (RFC 1812 §4.3.2.8). Errors are
//! queued and sent from a timer due at once, so a protocol may ask for one in
//! the middle of its own pop (IP reporting an unknown protocol) without ICMP
//! calling back into it.

use std::net::Ipv4Addr;

use strata_core::{Control, Cx, DropReason, Message, Reply, Up, UpiError, Upper};

use super::wire::{HEADER_LEN, Repr, is_error_type};
use super::{Icmp, TIMER_OUTBOX};
use crate::ipv4::UpperFor;
use crate::ipv4::wire::Header as IpHeader;

/// Most errors waiting for the outbox timer.
const OUTBOX_LIMIT: usize = 16;

/// RFC 1812 §4.3.2.3: an error datagram stays within 576 bytes.
const MAX_QUOTE: usize = 576 - 20 - HEADER_LEN;

/// Which error to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Destination unreachable, code 2: no upper protocol for the number.
    ProtocolUnreachable,
    /// Destination unreachable, code 3: no session or listener for the port.
    PortUnreachable,
    /// Time exceeded, code 1: fragment reassembly time exceeded.
    ReassemblyTimeExceeded,
}

impl ErrorKind {
    fn repr(self) -> Repr {
        match self {
            ErrorKind::ProtocolUnreachable => Repr::DstUnreachable { code: 2 },
            ErrorKind::PortUnreachable => Repr::DstUnreachable { code: 3 },
            ErrorKind::ReassemblyTimeExceeded => Repr::TimeExceeded { code: 1 },
        }
    }
}

/// Private control for the `icmp` protocol: send an error about a received
/// datagram.
#[derive(Clone, Debug)]
pub struct SendError {
    /// The error.
    pub kind: ErrorKind,
    /// The datagram's IP header as received (`PacketMeta::net_header`) and at
    /// least its first 8 payload bytes (RFC 792; RFC 1122 §3.2.2).
    pub quoted: Vec<u8>,
    /// Whether the datagram was a broadcast or multicast, at the link or the
    /// IP layer. The caller knows its own addresses; ICMP, which may be called
    /// from inside IP, must not have to ask.
    pub broadcast: bool,
}

/// Private control ICMP sends to an upper protocol: a destination-unreachable
/// message arrived about a datagram that protocol sent.
#[derive(Clone, Debug)]
pub struct Unreachable {
    /// The code (RFC 792, RFC 1122 §3.2.2.1).
    pub code: u8,
    /// Who sent the error.
    pub from: Ipv4Addr,
    /// The quoted datagram: its IP header and the start of its payload.
    pub quoted: Vec<u8>,
}

impl Unreachable {
    /// What the error means to a session: protocol and port unreachable (codes
    /// 2 and 3) are the peer refusing; the others say the path is gone.
    pub fn error(&self) -> UpiError {
        match self.code {
            2 | 3 => UpiError::Refused,
            _ => UpiError::Unreachable,
        }
    }
}

fn names_a_host(a: Ipv4Addr) -> bool {
    !(a.is_unspecified()
        || a.is_broadcast()
        || a.is_multicast()
        || a.is_loopback()
        || u32::from(a) >> 28 == 0xf)
}

impl Icmp {
    /// Handles [`SendError`]: applies RFC 1122's rules and the rate limit,
    /// builds the message and queues it.
    pub(super) fn send_error(&mut self, e: SendError, cx: &mut Cx) -> Result<Reply, UpiError> {
        let ip = IpHeader::new_checked(&e.quoted[..])
            .map_err(|_| UpiError::BadParticipant("quoted bytes are not an IPv4 header"))?;
        let about_an_error = ip.protocol() == 1
            && e.quoted
                .get(ip.header_len())
                .is_none_or(|t| is_error_type(*t));
        let forbidden = e.broadcast
            || !names_a_host(ip.dst())
            || !names_a_host(ip.src())
            || ip.frag_offset() != 0
            || about_an_error;
        if forbidden {
            cx.count("error-suppressed");
            return Ok(Reply::Done);
        }
        if !self.bucket.take(cx.now()) {
            cx.count("error-rate-limited");
            return Ok(Reply::Done);
        }
        if self.outbox.len() >= OUTBOX_LIMIT {
            cx.count("error-outbox-full");
            return Ok(Reply::Done);
        }
        let quoted = &e.quoted[..e.quoted.len().min(MAX_QUOTE)];
        let mut msg = Message::from_slice(quoted);
        msg.push_slice(&e.kind.repr().to_bytes_over([quoted]));
        self.outbox.push_back((ip.src(), msg));
        if !self.outbox_armed {
            self.outbox_armed = true;
            cx.set_timer(cx.now(), TIMER_OUTBOX);
        }
        Ok(Reply::Done)
    }

    /// Sends what the outbox holds.
    pub(super) fn flush_outbox(&mut self, cx: &mut Cx) {
        self.outbox_armed = false;
        while let Some((dst, msg)) = self.outbox.pop_front() {
            match self.send_to(dst, msg, cx) {
                Ok(()) => cx.count("errors-sent"),
                // A generated error with no way out is not a received packet
                // dying: it is counted as an event, not a drop.
                Err(_) => cx.count("error-unroutable"),
            }
        }
    }

    /// Hands a received destination-unreachable message (header stripped) to
    /// the protocol the quoted datagram was for.
    pub(super) fn receive_unreachable(
        &mut self,
        code: u8,
        msg: &Message,
        from: Ipv4Addr,
        cx: &mut Cx,
    ) -> Up {
        let mut quoted = vec![0u8; msg.len().min(MAX_QUOTE)];
        msg.copy_to_slice(0, &mut quoted);
        let Ok(ip) = IpHeader::new_checked(&quoted[..]) else {
            return Up::Drop(DropReason::Malformed);
        };
        // RFC 1122 §3.2.2: the quote holds the header and at least 8 bytes.
        if quoted.len() < ip.header_len() + 8 {
            return Up::Drop(DropReason::Truncated);
        }
        if Some(ip.src()) != self.address(cx) {
            return Up::Drop(DropReason::NotForUs);
        }
        let protocol = ip.protocol();
        let upper = match cx.control(
            self.ip,
            None,
            Control::Private(Box::new(UpperFor(protocol))),
        ) {
            Ok(Reply::Private(b)) => b.downcast::<Option<Upper>>().ok().and_then(|u| *u),
            _ => None,
        };
        let Some(Upper::Proto(p)) = upper else {
            cx.count("error-unclaimed");
            return Up::Consumed;
        };
        let report = Unreachable { code, from, quoted };
        if cx
            .control(p, None, Control::Private(Box::new(report)))
            .is_err()
        {
            cx.count("error-unclaimed");
        }
        Up::Consumed
    }
}
