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
///
/// A driver woken late for a packet the pacer held back (a loaded host: the
/// thread was not scheduled at its deadline) may send what it overslept, up
/// to [`CATCH_UP`] of the rate at once: a late timer never lowers the rate
/// below cwnd / SRTT, which a pacer that restarted from every late wake-up
/// did (session 6: the real link at 1 Gbit/s and 200 ms, whole transfers
/// paced at a fraction of the window). An idle pacer — nothing was held
/// back — still restarts from now, one burst at most.
#[derive(Clone, Debug)]
pub(crate) struct Pacer {
    next: Option<Instant>,
    slack: Duration,
    /// A packet was held back since the last departure that caught up: the
    /// driver was told to wake for it, and time past the deadline is credit.
    held: bool,
}

/// The most of the rate a late wake-up may send at once, catching up.
pub(crate) const CATCH_UP: Duration = Duration::from_millis(4);

impl Pacer {
    pub(crate) fn new() -> Self {
        Pacer {
            next: None,
            slack: Duration::ZERO,
            held: false,
        }
    }

    /// A packet was ready and the pacer held it back: the driver sleeps until
    /// [`Pacer::blocked_until`], and any lateness is made up.
    pub(crate) fn hold(&mut self) {
        self.held = true;
    }

    /// Nothing is ready to send: the next departure is not a late one.
    pub(crate) fn idle(&mut self) {
        self.held = false;
    }

    /// When a driver held back by the pacer should wake: when the held
    /// packet is due, so that a whole burst is (the packets due up to a
    /// burst later may leave with it). Waking as soon as the first packet
    /// may leave ([`Pacer::blocked_until`]) woke the driver once per packet
    /// after the first burst — 89,000 times a second at 1 Gbit/s.
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        self.next
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
            // Late for a held packet: the schedule may lag `now` by up to
            // CATCH_UP (and a quarter window), so the packets due while the
            // driver overslept leave now, back to back.
            Some(t) if self.held => {
                let lag = CATCH_UP.min(gap * (cwnd / 4).max(1));
                t.max(now.checked_sub(lag).unwrap_or(now))
            }
            _ => now,
        };
        let next = base + gap;
        if next > now {
            self.held = false;
        }
        self.next = Some(next);
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

    /// A driver that wakes `late` after every deadline, telling the pacer
    /// it held a packet back, as `Connection::poll_data` does; packets sent
    /// in one second.
    fn late_wake_ups(late: Duration) -> u32 {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        // 10,000 packets per second in bursts of 10 (1 ms of the rate).
        let (cwnd, srtt) = (1000, Duration::from_millis(100));
        let (mut now, mut sent, mut wake_ups) = (t0, 0, 0);
        while now < t0 + Duration::from_secs(1) {
            sent += burst(&mut p, now, cwnd, srtt);
            assert!(p.blocked_until(now).is_some(), "paced");
            let open = p.wake_at().expect("a departure was scheduled");
            assert!(open > now, "never a spin");
            p.hold();
            now = open + late;
            wake_ups += 1;
        }
        // Never a wake-up per packet.
        assert!(wake_ups * 5 <= sent, "{wake_ups} wake-ups for {sent}");
        sent
    }

    #[test]
    fn a_late_timer_does_not_lower_the_rate() {
        // Up to CATCH_UP (4 ms) late, the credit makes the lateness up. A
        // pacer that restarted from each late wake-up (CATCH_UP zero) sent
        // 6,670 packets a second at 500 µs late, 10 per 1.5 ms.
        for late in [0, 500, 2000, 3500] {
            let sent = late_wake_ups(Duration::from_micros(late));
            assert!(
                (9_900..=10_000 + 50).contains(&sent),
                "{late} µs late: {sent}"
            );
        }
        // Later than the credit, the rate is lost, but the pacer still
        // sends what it may at each wake-up: at 10 ms late, 40 packets per
        // 10.1 ms or so.
        let sent = late_wake_ups(Duration::from_millis(10));
        assert!(sent >= 3_800, "{sent}");
    }

    #[test]
    fn an_idle_pacer_gets_no_credit() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        let (cwnd, srtt) = (1000, Duration::from_millis(100));
        assert_eq!(burst(&mut p, t0, cwnd, srtt), 10);
        // Nothing was held back: a second later, one burst, not 4 ms of it.
        p.idle();
        assert_eq!(burst(&mut p, t0 + Duration::from_secs(1), cwnd, srtt), 10);
        // Held back and woken 1 s late: 4 ms of the rate plus the burst.
        let now = t0 + Duration::from_secs(2);
        p.hold();
        assert_eq!(burst(&mut p, now, cwnd, srtt), 50);
    }
}
