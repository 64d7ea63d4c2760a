//! The receiver-driven congestion window (§2.1, §3.1): the receiver grows it
//! by slow start and congestion avoidance as data arrives in order, halves
//! it once per recovery episode, and sends it to the sender in every control
//! packet.
//!
//! The paper restarts slow start from one packet after each recovery (Tahoe).
//! We halve instead (Reno's multiplicative decrease): at the RTTs of §4 a
//! restart from one packet costs many round trips per loss.

use std::time::Duration;

use crate::queue::QueueEstimate;
use crate::slowstart::{CSS_GROWTH_DIVISOR, Change, SlowStart};

/// Congestion window state, in packets.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    cwnd: u32,
    ssthresh: u32,
    ca_count: u32,
    max: u32,
    slow_start: SlowStart,
    /// In conservative slow start (`slowstart.rs`): a quarter of the growth.
    conservative: bool,
    /// What the path carried at the last congestion cut, if measured.
    pipe: Option<u32>,
}

/// Past the pipe, with a queue building (below the room for one), the
/// window grows by one packet per this many (a 256th of the window per
/// round trip)…
const PROBE_PACKETS: u32 = 256;
/// …and with no queue at all, per this many (a 32nd): the pipe measured
/// was too small — the receiver's own lateness taken for a queue, or a
/// path that has grown — yet an eighth per round trip would overflow a
/// short queue before the delay signal comes back.
const PAST_PIPE_PACKETS: u32 = 32;

impl Window {
    /// `slow_start_exit`: leave slow start on the delay signal
    /// (`slowstart.rs`), not only on a loss.
    pub(crate) fn new(initial: u32, max: u32, slow_start_exit: bool) -> Self {
        Window {
            cwnd: initial.clamp(1, max.max(1)),
            ssthresh: max.max(1),
            ca_count: 0,
            max: max.max(1),
            slow_start: SlowStart::new(slow_start_exit),
            conservative: false,
            pipe: None,
        }
    }

