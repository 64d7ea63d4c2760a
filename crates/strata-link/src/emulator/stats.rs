//! What an emulator did to the frames offered to it.

use std::fmt;
use std::time::Duration;

/// Counts of one direction of an emulated link. Every offered frame is delivered,
/// lost or dropped, and counted as one of them (a duplicate adds one delivery).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmulatorStats {
    /// Frames offered.
    pub offered: u64,
    /// Their bytes.
    pub offered_bytes: u64,
    /// Frames delivered, duplicates included.
    pub delivered: u64,
    /// Their bytes.
    pub delivered_bytes: u64,
    /// Frames lost at random (`loss`).
    pub lost_random: u64,
    /// Frames lost in the bad state of the burst-loss chain.
    pub lost_burst: u64,
    /// Frames dropped because the rate limiter's queue was full.
    pub dropped_queue: u64,
    /// Frames dropped because the emulator held `limit` frames already.
    pub dropped_limit: u64,
    /// Frames that had at least one bit flipped.
    pub corrupted: u64,
    /// Bits flipped in all.
    pub bits_flipped: u64,
    /// Frames delivered twice.
    pub duplicated: u64,
    /// Frames held back so that later ones could overtake them.
    pub reordered: u64,
    /// Sum over delivered frames of the time from offer to delivery (queueing,
    /// serialisation, propagation, jitter, reordering).
    pub total_delay: Duration,
}

impl EmulatorStats {
    /// Frames lost on the wire, for either reason.
    pub fn lost(&self) -> u64 {
        self.lost_random + self.lost_burst
    }

    /// Frames dropped before the wire, for either reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue + self.dropped_limit
    }

    /// Mean time from offer to delivery, when anything was delivered.
    pub fn mean_delay(&self) -> Option<Duration> {
        let mean = self.total_delay.as_nanos() / u128::from(self.delivered).max(1);
        (self.delivered > 0).then(|| Duration::from_nanos(mean as u64))
    }
}

impl fmt::Display for EmulatorStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "offered {} ({} B), delivered {} ({} B), lost {} (random {}, burst {}), \
             dropped {} (queue {}, limit {}), corrupted {} ({} bits), duplicated {}, reordered {}",
            self.offered,
            self.offered_bytes,
            self.delivered,
            self.delivered_bytes,
            self.lost(),
            self.lost_random,
            self.lost_burst,
            self.dropped(),
            self.dropped_queue,
            self.dropped_limit,
            self.corrupted,
            self.bits_flipped,
            self.duplicated,
            self.reordered,
        )?;
        if let Some(d) = self.mean_delay() {
            write!(f, ", mean delay {d:?}")?;
        }
        Ok(())
    }
}
