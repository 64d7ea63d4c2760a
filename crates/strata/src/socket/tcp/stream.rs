//! [`TcpStream`]: `std::net::TcpStream`'s shape over a Strata connection.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant as Wall};

use bytes::Bytes;
use strata_core::{AppId, Engine, Message, SessionRef, UpiError};
use strata_link::EngineHandle;
use strata_proto::tcp::ConnInfo;

use super::app::{self, Conn, Ends, Incoming};
use crate::socket::{io_error, stopped};

/// Bytes read before the reader reports them consumed (it also reports
/// whenever it is about to wait), so the window opens in steps, not per read.
const REPORT: usize = 64 * 1024;
/// The most one `write` hands over.
const MAX_WRITE: usize = 256 * 1024;
/// Writes sent without waiting before one waits for the engine to catch up,
/// so the job queue holds a bounded number of each stream's writes.
const UNCONFIRMED: usize = 64;

/// How reading ended.
enum ReadEnd {
    /// The peer closed its direction: reads return 0.
    Eof,
    /// The connection failed.
    Failed(UpiError),
}

struct Reader {
    rx: Receiver<Incoming>,
    /// The message being read, its read bytes stripped.
    current: Option<Message>,
    /// Bytes read and not yet reported to TCP.
    unreported: usize,
    /// Items were taken from the channel since the last report (which also
    /// refills the channel from data waiting in the engine).
    fetched: bool,
    end: Option<ReadEnd>,
    timeout: Option<Duration>,
}

struct Writer {
    wake: Receiver<()>,
    /// Bytes the send buffer surely has room for: what it had when last
    /// asked, less what was written since (room only grows meanwhile).
    credit: usize,
    /// Writes sent since the engine last answered.
    unconfirmed: usize,
    timeout: Option<Duration>,
}

/// A TCP connection on a Strata host, for blocking code.
///
/// Reads come from a bounded queue filled by the engine; the connection uses
/// manual receive flow control, so TCP's advertised window shrinks while the
/// reader lags and opens as it reads. Writes copy the caller's bytes once and
/// block until TCP's send buffer takes them. Like `std::net::TcpStream`,
/// `&TcpStream` implements `Read` and `Write`, so one thread may read while
/// another writes. Dropping it closes the connection: queued data and a FIN
/// still go, but data left unread makes it a reset, as on Linux.
pub struct TcpStream {
    host: EngineHandle,
    app: AppId,
    session: SessionRef,
    local: SocketAddrV4,
    peer: SocketAddrV4,
    reader: Mutex<Reader>,
    writer: Mutex<Writer>,
    /// Set by the engine once writing can only fail.
    broken: Arc<AtomicBool>,
    read_shut: AtomicBool,
    write_shut: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A failed connection's error as a socket user expects it.
fn stream_error(e: UpiError) -> io::Error {
    let kind = match e {
        UpiError::Refused => io::ErrorKind::ConnectionReset,
        UpiError::TimedOut => io::ErrorKind::TimedOut,
        UpiError::Unreachable => io::ErrorKind::HostUnreachable,
        UpiError::Closed | UpiError::NoSuchSession => io::ErrorKind::BrokenPipe,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::WouldBlock, format!("{what} timed out"))
}

/// Waits for a nudge from the engine until `deadline`.
fn wait(wake: &Receiver<()>, deadline: Option<Wall>, what: &str) -> io::Result<()> {
    let r = match deadline {
        None => wake.recv().map_err(|_| RecvTimeoutError::Disconnected),
        Some(d) => wake.recv_timeout(d.saturating_duration_since(Wall::now())),
    };
    match r {
        Ok(()) => Ok(()),
        Err(RecvTimeoutError::Timeout) => Err(timed_out(what)),
        Err(RecvTimeoutError::Disconnected) => Err(stopped()),
    }
}

fn check_timeout(t: Option<Duration>) -> io::Result<Option<Duration>> {
    match t {
        Some(d) if d.is_zero() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a zero timeout is not allowed",
        )),
        t => Ok(t),
    }
}

impl TcpStream {
    pub(super) fn new(
        host: EngineHandle,
        app: AppId,
        session: SessionRef,
        local: SocketAddrV4,
        peer: SocketAddrV4,
        ends: Ends,
    ) -> TcpStream {
        TcpStream {
            host,
            app,
            session,
            local,
            peer,
            reader: Mutex::new(Reader {
                rx: ends.rx,
                current: None,
                unreported: 0,
                fetched: false,
                end: None,
                timeout: None,
            }),
            writer: Mutex::new(Writer {
                wake: ends.wake,
                credit: 0,
                unconfirmed: 0,
                timeout: None,
            }),
            broken: ends.broken,
            read_shut: AtomicBool::new(false),
            write_shut: AtomicBool::new(false),
        }
    }

