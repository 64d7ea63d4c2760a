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

/// Most packets a pacer lets leave back to back: one UDP GSO super-datagram
/// (the kernel's UDP_MAX_SEGMENTS).
const MAX_BURST: u32 = 64;
/// A burst never carries more than this much of the rate.
const BURST_TIME: Duration = Duration::from_millis(1);

/// Spaces data packets so that cwnd packets take one SRTT — by bursts, like
/// Linux's TCP with TSO (`tcp_tso_autosize`): a few packets may leave back
/// to back, up to a quarter of the window, 1 ms of the rate or one GSO
/// super-datagram, whichever is least. Pacing packet by packet would cost a
/// wake-up and a `sendmsg` per packet: at 1 Gbit/s the gap is 11 µs, at
/// 10 Gbit/s 1 µs, finer than a sleep, and a driver that wakes per packet
/// never fills a GSO batch.
#[derive(Clone, Debug)]
pub(crate) struct Pacer {
    next: Option<Instant>,
    slack: Duration,
}

impl Pacer {
    pub(crate) fn new() -> Self {
        Pacer {
            next: None,
            slack: Duration::ZERO,
        }
    }

    /// The time before which no data packet may leave, if any.
    pub(crate) fn blocked_until(&self, now: Instant) -> Option<Instant> {
        self.next
            .map(|t| t.checked_sub(self.slack).unwrap_or(t))
            .filter(|&t| t > now)
    }

    /// Records a departure at `now` with `cwnd` packets per `srtt`. A pacer
    /// that fell behind (idle) restarts from `now`: at most one burst leaves
    /// at once.
    pub(crate) fn sent(&mut self, now: Instant, cwnd: u32, srtt: Duration) {
        let cwnd = cwnd.max(1);
        let gap = srtt / cwnd;
        let by_time = if gap.is_zero() {
            MAX_BURST
        } else {
            (BURST_TIME.as_nanos() / gap.as_nanos()).min(u128::from(MAX_BURST)) as u32
        };
        let burst = (cwnd / 4).min(by_time).clamp(1, MAX_BURST);
        self.slack = gap * (burst - 1);
        let base = match self.next {
            Some(t) if t > now => t,
            _ => now,
        };
        self.next = Some(base + gap);
    }
}

/// The rate in bytes per second that `cwnd` packets of `mss` bytes per `srtt` give.
pub fn rate(cwnd: u32, mss: u32, srtt: Duration) -> f64 {
    f64::from(cwnd) * f64::from(mss) / srtt.as_secs_f64().max(1e-6)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Departures allowed at `now` in a row, recording each.
    fn burst(p: &mut Pacer, now: Instant, cwnd: u32, srtt: Duration) -> u32 {
        let mut n = 0;
        while p.blocked_until(now).is_none() && n < 1000 {
            p.sent(now, cwnd, srtt);
            n += 1;
        }
        n
    }

    #[test]
    fn a_burst_is_a_quarter_window_at_most() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        // 8 packets per ms: bursts of 2, then one gap (125 µs) apart.
        assert_eq!(burst(&mut p, t0, 8, Duration::from_millis(1)), 2);
        let open = p.blocked_until(t0).expect("paced");
        assert_eq!(open - t0, Duration::from_micros(125));
        assert_eq!(burst(&mut p, open, 8, Duration::from_millis(1)), 1);
        // 8 packets per 10 ms: 1 ms of the rate is less than a packet.
        let mut p = Pacer::new();
        assert_eq!(burst(&mut p, t0, 8, Duration::from_millis(10)), 1);
    }

    #[test]
    fn a_burst_is_one_gso_batch_or_1ms_at_most() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        // A huge window over a short RTT: gap 61 ns, burst capped at 64.
        assert_eq!(burst(&mut p, t0, 8192, Duration::from_micros(500)), 64);
        // 1000 packets per 100 ms: gap 100 µs, 1 ms of it is 10 packets.
        let mut p = Pacer::new();
        assert_eq!(burst(&mut p, t0, 1000, Duration::from_millis(100)), 10);
    }

    #[test]
    fn the_long_run_rate_is_cwnd_per_srtt() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        let (cwnd, srtt) = (100, Duration::from_millis(50));
        let mut now = t0;
        let mut sent = 0;
        while now < t0 + Duration::from_secs(1) {
            sent += burst(&mut p, now, cwnd, srtt);
            now = p.blocked_until(now).expect("paced");
        }
        // 2000 per second, plus the first burst.
        assert!((2000..=2000 + 25).contains(&sent), "{sent}");
    }
}
