//! What the module tells the graph after smoltcp ran: the x-kernel's
//! upcalls, made from what changed in a socket.
//!
//! smoltcp tells nobody anything: an application polls its sockets and
//! looks at their state and rings. The module does that polling for the
//! application after each call into smoltcp and turns what it sees into the
//! events and deliveries Strata's TCP makes, in the same order: the
//! handshake's completion (`Connected`, or `OpenDone` through the
//! listener's upper), data, `PeerClosed` once the peer's FIN follows the
//! last byte, `Writable` once a third of the send ring is free for a writer
//! that was refused, `Closed` at TIME-WAIT or CLOSED — with `Refused` after
//! a reset, and `TimedOut` when smoltcp gave up (its user timeout), which
//! the module tells apart by having seen the reset or not.
//!
//! Data is copied out of smoltcp's receive ring into one shared buffer (the
//! copy smoltcp's applications make too). Under manual flow control the
//! module takes no more than the application may still hold unconsumed
//! (one ring's worth): the rest stays in smoltcp's ring, whose free space
//! is the window smoltcp advertises, so a reader that stops closes the
//! window as it does with Strata's TCP.

use bytes::BytesMut;
use smoltcp::socket::tcp::{self, State};
use strata_core::{
    Addr, AppEvent, Cx, LinkId, Message, PacketMeta, Participant, Participants, SessionId,
    SessionRef, UpiError, Upper,
};

use super::SmolTcp;
use super::control::enqueue;
use super::table::Conn;

/// How much delivery buffer is reserved at once.
const DELIVERY_CHUNK: usize = 256 * 1024;

/// True once both SYNs are acknowledged.
fn synchronized(s: State) -> bool {
    !matches!(
        s,
        State::Closed | State::Listen | State::SynSent | State::SynReceived
    )
}

/// True once the peer's FIN has been taken.
fn fin_received(s: State) -> bool {
    matches!(
        s,
        State::CloseWait | State::LastAck | State::Closing | State::TimeWait
    )
}

/// Deliveries up to this size are copied into a message's own head buffer
/// (pooled, as every message's is) instead of the shared delivery buffer:
/// the same one copy, without cutting and freezing a slice of shared
/// storage, which costs more than the copy for a few bytes (a round trip's
/// request, an acknowledgment-sized answer).
const SMALL_READ: usize = 128;

/// Copies up to `budget` readable bytes out of `socket`'s ring.
fn read(socket: &mut tcp::Socket, delivery: &mut BytesMut, budget: usize) -> Option<Message> {
    let n = socket.recv_queue().min(budget);
    if n == 0 {
        return None;
    }
    if n <= SMALL_READ {
        let mut m = Message::new();
        let got = socket.recv_slice(m.push(n)).unwrap_or(0);
        m.truncate(got);
        return (got > 0).then_some(m);
    }
    if delivery.capacity() < n {
        delivery.reserve(n.max(DELIVERY_CHUNK));
    }
    let mut left = n;
    while left > 0 {
        let got = socket
            .recv(|ring| {
                let k = ring.len().min(left);
                delivery.extend_from_slice(&ring[..k]);
                (k, k)
            })
            .unwrap_or(0);
        if got == 0 {
            break;
        }
        left -= got;
    }
    Some(Message::from_bytes(delivery.split().freeze()))
}

/// True when [`SmolTcp::upcalls`] would report nothing for a session after
/// an egress pass: its state is the one last reported (an egress pass moves
/// no data in, and the calls that release held data, `Consumed` and
/// `ManualConsume`, make their own upcalls), its handshake was reported, its
/// application holds it and waits for no room, nothing is left to read,
/// and a peer's FIN was told. Every other session gets its upcalls.
fn quiet(c: &Conn, socket: &tcp::Socket) -> bool {
    let state = socket.state();
    state == c.last
        && c.connected
        && c.attached
        && !c.wants_writable
        && socket.recv_queue() == 0
        && (c.peer_closed || !fin_received(state))
}

/// Sends `event` to the session's application, if it still has one.
fn notify(c: &Conn, event: AppEvent, cx: &mut Cx) {
    if let (true, true, Upper::App(app)) = (c.attached, c.announced, c.upper) {
        cx.notify(app, event);
    }
}

