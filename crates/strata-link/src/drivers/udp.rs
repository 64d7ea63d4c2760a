//! The UDP driver: Ethernet frames carried in kernel UDP datagrams between two
//! Strata hosts, one frame per datagram (the idea of VXLAN, RFC 7348, without
//! its header: the link joins exactly two ends, so there is nothing to name).
//!
//! The socket is bound to `local` and connected to `peer`, so the kernel
//! delivers only the peer's datagrams; frames move in batches with
//! recvmmsg(2) and sendmmsg(2). While the peer is not listening yet its kernel
//! answers with port unreachable, which Linux reports on our next call as
//! ECONNREFUSED: counted and ridden out, so either host may start first.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};
use strata_core::graph::{OptionDoc, Options};
use strata_core::{GraphError, Message};

use super::mmsg::{RxBatch, TxBatch};
use super::packet::send_batched;
use super::{
    Arrival, BUFFER, DriverError, DriverStats, ETH_HEADER, Limits, NETNS, Rx, VLAN_TAG, accept,
    bad, buffer_option, netns, netns_option, size_buffers, sys, transient,
};

/// The kind name in link configs.
pub const KIND: &str = "udp";

/// The options of a "udp" link.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "local",
        doc: "the address and port to bind, e.g. \"127.0.0.1:9000\" (required)",
    },
    OptionDoc {
        name: "peer",
        doc: "the other host's address and port, e.g. \"127.0.0.1:9001\" (required)",
    },
    OptionDoc {
        name: "mtu",
        doc: "the largest Ethernet payload carried, 68 to 65000 bytes; frames up to mtu + 18 fit (default 1500)",
    },
    BUFFER,
    NETNS,
];

/// A "udp" link's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpConfig {
    /// The address to bind.
    pub local: SocketAddr,
    /// The peer's address.
    pub peer: SocketAddr,
    /// The largest Ethernet payload.
    pub mtu: usize,
    /// Socket buffer bytes.
    pub buffer: usize,
    /// The namespace to open it in.
    pub netns: Option<String>,
}

impl UdpConfig {
    /// Reads a link config's options.
    pub fn from_options(o: &Options) -> Result<UdpConfig, GraphError> {
        let local: SocketAddr = o.require("local")?;
        let peer: SocketAddr = o.require("peer")?;
        if local.is_ipv4() != peer.is_ipv4() {
            return Err(bad(
                o,
                "peer",
                "must be of the same address family as local",
            ));
        }
        if peer.port() == 0 || peer.ip().is_unspecified() {
            return Err(bad(o, "peer", "needs an address and a port"));
        }
        let mtu: usize = o.get("mtu")?.unwrap_or(1500);
        // 65000 keeps the largest frame within one IPv4 datagram's payload.
        if !(68..=65_000).contains(&mtu) {
            return Err(bad(o, "mtu", "must lie between 68 and 65000"));
        }
        Ok(UdpConfig {
            local,
            peer,
            mtu,
            buffer: buffer_option(o)?,
            netns: netns_option(o)?,
        })
    }
}

/// A UDP socket carrying frames to and from one peer.
pub struct UdpDriver {
    socket: Socket,
    local: SocketAddr,
    peer: SocketAddr,
    max: usize,
    rx: RxBatch,
    tx: TxBatch,
    stats: Arc<DriverStats>,
}

impl UdpDriver {
    /// Opens the socket a link config names.
    pub fn open(o: &Options, batch: usize) -> Result<UdpDriver, DriverError> {
        Self::with_config(&UdpConfig::from_options(o)?, batch)
    }

    /// Opens a UDP link.
    pub fn with_config(c: &UdpConfig, batch: usize) -> Result<UdpDriver, DriverError> {
        let setup = || -> io::Result<Socket> {
            let socket = Socket::new(
                Domain::for_address(c.local),
                Type::DGRAM,
                Some(Protocol::UDP),
            )?;
            socket.set_nonblocking(true)?;
            size_buffers(socket.as_raw_fd(), c.buffer);
            socket.bind(&c.local.into())?;
            socket.connect(&c.peer.into())?;
            Ok(socket)
        };
        let socket = netns::within(c.netns.as_deref(), setup)
            .map_err(|e| DriverError::setup(format!("udp link {} → {}", c.local, c.peer), e))?;
        let local = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(c.local);
        let max = c.mtu + ETH_HEADER + VLAN_TAG;
        Ok(UdpDriver {
            socket,
            local,
            peer: c.peer,
            max,
            rx: RxBatch::new(batch, max + 1, false),
            tx: TxBatch::new(batch),
            stats: Arc::default(),
        })
    }

