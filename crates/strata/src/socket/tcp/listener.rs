//! [`TcpListener`]: `std::net::TcpListener`'s shape over a Strata host.

use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError, sync_channel};
use std::time::Duration;

use strata_core::{AppId, Engine};
use strata_link::EngineHandle;

use super::TcpStream;
use super::app;
use crate::socket::{io_error, stopped};

/// Connections a listener queues for `accept` unless told otherwise
/// (Linux's default `somaxconn`, 4096, is for servers with many cores;
/// this is the smaller historical default).
pub const DEFAULT_BACKLOG: usize = 128;

/// A listening TCP port on a Strata host, for blocking code.
///
/// TCP announces each connection once its handshake completes; the listener
/// queues up to its backlog of them for [`accept`](Self::accept), already
/// established and receiving (their data waits in their own queues), and
/// resets any beyond that, counted by [`overflow`](Self::overflow).
/// Dropping the listener withdraws the port and closes the connections not
/// yet accepted.
pub struct TcpListener {
    host: EngineHandle,
    app: AppId,
    local: SocketAddrV4,
    queue: Receiver<TcpStream>,
    nonblocking: AtomicBool,
}

impl TcpListener {
    /// Listens on `port` (0 for a free ephemeral one) of the host behind
    /// `host`, with the default backlog.
    pub fn bind(host: &EngineHandle, port: u16) -> io::Result<TcpListener> {
        Self::bind_with_backlog(host, port, DEFAULT_BACKLOG)
    }

    /// Listens with an accept queue of `backlog` connections (at least one).
    pub fn bind_with_backlog(
        host: &EngineHandle,
        port: u16,
        backlog: usize,
    ) -> io::Result<TcpListener> {
        let (tx, queue) = sync_channel(backlog.max(1));
        let handle = host.clone();
        let (app, local) = host
            .call(move |engine: &mut Engine| app::listen(engine, port, tx, handle))
            .map_err(|_| stopped())?
            .map_err(io_error)?;
        Ok(TcpListener {
            host: host.clone(),
            app,
            local,
            queue,
            nonblocking: AtomicBool::new(false),
        })
    }

    /// The address and port this listener is bound to.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// The next established connection and its peer's address; waits for
    /// one, or fails with `WouldBlock` at once in non-blocking mode.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddrV4)> {
        let stream = if self.nonblocking.load(Ordering::Relaxed) {
            self.queue.try_recv().map_err(|e| match e {
                TryRecvError::Empty => {
                    io::Error::new(io::ErrorKind::WouldBlock, "no connection to accept")
                }
                TryRecvError::Disconnected => stopped(),
            })?
        } else {
            self.queue.recv().map_err(|_| stopped())?
        };
        let peer = stream.peer_addr();
        Ok((stream, peer))
    }

    /// Like [`accept`](Self::accept), waiting at most `timeout` (then
    /// `WouldBlock`).
    pub fn accept_timeout(&self, timeout: Duration) -> io::Result<(TcpStream, SocketAddrV4)> {
        let stream = self.queue.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => {
                io::Error::new(io::ErrorKind::WouldBlock, "accept timed out")
            }
            RecvTimeoutError::Disconnected => stopped(),
        })?;
        let peer = stream.peer_addr();
        Ok((stream, peer))
    }

    /// In non-blocking mode `accept` never waits.
    pub fn set_nonblocking(&self, nonblocking: bool) {
        self.nonblocking.store(nonblocking, Ordering::Relaxed);
    }

    /// Connections reset because the accept queue was full.
    pub fn overflow(&self) -> io::Result<u64> {
        let app = self.app;
        self.host
            .call(move |engine: &mut Engine| app::overflow(engine, app))
            .map_err(|_| stopped())
    }
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener")
            .field("local", &self.local)
            .finish()
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let app = self.app;
        // Streams still queued are dropped after this, and close themselves;
        // the host may be gone already, with nothing left to close.
        let _ = self.host.submit(Box::new(move |engine: &mut Engine| {
            app::unlisten(engine, app)
        }));
    }
}
