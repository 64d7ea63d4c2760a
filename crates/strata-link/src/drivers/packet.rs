//! The AF_PACKET driver: a host on an existing interface, beside whatever else
//! uses it (packet(7)).
//!
//! The socket is SOCK_RAW, so frames come and go whole with their Ethernet
//! header, bound to one interface for every protocol (ETH_P_ALL). Choices:
//!
//! - **Batched receive with recvmmsg(2)**, not PACKET_RX_RING: the ring saves
//!   the system call per batch but needs a shared mmap'd ring and per-frame
//!   status handshakes; recvmmsg reads up to a batch per call, costs one copy
//!   per frame (the ring costs the same copy out of the ring before the slot
//!   is returned), and shares the code path with the UDP link. A
//!   super-frame goes up in the slot memory it was read into, not copied
//!   again (half the receiver's user-space time on a default veth went to
//!   that copy and to the page faults of fresh memory for it); smaller
//!   frames are copied into the link's pool. Sending uses sendmmsg(2) with
//!   the frame's chunks gathered by the kernel.
//! - **Promiscuous mode** (PACKET_MR_PROMISC, on by default) because a Strata
//!   host has its own MAC address, which the interface's hardware filter does
//!   not know. veth delivers every frame anyway; a NIC would not.
//! - **Our own transmissions are ignored**: a packet socket also sees every
//!   frame leaving the interface (sll_pkttype PACKET_OUTGOING), ours and the
//!   kernel's. A host does not hear itself on a wire, so PACKET_IGNORE_OUTGOING
//!   (Linux 4.20) asks the kernel not to queue them, and frames marked outgoing
//!   that still arrive are dropped and counted.
//! - **Virtio-net headers** (PACKET_VNET_HDR) on every frame, both ways
//!   ([`vnet`](super::vnet)). An interface with the kernel's default
//!   offloads (a plain veth) hands a packet socket what the kernel's own
//!   stack would take: TCP super-segments of up to 64 KiB its sender never
//!   cut, and checksums left for a device to finish. The header says which
//!   is which, so the driver takes every such frame — a TCP one goes up
//!   whole, marked with its segment size, a UDP one as its datagrams — and
//!   finishes what is owed; without it they would be oversize or carry
//!   checksums that do not verify. A kernel without the option (before
//!   2.6.29) is said so once, and its super-frames are counted as oversize.
//! - **Segmentation offload** (`offload`, on by default): TCP hands down
//!   super-segments of up to 64 KiB that the kernel cuts into MSS-sized
//!   segments and checksums on the way to the device, as it does for its own
//!   TCP (GSO): one frame, one system call entry and one pass through
//!   Strata's layers for some forty segments, and the receiver gets them in
//!   a burst, as from the kernel's sender. A kernel that refuses one (EINVAL)
//!   is said so once, and from then on the driver cuts them itself.
//! - **Queueing discipline bypass** (PACKET_QDISC_BYPASS, on by default
//!   without offload): the engine has its own queues, so frames go straight
//!   to the device's transmit routine, as DPDK-like stacks do. The direct path
//!   cannot segment (`__dev_direct_xmit` drops what it would have to cut), so
//!   with offload frames take the device's queue path (`noqueue` on a veth).
//!   Turn it off to have `tc` see the traffic.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use strata_core::graph::{OptionDoc, Options};
use strata_core::{GraphError, Message};

use super::mmsg::{RxBatch, TxBatch};
use super::{
    Arrival, BUFFER, DriverError, DriverStats, ETH_HEADER, Limits, NETNS, Offloads, Rx, VLAN_TAG,
    VNET_SLOT, accept, accept_vnet, buffer_option, cut_in_software, drop_unsendable,
    fall_back_to_cutting, interface_option, netns, netns_option, refused_to_cut, size_buffers, sys,
    transient, vnet,
};

/// The kind name in link configs.
pub const KIND: &str = "packet";

/// The options of a "packet" link.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "interface",
        doc: "the interface to bind, e.g. \"veth0\" (required)",
    },
    OptionDoc {
        name: "promisc",
        doc: "put the interface in promiscuous mode while the link is open, so frames to this host's own MAC reach it (default true)",
    },
    OptionDoc {
        name: "offload",
        doc: "hand the kernel TCP super-segments to cut and checksum (GSO through PACKET_VNET_HDR); received super-segments are taken either way (default true)",
    },
    OptionDoc {
        name: "qdisc_bypass",
        doc: "send straight to the device, bypassing the kernel's queueing discipline; not with offload (default true)",
    },
    BUFFER,
    NETNS,
];

/// A "packet" link's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketConfig {
    /// The interface.
    pub interface: String,
    /// Promiscuous mode.
    pub promisc: bool,
    /// Segmentation offload: TCP super-segments for the kernel to cut.
    pub offload: bool,
    /// Queueing discipline bypass.
    pub qdisc_bypass: bool,
    /// Socket buffer bytes.
    pub buffer: usize,
    /// The namespace to open it in.
    pub netns: Option<String>,
}

