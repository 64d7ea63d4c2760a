//! A token bucket for ICMP errors (RFC 1812 §4.3.2.8; RFC 1122 §4.3.2.8 in
//! spirit): up to `burst` errors at once, refilled at `rate` per second, so a
//! flood of bad datagrams cannot make this host a flood of errors.

use strata_core::Instant;

const NANOS_PER_TOKEN: u64 = 1_000_000_000;

/// The bucket, in nano-tokens so integer arithmetic keeps sub-token refills.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    capacity: u64,
    rate: u64,
    level: u64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `rate` tokens per second.
    pub fn new(burst: u32, rate: u32) -> TokenBucket {
        let capacity = u64::from(burst) * NANOS_PER_TOKEN;
        TokenBucket {
            capacity,
            rate: u64::from(rate),
            level: capacity,
            last: Instant::ZERO,
        }
    }

    /// Takes a token at `now` if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let elapsed = u64::try_from(now.saturating_since(self.last).as_nanos()).unwrap_or(u64::MAX);
        self.last = self.last.max(now);
        self.level = self
            .level
            .saturating_add(elapsed.saturating_mul(self.rate))
            .min(self.capacity);
        if self.level >= NANOS_PER_TOKEN {
            self.level -= NANOS_PER_TOKEN;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_passes_then_the_rate_rules() {
        let mut b = TokenBucket::new(50, 100);
        let t0 = Instant::ZERO;
        assert_eq!((0..60).filter(|_| b.take(t0)).count(), 50, "the burst");
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(
            (0..60).filter(|_| b.take(t1)).count(),
            10,
            "100/s for 0.1 s"
        );
        let later = t1 + Duration::from_secs(3600);
        assert_eq!(
            (0..60).filter(|_| b.take(later)).count(),
            50,
            "never more than the burst"
        );
    }
}
