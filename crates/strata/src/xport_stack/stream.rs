//! [`StackStream`] and [`StackListener`]: the `xport` node for blocking
//! code, with the kernel-UDP [`XportStream`](crate::xport::XportStream)'s
//! methods. A small application inside the engine rings a bell per
//! session on every event; the caller's thread takes what is ready with
//! [`XportOp::Take`] through the engine handle, and sleeps on the bell
//! otherwise (no polling loop).

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Control, Engine, Message, PacketMeta, Participants, Qos,
    Reply, SessionId, SessionRef, UpiError,
};
use strata_link::EngineHandle;
use strata_xport::{ConnectionError, Drops, PathInfo, Stats};

use super::{KIND, Taken, XportOp, XportReport};

/// The longest sleep on a bell: a guard, not a poll (every event rings it).
const GUARD: Duration = Duration::from_millis(250);

/// What can go wrong: the kernel-UDP stream's errors, one type for both
/// ([`crate::xport::Stream`]).
pub type StackError = crate::xport::XportError;

/// The application inside the engine: rings the bell of a session when the
/// node has news for it, queues a listener's new sessions.
struct Relay {
    bells: HashMap<SessionId, SyncSender<()>>,
    accepted: Option<SyncSender<SessionRef>>,
}

impl App for Relay {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {
        // The node hands data over in the application's buffers (Take), not as messages.
    }

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        let session = match event {
            AppEvent::OpenDone { session, .. } => {
                let refused = match &self.accepted {
                    Some(q) => q.try_send(session).is_err(),
                    None => true,
                };
                if refused {
                    // Nobody will accept it (the queue holds the node's backlog).
                    let _ = cx.close(session);
                }
                return;
            }
            AppEvent::Connected(s) | AppEvent::Writable(s) | AppEvent::PeerClosed(s) => s,
            AppEvent::Closed { session, .. } => session,
        };
        if let Some(bell) = self.bells.get(&session.sess) {
            // Full: the bell is already ringing.
            let _ = bell.try_send(());
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn relay(a: &mut dyn App) -> Result<&mut Relay, UpiError> {
    a.as_any_mut()
        .downcast_mut::<Relay>()
        .ok_or(UpiError::NoSuchObject("xport relay".into()))
}

fn xport_of(engine: &Engine) -> Result<strata_core::ProtoId, UpiError> {
    engine
        .proto_id(KIND)
        .ok_or_else(|| UpiError::NoSuchObject(format!("protocol '{KIND}' in this host's graph")))
}

/// Waits for connections on a control port of a Strata host. Dropping it
/// ends only the waiting: the connections it accepted go on (its ports,
/// which carry them, stay taken until the last is closed), set-ups not yet
/// accepted are reset, new ones are refused.
pub struct StackListener {
    host: EngineHandle,
    app: AppId,
    port: u16,
    accepted: Receiver<SessionRef>,
}

impl StackListener {
    /// Listens on control port `port` of the host behind `host`; port 0
    /// takes a free one of the dynamic range (RFC 6335), told by
    /// [`StackListener::port`].
    pub fn bind(host: &EngineHandle, port: u16) -> Result<StackListener, StackError> {
        if port != 0 {
            return StackListener::bind_port(host, port);
        }
        // From a place that differs per call, so that listeners opened one
        // after another (FTP's, one per transfer) do not all try the same
        // ports first.
        let start = (super::config::unpredictable() % 16_384) as u16;
        for i in 0..64u16 {
            let p = 49_152 + (start + i * 251) % 16_384;
            match StackListener::bind_port(host, p) {
                Err(StackError::Upi(UpiError::InUse)) => {}
                r => return r,
            }
        }
        Err(StackError::Upi(UpiError::InUse))
    }

    fn bind_port(host: &EngineHandle, port: u16) -> Result<StackListener, StackError> {
        // The node holds at most its backlog of set-ups for us; the queue
        // only carries them over.
        let (tx, rx) = sync_channel(1024);
        let app = host
            .call(move |engine: &mut Engine| -> Result<AppId, UpiError> {
                let xport = xport_of(engine)?;
                let app = engine.add_app(Box::new(Relay {
                    bells: HashMap::new(),
                    accepted: Some(tx),
                }));
                let enabled = engine.with_app(app, |_, cx| {
                    cx.open_enable(
                        xport,
                        Participants::local([Addr::Port(port)]),
                        Qos::default(),
                    )
                });
                if let Err(e) = enabled.and_then(|r| r) {
                    engine.remove_app(app);
                    return Err(e);
                }
                Ok(app)
            })
            .map_err(|_| StackError::Stopped)??;
        Ok(StackListener {
            host: host.clone(),
            app,
            port,
            accepted: rx,
        })
    }

    /// The control port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Takes a first set-up from `peer` without the cookie round trip: for
    /// a listener that serves one peer whose address another connection
    /// has proven (FTP's `XPSV`: the control connection's TCP peer). As
    /// the kernel-UDP [`XportListener::expect`](crate::xport::XportListener::expect).
    pub fn expect(&self, peer: std::net::IpAddr) -> Result<(), StackError> {
        let (app, port) = (self.app, self.port);
        self.host
            .call(move |engine: &mut Engine| {
                let xport = xport_of(engine)?;
                let op = Control::Private(Box::new(XportOp::Expect { port, peer }));
                engine.with_app(app, |_, cx| cx.control(xport, None, op))?
            })
            .map_err(|_| StackError::Stopped)??;
        Ok(())
    }

    /// Waits for a connection whose set-up completed.
    pub fn accept(&mut self) -> Result<StackStream, StackError> {
        let s = self.accepted.recv().map_err(|_| StackError::Stopped)?;
        self.adopt(s)
    }

    /// Like [`StackListener::accept`], giving up after `timeout`.
    pub fn accept_timeout(&mut self, timeout: Duration) -> Result<StackStream, StackError> {
        match self.accepted.recv_timeout(timeout) {
            Ok(s) => self.adopt(s),
            Err(RecvTimeoutError::Timeout) => Err(StackError::TimedOut),
            Err(RecvTimeoutError::Disconnected) => Err(StackError::Stopped),
        }
    }

    fn adopt(&mut self, session: SessionRef) -> Result<StackStream, StackError> {
        let (tx, rx) = sync_channel(1);
        let app = self.app;
        self.host
            .call(move |engine: &mut Engine| {
                engine.with_app(app, |a, _| {
                    relay(a)?.bells.insert(session.sess, tx);
                    Ok::<_, UpiError>(())
                })
            })
            .map_err(|_| StackError::Stopped)???;
        let mut s = StackStream::new(self.host.clone(), app, session, rx, false);
        // Whatever happened before the bell was hung.
        s.pump(false)?;
        Ok(s)
    }
}

impl Drop for StackListener {
    fn drop(&mut self) {
        let (app, port) = (self.app, self.port);
        // Sessions the node announced and nobody adopted: closed (reset).
        let (_, none) = sync_channel(0);
        let unadopted = std::mem::replace(&mut self.accepted, none);
        let _ = self.host.call(move |engine: &mut Engine| {
            if let Ok(xport) = xport_of(engine) {
                let _ = engine.with_app(app, |a, cx| {
                    if let Ok(r) = relay(a) {
                        // Announced from now on: refused (closed) by the relay.
                        r.accepted = None;
                    }
                    for s in unadopted.try_iter() {
                        let _ = cx.close(s);
                    }
                    cx.open_disable(
                        xport,
                        Participants::local([Addr::Port(port)]),
                        Qos::default(),
                    )
                });
            }
            // The relay goes with the last of the listener and its streams.
            if engine
                .with_app(app, |a, _| relay(a).map(|r| r.bells.is_empty()))
                .is_ok_and(|r| r.unwrap_or(false))
            {
                engine.remove_app(app);
            }
        });
    }
}

/// One connection over a Strata host: send application buffers, receive
/// into application buffers.
pub struct StackStream {
    host: EngineHandle,
    app: AppId,
    session: SessionRef,
    bell: Receiver<()>,
    /// The relay is this stream's alone (a client's), removed with it.
    owns_app: bool,
    returned: VecDeque<Bytes>,
    filled: VecDeque<(Vec<u8>, usize)>,
    queued: usize,
    connected: bool,
    finished: bool,
    peer_finished: bool,
    closed: bool,
    lost: Option<ConnectionError>,
}

impl StackStream {
    fn new(
        host: EngineHandle,
        app: AppId,
        session: SessionRef,
        bell: Receiver<()>,
        owns_app: bool,
    ) -> StackStream {
        StackStream {
            host,
            app,
            session,
            bell,
            owns_app,
            returned: VecDeque::new(),
            filled: VecDeque::new(),
            queued: 0,
            connected: !owns_app,
            finished: false,
            peer_finished: false,
            closed: false,
            lost: None,
        }
    }

    /// Connects to the listener whose control port is `to`, from the host
    /// behind `host`, and waits until the set-up completes.
    pub fn connect(host: &EngineHandle, to: SocketAddrV4) -> Result<StackStream, StackError> {
        let mut s = StackStream::begin(host, to)?;
        s.wait_connected()?;
        Ok(s)
    }

    /// Starts connecting without waiting (the host runs the set-up): like
    /// [`crate::xport::XportStream::begin`].
    pub fn begin(host: &EngineHandle, to: SocketAddrV4) -> Result<StackStream, StackError> {
        let (tx, rx) = sync_channel(1);
        let (app, session) = host
            .call(move |engine: &mut Engine| -> Result<_, UpiError> {
                let xport = xport_of(engine)?;
                let app = engine.add_app(Box::new(Relay {
                    bells: HashMap::new(),
                    accepted: None,
                }));
                let parts = Participants::remote([Addr::Ip(*to.ip()), Addr::Port(to.port())]);
                let opened = engine.with_app(app, |a, cx| {
                    let s = cx.open(xport, parts, Qos::default())?;
                    relay(a)?.bells.insert(s.sess, tx);
                    Ok(s)
                });
                match opened.and_then(|r| r) {
                    Ok(s) => Ok((app, s)),
                    Err(e) => {
                        engine.remove_app(app);
                        Err(e)
                    }
                }
            })
            .map_err(|_| StackError::Stopped)??;
        Ok(StackStream::new(host.clone(), app, session, rx, true))
    }

    /// Waits until the set-up [`StackStream::begin`] started completes.
    pub fn wait_connected(&mut self) -> Result<(), StackError> {
        while !self.connected {
            self.pump(true)?;
        }
        Ok(())
    }

    fn control(&self, op: Control) -> Result<Reply, StackError> {
        let s = self.session;
        self.host
            .call(move |engine: &mut Engine| engine.control(s.proto, Some(s.sess), op))
            .map_err(|_| StackError::Stopped)?
            .map_err(StackError::from)
    }

    fn op(&self, op: XportOp) -> Result<Reply, StackError> {
        self.control(Control::Private(Box::new(op)))
    }

    /// Takes what the node has ready; with `wait`, sleeps on the bell first
    /// when nothing was. Errors once the connection is lost.
    fn pump(&mut self, wait: bool) -> Result<(), StackError> {
        let t = match self.op(XportOp::Take)? {
            Reply::Private(b) => b.downcast::<Taken>().map(|t| *t).unwrap_or_default(),
            _ => Taken::default(),
        };
        let nothing = t.is_empty();
        self.queued = self.queued.saturating_sub(t.done.len());
        self.returned.extend(t.done);
        self.filled.extend(t.filled);
        self.connected |= t.connected;
        self.peer_finished |= t.peer_finished;
        self.closed |= t.closed || t.lost.is_some();
        if let Some(e) = t.lost {
            self.lost = Some(e);
        }
        if let Some(e) = self.lost {
            return Err(e.into());
        }
        if nothing && wait {
            match self.bell.recv_timeout(GUARD) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(StackError::Stopped),
            }
        }
        Ok(())
    }

    /// Hands `bufs` to the transport and returns, once at least one buffer
    /// is acknowledged, every buffer given back so far (§3.5.2).
    pub fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>, StackError> {
        if self.finished || self.closed {
            return Err(StackError::Closed);
        }
        for b in bufs {
            if b.is_empty() {
                self.returned.push_back(b);
                continue;
            }
            self.control(Control::Write(Message::from_bytes(b)))?;
            self.queued += 1;
        }
        while self.returned.is_empty() && self.queued > 0 {
            self.pump(true)?;
        }
        Ok(self.returned.drain(..).collect())
    }

    /// Buffers handed over and not yet given back.
    pub fn in_flight(&self) -> usize {
        self.queued
    }

    /// Ends the stream and waits until every buffer is acknowledged;
    /// returns those not yet given back.
    pub fn finish(&mut self) -> Result<Vec<Bytes>, StackError> {
        if !self.finished {
            self.finished = true;
            self.op(XportOp::Finish)?;
        }
        while self.queued > 0 {
            self.pump(true)?;
        }
        Ok(self.returned.drain(..).collect())
    }

    /// Posts a buffer for the next bytes of the peer's stream without waiting.
    pub fn post_recv(&mut self, buf: Vec<u8>) -> Result<(), StackError> {
        self.op(XportOp::Post(buf)).map(|_| ())
    }

    /// Posts `buf` and waits for the oldest posted buffer to come back with
    /// data: `(buffer, bytes)`; `bytes` is 0 once the peer's stream ended.
    pub fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize), StackError> {
        if let Some(f) = self.filled.pop_front() {
            self.post_recv(buf)?;
            return Ok(f);
        }
        if self.peer_finished {
            return Ok((buf, 0));
        }
        self.post_recv(buf)?;
        loop {
            if let Some(f) = self.filled.pop_front() {
                return Ok(f);
            }
            if self.peer_finished {
                return Ok((Vec::new(), 0));
            }
            if self.closed {
                return Err(StackError::Closed);
            }
            self.pump(true)?;
        }
    }