impl PacketConfig {
    /// Reads a link config's options.
    pub fn from_options(o: &Options) -> Result<PacketConfig, GraphError> {
        Ok(PacketConfig {
            interface: interface_option(o, "interface")?,
            promisc: o.get("promisc")?.unwrap_or(true),
            offload: o.get("offload")?.unwrap_or(true),
            qdisc_bypass: o.get("qdisc_bypass")?.unwrap_or(true),
            buffer: buffer_option(o)?,
            netns: netns_option(o)?,
        })
    }

    /// Settings for `interface` with every default.
    pub fn new(interface: &str) -> PacketConfig {
        PacketConfig {
            interface: interface.into(),
            promisc: true,
            offload: true,
            qdisc_bypass: true,
            buffer: super::DEFAULT_BUFFER,
            netns: None,
        }
    }
}

/// Frames of at least this many bytes are handed up in the memory they were
/// read into rather than copied: a super-frame's copy would cost as much
/// as the kernel's, while small frames are copied into the link's shared
/// pool so that a frame held long (out of order, waiting for a gap) never
/// pins more than twice its size.
const OWN_FROM: usize = VNET_SLOT / 2;

/// An AF_PACKET socket bound to one interface.
pub struct PacketDriver {
    fd: OwnedFd,
    interface: String,
    max: usize,
    /// Frames go and come behind a virtio-net header.
    vnet: bool,
    /// TCP super-segments go down (the link's segmentation offload).
    segmenting: bool,
    /// The kernel refused to cut one: the driver cuts them itself.
    cutting: bool,
    rx: RxBatch,
    tx: TxBatch,
    /// Where a UDP super-frame's datagrams are cut.
    scratch: Vec<u8>,
    stats: Arc<DriverStats>,
}

impl PacketDriver {
    /// Opens the socket a link config names.
    pub fn open(o: &Options, batch: usize) -> Result<PacketDriver, DriverError> {
        Self::with_config(&PacketConfig::from_options(o)?, batch)
    }

    /// Opens a packet socket on an interface.
    pub fn with_config(c: &PacketConfig, batch: usize) -> Result<PacketDriver, DriverError> {
        let setup = || -> io::Result<(OwnedFd, usize, Result<(), io::Error>)> {
            let index = sys::interface_index(&c.interface)?;
            let mtu = sys::interface_mtu(&c.interface)?;
            let fd = sys::packet_socket()?;
            let raw = fd.as_raw_fd();
            size_buffers(raw, c.buffer);
            // Older kernels lack the option; their outgoing frames are then
            // recognised by packet type on receive.
            let _ = sys::set_int_option(raw, libc::SOL_PACKET, sys::PACKET_IGNORE_OUTGOING, 1);
            let vnet = sys::set_int_option(raw, libc::SOL_PACKET, sys::PACKET_VNET_HDR, 1);
            // Only plain frames may take the direct path (see the module's
            // docs), and they all are without segmentation offload.
            if c.qdisc_bypass && !(c.offload && vnet.is_ok()) {
                sys::set_int_option(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)?;
            }
            sys::packet_bind(raw, index)?;
            if c.promisc {
                sys::packet_promiscuous(raw, index)?;
            }
            Ok((fd, mtu, vnet))
        };
        let (fd, mtu, vnet) = netns::within(c.netns.as_deref(), setup)
            .map_err(|e| DriverError::setup(format!("packet socket on '{}'", c.interface), e))?;
        let stats = Arc::new(DriverStats::default());
        let max = mtu + ETH_HEADER + VLAN_TAG;
        let segmenting = c.offload && vnet.is_ok();
        let (rx, tx) = match &vnet {
            Ok(()) => (
                RxBatch::new(batch, VNET_SLOT, true),
                TxBatch::with_vnet(batch),
            ),
            // One byte more than the largest frame, so a longer one shows as
            // truncated rather than fitting exactly.
            Err(_) => (RxBatch::new(batch, max + 1, true), TxBatch::new(batch)),
        };
        let asked = if c.offload { Offloads::TX_TSO4 } else { 0 };
        let kernel_side =
            Offloads::VNET | Offloads::RX_CSUM | Offloads::RX_TSO4 | Offloads::RX_USO4;
        stats.set_offloads(match &vnet {
            Ok(()) => Offloads::new(kernel_side | asked, 0),
            Err(e) => {
                tracing::warn!(
                    interface = %c.interface,
                    error = %e,
                    "the kernel refused PACKET_VNET_HDR: its super-frames will be dropped as oversize and its partial checksums left unfinished"
                );
                Offloads::new(0, kernel_side | asked)
            }
        });
        Ok(PacketDriver {
            fd,
            interface: c.interface.clone(),
            max,
            vnet: vnet.is_ok(),
            segmenting,
            cutting: false,
            rx,
            tx,
            scratch: Vec::new(),
            stats,
        })
    }
}

impl super::Driver for PacketDriver {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn describe(&self) -> String {
        format!("packet {}", self.interface)
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn max_frame(&self) -> usize {
        self.max
    }

