//! Telling random loss from congestion at the receiver (issue 14): a loss
//! with no queue in front of it is taken for noise — a bit error, a lossy
//! radio hop — and the window is kept; a loss behind a standing queue is
//! congestion and the window halves (`window.rs`).
//!
//! The idea is TCP Veno's (Fu & Liew, 2003): estimate the packets the flow
//! keeps queued in the path, `backlog = queueing delay × rate`, and call a
//! loss random when the backlog is below a few packets. The receiver has
//! both terms without help from the sender: every DATA packet carries the
//! sender's clock (`tsval`, µs), so `arrival − tsval` is the one-way delay
//! plus an unknown constant (the clocks' offset); its minimum over the last
//! ten seconds is the empty path, and the minimum over the last block of
//! packets (at least 32 packets and 1 ms) is the path now — a minimum, so
//! that a late wake-up of the receiver or a batch read is not taken for a
//! queue. The block's packets over its duration are the rate.
//!
//! What the delay cannot see: a bottleneck queue so shallow that it
//! overflows with fewer than [`BACKLOG_PACKETS`] queued (Table 2's 16 KB in
//! front of 10 Mbit/s), whose losses then look random — the window would
//! keep growing and the sender resend many times the data into the drops.
//! So a second signal: random loss is rare, and when more than
//! [`RANDOM_LOSS_MAX`] of a block's packets are retransmissions, its losses
//! are congestion whatever the delay says. Without an estimate yet (the
//! first block), every loss is congestion.

use std::time::{Duration, Instant};

/// Packets queued in the path at or above which a loss is congestion.
pub(crate) const BACKLOG_PACKETS: f64 = 8.0;
/// The share of a block's packets that may be retransmissions with its
/// losses still taken for random ones (1% random loss gives about 1%).
pub(crate) const RANDOM_LOSS_MAX: f64 = 0.1;
/// A block ends after at least this many packets…
const BLOCK_PACKETS: u32 = 32;
/// …and at least this long.
const BLOCK_TIME: Duration = Duration::from_millis(1);
/// A block arrived spread out when it was sent in less than this share of
/// the time it took to arrive (it arrived slower than 0.8 times as fast)…
const SPREAD: f64 = 0.8;
/// …for this many blocks in a row.
const SPREAD_BLOCKS: u32 = 2;
/// The empty path's delay is the minimum over one to two of these.
const BASE_PERIOD: Duration = Duration::from_secs(10);

