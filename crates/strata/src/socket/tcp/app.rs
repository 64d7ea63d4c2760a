//! The engine side of the TCP handles: one application per listener or
//! connected stream, holding each connection's queues towards its handle.
//!
//! Data goes to a stream's reader through a bounded channel. When the channel
//! is full, data waits here instead; TCP's window bounds how much, since with
//! manual flow control every byte counts against the window until the reader
//! reports it consumed. Short segments waiting here are gathered into one
//! buffer, so a peer sending tiny segments cannot make the queue long either.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use bytes::BytesMut;
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Control, Engine, Message, PacketMeta, Participant,
    Participants, ProtoId, Qos, Reply, SessionRef, UpiError,
};
use strata_link::EngineHandle;
use strata_proto::tcp::{self, ConnInfo};

use super::stream::TcpStream;

/// Messages the channel to a reader holds; more wait in the engine.
const CHANNEL: usize = 256;
/// Segments at most this long are gathered while data waits in the engine.
const SMALL: usize = 512;
/// The largest gathered buffer.
const GATHER: usize = 16 * 1024;

/// What a reader receives, in stream order.
#[derive(Debug)]
pub(super) enum Incoming {
    /// Stream bytes.
    Data(Message),
    /// The peer closed its direction.
    End,
    /// The connection failed.
    Failed(UpiError),
}

/// The handle's ends of a connection's channels.
pub(super) struct Ends {
    /// Data, end of stream, failure.
    pub rx: Receiver<Incoming>,
    /// A nudge: connected, writable, closed.
    pub wake: Receiver<()>,
    /// Set once writing can only fail.
    pub broken: Arc<AtomicBool>,
}

/// One connection of a handle.
pub(super) struct Conn {
    rx: SyncSender<Incoming>,
    waiting: VecDeque<Incoming>,
    gathered: BytesMut,
    wake: SyncSender<()>,
    /// The handshake completed.
    established: bool,
    /// The connection is gone: closed cleanly (`Some(None)`) or failed.
    ended: Option<Option<UpiError>>,
    broken: Arc<AtomicBool>,
    /// Bytes TCP counted as consumed by itself, before manual flow control
    /// was turned on (data riding on the handshake's last segment).
    auto_consumed: usize,
    /// Reading was shut down: data is consumed as it arrives, and dropped.
    discard: bool,
    /// Why writing failed.
    write_error: Option<UpiError>,
}

/// A private TCP operation on session `s`.
fn op(cx: &mut AppCx, s: SessionRef, op: impl Into<Control>) -> Result<Reply, UpiError> {
    cx.control(s.proto, Some(s.sess), op.into())
}

impl Conn {
    /// A connection, established or not yet, of which TCP counted
    /// `auto_consumed` bytes consumed by itself.
    pub(super) fn new(established: bool, auto_consumed: usize) -> (Conn, Ends) {
        let (tx, rx) = sync_channel(CHANNEL);
        let (wake_tx, wake) = sync_channel(1);
        let broken = Arc::new(AtomicBool::new(false));
        let conn = Conn {
            rx: tx,
            waiting: VecDeque::new(),
            gathered: BytesMut::new(),
            wake: wake_tx,
            established,
            ended: None,
            broken: Arc::clone(&broken),
            auto_consumed,
            discard: false,
            write_error: None,
        };
        (conn, Ends { rx, wake, broken })
    }

    /// Whether the handshake completed (even if the connection failed
    /// since), or why it failed, for `connect`.
    pub(super) fn connected(&self) -> Result<bool, UpiError> {
        match &self.ended {
            _ if self.established => Ok(true),
            Some(e) => Err(e.clone().unwrap_or(UpiError::Refused)),
            None => Ok(false),
        }
    }

    fn nudge(&self) {
        // A full channel already holds a nudge; a gone handle needs none.
        let _ = self.wake.try_send(());
    }

