//! CUBIC (RFC 9438): after a congestion event the window follows
//! W_cubic(t) = C·(t − K)³ + W_max (§4.2), a curve that is concave up to the
//! window where the last loss happened and convex beyond it, so it probes
//! fast where the network had room and slowly near where it had none. In the
//! Reno-friendly region (§4.3) it grows at least as fast as an AIMD flow with
//! the same decrease factor would. Windows are counted in segments, as the
//! RFC counts them.

use std::time::Duration;

use strata_core::Instant;

use super::{Ack, Congestion, Window};

/// C, the aggressiveness of the cubic curve (§5.1).
pub const C: f64 = 0.4;

/// β_cubic, the multiplicative decrease factor (§4.6).
pub const BETA: f64 = 0.7;

/// α_cubic while W_est is below cwnd_prior: 3·(1 − β)/(1 + β) (§4.3), so the
/// estimated AIMD flow is as fair to Reno as Reno itself.
pub fn alpha_aimd() -> f64 {
    3.0 * (1.0 - BETA) / (1.0 + BETA)
}

/// The state of CUBIC for one connection.
#[derive(Clone, Debug)]
pub struct Cubic {
    /// Fast convergence (§4.7): release bandwidth to new flows.
    pub fast_convergence: bool,
    /// W_max: the window just before the last reduction, in segments.
    w_max: f64,
    /// cwnd_prior: cwnd when ssthresh was last set, in segments.
    cwnd_prior: f64,
    /// K: seconds the curve takes to come back to W_max.
    k: f64,
    /// t_epoch: when the current congestion avoidance stage began.
    epoch: Option<Instant>,
    /// W_est: the window an AIMD flow would have now, in segments.
    w_est: f64,
    /// α_cubic now.
    alpha: f64,
    /// The first avoidance stage after a timeout uses K = 0 and W_max = cwnd
    /// at its start (§4.8).
    after_timeout: bool,
}

impl Default for Cubic {
    fn default() -> Self {
        Cubic {
            fast_convergence: true,
            w_max: 0.0,
            cwnd_prior: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            alpha: alpha_aimd(),
            after_timeout: false,
        }
    }
}

impl Cubic {
    /// W_cubic(t) in segments, `t` seconds into the avoidance stage (§4.2,
    /// Figure 1).
    pub fn w_cubic(&self, t: f64) -> f64 {
        C * (t - self.k).powi(3) + self.w_max
    }

    /// K in seconds.
    pub fn k(&self) -> f64 {
        self.k
    }

    /// W_max in segments.
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// W_est in segments.
    pub fn w_est(&self) -> f64 {
        self.w_est
    }

