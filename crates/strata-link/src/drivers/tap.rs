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
//! one writev(2) gathering the frame's chunks. Without IFF_VNET_HDR the kernel
//! hands us frames with their checksums complete, as it must for a device that
//! claims no offloads.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use strata_core::graph::{OptionDoc, Options};
use strata_core::{GraphError, Message};

use super::{
    DriverError, DriverStats, ETH_HEADER, Limits, NETNS, VLAN_TAG, accept, drop_unsendable,
    interface_option, netns, netns_option, sys, transient,
};

/// The kind name in link configs.
pub const KIND: &str = "tap";

/// The clone device of TUN/TAP.
const CLONE_DEVICE: &str = "/dev/net/tun";

/// Frames written with one writev(2) of at most this many pieces; a frame in
/// more is gathered first.
const MAX_PIECES: usize = 16;

/// A read buffer that holds any frame the kernel can hand a TAP (an skb is at
/// most 64 KiB), so a frame is never cut by the read itself: oversize frames
/// are recognised and counted.
const READ_BUFFER: usize = 65_536 + 64;

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
    NETNS,
];

/// A "tap" link's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapConfig {
    /// The device name.
    pub name: String,
    /// Bring it up.
    pub up: bool,
    /// The namespace to open it in.
    pub netns: Option<String>,
}

impl TapConfig {
    /// Reads a link config's options.
    pub fn from_options(o: &Options) -> Result<TapConfig, GraphError> {
        Ok(TapConfig {
            name: interface_option(o, "name")?,
            up: o.get("up")?.unwrap_or(true),
            netns: netns_option(o)?,
        })
    }
}

/// A TAP device.
pub struct TapDriver {
    file: File,
    name: String,
    max: usize,
    batch: usize,
    buf: Vec<u8>,
    stats: Arc<DriverStats>,
}

impl TapDriver {
    /// Opens the TAP device a link config names.
    pub fn open(o: &Options, batch: usize) -> Result<TapDriver, DriverError> {
        Self::with_config(&TapConfig::from_options(o)?, batch)
    }

    /// Opens a TAP device.
    pub fn with_config(c: &TapConfig, batch: usize) -> Result<TapDriver, DriverError> {
        let setup = || -> io::Result<(File, String, usize)> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(CLONE_DEVICE)?;
            let name = sys::tun_set_tap(file.as_raw_fd(), &c.name)?;
            if c.up {
                sys::interface_up(&name)?;
            }
            let mtu = sys::interface_mtu(&name)?;
            Ok((file, name, mtu))
        };
        let (file, name, mtu) = netns::within(c.netns.as_deref(), setup)
            .map_err(|e| DriverError::setup(format!("tap '{}'", c.name), e))?;
        Ok(TapDriver {
            file,
            name,
            max: mtu + ETH_HEADER + VLAN_TAG,
            batch: batch.max(1),
            buf: vec![0; READ_BUFFER],
            stats: Arc::default(),
        })
    }

    fn write_frame(&mut self, frame: &Message) -> io::Result<usize> {
        if frame.chunk_count() > MAX_PIECES {
            return self.file.write(&frame.to_vec());
        }
        let mut pieces = [IoSlice::new(&[]); MAX_PIECES];
        for (piece, chunk) in pieces.iter_mut().zip(frame.chunks()) {
            *piece = IoSlice::new(chunk);
        }
        self.file.write_vectored(&pieces[..frame.chunk_count()])
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

    fn batch(&self) -> usize {
        self.batch
    }

    fn recv(&mut self, deliver: &mut dyn FnMut(&[u8])) -> io::Result<usize> {
        let mut taken = 0;
        while taken < self.batch {
            match self.file.read(&mut self.buf) {
                Ok(n) => {
                    taken += 1;
                    self.stats.rx_calls.add(1);
                    accept(&self.stats, self.max, &self.buf[..n], false, deliver);
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
        loop {
            drop_unsendable(&self.stats, Limits::plain(self.max), queue, done);
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