    /// Queues `item` for the reader, behind anything already waiting.
    fn push(&mut self, item: Incoming) {
        if self.waiting.is_empty() && self.gathered.is_empty() {
            match self.rx.try_send(item) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(item)) => self.waiting.push_back(item),
            }
            return;
        }
        match item {
            Incoming::Data(m) if m.len() <= SMALL => {
                if self.gathered.len() + m.len() > GATHER {
                    self.flush_gathered();
                }
                for chunk in m.chunks() {
                    self.gathered.extend_from_slice(chunk);
                }
            }
            other => {
                self.flush_gathered();
                self.waiting.push_back(other);
            }
        }
    }

    fn flush_gathered(&mut self) {
        if !self.gathered.is_empty() {
            let bytes = self.gathered.split().freeze();
            self.waiting
                .push_back(Incoming::Data(Message::from_bytes(bytes)));
        }
    }

    /// Moves waiting items into the channel while it has room.
    fn refill(&mut self) {
        self.flush_gathered();
        while let Some(item) = self.waiting.pop_front() {
            match self.rx.try_send(item) {
                Ok(()) => {}
                Err(TrySendError::Full(item)) => {
                    self.waiting.push_front(item);
                    return;
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.waiting.clear();
                    return;
                }
            }
        }
    }

    /// The reader consumed `n` more bytes: the window may open, and waiting
    /// data may move into the channel.
    pub(super) fn consumed(&mut self, cx: &mut AppCx, s: SessionRef, n: usize) {
        let skip = n.min(self.auto_consumed);
        self.auto_consumed -= skip;
        if n > skip {
            // Fails only once the connection is gone, when nothing is owed.
            let _ = op(cx, s, tcp::Consumed(n - skip));
        }
        self.refill();
    }

    /// Hands `msg` to TCP; the handle only offers what it was told fits.
    pub(super) fn write(&mut self, cx: &mut AppCx, s: SessionRef, msg: Message) {
        if self.write_error.is_some() {
            return;
        }
        let len = msg.len();
        let error = match op(cx, s, tcp::Write(msg)) {
            Ok(Reply::Size(n)) if n == len => return,
            // Room only grows between the handle's question and this write,
            // so a short write means the handle's account is wrong: fail
            // loudly rather than lose the rest.
            Ok(_) => UpiError::Exhausted("tcp send buffer"),
            Err(e) => e,
        };
        self.write_error = Some(error);
        self.broken.store(true, Ordering::Release);
    }

    /// Room in the send buffer, or why writing can only fail. When there is
    /// none, TCP is asked to say `Writable` once there is.
    pub(super) fn space(&mut self, cx: &mut AppCx, s: SessionRef) -> Result<usize, UpiError> {
        if let Some(e) = &self.write_error {
            return Err(e.clone());
        }
        if let Some(e) = &self.ended {
            return Err(e.clone().unwrap_or(UpiError::Closed));
        }
        // An empty write takes nothing, and marks a full buffer as wanted.
        op(cx, s, tcp::Write(Message::new()))?;
        match op(cx, s, tcp::SendSpace)? {
            Reply::Size(n) => Ok(n),
            _ => Err(UpiError::Unsupported("tcp::SendSpace")),
        }
    }

    /// Shuts the sending direction (a FIN follows the queued data).
    pub(super) fn shutdown_write(&mut self, cx: &mut AppCx, s: SessionRef) -> Result<(), UpiError> {
        let r = op(cx, s, tcp::Shutdown).map(|_| ());
        self.nudge();
        r
    }

    /// Shuts the receiving direction: what waits and what comes later is
    /// consumed and dropped, so the peer is never held up by the window; a
    /// blocked reader is woken.
    pub(super) fn shutdown_read(&mut self, cx: &mut AppCx, s: SessionRef, read: usize) {
        self.discard = true;
        self.flush_gathered();
        let waiting: usize = self
            .waiting
            .drain(..)
            .map(|i| match i {
                Incoming::Data(m) => m.len(),
                _ => 0,
            })
            .sum();
        self.consumed(cx, s, read + waiting);
        self.push(Incoming::End);
    }

    /// A private operation answered with a [`ConnInfo`].
    pub(super) fn info(cx: &mut AppCx, s: SessionRef) -> Result<ConnInfo, UpiError> {
        match op(cx, s, tcp::Info)? {
            Reply::Private(b) => b
                .downcast::<ConnInfo>()
                .map(|i| *i)
                .map_err(|_| UpiError::Unsupported("tcp::Info")),
            _ => Err(UpiError::Unsupported("tcp::Info")),
        }
    }

    /// Nagle's algorithm off (`true`) or on.
    pub(super) fn nodelay(cx: &mut AppCx, s: SessionRef, on: bool) -> Result<(), UpiError> {
        op(cx, s, tcp::SetNodelay(on)).map(|_| ())
    }
}