impl SmolTcp {
    /// Upcalls for session `id` after smoltcp ran for it. With `meta` (a
    /// segment's pop), data readable now is returned for the popped message
    /// to carry, unless an event announcing the session went first; without,
    /// it is delivered through the engine. `rst`: the segment was a reset.
    pub(super) fn upcalls(
        &mut self,
        id: SessionId,
        meta: Option<&PacketMeta>,
        rst: bool,
        cx: &mut Cx,
    ) -> Option<Message> {
        let SmolTcp {
            sockets,
            table,
            delivery,
            cfg,
            stack,
            ..
        } = self;
        let c = table.conns.get_mut(&id)?;
        let socket = sockets.get_mut::<tcp::Socket>(c.socket);
        let state = socket.state();
        let session = SessionRef::new(cx.me(), id);
        let mut announced_now = false;
        let mut handed = false;
        if !c.connected && synchronized(state) {
            c.connected = true;
            // What the application did during the handshake goes to smoltcp
            // now (it fits: the ring is as large as what was held).
            for m in c.early.data.drain(..) {
                enqueue(socket, &m);
                handed = true;
            }
            c.early.len = 0;
            if std::mem::take(&mut c.early.shutdown) {
                socket.close();
                handed = true;
            }
            match c.listener.take() {
                Some(port) => {
                    if let Some(l) = table.listeners.get_mut(&port) {
                        l.pending = l.pending.saturating_sub(1);
                    }
                    c.announced = true;
                    announced_now = true;
                    let address = stack.as_ref().map(|s| s.address);
                    let mut local = Participant::new();
                    if let Some(a) = address {
                        local.push(Addr::Ip(a));
                    }
                    local.push(Addr::Port(c.local_port));
                    let parts = Participants {
                        remote: Participant::of([Addr::Ip(c.remote.0), Addr::Port(c.remote.1)]),
                        local,
                    };
                    cx.open_done(c.upper, id, parts);
                }
                None => {
                    notify(c, AppEvent::Connected(session), cx);
                    announced_now = true;
                }
            }
        } else if !c.connected && c.listener.is_some() && state == State::Listen {
            // A reset during the handshake sends smoltcp's socket back to
            // listening; the module has a listener already: this one goes.
            socket.abort();
            cx.count("handshake-reset");
        }
        let mut data = None;
        if c.attached && c.announced {
            // Once the peer's FIN is in, no more data can come and the window
            // no longer matters: everything goes up, as Strata's TCP delivers
            // it, and none of it waits in smoltcp's ring for TIME-WAIT's end
            // (which empties the ring).
            let budget = if c.manual && !fin_received(state) {
                cfg.rcvbuf.saturating_sub(c.unread)
            } else {
                usize::MAX
            };
            data = read(socket, delivery, budget);
            if let Some(d) = &data {
                c.seen.bytes_received += d.len() as u64;
                if c.manual {
                    c.unread += d.len();
                }
            }
        } else if !c.attached && socket.recv_queue() > 0 && state != State::Closed {
            // Nobody will read it: a reset, as Linux answers data for a
            // closed socket (RFC 2525 §2.17).
            socket.abort();
            cx.count("data-after-close");
        }
        if let Some(d) = data.take_if(|_| announced_now || meta.is_none())
            && let Upper::App(app) = c.upper
        {
            if announced_now {
                cx.count("delivered-after-open");
            }
            let fresh;
            let meta = match meta {
                Some(m) => m,
                None => {
                    // Data no one segment brought (held back, then let
                    // go by `Consumed`): a meta of its own.
                    fresh = PacketMeta::new(LinkId(0), cx.now());
                    &fresh
                }
            };
            cx.deliver(app, Some(session), d, meta);
        }
        if !c.peer_closed && fin_received(state) && socket.recv_queue() == 0 {
            c.peer_closed = true;
            notify(c, AppEvent::PeerClosed(session), cx);
        }
        if c.wants_writable
            && socket.may_send()
            && !c.early.shutdown
            && socket.send_capacity() - socket.send_queue() >= (socket.send_capacity() / 3).max(1)
        {
            c.wants_writable = false;
            notify(c, AppEvent::Writable(session), cx);
        }
        // Closed once both directions are done: at TIME-WAIT after the
        // peer's end was told, or at CLOSED (a reset, a timeout, LAST-ACK's
        // end).
        let done = match state {
            State::TimeWait => c.peer_closed || !c.attached,
            State::Closed => true,
            _ => false,
        };
        if !c.closed && done {
            c.closed = true;
            let error = match state {
                State::TimeWait => None,
                _ if rst => Some(UpiError::Refused),
                _ if c.last == State::LastAck => None,
                _ => Some(UpiError::TimedOut),
            };
            notify(c, AppEvent::Closed { session, error }, cx);
            c.attached = false;
        }
        c.last = state;
        self.handed |= handed;
        data
    }

    /// Upcalls for every session after an egress pass, and sockets that
    /// reached CLOSED removed (after the pass, so that a reset an abort
    /// left to send has gone). A session with nothing to report is skipped
    /// ([`quiet`]).
    pub(super) fn upcalls_all(&mut self, cx: &mut Cx) {
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        ids.extend(self.table.conns.keys().copied());
        for &id in &ids {
            let skip = self
                .table
                .conns
                .get(&id)
                .is_some_and(|c| quiet(c, self.sockets.get::<tcp::Socket>(c.socket)));
            if !skip {
                self.upcalls(id, None, false, cx);
            }
            let Some(c) = self.table.conns.get(&id) else {
                continue;
            };
            let socket = self.sockets.get_mut::<tcp::Socket>(c.socket);
            if c.orphaned_until.is_some_and(|t| cx.now() >= t) && socket.state() != State::Closed {
                // Its reset goes in the next round of the egress pass, and
                // the session after it.
                socket.abort();
                cx.count("orphan-timeout");
                self.handed = true;
                continue;
            }
            if socket.state() == State::Closed
                && let Some(c) = self.table.remove(id)
            {
                self.sockets.remove(c.socket);
                self.table.peers.retire(c.remote.0, c.ip, cx);
            }
        }
        self.scratch = ids;
    }
}
