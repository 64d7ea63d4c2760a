//! The upper edge of the module: opens, closes, `push`, and Strata's TCP
//! operations (`tcp::api`) translated into calls on smoltcp's sockets.
//!
//! Most have an equivalent: `Write` is `send_slice`, `Shutdown` is `close`
//! (a FIN after the queued data), `Abort` is `abort`, `SetNodelay` is Nagle
//! off. Some need the module's help: manual flow control (see `upcalls`), a
//! `Shutdown` before the handshake ends (smoltcp's `close` in SYN-SENT would
//! abort; the module holds it until the connection is established), writes
//! before the handshake ends (smoltcp refuses them; the module takes nothing
//! and says `Writable` once it can), a listen backlog (smoltcp has none).
//! The rest have no equivalent in smoltcp, and get one of the three answers
//! of seed 004 §4.1.2: `SetChecksum` and `SetPriority` an error (nothing is
//! done), an ICMP error report success (it is counted and ignored: smoltcp
//! does not act on ICMP for TCP). docs/design.md has the whole table.

use std::any::Any;
use std::time::Duration;

use smoltcp::socket::tcp::{self, State};
use strata_core::{
    Addr, Control, Cx, DropReason, Message, Open, Participant, Participants, Reply, SessionId,
    UpiError, Upper,
};
use strata_proto::icmp::Unreachable;
use strata_proto::tcp::api::{
    Abort, Consumed, Info, ManualConsume, SendSpace, SetBacklog, SetKeepalive, SetNodelay,
    Shutdown, Write,
};

use super::SmolTcp;
use super::stack;
use super::table::{Conn, Listener};

/// How long a session its application closed may wait for its peer's FIN
/// (Linux's `tcp_fin_timeout`, Strata's TCP's `fin_timeout` default).
const ORPHAN_LINGER: Duration = Duration::from_secs(60);

/// The error for an operation with no equivalent (§4.1.2's second option).
fn unsupported(op: &Control) -> UpiError {
    UpiError::Unsupported(match op {
        Control::SetChecksum(_) => {
            "SetChecksum on smoltcp-tcp (smoltcp's checksums are the device's)"
        }
        Control::SetPriority(_) => "SetPriority on smoltcp-tcp",
        Control::Private(_) => "this private operation on smoltcp-tcp",
        other => other.name(),
    })
}

/// Room in a socket's send ring.
pub(super) fn free(socket: &tcp::Socket) -> usize {
    socket.send_capacity() - socket.send_queue()
}

/// Copies as much of `msg` as fits into the send ring.
pub(super) fn enqueue(socket: &mut tcp::Socket, msg: &Message) -> usize {
    let mut n = 0;
    for chunk in msg.chunks() {
        let took = socket.send_slice(chunk).unwrap_or(0);
        n += took;
        if took < chunk.len() {
            break;
        }
    }
    n
}

/// The application (only applications sit on smoltcp-tcp: it carries data
/// to no protocol).
fn application(upper: Upper) -> Result<Upper, UpiError> {
    match upper {
        Upper::App(_) => Ok(upper),
        Upper::Proto(_) => Err(UpiError::Unsupported(
            "a protocol above smoltcp-tcp (it serves applications)",
        )),
    }
}

impl SmolTcp {
    /// Active open: a socket connecting to the remote participant.
    pub(super) fn connect(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let upper = application(req.upper)?;
        let rport = req.parts.remote.pop_port().ok_or(UpiError::BadParticipant(
            "smoltcp-tcp needs the remote port on top of the remote address",
        ))?;
        let Some(Addr::Ip(rip)) = req.parts.remote.top() else {
            return Err(UpiError::BadParticipant(
                "smoltcp-tcp needs a remote IPv4 address below the port",
            ));
        };
        if self.table.conns.len() >= self.cfg.max_connections {
            return Err(UpiError::Exhausted("smoltcp-tcp connections"));
        }
        self.ensure_stack(cx)?;
        let lport = match req.parts.local.pop_port().filter(|p| *p != 0) {
            Some(p) => p,
            None => self
                .table
                .ephemeral(cx.random_u32())
                .ok_or(UpiError::Exhausted("smoltcp-tcp ephemeral ports"))?,
        };
        if self.table.lookup(&(rip, rport, lport)).is_some() {
            return Err(UpiError::InUse);
        }
        let mut socket = stack::socket(&self.cfg);
        let Some(st) = self.stack.as_mut() else {
            return Err(UpiError::Unreachable);
        };
        socket
            .connect(st.iface.context(), (rip, rport), lport)
            .map_err(|_| UpiError::BadParticipant("smoltcp refused the endpoints"))?;
        let ip = cx.open(self.ip, req.parts, req.qos)?;
        let socket = self.sockets.add(socket);
        let id = self.table.insert(Conn::new(
            socket,
            upper,
            (rip, rport),
            lport,
            ip,
            None,
            self.cfg.manual_consume,
            State::SynSent,
        ));
        cx.count("active-open");
        // The SYN goes from the egress pass: the opener makes the session's
        // DAA path after `open` returns, and the SYN should travel on it.
        self.kick(cx);
        Ok(id)
    }