    /// The address the socket is bound to (with the port the kernel chose when
    /// `local` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl super::Driver for UdpDriver {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn describe(&self) -> String {
        format!("udp {} → {}", self.local, self.peer)
    }

    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn max_frame(&self) -> usize {
        self.max
    }

    fn batch(&self) -> usize {
        self.rx.capacity()
    }

    fn recv(&mut self, deliver: &mut dyn FnMut(Rx<'_>, Arrival)) -> io::Result<usize> {
        // A pending ECONNREFUSED is reported (and cleared) by one call; the
        // datagrams behind it are read by the next.
        let mut n = 0;
        for _ in 0..2 {
            match self.rx.recv(self.socket.as_raw_fd()) {
                Ok(got) => {
                    n = got;
                    break;
                }
                Err(e) if transient(&e) => self.stats.rx_errors.add(1),
                Err(e) => return Err(e),
            }
        }
        if n > 0 {
            self.stats.rx_calls.add(1);
        }
        for i in 0..n {
            let f = self.rx.frame(i);
            accept(&self.stats, self.max, f.data, f.truncated, &mut |d, a| {
                deliver(Rx::Lent(d), a)
            });
        }
        Ok(n)
    }

    fn send(
        &mut self,
        queue: &mut VecDeque<Message>,
        done: &mut dyn FnMut(Message, bool),
    ) -> io::Result<()> {
        send_batched(
            &mut self.tx,
            self.socket.as_raw_fd(),
            Limits::plain(self.max),
            &self.stats,
            queue,
            done,
        )
    }

    fn stats(&self) -> Arc<DriverStats> {
        Arc::clone(&self.stats)
    }

    fn refresh(&mut self) {
        // Reading a socket option of our own socket fails only if the
        // descriptor is gone, which the next receive reports.
        if let Ok(drops) = sys::socket_drops(self.socket.as_raw_fd()) {
            self.stats.rx_kernel_drops.set(drops);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Driver;
    use super::*;

    fn link(local: SocketAddr, peer: SocketAddr) -> UdpDriver {
        let c = UdpConfig {
            local,
            peer,
            mtu: 1500,
            buffer: 1 << 20,
            netns: None,
        };
        UdpDriver::with_config(&c, 8).unwrap()
    }

    /// Two connected UDP links on loopback, with kernel-chosen ports.
    fn pair() -> (UdpDriver, UdpDriver) {
        let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b_addr = probe.local_addr().unwrap();
        drop(probe);
        let a = link("127.0.0.1:0".parse().unwrap(), b_addr);
        let b = link(b_addr, a.local_addr());
        (a, b)
    }

    fn recv_all(d: &mut UdpDriver, want: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        for _ in 0..1000 {
            d.recv(&mut |f, _| got.push(f.bytes().to_vec())).unwrap();
            if got.len() >= want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        got
    }

    #[test]
    fn frames_cross_whole_in_batches_and_bad_sizes_are_dropped_and_counted() {
        let (mut a, mut b) = pair();
        let mut frame = Message::from(vec![0xab; 1000]);
        frame.push_slice(&[1; ETH_HEADER]);
        let mut queue: VecDeque<Message> = (0..20).map(|_| frame.clone()).collect();
        queue.insert(3, Message::from(vec![0; 5]));
        queue.insert(7, Message::from(vec![0; a.max_frame() + 1]));
        let mut sent = 0;
        a.send(&mut queue, &mut |_, left| sent += usize::from(left))
            .unwrap();
        assert!(queue.is_empty());
        assert_eq!(sent, 20);
        let got = recv_all(&mut b, 20);
        assert_eq!(got.len(), 20);
        assert!(
            got.iter().all(|f| f[..] == frame.to_vec()[..]),
            "every frame arrives byte for byte"
        );
        let (sa, sb) = (a.stats().snapshot(), b.stats().snapshot());
        assert_eq!((sa.tx_frames, sa.tx_bad_size), (20, 2));
        assert!(sa.tx_calls < 20, "sent in batches: {} calls", sa.tx_calls);
        assert_eq!((sb.rx_frames, sb.rx_bytes), (20, 20 * 1014));
    }

    #[test]
    fn a_runt_and_an_oversize_datagram_from_the_peer_are_dropped_and_counted() {
        let (a, mut b) = pair();
        let raw = std::net::UdpSocket::bind(a.local_addr()).err();
        assert!(raw.is_some(), "a's port is taken by a's link");
        // Send from a's socket itself, as a misbehaving peer would.
        a.socket.send(&[0u8; 10]).unwrap();
        a.socket.send(&vec![0u8; b.max_frame() + 100]).unwrap();
        a.socket.send(&[7u8; 60]).unwrap();
        let got = recv_all(&mut b, 1);
        assert_eq!(got, vec![vec![7u8; 60]]);
        let s = b.stats().snapshot();
        assert_eq!((s.rx_runts, s.rx_oversize, s.rx_frames), (1, 1, 1));
    }

    #[test]
    fn a_peer_not_yet_listening_is_ridden_out() {
        let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let nobody = probe.local_addr().unwrap();
        drop(probe);
        let mut a = link("127.0.0.1:0".parse().unwrap(), nobody);
        let mut frame = vec![0u8; 60];
        frame[12] = 0x88;
        for _ in 0..3 {
            let mut q: VecDeque<Message> = [Message::from(frame.clone())].into();
            a.send(&mut q, &mut |_, _| {}).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
            a.recv(&mut |_, _| {}).unwrap();
        }
        let s = a.stats().snapshot();
        assert!(
            s.tx_errors + s.rx_errors >= 1,
            "the refusals are counted: {s}"
        );
    }

    #[test]
    fn frames_the_kernel_dropped_for_a_full_buffer_show_after_a_refresh() {
        let (a, _) = pair();
        let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let small_addr = probe.local_addr().unwrap();
        drop(probe);
        let c = UdpConfig {
            local: small_addr,
            peer: a.local_addr(),
            mtu: 1500,
            buffer: 4096,
            netns: None,
        };
        let mut small = UdpDriver::with_config(&c, 8).unwrap();
        for _ in 0..200 {
            a.socket.send_to(&[0u8; 1000], &small_addr.into()).unwrap();
        }
        assert_eq!(small.stats().snapshot().rx_kernel_drops, 0, "not read yet");
        small.refresh();
        let drops = small.stats().snapshot().rx_kernel_drops;
        assert!(
            drops > 100,
            "most of 200 datagrams overflowed a 4 KB buffer: {drops}"
        );
    }
}
