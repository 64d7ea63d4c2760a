//! BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00, following Linux's
//! `tcp_bbr.c`): congestion control from a model of the path rather than
//! from loss.
//!
//! The model is two numbers: the bottleneck bandwidth, the largest delivery
//! rate (`rate`) sampled over the last 10 round trips, and the propagation
//! delay, the least RTT seen in the last 10 s. Their product is the
//! bandwidth-delay product (BDP). The sender paces at `pacing_gain` × the
//! bandwidth and keeps at most `cwnd_gain` × BDP (plus a few send quanta) in
//! flight. The gains follow a state machine:
//!
//! - **Startup**: gains of 2/ln 2 ≈ 2.89 double the delivery rate every
//!   round trip, until three rounds in a row grow it by less than 25 %: the
//!   pipe is full.
//! - **Drain**: pacing at 1/2.89 empties the queue Startup built, until in
//!   flight is down to one BDP.
//! - **ProbeBW**: a cycle of eight phases of one min_rtt each, pacing at
//!   5/4 (probe for more bandwidth), 3/4 (drain what the probe queued), then
//!   1 for six phases; cwnd gain 2. The cycle starts at a random phase (never
//!   the draining one) so that flows sharing a bottleneck do not probe in step.
//! - **ProbeRTT**: when min_rtt has not been refreshed for 10 s, cwnd drops
//!   to four segments for 200 ms and a round trip, to measure the empty path.
//!
//! Loss does not shrink the model. Only during the first round of a fast
//! recovery does BBR hold cwnd to what is in flight plus what each ACK
//! delivered (packet conservation), and it takes the segments deemed lost
//! off cwnd; when recovery ends cwnd returns to what it was
//! (`bbr_set_cwnd_to_recover_or_restore`). Left out from Linux: the
//! long-term bandwidth estimate for token-bucket policers, and the ACK
//! aggregation allowance (that is BBR v2's territory and Linux's later
//! additions).

use std::time::Duration;

use strata_core::Instant;

use super::minmax::WindowedMax;
use super::{Ack, Congestion, RateSample, Window, initial_window};

/// Gains are in thousandths.
const UNIT: u64 = 1000;
/// 2/ln 2: the smallest gain that doubles the delivery rate each round.
const HIGH_GAIN: u64 = 2885;
/// Its inverse, to drain in one round what Startup queued.
const DRAIN_GAIN: u64 = 347;
/// ProbeBW's cwnd gain: room for delayed and aggregated ACKs.
const CWND_GAIN: u64 = 2000;
/// ProbeBW's pacing gains, one phase per min_rtt.
const CYCLE: [u64; 8] = [1250, 750, 1000, 1000, 1000, 1000, 1000, 1000];
/// Round trips the bandwidth filter spans (the cycle and two more).
const BW_ROUNDS: u64 = 10;
/// How long a min_rtt sample lasts before ProbeRTT looks for a new one.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// How long ProbeRTT holds cwnd down.
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// The least cwnd, in segments (Linux's `bbr_cwnd_min_target`).
const MIN_CWND_SEGMENTS: u32 = 4;
/// Startup ends after this many rounds without the bandwidth growing by
/// `FULL_BW_GROWTH`.
const FULL_BW_ROUNDS: u32 = 3;
const FULL_BW_GROWTH: u64 = 1250;
/// Linux paces 1 % below the estimate, so queues stay drained.
const PACING_MARGIN_PERCENT: u64 = 1;
/// Largest send quantum (Linux's GSO limit).
const MAX_QUANTUM: u64 = 64 * 1024;

/// BBR's state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Ramping up to find the bandwidth.
    Startup,
    /// Emptying the queue Startup built.
    Drain,
    /// Steady state, cycling the pacing gain.
    ProbeBw,
    /// Refreshing min_rtt.
    ProbeRtt,
}

/// BBR v1.
#[derive(Clone, Debug)]
pub struct Bbr {
    mode: Mode,
    /// The window BBR wants (0 until the first ACK tells it the initial one).
    cwnd: u32,
    /// cwnd before recovery or ProbeRTT, restored after.
    prior_cwnd: u32,
    mss: u32,
    /// Bottleneck bandwidth filter, bytes/s over round trips.
    bw: WindowedMax,
    /// Round trips counted so far.
    rounds: u64,
    /// The delivered count that ends the current round.
    next_round_delivered: u64,
    round_start: bool,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    packet_conservation: bool,
    prev_recovering: bool,
    /// A retransmission timeout set cwnd; take it on the next ACK.
    timed_out: bool,
    full_bw: u64,
    full_bw_count: u32,
    full_bw_reached: bool,
    cycle_index: usize,
    cycle_stamp: Instant,
    pacing_gain: u64,
    cwnd_gain: u64,
    pacing_rate: u64,
}

