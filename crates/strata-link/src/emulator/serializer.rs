//! The rate limit: a link sends one frame at a time, each taking `8·len/rate`
//! seconds, and frames waiting their turn sit in a bounded FIFO.
//!
//! Only the time the link becomes free is kept. The bytes still waiting at any
//! moment follow from it exactly — (busy_until − now)·rate/8 — so the queue needs no
//! per-frame bookkeeping.

use strata_core::Instant;

/// A frame the queue had no room for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueFull;

#[derive(Clone, Debug)]
pub(crate) struct Serializer {
    /// Bits per second; 0 is unlimited.
    rate: u64,
    /// Bytes that may wait, counting the rest of the frame on the wire.
    queue: u64,
    /// When the last accepted frame's final bit leaves.
    busy_until: Instant,
}

impl Serializer {
    pub fn new(rate: u64, queue: u64) -> Self {
        Serializer {
            rate,
            queue,
            busy_until: Instant::ZERO,
        }
    }

    /// Queues a frame of `len` bytes offered at `now`; returns when its last bit
    /// has been sent, or `QueueFull` (tail drop).
    pub fn admit(&mut self, now: Instant, len: usize) -> Result<Instant, QueueFull> {
        if self.rate == 0 {
            return Ok(now);
        }
        let rate = u128::from(self.rate);
        let start = self.busy_until.max(now);
        let waiting_ns = (start - now).as_nanos();
        if waiting_ns > 0 {
            let waiting_bytes = (waiting_ns * rate).div_ceil(8_000_000_000);
            if waiting_bytes + len as u128 > u128::from(self.queue) {
                return Err(QueueFull);
            }
        }
        let send_ns = (len as u128 * 8_000_000_000).div_ceil(rate);
        let send_ns = u64::try_from(send_ns).unwrap_or(u64::MAX);
        self.busy_until = Instant::from_nanos(start.as_nanos().saturating_add(send_ns));
        Ok(self.busy_until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_leave_one_serialisation_time_apart() {
        // 1000 bytes at 8 Mbit/s take exactly 1 ms.
        let mut s = Serializer::new(8_000_000, 1_000_000);
        let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
        assert_eq!(s.admit(ms(0), 1000), Ok(ms(1)));
        assert_eq!(s.admit(ms(0), 1000), Ok(ms(2)));
        assert_eq!(
            s.admit(ms(5), 1000),
            Ok(ms(6)),
            "an idle link starts at once"
        );
    }

    #[test]
    fn a_full_queue_drops_but_an_idle_link_takes_any_frame() {
        let mut s = Serializer::new(8_000_000, 2500);
        assert!(
            s.admit(Instant::ZERO, 9000).is_ok(),
            "idle link, oversize frame"
        );
        assert_eq!(s.admit(Instant::ZERO, 1), Err(QueueFull));
        let mut s = Serializer::new(8_000_000, 2500);
        assert!(s.admit(Instant::ZERO, 1000).is_ok());
        assert!(s.admit(Instant::ZERO, 1000).is_ok());
        assert_eq!(s.admit(Instant::ZERO, 1000), Err(QueueFull));
        assert!(s.admit(Instant::ZERO, 500).is_ok(), "exactly full");
    }
}
