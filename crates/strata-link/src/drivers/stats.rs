//! What a driver has done, readable from any thread while it runs.
//!
//! The driver's thread is the only writer of each counter, so it adds with a
//! plain load and store (no read-modify-write, no lock on the data path);
//! readers on other threads take a [`DriverCounts`] snapshot.

use std::fmt;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use super::vnet::Refused;

/// A counter with one writer.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning driver's thread calls this.
    pub fn add(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    /// Sets the value (a running total read from the kernel).
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A driver's live counters.
#[derive(Debug, Default)]
pub struct DriverStats {
    /// Frames received and handed on.
    pub rx_frames: Counter,
    /// Their bytes.
    pub rx_bytes: Counter,
    /// Frames received shorter than an Ethernet header, dropped.
    pub rx_runts: Counter,
    /// Frames received longer than the link's largest frame, dropped.
    pub rx_oversize: Counter,
    /// Frames received behind a virtio-net header that was not believed,
    /// dropped, by reason (in [`Refused::ALL`]'s order).
    pub rx_refused: [Counter; Refused::ALL.len()],
    /// Super-frames received (the kernel's GSO): TCP ones handed up whole,
    /// UDP ones cut.
    pub rx_super: Counter,
    /// Datagrams cut from UDP super-frames.
    pub rx_cut: Counter,
    /// Frames this socket saw leaving the interface (our own or the kernel's),
    /// ignored: a host on a wire does not hear its own transmissions.
    pub rx_outgoing: Counter,
    /// Receive calls that failed with an error the driver rides out.
    pub rx_errors: Counter,
    /// Frames the kernel dropped before we could read them (the socket's
    /// receive buffer was full), as of the last refresh.
    pub rx_kernel_drops: Counter,
    /// Receive system calls that returned frames.
    pub rx_calls: Counter,
    /// Frames sent.
    pub tx_frames: Counter,
    /// Their bytes.
    pub tx_bytes: Counter,
    /// Of them, TCP super-segments the kernel cut.
    pub tx_super: Counter,
    /// Frames refused for sending: longer than the link's largest frame, or
    /// shorter than an Ethernet header.
    pub tx_bad_size: Counter,
    /// Frames the kernel refused (counted and dropped).
    pub tx_errors: Counter,
    /// Send system calls made.
    pub tx_calls: Counter,
    /// Times the kernel's buffer was full and sending had to wait.
    pub tx_blocked: Counter,
    /// The offloads in use with the kernel, and those it refused.
    offloads: AtomicU16,
}

/// A snapshot of [`DriverStats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverCounts {
    /// Frames received and handed on.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Runts dropped.
    pub rx_runts: u64,
    /// Oversize frames dropped.
    pub rx_oversize: u64,
    /// Outgoing frames ignored.
    pub rx_outgoing: u64,
    /// Receive errors ridden out.
    pub rx_errors: u64,
    /// Frames the kernel dropped before we read them.
    pub rx_kernel_drops: u64,
    /// Receive system calls that returned frames.
    pub rx_calls: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Of them, super-segments the kernel cut.
    pub tx_super: u64,
    /// Frames of a size the link cannot carry, dropped.
    pub tx_bad_size: u64,
    /// Frames the kernel refused.
    pub tx_errors: u64,
    /// Send system calls.
    pub tx_calls: u64,
    /// Waits for a full send buffer.
    pub tx_blocked: u64,
    /// Frames refused for their virtio-net header, by reason.
    pub rx_refused: [u64; Refused::ALL.len()],
    /// Super-frames received.
    pub rx_super: u64,
    /// Datagrams cut from UDP super-frames.
    pub rx_cut: u64,
    /// The offloads in use, and those the kernel refused.
    pub offloads: Offloads,
}

/// The offloads a link shares with the kernel: a set in use and a set the
/// kernel refused (when it was asked, at open or at run time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    on: u8,
    refused: u8,
}

impl Offloads {
    /// Frames come and go behind virtio-net headers (PACKET_VNET_HDR,
    /// IFF_VNET_HDR).
    pub const VNET: u8 = 1;
    /// The kernel may hand over transport checksums to finish.
    pub const RX_CSUM: u8 = 2;
    /// The kernel may hand over TCP-in-IPv4 super-segments.
    pub const RX_TSO4: u8 = 4;
    /// The kernel may hand over UDP-in-IPv4 super-datagrams.
    pub const RX_USO4: u8 = 8;
    /// The kernel cuts the TCP super-segments Strata hands it.
    pub const TX_TSO4: u8 = 16;