impl Default for Bbr {
    fn default() -> Self {
        Bbr {
            mode: Mode::Startup,
            cwnd: 0,
            prior_cwnd: 0,
            mss: 0,
            bw: WindowedMax::default(),
            rounds: 0,
            next_round_delivered: 0,
            round_start: false,
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            packet_conservation: false,
            prev_recovering: false,
            timed_out: false,
            full_bw: 0,
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_index: 0,
            cycle_stamp: Instant::ZERO,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            pacing_rate: 0,
        }
    }
}

/// `v` × `gain` thousandths, saturating.
fn scale(v: u64, gain: u64) -> u64 {
    (u128::from(v) * u128::from(gain) / u128::from(UNIT)).min(u128::from(u64::MAX)) as u64
}

impl Bbr {
    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes/s.
    pub fn bandwidth(&self) -> u64 {
        self.bw.get()
    }

    /// The current pacing gain, in thousandths.
    pub fn pacing_gain(&self) -> u64 {
        self.pacing_gain
    }

    /// The data one send quantum holds: about a millisecond at the pacing
    /// rate, two segments at least (Linux's `bbr_tso_segs_goal`).
    fn quantum(&self) -> u64 {
        (self.pacing_rate / 1000).clamp(2 * u64::from(self.mss), MAX_QUANTUM)
    }

    /// `gain` × BDP plus three send quanta (`bbr_inflight` with
    /// `bbr_quantization_budget`); the initial window before any RTT.
    fn inflight(&self, gain: u64) -> u32 {
        let Some(rtt) = self.min_rtt else {
            return initial_window(self.mss);
        };
        let bdp = u128::from(self.bw.get()) * rtt.as_nanos() / 1_000_000_000;
        let bdp = scale(bdp.min(u128::from(u64::MAX)) as u64, gain);
        let target = bdp.saturating_add(3 * self.quantum());
        target.min(u64::from(u32::MAX)) as u32
    }

    fn min_cwnd(&self) -> u32 {
        MIN_CWND_SEGMENTS.saturating_mul(self.mss)
    }

    fn update_bw(&mut self, rs: &RateSample) {
        self.round_start = false;
        if !rs.is_valid() {
            return;
        }
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.total_delivered;
            self.rounds += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        let bw = rs.bandwidth();
        // An application-limited sample says only that the path is at least
        // this fast.
        if !rs.app_limited || bw >= self.bw.get() {
            self.bw.update(BW_ROUNDS, self.rounds, bw);
        }
    }

    fn next_cycle_phase(&self, rs: &RateSample) -> bool {
        let full_length = self
            .min_rtt
            .is_some_and(|m| rs.now.saturating_since(self.cycle_stamp) > m);
        if self.pacing_gain == UNIT {
            return full_length;
        }
        if self.pacing_gain > UNIT {
            // Probe until the gain has had its effect, or loss says the
            // path holds no more.
            return full_length
                && (rs.losses > 0 || rs.prior_in_flight >= self.inflight(self.pacing_gain));
        }
        full_length || rs.prior_in_flight <= self.inflight(UNIT)
    }

    fn advance_cycle(&mut self, now: Instant) {
        self.cycle_index = (self.cycle_index + 1) % CYCLE.len();
        self.cycle_stamp = now;
        self.pacing_gain = CYCLE[self.cycle_index];
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = Mode::ProbeBw;
        self.cwnd_gain = CWND_GAIN;
        // Linux draws the phase at random; the clock's microseconds serve,
        // and stay deterministic in simulation.
        let r = (now.as_nanos() / 1000 % (CYCLE.len() as u64 - 1)) as usize;
        self.cycle_index = CYCLE.len() - 1 - r;
        self.advance_cycle(now);
    }

