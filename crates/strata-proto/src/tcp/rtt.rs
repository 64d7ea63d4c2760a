//! Round-trip time and the retransmission timeout (RFC 6298).
//!
//! [`Rto`] keeps SRTT and RTTVAR (§2) and backs off exponentially (§5.5). The
//! variance term K·RTTVAR is floored at `rto_min` (200 ms by default), which is
//! Linux's rule rather than RFC 6298's 1 s floor on the whole RTO: a short path
//! recovers from a loss in a fifth of a second, and a long, steady path (whose
//! RTTVAR decays towards zero) still keeps 200 ms of margin over SRTT against
//! spurious timeouts. `rto_min = "1s"` gives the RFC's conservatism.
//!
//! Samples come from timestamps (RFC 7323 §4: every ACK of new data echoes the
//! TSval of the segment it answers, retransmitted or not) or, without them,
//! from one timed segment at a time, [`RttTimer`], which obeys Karn's rule: a
//! retransmitted segment is never timed.

use std::time::Duration;

use strata_core::Instant;

use super::seq::Seq;

/// The RTO before any sample (RFC 6298 §2.1).
pub const INITIAL_RTO: Duration = Duration::from_secs(1);

/// Clock granularity G (RFC 6298 §2): timestamps tick in milliseconds.
pub const GRANULARITY: Duration = Duration::from_millis(1);

/// The RTO estimator of one connection.
#[derive(Clone, Debug)]
pub struct Rto {
    srtt: Option<Duration>,
    rttvar: Duration,
    base: Duration,
    backoff: u32,
    min: Duration,
    max: Duration,
}

impl Rto {
    /// An estimator with no samples: RTO = 1 s (within `[min, max]`).
    pub fn new(min: Duration, max: Duration) -> Rto {
        Rto {
            srtt: None,
            rttvar: Duration::ZERO,
            base: INITIAL_RTO.clamp(min, max.max(min)),
            backoff: 0,
            min,
            max: max.max(min),
        }
    }

    /// Takes a round-trip sample R (RFC 6298 §2.2, §2.3) and clears the
    /// backoff: a fresh measurement replaces the doubled value (§5 note).
    pub fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                // RTTVAR ← (1 − β)·RTTVAR + β·|SRTT − R'|, β = 1/4;
                // SRTT ← (1 − α)·SRTT + α·R', α = 1/8.
                let delta = srtt.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        let var = (self.rttvar * 4).max(GRANULARITY).max(self.min);
        self.base = (srtt + var).min(self.max);
        self.backoff = 0;
    }

    /// The timeout to arm now, with backoff.
    pub fn rto(&self) -> Duration {
        let factor = 1u32 << self.backoff.min(16);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// Doubles the timeout after it expired (RFC 6298 §5.5).
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// SRTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTTVAR.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }
}

/// Times one segment at a time when timestamps are off (RFC 6298 §3).
#[derive(Clone, Copy, Debug, Default)]
pub struct RttTimer {
    /// The sequence number that acknowledges the timed segment, and when it
    /// was sent.
    timed: Option<(Seq, Instant)>,
}

impl RttTimer {
    /// A segment ending at `end` is sent for the first time at `now`: time it
    /// unless one is being timed.
    pub fn sent(&mut self, end: Seq, now: Instant) {
        if self.timed.is_none() {
            self.timed = Some((end, now));
        }
    }

    /// An ACK up to `ack` arrived at `now`: the sample, if it covers the timed
    /// segment.
    pub fn acked(&mut self, ack: Seq, now: Instant) -> Option<Duration> {
        let (end, sent) = self.timed?;
        if ack >= end {
            self.timed = None;
            return Some(now.saturating_since(sent));
        }
        None
    }

    /// Karn's rule: any retransmission spoils the measurement. The timed
    /// segment may be resent itself, and an ACK covering it may have waited
    /// for an earlier retransmitted hole; neither says how long a round trip
    /// takes.
    pub fn retransmitted(&mut self) {
        self.timed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_samples_follow_rfc_6298_section_2() {
        let mut r = Rto::new(Duration::ZERO, Duration::from_secs(60));
        assert_eq!(r.rto(), ms(1000), "1 s before any sample");
        r.sample(ms(100));
        // SRTT = R, RTTVAR = R/2, RTO = SRTT + 4·RTTVAR.
        assert_eq!(
            (r.srtt(), r.rttvar(), r.rto()),
            (Some(ms(100)), ms(50), ms(300))
        );
        r.sample(ms(200));
        // RTTVAR = 3/4·50 + 1/4·|100 − 200| = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5.
        assert_eq!(r.rttvar(), Duration::from_micros(62_500));
        assert_eq!(r.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(r.rto(), Duration::from_micros(362_500));
    }

    #[test]
    fn the_variance_term_is_floored_at_rto_min() {
        let mut r = Rto::new(ms(200), Duration::from_secs(60));
        for _ in 0..50 {
            r.sample(ms(10));
        }
        assert_eq!(r.rto(), ms(210), "SRTT + 200 ms, as Linux");
    }

    #[test]
    fn expiry_doubles_the_timeout_up_to_the_maximum_and_a_sample_resets_it() {
        let mut r = Rto::new(ms(200), Duration::from_secs(60));
        r.sample(ms(100));
        assert_eq!(r.rto(), ms(300));
        r.back_off();
        r.back_off();
        assert_eq!(r.rto(), ms(1200));
        for _ in 0..20 {
            r.back_off();
        }
        assert_eq!(r.rto(), Duration::from_secs(60));
        r.sample(ms(100));
        assert!(r.rto() < ms(400));
    }

    #[test]
    fn karns_rule_never_times_a_retransmitted_segment() {
        let t0 = Instant::ZERO;
        let mut t = RttTimer::default();
        t.sent(Seq(1100), t0);
        t.sent(Seq(1200), t0 + ms(1));
        assert_eq!(t.acked(Seq(1100), t0 + ms(50)), Some(ms(50)));
        t.sent(Seq(1300), t0 + ms(60));
        t.retransmitted();
        assert_eq!(
            t.acked(Seq(1300), t0 + ms(500)),
            None,
            "ambiguous: not a sample"
        );
        t.sent(Seq(1400), t0 + ms(600));
        assert_eq!(
            t.acked(Seq(1400), t0 + ms(640)),
            Some(ms(40)),
            "new data is timed again"
        );
    }
}
