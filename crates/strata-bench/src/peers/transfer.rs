//! One bulk transfer of a fixed number of bytes between two namespaces, as
//! every peer of `strata bench paper001` reports it: what the receiver got,
//! how long it took from the connection's open to the last byte, and the
//! recovery counters the peer has.

use std::time::{Duration, Instant};

/// What one transfer measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Transfer {
    /// Bytes the receiver got (less than asked when the deadline cut it).
    pub bytes: u64,
    /// Seconds from the receiver's accept to its last byte.
    pub secs: f64,
    /// CPU seconds spent meanwhile (both ends, where the peer can say).
    pub cpu_secs: f64,
    /// Data packets (or segments) sent again.
    pub retransmits: u64,
    /// Retransmission requests (NAKs) the receiver sent.
    pub naks: u64,
    /// Whether the deadline stopped the sender before it sent everything.
    pub cut: bool,
    /// Bytes received when half of those asked for had arrived, and when
    /// (seconds from the accept; both 0 where the peer cannot say): the
    /// second half's rate is the steady state, past slow start.
    pub half_bytes: u64,
    pub half_secs: f64,
}

impl Transfer {
    /// Goodput, Mbit/s (10⁶ bits).
    pub fn mbit_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs.max(1e-9) / 1e6
    }

    /// Goodput of the second half of the transfer, Mbit/s (the whole
    /// transfer's where the peer cannot say).
    pub fn steady_mbit_s(&self) -> f64 {
        if self.half_bytes == 0 || self.secs <= self.half_secs {
            return self.mbit_s();
        }
        (self.bytes - self.half_bytes) as f64 * 8.0 / (self.secs - self.half_secs) / 1e6
    }

    /// CPU nanoseconds per byte received.
    pub fn cpu_ns_per_byte(&self) -> f64 {
        self.cpu_secs * 1e9 / (self.bytes.max(1) as f64)
    }
}

/// The moment a transfer started `limit` ago ran out.
pub fn deadline(limit: Duration) -> Instant {
    Instant::now() + limit
}