    /// Ends this side's stream and waits until every buffer is
    /// acknowledged and the peer's stream has ended, without
    /// [`StackStream::close`]'s last wait: like
    /// [`crate::xport::XportStream::end`].
    pub fn end(&mut self) -> Result<(), StackError> {
        self.finish()?;
        while !self.peer_finished {
            if self.closed {
                return Err(StackError::Closed);
            }
            self.pump(true)?;
        }
        Ok(())
    }

    /// Whether the peer's stream has ended and all of it was delivered.
    pub fn peer_finished(&self) -> bool {
        self.peer_finished
    }

    /// Ends this side's stream and waits until both directions are complete
    /// and acknowledged: nothing sent is lost.
    pub fn close(mut self) -> Result<(), StackError> {
        self.finish()?;
        while !self.closed {
            self.pump(true)?;
        }
        Ok(())
    }

    fn report(&self) -> Result<XportReport, StackError> {
        match self.op(XportOp::Report)? {
            Reply::Private(b) => b
                .downcast::<XportReport>()
                .map(|r| *r)
                .map_err(|_| StackError::Closed),
            _ => Err(StackError::Closed),
        }
    }

    /// Counters (zero once the connection is gone).
    pub fn stats(&mut self) -> Stats {
        self.report().map(|r| r.stats).unwrap_or_default()
    }