    fn start_epoch(&mut self, now: Instant, cwnd: f64) {
        self.epoch = Some(now);
        if self.after_timeout {
            self.after_timeout = false;
            self.w_max = cwnd;
            self.k = 0.0;
        } else {
            // K = cubic_root((W_max − cwnd_epoch)/C) (§4.2, Figure 2).
            self.k = ((self.w_max - cwnd) / C).cbrt();
        }
        self.w_est = cwnd;
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Congestion for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn avoid(&mut self, w: &mut Window, ack: Ack) {
        let mss = f64::from(w.mss.max(1));
        let cwnd = f64::from(w.cwnd) / mss;
        if self.epoch.is_none() {
            self.start_epoch(ack.now, cwnd);
        }
        let start = self.epoch.unwrap_or(ack.now);
        let t = secs(ack.now.saturating_since(start));
        let rtt = ack.srtt.map_or(0.0, secs);
        let segments = f64::from(ack.acked) / mss;
        // §4.3: W_est grows like AIMD(α_cubic, β_cubic); α becomes 1 once W_est
        // has reached the window of the last congestion event.
        self.w_est += self.alpha * segments / cwnd;
        if self.w_est >= self.cwnd_prior {
            self.alpha = 1.0;
        }
        let next = if self.w_cubic(t) < self.w_est {
            self.w_est
        } else {
            // §4.2: aim at W_cubic one RTT ahead, within [cwnd, 1.5·cwnd], and
            // close (target − cwnd)/cwnd of the gap per segment acknowledged.
            let target = self.w_cubic(t + rtt).clamp(cwnd, 1.5 * cwnd);
            cwnd + (target - cwnd) / cwnd * segments
        };
        let bytes = (next * mss).min(f64::from(u32::MAX)) as u32;
        w.cwnd = w.cwnd.max(bytes);
    }

    fn ssthresh(&mut self, w: &Window, _flight: u32, _now: Instant) -> u32 {
        let mss = f64::from(w.mss.max(1));
        let cwnd = f64::from(w.cwnd) / mss;
        // §4.7 fast convergence, then §4.6 multiplicative decrease. Linux, like
        // this, reduces from cwnd rather than FlightSize.
        self.w_max = if self.fast_convergence && cwnd < self.w_max {
            cwnd * (1.0 + BETA) / 2.0
        } else {
            cwnd
        };
        self.cwnd_prior = cwnd;
        self.epoch = None;
        self.alpha = alpha_aimd();
        ((cwnd * BETA).max(2.0) * mss) as u32
    }

    fn on_timeout(&mut self, _now: Instant) {
        self.after_timeout = true;
        self.epoch = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn at(secs: f64) -> Instant {
        Instant::from_nanos((secs * 1e9) as u64)
    }

    /// A window of `segments` that just lost: returns the state after the
    /// reduction, cwnd set to the new ssthresh as recovery leaves it.
    fn after_loss(segments: u32) -> (Cubic, Window) {
        let mut c = Cubic::default();
        let mut w = Window {
            cwnd: segments * MSS,
            ssthresh: u32::MAX,
            mss: MSS,
        };
        w.ssthresh = c.ssthresh(&w, w.cwnd, at(0.0));
        w.cwnd = w.ssthresh;
        (c, w)
    }

    /// Acknowledges one window per `rtt` (one ACK per segment) from `start`
    /// for `rounds` rounds; returns cwnd (segments) after each round with the
    /// time it was reached.
    fn drive(
        c: &mut Cubic,
        w: &mut Window,
        start: f64,
        rtt: f64,
        rounds: usize,
    ) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        for round in 0..rounds {
            let now = at(start + rtt * round as f64);
            for _ in 0..w.cwnd / MSS {
                c.avoid(
                    w,
                    Ack {
                        acked: MSS,
                        now,
                        srtt: Some(Duration::from_secs_f64(rtt)),
                    },
                );
            }
            out.push((rtt * (round + 1) as f64, f64::from(w.cwnd) / f64::from(MSS)));
        }
        out
    }

    #[test]
    fn a_loss_reduces_the_window_by_beta_and_sets_k_from_the_curve() {
        let (mut c, mut w) = after_loss(100);
        assert_eq!(w.cwnd, 70 * MSS, "cwnd·β_cubic");
        assert_eq!(c.w_max(), 100.0);
        c.avoid(
            &mut w,
            Ack {
                acked: MSS,
                now: at(0.0),
                srtt: Some(Duration::from_millis(100)),
            },
        );
        // K = ∛((W_max − cwnd_epoch)/C) = ∛(30/0.4) = ∛75.
        assert!((c.k() - 75f64.cbrt()).abs() < 1e-9);
        assert!(
            (c.w_cubic(c.k()) - 100.0).abs() < 1e-9,
            "W_cubic(K) = W_max"
        );
    }

    #[test]
    fn the_window_follows_w_cubic_through_the_plateau_and_beyond() {
        let (mut c, mut w) = after_loss(100);
        // 50 rounds of 100 ms pass K ≈ 4.2 s and stay in the cubic region:
        // W_est (70 + 0.53 per round) is still below the curve at 5 s.
        let curve = drive(&mut c, &mut w, 0.0, 0.1, 50);
        assert!(c.w_est() < c.w_cubic(5.0));
        for (t, cwnd) in curve {
            let expected = c.w_cubic(t);
            assert!(
                (cwnd - expected).abs() <= 0.05 * expected,
                "at t={t:.1}s cwnd {cwnd:.2} vs W_cubic {expected:.2}"
            );
        }
    }

    #[test]
    fn with_a_short_rtt_the_reno_friendly_estimate_sets_the_pace() {
        let (mut c, mut w) = after_loss(10);
        let rtt = 0.001;
        let curve = drive(&mut c, &mut w, 0.0, rtt, 200);
        let (t, cwnd) = *curve.last().unwrap();
        assert!(
            c.w_cubic(t) < c.w_est(),
            "the cubic curve is still below W_est"
        );
        assert!(
            (cwnd - c.w_est()).abs() < 1.0,
            "cwnd {cwnd} follows W_est {}",
            c.w_est()
        );
        // α_cubic ≈ 0.53 until W_est reaches cwnd_prior = 10 (about 6 RTTs),
        // then 1 segment per RTT: about 7 + 3 + 194 segments.
        assert!((190.0..215.0).contains(&cwnd), "cwnd {cwnd}");
    }

    #[test]
    fn fast_convergence_lowers_w_max_when_a_loss_comes_before_the_old_peak() {
        let (mut c, w) = after_loss(100);
        let w = Window {
            cwnd: 90 * MSS,
            ..w
        };
        c.ssthresh(&w, w.cwnd, at(1.0));
        assert!((c.w_max() - 90.0 * 0.85).abs() < 1e-9);
        c.fast_convergence = false;
        c.ssthresh(&w, w.cwnd, at(2.0));
        assert_eq!(c.w_max(), 90.0);
    }

    #[test]
    fn after_a_timeout_the_curve_starts_at_its_plateau() {
        let (mut c, mut w) = after_loss(100);
        c.on_timeout(at(1.0));
        w.cwnd = 20 * MSS;
        drive(&mut c, &mut w, 1.0, 0.1, 1);
        assert_eq!(
            (c.k(), c.w_max()),
            (0.0, 20.0),
            "K = 0, W_max = cwnd at the start"
        );
    }
}
