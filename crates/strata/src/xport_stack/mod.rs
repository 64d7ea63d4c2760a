//! Seed 001's transport as a Strata protocol: the node `xport` drives a
//! [`strata_xport::Connection`] (an active open) or a [`Listener`] (a
//! passive open) over Strata's own UDP, so `xport/udp/ip/eth` runs on every
//! link Strata has — in memory, AF_PACKET, TAP — and talks to the same
//! transport over the kernel's UDP (`strata xsend`/`xrecv`).
//!
//! Each end owns one UDP port per socket the transport names: the control
//! port and its data ports (the paper's separate sockets, §2.1). It holds a
//! *bound* UDP session on each (which receives from anyone; the sender is
//! in the packet's records) and sends through *connected* UDP sessions, one
//! per (local port, destination), opened on first use and kept in a bounded
//! table. A datagram's destination port says which end and which channel it
//! reached.
//!
//! The node's sessions are the transport's connections. The upper
//! application works with the paper's buffers (§3.5): `Control::Write`
//! hands over an application buffer (never copied: its bytes go out as
//! slices behind each header); [`XportOp::Post`] posts a receive buffer,
//! filled in place at its final offset; [`XportOp::Take`] takes what is
//! ready — buffers given back once acknowledged, filled receive buffers, the
//! end of the peer's stream, the close. `AppEvent::Writable` says something
//! is ready to take, `Connected`, `OpenDone`, `PeerClosed` and `Closed`
//! the rest. [`StackStream`] and [`StackListener`] wrap this for blocking
//! code, with the methods of the kernel-UDP `XportStream`.
//!
//! ```
//! use bytes::Bytes;
//! use strata::link::{LinkParams, SimNet};
//! use strata::xport_stack::{StackError, StackListener, StackStream};
//! use strata::{HostBuilder, HostParams, Network};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let host = |n| {
//!     HostBuilder::spec("xport/udp/ip/eth", HostParams::numbered(n), "net0", strata::link::SIM)
//!         .build()
//! };
//! let mut net = SimNet::new(1);
//! let (a, b) = (net.add_host("a", host(1)?), net.add_host("b", host(2)?));
//! net.connect((a, "net0"), (b, "net0"), LinkParams::default(), LinkParams::default())?;
//! let network = Network::start(net); // the in-memory network in real time
//! let mut listener = StackListener::bind(&network.host(b), 7100)?;
//! let server = std::thread::spawn(move || -> Result<(usize, u8), StackError> {
//!     let mut s = listener.accept()?;
//!     let (buf, len) = s.recv(vec![0u8; 1 << 20])?; // filled in place
//!     s.close()?;
//!     Ok((len, buf[0]))
//! });
//! let to = std::net::SocketAddrV4::new(HostParams::numbered(2).address.address(), 7100);
//! let mut client = StackStream::connect(&network.host(a), to)?;
//! let _given_back = client.send(vec![Bytes::from(vec![7u8; 1 << 20])])?; // once acknowledged
//! client.close()?; // both directions complete: nothing lost
//! assert_eq!(server.join().unwrap()?, (1 << 20, 7));
//! network.stop();
//! # Ok(())
//! # }
//! ```
//!
//! Time is the engine's: one engine timer per end at the transport's next
//! deadline (`poll_timeout`), moved only when a sooner one appears, and the
//! same timer set to "now" after input so that a batch of datagrams is
//! handled before the end transmits. Every datagram the transport refuses
//! is dropped with the transport's reason as the engine's drop reason, so
//! `strata host`'s report and the engine's counters show them.

mod config;
mod end;
mod input;
mod ops;
mod stream;

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr, SocketAddrV4};

use strata_core::{
    Addr, AppEvent, Control, Cx, Demux, DropReason, Instant, Message, Next, Open, PacketMeta,
    Participants, ProtoId, Protocol, Qos, Registry, Reply, SessionId, SessionRef, Target, Up,
    UpiError, Upper,
};
use strata_proto::info::{Ports, source};
use strata_xport::{Connection, Event, Listener};
pub use strata_xport::{ConnectionError, Drops, PathInfo, State, Stats};

pub use config::{KIND, OPTIONS, SPEC, Settings, parse_recovery};
pub use ops::{Taken, XportOp, XportReport};
pub use stream::{StackError, StackListener, StackStream};