    /// Whether slow start runs (not its conservative phase): the sender
    /// paces it when it leaves slow start on the delay signal too.
    pub(crate) fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh && !self.conservative && self.slow_start.active()
    }

    /// A new data packet (relative sequence `rel`) was counted by `q`:
    /// slow start may end on the delay it shows (`slowstart.rs`).
    pub(crate) fn on_delay(&mut self, rel: u32, q: &QueueEstimate, rtt: Option<Duration>) {
        if self.cwnd >= self.ssthresh {
            return;
        }
        match self.slow_start.on_packet(rel, self.cwnd, q, rtt) {
            Change::Keep => {}
            Change::Conservative { pipe } => {
                self.conservative = true;
                self.ca_count = 0;
                if let Some(p) = pipe {
                    self.cwnd = p.clamp(2, self.max);
                }
            }
            Change::Resume => {
                self.conservative = false;
                self.ca_count = 0;
            }
            Change::ExitAt { pipe } => {
                self.cwnd = pipe.clamp(2, self.max);
                self.ssthresh = self.cwnd;
                self.conservative = false;
                self.ca_count = 0;
            }
            Change::Exit => {
                self.ssthresh = self.cwnd;
                self.conservative = false;
                self.ca_count = 0;
            }
        }
    }

    /// In slow start or its conservative phase: not yet in avoidance.
    pub(crate) fn before_avoidance(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// The window to advertise.
    pub(crate) fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The largest window this receiver ever advertises.
    pub(crate) fn max(&self) -> u32 {
        self.max
    }

    /// One more packet arrived in order: +1 per packet in slow start, +1 per
    /// window in congestion avoidance — or, `roomy` (no queue stands in the
    /// path, `queue.rs`), +1 per eighth of a window: an eighth more per
    /// round trip, so that after a halving the window regains an empty
    /// path's worth in a few round trips instead of one packet per round
    /// trip (at 1 Gbit/s and 50 ms, 4,464 packets: 37 minutes).
    /// `empty`: not even a few packets are queued.
    pub(crate) fn on_in_order(&mut self, roomy: bool, empty: bool) {
        if self.cwnd < self.ssthresh {
            if self.conservative {
                self.ca_count += 1;
                if self.ca_count >= CSS_GROWTH_DIVISOR {
                    self.ca_count = 0;
                    self.cwnd += 1;
                }
            } else {
                self.cwnd += 1;
            }
        } else {
            self.ca_count += 1;
            // Roomy: +1 per 8 packets, an eighth of the window per round
            // trip. (It was +1 per eighth of a window, 8 packets per round
            // trip: after a cut to 1,154 packets on a 1,785-packet path
            // — 100 Mbit/s, 200 ms — 80 round trips, 16 s, at 65% of the link.)
            //
            // Past the pipe measured at the last cut the window already
            // fills the link: an eighth more per round trip there overflowed
            // strata wanem's 12 ms queue (1,071 packets) within the round
            // trip the delay signal takes to come back, at 1 Gbit/s and
            // 100 ms (a window of 8,680 grew to 11,300 before each loss).
            // A 256th per round trip still finds a path that has grown.
            let per = match (roomy, self.pipe) {
                (true, Some(p)) if self.cwnd >= p && empty => self.cwnd.min(PAST_PIPE_PACKETS),
                (true, Some(p)) if self.cwnd >= p => self.cwnd.min(PROBE_PACKETS),
                (true, _) => self.cwnd.min(8),
                (false, _) => self.cwnd,
            };
            if self.ca_count >= per {
                self.ca_count = 0;
                self.cwnd += 1;
            }
        }
        self.cwnd = self.cwnd.min(self.max);
    }

    /// A recovery episode began: halve, and continue in congestion avoidance.
    pub(crate) fn on_loss(&mut self) {
        self.on_congestion(None, false);
    }

    /// Congestion: down to what the path carries, `pipe` packets (the
    /// arrival rate times the empty path's round trip) if measured, but
    /// never below half nor above the window now — TCP Westwood's cut
    /// (Mascolo et al., 2001). Halving, Reno's cut, empties a queue as long
    /// as the path; a shorter one empties sooner and the link then idles
    /// until the window regrows: strata wanem's 1.5 MB queue is 12 ms at
    /// 1 Gbit/s, a ninth of the path at 100 ms, and the halved window left
    /// the link idle 44% of the time until regrown. Down to the pipe, the
    /// queue drains and the link stays full.
    ///
    /// `saturated`: a queue stood, so the rate was the bottleneck's and the
    /// pipe the path's — the window grows slowly past it (`on_in_order`).
    /// Otherwise (a slow start's overflow, its rate still growing) the pipe
    /// is only what the flow sent.
    pub(crate) fn on_congestion(&mut self, pipe: Option<u32>, saturated: bool) {
        let half = (self.cwnd / 2).max(2);
        self.pipe = pipe.filter(|_| saturated);
        self.ssthresh = pipe.map_or(half, |p| p.clamp(half, self.cwnd.max(half)));
        self.cwnd = self.ssthresh;
        self.ca_count = 0;
        self.conservative = false;
        self.slow_start.on_loss();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_room_avoidance_adds_an_eighth_of_the_window_per_round_trip() {
        let mut w = Window::new(80, 1000, true);
        w.on_loss();
        assert_eq!(w.cwnd(), 40);
        for _ in 0..40 {
            w.on_in_order(true, true);
        }
        assert_eq!(w.cwnd(), 45, "+1 per 8 packets: an eighth of 40");
    }

    #[test]
    fn slow_start_doubles_per_window_then_avoidance_adds_one() {
        let mut w = Window::new(2, 1000, true);
        for _ in 0..2 {
            w.on_in_order(false, false);
        }
        assert_eq!(w.cwnd(), 4);
        w.on_loss();
        assert_eq!(w.cwnd(), 2);
        for _ in 0..2 {
            w.on_in_order(false, false);
        }
        assert_eq!(w.cwnd(), 3, "one window of packets adds one");
    }

    #[test]
    fn the_window_never_exceeds_its_bound_nor_falls_below_two_on_loss() {
        let mut w = Window::new(1, 8, true);
        for _ in 0..100 {
            w.on_in_order(true, true);
        }
        assert_eq!(w.cwnd(), 8);
        for _ in 0..10 {
            w.on_loss();
        }
        assert_eq!(w.cwnd(), 2);
    }
}