    /// Each offload's name in reports.
    const NAMES: [(u8, &'static str); 5] = [
        (Self::VNET, "vnet"),
        (Self::RX_CSUM, "rx-csum"),
        (Self::RX_TSO4, "rx-tso4"),
        (Self::RX_USO4, "rx-uso4"),
        (Self::TX_TSO4, "tx-tso4"),
    ];

    /// Offloads `on` in use, `refused` refused.
    pub fn new(on: u8, refused: u8) -> Offloads {
        Offloads { on, refused }
    }

    /// True when every offload of `bits` is in use.
    pub fn has(&self, bits: u8) -> bool {
        self.on & bits == bits
    }

    /// True when the kernel refused any offload of `bits`.
    pub fn refused(&self, bits: u8) -> bool {
        self.refused & bits != 0
    }

    fn names(bits: u8) -> String {
        let names: Vec<&str> = Self::NAMES
            .iter()
            .filter(|(b, _)| bits & b != 0)
            .map(|(_, n)| *n)
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(",")
        }
    }
}

impl fmt::Display for Offloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "offloads={}", Self::names(self.on))?;
        if self.refused != 0 {
            write!(f, " refused={}", Self::names(self.refused))?;
        }
        Ok(())
    }
}

impl DriverStats {
    /// Counts a frame refused for its virtio-net header.
    pub fn refuse(&self, why: Refused) {
        let i = Refused::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.rx_refused[i].add(1);
    }

    /// Records the offloads in use and refused (at open).
    pub fn set_offloads(&self, o: Offloads) {
        let bits = u16::from(o.on) | u16::from(o.refused) << 8;
        self.offloads.store(bits, Ordering::Relaxed);
    }

    /// The offloads in use and refused.
    pub fn offloads(&self) -> Offloads {
        let bits = self.offloads.load(Ordering::Relaxed);
        Offloads {
            on: bits as u8,
            refused: (bits >> 8) as u8,
        }
    }

    /// Records that the kernel refused `bits` at run time: they are no
    /// longer in use.
    pub fn refused_now(&self, bits: u8) {
        let o = self.offloads();
        self.set_offloads(Offloads::new(o.on & !bits, o.refused | bits));
    }

    /// The counters now.
    pub fn snapshot(&self) -> DriverCounts {
        DriverCounts {
            rx_frames: self.rx_frames.get(),
            rx_bytes: self.rx_bytes.get(),
            rx_runts: self.rx_runts.get(),
            rx_oversize: self.rx_oversize.get(),
            rx_outgoing: self.rx_outgoing.get(),
            rx_errors: self.rx_errors.get(),
            rx_kernel_drops: self.rx_kernel_drops.get(),
            rx_calls: self.rx_calls.get(),
            tx_frames: self.tx_frames.get(),
            tx_bytes: self.tx_bytes.get(),
            tx_super: self.tx_super.get(),
            tx_bad_size: self.tx_bad_size.get(),
            tx_errors: self.tx_errors.get(),
            tx_calls: self.tx_calls.get(),
            tx_blocked: self.tx_blocked.get(),
            rx_refused: std::array::from_fn(|i| self.rx_refused[i].get()),
            rx_super: self.rx_super.get(),
            rx_cut: self.rx_cut.get(),
            offloads: self.offloads(),
        }
    }
}

impl DriverCounts {
    /// Frames refused for their virtio-net header, every reason.
    pub fn rx_refused_all(&self) -> u64 {
        self.rx_refused.iter().sum()
    }

    /// Received frames dropped, by the driver or by the kernel before it.
    pub fn rx_dropped(&self) -> u64 {
        self.rx_runts + self.rx_oversize + self.rx_refused_all() + self.rx_kernel_drops
    }

    /// Frames given to send that did not leave.
    pub fn tx_dropped(&self) -> u64 {
        self.tx_bad_size + self.tx_errors
    }
}

impl fmt::Display for DriverCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per_call = |frames: u64, calls: u64| frames as f64 / calls.max(1) as f64;
        write!(
            f,
            "rx {} frames/{} B ({:.1}/call, super={} cut={}), dropped runt={} oversize={} vnet={}",
            self.rx_frames,
            self.rx_bytes,
            per_call(self.rx_frames, self.rx_calls),
            self.rx_super,
            self.rx_cut,
            self.rx_runts,
            self.rx_oversize,
            self.rx_refused_all(),
        )?;
        if self.rx_refused_all() > 0 {
            let reasons: Vec<String> = Refused::ALL
                .iter()
                .zip(self.rx_refused)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| format!("{r}:{n}"))
                .collect();
            write!(f, " ({})", reasons.join(" "))?;
        }
        write!(
            f,
            " kernel={}, outgoing ignored={}, errors={}; \
             tx {} frames/{} B ({:.1}/call, super={}), dropped bad-size={} errors={}, blocked={}; {}",
            self.rx_kernel_drops,
            self.rx_outgoing,
            self.rx_errors,
            self.tx_frames,
            self.tx_bytes,
            per_call(self.tx_frames, self.tx_calls),
            self.tx_super,
            self.tx_bad_size,
            self.tx_errors,
            self.tx_blocked,
            self.offloads,
        )
    }
}