pub use end::Input;
use end::{End, Kind};

/// Connected UDP sessions kept for sending, at most; the oldest is closed
/// beyond this.
const MAX_SENDERS: usize = 1024;

/// Adds `xport` to a registry.
pub fn register(reg: &mut Registry) {
    reg.register_protocol(SPEC);
}

/// One of our sessions: a connection an application holds.
struct Sess {
    end: usize,
    /// The connection's id in its listener (server side).
    conn: Option<u64>,
    upper: Upper,
    ready: Taken,
    /// `Closed` or `Lost` was reported.
    over: bool,
}

/// The `xport` protocol node.
pub struct XportNode {
    udp: ProtoId,
    settings: Settings,
    /// The transport's clock at engine time zero.
    epoch: std::time::Instant,
    /// Mixed into the engine's random numbers for connection ids and initial
    /// sequence numbers (the engine's generator is seeded for reproducible
    /// runs; an off-path sender must not guess them on a real network).
    salt: u64,
    ends: Vec<Option<End>>,
    sessions: Vec<Option<Sess>>,
    /// Which end owns a local port.
    owners: HashMap<u16, usize>,
    senders: HashMap<(u16, SocketAddrV4), SessionRef>,
    sender_order: VecDeque<(u16, SocketAddrV4)>,
    /// Where a datagram's header is written before it is pushed.
    header: Vec<u8>,
    /// Data datagrams of this input batch, read after its control
    /// datagrams (`input.rs`).
    waiting: VecDeque<Waiting>,
    /// The largest IP payload the host's link carries whole, asked of IP
    /// once (its GETOPTPACKET): UDP and a data packet fill it and no more.
    ip_payload: Option<usize>,
}

/// A data datagram kept for the end of its batch: its end, sender, data
/// socket and the frame.
type Waiting = (usize, SocketAddr, strata_xport::Channel, Message);

fn upi_error(e: ConnectionError) -> UpiError {
    match e {
        ConnectionError::TimedOut(_) | ConnectionError::SetupTimedOut => UpiError::TimedOut,
        ConnectionError::Reset => UpiError::Refused,
        ConnectionError::Aborted => UpiError::Closed,
    }
}

fn slot<T>(v: &mut Vec<Option<T>>, item: T) -> usize {
    match v.iter().position(Option::is_none) {
        Some(i) => {
            v[i] = Some(item);
            i
        }
        None => {
            v.push(Some(item));
            v.len() - 1
        }
    }
}

impl XportNode {
    /// The node over `udp` with `settings`; `salt` makes connection ids
    /// unpredictable (0 for runs reproducible from the engine's seed).
    pub fn new(udp: ProtoId, settings: Settings, salt: u64) -> XportNode {
        XportNode {
            udp,
            settings,
            epoch: std::time::Instant::now(),
            salt,
            ends: Vec::new(),
            sessions: Vec::new(),
            owners: HashMap::new(),
            senders: HashMap::new(),
            sender_order: VecDeque::new(),
            header: Vec::with_capacity(64),
            waiting: VecDeque::new(),
            ip_payload: None,
        }
    }

    /// The transport's settings for a new end, its payload fitted to the
    /// host's MTU as IP reports it (not assumed to be Ethernet's 1500 bytes:
    /// less under `ethdaa`'s extension, more on a jumbo link). Each
    /// connection then sends the smaller of this and what its peer
    /// announced at set-up, so a listener's payload fits each client.
    fn config(&mut self, cx: &mut Cx) -> strata_xport::Config {
        let mut c = self.settings.config.clone();
        if self.ip_payload.is_none() {
            let op = Control::Private(Box::new(strata_proto::ipv4::GetOptPayload));
            self.ip_payload = match cx.find_kind("ip").map(|ip| cx.control(ip, None, op)) {
                Some(Ok(Reply::Size(n))) => Some(n),
                _ => None,
            };
        }
        if let Some(n) = self.ip_payload {
            // A UDP header, then the data packet.
            c.mss = strata_xport::wire::payload_for_mtu(n, 8);
        }
        c
    }

    /// Connections and listeners open.
    pub fn ends(&self) -> usize {
        self.ends.iter().flatten().count()
    }

    /// Connected UDP sessions held for sending.
    pub fn senders(&self) -> usize {
        self.senders.len()
    }

