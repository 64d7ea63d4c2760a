//! The Linux kernel's own UDP ping-pong: the peer for Strata's UDP-IP-ETH
//! ping-pong over a veth pair with AF_PACKET (`strata rtt --link packet`), in the
//! same polling mode as Strata's runtime.
//!
//! Two kernel UDP sockets, each made inside its namespace (so the datagrams
//! cross the same veth pair Strata's frames do), both non-blocking and spun
//! on in busy-poll mode, or blocking in the kernel otherwise: the server
//! on a thread of its own echoes every datagram; the client sends one, spins
//! until the echo is back, and times the round trip with the monotonic clock.
//! The kernel does for its sockets what Strata does in user space — UDP, IPv4,
//! ARP, the route lookup, checksums — and both pay the same system calls per
//! datagram (one send, and receives until one returns data).

use std::io::{self, ErrorKind};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strata_link::drivers::netns;

/// How long the client waits for an echo before sending again.
const RETRY: Duration = Duration::from_millis(200);

/// A kernel UDP ping-pong between two namespaces.
pub struct KernelUdpPingPong {
    client: UdpSocket,
    payload: Vec<u8>,
    buf: Vec<u8>,
    seq: u64,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<io::Result<u64>>>,
    /// Requests whose echo never came.
    pub lost: u64,
}

/// A non-blocking UDP socket bound to `addr`, made in namespace `ns`.
/// How the kernel's sockets wait for data: spinning on non-blocking reads, as a
/// busy-polling Strata runtime spins on its packet sockets, or sleeping in the
/// kernel (with a timeout, so a lost datagram is noticed), as a blocking one waits
/// in epoll.
fn socket_in(ns: Option<&str>, addr: SocketAddrV4, busy_poll: bool) -> io::Result<UdpSocket> {
    let s = netns::within(ns, || UdpSocket::bind(addr))?;
    if busy_poll {
        s.set_nonblocking(true)?;
    } else {
        s.set_read_timeout(Some(RETRY))?;
    }
    Ok(s)
}

impl KernelUdpPingPong {
    /// Starts the echo server at `server` in namespace `server_ns` (on its own
    /// spinning thread) and a client at `client` in `client_ns`; payloads are
    /// `size` bytes (at least 8, which carry a sequence number).
    pub fn start(
        client_ns: Option<&str>,
        client: SocketAddrV4,
        server_ns: Option<&str>,
        server: SocketAddrV4,
        size: usize,
        busy_poll: bool,
    ) -> io::Result<KernelUdpPingPong> {
        let server_socket = socket_in(server_ns, server, busy_poll)?;
        let client_socket = socket_in(client_ns, client, busy_poll)?;
        client_socket.connect(server)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("kernel-udp-echo".into())
            .spawn(move || echo(&server_socket, &flag))?;
        Ok(KernelUdpPingPong {
            client: client_socket,
            payload: vec![0x5a; size.max(8)],
            buf: vec![0; 65_536],
            seq: 0,
            stop,
            server: Some(thread),
            lost: 0,
        })
    }

    /// One round trip, timed in nanoseconds.
    pub fn round_trip(&mut self) -> io::Result<u64> {
        loop {
            self.seq += 1;
            self.payload[..8].copy_from_slice(&self.seq.to_be_bytes());
            let start = Instant::now();
            self.client.send(&self.payload)?;
            loop {
                match self.client.recv(&mut self.buf) {
                    Ok(n) if n >= 8 && self.buf[..8] == self.seq.to_be_bytes() => {
                        return Ok(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    }
                    // An echo of an earlier, given-up request.
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        if start.elapsed() >= RETRY {
                            self.lost += 1;
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }

    /// `n` round trips, in nanoseconds each.
    pub fn round_trips(&mut self, n: usize) -> io::Result<Vec<u64>> {
        (0..n).map(|_| self.round_trip()).collect()
    }

    /// Stops the server's thread; returns how many datagrams it echoed.
    pub fn stop(mut self) -> io::Result<u64> {
        self.halt()
    }

    fn halt(&mut self) -> io::Result<u64> {
        self.stop.store(true, Ordering::Release);
        match self.server.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the echo thread panicked"))?,
            None => Ok(0),
        }
    }
}

impl Drop for KernelUdpPingPong {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// Echoes every datagram to its sender, spinning, until `stop`.
fn echo(socket: &UdpSocket, stop: &AtomicBool) -> io::Result<u64> {
    let mut buf = vec![0u8; 65_536];
    let mut echoed = 0;
    while !stop.load(Ordering::Relaxed) {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                socket.send_to(&buf[..n], from)?;
                echoed += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(echoed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_on_loopback_come_back_in_order_and_are_timed() {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let server = match probe.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        drop(probe);
        let client = SocketAddrV4::new(*server.ip(), 0);
        for busy_poll in [true, false] {
            let mut p =
                KernelUdpPingPong::start(None, client, None, server, 32, busy_poll).unwrap();
            let samples = p.round_trips(100).unwrap();
            assert_eq!(samples.len(), 100);
            assert!(samples.iter().all(|&s| s > 0 && s < 1_000_000_000));
            assert_eq!(p.lost, 0);
            assert_eq!(p.stop().unwrap(), 100);
        }
    }
}
