//! Data connections: a TCP listener per `PASV`/`EPSV` or a transport
//! listener per `XPSV`, an accept with a time-out from the control
//! connection's peer only, and the copies in both directions (with `TYPE A`'s
//! line-end conversion, RFC 959 §3.1.1.1).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use strata::xport::{XportListener, XportStream};

use crate::copy::copy;
use crate::transport::{self, Transport};

/// A listener waiting for one data connection.
pub struct Passive {
    listener: TcpListener,
}

impl Passive {
    /// Listens on an ephemeral port of `ip` (the control connection's own
    /// address, so the client reaches it the way it reached the server).
    pub fn open(ip: IpAddr) -> io::Result<Passive> {
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))?;
        listener.set_nonblocking(true)?;
        Ok(Passive { listener })
    }

    /// The port to tell the client.
    pub fn port(&self) -> io::Result<u16> {
        Ok(self.listener.local_addr()?.port())
    }

    /// The first connection from `peer` within `timeout`; connections from
    /// any other address are closed at once (FTP's data-port theft), and
    /// counted in `strays`.
    pub fn accept(
        &self,
        peer: IpAddr,
        timeout: Duration,
        strays: &mut u64,
    ) -> io::Result<TcpStream> {
        let end = Instant::now() + timeout;
        let mut poll = Poll::new()?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.listener);
        poll.registry()
            .register(&mut mio::unix::SourceFd(&fd), Token(0), Interest::READABLE)?;
        let mut events = Events::with_capacity(4);
        loop {
            match self.listener.accept() {
                Ok((s, from)) if from.ip() == peer => {
                    s.set_nonblocking(false)?;
                    return Ok(s);
                }
                Ok(_) => *strays += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = end.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                    match poll.poll(&mut events, Some(left)) {
                        Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
                        _ => {}
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// A data connection prepared by `PASV`/`EPSV` (TCP) or `XPSV` (the
/// transport), waiting for the client.
pub enum Pending {
    /// A TCP listener.
    Tcp(Passive),
    /// A transport listener, and how to use its connection.
    Xport(Box<(XportListener, Transport)>),
}

/// An open data connection.
pub enum DataConn {
    /// Kernel TCP.
    Tcp(TcpStream),
    /// Seed 001's transport.
    Xport(Box<(XportStream, Transport)>),
}

impl Pending {
    /// Opens a transport listener on `ip` (`XPSV`).
    pub fn xport(ip: IpAddr, t: &Transport) -> io::Result<(Pending, u16)> {
        let l =
            XportListener::bind(SocketAddr::new(ip, 0), &t.options).map_err(io::Error::other)?;
        let port = l.local_addr().map_err(io::Error::other)?.port();
        Ok((Pending::Xport(Box::new((l, t.clone()))), port))
    }

    /// The client's connection, from `peer` only, within `timeout`; others
    /// are dropped and counted in `strays`.
    pub fn accept(self, peer: IpAddr, timeout: Duration, strays: &mut u64) -> io::Result<DataConn> {
        match self {
            Pending::Tcp(p) => {
                let s = p.accept(peer, timeout, strays)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                Ok(DataConn::Tcp(s))
            }
            Pending::Xport(b) => {
                let (mut l, t) = *b;
                let end = Instant::now() + timeout;
                loop {
                    let left = end.saturating_duration_since(Instant::now());
                    let mut s = l.accept_timeout(left).map_err(io::Error::other)?;
                    if s.peer_addr().ip() == peer {
                        return Ok(DataConn::Xport(Box::new((s, t))));
                    }
                    *strays += 1;
                }
            }
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
                let n = if ascii {
                    copy_to_ascii(from, &mut s)?
                } else {
                    // std's copy from a file to a socket is sendfile(2).
                    io::copy(from, &mut s)?
                };
                s.shutdown(Shutdown::Write)?;
                Ok((n, Linger(None)))
            }
            DataConn::Xport(b) => {
                let (mut s, t) = *b;
                let n = transport::send(&mut s, from, &t, &mut |_| {}).map_err(io::Error::other)?;
                s.end().map_err(io::Error::other)?;
                Ok((n, Linger(Some(s))))
            }
        }
    }

    /// Receives the data connection's bytes into `to` until the client ends
    /// it; `ascii` turns CR LF into LF. The transport's close (our own
    /// stream's end, and the wait for its acknowledgement) is left to the
    /// [`Linger`] returned, after the final reply.
    pub fn receive(self, to: &mut impl Write, ascii: bool) -> io::Result<(u64, Linger)> {
        match self {
            DataConn::Tcp(mut s) if ascii => Ok((copy_from_ascii(&mut s, to)?, Linger(None))),
            DataConn::Tcp(mut s) => Ok((copy(&mut s, to, &mut |_| {})?, Linger(None))),
            DataConn::Xport(b) => {
                let (mut s, t) = *b;
                let n =
                    transport::receive(&mut s, to, &t, &mut |_| {}).map_err(io::Error::other)?;
                Ok((n, Linger(Some(s))))
            }
        }
    }
}

/// Transport connections closing at once in the background, per server;
/// past this, a session closes its own before reading its next command.
const MAX_LINGERING: usize = 64;

/// A transport connection whose data are through, still to close: its
/// close completes both directions' last acknowledgements and lingers to
/// answer a client whose last acknowledgement was lost. The final reply
/// goes first (the client needs nothing more to trust the transfer), so
/// the close costs the transfer no round trip.
pub struct Linger(Option<XportStream>);

impl Linger {
    /// Closes on a thread of its own (at most [`MAX_LINGERING`] at once,
    /// counted in `lingering`; past that, here). The close ends by itself:
    /// completed, reset by the client, or the peer silent for the
    /// transport's idle time-out.
    pub fn close(self, lingering: &Arc<AtomicUsize>) {
        let Some(s) = self.0 else {
            return;
        };
        if lingering.fetch_add(1, Ordering::AcqRel) >= MAX_LINGERING {
            lingering.fetch_sub(1, Ordering::AcqRel);
            let _ = s.close();
            return;
        }
        let count = Arc::clone(lingering);
        let spawned = std::thread::Builder::new()
            .name("ftpd linger".into())
            .spawn(move || {
                // The transfer was answered already: a failure here loses nothing.
                let _ = s.close();
                count.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            lingering.fetch_sub(1, Ordering::AcqRel);
        }
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
