//! The listener and the stream over kernel UDP.

use std::collections::VecDeque;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_link::drivers::xudp::{BufferReport, Xudp, XudpStats};
use strata_xport::{Connection, Endpoint, Event, Listener, PathInfo, State, Stats};

use super::{XportError, XportOptions};

fn resolve(addr: impl ToSocketAddrs + std::fmt::Debug) -> Result<SocketAddr, XportError> {
    let text = format!("{addr:?}");
    addr.to_socket_addrs()
        .map_err(|_| XportError::Resolve(text.clone()))?
        .next()
        .ok_or(XportError::Resolve(text))
}

fn seed() -> u64 {
    // Connection ids and sequence numbers must be unpredictable off-path.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() ^ u64::from(std::process::id()).rotate_left(32)
}

/// The IP and UDP headers below the transport on the way to `peer`.
fn below(peer: SocketAddr) -> usize {
    if peer.is_ipv6() {
        strata_xport::wire::IPV6_UDP_LEN
    } else {
        strata_xport::wire::IPV4_UDP_LEN
    }
}

struct Server {
    x: Xudp,
    l: Listener,
}

enum Side {
    Client { x: Box<Xudp>, c: Box<Connection> },
    Server { s: Arc<Mutex<Server>>, id: u64 },
}

/// Waits for connections on a control socket and its data sockets.
pub struct XportListener {
    s: Arc<Mutex<Server>>,
}

impl XportListener {
    /// Binds the control socket at `addr` (data sockets on the same
    /// address, ephemeral ports).
    pub fn bind(
        addr: impl ToSocketAddrs + std::fmt::Debug,
        opts: &XportOptions,
    ) -> Result<XportListener, XportError> {
        let addr = resolve(addr)?;
        let x = Xudp::bind(addr, &opts.udp)?;
        let mut config = opts.config.clone();
        config.socket_buffer = x.report().rcvbuf.min(u32::MAX as usize) as u32;
        let backlog = if opts.backlog == 0 { 64 } else { opts.backlog };
        let mut l = Listener::new(config, Instant::now(), seed(), &x.data_ports()?, backlog);
        // Each client's payload fits the route to it (as a client's fits
        // its route to the server); the kernel is asked once per set-up.
        l.fit_paths(Box::new(|peer| {
            let mtu = Xudp::path_mtu(peer).ok()?;
            Some(strata_xport::wire::payload_for_mtu(mtu, below(peer)))
        }));
        Ok(XportListener {
            s: Arc::new(Mutex::new(Server { x, l })),
        })
    }

    /// The control socket's address.
    pub fn local_addr(&self) -> Result<SocketAddr, XportError> {
        Ok(lock(&self.s).x.control_addr()?)
    }

    /// What the kernel granted for socket buffers (§3.4).
    pub fn buffer_report(&self) -> BufferReport {
        lock(&self.s).x.report().clone()
    }

    /// Takes a first set-up from `ip` without the cookie round trip, for a
    /// listener that serves one peer whose address another connection has
    /// proven (FTP's `XPSV`): [`strata_xport::Listener::expect`].
    pub fn expect(&mut self, ip: std::net::IpAddr) {
        lock(&self.s).l.expect(ip);
    }

    /// The data sockets' ports.
    pub fn data_ports(&self) -> Vec<u16> {
        lock(&self.s).x.data_ports().unwrap_or_default()
    }

    /// Waits for a connection whose set-up completed.
    pub fn accept(&mut self) -> Result<XportStream, XportError> {
        self.accept_until(None)
    }

    /// Like [`XportListener::accept`], giving up with
    /// [`XportError::TimedOut`] after `timeout` (a server that waits for one
    /// peer, as FTP's `XPSV` does, must not wait for ever).
    pub fn accept_timeout(&mut self, timeout: Duration) -> Result<XportStream, XportError> {
        self.accept_until(Some(Instant::now() + timeout))
    }

