//! Segments leaving: smoltcp's egress, run by the engine timer, and every
//! datagram smoltcp sent pushed down to Strata's IP.
//!
//! smoltcp's sockets send from `poll_egress`, which an application calls
//! when `poll_at` says; the module calls it from one engine timer, due at
//! smoltcp's deadline, or at "now" once the engine has run the batch of
//! segments that arrived together or an application has written — so a
//! batch is acknowledged by one pass, as smoltcp's own loop would do it.
//! The datagrams smoltcp wrote (into the device's arena) lose their IPv4
//! header, which Strata's IP layer writes again, and go to the IP session of
//! their connection.

use std::net::Ipv4Addr;

use smoltcp::iface::PollResult;
use strata_core::{Cx, DropReason, Message};

use super::SmolTcp;
use super::clock;
use super::device::Sent;

/// The fixed TCP header.
const TCP_HEADER: usize = 20;

/// The segment from byte `ihl` of datagram `d` as a Strata message: its
/// header in the message's head (where Strata's own TCP puts it), its data a
/// slice of the datagram smoltcp wrote — or, for a small datagram, header
/// and data copied into the head together.
fn message(d: &Sent, ihl: usize) -> Message {
    match d {
        Sent::Shared(datagram) => {
            let segment = &datagram[ihl..];
            let len = (usize::from(segment[12] >> 4) * 4).clamp(TCP_HEADER, segment.len());
            let mut msg = Message::from_bytes(datagram.slice(ihl + len..));
            msg.push_slice(&segment[..len]);
            msg
        }
        Sent::Small(..) => {
            let mut msg = Message::new();
            msg.push_slice(&d.bytes()[ihl..]);
            msg
        }
    }
}

impl SmolTcp {
    /// The egress pass: everything smoltcp's sockets have to send, then what
    /// changed reported, closed sockets removed, and the timer set for
    /// smoltcp's next deadline.
    pub(super) fn egress(&mut self, cx: &mut Cx) {
        self.unkick(cx);
        let now = clock::enter(cx.now());
        loop {
            let Some(stack) = self.stack.as_mut() else {
                return;
            };
            let result = stack
                .iface
                .poll_egress(now, &mut stack.wire, &mut self.sockets);
            self.transmit(cx);
            if result == PollResult::None {
                break;
            }
        }
        self.upcalls_all(cx);
        let Some(stack) = self.stack.as_mut() else {
            return;
        };
        if let Some(at) = stack.iface.poll_at(now, &self.sockets) {
            let mut at = clock::from_smol(at);
            if at <= cx.now() {
                // smoltcp still has something to send right after a full
                // pass: it cannot (nothing in the module refuses it), but a
                // timer that kept firing at once would stall the engine, so
                // wait a tick.
                cx.count("poll-spin");
                at = cx.now() + std::time::Duration::from_millis(1);
            }
            self.wake_at(at, cx);
        }
        // The module's own deadline: the end of a closed session's linger.
        if let Some(at) = self
            .table
            .conns
            .values()
            .filter_map(|c| c.orphaned_until)
            .min()
        {
            self.wake_at(at, cx);
        }
    }

    /// Whether smoltcp has something to send now; if not, the engine timer
    /// is set for when it will.
    pub(super) fn due(&mut self, cx: &mut Cx) -> bool {
        let now = clock::enter(cx.now());
        let Some(stack) = self.stack.as_mut() else {
            return false;
        };
        match stack.iface.poll_at(now, &self.sockets) {
            Some(at) if clock::from_smol(at) <= cx.now() => true,
            Some(at) => {
                self.wake_at(clock::from_smol(at), cx);
                false
            }
            None => false,
        }
    }

    /// Pushes every datagram smoltcp sent to Strata's IP, its header
    /// stripped.
    pub(super) fn transmit(&mut self, cx: &mut Cx) {
        let Some(stack) = self.stack.as_mut() else {
            return;
        };
        if stack.wire.tx.is_empty() {
            return;
        }
        let mut sent = std::mem::take(&mut stack.wire.tx);
        for sent_one in sent.drain(..) {
            let d = sent_one.bytes();
            let ihl = usize::from(d[0] & 0x0f) * 4;
            if d.len() < ihl + TCP_HEADER {
                cx.count_drop(DropReason::Truncated);
                continue;
            }
            let dst = Ipv4Addr::new(d[16], d[17], d[18], d[19]);
            let segment = &d[ihl..];
            let src_port = u16::from_be_bytes([segment[0], segment[1]]);
            let dst_port = u16::from_be_bytes([segment[2], segment[3]]);
            let ip = match self.table.lookup(&(dst, dst_port, src_port)) {
                Some(id) => {
                    let Some(c) = self.table.conns.get_mut(&id) else {
                        continue;
                    };
                    c.seen.sent(segment);
                    cx.acting_for(id);
                    Some(c.ip)
                }
                // A reset for a segment of no session.
                None => self.table.peers.get(dst, self.ip, cx),
            };
            let Some(ip) = ip else {
                cx.count_drop(DropReason::NoRoute);
                continue;
            };
            cx.push(ip, message(&sent_one, ihl));
        }
        if let Some(stack) = self.stack.as_mut() {
            // The emptied vector goes back, so its room is reused.
            stack.wire.tx = sent;
        }
    }
}