/// A listener's state.
pub(super) struct Listening {
    pub port: u16,
    /// Established connections not yet accepted.
    pub queue: SyncSender<TcpStream>,
    /// For the handles of accepted streams.
    pub host: EngineHandle,
    /// Connections reset because the accept queue was full.
    pub overflow: u64,
    /// This host's address.
    pub ip: std::net::Ipv4Addr,
}

/// The application behind a listener and its streams, or one connected stream.
pub(super) struct StreamApp {
    pub tcp: ProtoId,
    pub conns: HashMap<SessionRef, Conn>,
    pub listening: Option<Listening>,
}

impl StreamApp {
    pub(super) fn new(tcp: ProtoId, listening: Option<Listening>) -> StreamApp {
        StreamApp {
            tcp,
            conns: HashMap::new(),
            listening,
        }
    }

    /// A connection the listener's TCP announced: queued for `accept`, or
    /// reset when the queue is full (counted).
    fn accept(&mut self, s: SessionRef, mut parts: Participants, cx: &mut AppCx) {
        let Some(l) = self.listening.as_mut() else {
            let _ = op(cx, s, tcp::Abort);
            return;
        };
        let peer = addr_of(&mut parts.remote);
        let local = addr_of(&mut parts.local).unwrap_or(SocketAddrV4::new(l.ip, l.port));
        // Data that came with the handshake's last segment was counted as
        // consumed by TCP before manual flow control was on: remember how
        // much, so it is not reported twice.
        let set_up = op(cx, s, tcp::ManualConsume(true))
            .and_then(|_| Conn::info(cx, s))
            .map(|i| i.stats.bytes_received as usize);
        let (Some(peer), Ok(auto)) = (peer, set_up) else {
            let _ = op(cx, s, tcp::Abort);
            return;
        };
        let (conn, ends) = Conn::new(true, auto);
        let stream = TcpStream::new(l.host.clone(), cx.me(), s, local, peer, ends);
        match l.queue.try_send(stream) {
            Ok(()) => {
                self.conns.insert(s, conn);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                // The refused handle's own close finds no connection left.
                l.overflow += 1;
                let _ = op(cx, s, tcp::Abort);
            }
        }
    }
}

fn addr_of(p: &mut Participant) -> Option<SocketAddrV4> {
    let port = p.pop_port()?;
    let ip = p.pop_ip()?;
    Some(SocketAddrV4::new(ip, port))
}

