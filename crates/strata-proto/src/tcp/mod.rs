//! TCP (RFC 9293) with window scaling and timestamps (RFC 7323), SACK and
//! D-SACK (RFC 2018, RFC 6675, RFC 2883), RACK-TLP loss detection (RFC
//! 8985), RFC 5961's protections, RFC 6528 initial sequence numbers, and
//! CUBIC (RFC 9438) or NewReno (RFC 5681, RFC 6582) congestion control.
//!
//! # Using it from an application
//!
//! Participants are stacks, lowest layer first, as for UDP.
//!
//! - **Connect**: `cx.open(tcp, Participants::remote([Addr::Ip(dst),
//!   Addr::Port(p)]).with_local([Addr::Port(0)]), qos)` returns the session at
//!   once (local port 0 or none picks an ephemeral one, RFC 6056). The SYN
//!   leaves from a timer due at once, so a DAA path made for the session
//!   carries it. `AppEvent::Connected(session)` follows when the handshake
//!   completes, or `AppEvent::Closed { error: Some(Refused | TimedOut | …) }`.
//! - **Listen**: `cx.open_enable(tcp, Participants::local([Addr::Port(p)]),
//!   qos)`. Each connection that completes its handshake arrives as
//!   `AppEvent::OpenDone { session, parts }`. The backlog (connections still
//!   in SYN-RECEIVED) is the `backlog` option, or `SetBacklog` per port.
//! - **Receive**: data arrives in order through `App::receive(Some(session),
//!   msg, meta)`, as the received segments themselves (no copy), each
//!   delivery one segment or the run of segments it made contiguous.
//!   `AppEvent::PeerClosed(session)` follows the last byte when the peer
//!   closes its direction. By default delivered data counts as consumed; with
//!   [`ManualConsume`]`(true)` (or the `manual_consume` option) it counts
//!   against the advertised window until the application reports
//!   [`Consumed`]`(n)`, which is how a socket layer with a bounded queue keeps
//!   the window honest.
//! - **Send**: `Control::Write(msg)` (or [`Write`]`(msg).into()`) takes as much as
//!   the send buffer has room for and answers `Reply::Size(n)`; offer the
//!   rest again after `AppEvent::Writable(session)`, so a transfer never loses
//!   data. [`SendSpace`] answers the room. `cx.send(session, msg)` (push)
//!   queues the message whole when it fits under the buffer's cap
//!   (`sndbuf_max`), and otherwise refuses it whole, counted `sndbuf-full`,
//!   followed by `Writable` once room comes back.
//! - **Close**: [`Shutdown`] is a half-close: a FIN follows the queued data,
//!   receiving goes on, and `AppEvent::Closed { error: None }` comes once both
//!   directions are done (at TIME-WAIT or CLOSED). `cx.close(session)` hands
//!   the session back: queued data and the FIN still go and the connection
//!   finishes on its own, but nothing more is delivered and no event follows
//!   (data arriving after it, or unread data at close, makes it a reset, as
//!   on Linux). [`Abort`] resets at once.
//! - **Other operations**: [`SetNodelay`] (Nagle is on by default, RFC 9293
//!   §3.7.4), [`SetKeepalive`], and [`Info`], answered with a [`ConnInfo`]
//!   (state, cwnd, ssthresh, SRTT, RTO, counters …).
//! - **Failure**: a reset gives `Closed { error: Some(Refused) }`; too many
//!   retransmissions or unanswered keepalives give `Some(TimedOut)` (or the
//!   ICMP error seen meanwhile).
//!
//! # How the code is laid out
//!
//! `wire`/`options` (the header), `seq` (modular sequence numbers), `state`
//! (the state diagram), `dispatch` (demux, and the part of pop that finds the
//! connection), `input` (segment arrival), `ack` (what an ACK does),
//! `output` (what goes out, and how a segment is built), `send` and `recv`
//! (the two halves of the connection), `rtt` (RFC 6298's estimator),
//! `timers` (retransmission, loss probe, reordering, persist, delayed ACK,
//! keepalive, TIME-WAIT), `recovery`, `sack` (the scoreboard of segments
//! sent) and `rack` (RACK-TLP) for loss recovery, `congestion` (the
//! algorithms),
//! `listen` (passive opens), `isn`, `table`, `control` (the application's
//! operations), `conn` (the connection record), `config` (options).
//!
//! # Dispatch
//!
//! Demux is pure: the 4-tuple finds the connection; in-order data of an
//! established connection goes to its upper (`Next::App`), out-of-order data
//! is `Demux::Stateful` (ILLM and DAA fall back for it), a listener's port is
//! `Target::Enable`, anything else `Target::Protocol`. Pop takes the
//! connection demux found (or a DAA path recorded) when its 4-tuple is the
//! segment's, and looks it up from the header otherwise, checks
//! the checksum before touching any state, and runs RFC 9293's rules. In-order
//! data leaves pop as the message itself (`Up::Continue`), joined with any
//! out-of-order data it made contiguous, so the engine delivers it, each
//! frame counted once (`Up::Redirect` when demux could not have known, as for
//! a retransmission that overlaps data already received); a segment that
//! completes a handshake and carries data is delivered through `cx.deliver`
//! after the `OpenDone` or `Connected` event instead (counted
//! `delivered-after-open`), so the application hears of the session first. The checksum cannot be a deferred ILP stage: the state change
//! depends on it.
//!
//! # Performance
//!
//! A receiver acknowledges every second full-sized segment (RFC 5681 §4.2)
//! once the frames that arrived in the same batch have been processed, so a
//! batch gets one ACK (see `recv`); senders count the bytes a stretch ACK
//! covers (`congestion::slow_start`). A segment, first sent or resent, is a
//! slice of the application's own buffers; the scoreboard keeps a record per
//! segment in flight, and totals that make `pipe` and "anything lost?"
//! constant-time.
//!
//! Not implemented: urgent data is delivered in line and not signalled (RFC
//! 6093), no SYN cookies, no TCP Fast Open, no ECN or PRR, D-SACK is sent and
//! used for tail loss probes but does not widen RACK's reordering window, no
//! path MTU discovery, no IPv6.

