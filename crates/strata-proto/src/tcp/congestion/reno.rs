//! NewReno's window (RFC 5681 §3.1): additive increase of one SMSS per
//! window acknowledged, counted in bytes (RFC 3465 §2.1), and ssthresh =
//! max(FlightSize/2, 2·SMSS) on congestion (RFC 5681 equation 4). Its loss
//! recovery without SACK (RFC 6582) lives in `recovery`.

use super::{Ack, Congestion, Window};
use strata_core::Instant;

/// NewReno.
#[derive(Clone, Debug, Default)]
pub struct Reno {
    /// Bytes acknowledged since cwnd last grew in congestion avoidance.
    acked: u32,
}

impl Congestion for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn avoid(&mut self, w: &mut Window, ack: Ack) {
        self.acked = self.acked.saturating_add(ack.acked);
        if self.acked >= w.cwnd {
            self.acked -= w.cwnd;
            w.cwnd = w.cwnd.saturating_add(w.mss);
        }
    }

    fn ssthresh(&mut self, w: &Window, flight: u32, _now: Instant) -> u32 {
        self.acked = 0;
        (flight / 2).max(2 * w.mss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(acked: u32) -> Ack {
        Ack {
            acked,
            now: Instant::ZERO,
            srtt: None,
        }
    }

    #[test]
    fn avoidance_adds_one_segment_per_window_acknowledged() {
        let mut r = Reno::default();
        let mut w = Window {
            cwnd: 10_000,
            ssthresh: 5_000,
            mss: 1000,
        };
        for _ in 0..9 {
            r.avoid(&mut w, ack(1000));
        }
        assert_eq!(w.cwnd, 10_000);
        r.avoid(&mut w, ack(1000));
        assert_eq!(w.cwnd, 11_000);
    }

    #[test]
    fn a_congestion_event_halves_the_flight_but_keeps_two_segments() {
        let mut r = Reno::default();
        let w = Window::initial(1000);
        assert_eq!(r.ssthresh(&w, 30_000, Instant::ZERO), 15_000);
        assert_eq!(r.ssthresh(&w, 3_000, Instant::ZERO), 2_000);
    }
}