    fn accept_until(&mut self, end: Option<Instant>) -> Result<XportStream, XportError> {
        loop {
            let mut s = lock(&self.s);
            let Server { x, l } = &mut *s;
            x.turn(l)?;
            if let Some(id) = l.accept() {
                drop(s);
                return Ok(XportStream::new(Side::Server {
                    s: self.s.clone(),
                    id,
                }));
            }
            if end.is_some_and(|e| Instant::now() >= e) {
                return Err(XportError::TimedOut);
            }
            x.wait(earliest(l.poll_timeout(), end), &[])?;
        }
    }
}

/// One connection: send application buffers, receive into application buffers.
pub struct XportStream {
    side: Side,
    events: VecDeque<Event>,
    returned: VecDeque<Bytes>,
    filled: VecDeque<(Vec<u8>, usize)>,
    queued: usize,
    finished: bool,
    peer_finished: bool,
    closed: bool,
    lost: Option<strata_xport::ConnectionError>,
}

impl XportStream {
    fn new(side: Side) -> XportStream {
        XportStream {
            side,
            events: VecDeque::new(),
            returned: VecDeque::new(),
            filled: VecDeque::new(),
            queued: 0,
            finished: false,
            peer_finished: false,
            closed: false,
            lost: None,
        }
    }

    /// Connects to the listener whose control socket is at `addr`.
    pub fn connect(
        addr: impl ToSocketAddrs + std::fmt::Debug,
        opts: &XportOptions,
    ) -> Result<XportStream, XportError> {
        let mut s = XportStream::begin(addr, opts)?;
        s.wait_connected()?;
        Ok(s)
    }