/// `a` before `b` on the wrapping µs clock.
fn less(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn min(a: Option<u32>, b: u32) -> u32 {
    match a {
        Some(a) if less(a, b) => a,
        _ => b,
    }
}

/// The receiver's estimate of the queue its flow keeps in the path.
#[derive(Clone, Debug, Default)]
pub(crate) struct QueueEstimate {
    epoch: Option<Instant>,
    base: Option<u32>,
    prev_base: Option<u32>,
    period_start: Option<Instant>,
    block_min: Option<u32>,
    block_count: u32,
    block_start: Option<Instant>,
    block_retx: u32,
    /// The sender's clock on the block's first packet.
    block_ts: Option<u32>,
    /// Blocks in a row that arrived spread out: slower than they were sent.
    spread: u32,
    recent: Option<u32>,
    rate: f64,
    retx_share: f64,
    /// The path's round trip, when known: a queue *stands* if it outlasts
    /// half of one (zero: a block is enough).
    pub(crate) round: Duration,
    round_start: Option<Instant>,
    round_min: Option<u32>,
    prev_round_min: Option<u32>,
    round_count: u32,
    round_retx: u32,
    /// Packets per second over the last half round trip.
    round_rate: f64,
    /// The last few half round trips' rates, newest last (the pipe's).
    rates: [f64; RATES],
}

/// Half round trips the pipe's rate is the largest of: two round trips,
/// reaching back to before a loss episode slowed the sender.
const RATES: usize = 4;

impl QueueEstimate {
    /// A data packet stamped `tsval` by the sender arrived at `now`;
    /// `retransmission` if the sender sent it again.
    pub(crate) fn on_packet(&mut self, now: Instant, tsval: u32, retransmission: bool) {
        let epoch = *self.epoch.get_or_insert(now);
        let local = now.saturating_duration_since(epoch).as_micros() as u32;
        let owd = local.wrapping_sub(tsval);
        let start = *self.period_start.get_or_insert(now);
        if now >= start + BASE_PERIOD {
            self.prev_base = self.base.take();
            self.period_start = Some(now);
        }
        self.base = Some(min(self.base, owd));
        self.block_min = Some(min(self.block_min, owd));
        self.block_count += 1;
        self.block_retx += u32::from(retransmission);
        let block_ts = *self.block_ts.get_or_insert(tsval);
        let block_start = *self.block_start.get_or_insert(now);
        let span = now.saturating_duration_since(block_start);
        if self.block_count >= BLOCK_PACKETS && span >= BLOCK_TIME {
            self.recent = self.block_min.take();
            if let Some(r) = self.recent {
                self.round_min = Some(min(self.round_min, r));
            }
            self.round_count += self.block_count;
            self.round_retx += self.block_retx;
            let round_start = *self.round_start.get_or_insert(block_start);
            if now >= round_start + self.round / 2 {
                self.prev_round_min = self.round_min.take();
                self.round_start = Some(now);
                // Over half a round trip, not a block: the retransmissions
                // of an episode leave together and fill a block of their own.
                self.retx_share = f64::from(self.round_retx) / f64::from(self.round_count);
                let span = now.saturating_duration_since(round_start).as_secs_f64();
                self.round_rate = f64::from(self.round_count) / span.max(1e-6);
                self.rates.rotate_left(1);
                self.rates[RATES - 1] = self.round_rate;
                self.round_count = 0;
                self.round_retx = 0;
            }
            self.rate = f64::from(self.block_count) / span.as_secs_f64();
            // Sent over `sent`, arrived over `span`: a train the bottleneck
            // spread out (its queue grew through the block).
            let sent = Duration::from_micros(u64::from(tsval.wrapping_sub(block_ts).min(1 << 30)));
            if sent >= BLOCK_TIME && span.as_secs_f64() * SPREAD > sent.as_secs_f64() {
                self.spread += 1;
            } else {
                self.spread = 0;
            }
            self.block_ts = None;

            self.block_count = 0;
            self.block_retx = 0;
            self.block_start = Some(now);
        }
    }

    /// Whether the last blocks arrived spread out by a bottleneck slower
    /// than they were sent (`rate` is then the bottleneck's).
    pub(crate) fn spread(&self) -> bool {
        self.spread >= SPREAD_BLOCKS
    }

    /// The queueing delay over the last block, if estimated: what a train
    /// of packets met (slow start's signal, `slowstart.rs`).
    pub(crate) fn delay(&self) -> Option<Duration> {
        self.above_base(self.recent?)
    }

    /// The queueing delay that stood through the last half to whole round
    /// trip (a block when the round trip is unknown). A window sent by
    /// bursts — rate control off, an ACK releasing a burst — queues each
    /// burst at the bottleneck for a moment, and a block falls within a
    /// burst: at 1% random loss and 100 ms that read as a standing queue
    /// of 8–12 packets, every loss was taken for congestion, and the
    /// window sat at 100–200 packets where the path holds 868 (Figure 7 at
    /// 1e-6 collapsed to 2–9 Mbit/s). A queue that stands outlasts half a
    /// round trip; a burst's drains within it. (A whole round trip or more
    /// is too slow: a window growing into a 256 KB queue at 50 ms
    /// overflowed it before the queue had stood that long, and congestion
    /// was taken for random loss.)
    pub(crate) fn standing_delay(&self) -> Option<Duration> {
        let standing = if self.round.is_zero() {
            self.recent?
        } else {
            match (self.prev_round_min, self.round_min) {
                (Some(p), c) => min(c, p),
                (None, c) => c?,
            }
        };
        self.above_base(standing)
    }

    fn above_base(&self, owd: u32) -> Option<Duration> {
        let base = match self.prev_base {
            Some(p) => min(self.base, p),
            None => self.base?,
        };
        let q = owd.wrapping_sub(base) as i32;
        Some(Duration::from_micros(q.max(0) as u64))
    }

    /// Packets per second over the last block (the bottleneck's rate when a
    /// queue stood through it).
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// Packets the path carries — the flow's largest arrival rate over the
    /// last two round trips times `rtt`, the empty path's round trip — if
    /// measured: the bottleneck's rate × RTT when a queue stood, the window
    /// that fills the link with the queue empty. The largest, because a
    /// loss episode slows the sender (its window fills with the lost
    /// packets until they are resent): the rate measured within one read
    /// a third of the link at 1 Gbit/s and 100 ms, and cut after cut
    /// took the window to a quarter of the path.
    pub(crate) fn pipe(&self, rtt: Duration) -> Option<u32> {
        let rate = self.rates.iter().copied().fold(0.0, f64::max);
        (rate > 0.0).then_some((rate * rtt.as_secs_f64()) as u32)
    }

    /// Packets the flow keeps queued, if estimated: the standing delay
    /// times the flow's rate over the same span. A block's rate is no
    /// flow's: a receiver reads its socket by batches, and a block that
    /// ends on a batch counts tens of packets in no time (42,000 packets
    /// per second on a 100 Mbit/s link through wanem, a loaded host's
    /// millisecond of lateness then read as 40 packets queued).
    pub(crate) fn backlog(&self) -> Option<f64> {
        let rate = if self.round.is_zero() || self.round_rate == 0.0 {
            self.rate
        } else {
            self.round_rate
        };
        Some(self.standing_delay()?.as_secs_f64() * rate)
    }

    /// Whether the window may grow fast (`window.rs`): a backlog under
    /// [`BACKLOG_PACKETS`] or a thirty-second of the window `cwnd`, and no
    /// sign of congestion. A large window's own burstiness keeps a few
    /// dozen packets queued where the window is still below the path's BDP
    /// (100 Mbit/s, 200 ms, window 1,500 of 1,785: 12–28 packets queued at
    /// every arrival in the simulator), which held growth at one packet
    /// per round trip for seconds.
    pub(crate) fn roomy(&self, cwnd: u32) -> bool {
        let room = BACKLOG_PACKETS.max(f64::from(cwnd) / 32.0);
        self.retx_share <= RANDOM_LOSS_MAX && self.backlog().is_some_and(|b| b < room)
    }

    /// Whether a queue of [`BACKLOG_PACKETS`] or more stands.
    pub(crate) fn standing(&self) -> bool {
        self.backlog().is_some_and(|b| b >= BACKLOG_PACKETS)
    }

    /// Whether a loss now is congestion (a standing queue, or losses too
    /// many to be random). Before the first block ends, a loss is
    /// congestion if the packets so far met a queue of a millisecond: the
    /// first loss at 1% random loss comes within the first hundred packets,
    /// in slow start's first bursts, and taking it for congestion ended slow
    /// start at 16 packets (4 s to regain the path at 100 ms).
    pub(crate) fn congested(&self) -> bool {
        if self.retx_share > RANDOM_LOSS_MAX {
            return true;
        }
        match self.backlog() {
            Some(b) => b >= BACKLOG_PACKETS,
            None => self
                .block_min
                .and_then(|m| self.above_base(m))
                .is_none_or(|d| d >= BLOCK_TIME),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets every `gap` from `start`, the sender's clock counting from
    /// `t` and `offset` µs off, each delayed by `delay(i)`.
    #[allow(clippy::too_many_arguments)]
    fn feed(
        q: &mut QueueEstimate,
        t: Instant,
        start: Instant,
        n: u32,
        gap: Duration,
        offset: u32,
        delay: impl Fn(u32) -> Duration,
        retx: impl Fn(u32) -> bool,
    ) -> Instant {
        let mut sent = start;
        for i in 0..n {
            let arrive = sent + delay(i);
            let tsval = (sent.duration_since(t).as_micros() as u32).wrapping_add(offset);
            q.on_packet(arrive, tsval, retx(i));
            sent += gap;
        }
        sent
    }

    #[test]
    fn no_estimate_means_congestion() {
        let q = QueueEstimate::default();
        assert!(q.congested());
    }

    #[test]
    fn an_empty_path_with_jitter_is_not_congested() {
        let mut q = QueueEstimate::default();
        let t = Instant::now();
        // 10,000 packets/s, 20 ms one way, up to 3 ms of jitter on most.
        feed(
            &mut q,
            t,
            t,
            1000,
            Duration::from_micros(100),
            0xfff0_0000,
            |i| Duration::from_millis(20) + Duration::from_micros(u64::from((i * 7919) % 3000)),
            |i| i % 100 == 0,
        );
        assert!(q.delay().unwrap() < Duration::from_micros(300), "{q:?}");
        assert!(!q.congested());
    }

    #[test]
    fn a_standing_queue_is_congestion() {
        let mut q = QueueEstimate::default();
        let t = Instant::now();
        let gap = Duration::from_micros(100);
        let next = feed(
            &mut q,
            t,
            t,
            200,
            gap,
            7,
            |_| Duration::from_millis(20),
            |_| false,
        );
        assert!(!q.congested());
        // The queue grows to 5 ms: 50 packets at 10,000 per second.
        feed(
            &mut q,
            t,
            next,
            200,
            gap,
            7,
            |i| Duration::from_millis(20) + Duration::from_micros(u64::from(i.min(100)) * 50),
            |_| false,
        );
        let b = q.backlog().unwrap();
        assert!((40.0..60.0).contains(&b), "backlog {b}");
        assert!(q.congested());
    }

    #[test]
    fn many_retransmissions_are_congestion_without_a_queue() {
        let mut q = QueueEstimate::default();
        let t = Instant::now();
        let gap = Duration::from_micros(100);
        let next = feed(
            &mut q,
            t,
            t,
            200,
            gap,
            0,
            |_| Duration::from_millis(1),
            |i| i % 20 == 0,
        );
        assert!(!q.congested(), "5% retransmitted: random loss");
        feed(
            &mut q,
            t,
            next,
            200,
            gap,
            0,
            |_| Duration::from_millis(1),
            |i| i % 3 == 0,
        );
        assert!(q.delay().unwrap() < Duration::from_micros(10));
        assert!(q.congested(), "a third retransmitted: congestion");
    }

    #[test]
    fn a_train_is_spread_only_by_a_slower_bottleneck() {
        // Sent every 50 µs: arriving every 100 µs it met a bottleneck of
        // 10,000 packets per second; arriving as sent, none.
        for (gap, spread) in [(100, true), (50, false)] {
            let mut q = QueueEstimate::default();
            let t = Instant::now();
            for i in 0..200u32 {
                let at = t + Duration::from_micros(u64::from(i * gap));
                q.on_packet(at, i * 50, false);
            }
            assert_eq!(q.spread(), spread, "arriving every {gap} µs");
            if spread {
                assert!((q.rate() - 10_000.0).abs() < 500.0, "{}", q.rate());
            }
        }
    }

    #[test]
    fn a_receiver_reading_by_batches_does_not_inflate_the_backlog() {
        // Bursts of 40 packets every 40 ms (1,000 per second, a window of
        // 100 at 100 ms), each read in two batches 1 ms apart and 2 ms late.
        // A block ends within the second batch, 32 packets in a millisecond:
        // 32,000 per second, and 2 ms of lateness read as 64 packets queued.
        // Over the half round trip the rate is the flow's.
        let mut q = QueueEstimate {
            round: Duration::from_millis(100),
            ..QueueEstimate::default()
        };
        let t = Instant::now();
        let us = |d: Duration| d.as_micros() as u32;
        for i in 0..100u64 {
            // Read at once: the empty path.
            let sent = t + Duration::from_millis(i);
            q.on_packet(sent + Duration::from_micros(50), us(sent - t), false);
        }
        for burst in 1..=40u64 {
            let at = t + Duration::from_millis(100 + burst * 40);
            for i in 0..40u64 {
                let sent = at + Duration::from_micros(i * 25);
                let read = at + Duration::from_millis(2 + i / 20);
                q.on_packet(read, us(sent - t), false);
            }
        }
        assert!(q.rate() > 10_000.0, "the last block's rate: {}", q.rate());
        let b = q.backlog().unwrap();
        assert!(b < BACKLOG_PACKETS, "backlog {b}");
    }
}