    /// Passive open: a socket listening on the local port.
    pub(super) fn listen(&mut self, mut req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let upper = application(req.upper)?;
        let port = req.parts.local.pop_port().filter(|p| *p != 0);
        let port = port.ok_or(UpiError::BadParticipant(
            "a passive open needs a local port",
        ))?;
        if self.table.listeners.contains_key(&port) {
            return Err(UpiError::InUse);
        }
        self.ensure_stack(cx)?;
        let mut socket = stack::socket(&self.cfg);
        socket
            .listen(port)
            .map_err(|_| UpiError::BadParticipant("smoltcp refused the port"))?;
        let socket = self.listening.add(socket);
        self.table.listeners.insert(
            port,
            Listener {
                upper,
                socket,
                backlog: self.cfg.backlog,
                pending: 0,
            },
        );
        Ok(())
    }

    /// Withdraws a listener; its half-open connections are reset, as closing
    /// a listening socket does on Linux.
    pub(super) fn unlisten(&mut self, mut req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let port = req.parts.local.pop_port().ok_or(UpiError::BadParticipant(
            "a passive open needs a local port",
        ))?;
        match self.table.listeners.get(&port) {
            Some(l) if l.upper == req.upper => {}
            _ => return Err(UpiError::NoSuchSession),
        }
        if let Some(l) = self.table.listeners.remove(&port) {
            self.listening.remove(l.socket);
        }
        for c in self.table.conns.values_mut() {
            if c.listener == Some(port) {
                c.attached = false;
                self.sockets.get_mut::<tcp::Socket>(c.socket).abort();
            }
        }
        self.kick(cx);
        Ok(())
    }

    /// The upper is done with the session: queued data and a FIN still go,
    /// but nothing more is delivered and no event follows. Unread data makes
    /// it a reset (RFC 2525 §2.17), as on Linux and with Strata's TCP.
    pub(super) fn close_session(&mut self, id: SessionId, cx: &mut Cx) {
        let Some(c) = self.table.conns.get_mut(&id) else {
            return;
        };
        c.attached = false;
        let socket = self.sockets.get_mut::<tcp::Socket>(c.socket);
        if c.unread > 0 || socket.recv_queue() > 0 {
            cx.count("closed-with-unread-data");
            socket.abort();
        } else {
            socket.close();
            let until = cx.now() + ORPHAN_LINGER;
            c.orphaned_until = Some(until);
            self.wake_at(until, cx);
        }
        self.kick(cx);
    }

    /// `push`: the whole message into the send ring, or nothing (counted
    /// `sndbuf-full`, and `Writable` follows once there is room).
    pub(super) fn send(&mut self, id: SessionId, msg: Message, cx: &mut Cx) {
        let Some(c) = self.table.conns.get_mut(&id).filter(|c| c.attached) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let socket = self.sockets.get_mut::<tcp::Socket>(c.socket);
        if !can_send(socket.state()) || c.early.shutdown {
            cx.count_drop(DropReason::Other("send-after-close"));
            return;
        }
        let room = if socket.may_send() {
            free(socket)
        } else {
            self.cfg.sndbuf - c.early.len
        };
        if room < msg.len() {
            c.wants_writable = true;
            cx.count_drop(DropReason::Other("sndbuf-full"));
            return;
        }
        if socket.may_send() {
            enqueue(socket, &msg);
            self.egress(cx);
        } else {
            c.early.len += msg.len();
            c.early.data.push(msg);
        }
    }

