//! Delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation, as
//! Linux's `tcp_rate.c`): how fast the network delivered data over the
//! interval between a segment's transmission and its acknowledgment.
//!
//! Every transmission records, with the segment on the scoreboard (`sack`),
//! a [`TxState`]: how much the connection had delivered by then, when, when
//! the first segment of the current flight was sent, and whether the sender
//! was application-limited. When an ACK or SACK delivers segments, the one
//! sent most recently gives the interval: the data delivered since its
//! snapshot, over the longer of the send and the ACK intervals (the longer,
//! so that ACK compression does not inflate the rate, §3.3). A sample
//! shorter than the minimum RTT is not trusted (Linux's rule: it comes from
//! ACKs bunched together).

use std::time::Duration;

use strata_core::Instant;

/// What a segment remembers of the connection when it was sent (the draft's
/// per-packet `P.delivered`, `P.delivered_time`, `P.first_sent_time`,
/// `P.is_app_limited`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxState {
    /// Bytes delivered before it was sent.
    pub delivered: u64,
    /// When the last of those were delivered.
    pub delivered_time: Instant,
    /// When the first segment of its flight was sent.
    pub first_sent: Instant,
    /// The sender had nothing more to send: the sample may understate the
    /// path's rate.
    pub app_limited: bool,
}

/// The connection's side of the estimator.
#[derive(Clone, Debug, Default)]
pub struct Estimator {
    /// Bytes delivered (SACKed or cumulatively acknowledged) so far.
    delivered: u64,
    /// When `delivered` last grew.
    delivered_time: Instant,
    /// The send time of the most recently delivered segment.
    first_sent: Instant,
    /// Non-zero while application-limited: the `delivered` at which the
    /// bubble the application left will have been acknowledged.
    app_limited: u64,
    /// Bytes deemed lost so far (Linux's `tp->lost`).
    lost: u64,
    /// The segment of the ACK being processed that was sent last.
    candidate: Option<Candidate>,
    /// `delivered` and `lost` at the last sample, for what the next one adds.
    reported: (u64, u64),
}

#[derive(Clone, Copy, Debug)]
struct Candidate {
    tx: TxState,
    xmit: Instant,
    retransmitted: bool,
}

/// One delivery rate sample, with what the ACK that made it told.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateSample {
    /// When the ACK arrived.
    pub now: Instant,
    /// Bytes delivered over `interval`.
    pub delivered: u64,
    /// The interval; zero when the sample is not valid.
    pub interval: Duration,
    /// The connection's delivered count when the sampled segment was sent
    /// (round trips are counted by it).
    pub prior_delivered: u64,
    /// The connection's delivered count now.
    pub total_delivered: u64,
    /// The sender was application-limited when the segment was sent.
    pub app_limited: bool,
    /// The round trip of the sampled segment, when it was not a
    /// retransmission (whose ACK may be for an earlier copy).
    pub rtt: Option<Duration>,
    /// Bytes this ACK newly delivered (Linux's `acked_sacked`).
    pub acked: u32,
    /// Bytes this ACK newly deemed lost.
    pub losses: u32,
    /// Bytes in the network before the ACK (`pipe`).
    pub prior_in_flight: u32,
    /// Bytes in the network after it.
    pub in_flight: u32,
    /// Loss recovery (fast recovery or after a timeout) is under way.
    pub recovering: bool,
}

impl RateSample {
    /// True when the sample measures a rate.
    pub fn is_valid(&self) -> bool {
        self.delivered > 0 && !self.interval.is_zero()
    }

    /// The delivery rate in bytes per second; zero when not valid.
    pub fn bandwidth(&self) -> u64 {
        let ns = self.interval.as_nanos();
        if !self.is_valid() || ns == 0 {
            return 0;
        }
        let rate = u128::from(self.delivered) * 1_000_000_000 / ns;
        rate.min(u128::from(u64::MAX)) as u64
    }
}

impl Estimator {
    /// Bytes delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes deemed lost so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// A segment goes out at `now`; `idle` when nothing else is in flight
    /// (the draft's "if there are no packets in flight", which restarts the
    /// intervals so that idle time is not counted as slow delivery).
    pub fn on_send(&mut self, now: Instant, idle: bool) -> TxState {
        if idle {
            self.first_sent = now;
            self.delivered_time = now;
        }
        TxState {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent: self.first_sent,
            app_limited: self.app_limited != 0,
        }
    }