    fn clock(&self, now: Instant) -> std::time::Instant {
        self.epoch + now.saturating_since(Instant::ZERO)
    }

    fn engine_time(&self, t: std::time::Instant) -> Instant {
        Instant::ZERO + t.saturating_duration_since(self.epoch)
    }

    /// Opens the bound UDP sessions of a new end: the control port (`control`,
    /// 0 for any) and the data ports.
    fn open_ports(
        &mut self,
        control: u16,
        cx: &mut Cx,
    ) -> Result<(Vec<u16>, Vec<SessionRef>), UpiError> {
        let mut ports = Vec::new();
        let mut bound = Vec::new();
        for i in 0..=usize::from(self.settings.data_sockets) {
            let want = if i == 0 { control } else { 0 };
            let opened = cx.open(
                self.udp,
                Participants::local([Addr::Port(want)]),
                Qos::default(),
            );
            let port = opened.and_then(|s| {
                bound.push(s);
                match cx.control(s.proto, Some(s.sess), Control::GetParticipants)? {
                    Reply::Participants(p) => p
                        .local
                        .clone()
                        .pop_port()
                        .ok_or(UpiError::BadParticipant("udp gave no local port")),
                    _ => Err(UpiError::BadParticipant("udp gave no local port")),
                }
            });
            match port {
                Ok(p) => ports.push(p),
                Err(e) => {
                    for s in bound {
                        cx.close(s);
                    }
                    return Err(e);
                }
            }
        }
        Ok((ports, bound))
    }

    fn add_end(&mut self, end: End) -> usize {
        let ports = end.ports.clone();
        let i = slot(&mut self.ends, end);
        for p in ports {
            self.owners.insert(p, i);
        }
        i
    }

    fn add_session(&mut self, end: usize, conn: Option<u64>, upper: Upper) -> SessionId {
        let s = Sess {
            end,
            conn,
            upper,
            ready: Taken::default(),
            over: false,
        };
        let id = SessionId(slot(&mut self.sessions, s) as u32);
        if let Some(e) = self.ends[end].as_mut() {
            e.sessions.push(id);
        }
        id
    }

    fn remove_end(&mut self, i: usize, cx: &mut Cx) {
        let Some(end) = self.ends.get_mut(i).and_then(Option::take) else {
            return;
        };
        // The slot may be taken by a new end: its datagrams go with it.
        self.waiting.retain(|w| w.0 != i);
        if let Some((_, t)) = end.timer {
            cx.cancel_timer(t);
        }
        for p in &end.ports {
            self.owners.remove(p);
            let gone: Vec<_> = self.senders.keys().filter(|k| k.0 == *p).copied().collect();
            for k in gone {
                if let Some(s) = self.senders.remove(&k) {
                    cx.close(s);
                }
            }
        }
        self.sender_order.retain(|k| self.senders.contains_key(k));
        for s in end.bound {
            cx.close(s);
        }
        for s in end.sessions {
            if let Some(slot) = self.sessions.get_mut(s.0 as usize) {
                *slot = None;
            }
        }
    }

    /// The listener (not draining) whose control port is `port`.
    fn listener(&self, port: u16) -> Option<usize> {
        let i = *self.owners.get(&port)?;
        let e = self.ends.get(i)?.as_ref()?;
        (matches!(e.kind, Kind::Server(_)) && e.ports[0] == port && !e.draining).then_some(i)
    }

    /// The connected UDP session from local port `port` to `to`.
    fn sender(&mut self, port: u16, to: SocketAddrV4, cx: &mut Cx) -> Option<SessionRef> {
        if let Some(&s) = self.senders.get(&(port, to)) {
            return Some(s);
        }
        if self.senders.len() >= MAX_SENDERS
            && let Some(old) = self.sender_order.pop_front()
            && let Some(s) = self.senders.remove(&old)
        {
            cx.close(s);
        }
        let parts = Participants::remote([Addr::Ip(*to.ip()), Addr::Port(to.port())])
            .with_local([Addr::Port(port)]);
        match cx.open(self.udp, parts, Qos::default()) {
            Ok(s) => {
                self.senders.insert((port, to), s);
                self.sender_order.push_back((port, to));
                Some(s)
            }
            Err(e) => {
                cx.count_drop(DropReason::from(e));
                None
            }
        }
    }

