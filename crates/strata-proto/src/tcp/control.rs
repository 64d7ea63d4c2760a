//! The application's side of a connection: TCP's private control operations
//! (see [`api`](super::api)), `push`, `close`, and ICMP reports about
//! connections.

use std::any::Any;

use strata_core::{Cx, DropReason, Message, Reply, SessionId, UpiError};

use super::Tcp;
use super::api::{
    Abort, Consumed, Info, ManualConsume, SendSpace, SetKeepalive, SetNodelay, Shutdown,
};
use super::conn::Conn;
use super::seq::Seq;
use super::state::State;
use crate::icmp::Unreachable;
use crate::ipv4::wire::Header as IpHeader;

impl Tcp {
    /// `Control::Write` on session `id`: as much of `msg` as the send buffer
    /// takes.
    pub(super) fn write(
        &mut self,
        id: SessionId,
        msg: Message,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        cx.acting_for(id);
        let Tcp { table, cfg, .. } = self;
        let c = table.conns.get_mut(id).ok_or(UpiError::NoSuchSession)?;
        if !c.attached || !c.state.can_send() || c.snd.fin_queued {
            return Err(UpiError::Closed);
        }
        let n = c.snd.write(msg);
        c.output(cfg, cx);
        self.settle(id, cx);
        Ok(Reply::Size(n))
    }

    /// A private operation on session `id`.
    pub(super) fn session_op(
        &mut self,
        id: SessionId,
        op: Box<dyn Any + Send>,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        cx.acting_for(id);
        let Tcp { table, cfg, .. } = self;
        let c = table.conns.get_mut(id).ok_or(UpiError::NoSuchSession)?;
        if op.is::<Info>() {
            return Ok(Reply::Private(Box::new(c.info())));
        }
        if !c.attached {
            return Err(UpiError::Closed);
        }
        let now = cx.now();
        let reply = if op.is::<SendSpace>() {
            Reply::Size(c.snd.free())
        } else if op.is::<Shutdown>() {
            c.close_send();
            Reply::Done
        } else if op.is::<Abort>() {
            c.attached = false;
            abort(c, cx);
            Reply::Done
        } else if let Some(Consumed(n)) = op.downcast_ref::<Consumed>() {
            c.rcv.unread = c.rcv.unread.saturating_sub(*n);
            c.rcv.copied(*n, now);
            if c.rcv.window_update_due(c.snd.mss) {
                c.rcv.ack_now = true;
            }
            Reply::Done
        } else if let Some(ManualConsume(on)) = op.downcast_ref::<ManualConsume>() {
            c.rcv.manual = *on;
            if !on {
                c.rcv.unread = 0;
                c.rcv.ack_now |= c.rcv.window_update_due(c.snd.mss);
            }
            Reply::Done
        } else if let Some(SetNodelay(on)) = op.downcast_ref::<SetNodelay>() {
            c.snd.nodelay = *on;
            Reply::Done
        } else if let Some(SetKeepalive(k)) = op.downcast_ref::<SetKeepalive>() {
            c.keepalive = *k;
            c.probes = 0;
            c.timers.keepalive = None;
            Reply::Done
        } else {
            return Err(UpiError::Unsupported("this private operation on tcp"));
        };
        if c.state != State::Closed {
            c.output(cfg, cx);
        }
        self.settle(id, cx);
        Ok(reply)
    }

    /// `push`: queues the message whole, or refuses it whole when even the
    /// send buffer's cap cannot hold it (counted `sndbuf-full`; the
    /// application hears `Writable` when room comes back).
    pub(super) fn send(&mut self, id: SessionId, msg: Message, cx: &mut Cx) {
        let Tcp { table, cfg, .. } = self;
        let Some(c) = table.conns.get_mut(id).filter(|c| c.attached) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        if !c.state.can_send() || c.snd.fin_queued {
            cx.count_drop(DropReason::Other("send-after-close"));
            return;
        }
        if !c.snd.push_whole(msg) {
            cx.count_drop(DropReason::Other("sndbuf-full"));
        }
        c.output(cfg, cx);
    }

    /// The upper is done with the session (RFC 9293 §3.10.4 CLOSE): queued
    /// data and then a FIN still go, and the connection finishes on its own,
    /// but nothing more is delivered and no event follows. Unread data
    /// (manual flow control) makes it a reset instead (RFC 2525 §2.17).
    pub(super) fn close_session(&mut self, id: SessionId, cx: &mut Cx) {
        cx.acting_for(id);
        let Tcp { table, cfg, .. } = self;
        let Some(c) = table.conns.get_mut(id) else {
            return;
        };
        c.attached = false;
        if c.rcv.unread > 0 {
            cx.count("closed-with-unread-data");
            abort(c, cx);
        } else if c.state == State::SynSent {
            c.state = State::Closed;
        } else {
            c.close_send();
            c.orphan_linger(cfg, cx.now());
            if c.state != State::Closed {
                c.output(cfg, cx);
            }
        }
        self.settle(id, cx);
    }

    /// A destination unreachable about a segment we sent (RFC 1122
    /// §4.2.3.9, RFC 5927 §4.1): checked against the connection's sequence
    /// numbers so a blind attacker cannot use it; it fails a connection still
    /// in SYN-SENT when the peer refuses (protocol or port unreachable), and
    /// is otherwise kept as a soft error, reported if the connection later
    /// times out.
    pub(super) fn unreachable(&mut self, u: &Unreachable, cx: &mut Cx) -> Reply {
        let Ok(ip) = IpHeader::new_checked(&u.quoted[..]) else {
            cx.count("icmp-error-malformed");
            return Reply::Done;
        };
        let Some(tcp) = u.quoted.get(ip.header_len()..ip.header_len() + 8) else {
            cx.count("icmp-error-malformed");
            return Reply::Done;
        };
        let sport = u16::from_be_bytes([tcp[0], tcp[1]]);
        let dport = u16::from_be_bytes([tcp[2], tcp[3]]);
        let seq = Seq(u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]));
        let tuple = (ip.src(), sport, ip.dst(), dport);
        let Some(id) = self.table.lookup(&tuple) else {
            cx.count("icmp-error-unmatched");
            return Reply::Done;
        };
        let Some(c) = self.table.conns.get_mut(id) else {
            return Reply::Done;
        };
        if !(seq >= c.snd.una && seq < c.snd.nxt.max(c.snd.una + 1)) {
            cx.count("icmp-error-out-of-window");
            return Reply::Done;
        }
        let error = u.error();
        if c.state == State::SynSent && error == UpiError::Refused {
            cx.count("closed-by-icmp");
            c.terminate(Some(error), cx);
        } else {
            c.soft_error = Some(error);
        }
        self.settle(id, cx);
        Reply::Done
    }
}

/// Resets the connection (`tcp::Abort`): RST from SND.NXT, then CLOSED.
fn abort(c: &mut Conn, cx: &mut Cx) {
    if !matches!(c.state, State::SynSent | State::TimeWait | State::Closed) {
        c.send_rst(c.snd.nxt, cx);
    }
    cx.count("aborted");
    c.terminate(None, cx);
}