mod ack;
pub mod api;
mod config;
pub mod congestion;
mod conn;
mod control;
mod dispatch;
mod input;
pub mod isn;
mod listen;
pub mod options;
mod output;
pub mod peers;
pub mod rack;
pub mod rate;
pub mod recovery;
pub mod recv;
pub mod rtt;
pub mod sack;
pub mod send;
pub mod seq;
pub mod state;
mod table;
mod timers;
pub mod wire;

use std::any::Any;
use std::net::Ipv4Addr;

use strata_core::{
    Addr, Control, Cx, Demux, Message, Open, PacketMeta, Participant, Participants, ProtoId,
    Protocol, Reply, SessionId, Target, Up, UpiError,
};

pub use api::{
    Abort, ConnInfo, Consumed, Info, Keepalive, ManualConsume, SendSpace, SetBacklog, SetKeepalive,
    SetNodelay, Shutdown, Stats, Write,
};
pub use config::{Config, OPTIONS, SPEC};
pub use peers::PeerSessions;
pub use table::EPHEMERAL;

use crate::icmp::Unreachable;
use crate::ipv4::GetOptPayload;
use crate::unsupported;
use conn::{Conn, Offer};
use isn::IsnGenerator;
use listen::{Listener, window_scale_for};
use state::State;
use table::Table;
use wire::HEADER_LEN;

/// The TCP protocol object.
pub struct Tcp {
    ip: ProtoId,
    cfg: Config,
    address: Option<Ipv4Addr>,
    mss: Option<u16>,
    isn: Option<IsnGenerator>,
    table: Table,
}

impl Tcp {
    /// TCP over `ip` with settings `cfg`.
    pub fn new(ip: ProtoId, cfg: Config) -> Tcp {
        let table = Table::new(cfg.max_connections);
        Tcp {
            ip,
            cfg,
            address: None,
            mss: None,
            isn: None,
            table,
        }
    }

    /// How many connections exist, in every state.
    pub fn connection_count(&self) -> usize {
        self.table.conns.len()
    }

    /// The state of session `sess`, if it exists.
    pub fn state_of(&self, sess: SessionId) -> Option<State> {
        self.table.conns.get(sess).map(|c| c.state)
    }