    /// Connects to `addr` from the host behind `host`, waiting as long as
    /// TCP tries (its SYN retries).
    pub fn connect(host: &EngineHandle, addr: SocketAddrV4) -> io::Result<TcpStream> {
        Self::open(host, addr, None)
    }

    /// Connects, giving up after `timeout` (the error is `TimedOut`).
    pub fn connect_timeout(
        host: &EngineHandle,
        addr: SocketAddrV4,
        timeout: Duration,
    ) -> io::Result<TcpStream> {
        let timeout = check_timeout(Some(timeout))?;
        Self::open(host, addr, timeout)
    }

    fn open(
        host: &EngineHandle,
        addr: SocketAddrV4,
        timeout: Option<Duration>,
    ) -> io::Result<TcpStream> {
        let deadline = timeout.map(|t| Wall::now() + t);
        let (app, session, local, ends) = host
            .call(move |engine: &mut Engine| app::connect(engine, addr))
            .map_err(|_| stopped())?
            .map_err(io_error)?;
        // Dropped on failure, which hands the session back to TCP.
        let stream = TcpStream::new(host.clone(), app, session, local, addr, ends);
        loop {
            let (app, s) = (app, session);
            let connected = host
                .call(move |engine: &mut Engine| {
                    app::with_conn(engine, app, s, |c, _| c.connected())
                })
                .map_err(|_| stopped())?;
            match connected {
                Ok(true) => return Ok(stream),
                Ok(false) => {}
                Err(e) => return Err(io_error(e)),
            }
            let w = lock(&stream.writer);
            match wait(&w.wake, deadline, "connect") {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
                }
                r => r?,
            }
        }
    }

    /// Runs `f` on this stream's connection in the engine and waits for it.
    fn on_conn<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn, &mut strata_core::AppCx) -> Result<R, UpiError> + Send + 'static,
    ) -> io::Result<R> {
        let (app, s) = (self.app, self.session);
        self.host
            .call(move |engine: &mut Engine| app::with_conn(engine, app, s, f))
            .map_err(|_| stopped())?
            .map_err(stream_error)
    }

    /// Runs `f` on this stream's connection without waiting.
    fn on_conn_later(
        &self,
        f: impl FnOnce(&mut Conn, &mut strata_core::AppCx) + Send + 'static,
    ) -> io::Result<()> {
        let (app, s) = (self.app, self.session);
        self.host
            .submit(Box::new(move |engine: &mut Engine| {
                // The connection is gone only after this handle closed it.
                let _ = app::with_conn(engine, app, s, |c, cx| {
                    f(c, cx);
                    Ok(())
                });
            }))
            .map_err(|_| stopped())
    }

    /// This end's address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddrV4 {
        self.peer
    }

    /// Sets how long a read waits for data (`None`: forever; zero is refused).
    /// A read that times out fails with `WouldBlock`, as on Unix.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        lock(&self.reader).timeout = check_timeout(timeout)?;
        Ok(())
    }

    /// Sets how long a write waits for room (`None`: forever; zero is
    /// refused). A write that times out fails with `WouldBlock`.
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        lock(&self.writer).timeout = check_timeout(timeout)?;
        Ok(())
    }

    /// Turns Nagle's algorithm off (`true`) or on.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        let s = self.session;
        self.on_conn(move |_, cx| Conn::nodelay(cx, s, nodelay))
    }

    /// What TCP knows about the connection: state, windows, round-trip
    /// estimate, counters.
    pub fn info(&self) -> io::Result<ConnInfo> {
        let s = self.session;
        self.on_conn(move |_, cx| Conn::info(cx, s))
    }

    /// Shuts down reading, writing or both. Writing: a FIN follows what was
    /// written, and later writes fail with `BrokenPipe`. Reading: reads
    /// return 0 from now on, and whatever arrives is acknowledged and
    /// dropped. A read or write blocked in another thread is woken.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if matches!(how, Shutdown::Read | Shutdown::Both)
            && !self.read_shut.swap(true, Ordering::AcqRel)
        {
            let s = self.session;
            self.on_conn_later(move |c, cx| c.shutdown_read(cx, s, 0))?;
        }
        if matches!(how, Shutdown::Write | Shutdown::Both)
            && !self.write_shut.swap(true, Ordering::AcqRel)
        {
            let s = self.session;
            self.on_conn(move |c, cx| c.shutdown_write(cx, s))?;
        }
        Ok(())
    }

    /// Reports what was read, and refills the channel from data waiting in
    /// the engine.
    fn report(&self, r: &mut Reader) -> io::Result<()> {
        if r.unreported == 0 && !r.fetched {
            return Ok(());
        }
        let n = std::mem::take(&mut r.unreported);
        r.fetched = false;
        let s = self.session;
        self.on_conn_later(move |c, cx| c.consumed(cx, s, n))
    }

    /// After a shutdown of reading: everything queued counts as read.
    fn discard(&self, r: &mut Reader) -> io::Result<()> {
        let mut n = r.current.take().map_or(0, |m| m.len());
        while let Ok(item) = r.rx.try_recv() {
            if let Incoming::Data(m) = item {
                n += m.len();
            }
        }
        r.unreported += n;
        if r.unreported > 0 {
            self.report(r)?;
        }
        Ok(())
    }

    fn read_locked(&self, r: &mut Reader, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.read_shut.load(Ordering::Acquire) {
                self.discard(r)?;
                return Ok(0);
            }
            if let Some(msg) = r.current.as_mut() {
                let n = msg.copy_to_slice(0, buf);
                msg.strip(n);
                if msg.is_empty() {
                    r.current = None;
                }
                r.unreported += n;
                if r.unreported >= REPORT {
                    self.report(r)?;
                }
                return Ok(n);
            }
            match &r.end {
                Some(ReadEnd::Eof) => return Ok(0),
                Some(ReadEnd::Failed(e)) => return Err(stream_error(e.clone())),
                None => {}
            }
            let item = match r.rx.try_recv() {
                Ok(item) => item,
                Err(TryRecvError::Empty) => {
                    // Before waiting, let the window open and waiting data in.
                    self.report(r)?;
                    match r.timeout {
                        None => r.rx.recv().map_err(|_| stopped())?,
                        Some(t) => r.rx.recv_timeout(t).map_err(|e| match e {
                            RecvTimeoutError::Timeout => timed_out("read"),
                            RecvTimeoutError::Disconnected => stopped(),
                        })?,
                    }
                }
                Err(TryRecvError::Disconnected) => return Err(stopped()),
            };
            r.fetched = true;
            match item {
                Incoming::Data(m) => r.current = Some(m),
                Incoming::End => r.end = Some(ReadEnd::Eof),
                Incoming::Failed(e) => r.end = Some(ReadEnd::Failed(e)),
            }
        }
    }

    fn write_locked(&self, w: &mut Writer, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let deadline = w.timeout.map(|t| Wall::now() + t);
        loop {
            if self.write_shut.load(Ordering::Acquire) {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the stream was shut down for writing",
                ));
            }
            if self.broken.load(Ordering::Acquire) {
                w.credit = 0;
            }
            let n = buf.len().min(w.credit).min(MAX_WRITE);
            if n > 0 && w.unconfirmed < UNCONFIRMED {
                let msg = Message::from_bytes(Bytes::copy_from_slice(&buf[..n]));
                let s = self.session;
                self.on_conn_later(move |c, cx| c.write(cx, s, msg))?;
                w.credit -= n;
                w.unconfirmed += 1;
                return Ok(n);
            }
            let s = self.session;
            let free = self.on_conn(move |c, cx| c.space(cx, s))?;
            w.unconfirmed = 0;
            w.credit = free;
            if free == 0 {
                wait(&w.wake, deadline, "write")?;
            }
        }
    }

    fn flush_locked(&self, w: &mut Writer) -> io::Result<()> {
        if self.write_shut.load(Ordering::Acquire) {
            return Ok(());
        }
        let s = self.session;
        w.credit = self.on_conn(move |c, cx| c.space(cx, s))?;
        w.unconfirmed = 0;
        Ok(())
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut r = lock(&self.reader);
        self.read_locked(&mut r, buf)
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut w = lock(&self.writer);
        self.write_locked(&mut w, buf)
    }

    /// Waits until TCP has taken everything written (not until the peer
    /// acknowledged it), and reports a failure of the connection.
    fn flush(&mut self) -> io::Result<()> {
        let mut w = lock(&self.writer);
        self.flush_locked(&mut w)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .finish()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        let r = self
            .reader
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let mut read = std::mem::take(&mut r.unreported);
        if self.read_shut.load(Ordering::Acquire) {
            read += r.current.take().map_or(0, |m| m.len());
            while let Ok(item) = r.rx.try_recv() {
                if let Incoming::Data(m) = item {
                    read += m.len();
                }
            }
        }
        let (app, s) = (self.app, self.session);
        // The host may be gone already; then there is nothing left to close.
        let _ = self.host.submit(Box::new(move |engine: &mut Engine| {
            app::close(engine, app, s, read)
        }));
    }
}