    /// Runs end `i`'s timers at or before `at`, at the latest.
    fn wake_at(&mut self, i: usize, at: Instant, cx: &mut Cx) {
        let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        match end.timer {
            Some((due, _)) if due <= at => return,
            Some((_, t)) => cx.cancel_timer(t),
            None => {}
        }
        end.timer = Some((at, cx.set_timer(at, i as u64)));
    }

    /// End `i`'s turn: timers due, new connections, events, datagrams out,
    /// the next deadline.
    fn service(&mut self, i: usize, cx: &mut Cx) {
        let now = self.clock(cx.now());
        let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        end.timer = None;
        self.drain(now, cx);
        let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let ep = end.endpoint();
        if ep.poll_timeout().is_some_and(|d| d <= now) {
            ep.handle_timeout(now);
        }
        self.accept(i, cx);
        self.events(i, cx);
        self.transmit(i, now, cx);
        let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        if let Some(d) = end.endpoint().poll_timeout() {
            let at = self.engine_time(d).max(cx.now());
            self.wake_at(i, at, cx);
        }
    }

    /// A listener's confirmed set-ups become sessions, announced to its upper.
    fn accept(&mut self, i: usize, cx: &mut Cx) {
        loop {
            let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
                return;
            };
            let (upper, control) = (end.upper, end.ports[0]);
            let Kind::Server(l) = &mut end.kind else {
                return;
            };
            let Some(id) = l.accept() else {
                return;
            };
            let Some(peer) = l.connection(id).map(|c| c.peer()) else {
                continue;
            };
            end.conns.push(id);
            let sid = self.add_session(i, Some(id), upper);
            let mut remote = Vec::new();
            if let IpAddr::V4(a) = peer.ip() {
                remote.push(Addr::Ip(a));
            }
            remote.push(Addr::Port(peer.port()));
            let parts = Participants::remote(remote).with_local([Addr::Port(control)]);
            cx.count("accepted");
            cx.open_done(upper, sid, parts);
        }
    }

    /// The transport's events, kept for the application to take.
    fn events(&mut self, i: usize, cx: &mut Cx) {
        let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        for &sid in &end.sessions {
            let Some(s) = self
                .sessions
                .get_mut(sid.0 as usize)
                .and_then(Option::as_mut)
            else {
                continue;
            };
            let Some(c) = (match (&mut end.kind, s.conn) {
                (Kind::Client(c), _) => Some(c.as_mut()),
                (Kind::Server(l), Some(id)) => l.connection(id),
                _ => None,
            }) else {
                continue;
            };
            let mut news = Vec::new();
            while let Some(e) = c.poll_event() {
                let r = &mut s.ready;
                match e {
                    Event::Connected => {
                        r.connected = true;
                        news.push(AppEvent::Connected(SessionRef::new(cx.me(), sid)));
                    }
                    Event::SendDone { buf, .. } => r.done.push(buf),
                    Event::Received { buf, len, .. } => r.filled.push((buf, len)),
                    Event::Finished => {
                        r.peer_finished = true;
                        news.push(AppEvent::PeerClosed(SessionRef::new(cx.me(), sid)));
                    }
                    Event::Closed if !s.over => {
                        s.over = true;
                        r.closed = true;
                        news.push(AppEvent::Closed {
                            session: SessionRef::new(cx.me(), sid),
                            error: None,
                        });
                    }
                    Event::Lost(e) if !s.over => {
                        s.over = true;
                        r.lost = Some(e);
                        cx.count("lost");
                        news.push(AppEvent::Closed {
                            session: SessionRef::new(cx.me(), sid),
                            error: Some(upi_error(e)),
                        });
                    }
                    Event::Closed | Event::Lost(_) => {}
                }
            }
            if !s.ready.done.is_empty() || !s.ready.filled.is_empty() {
                news.push(AppEvent::Writable(SessionRef::new(cx.me(), sid)));
            }
            if let Upper::App(app) = s.upper {
                for e in news {
                    cx.notify(app, e);
                }
            }
        }
    }

    /// Every datagram the end may send now, each behind its header, the
    /// payload a slice of the application's buffer.
    fn transmit(&mut self, i: usize, now: std::time::Instant, cx: &mut Cx) {
        let mut header = std::mem::take(&mut self.header);
        while let Some(end) = self.ends.get_mut(i).and_then(Option::as_mut) {
            header.clear();
            let Some(x) = end.endpoint().poll_transmit(now, &mut header) else {
                break;
            };
            let (Some(port), SocketAddr::V4(to)) = (end.port(x.channel), x.dest) else {
                cx.count_drop(DropReason::Other("xport-no-ipv6"));
                continue;
            };
            let Some(s) = self.sender(port, to, cx) else {
                continue;
            };
            let mut msg = Message::from_bytes(x.payload);
            msg.push_slice(&header);
            cx.push(s, msg);
        }
        self.header = header;
    }

    fn session(&mut self, sess: SessionId) -> Result<(&mut Sess, &mut End), UpiError> {
        let s = self
            .sessions
            .get_mut(sess.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(UpiError::NoSuchSession)?;
        let e = self
            .ends
            .get_mut(s.end)
            .and_then(Option::as_mut)
            .ok_or(UpiError::NoSuchSession)?;
        Ok((s, e))
    }

    fn report(&mut self, sess: SessionId) -> Result<XportReport, UpiError> {
        let (s, end) = self.session(sess)?;
        let conn = s.conn;
        let mut drops = match &mut end.kind {
            Kind::Server(l) => l.stats().drops.clone(),
            Kind::Client(_) => Drops::default(),
        };
        let ports = end.ports.clone();
        let input = end.input;
        let c = end.connection(conn).ok_or(UpiError::Closed)?;
        drops.add(&c.stats().drops);
        Ok(XportReport {
            state: c.state(),
            info: c.info(),
            stats: c.stats().clone(),
            drops,
            control_port: ports[0],
            data_ports: ports[1..].to_vec(),
            peer: c.peer(),
            input,
        })
    }
}