    /// What [`Info`] would answer for session `sess`.
    pub fn info(&self, sess: SessionId) -> Option<ConnInfo> {
        self.table.conns.get(sess).map(Conn::info)
    }

    /// Every connection's session and state.
    pub fn connections(&self) -> Vec<(SessionId, State)> {
        self.table
            .conns
            .iter()
            .map(|(id, c)| (id, c.state))
            .collect()
    }

    /// Connections of the listener on `port` still in SYN-RECEIVED.
    pub fn pending(&self, port: u16) -> Option<usize> {
        self.table.listeners.get(&port).map(|l| l.pending)
    }

    fn address(&mut self, cx: &mut Cx) -> Option<Ipv4Addr> {
        if self.address.is_none()
            && let Ok(Reply::Ip(a)) = cx.control(self.ip, None, Control::GetIpAddr)
        {
            self.address = Some(a);
        }
        self.address
    }

    /// The MSS we announce: the IP payload that fits a frame, less our header.
    fn mss(&mut self, cx: &mut Cx) -> u16 {
        let ip = self.ip;
        *self.mss.get_or_insert_with(|| {
            let op = Control::Private(Box::new(GetOptPayload));
            let payload = match cx.control(ip, None, op) {
                Ok(Reply::Size(n)) => n,
                // RFC 9293 §3.7.1: every host takes 576-byte datagrams.
                _ => 576 - 20,
            };
            payload
                .saturating_sub(HEADER_LEN)
                // Linux's floor, TCP_MIN_MSS.
                .clamp(88, usize::from(u16::MAX)) as u16
        })
    }

    /// The ISN generator, keyed on first use from the engine's random numbers.
    fn isn(&mut self, cx: &mut Cx) -> IsnGenerator {
        self.isn
            .get_or_insert_with(|| IsnGenerator::new(cx.random_u64(), cx.random_u64()))
            .clone()
    }

    fn offer(&mut self, cx: &mut Cx) -> Offer {
        Offer {
            sack: self.cfg.sack,
            timestamps: self.cfg.timestamps,
            wscale: self
                .cfg
                .window_scaling
                .then(|| window_scale_for(self.cfg.rcvbuf_max)),
            mss: self.mss(cx),
        }
    }

    /// After any call about connection `id`: a passive connection that got
    /// announced leaves its listener's backlog, and a closed one is deleted.
    fn settle(&mut self, id: SessionId, cx: &mut Cx) {
        let Some(c) = self.table.conns.get_mut(id) else {
            return;
        };
        if c.announced
            && let Some(port) = c.listener.take()
            && let Some(l) = self.table.listeners.get_mut(&port)
        {
            l.pending = l.pending.saturating_sub(1);
        }
        if c.state == State::Closed {
            self.remove(id, cx);
        }
    }

    fn remove(&mut self, id: SessionId, cx: &mut Cx) {
        if let Some(mut c) = self.table.remove(id) {
            c.timers.cancel(cx);
            self.table.retire(c.remote.0, c.ip, cx);
        }
    }
}

