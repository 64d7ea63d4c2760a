//! Data connections: a TCP listener per `PASV`/`EPSV` or a transport
//! listener per `XPSV`, an accept with a time-out from the control
//! connection's peer only, and the copies in both directions (with `TYPE A`'s
//! line-end conversion, RFC 959 §3.1.1.1).

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use strata::xport::{Stream, XportListener, XportStream};
use strata::xport_stack::{StackListener, StackStream};

use crate::copy::copy;
use crate::net::{Conn, Port, Via};
use crate::transport::{self, Transport};

/// A listener waiting for one data connection.
pub struct Passive {
    port: Port,
}

impl Passive {
    /// Listens on an ephemeral port of `ip` (the control connection's own
    /// address, so the client reaches it the way it reached the server).
    pub(crate) fn open(via: &Via, ip: IpAddr) -> io::Result<Passive> {
        Ok(Passive {
            port: Port::bind(via, SocketAddr::new(ip, 0))?,
        })
    }

    /// The port to tell the client.
    pub fn port(&self) -> io::Result<u16> {
        Ok(self.port.local_addr()?.port())
    }
}

/// A transport listener: over the kernel's UDP or a Strata host's `xport`.
pub enum XListener {
    /// Over the kernel's UDP.
    Kernel(XportListener),
    /// On a Strata host.
    Host(StackListener),
}

/// A data connection prepared by `PASV`/`EPSV` (TCP) or `XPSV` (the
/// transport), waiting for the client.
pub enum Pending {
    /// A TCP listener.
    Tcp(Passive),
    /// A transport listener, and how to use its connection.
    Xport(Box<(XListener, Transport)>),
}

/// An open data connection.
pub enum DataConn {
    /// TCP: the kernel's or a Strata host's.
    Tcp(Conn),
    /// Seed 001's transport over the kernel's UDP.
    Xport(Box<(XportStream, Transport)>),
    /// Seed 001's transport on a Strata host.
    Stack(Box<(StackStream, Transport)>),
}

impl Pending {
    /// Opens a transport listener on `ip` (`XPSV`), or on the host's
    /// `xport` node. Only `peer` may connect; its first set-up packet is answered
    /// without the cookie round trip (the control connection proved its
    /// address).
    pub(crate) fn xport(
        via: &Via,
        ip: IpAddr,
        peer: IpAddr,
        t: &Transport,
    ) -> io::Result<(Pending, u16)> {
        let (l, port) = match via {
            Via::Kernel => {
                let mut l = XportListener::bind(SocketAddr::new(ip, 0), &t.options)
                    .map_err(io::Error::other)?;
                l.expect(peer);
                let port = l.local_addr().map_err(io::Error::other)?.port();
                (XListener::Kernel(l), port)
            }
            Via::Host(h) => {
                let l = StackListener::bind(h, 0).map_err(io::Error::other)?;
                l.expect(peer).map_err(io::Error::other)?;
                let port = l.port();
                (XListener::Host(l), port)
            }
        };
        Ok((Pending::Xport(Box::new((l, t.clone()))), port))
    }

    /// The client's connection, from `peer` only, within `timeout`; others
    /// are dropped and counted in `strays`.
    pub fn accept(self, peer: IpAddr, timeout: Duration, strays: &mut u64) -> io::Result<DataConn> {
        let end = Instant::now() + timeout;
        let left = || end.saturating_duration_since(Instant::now());
        match self {
            Pending::Tcp(p) => {
                let s = p.port.accept_from(peer, timeout, strays)?;
                s.set_timeouts(timeout)?;
                Ok(DataConn::Tcp(s))
            }
            Pending::Xport(b) => match *b {
                (XListener::Kernel(mut l), t) => loop {
                    let mut s = l.accept_timeout(left()).map_err(io::Error::other)?;
                    if s.peer_addr().ip() == peer {
                        return Ok(DataConn::Xport(Box::new((s, t))));
                    }
                    *strays += 1;
                },
                (XListener::Host(mut l), t) => loop {
                    let s = l.accept_timeout(left()).map_err(io::Error::other)?;
                    if s.peer_addr().map_err(io::Error::other)?.ip() == peer {
                        // The listener goes now (no second connection);
                        // its ports stay with the connection.
                        return Ok(DataConn::Stack(Box::new((s, t))));
                    }
                    *strays += 1;
                },
            },
        }
    }
}

impl DataConn {
    /// Sends everything `from` holds and ends the data connection: for the
    /// transport, once all of it is acknowledged and the client has ended
    /// its stream (it does once it holds all of ours). `ascii` turns LF into
    /// CR LF (TCP only: `XPSV` is refused in `TYPE A`). The transport's
    /// close is left to the [`Linger`] returned, after the final reply.
    pub fn send(self, from: &mut impl Read, ascii: bool) -> io::Result<(u64, Linger)> {
        match self {
            DataConn::Tcp(mut s) => {
                let n = match &mut s {
                    _ if ascii => copy_to_ascii(from, &mut s)?,
                    // std's copy from a file to a socket is sendfile(2).
                    Conn::Kernel(k) => io::copy(from, k)?,
                    Conn::Host(_) => copy(from, &mut s, &mut |_| {})?,
                };
                s.shutdown_write()?;
                Ok((n, Linger::None))
            }
            DataConn::Xport(b) => {
                let (mut s, t) = *b;
                let n = send_all(&mut s, from, &t)?;
                Ok((n, Linger::Kernel(s)))
            }
            DataConn::Stack(b) => {
                let (mut s, t) = *b;
                let n = send_all(&mut s, from, &t)?;
                Ok((n, Linger::Host(s)))
            }
        }
    }

