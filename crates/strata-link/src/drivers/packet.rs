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
//!   is returned), and shares the code path with the UDP link. Sending uses
//!   sendmmsg(2) with the frame's chunks gathered by the kernel.
//! - **Promiscuous mode** (PACKET_MR_PROMISC, on by default) because a Strata
//!   host has its own MAC address, which the interface's hardware filter does
//!   not know. veth delivers every frame anyway; a NIC would not.
//! - **Our own transmissions are ignored**: a packet socket also sees every
//!   frame leaving the interface (sll_pkttype PACKET_OUTGOING), ours and the
//!   kernel's. A host does not hear itself on a wire, so PACKET_IGNORE_OUTGOING
//!   (Linux 4.20) asks the kernel not to queue them, and frames marked outgoing
//!   that still arrive are dropped and counted.
//! - **Segmentation offload** (PACKET_VNET_HDR, on by default): every frame
//!   goes and comes behind a virtio-net header ([`vnet`](super::vnet)). TCP
//!   hands down super-segments of up to 64 KiB that the kernel cuts into
//!   MSS-sized segments and checksums on the way to the device, as it does for
//!   its own TCP (GSO): one frame, one system call entry and one pass through
//!   Strata's layers for some forty segments, and the receiver gets them in a
//!   burst, as from the kernel's sender. Received frames whose checksum the
//!   kernel left to finish (a veth peer with checksum offload on) are finished.
//! - **Queueing discipline bypass** (PACKET_QDISC_BYPASS, on by default
//!   without offload): the engine has its own queues, so frames go straight
//!   to the device's transmit routine, as DPDK-like stacks do. The direct path
//!   cannot segment (`__dev_direct_xmit` drops what it would have to cut), so
//!   with offload frames take the device's queue path (`noqueue` on a veth).
//!   Turn it off to have `tc` see the traffic.
//!
//! Offloads matter without `offload`: a kernel that hands a frame to a device
//! with checksum offload leaves the checksum for the device to fill, and a
//! packet socket on the receiving veth then sees it unfilled. Turn transmit
//! checksum offload off on interfaces a Strata host shares with the kernel
//! (`ethtool -K DEV tx off`, as `scripts/netns` does).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use strata_core::graph::{OptionDoc, Options};
use strata_core::{GraphError, Message};

use super::mmsg::{RxBatch, TxBatch};
use super::{
    BUFFER, DriverError, DriverStats, ETH_HEADER, Limits, NETNS, VLAN_TAG, accept, buffer_option,
    drop_unsendable, interface_option, netns, netns_option, size_buffers, sys, transient, vnet,
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
        doc: "let the kernel cut TCP super-segments and finish checksums (PACKET_VNET_HDR) (default true)",
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
    /// Segmentation and checksum offload through virtio-net headers.
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

/// An AF_PACKET socket bound to one interface.
pub struct PacketDriver {
    fd: OwnedFd,
    interface: String,
    max: usize,
    /// Frames go and come behind a virtio-net header.
    vnet: bool,
    rx: RxBatch,
    tx: TxBatch,
    stats: Arc<DriverStats>,
}

impl PacketDriver {
    /// Opens the socket a link config names.
    pub fn open(o: &Options, batch: usize) -> Result<PacketDriver, DriverError> {
        Self::with_config(&PacketConfig::from_options(o)?, batch)
    }

    /// Opens a packet socket on an interface.
    pub fn with_config(c: &PacketConfig, batch: usize) -> Result<PacketDriver, DriverError> {
        let setup = || -> io::Result<(OwnedFd, usize)> {
            let index = sys::interface_index(&c.interface)?;
            let mtu = sys::interface_mtu(&c.interface)?;
            let fd = sys::packet_socket()?;
            let raw = fd.as_raw_fd();
            size_buffers(raw, c.buffer);
            // Older kernels lack the option; their outgoing frames are then
            // recognised by packet type on receive.
            let _ = sys::set_int_option(raw, libc::SOL_PACKET, sys::PACKET_IGNORE_OUTGOING, 1);
            if c.offload {
                sys::set_int_option(raw, libc::SOL_PACKET, sys::PACKET_VNET_HDR, 1)?;
            } else if c.qdisc_bypass {
                sys::set_int_option(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)?;
            }
            sys::packet_bind(raw, index)?;
            if c.promisc {
                sys::packet_promiscuous(raw, index)?;
            }
            Ok((fd, mtu))
        };
        let (fd, mtu) = netns::within(c.netns.as_deref(), setup)
            .map_err(|e| DriverError::setup(format!("packet socket on '{}'", c.interface), e))?;
        let max = mtu + ETH_HEADER + VLAN_TAG;
        let (prefix, tx) = if c.offload {
            (vnet::LEN, TxBatch::with_vnet(batch))
        } else {
            (0, TxBatch::new(batch))
        };
        Ok(PacketDriver {
            fd,
            interface: c.interface.clone(),
            max,
            vnet: c.offload,
            // One byte more than the largest frame, so a longer one shows as
            // truncated rather than fitting exactly.
            rx: RxBatch::new(batch, prefix + max + 1, true),
            tx,
            stats: Arc::default(),
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
        if self.vnet {
            crate::offload::SEGMENTED_MAX
        } else {
            0
        }
    }

    fn batch(&self) -> usize {
        self.rx.capacity()
    }

    fn recv(&mut self, deliver: &mut dyn FnMut(&[u8])) -> io::Result<usize> {
        let n = match self.rx.recv(self.fd.as_raw_fd()) {
            Ok(n) => n,
            Err(e) if transient(&e) => {
                // ENETDOWN and the like are reported once, then cleared.
                self.stats.rx_errors.add(1);
                return Ok(0);
            }
            Err(e) => return Err(e),
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
            let data = if self.vnet {
                match vnet::receive(f.data) {
                    Some(d) => d,
                    None => {
                        self.stats.rx_runts.add(1);
                        continue;
                    }
                }
            } else {
                f.data
            };
            accept(&self.stats, self.max, data, f.truncated, deliver);
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
        send_batched(
            &mut self.tx,
            self.fd.as_raw_fd(),
            limits,
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