    fn check_full_bw(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.app_limited {
            return;
        }
        let bw = self.bw.get();
        if bw >= scale(self.full_bw, FULL_BW_GROWTH) {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS;
    }

    fn check_drain(&mut self, rs: &RateSample) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            self.pacing_gain = DRAIN_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
        if self.mode == Mode::Drain && rs.in_flight <= self.inflight(UNIT) {
            self.enter_probe_bw(rs.now);
        }
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if !self.prev_recovering && self.mode != Mode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    fn reset_mode(&mut self, now: Instant) {
        if self.full_bw_reached {
            self.enter_probe_bw(now);
        } else {
            self.mode = Mode::Startup;
            self.pacing_gain = HIGH_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
    }

    fn update_min_rtt(&mut self, rs: &RateSample) {
        let now = rs.now;
        let expired = self.min_rtt.is_some() && now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if let Some(rtt) = rs.rtt
            && (self.min_rtt.is_none_or(|m| rtt < m) || expired)
        {
            self.min_rtt = Some(rtt);
            self.min_rtt_stamp = now;
        }
        if expired && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.pacing_gain = UNIT;
            self.cwnd_gain = UNIT;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode != Mode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done {
            None if rs.in_flight <= self.min_cwnd() => {
                self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = rs.total_delivered;
            }
            None => {}
            Some(done) => {
                self.probe_rtt_round_done |= self.round_start;
                if self.probe_rtt_round_done && now >= done {
                    self.min_rtt_stamp = now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    self.reset_mode(now);
                }
            }
        }
    }

    fn set_pacing_rate(&mut self, rs: &RateSample) {
        let bw = self.bw.get();
        let rate = if bw == 0 {
            // No bandwidth yet: the window over the round trip, at the
            // high gain (`bbr_init_pacing_rate_from_rtt`).
            let Some(rtt) = rs.rtt.filter(|r| !r.is_zero()) else {
                return;
            };
            let per_rtt = u128::from(self.cwnd) * 1_000_000_000 / rtt.as_nanos();
            per_rtt.min(u128::from(u64::MAX)) as u64
        } else {
            bw
        };
        let rate = scale(rate, self.pacing_gain) / 100 * (100 - PACING_MARGIN_PERCENT);
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// Packet conservation in the first round of recovery, and cwnd
    /// restored when recovery ends; true while conserving.
    fn recover_or_restore(&mut self, rs: &RateSample) -> bool {
        if rs.losses > 0 {
            self.cwnd = self.cwnd.saturating_sub(rs.losses).max(self.mss);
        }
        let conserve = rs.in_flight.saturating_add(rs.acked);
        if rs.recovering && !self.prev_recovering {
            self.packet_conservation = true;
            self.next_round_delivered = rs.total_delivered;
            self.cwnd = conserve;
        } else if !rs.recovering && self.prev_recovering {
            self.cwnd = self.cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_recovering = rs.recovering;
        if self.packet_conservation {
            self.cwnd = self.cwnd.max(conserve);
        }
        self.packet_conservation
    }

    fn set_cwnd(&mut self, rs: &RateSample) {
        if rs.acked > 0 && !self.recover_or_restore(rs) {
            let target = self.inflight(self.cwnd_gain);
            if self.full_bw_reached {
                self.cwnd = self.cwnd.saturating_add(rs.acked).min(target);
            } else if self.cwnd < target || rs.total_delivered < u64::from(initial_window(self.mss))
            {
                self.cwnd = self.cwnd.saturating_add(rs.acked);
            }
            self.cwnd = self.cwnd.max(self.min_cwnd());
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_cwnd());
        }
    }
}

impl Congestion for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    /// The window is BBR's, set in [`on_rate_sample`](Self::on_rate_sample).
    fn avoid(&mut self, _w: &mut Window, _ack: Ack) {}

    /// Loss does not change the model: ssthresh stays cwnd, so recovery
    /// leaves the window alone, and the window is remembered to restore.
    fn ssthresh(&mut self, w: &Window, _flight: u32, _now: Instant) -> u32 {
        self.save_cwnd();
        w.cwnd
    }

    fn on_timeout(&mut self, _now: Instant) {
        self.timed_out = true;
    }

    fn on_rate_sample(&mut self, w: &mut Window, rs: &RateSample) {
        self.mss = w.mss.max(1);
        if self.cwnd == 0 {
            self.cwnd = w.cwnd;
        }
        if self.timed_out {
            // A timeout set cwnd to one segment: start from there, like
            // Linux, restoring the saved window when the recovery ends, and
            // let Startup's growth test begin again (`bbr_set_state`).
            self.timed_out = false;
            self.cwnd = w.cwnd;
            self.prev_recovering = true;
            self.full_bw = 0;
        }
        self.update_bw(rs);
        if self.mode == Mode::ProbeBw && self.next_cycle_phase(rs) {
            self.advance_cycle(rs.now);
        }
        self.check_full_bw(rs);
        self.check_drain(rs);
        self.update_min_rtt(rs);
        self.set_pacing_rate(rs);
        self.set_cwnd(rs);
        w.cwnd = self.cwnd;
    }

    fn pacing_rate(&self) -> Option<u64> {
        (self.pacing_rate > 0).then_some(self.pacing_rate)
    }
}

#[cfg(test)]
#[path = "bbr_tests.rs"]
mod tests;