impl App for StreamApp {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        let Some(s) = s else { return };
        let Some(c) = self.conns.get_mut(&s) else {
            return;
        };
        if c.discard {
            c.consumed(cx, s, msg.len());
        } else {
            c.push(Incoming::Data(msg));
        }
    }

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match event {
            AppEvent::OpenDone { session, parts } => self.accept(session, parts, cx),
            AppEvent::Connected(s) => {
                if let Some(c) = self.conns.get_mut(&s) {
                    c.established = true;
                    c.nudge();
                }
            }
            AppEvent::Writable(s) => {
                if let Some(c) = self.conns.get(&s) {
                    c.nudge();
                }
            }
            AppEvent::PeerClosed(s) => {
                if let Some(c) = self.conns.get_mut(&s) {
                    c.push(Incoming::End);
                }
            }
            AppEvent::Closed { session, error } => {
                if let Some(c) = self.conns.get_mut(&session) {
                    c.broken.store(true, Ordering::Release);
                    c.push(match &error {
                        Some(e) => Incoming::Failed(e.clone()),
                        None => Incoming::End,
                    });
                    c.ended = Some(error);
                    c.nudge();
                }
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Runs `f` on connection `s` of application `app`.
pub(super) fn with_conn<R>(
    engine: &mut Engine,
    app: AppId,
    s: SessionRef,
    f: impl FnOnce(&mut Conn, &mut AppCx) -> Result<R, UpiError>,
) -> Result<R, UpiError> {
    engine.with_app(app, |a, cx| {
        let me = a
            .as_any_mut()
            .downcast_mut::<StreamApp>()
            .ok_or(UpiError::NoSuchSession)?;
        let c = me.conns.get_mut(&s).ok_or(UpiError::NoSuchSession)?;
        f(c, cx)
    })?
}

/// Removes `app` once it serves nothing.
fn release(engine: &mut Engine, app: AppId) {
    let idle = engine
        .app::<StreamApp>(app)
        .is_some_and(|a| a.conns.is_empty() && a.listening.is_none());
    if idle {
        engine.remove_app(app);
    }
}

/// A stream's handle is gone: what it read is reported, then the session is
/// handed back to TCP (queued data and a FIN still go; data left unread
/// makes it a reset, as closing a socket does on Linux).
pub(super) fn close(engine: &mut Engine, app: AppId, s: SessionRef, read: usize) {
    let _ = engine.with_app(app, |a, cx| {
        if let Some(me) = a.as_any_mut().downcast_mut::<StreamApp>()
            && let Some(mut c) = me.conns.remove(&s)
        {
            c.consumed(cx, s, read);
            let _ = cx.close(s);
        }
    });
    release(engine, app);
}

/// A listener's handle is gone: the port is withdrawn.
pub(super) fn unlisten(engine: &mut Engine, app: AppId) {
    let _ = engine.with_app(app, |a, cx| {
        if let Some(me) = a.as_any_mut().downcast_mut::<StreamApp>()
            && let Some(l) = me.listening.take()
        {
            let parts = Participants::local([Addr::Port(l.port)]);
            let _ = cx.open_disable(me.tcp, parts, Qos::default());
        }
    });
    release(engine, app);
}

/// Opens a connection to `to` from a new application; returns it, the
/// session, the local address and the handle's ends.
pub(super) fn connect(
    engine: &mut Engine,
    to: SocketAddrV4,
) -> Result<(AppId, SessionRef, SocketAddrV4, Ends), UpiError> {
    let tcp = crate::apps::tcp_of(engine)?;
    let app = engine.add_app(Box::new(StreamApp::new(tcp, None)));
    let opened = engine.with_app(app, |a, cx| {
        let parts = Participants::remote([Addr::Ip(*to.ip()), Addr::Port(to.port())])
            .with_local([Addr::Port(0)]);
        let s = cx.open(tcp, parts, Qos::default())?;
        let local = op(cx, s, tcp::ManualConsume(true)).and_then(|_| {
            match cx.control(tcp, Some(s.sess), Control::GetParticipants)? {
                Reply::Participants(mut p) => addr_of(&mut p.local)
                    .ok_or(UpiError::BadParticipant("tcp did not name its end")),
                _ => Err(UpiError::Unsupported("GetParticipants")),
            }
        });
        let local = match local {
            Ok(l) => l,
            Err(e) => {
                let _ = cx.close(s);
                return Err(e);
            }
        };
        let (conn, ends) = Conn::new(false, 0);
        if let Some(me) = a.as_any_mut().downcast_mut::<StreamApp>() {
            me.conns.insert(s, conn);
        }
        Ok((s, local, ends))
    });
    match opened {
        Ok(Ok((s, local, ends))) => Ok((app, s, local, ends)),
        Ok(Err(e)) | Err(e) => {
            engine.remove_app(app);
            Err(e)
        }
    }
}

/// Listens on `port` (0: a free ephemeral one) from a new application whose
/// accepted streams go to `queue`; returns it and the local address.
pub(super) fn listen(
    engine: &mut Engine,
    port: u16,
    queue: SyncSender<TcpStream>,
    host: EngineHandle,
) -> Result<(AppId, SocketAddrV4), UpiError> {
    let tcp = crate::apps::tcp_of(engine)?;
    let ip = match engine.control(tcp, None, Control::GetIpAddr)? {
        Reply::Ip(a) => a,
        _ => return Err(UpiError::Unreachable),
    };
    let listening = Listening {
        port,
        queue,
        host,
        overflow: 0,
        ip,
    };
    let app = engine.add_app(Box::new(StreamApp::new(tcp, Some(listening))));
    let candidates: Vec<u16> = if port == 0 {
        // Start somewhere that differs between listeners, so each does not
        // walk over every port the earlier ones took.
        let span = tcp::EPHEMERAL.len();
        let first = (app.0 as usize).wrapping_mul(7919) % span;
        tcp::EPHEMERAL.cycle().skip(first).take(span).collect()
    } else {
        vec![port]
    };
    let bound = engine.with_app(app, |a, cx| {
        for p in candidates {
            match cx.open_enable(tcp, Participants::local([Addr::Port(p)]), Qos::default()) {
                Ok(()) => {
                    if let Some(l) = a
                        .as_any_mut()
                        .downcast_mut::<StreamApp>()
                        .and_then(|me| me.listening.as_mut())
                    {
                        l.port = p;
                    }
                    return Ok(p);
                }
                Err(UpiError::InUse) if port == 0 => {}
                Err(e) => return Err(e),
            }
        }
        Err(UpiError::Exhausted("tcp ports to listen on"))
    });
    match bound {
        Ok(Ok(p)) => Ok((app, SocketAddrV4::new(ip, p))),
        Ok(Err(e)) | Err(e) => {
            engine.remove_app(app);
            Err(e)
        }
    }
}

/// Connections reset because the listener's accept queue was full.
pub(super) fn overflow(engine: &Engine, app: AppId) -> u64 {
    engine
        .app::<StreamApp>(app)
        .and_then(|a| a.listening.as_ref())
        .map_or(0, |l| l.overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, byte: u8) -> Incoming {
        Incoming::Data(Message::from_slice(&vec![byte; n]))
    }

    fn bytes(rx: &Receiver<Incoming>) -> Vec<u8> {
        let mut out = Vec::new();
        while let Ok(i) = rx.try_recv() {
            match i {
                Incoming::Data(m) => out.extend(m.to_vec()),
                Incoming::End => out.push(b'$'),
                Incoming::Failed(_) => out.push(b'!'),
            }
        }
        out
    }

    #[test]
    fn data_waits_in_order_behind_a_full_channel_and_small_segments_are_gathered() {
        let (mut c, ends) = Conn::new(true, 0);
        for _ in 0..CHANNEL {
            c.push(data(1000, b'a'));
        }
        c.push(data(1000, b'b'));
        for _ in 0..3000 {
            c.push(data(1, b'c'));
        }
        c.push(data(2000, b'd'));
        c.push(Incoming::End);
        assert_eq!(
            c.waiting.len(),
            4,
            "b, the 3000 one-byte segments gathered as one buffer, d, the end"
        );
        let mut got = bytes(&ends.rx);
        while !c.waiting.is_empty() {
            c.refill();
            got.extend(bytes(&ends.rx));
        }
        let mut want = vec![b'a'; CHANNEL * 1000];
        want.extend(vec![b'b'; 1000]);
        want.extend(vec![b'c'; 3000]);
        want.extend(vec![b'd'; 2000]);
        want.push(b'$');
        assert_eq!(got.len(), want.len());
        assert!(got == want, "every byte in order, the end last");
    }

    #[test]
    fn a_gone_reader_makes_the_queue_drop_what_waits() {
        let (mut c, ends) = Conn::new(true, 0);
        for _ in 0..CHANNEL + 10 {
            c.push(data(100, b'x'));
        }
        drop(ends);
        c.refill();
        assert!(c.waiting.is_empty());
        c.push(data(100, b'y'));
        assert!(c.waiting.is_empty(), "nothing waits for nobody");
    }
}