    /// Receives the data connection's bytes into `to` until the client ends
    /// it; `ascii` turns CR LF into LF. The transport's close (our own
    /// stream's end, and the wait for its acknowledgement) is left to the
    /// [`Linger`] returned, after the final reply.
    pub fn receive(self, to: &mut impl Write, ascii: bool) -> io::Result<(u64, Linger)> {
        match self {
            DataConn::Tcp(mut s) if ascii => Ok((copy_from_ascii(&mut s, to)?, Linger::None)),
            DataConn::Tcp(mut s) => Ok((copy(&mut s, to, &mut |_| {})?, Linger::None)),
            DataConn::Xport(b) => {
                let (mut s, t) = *b;
                let n =
                    transport::receive(&mut s, to, &t, &mut |_| {}).map_err(io::Error::other)?;
                Ok((n, Linger::Kernel(s)))
            }
            DataConn::Stack(b) => {
                let (mut s, t) = *b;
                let n =
                    transport::receive(&mut s, to, &t, &mut |_| {}).map_err(io::Error::other)?;
                Ok((n, Linger::Host(s)))
            }
        }
    }
}

/// Sends `from` over the transport and waits for the client's stream to
/// end too (the client ends it once it holds all of ours).
fn send_all(s: &mut impl Stream, from: &mut impl Read, t: &Transport) -> io::Result<u64> {
    let n = transport::send(s, from, t, &mut |_| {}).map_err(io::Error::other)?;
    s.end().map_err(io::Error::other)?;
    Ok(n)
}

/// Transport connections closing at once in the background, per server;
/// past this, a session closes its own before reading its next command.
const MAX_LINGERING: usize = 64;

/// A transport connection whose data are through, still to close: its
/// close completes both directions' last acknowledgements and lingers to
/// answer a client whose last acknowledgement was lost. The final reply
/// goes first (the client needs nothing more to trust the transfer), so
/// the close costs the transfer no round trip.
pub enum Linger {
    /// Nothing to close (TCP).
    None,
    /// Over the kernel's UDP.
    Kernel(XportStream),
    /// On a Strata host.
    Host(StackStream),
}

impl Linger {
    /// Closes on a thread of its own (at most [`MAX_LINGERING`] at once,
    /// counted in `lingering`; past that, here). The close ends by itself:
    /// completed, reset by the client, or the peer silent for the
    /// transport's idle time-out.
    pub fn close(self, lingering: &Arc<AtomicUsize>) {
        if matches!(self, Linger::None) {
            return;
        }
        if lingering.fetch_add(1, Ordering::AcqRel) >= MAX_LINGERING {
            lingering.fetch_sub(1, Ordering::AcqRel);
            self.close_here();
            return;
        }
        let count = Arc::clone(lingering);
        let spawned = std::thread::Builder::new()
            .name("ftpd linger".into())
            .spawn(move || {
                self.close_here();
                count.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            // No thread: the connection was dropped (reset) instead.
            lingering.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The transfer was answered already: a failure here loses nothing.
    fn close_here(self) {
        let _ = match self {
            Linger::None => Ok(()),
            Linger::Kernel(s) => s.close(),
            Linger::Host(s) => s.close(),
        };
    }
}

/// Copies `from` to `to` turning each LF into CR LF (sending in `TYPE A`).
pub fn copy_to_ascii(from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(128 * 1024);
    let mut total = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        out.clear();
        for &b in &buf[..n] {
            if b == b'\n' {
                out.push(b'\r');
            }
            out.push(b);
        }
        to.write_all(&out)?;
        total += n as u64;
    }
}

/// Copies `from` to `to` turning each CR LF into LF (receiving in `TYPE A`).
/// A CR not followed by LF is kept.
pub fn copy_from_ascii(from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(64 * 1024 + 1);
    let mut held_cr = false;
    let mut total = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        out.clear();
        for &b in &buf[..n] {
            if held_cr && b != b'\n' {
                out.push(b'\r');
            }
            held_cr = b == b'\r';
            if !held_cr {
                out.push(b);
            }
        }
        to.write_all(&out)?;
        total += out.len() as u64;
    }
    if held_cr {
        to.write_all(b"\r")?;
        total += 1;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_mode_turns_lf_into_crlf_and_back() {
        let text = b"one\ntwo\r\nthree\rfour\n\r".to_vec();
        let mut wire = Vec::new();
        copy_to_ascii(&mut &text[..], &mut wire).unwrap();
        assert_eq!(wire, b"one\r\ntwo\r\r\nthree\rfour\r\n\r");
        let mut back = Vec::new();
        copy_from_ascii(&mut &wire[..], &mut back).unwrap();
        assert_eq!(back, text);
    }
}