    /// `len` bytes of a segment sent at `xmit` with `tx` were delivered now
    /// (SACKed, or cumulatively acknowledged without having been SACKed).
    pub fn on_delivered(&mut self, tx: TxState, xmit: Instant, len: u32, retransmitted: bool) {
        self.delivered = self.delivered.saturating_add(u64::from(len));
        let later = self
            .candidate
            .is_none_or(|c| tx.delivered > c.tx.delivered || xmit > c.xmit);
        if later {
            self.candidate = Some(Candidate {
                tx,
                xmit,
                retransmitted,
            });
            self.first_sent = xmit;
        }
    }

    /// `bytes` were newly deemed lost.
    pub fn on_lost(&mut self, bytes: u32) {
        self.lost = self.lost.saturating_add(u64::from(bytes));
    }

    /// The sender ran out of data with `in_flight` bytes in the network and
    /// room in its window: samples from segments sent until that bubble is
    /// acknowledged are application-limited (the draft's
    /// `C.app_limited = C.delivered + inflight`, at least 1).
    pub fn app_limited(&mut self, in_flight: u32) {
        self.app_limited = self.delivered.saturating_add(u64::from(in_flight)).max(1);
    }

    /// Ends the ACK processed at `now`: the sample of what it delivered, not
    /// valid when it delivered nothing or its interval is shorter than
    /// `min_rtt`; with the bytes delivered and deemed lost since the last
    /// sample (losses found by a timer count towards the next ACK). The
    /// caller fills in what is in flight and the recovery phase.
    pub fn sample(&mut self, now: Instant, min_rtt: Option<Duration>) -> RateSample {
        let to_u32 = |v: u64| v.min(u64::from(u32::MAX)) as u32;
        let mut rs = RateSample {
            now,
            total_delivered: self.delivered,
            acked: to_u32(self.delivered.saturating_sub(self.reported.0)),
            losses: to_u32(self.lost.saturating_sub(self.reported.1)),
            ..RateSample::default()
        };
        self.reported = (self.delivered, self.lost);
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let Some(c) = self.candidate.take() else {
            return rs;
        };
        self.delivered_time = now;
        rs.prior_delivered = c.tx.delivered;
        rs.app_limited = c.tx.app_limited;
        rs.rtt = (!c.retransmitted).then(|| now.saturating_since(c.xmit));
        let send_elapsed = c.xmit.saturating_since(c.tx.first_sent);
        let ack_elapsed = now.saturating_since(c.tx.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        rs.delivered = self.delivered.saturating_sub(c.tx.delivered);
        if min_rtt.is_none_or(|m| interval >= m) {
            rs.interval = interval;
        }
        rs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn a_flight_acknowledged_a_round_trip_later_measures_its_size_over_the_round_trip() {
        let mut e = Estimator::default();
        let txs: Vec<TxState> = (0..10).map(|i| e.on_send(at(i), i == 0)).collect();
        for (i, tx) in txs.iter().enumerate() {
            e.on_delivered(*tx, at(i as u64), 1000, false);
        }
        let rs = e.sample(at(109), Some(Duration::from_millis(100)));
        assert_eq!(rs.delivered, 10_000);
        assert_eq!(rs.interval, Duration::from_millis(109), "the ACK interval");
        assert_eq!(rs.bandwidth(), 10_000 * 1000 / 109);
        assert_eq!(rs.rtt, Some(Duration::from_millis(100)), "of the last sent");
    }

    #[test]
    fn a_sample_shorter_than_the_minimum_rtt_or_of_nothing_is_not_valid() {
        let mut e = Estimator::default();
        let tx = e.on_send(at(0), true);
        assert!(!e.sample(at(5), None).is_valid(), "nothing delivered");
        e.on_delivered(tx, at(0), 1000, true);
        let rs = e.sample(at(5), Some(Duration::from_millis(10)));
        assert!(!rs.is_valid());
        assert_eq!(rs.bandwidth(), 0);
        assert_eq!(rs.rtt, None, "a retransmission's round trip is ambiguous");
    }

    #[test]
    fn samples_stay_application_limited_until_the_bubble_is_delivered() {
        let mut e = Estimator::default();
        e.app_limited(2000);
        let a = e.on_send(at(0), true);
        let b = e.on_send(at(1), false);
        e.on_delivered(a, at(0), 1000, false);
        assert!(e.sample(at(100), None).app_limited);
        e.on_delivered(b, at(1), 1500, false);
        e.sample(at(101), None);
        let c = e.on_send(at(101), true);
        assert!(!c.app_limited, "2500 delivered is past the bubble at 2000");
    }
}