    fn segmentation(&self) -> usize {
        if self.segmenting {
            crate::offload::SEGMENTED_MAX
        } else {
            0
        }
    }

    fn batch(&self) -> usize {
        self.rx.capacity()
    }

    fn recv(&mut self, deliver: &mut dyn FnMut(Rx<'_>, Arrival)) -> io::Result<usize> {
        let n = loop {
            match self.rx.recv(self.fd.as_raw_fd()) {
                Ok(n) => break n,
                // The kernel could not describe a frame in a virtio-net
                // header (a GSO type the header has no name for) and dropped
                // it: counted, and the frames behind it are read.
                Err(e) if self.vnet && e.raw_os_error() == Some(libc::EINVAL) => {
                    self.stats.refuse(vnet::Refused::Unsupported);
                }
                Err(e) if transient(&e) => {
                    // ENETDOWN and the like are reported once, then cleared.
                    self.stats.rx_errors.add(1);
                    return Ok(0);
                }
                Err(e) => return Err(e),
            }
        };
        if n > 0 {
            self.stats.rx_calls.add(1);
        }
        for i in 0..n {
            let f = self.rx.frame(i);
            if f.pkttype == Some(libc::PACKET_OUTGOING) {
                self.stats.rx_outgoing.add(1);
                continue;
            }
            if !self.vnet {
                accept(&self.stats, self.max, f.data, f.truncated, &mut |d, a| {
                    deliver(Rx::Lent(d), a)
                });
                continue;
            }
            // A large frame (a super-frame) leaves with the slot's memory;
            // smaller ones, and the datagrams cut from a UDP super-frame
            // (which live in `scratch`), are lent for the receiver to copy.
            let (slot, whole) = (f.data.as_ptr() as usize, f.data.len());
            let mut owned = None;
            let scratch = &mut self.scratch;
            accept_vnet(
                &self.stats,
                self.max,
                f.data,
                f.truncated,
                scratch,
                &mut |d, a| {
                    let at = (d.as_ptr() as usize).wrapping_sub(slot);
                    if d.len() >= OWN_FROM && at + d.len() <= whole {
                        owned = Some((at..at + d.len(), a));
                    } else {
                        deliver(Rx::Lent(d), a);
                    }
                },
            );
            if let Some((range, arrival)) = owned {
                deliver(Rx::Owned(self.rx.take(i, range)), arrival);
            }
        }
        Ok(n)
    }

    fn send(
        &mut self,
        queue: &mut VecDeque<Message>,
        done: &mut dyn FnMut(Message, bool),
    ) -> io::Result<()> {
        let limits = Limits {
            max: self.max,
            segmented: ETH_HEADER + self.segmentation(),
        };
        loop {
            if self.cutting {
                cut_in_software(queue);
            }
            let fd = self.fd.as_raw_fd();
            match send_batched(&mut self.tx, fd, limits, &self.stats, queue, done) {
                Err(e) if !self.cutting && refused_to_cut(&e, queue.front()) => {
                    fall_back_to_cutting(&self.stats, &self.interface, &e);
                    self.cutting = true;
                }
                result => return result,
            }
        }
    }

    fn stats(&self) -> Arc<DriverStats> {
        Arc::clone(&self.stats)
    }

    fn refresh(&mut self) {
        // Reading a socket option of our own socket fails only if the
        // descriptor is gone, which the next receive reports.
        if let Ok(drops) = sys::socket_drops(self.fd.as_raw_fd()) {
            self.stats.rx_kernel_drops.set(drops);
        }
    }
}

/// Sends `queue` in batches on a socket that knows its destination (a bound
/// packet socket, a connected UDP socket), shared by both drivers.
pub(super) fn send_batched(
    tx: &mut TxBatch,
    fd: RawFd,
    limits: Limits,
    stats: &DriverStats,
    queue: &mut VecDeque<Message>,
    done: &mut dyn FnMut(Message, bool),
) -> io::Result<()> {
    loop {
        drop_unsendable(stats, limits, queue, done);
        // Only frames of a good size go into one call: the first bad one ends
        // the batch, and is dropped at the top of the next round.
        let good = queue
            .iter()
            .take(tx.capacity())
            .take_while(|f| limits.fits(f))
            .count();
        if good == 0 {
            return Ok(());
        }
        let result = tx.send(fd, queue.iter().take(good));
        stats.tx_calls.add(1);
        match result {
            Ok(0) => {
                stats.tx_blocked.add(1);
                return Ok(());
            }
            Ok(n) => {
                for f in queue.drain(..n) {
                    stats.tx_frames.add(1);
                    stats.tx_bytes.add(f.len() as u64);
                    stats.tx_super.add(u64::from(f.segment_size() > 0));
                    done(f, true);
                }
            }
            Err(e) if transient(&e) => {
                stats.tx_errors.add(1);
                if let Some(f) = queue.pop_front() {
                    done(f, false);
                }
            }
            Err(e) => return Err(e),
        }
    }
}
