//! Where the pair's connections run: the kernel's sockets, or a Strata
//! host's own stack (its TCP for control and passive data, its `xport`
//! node for the transport). Client and server take the same [`Via`].

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use strata::link::EngineHandle;

/// Where connections leave from and arrive at.
#[derive(Clone, Default)]
pub enum Via {
    /// The kernel's sockets: its TCP, and the transport over its UDP.
    #[default]
    Kernel,
    /// A running Strata host (IPv4): its own TCP for the control and
    /// passive data connections, its `xport` node for the transport's —
    /// its stack holds `tcp` and `xport` over `udp` (`xport/udp+tcp/ip/eth`).
    Host(EngineHandle),
}

/// A TCP connection: the kernel's or a Strata host's.
pub(crate) enum Conn {
    Kernel(TcpStream),
    Host(Arc<strata::TcpStream>),
}

impl Conn {
    /// Connects to `addr` within `timeout`, Nagle off, every later read and
    /// write bounded by `timeout` too.
    pub(crate) fn connect(via: &Via, addr: SocketAddr, timeout: Duration) -> io::Result<Conn> {
        let c = match via {
            Via::Kernel => Conn::Kernel(TcpStream::connect_timeout(&addr, timeout)?),
            Via::Host(h) => Conn::Host(Arc::new(strata::TcpStream::connect_timeout(
                h,
                v4(addr)?,
                timeout,
            )?)),
        };
        c.set_nodelay();
        c.set_timeouts(timeout)?;
        Ok(c)
    }

    pub(crate) fn set_nodelay(&self) {
        let _ = match self {
            Conn::Kernel(s) => s.set_nodelay(true),
            Conn::Host(s) => s.set_nodelay(true),
        };
    }

    /// Bounds every read and write by `t`.
    pub(crate) fn set_timeouts(&self, t: Duration) -> io::Result<()> {
        match self {
            Conn::Kernel(s) => {
                s.set_read_timeout(Some(t))?;
                s.set_write_timeout(Some(t))
            }
            Conn::Host(s) => {
                s.set_read_timeout(Some(t))?;
                s.set_write_timeout(Some(t))
            }
        }
    }

    pub(crate) fn try_clone(&self) -> io::Result<Conn> {
        Ok(match self {
            Conn::Kernel(s) => Conn::Kernel(s.try_clone()?),
            Conn::Host(s) => Conn::Host(s.clone()),
        })
    }

    pub(crate) fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Conn::Kernel(s) => s.shutdown(Shutdown::Write),
            Conn::Host(s) => s.shutdown(Shutdown::Write),
        }
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Conn::Kernel(s) => s.local_addr(),
            Conn::Host(s) => Ok(SocketAddr::V4(s.local_addr())),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Kernel(s) => s.read(buf),
            Conn::Host(s) => (&**s).read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Kernel(s) => s.write(buf),
            Conn::Host(s) => (&**s).write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Kernel(s) => s.flush(),
            Conn::Host(s) => (&**s).flush(),
        }
    }
}

/// A Strata host's stack is IPv4.
pub(crate) fn v4(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a Strata host reaches IPv4 addresses only",
        )),
    }
}

/// A listening TCP port: the kernel's or a Strata host's (whose accept
/// queue is a channel's receiving end: one accepting thread at a time, so
/// that a server can still be shared between threads).
pub(crate) enum Port {
    Kernel(TcpListener),
    Host(Mutex<strata::TcpListener>),
}

impl Port {
    /// Listens at `addr` (port 0: an ephemeral one). A Strata host listens
    /// on its own address, whatever IP `addr` names.
    pub(crate) fn bind(via: &Via, addr: SocketAddr) -> io::Result<Port> {
        Ok(match via {
            Via::Kernel => {
                let l = TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Port::Kernel(l)
            }
            Via::Host(h) => Port::Host(Mutex::new(strata::TcpListener::bind(h, addr.port())?)),
        })
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Port::Kernel(l) => l.local_addr(),
            Port::Host(l) => Ok(SocketAddr::V4(lock(l).local_addr())),
        }
    }

    /// The next connection within `timeout`, if one comes.
    pub(crate) fn accept_timeout(
        &self,
        timeout: Duration,
    ) -> io::Result<Option<(Conn, SocketAddr)>> {
        match self {
            Port::Kernel(l) => {
                let got = match l.accept() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        wait_readable(l, timeout)?;
                        l.accept()
                    }
                    r => r,
                };
                match got {
                    Ok((s, peer)) => {
                        s.set_nonblocking(false)?;
                        Ok(Some((Conn::Kernel(s), peer)))
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                    // A connection reset before accept, or out of
                    // descriptors for a moment: the listener itself is fine.
                    Err(e) if e.kind() != io::ErrorKind::Interrupted => {
                        std::thread::sleep(Duration::from_millis(10).min(timeout));
                        Ok(None)
                    }
                    Err(_) => Ok(None),
                }
            }
            Port::Host(l) => match lock(l).accept_timeout(timeout) {
                Ok((s, peer)) => Ok(Some((Conn::Host(Arc::new(s)), SocketAddr::V4(peer)))),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// The first connection from `peer` within `timeout`; connections from
    /// any other address are closed at once (FTP's data-port theft), and
    /// counted in `strays`.
    pub(crate) fn accept_from(
        &self,
        peer: IpAddr,
        timeout: Duration,
        strays: &mut u64,
    ) -> io::Result<Conn> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.accept_timeout(left)? {
                Some((c, from)) if from.ip() == peer => return Ok(c),
                Some(_) => *strays += 1,
                None if left.is_zero() => return Err(io::ErrorKind::TimedOut.into()),
                None => {}
            }
        }
    }
}

/// A panic elsewhere leaves the listener as usable as before.
fn lock(l: &Mutex<strata::TcpListener>) -> MutexGuard<'_, strata::TcpListener> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until the kernel's listener `l` has a connection or `timeout` passes.
fn wait_readable(l: &TcpListener, timeout: Duration) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(l);
    poll.registry()
        .register(&mut mio::unix::SourceFd(&fd), Token(0), Interest::READABLE)?;
    let mut events = Events::with_capacity(4);
    match poll.poll(&mut events, Some(timeout)) {
        Err(e) if e.kind() != io::ErrorKind::Interrupted => Err(e),
        _ => Ok(()),
    }
}
