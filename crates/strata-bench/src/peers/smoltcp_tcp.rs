//! smoltcp's TCP over an in-memory loopback device: the peer for Strata's
//! in-memory bulk transfer (`strata bench tcp-peers`).
//!
//! One smoltcp interface carries a client and a server socket, as in
//! smoltcp's own `loopback_benchmark` example: each segment crosses TCP, IPv4
//! and Ethernet once going out and once coming in, as a segment between
//! Strata's two hosts does. What differs from that example makes the
//! comparison fair and puts smoltcp at its best:
//!
//! - the device's MTU is the one Strata's in-memory link is given: 1500,
//!   Ethernet's, unless the benchmark is asked for another (smoltcp's
//!   `Loopback` announces 65535, which carries forty times the data per
//!   segment);
//! - checksums are computed and verified in software, as Strata does
//!   (`Loopback` skips them);
//! - frames live in buffers the device recycles, so moving one allocates
//!   nothing (`Loopback` allocates and zero-fills a vector per frame);
//! - timestamps are on, so both stacks carry 1448 bytes per segment;
//! - it is driven by its leanest calls: `poll_egress` until nothing is left
//!   to send, then `poll_ingress_single` until nothing is left to receive,
//!   with the application reading after each ingress pass, so the receiver
//!   acknowledges a whole pass at once.
//!
//! The application moves no bytes itself: the client commits send-buffer
//! space without writing it and the server dequeues without reading, as in
//! the example (and as Strata's source and sink do, see `tcp_bulk`).

use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::{Duration, Instant as Wall};

use anyhow::{Result, bail};
use smoltcp::iface::{
    Config, Interface, PollIngressSingleResult, PollResult, SocketHandle, SocketSet,
};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, IpAddress, IpCidr};

use crate::cpu::thread_cpu;
use crate::throughput::Batch;

/// The address of the loopback interface.
pub(crate) const ADDR: IpAddress = IpAddress::v4(198, 18, 0, 1);
const PORT: u16 = 5001;

/// Ethernet header bytes in front of the MTU.
const ETH_HEADER: usize = 14;

/// A loopback device with a given MTU whose frame buffers are reused.
///
/// Frames read go to `returned`, frames written come from `spare`, and the
/// two swap when `spare` runs dry: two pools because a receive hands out a
/// read and a write token at once, and each needs its own.
pub struct MemLoopback {
    /// Largest IP packet of one frame.
    mtu: usize,
    /// Longest frame sent so far.
    longest: usize,
    queue: VecDeque<(Box<[u8]>, usize)>,
    spare: Vec<Box<[u8]>>,
    returned: Vec<Box<[u8]>>,
}

/// A received frame; its buffer is returned once read.
pub struct RxToken<'a> {
    frame: (Box<[u8]>, usize),
    returned: &'a mut Vec<Box<[u8]>>,
}

/// Room for one frame at the back of the queue.
pub struct TxToken<'a> {
    frame_len: usize,
    longest: &'a mut usize,
    queue: &'a mut VecDeque<(Box<[u8]>, usize)>,
    spare: &'a mut Vec<Box<[u8]>>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let (buf, len) = self.frame;
        let r = f(&buf[..len]);
        self.returned.push(buf);
        r
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut buf = match self.spare.pop() {
            Some(b) if b.len() >= len => b,
            _ => vec![0; len.max(self.frame_len)].into_boxed_slice(),
        };
        let r = f(&mut buf[..len]);
        *self.longest = (*self.longest).max(len);
        self.queue.push_back((buf, len));
        r
    }
}

impl MemLoopback {
    /// An empty loopback carrying IP packets of up to `mtu` bytes.
    pub fn new(mtu: usize) -> MemLoopback {
        MemLoopback {
            mtu,
            longest: 0,
            queue: VecDeque::new(),
            spare: Vec::new(),
            returned: Vec::new(),
        }
    }
}

impl Device for MemLoopback {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu + ETH_HEADER;
        caps
    }

    fn receive(&mut self, _: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        let frame = self.queue.pop_front()?;
        Some((
            RxToken {
                frame,
                returned: &mut self.returned,
            },
            TxToken {
                frame_len: self.mtu + ETH_HEADER,
                longest: &mut self.longest,
                queue: &mut self.queue,
                spare: &mut self.spare,
            },
        ))
    }

    fn transmit(&mut self, _: Instant) -> Option<TxToken<'_>> {
        if self.spare.is_empty() {
            std::mem::swap(&mut self.spare, &mut self.returned);
        }
        Some(TxToken {
            frame_len: self.mtu + ETH_HEADER,
            longest: &mut self.longest,
            queue: &mut self.queue,
            spare: &mut self.spare,
        })
    }
}

/// Milliseconds since the first call: smoltcp's TSval clock (a plain function
/// pointer, so the epoch is a process-wide static).
pub(crate) fn tsval() -> u32 {
    static EPOCH: OnceLock<Wall> = OnceLock::new();
    EPOCH.get_or_init(Wall::now).elapsed().as_millis() as u32
}

/// An interface with address 198.18.0.1/24 on a [`MemLoopback`] of IP MTU
/// `mtu`.
pub(crate) fn loopback(mtu: usize) -> (Interface, MemLoopback) {
    let mut device = MemLoopback::new(mtu);
    let config = Config::new(EthernetAddress([0x02, 0, 0, 0, 0, 1]).into());
    let mut iface = Interface::new(config, &mut device, Instant::ZERO);
    iface.update_ip_addrs(|addrs| {
        addrs.push(IpCidr::new(ADDR, 24)).expect("one address fits");
    });
    (iface, device)
}