    /// Every datagram refused for this connection, by reason (with, on an
    /// accepted stream, those its listener refused before routing).
    pub fn drops(&mut self) -> Drops {
        self.report().map(|r| r.drops).unwrap_or_default()
    }

    /// RTT, windows and rate.
    pub fn info(&mut self) -> Result<PathInfo, StackError> {
        self.report().map(|r| r.info)
    }

    /// The peer's control address.
    pub fn peer_addr(&self) -> Result<std::net::SocketAddr, StackError> {
        self.report().map(|r| r.peer)
    }

    /// The local data ports.
    pub fn data_ports(&self) -> Vec<u16> {
        self.report().map(|r| r.data_ports).unwrap_or_default()
    }

    /// Where received data went: bytes copied once from their frame to
    /// their place, or gathered first (the end's counts: a listener's
    /// connections share them).
    pub fn placement(&self) -> crate::xport::Placement {
        self.report()
            .map(|r| crate::xport::Placement {
                placed: r.input.placed,
                copied: r.input.copied,
            })
            .unwrap_or_default()
    }

    /// Waits until something happens or `timeout` passes (the connection
    /// keeps running in the host meanwhile).
    pub fn wait(&mut self, timeout: Duration) -> Result<(), StackError> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            let before = (self.returned.len(), self.filled.len(), self.closed);
            self.pump(true)?;
            if (self.returned.len(), self.filled.len(), self.closed) != before {
                break;
            }
        }
        Ok(())
    }
}

impl Drop for StackStream {
    fn drop(&mut self) {
        let (app, s, owns) = (self.app, self.session, self.owns_app);
        let _ = self.host.call(move |engine: &mut Engine| {
            let last = engine.with_app(app, |a, cx| {
                let last = relay(a).map(|r| {
                    r.bells.remove(&s.sess);
                    // A listener's relay: its listener gone, this was its last stream.
                    r.accepted.is_none() && r.bells.is_empty()
                });
                // A closed connection's session goes quietly; an open one is reset.
                let _ = cx.close(s);
                last.unwrap_or(false)
            });
            if owns || last.unwrap_or(false) {
                engine.remove_app(app);
            }
        });
    }
}
