//! The node's receive path: the control path first (§3.6), and data copied
//! once, from the received frame to its final offset in the application's
//! buffer (§3.5.1).
//!
//! **Control first.** A link hands the engine a batch of frames, and the
//! engine runs each up the graph before the next, so the node sees control
//! and data datagrams in arrival order. It reads a control datagram at
//! once, but keeps a data datagram (the frame itself, no copy) until the
//! batch is through: its end's timer is set to "now", and the engine fires
//! timers only once its queues are empty. Every control datagram of a batch
//! is therefore read before any data datagram of it, as the paper's library
//! read the control socket first whenever both had packets.
//!
//! **One copy.** Zero copies, as over the kernel's UDP (the kernel writes
//! each payload into the application's buffer), cannot be had here: the
//! link reads a frame whole into its own memory before anyone knows what it
//! is — Ethernet, IP and UDP each decide from its bytes whose it is — so the
//! payload is in the frame's memory when the transport first sees it. The
//! transport then copies it, after every check, to its final offset:
//! [`strata_xport::Endpoint::handle_split`] takes the header and the payload
//! where they lie, whether the frame is one piece (a real link) or the
//! header and the payload are separate pieces (the in-memory link hands the
//! sender's message over as it was built). Only a datagram spread over more
//! pieces (one IP reassembled from fragments) is gathered first, a second
//! copy, counted apart (`copied`).

use std::net::SocketAddr;

use strata_core::{Cx, DropReason, Message, Up};
use strata_xport::Channel;
use strata_xport::wire::{self, Kind, Packet};

use super::end::End;
use super::{Waiting, XportNode};

/// Data datagrams the node keeps for the end of a batch, at most; beyond,
/// the oldest is read at once (the order among data kept).
const MAX_WAITING: usize = 512;

impl XportNode {
    /// A datagram for end `i` from `from` on `channel`.
    pub(super) fn input(
        &mut self,
        i: usize,
        from: SocketAddr,
        channel: Channel,
        msg: &mut Message,
        cx: &mut Cx,
    ) -> Up {
        let now = self.clock(cx.now());
        let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
            return Up::Drop(DropReason::NoSession);
        };
        if let Channel::Data(_) = channel {
            let oldest = if self.waiting.len() >= MAX_WAITING {
                self.waiting.pop_front()
            } else {
                None
            };
            self.waiting
                .push_back((i, from, channel, std::mem::take(msg)));
            if let Some(w) = oldest {
                self.feed_waiting(now, w, cx);
            }
            self.wake_at(i, cx.now(), cx);
            return Up::Consumed;
        }
        if !self.waiting.is_empty() {
            end.input.control_first += 1;
        }
        let len = msg.len();
        let Some(datagram) = msg.pullup(len) else {
            return Up::Drop(DropReason::Truncated);
        };
        let verdict = end.endpoint().handle(now, from, channel, datagram);
        self.wake_at(i, cx.now(), cx);
        // The transport's verdict on this datagram, under its own name.
        match verdict {
            Some(r) => Up::Drop(DropReason::Other(r.name())),
            None => Up::Consumed,
        }
    }

    /// Reads the data datagrams kept for the end of the batch.
    pub(super) fn drain(&mut self, now: std::time::Instant, cx: &mut Cx) {
        while let Some(w) = self.waiting.pop_front() {
            self.feed_waiting(now, w, cx);
        }
    }

    fn feed_waiting(&mut self, now: std::time::Instant, w: Waiting, cx: &mut Cx) {
        let (i, from, channel, mut msg) = w;
        // The end closed while its datagram waited.
        let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        if let Some(r) = feed(end, now, from, channel, &mut msg) {
            cx.count_drop(DropReason::Other(r.name()));
        }
    }
}

/// Feeds one data datagram; returns the transport's reason when it refused it.
fn feed(
    end: &mut End,
    now: std::time::Instant,
    from: SocketAddr,
    channel: Channel,
    msg: &mut Message,
) -> Option<strata_xport::DropReason> {
    let len = msg.len();
    let first = msg.contiguous_at(0);
    if first.len() >= len {
        // One piece (a frame from a real link): the transport copies the
        // payload from it to its place.
        let payload = payload_len(first);
        let verdict = end.endpoint().handle(now, from, channel, first);
        if verdict.is_none() {
            end.input.placed += payload as u64;
        }
        return verdict;
    }
    // Two pieces, the header and the payload (the in-memory link hands the
    // sender's message over as built): each read where it lies.
    let rest = msg.contiguous_at(first.len());
    if first.len() + rest.len() == len && wire::is_data_header(first) {
        let verdict = end.endpoint().handle_split(now, from, channel, first, rest);
        if verdict.is_none() {
            end.input.placed += rest.len() as u64;
        }
        return verdict;
    }
    // Spread otherwise: gathered into one piece first, then fed whole.
    let Some(datagram) = msg.pullup(len) else {
        return Some(strata_xport::DropReason::Truncated);
    };
    let payload = payload_len(datagram);
    let verdict = end.endpoint().handle(now, from, channel, datagram);
    if verdict.is_none() {
        end.input.copied += payload as u64;
    }
    verdict
}

/// A whole datagram's data bytes (0 for any but a data packet).
fn payload_len(datagram: &[u8]) -> usize {
    Packet::new_checked(datagram)
        .ok()
        .filter(|p| p.kind() == Kind::Data)
        .map_or(0, |p| p.payload().len())
}