/// smoltcp's leanest loop: everything due goes out, then everything queued
/// comes in.
pub(crate) fn egress_then_ingress(
    iface: &mut Interface,
    device: &mut MemLoopback,
    sockets: &mut SocketSet<'static>,
    now: Instant,
) {
    while iface.poll_egress(now, device, sockets) == PollResult::SocketStateChanged {}
    while iface.poll_ingress_single(now, device, sockets) != PollIngressSingleResult::None {}
}

/// A socket with `buffer`-byte rings, timestamps on, and congestion control
/// `cc`.
pub(crate) fn socket(buffer: usize, cc: tcp::CongestionControl) -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; buffer]),
        tcp::SocketBuffer::new(vec![0; buffer]),
    );
    s.set_tsval_generator(Some(tsval));
    s.set_congestion_control(cc);
    s
}

/// A smoltcp client and server on one interface over [`MemLoopback`],
/// connected.
pub struct SmolTcpBulk {
    iface: Interface,
    device: MemLoopback,
    sockets: SocketSet<'static>,
    client: SocketHandle,
    server: SocketHandle,
    epoch: Wall,
    credit: usize,
    received: u64,
}

impl SmolTcpBulk {
    /// Both sockets with `buffer`-byte send and receive buffers, over a
    /// loopback with an `mtu`-byte MTU, connected, without congestion
    /// control (smoltcp's default when built without its controllers).
    pub fn new(buffer: usize, mtu: usize) -> Result<SmolTcpBulk> {
        SmolTcpBulk::with_congestion(buffer, mtu, tcp::CongestionControl::None)
    }

    /// The same with congestion control `cc`.
    pub fn with_congestion(
        buffer: usize,
        mtu: usize,
        cc: tcp::CongestionControl,
    ) -> Result<SmolTcpBulk> {
        let (iface, device) = loopback(mtu);
        let mut sockets = SocketSet::new(Vec::new());
        let mut server = socket(buffer, cc);
        server.listen(PORT)?;
        let server = sockets.add(server);
        let client = sockets.add(socket(buffer, cc));
        let mut bulk = SmolTcpBulk {
            iface,
            device,
            sockets,
            client,
            server,
            epoch: Wall::now(),
            credit: 0,
            received: 0,
        };
        let cx = bulk.iface.context();
        bulk.sockets
            .get_mut::<tcp::Socket>(client)
            .connect(cx, (ADDR, PORT), 49152)?;
        let deadline = Wall::now() + Duration::from_secs(5);
        while !bulk.sockets.get::<tcp::Socket>(client).may_send() {
            bulk.turn();
            if Wall::now() > deadline {
                bail!("smoltcp's handshake did not complete");
            }
        }
        Ok(bulk)
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.epoch.elapsed().as_micros() as i64)
    }

    /// One turn: the application writes, everything due goes out, everything
    /// queued comes in, the application reads.
    fn turn(&mut self) {
        let now = self.now();
        let client = self.sockets.get_mut::<tcp::Socket>(self.client);
        if self.credit > 0 && client.can_send() {
            let credit = self.credit;
            // Commits the space without writing it (see the module docs).
            let n = client
                .send(|buf| {
                    let n = buf.len().min(credit);
                    (n, n)
                })
                .unwrap_or(0);
            self.credit -= n;
        }
        egress_then_ingress(&mut self.iface, &mut self.device, &mut self.sockets, now);
        let server = self.sockets.get_mut::<tcp::Socket>(self.server);
        while server.can_recv() {
            let n = server.recv(|buf| (buf.len(), buf.len())).unwrap_or(0);
            self.received += n as u64;
        }
    }

    /// Moves `bytes` from the client to the server; times it.
    pub fn transfer(&mut self, bytes: u64) -> Result<Batch> {
        let target = self.received + bytes;
        self.credit += usize::try_from(bytes)?;
        let (wall0, cpu0) = (Wall::now(), thread_cpu());
        let limit = wall0 + Duration::from_secs(60);
        while self.received < target {
            self.turn();
            if Wall::now() > limit {
                bail!("smoltcp's transfer stalled");
            }
        }
        Ok(Batch {
            bytes,
            wall: wall0.elapsed(),
            cpu: thread_cpu() - cpu0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoltcp_moves_every_byte_over_the_1500_byte_loopback() {
        let mut bulk = SmolTcpBulk::new(256 * 1024, 1500).unwrap();
        for _ in 0..3 {
            assert_eq!(bulk.transfer(4 << 20).unwrap().bytes, 4 << 20);
        }
        assert!(
            bulk.device.spare.len() + bulk.device.returned.len() < 1024,
            "frame buffers are reused"
        );
        assert_eq!(bulk.device.longest, 1500 + ETH_HEADER, "full-sized frames");
    }

    #[test]
    fn a_larger_mtu_carries_larger_frames() {
        let mut bulk = SmolTcpBulk::new(256 * 1024, 9000).unwrap();
        assert_eq!(bulk.transfer(4 << 20).unwrap().bytes, 4 << 20);
        assert_eq!(bulk.device.longest, 9000 + ETH_HEADER);
    }
}
