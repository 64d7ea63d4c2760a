//! The TAP driver: a host on a TAP device, the kernel on the other side.
//!
//! The device is opened through `/dev/net/tun` with IFF_TAP | IFF_NO_PI
//! (Documentation/networking/tuntap.rst): every read(2) returns one whole
//! Ethernet frame and every write(2) sends one, with no packet-information
//! prefix. A device that exists (`ip tuntap add mode tap NAME`, persistent) is
//! attached; one that does not is created and lives as long as the driver.
//!
//! A character device has no recvmmsg(2), so a batch is a loop of reads until
//! the kernel has nothing more or the batch is done; each frame is written with
//! one writev(2) gathering the frame's chunks.
//!
//! **Offloads** (`vnet`, on by default): the device is opened with
//! IFF_VNET_HDR, so every frame comes and goes behind a virtio-net header
//! ([`vnet`](super::vnet)), and TUNSETOFFLOAD tells the kernel what Strata
//! takes: checksums to finish (`TUN_F_CSUM`), TCP super-segments
//! (`TUN_F_TSO4`, with ECN) and UDP super-datagrams (`TUN_F_USO4`, Linux
//! 6.2, only together with `TUN_F_USO6`). The kernel then hands over its own
//! TCP's super-segments whole, as to a VM's virtio-net device, and takes
//! Strata's to cut (the device's other side is a network stack that takes
//! them as GRO packets). A kernel that refuses a set of offloads is asked
//! for fewer (USO goes first, then TSO, then checksums), and says so once
//! (logged, and in the driver's counters); one that refuses a super-segment
//! at run time gets them cut in software from then on. Without offloads the
//! kernel hands over frames with their checksums complete, as it must for a
//! device that claims none.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use strata_core::graph::{OptionDoc, Options};
use strata_core::{GraphError, Message};

use super::sys::tun_f;
use super::{
    Arrival, DriverError, DriverStats, ETH_HEADER, Limits, NETNS, Offloads, Rx, VLAN_TAG,
    VNET_SLOT, accept, accept_vnet, cut_in_software, drop_unsendable, fall_back_to_cutting,
    interface_option, netns, netns_option, refused_to_cut, sys, transient, vnet,
};

/// The kind name in link configs.
pub const KIND: &str = "tap";

/// The clone device of TUN/TAP.
const CLONE_DEVICE: &str = "/dev/net/tun";

/// Frames written with one writev(2) of at most this many pieces (the
/// virtio-net header one of them); a frame in more is gathered first.
const MAX_PIECES: usize = 17;

/// A read buffer that holds any frame the kernel can hand a TAP (an skb is at
/// most 64 KiB) behind its header, so a frame is never cut by the read
/// itself: oversize frames are recognised and counted.
const READ_BUFFER: usize = VNET_SLOT;

/// The offloads asked of the kernel, most first. A kernel that does not know
/// one refuses the whole set (EINVAL), so each later set drops what older
/// kernels lack: USO (6.2) first, then TSO, then checksums.
const OFFERS: [u32; 4] = [
    tun_f::CSUM | tun_f::TSO4 | tun_f::TSO_ECN | tun_f::USO4 | tun_f::USO6,
    tun_f::CSUM | tun_f::TSO4 | tun_f::TSO_ECN,
    tun_f::CSUM,
    0,
];

/// The options of a "tap" link.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "name",
        doc: "the TAP device to attach, created when it does not exist, e.g. \"strata0\" (required, at most 15 bytes)",
    },
    OptionDoc {
        name: "up",
        doc: "bring the device up when opened (default true)",
    },
    OptionDoc {
        name: "vnet",
        doc: "frames behind virtio-net headers with the kernel's offloads (IFF_VNET_HDR, TUNSETOFFLOAD): its TCP super-segments and unfinished checksums come in, Strata's super-segments go out (default true)",
    },
    NETNS,
];

/// A "tap" link's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapConfig {
    /// The device name.
    pub name: String,
    /// Bring it up.
    pub up: bool,
    /// Virtio-net headers and offloads.
    pub vnet: bool,
    /// The namespace to open it in.
    pub netns: Option<String>,
}

impl TapConfig {
    /// Reads a link config's options.
    pub fn from_options(o: &Options) -> Result<TapConfig, GraphError> {
        Ok(TapConfig {
            name: interface_option(o, "name")?,
            up: o.get("up")?.unwrap_or(true),
            vnet: o.get("vnet")?.unwrap_or(true),
            netns: netns_option(o)?,
        })
    }

    /// Settings for the device `name` with every default.
    pub fn new(name: &str) -> TapConfig {
        TapConfig {
            name: name.into(),
            up: true,
            vnet: true,
            netns: None,
        }
    }
}

