//! The receiver-driven congestion window (§2.1, §3.1): the receiver grows it
//! by slow start and congestion avoidance as data arrives in order, halves
//! it once per recovery episode, and sends it to the sender in every control
//! packet.
//!
//! The paper restarts slow start from one packet after each recovery (Tahoe).
//! We halve instead (Reno's multiplicative decrease): at the RTTs of §4 a
//! restart from one packet costs many round trips per loss.

/// Congestion window state, in packets.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    cwnd: u32,
    ssthresh: u32,
    ca_count: u32,
    max: u32,
}

impl Window {
    pub(crate) fn new(initial: u32, max: u32) -> Self {
        Window {
            cwnd: initial.clamp(1, max.max(1)),
            ssthresh: max.max(1),
            ca_count: 0,
            max: max.max(1),
        }
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
    /// window in congestion avoidance.
    pub(crate) fn on_in_order(&mut self) {
        if self.cwnd < self.ssthresh {
            self.cwnd += 1;
        } else {
            self.ca_count += 1;
            if self.ca_count >= self.cwnd {
                self.ca_count = 0;
                self.cwnd += 1;
            }
        }
        self.cwnd = self.cwnd.min(self.max);
    }

    /// A recovery episode began: halve, and continue in congestion avoidance.
    pub(crate) fn on_loss(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(2);
        self.cwnd = self.ssthresh;
        self.ca_count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_doubles_per_window_then_avoidance_adds_one() {
        let mut w = Window::new(2, 1000);
        for _ in 0..2 {
            w.on_in_order();
        }
        assert_eq!(w.cwnd(), 4);
        w.on_loss();
        assert_eq!(w.cwnd(), 2);
        for _ in 0..2 {
            w.on_in_order();
        }
        assert_eq!(w.cwnd(), 3, "one window of packets adds one");
    }

    #[test]
    fn the_window_never_exceeds_its_bound_nor_falls_below_two_on_loss() {
        let mut w = Window::new(1, 8);
        for _ in 0..100 {
            w.on_in_order();
        }
        assert_eq!(w.cwnd(), 8);
        for _ in 0..10 {
            w.on_loss();
        }
        assert_eq!(w.cwnd(), 2);
    }
}
