//! Congestion control: the window that keeps a sender from overrunning the
//! network (RFC 5681), behind a small trait so algorithms are interchangeable.
//!
//! The connection owns the [`Window`] (cwnd and ssthresh, in bytes). Slow start
//! is shared ([`slow_start`]); an algorithm decides how the window grows in
//! congestion avoidance and what ssthresh becomes on a congestion event. Loss
//! *recovery* — which segments to resend, and the window while doing so — is
//! not here but in `recovery`, the same for every algorithm (as in Linux).
//!
//! - [`reno`]: NewReno's additive increase with appropriate byte counting
//!   (RFC 5681 §3.1, RFC 3465) and halving on loss.
//! - [`cubic`]: CUBIC (RFC 9438), the default, as in Linux.
//! - [`bbr`]: BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00, as
//!   Linux's `tcp_bbr.c`): a model of the path's bottleneck bandwidth and
//!   round-trip time from delivery rate samples (`rate`), a window of twice
//!   their product, and paced sending. Random loss does not shrink its
//!   window, which is what keeps a lossy long path full where CUBIC and Reno
//!   collapse to a few segments.
//!
//! Window-based algorithms grow cwnd through [`Congestion::avoid`] and leave
//! it to recovery on loss. A model-based one (BBR) sets cwnd itself on every
//! ACK through [`Congestion::on_rate_sample`], which runs after everything
//! else the ACK did (Linux's `cong_control`), and asks for pacing through
//! [`Congestion::pacing_rate`].

pub mod bbr;
pub mod cubic;
mod minmax;
pub mod reno;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use strata_core::Instant;

pub use super::rate::RateSample;

/// The congestion window and slow-start threshold of a connection, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// cwnd.
    pub cwnd: u32,
    /// ssthresh.
    pub ssthresh: u32,
    /// The sender's maximum segment size (SMSS).
    pub mss: u32,
}

impl Window {
    /// The initial window (RFC 6928: min(10·SMSS, max(2·SMSS, 14600))) with
    /// an unbounded ssthresh (RFC 5681 §3.1: "arbitrarily high").
    pub fn initial(mss: u32) -> Window {
        Window {
            cwnd: initial_window(mss),
            ssthresh: u32::MAX,
            mss,
        }
    }

    /// True in slow start.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
}

/// RFC 6928's initial window for `mss`.
pub fn initial_window(mss: u32) -> u32 {
    (10 * mss).min((2 * mss).max(14_600))
}

/// Slow start (RFC 5681 §3.1) with appropriate byte counting (RFC 3465
/// §2.2): cwnd grows by the bytes acknowledged, not beyond ssthresh; returns
/// the bytes left for congestion avoidance.
///
/// RFC 3465 caps the growth at 2·SMSS per ACK (L). Like Linux
/// (`tcp_slow_start` counts every segment acknowledged), there is no cap:
/// receivers acknowledge a batch of segments with one ACK — Linux a GRO
/// batch or a socket backlog, Strata the frames of one receive batch — and
/// with the cap such stretch ACKs would hold slow start to a fraction of its
/// doubling per round trip. Counting bytes keeps the protection RFC 3465 is
/// for: an ACK split in many grows cwnd no more than one.
pub fn slow_start(w: &mut Window, acked: u32) -> u32 {
    let grow = acked;
    let room = w.ssthresh.saturating_sub(w.cwnd);
    let used = grow.min(room);
    w.cwnd = w.cwnd.saturating_add(used);
    if used < grow {
        acked.saturating_sub(used)
    } else {
        0
    }
}

/// What an algorithm is told about an acknowledgment.
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    /// Bytes newly acknowledged.
    pub acked: u32,
    /// When.
    pub now: Instant,
    /// The smoothed round-trip time, if measured.
    pub srtt: Option<Duration>,
}

/// A congestion control algorithm.
pub trait Congestion: Send + fmt::Debug {
    /// Its name, as the `congestion` option spells it.
    fn name(&self) -> &'static str;

    /// Congestion avoidance: grows `w.cwnd` for an ACK outside recovery when
    /// not in slow start.
    fn avoid(&mut self, w: &mut Window, ack: Ack);

    /// A congestion event (fast retransmit or retransmission timeout): the new
    /// ssthresh in bytes, from the window before the event and the bytes in
    /// flight (FlightSize).
    fn ssthresh(&mut self, w: &Window, flight: u32, now: Instant) -> u32;

    /// A retransmission timeout happened (after [`ssthresh`](Self::ssthresh)).
    fn on_timeout(&mut self, now: Instant) {
        let _ = now;
    }

    /// Every ACK, last: the delivery rate sample it made and what it did. A
    /// model-based algorithm sets `w.cwnd` here; the default does nothing.
    fn on_rate_sample(&mut self, w: &mut Window, rs: &RateSample) {
        let _ = (w, rs);
    }

    /// The rate at which to pace segments, in bytes per second; `None`
    /// (the default) sends as fast as the window allows.
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
}

/// The algorithms, by name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Algorithm {
    /// CUBIC (RFC 9438).
    #[default]
    Cubic,
    /// NewReno (RFC 5681, RFC 6582).
    Reno,
    /// BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00).
    Bbr,
}

impl Algorithm {
    /// A fresh instance for a new connection.
    pub fn instance(self) -> Box<dyn Congestion> {
        match self {
            Algorithm::Cubic => Box::new(cubic::Cubic::default()),
            Algorithm::Reno => Box::new(reno::Reno::default()),
            Algorithm::Bbr => Box::new(bbr::Bbr::default()),
        }
    }
}

impl FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cubic" => Ok(Algorithm::Cubic),
            "reno" | "newreno" => Ok(Algorithm::Reno),
            "bbr" => Ok(Algorithm::Bbr),
            other => Err(format!(
                "unknown congestion control '{other}' (known: cubic, reno, bbr)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_window_follows_rfc_6928() {
        assert_eq!(initial_window(1448), 14_480);
        assert_eq!(initial_window(536), 5360);
        assert_eq!(initial_window(9000), 18_000);
    }

    #[test]
    fn slow_start_counts_bytes_even_of_stretch_acks_and_stops_at_ssthresh() {
        let mut w = Window::initial(1000);
        w.ssthresh = 18_000;
        assert_eq!(slow_start(&mut w, 500), 0);
        assert_eq!(w.cwnd, 10_500);
        assert_eq!(
            slow_start(&mut w, 5000),
            0,
            "an ACK of five segments grows cwnd by five"
        );
        assert_eq!(w.cwnd, 15_500);
        assert_eq!(slow_start(&mut w, 3500), 1000, "the rest is for avoidance");
        assert_eq!(w.cwnd, 18_000);
        assert!(!w.in_slow_start());
    }
}
