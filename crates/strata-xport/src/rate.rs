//! The sender's RTT estimate and rate control (§3.1): rate = cwnd / SRTT,
//! SRTT ← SRTT + (RTT − SRTT)/8. Pacing is a deadline the driver sleeps
//! until, never a spin (§3.1 step 4 waited in `select`, the modern form is
//! the connection's next time-out).

use std::time::{Duration, Instant};

/// Round-trip estimate.
#[derive(Clone, Copy, Debug)]
pub struct Rtt {
    /// Smoothed RTT.
    pub srtt: Duration,
    /// Mean deviation, for the retransmission time-out.
    pub rttvar: Duration,
    /// Whether a sample has been taken.
    pub sampled: bool,
}

impl Rtt {
    pub(crate) fn new(initial: Duration) -> Self {
        Rtt {
            srtt: initial,
            rttvar: initial / 2,
            sampled: false,
        }
    }

    /// Folds in a sample (§3.1's gain of 1/8; RFC 6298's deviation).
    pub(crate) fn sample(&mut self, rtt: Duration) {
        if !self.sampled {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
            self.sampled = true;
            return;
        }
        let dev = self.srtt.abs_diff(rtt);
        self.rttvar = self.rttvar * 3 / 4 + dev / 4;
        if rtt > self.srtt {
            self.srtt += (rtt - self.srtt) / 8;
        } else {
            self.srtt -= (self.srtt - rtt) / 8;
        }
    }

    /// The retransmission time-out before back-off.
    pub(crate) fn rto(&self, min: Duration) -> Duration {
        (self.srtt + 4 * self.rttvar).max(min)
    }
}

/// Spaces data packets so that cwnd packets take one SRTT.
#[derive(Clone, Debug)]
pub(crate) struct Pacer {
    next: Option<Instant>,
}

impl Pacer {
    pub(crate) fn new() -> Self {
        Pacer { next: None }
    }

    /// The time before which no data packet may leave, if any.
    pub(crate) fn blocked_until(&self, now: Instant) -> Option<Instant> {
        self.next.filter(|&t| t > now)
    }

    /// Records a departure at `now` with `cwnd` packets per `srtt`. A pacer
    /// that fell behind (idle) restarts from `now` rather than bursting.
    pub(crate) fn sent(&mut self, now: Instant, cwnd: u32, srtt: Duration) {
        let gap = srtt / cwnd.max(1);
        let base = match self.next {
            Some(t) if t + gap > now => t,
            _ => now,
        };
        self.next = Some(base + gap);
    }
}

/// The rate in bytes per second that `cwnd` packets of `mss` bytes per `srtt` give.
pub fn rate(cwnd: u32, mss: u32, srtt: Duration) -> f64 {
    f64::from(cwnd) * f64::from(mss) / srtt.as_secs_f64().max(1e-6)
}
