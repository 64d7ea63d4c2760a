//! What a driver has done, readable from any thread while it runs.
//!
//! The driver's thread is the only writer of each counter, so it adds with a
//! plain load and store (no read-modify-write, no lock on the data path);
//! readers on other threads take a [`DriverCounts`] snapshot.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Frames refused for sending: longer than the link's largest frame, or
    /// shorter than an Ethernet header.
    pub tx_bad_size: Counter,
    /// Frames the kernel refused (counted and dropped).
    pub tx_errors: Counter,
    /// Send system calls made.
    pub tx_calls: Counter,
    /// Times the kernel's buffer was full and sending had to wait.
    pub tx_blocked: Counter,
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
    /// Frames of a size the link cannot carry, dropped.
    pub tx_bad_size: u64,
    /// Frames the kernel refused.
    pub tx_errors: u64,
    /// Send system calls.
    pub tx_calls: u64,
    /// Waits for a full send buffer.
    pub tx_blocked: u64,
}

impl DriverStats {
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
            tx_bad_size: self.tx_bad_size.get(),
            tx_errors: self.tx_errors.get(),
            tx_calls: self.tx_calls.get(),
            tx_blocked: self.tx_blocked.get(),
        }
    }
}

impl DriverCounts {
    /// Received frames dropped, by the driver or by the kernel before it.
    pub fn rx_dropped(&self) -> u64 {
        self.rx_runts + self.rx_oversize + self.rx_kernel_drops
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
            "rx {} frames/{} B ({:.1}/call), dropped runt={} oversize={} kernel={}, outgoing ignored={}, errors={}; \
             tx {} frames/{} B ({:.1}/call), dropped bad-size={} errors={}, blocked={}",
            self.rx_frames,
            self.rx_bytes,
            per_call(self.rx_frames, self.rx_calls),
            self.rx_runts,
            self.rx_oversize,
            self.rx_kernel_drops,
            self.rx_outgoing,
            self.rx_errors,
            self.tx_frames,
            self.tx_bytes,
            per_call(self.tx_frames, self.tx_calls),
            self.tx_bad_size,
            self.tx_errors,
            self.tx_blocked,
        )
    }
}