/// A TAP device.
pub struct TapDriver {
    file: File,
    name: String,
    max: usize,
    batch: usize,
    /// Frames go and come behind a virtio-net header.
    vnet: bool,
    /// The kernel refused to cut a super-segment: the driver cuts them.
    cutting: bool,
    buf: Vec<u8>,
    /// Where a UDP super-frame's datagrams are cut.
    scratch: Vec<u8>,
    stats: Arc<DriverStats>,
}

/// Asks `set` for each of [`OFFERS`] in turn until one is taken. Returns the
/// set taken, or the last error when even none was.
fn negotiate(mut set: impl FnMut(u32) -> io::Result<()>) -> io::Result<u32> {
    let mut last = None;
    for offer in OFFERS {
        match set(offer) {
            Ok(()) => return Ok(offer),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no offload set to offer")))
}

/// The offloads in use with TUN_F_* `taken`, and those refused of the
/// first offer.
fn offloads(taken: u32) -> Offloads {
    let of = |flags: u32| {
        let mut bits = Offloads::VNET | Offloads::TX_TSO4;
        for (f, b) in [
            (tun_f::CSUM, Offloads::RX_CSUM),
            (tun_f::TSO4, Offloads::RX_TSO4),
            (tun_f::USO4, Offloads::RX_USO4),
        ] {
            if flags & f != 0 {
                bits |= b;
            }
        }
        bits
    };
    Offloads::new(of(taken), of(OFFERS[0]) & !of(taken))
}

/// How long opening a TAP waits for the kernel to start its transmit queue.
const RUNNING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl TapDriver {
    /// Opens the TAP device a link config names.
    pub fn open(o: &Options, batch: usize) -> Result<TapDriver, DriverError> {
        Self::with_config(&TapConfig::from_options(o)?, batch)
    }

    /// Opens a TAP device.
    pub fn with_config(c: &TapConfig, batch: usize) -> Result<TapDriver, DriverError> {
        let setup = || -> io::Result<(File, String, usize, Option<u32>)> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(CLONE_DEVICE)?;
            let fd = file.as_raw_fd();
            let name = sys::tun_set_tap(fd, &c.name, c.vnet)?;
            // The device's offloads outlive this descriptor (a persistent
            // TAP keeps them), so a reader without headers clears them.
            let taken = if c.vnet {
                sys::tun_set_vnet_header_len(fd, vnet::LEN)?;
                Some(negotiate(|flags| sys::tun_set_offload(fd, flags))?)
            } else {
                sys::tun_set_offload(fd, 0)?;
                None
            };
            if c.up {
                sys::interface_up(&name)?;
            }
            if !sys::interface_wait_running(&name, RUNNING_WAIT)? {
                tracing::debug!(tap = %name, "not running yet: the kernel may drop what it sends first");
            }
            let mtu = sys::interface_mtu(&name)?;
            Ok((file, name, mtu, taken))
        };
        let (file, name, mtu, taken) = netns::within(c.netns.as_deref(), setup)
            .map_err(|e| DriverError::setup(format!("tap '{}'", c.name), e))?;
        let stats = Arc::new(DriverStats::default());
        if let Some(taken) = taken {
            let o = offloads(taken);
            if o.refused(u8::MAX) {
                tracing::warn!(tap = %name, "the kernel refused some offloads: {o}");
            }
            stats.set_offloads(o);
        }
        Ok(TapDriver {
            file,
            name,
            max: mtu + ETH_HEADER + VLAN_TAG,
            batch: batch.max(1),
            vnet: c.vnet,
            cutting: false,
            buf: vec![0; READ_BUFFER],
            scratch: Vec::new(),
            stats,
        })
    }

    fn write_frame(&mut self, frame: &Message) -> io::Result<usize> {
        // A frame is only sent when it fits the link (`Limits::fits`), which
        // a super-segment does when it has a header.
        let (header, prefix) = if self.vnet {
            (vnet::header(frame).unwrap_or([0; vnet::LEN]), vnet::LEN)
        } else {
            ([0; vnet::LEN], 0)
        };
        if frame.chunk_count() + 1 > MAX_PIECES {
            let mut whole = header[..prefix].to_vec();
            whole.extend_from_slice(&frame.to_vec());
            return Ok(self.file.write(&whole)?.saturating_sub(prefix));
        }
        let mut pieces = [IoSlice::new(&[]); MAX_PIECES];
        pieces[0] = IoSlice::new(&header[..prefix]);
        for (piece, chunk) in pieces[1..].iter_mut().zip(frame.chunks()) {
            *piece = IoSlice::new(chunk);
        }
        let n = self
            .file
            .write_vectored(&pieces[..frame.chunk_count() + 1])?;
        Ok(n.saturating_sub(prefix))
    }
}

impl super::Driver for TapDriver {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn describe(&self) -> String {
        format!("tap {}", self.name)
    }

    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
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
        self.batch
    }

    fn recv(&mut self, deliver: &mut dyn FnMut(Rx<'_>, Arrival)) -> io::Result<usize> {
        let mut taken = 0;
        while taken < self.batch {
            match self.file.read(&mut self.buf) {
                Ok(n) => {
                    taken += 1;
                    self.stats.rx_calls.add(1);
                    // A read fills at most the buffer, which is one byte
                    // longer than any frame the kernel may hand a TAP.
                    let truncated = n == self.buf.len();
                    let frame = &mut self.buf[..n];
                    if self.vnet {
                        let (stats, scratch) = (&self.stats, &mut self.scratch);
                        accept_vnet(stats, self.max, frame, truncated, scratch, &mut |d, a| {
                            deliver(Rx::Lent(d), a)
                        });
                    } else {
                        accept(&self.stats, self.max, frame, truncated, &mut |d, a| {
                            deliver(Rx::Lent(d), a)
                        });
                    }
                }
                // The kernel could not describe a frame in a virtio-net
                // header and dropped it: counted, and the next one is read.
                Err(e) if self.vnet && e.raw_os_error() == Some(libc::EINVAL) => {
                    taken += 1;
                    self.stats.refuse(vnet::Refused::Unsupported);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if transient(&e) => {
                    self.stats.rx_errors.add(1);
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(taken)
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
            drop_unsendable(&self.stats, limits, queue, done);
            let Some(frame) = queue.front() else {
                return Ok(());
            };
            let len = frame.len();
            let result = self.write_frame(frame);
            self.stats.tx_calls.add(1);
            match result {
                Ok(n) if n == len => {
                    self.stats.tx_frames.add(1);
                    self.stats.tx_bytes.add(len as u64);
                    let segmented = frame.segment_size() > 0;
                    self.stats.tx_super.add(u64::from(segmented));
                    if let Some(f) = queue.pop_front() {
                        done(f, true);
                    }
                }
                Ok(_) => {
                    // A TAP takes a frame whole or not at all; a short count
                    // would mean a cut frame left, so it is counted as failed.
                    self.stats.tx_errors.add(1);
                    if let Some(f) = queue.pop_front() {
                        done(f, false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stats.tx_blocked.add(1);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if !self.cutting && refused_to_cut(&e, queue.front()) => {
                    fall_back_to_cutting(&self.stats, &self.name, &e);
                    self.cutting = true;
                }
                Err(e) if transient(&e) => {
                    self.stats.tx_errors.add(1);
                    if let Some(f) = queue.pop_front() {
                        done(f, false);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn stats(&self) -> Arc<DriverStats> {
        Arc::clone(&self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_that_knows_every_offload_takes_the_first_offer() {
        let taken = negotiate(|_| Ok(())).unwrap();
        assert_eq!(taken, OFFERS[0]);
        let o = offloads(taken);
        assert!(o.has(Offloads::VNET | Offloads::RX_CSUM | Offloads::RX_TSO4 | Offloads::RX_USO4));
        assert!(o.has(Offloads::TX_TSO4));
        assert!(!o.refused(u8::MAX));
    }

    #[test]
    fn a_kernel_without_uso_is_asked_for_less_and_the_refusal_is_told() {
        let mut asked = Vec::new();
        // A kernel before 6.2: USO flags unknown, so EINVAL.
        let taken = negotiate(|flags| {
            asked.push(flags);
            if flags & (tun_f::USO4 | tun_f::USO6) != 0 {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                Ok(())
            }
        })
        .unwrap();
        assert_eq!(asked, OFFERS[..2]);
        let o = offloads(taken);
        assert!(o.has(Offloads::RX_TSO4) && !o.has(Offloads::RX_USO4));
        assert!(o.refused(Offloads::RX_USO4) && !o.refused(Offloads::RX_TSO4));
        assert_eq!(
            o.to_string(),
            "offloads=vnet,rx-csum,rx-tso4,tx-tso4 refused=rx-uso4"
        );
    }

    #[test]
    fn a_kernel_that_refuses_every_offload_still_gets_headers() {
        let taken = negotiate(|flags| match flags {
            0 => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        })
        .unwrap();
        assert_eq!(taken, 0);
        assert_eq!(
            offloads(taken).to_string(),
            "offloads=vnet,tx-tso4 refused=rx-csum,rx-tso4,rx-uso4"
        );
        assert!(negotiate(|_| Err(io::Error::from_raw_os_error(libc::EPERM))).is_err());
    }
}