impl Protocol for Tcp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.demux_segment(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        self.pop_segment(target, msg, meta, cx)
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        self.send(sess, msg, cx);
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let rport = req.parts.remote.pop_port().ok_or(UpiError::BadParticipant(
            "tcp needs the remote port on top of the remote address",
        ))?;
        let Some(Addr::Ip(rip)) = req.parts.remote.top() else {
            return Err(UpiError::BadParticipant(
                "tcp needs a remote IPv4 address below the port",
            ));
        };
        let me = self.address(cx).ok_or(UpiError::Unreachable)?;
        let lport = match req.parts.local.pop_port().filter(|p| *p != 0) {
            Some(p) => p,
            None => {
                let start = cx.random_u32();
                self.table
                    .ephemeral(start)
                    .ok_or(UpiError::Exhausted("tcp ephemeral ports"))?
            }
        };
        if self.table.lookup(&(me, lport, rip, rport)).is_some() {
            return Err(UpiError::InUse);
        }
        let ip = cx.open(self.ip, req.parts, req.qos)?;
        let now = cx.now();
        let offer = self.offer(cx);
        let isn = self.isn(cx);
        let iss = isn.isn((me, lport), (rip, rport), now);
        let ts_offset = isn.ts_offset((me, lport), (rip, rport));
        let mut conn = Conn::new(
            SessionId(0),
            State::SynSent,
            req.upper,
            (me, lport),
            (rip, rport),
            ip,
            iss,
            offer,
            &self.cfg,
            now,
            ts_offset,
        );
        // The opener holds the session from now on.
        conn.announced = true;
        // The SYN goes from a timer due now: the opener makes the session's
        // DAA path after `open` returns, and the SYN should travel on it.
        conn.timers.kick = Some(now);
        let Some(id) = self.table.insert(conn) else {
            cx.close(ip);
            return Err(UpiError::Exhausted("tcp connections"));
        };
        if let Some(c) = self.table.conns.get_mut(id) {
            c.timers.arm(u64::from(id.0), cx);
        }
        cx.count("active-open");
        Ok(id)
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
        if self.table.listeners.contains_key(&port) {
            return Err(UpiError::InUse);
        }
        self.table.listeners.insert(
            port,
            Listener {
                upper: req.upper,
                backlog: self.cfg.backlog,
                pending: 0,
            },
        );
        Ok(())
    }

    /// Withdraws a listener; its half-open connections are reset, as
    /// closing a listening socket does on Linux (nobody would accept them).
    fn open_disable(&mut self, mut req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let port = req.parts.local.pop_port().ok_or(UpiError::BadParticipant(
            "a passive open needs a local port",
        ))?;
        match self.table.listeners.get(&port) {
            Some(l) if l.upper == req.upper => {
                self.table.listeners.remove(&port);
            }
            _ => return Err(UpiError::NoSuchSession),
        }
        let half_open: Vec<SessionId> = self
            .table
            .conns
            .iter()
            .filter(|(_, c)| c.listener == Some(port))
            .map(|(id, _)| id)
            .collect();
        for id in half_open {
            cx.acting_for(id);
            if let Some(c) = self.table.conns.get_mut(id) {
                c.send_rst(c.snd.nxt, cx);
                c.terminate(None, cx);
            }
            self.remove(id, cx);
        }
        Ok(())
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
            (Control::GetMaxPayload, _) => Ok(Reply::Size(self.cfg.sndbuf_max)),
            (Control::GetIpAddr, _) => self.address(cx).map(Reply::Ip).ok_or(UpiError::Unreachable),
            (Control::GetParticipants, Some(id)) => {
                let c = self.table.conns.get(id).ok_or(UpiError::NoSuchSession)?;
                Ok(Reply::Participants(Participants {
                    remote: Participant::of([Addr::Ip(c.remote.0), Addr::Port(c.remote.1)]),
                    local: Participant::of([Addr::Ip(c.local.0), Addr::Port(c.local.1)]),
                }))
            }
            (Control::SetChecksum(on), None) => {
                self.cfg.checksum = on;
                Ok(Reply::Done)
            }
            (Control::SetChecksum(on), Some(id)) => {
                let c = self
                    .table
                    .conns
                    .get_mut(id)
                    .ok_or(UpiError::NoSuchSession)?;
                c.checksum = on;
                Ok(Reply::Done)
            }
            (Control::Write(msg), Some(id)) => self.write(id, msg, cx),
            (Control::Private(op), Some(id)) => self.session_op(id, op, cx),
            (Control::Private(op), None) => {
                if let Some(SetBacklog { port, backlog }) = op.downcast_ref::<SetBacklog>() {
                    let l = self
                        .table
                        .listeners
                        .get_mut(port)
                        .ok_or(UpiError::NoSuchSession)?;
                    l.backlog = *backlog;
                    return Ok(Reply::Done);
                }
                match op.downcast::<Unreachable>() {
                    Ok(u) => Ok(self.unreachable(&u, cx)),
                    Err(_) => Err(UpiError::Unsupported("this private operation on tcp")),
                }
            }
            (op, _) => Err(unsupported(&op)),
        }
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let id = SessionId(token as u32);
        cx.acting_for(id);
        if let Some(c) = self.table.conns.get_mut(id) {
            c.on_timer(&self.cfg, cx);
        }
        self.settle(id, cx);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