    /// `control`: on the protocol (`sess` is `None`) or a session.
    pub(super) fn control_op(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(self.cfg.sndbuf)),
            (Control::GetIpAddr, _) => cx.control(self.ip, None, Control::GetIpAddr),
            (Control::GetParticipants, Some(id)) => {
                let c = self.table.conns.get(&id).ok_or(UpiError::NoSuchSession)?;
                let mut local = Participant::new();
                if let Some(st) = &self.stack {
                    local.push(Addr::Ip(st.address));
                }
                local.push(Addr::Port(c.local_port));
                Ok(Reply::Participants(Participants {
                    remote: Participant::of([Addr::Ip(c.remote.0), Addr::Port(c.remote.1)]),
                    local,
                }))
            }
            (Control::Write(msg), Some(id)) => self.session_op(id, Box::new(Write(msg)), cx),
            (Control::Private(op), Some(id)) => self.session_op(id, op, cx),
            (Control::Private(op), None) => {
                if let Some(b) = op.downcast_ref::<SetBacklog>() {
                    // Emulated: smoltcp has no backlog (see `input`).
                    let l = self.table.listeners.get_mut(&b.port);
                    l.ok_or(UpiError::NoSuchSession)?.backlog = b.backlog;
                    return Ok(Reply::Done);
                }
                if op.is::<Unreachable>() {
                    // §4.1.2's third option: success, nothing done. smoltcp
                    // does not act on ICMP errors about TCP segments.
                    cx.count("icmp-error-ignored");
                    return Ok(Reply::Done);
                }
                Err(UpiError::Unsupported(
                    "this private operation on smoltcp-tcp",
                ))
            }
            (op, _) => Err(unsupported(&op)),
        }
    }

    /// A private operation on session `id`.
    fn session_op(
        &mut self,
        id: SessionId,
        op: Box<dyn Any + Send>,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        cx.acting_for(id);
        let mtu = self.stack.as_ref().map_or(576, |s| s.mtu);
        let sndbuf = self.cfg.sndbuf;
        let c = self
            .table
            .conns
            .get_mut(&id)
            .ok_or(UpiError::NoSuchSession)?;
        let socket = self.sockets.get_mut::<tcp::Socket>(c.socket);
        if op.is::<Info>() {
            return Ok(Reply::Private(Box::new(c.seen.info(socket, c.unread, mtu))));
        }
        if !c.attached {
            return Err(UpiError::Closed);
        }
        let mut deliver = false;
        // What leaves at once, as Strata's TCP sends within the call: a
        // write's segments (so that Nagle off means a segment per write),
        // and an abort's reset (the session is gone with it).
        let mut at_once = op.is::<Write>();
        let reply = match op.downcast::<Write>() {
            Ok(w) => {
                let len = w.0.len();
                if c.early.shutdown || !can_send(socket.state()) {
                    return Err(UpiError::Closed);
                }
                let (n, room) = if socket.may_send() {
                    let n = enqueue(socket, &w.0);
                    (n, free(socket))
                } else {
                    // Before the handshake ends smoltcp takes nothing: the
                    // module holds what fits until it does.
                    let mut msg = w.0;
                    let n = msg.len().min(sndbuf - c.early.len);
                    msg.truncate(n);
                    if n > 0 {
                        c.early.len += n;
                        c.early.data.push(msg);
                    }
                    (n, sndbuf - c.early.len)
                };
                if n < len || room == 0 {
                    c.wants_writable = true;
                }
                Reply::Size(n)
            }
            Err(op) => {
                if op.is::<SendSpace>() {
                    Reply::Size(if socket.may_send() {
                        free(socket)
                    } else {
                        sndbuf - c.early.len
                    })
                } else if op.is::<Shutdown>() {
                    if socket.state() == State::SynSent {
                        // smoltcp's `close` would abort: the FIN waits for
                        // the handshake, as RFC 9293 §3.10.4 says.
                        c.early.shutdown = true;
                    } else {
                        socket.close();
                    }
                    Reply::Done
                } else if op.is::<Abort>() {
                    c.attached = false;
                    socket.abort();
                    cx.count("aborted");
                    at_once = true;
                    Reply::Done
                } else if let Some(Consumed(n)) = op.downcast_ref::<Consumed>() {
                    c.unread = c.unread.saturating_sub(*n);
                    deliver = c.manual;
                    Reply::Done
                } else if let Some(ManualConsume(on)) = op.downcast_ref::<ManualConsume>() {
                    c.manual = *on;
                    if !on {
                        c.unread = 0;
                        deliver = true;
                    }
                    Reply::Done
                } else if let Some(SetNodelay(on)) = op.downcast_ref::<SetNodelay>() {
                    socket.set_nagle_enabled(!on);
                    Reply::Done
                } else if let Some(SetKeepalive(k)) = op.downcast_ref::<SetKeepalive>() {
                    // Approximated: smoltcp probes every interval once idle
                    // (it has no separate idle time), and gives up when the
                    // peer has been silent for its user timeout.
                    socket.set_keep_alive(k.map(|k| k.interval.into()));
                    Reply::Done
                } else {
                    return Err(UpiError::Unsupported(
                        "this private operation on smoltcp-tcp",
                    ));
                }
            }
        };
        if deliver {
            // Held-back data the application may now take.
            self.upcalls(id, None, false, cx);
        }
        if at_once {
            self.egress(cx);
        } else {
            self.kick(cx);
        }
        Ok(reply)
    }
}

/// True while the application may still write (RFC 9293's states where
/// SEND is allowed).
fn can_send(s: State) -> bool {
    matches!(
        s,
        State::SynSent | State::SynReceived | State::Established | State::CloseWait
    )
}