    /// Starts connecting to the listener at `addr` without waiting: the
    /// set-up's first packet leaves now, and the set-up goes on whenever
    /// the stream is used (or [`XportStream::wait_connected`] is called).
    /// So an application can do something else — FTP sends its transfer
    /// command — during the set-up's round trips. Dropped before it
    /// completes, the attempt ends quietly.
    pub fn begin(
        addr: impl ToSocketAddrs + std::fmt::Debug,
        opts: &XportOptions,
    ) -> Result<XportStream, XportError> {
        let server = resolve(addr)?;
        let local = if server.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        };
        let mut x = Xudp::bind(local.parse().expect("literal address"), &opts.udp)?;
        let mut config = opts.config.clone();
        config.socket_buffer = x.report().rcvbuf.min(u32::MAX as usize) as u32;
        // Data packets that fill the route's MTU and no more (the set-up
        // agrees on the smaller of both ends' sizes; the listener's is its
        // configured one).
        config.fit_mtu(Xudp::path_mtu(server).unwrap_or(1500), below(server));
        let mut c = Connection::connect(config, Instant::now(), seed(), server, &x.data_ports()?);
        x.turn(&mut c)?;
        Ok(XportStream::new(Side::Client {
            x: Box::new(x),
            c: Box::new(c),
        }))
    }

    /// Waits until the set-up [`XportStream::begin`] started completes.
    pub fn wait_connected(&mut self) -> Result<(), XportError> {
        while self.with(|c| c.state()) == State::Connecting {
            self.pump(None, &[])?;
        }
        if self.closed {
            return Err(self.lost.map_or(XportError::Closed, XportError::from));
        }
        Ok(())
    }

    fn with<T>(&mut self, f: impl FnOnce(&mut Connection) -> T) -> T {
        match &mut self.side {
            Side::Client { c, .. } => f(c),
            Side::Server { s, id } => {
                let mut s = lock(s);
                f(s.l
                    .connection(*id)
                    .expect("a stream's connection stays until dropped"))
            }
        }
    }

    /// One turn of I/O, then a wait until a deadline, a datagram, `until`
    /// or one of `extra` is readable. Errors once the connection is lost.
    fn pump(&mut self, until: Option<Instant>, extra: &[RawFd]) -> Result<Vec<bool>, XportError> {
        let ready = match &mut self.side {
            Side::Client { x, c } => {
                x.turn(c.as_mut())?;
                collect(c, &mut self.events);
                if !self.events.is_empty() {
                    vec![false; extra.len()]
                } else {
                    let t = earliest(c.poll_timeout(), until);
                    x.wait(t, extra)?
                }
            }
            Side::Server { s, id } => {
                let mut s = lock(s);
                let Server { x, l } = &mut *s;
                x.turn(l)?;
                if let Some(c) = l.connection(*id) {
                    collect(c, &mut self.events);
                }
                if !self.events.is_empty() {
                    vec![false; extra.len()]
                } else {
                    let t = earliest(Endpoint::poll_timeout(l), until);
                    x.wait(t, extra)?
                }
            }
        };
        while let Some(e) = self.events.pop_front() {
            match e {
                Event::SendDone { buf, .. } => {
                    self.queued -= 1;
                    self.returned.push_back(buf);
                }
                Event::Received { buf, len, .. } => self.filled.push_back((buf, len)),
                Event::Finished => self.peer_finished = true,
                Event::Closed => self.closed = true,
                Event::Lost(e) => {
                    self.lost = Some(e);
                    self.closed = true;
                }
                Event::Connected => {}
            }
        }
        if let Some(e) = self.lost {
            return Err(e.into());
        }
        Ok(ready)
    }

    /// Hands `bufs` to the transport and returns, once at least one buffer
    /// is acknowledged, every buffer given back so far (§3.5.2). With no new
    /// buffers it just waits for the next given back (returning at once when
    /// none is in flight).
    pub fn send(&mut self, bufs: Vec<Bytes>) -> Result<Vec<Bytes>, XportError> {
        if self.finished || self.closed {
            return Err(XportError::Closed);
        }
        for b in bufs {
            if b.is_empty() {
                self.returned.push_back(b);
                continue;
            }
            self.with(|c| c.send(b)).ok_or(XportError::Closed)?;
            self.queued += 1;
        }
        while self.returned.is_empty() && self.queued > 0 {
            self.pump(None, &[])?;
        }
        Ok(self.returned.drain(..).collect())
    }

    /// Buffers handed over and not yet given back.
    pub fn in_flight(&self) -> usize {
        self.queued
    }

    /// Ends the stream and waits until every buffer is acknowledged;
    /// returns those not yet given back.
    pub fn finish(&mut self) -> Result<Vec<Bytes>, XportError> {
        if !self.finished {
            self.finished = true;
            self.with(|c| c.finish());
        }
        while self.queued > 0 {
            self.pump(None, &[])?;
        }
        Ok(self.returned.drain(..).collect())
    }

    /// Posts a buffer for the next bytes of the peer's stream without
    /// waiting (several may be posted: multiple buffering on receive).
    pub fn post_recv(&mut self, buf: Vec<u8>) {
        self.with(|c| c.post_recv(buf));
    }

    /// Posts `buf` and waits for the oldest posted buffer to come back with
    /// data: `(buffer, bytes)`; `bytes` is 0 once the peer's stream ended.
    pub fn recv(&mut self, buf: Vec<u8>) -> Result<(Vec<u8>, usize), XportError> {
        if let Some(f) = self.filled.pop_front() {
            self.post_recv(buf);
            return Ok(f);
        }
        if self.peer_finished {
            return Ok((buf, 0));
        }
        self.post_recv(buf);
        loop {
            if let Some(f) = self.filled.pop_front() {
                return Ok(f);
            }
            if self.peer_finished {
                return Ok((Vec::new(), 0));
            }
            if self.closed {
                return Err(XportError::Closed);
            }
            self.pump(None, &[])?;
        }
    }

    /// Waits, keeping the connection running, until one of the
    /// application's descriptors `fds` is readable or `timeout` passes —
    /// the library's replacement for `select` (§3.6). Returns which are readable.
    pub fn wait(
        &mut self,
        fds: &[RawFd],
        timeout: Option<Duration>,
    ) -> Result<Vec<bool>, XportError> {
        let until = timeout.map(|t| Instant::now() + t);
        loop {
            let ready = self.pump(until, fds)?;
            if ready.iter().any(|&r| r) {
                return Ok(ready);
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                return Ok(ready);
            }
        }
    }

    /// Ends this side's stream and waits until every buffer is
    /// acknowledged and the peer's stream has ended: both directions'
    /// data are through, without [`XportStream::close`]'s wait for the
    /// last acknowledgements and the linger after them (which answers a
    /// peer whose last acknowledgement was lost). An application that
    /// learns the peer's state another way — FTP's final reply — need not
    /// wait for them.
    pub fn end(&mut self) -> Result<(), XportError> {
        self.finish()?;
        while !self.peer_finished {
            if self.closed {
                return Err(XportError::Closed);
            }
            self.pump(None, &[])?;
        }
        Ok(())
    }

    /// Whether the peer's stream has ended and all of it was delivered.
    pub fn peer_finished(&self) -> bool {
        self.peer_finished
    }

    /// Ends this side's stream and waits until both directions are
    /// complete and acknowledged: nothing sent is lost.
    pub fn close(mut self) -> Result<(), XportError> {
        self.finish()?;
        while !self.closed {
            self.pump(None, &[])?;
        }
        Ok(())
    }

    /// Counters.
    pub fn stats(&mut self) -> Stats {
        self.with(|c| c.stats().clone())
    }

    /// Every datagram dropped for this connection, by reason — with, on a
    /// listener's stream, those the listener dropped before routing (forged
    /// ids, bad checksums, stray set-ups).
    pub fn drops(&mut self) -> strata_xport::Drops {
        let mut d = self.with(|c| c.stats().drops.clone());
        if let Side::Server { s, .. } = &self.side {
            d.add(&lock(s).l.stats().drops);
        }
        d
    }

    /// The data sockets' ports (what a peer sends data to).
    pub fn data_ports(&self) -> Vec<u16> {
        match &self.side {
            Side::Client { x, .. } => x.data_ports().unwrap_or_default(),
            Side::Server { s, .. } => lock(s).x.data_ports().unwrap_or_default(),
        }
    }

    /// RTT, windows and rate.
    pub fn info(&mut self) -> PathInfo {
        self.with(|c| c.info())
    }

    /// The peer's control address.
    pub fn peer_addr(&mut self) -> SocketAddr {
        self.with(|c| c.peer())
    }

    /// The driver's counters (shared by a listener's streams).
    pub fn udp_stats(&self) -> XudpStats {
        match &self.side {
            Side::Client { x, .. } => x.stats().clone(),
            Side::Server { s, .. } => lock(s).x.stats().clone(),
        }
    }

    /// What the kernel granted for socket buffers (§3.4).
    pub fn buffer_report(&self) -> BufferReport {
        match &self.side {
            Side::Client { x, .. } => x.report().clone(),
            Side::Server { s, .. } => lock(s).x.report().clone(),
        }
    }
}

impl Drop for XportStream {
    fn drop(&mut self) {
        match &mut self.side {
            Side::Client { x, c } => {
                if c.state() != State::Closed {
                    c.abort();
                    let _ = x.turn(c.as_mut());
                }
            }
            Side::Server { s, id } => {
                let mut s = lock(s);
                let Server { x, l } = &mut *s;
                if let Some(c) = l.connection(*id)
                    && c.state() != State::Closed
                {
                    c.abort();
                }
                let _ = x.turn(l);
                l.remove(*id);
            }
        }
    }
}

/// The server's sockets and listener; a panic elsewhere cannot leave them
/// half-updated in a way that matters more than the panic itself.
fn lock(s: &Arc<Mutex<Server>>) -> MutexGuard<'_, Server> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

fn collect(c: &mut Connection, out: &mut VecDeque<Event>) {
    while let Some(e) = c.poll_event() {
        out.push_back(e);
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