impl Protocol for XportNode {
    fn demux(&self, _hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        // The transport finds its connection itself (by id, cookie-checked):
        // every datagram is the node's to pop.
        Demux::To {
            target: Target::Protocol,
            hdr_len: 0,
            next: Next::Here,
        }
    }

    fn pop(&mut self, _: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(ports) = meta.get::<Ports>() else {
            return Up::Drop(DropReason::Other("no-udp-ports"));
        };
        let Some(&i) = self.owners.get(&ports.dst) else {
            return Up::Drop(DropReason::NoSession);
        };
        let from = SocketAddr::V4(source(meta));
        let Some(channel) = self
            .ends
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|e| e.channel(ports.dst))
        else {
            return Up::Drop(DropReason::NoSession);
        };
        self.input(i, from, channel, msg, cx)
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        // A plain send is an application buffer handed over.
        if self.write(sess, msg, cx).is_err() {
            cx.count_drop(DropReason::Other("xport-closed"));
        }
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        if self.ends() >= self.settings.max_ends {
            return Err(UpiError::Exhausted("xport ends"));
        }
        let port = req.parts.remote.pop_port().ok_or(UpiError::BadParticipant(
            "xport needs the listener's control port",
        ))?;
        let Some(Addr::Ip(ip)) = req.parts.remote.top() else {
            return Err(UpiError::BadParticipant(
                "xport needs a remote IPv4 address below the port",
            ));
        };
        let local = req.parts.local.pop_port().unwrap_or(0);
        let (ports, bound) = self.open_ports(local, cx)?;
        let now = self.clock(cx.now());
        let seed = cx.random_u64() ^ self.salt;
        let c = Connection::connect(
            self.config(cx),
            now,
            seed,
            SocketAddr::V4(SocketAddrV4::new(ip, port)),
            &ports[1..],
        );
        let i = self.add_end(End {
            kind: Kind::Client(Box::new(c)),
            upper: req.upper,
            ports,
            bound,
            sessions: Vec::new(),
            timer: None,
            conns: Vec::new(),
            input: Input::default(),
            draining: false,
        });
        let sid = self.add_session(i, None, req.upper);
        self.wake_at(i, cx.now(), cx);
        Ok(sid)
    }

    fn open_enable(&mut self, mut req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        if self.ends() >= self.settings.max_ends {
            return Err(UpiError::Exhausted("xport ends"));
        }
        let port = req
            .parts
            .local
            .pop_port()
            .filter(|p| *p != 0)
            .ok_or(UpiError::BadParticipant("a listener needs a control port"))?;
        if self.owners.contains_key(&port) {
            return Err(UpiError::InUse);
        }
        let (ports, bound) = self.open_ports(port, cx)?;
        let now = self.clock(cx.now());
        let seed = cx.random_u64() ^ self.salt;
        let l = Listener::new(
            self.config(cx),
            now,
            seed,
            &ports[1..],
            self.settings.backlog,
        );
        self.add_end(End {
            kind: Kind::Server(Box::new(l)),
            upper: req.upper,
            ports,
            bound,
            sessions: Vec::new(),
            timer: None,
            conns: Vec::new(),
            input: Input::default(),
            draining: false,
        });
        cx.count("listening");
        Ok(())
    }

    fn open_disable(&mut self, mut req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let port = req
            .parts
            .local
            .pop_port()
            .ok_or(UpiError::BadParticipant("a listener needs a control port"))?;
        let i = self.listener(port).ok_or(UpiError::NoSuchSession)?;
        let Some(end) = self.ends[i].as_mut() else {
            return Err(UpiError::NoSuchSession);
        };
        if end.sessions.is_empty() {
            self.remove_end(i, cx);
            return Ok(());
        }
        // Its connections outlive it: the end stays, for them only.
        end.draining = true;
        if let Kind::Server(l) = &mut end.kind {
            l.stop_accepting();
        }
        cx.count("listener-draining");
        // The resets of set-ups nobody took leave now.
        self.service(i, cx);
        Ok(())
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        let Ok((s, end)) = self.session(sess) else {
            return;
        };
        let (i, conn) = (s.end, s.conn);
        // The closer hears nothing more of the session.
        s.over = true;
        if let Some(c) = end.connection(conn)
            && c.state() != State::Closed
        {
            // Closing before the close completed loses data: the peer is told.
            c.abort();
        }
        match &mut end.kind {
            Kind::Client(_) => {
                // The reset leaves before the ports close.
                self.service(i, cx);
                self.remove_end(i, cx);
            }
            Kind::Server(_) => {
                // The reset leaves before the connection is forgotten.
                self.service(i, cx);
                let Ok((_, end)) = self.session(sess) else {
                    return;
                };
                if let (Kind::Server(l), Some(id)) = (&mut end.kind, conn) {
                    l.remove(id);
                    end.conns.retain(|c| *c != id);
                }
                end.sessions.retain(|s| *s != sess);
                let gone = end.draining && end.sessions.is_empty();
                self.sessions[sess.0 as usize] = None;
                if gone {
                    self.remove_end(i, cx);
                }
            }
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        let Some(sess) = sess else {
            return match op {
                Control::GetMaxPayload => Ok(Reply::Size(usize::MAX)),
                Control::Private(op) => match op.downcast::<XportOp>().map(|o| *o) {
                    Ok(XportOp::Expect { port, peer }) => {
                        let i = self.listener(port).ok_or(UpiError::NoSuchSession)?;
                        if let Some(End {
                            kind: Kind::Server(l),
                            ..
                        }) = self.ends[i].as_mut()
                        {
                            l.expect(peer);
                        }
                        Ok(Reply::Done)
                    }
                    _ => Err(UpiError::Unsupported("this private operation on xport")),
                },
                op => Err(UpiError::Unsupported(op.name())),
            };
        };
        match op {
            Control::Write(msg) => self.write(sess, msg, cx),
            Control::GetParticipants => {
                let (s, end) = self.session(sess)?;
                let conn = s.conn;
                let control = end.ports[0];
                let peer = end.connection(conn).ok_or(UpiError::Closed)?.peer();
                let mut remote = Vec::new();
                if let IpAddr::V4(a) = peer.ip() {
                    remote.push(Addr::Ip(a));
                }
                remote.push(Addr::Port(peer.port()));
                Ok(Reply::Participants(
                    Participants::remote(remote).with_local([Addr::Port(control)]),
                ))
            }
            Control::Private(op) => {
                let op = op
                    .downcast::<XportOp>()
                    .map_err(|_| UpiError::Unsupported("this private operation on xport"))?;
                self.private(sess, *op, cx)
            }
            op => Err(UpiError::Unsupported(op.name())),
        }
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        self.service(token as usize, cx);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
