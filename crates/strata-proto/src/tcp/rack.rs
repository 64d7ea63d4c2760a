//! RACK-TLP (RFC 8985): loss detection by time, for connections with SACK.
//!
//! **RACK** (§6) deems a segment lost once a segment sent after it has been
//! delivered (SACKed or cumulatively acknowledged) and a reordering window
//! has passed: `xmit + RACK.rtt + reo_wnd <= now`, where RACK.rtt is the
//! round trip of that most recently sent delivered segment. Counting time
//! rather than duplicate ACKs is what repairs a *lost retransmission*: the
//! retransmission has a transmit time of its own, so once data sent after it
//! is SACKed it is deemed lost again and resent, where RFC 6675's HighRxt
//! rule resends a byte once per recovery and leaves the rest to the
//! retransmission timer. Without reordering seen, the window is zero once in
//! recovery or once DupThresh segments are SACKed (§6.2 step 4), which is
//! RFC 6675's rule in time; otherwise a quarter of the minimum RTT. A segment
//! not yet past its window arms the reordering timer (§6.3).
//!
//! **TLP** (§7) sends a probe when no ACK has come for a probe timeout (PTO,
//! about two round trips) outside recovery: one new segment if the window
//! allows, else the last segment again. Its ACK, with SACK, lets RACK find a
//! lost tail that would otherwise wait for the retransmission timer and its
//! window collapse. A probe that resent data and turns out to have repaired a
//! loss (its ACK covers it and more, with no D-SACK saying the original
//! arrived) gets the congestion response of a fast recovery (§7.4).
//!
//! The window grows by a quarter of the minimum RTT for every round trip in
//! which a D-SACK says a segment deemed lost had arrived after all (§6.2 step
//! 4's `reo_wnd_mult`), up to SRTT, and falls back after sixteen recoveries
//! without one: a path that reorders by more than the window stops costing a
//! spurious retransmission per reordering.
//!
//! Left out: the minimum RTT is the least seen over the connection's life
//! rather than over a sliding window.

use std::time::Duration;

use strata_core::Instant;

use super::sack::{DUP_THRESH, Delivered, Marked, Scoreboard, Verdict};
use super::seq::Seq;

/// WCDelAckT (RFC 8985 §7.2): the longest a receiver is expected to delay
/// an ACK, added to the PTO when only one segment is in flight.
pub const WC_DEL_ACK: Duration = Duration::from_millis(200);

/// The least PTO: on a path of microseconds two SRTTs would probe on every
/// pause of the sender. Linux long had this floor in
/// `tcp_schedule_loss_probe` (it now adds two clock ticks instead).
pub const MIN_PTO: Duration = Duration::from_millis(10);

/// Recoveries without a D-SACK after which the reordering window's
/// multiplier falls back to 1 (RFC 8985 §6.2 step 4).
const REO_WND_PERSIST: u8 = 16;

/// Largest reordering window multiplier. The window never exceeds SRTT
/// anyway; the bound keeps the product from overflowing.
const MAX_REO_WND_MULT: u32 = 64;

/// RACK's state (RFC 8985 §5.2).
#[derive(Clone, Copy, Debug)]
pub struct Rack {
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent segment
    /// delivered so far.
    latest: Option<Delivered>,
    /// RACK.rtt: the round trip of that segment.
    rtt: Duration,
    /// RACK.min_RTT.
    min_rtt: Option<Duration>,
    /// RACK.reord: the network has been seen to reorder.
    pub reord: bool,
    /// RACK.reo_wnd_mult: the reordering window in quarters of min_RTT.
    reo_wnd_mult: u32,
    /// RACK.reo_wnd_persist: recoveries left before the multiplier resets.
    reo_wnd_persist: u8,
    /// RACK.dsack_round: SND.NXT when the multiplier last grew; it grows at
    /// most once per round trip.
    dsack_round: Option<Seq>,
}

impl Default for Rack {
    fn default() -> Rack {
        Rack {
            latest: None,
            rtt: Duration::ZERO,
            min_rtt: None,
            reord: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
        }
    }
}

impl Rack {
    /// A round-trip sample from anywhere (the RTO estimator's too).
    pub fn observe_rtt(&mut self, sample: Duration) {
        self.min_rtt = Some(self.min_rtt.map_or(sample, |m| m.min(sample)));
    }

    /// RACK.min_RTT: the least round trip seen.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// RFC 8985 §6.2 step 2: `d` was newly delivered at `now`. For a
    /// retransmitted segment the ACK may answer an earlier copy: it is not
    /// used when the round trip would be shorter than any seen. The RFC's
    /// other test, a TSecr older than this copy, is left out, as Linux leaves
    /// it out: TS.Recent does not follow out-of-order segments (RFC 7323
    /// §4.3), so the SACK of a retransmission that arrived out of order — a
    /// tail loss probe's, say — echoes an older TSval. True when used.
    pub fn update(&mut self, d: Delivered, now: Instant) -> bool {
        let rtt = now.saturating_since(d.xmit);
        if d.retransmitted && self.min_rtt.is_some_and(|m| rtt < m) {
            return false;
        }
        self.rtt = rtt;
        self.observe_rtt(rtt);
        if self.latest.is_none_or(|l| d.sent_after(l.order)) {
            self.latest = Some(d);
        }
        true
    }

    /// RFC 8985 §6.2 step 4, D-SACK adaptation: an ACK at `una` came with
    /// SND.NXT at `nxt`, carrying what `dsack` says. The first D-SACK of a
    /// round trip widens the window by one step.
    ///
    /// A D-SACK other than a tail loss probe's also counts as reordering
    /// seen (as Linux counts an undone retransmission): step 3 sees only
    /// originals delivered out of order, and an original that comes later
    /// than its reordering window is never one — it was retransmitted first —
    /// so without this the window would stay shut (zero once DupThresh
    /// segments are SACKed) however late the path delivers. A probe's
    /// duplicate says only that the tail was slow, as the probe meant to ask.
    pub fn on_ack_dsack(&mut self, una: Seq, nxt: Seq, dsack: Dsack) {
        if self.dsack_round.is_some_and(|r| una >= r) {
            self.dsack_round = None;
        }
        if dsack == Dsack::Absent {
            return;
        }
        self.reord |= dsack == Dsack::Other;
        if self.dsack_round.is_none() {
            self.dsack_round = Some(nxt);
            self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(MAX_REO_WND_MULT);
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// RFC 8985 §6.2 step 4: a fast or RTO recovery ended; after sixteen
    /// without a D-SACK the window is back to one step.
    pub fn recovery_ended(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// RFC 8985 §6.2 step 4: the reordering window.
    pub fn reo_wnd(
        &self,
        recovering: bool,
        sacked_segments: u32,
        srtt: Option<Duration>,
    ) -> Duration {
        if !self.reord && (recovering || sacked_segments >= DUP_THRESH) {
            return Duration::ZERO;
        }
        let steps = self.min_rtt.unwrap_or_default() / 4 * self.reo_wnd_mult;
        srtt.map_or(steps, |s| steps.min(s))
    }

    /// RFC 8985 §6.2 step 5: marks lost every segment sent before the latest
    /// delivered one whose reordering window has passed; `wait` says when to
    /// look again for the others.
    pub fn detect(&self, board: &mut Scoreboard, now: Instant, reo_wnd: Duration) -> Marked {
        let Some(latest) = self.latest else {
            return Marked::default();
        };
        let rtt = self.rtt;
        board.mark_lost(|s| {
            if !latest.sent_after(s.order) {
                return Verdict::Keep;
            }
            let deadline = s.xmit + rtt + reo_wnd;
            if deadline <= now {
                Verdict::Lost
            } else {
                Verdict::Wait(deadline.saturating_since(now))
            }
        })
    }
}

/// What an ACK's D-SACK block (RFC 2883) reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dsack {
    /// The ACK carried none.
    Absent,
    /// The duplicate of a tail loss probe's resent data.
    OfProbe,
    /// Any other duplicate: a retransmission deemed lost that was not, or
    /// the network's own duplicate.
    Other,
}

/// A tail loss probe episode (RFC 8985 §7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tlp {
    /// TLP.end_seq: SND.NXT when the probe went; `None` outside an episode.
    pub end: Option<Seq>,
    /// TLP.is_retrans: the range the probe resent, when it was not new data.
    pub resent: Option<(Seq, Seq)>,
}

impl Tlp {
    /// What the D-SACK block `dsack`, if any, reports about this episode.
    pub fn classify(&self, dsack: Option<(Seq, Seq)>) -> Dsack {
        match (dsack, self.resent) {
            (None, _) => Dsack::Absent,
            (Some((l, r)), Some((start, stop))) if l <= start && stop <= r => Dsack::OfProbe,
            (Some(_), _) => Dsack::Other,
        }
    }

    /// RFC 8985 §7.4: what an ACK up to `ack` says about the episode, with
    /// the D-SACK block it carried (RFC 2883) and whether it was a duplicate
    /// without SACK information. True when the probe repaired a loss the
    /// congestion window has not yet answered for.
    pub fn on_ack(&mut self, ack: Seq, dsack: Option<(Seq, Seq)>, dup_without_sack: bool) -> bool {
        let Some(end) = self.end else {
            return false;
        };
        if ack < end {
            return false;
        }
        if self.resent.is_none() {
            // New data probed: delivered, nothing to answer for.
            *self = Tlp::default();
            return false;
        }
        if self.classify(dsack) == Dsack::OfProbe {
            // The original arrived too: the probe was not needed.
            *self = Tlp::default();
            return false;
        }
        if ack > end || dup_without_sack {
            *self = Tlp::default();
            return true;
        }
        false
    }
}

/// RFC 8985 §7.2's probe timeout for a flight of `flight` bytes, before
/// the RTO bounds it; `None` before the first round trip is measured (the
/// RTO is then the only timer).
pub fn pto(srtt: Option<Duration>, flight: u32, mss: u32) -> Option<Duration> {
    let mut pto = srtt? * 2;
    if flight <= mss {
        pto += WC_DEL_ACK;
    }
    Some(pto.max(MIN_PTO))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 100;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Segments 1000–1100 … 1900–2000 sent at 0, 1, … 9 ms.
    fn board() -> Scoreboard {
        let mut b = Scoreboard::default();
        for i in 0..10 {
            b.sent(
                Seq(1000 + i * 100),
                Seq(1100 + i * 100),
                at(u64::from(i)),
                MSS,
            );
        }
        b
    }

    fn sack(b: &mut Scoreboard, l: u32, r: u32) -> Delivered {
        b.sack(&[(Seq(l), Seq(r))], Seq(1000), Seq(2000))
            .newest
            .unwrap()
    }

    /// The board with 1100–1400 SACKed at 53 ms (three segments: DupThresh)
    /// and RACK having seen them, with 40 ms measured before.
    fn three_sacked_at_53() -> (Scoreboard, Rack) {
        let mut b = board();
        let mut r = Rack::default();
        r.observe_rtt(ms(40));
        for (l, h) in [(1100, 1200), (1200, 1300), (1300, 1400)] {
            let d = sack(&mut b, l, h);
            r.update(d, at(53));
        }
        (b, r)
    }

    #[test]
    fn a_segment_is_lost_once_a_later_one_is_delivered_and_the_window_has_passed() {
        let mut b = board();
        let mut r = Rack::default();
        r.observe_rtt(ms(40));
        // 1100–1200 (sent at 1 ms) is SACKed at 51 ms: RACK.rtt = 50 ms.
        let d = sack(&mut b, 1100, 1200);
        assert!(r.update(d, at(51)));
        let reo = r.reo_wnd(false, b.sacked_segments(), Some(ms(50)));
        assert_eq!(reo, ms(10), "a quarter of the minimum RTT");
        let m = r.detect(&mut b, at(51), reo);
        assert_eq!(m.bytes, 0, "1000–1100 gets its reordering window");
        assert_eq!(m.wait, Some(ms(9)), "0 + 50 + 10 − 51");
        let m = r.detect(&mut b, at(60), reo);
        assert_eq!((m.bytes, b.first_lost()), (100, Some((Seq(1000), 100))));
    }

    #[test]
    fn with_dupthresh_segments_sacked_the_window_closes() {
        let (mut b, mut r) = three_sacked_at_53();
        let reo = r.reo_wnd(false, b.sacked_segments(), Some(ms(50)));
        assert_eq!(reo, Duration::ZERO);
        assert_eq!(r.detect(&mut b, at(53), reo).bytes, 100);
        r.reord = true;
        assert_eq!(
            r.reo_wnd(true, 3, Some(ms(50))),
            ms(10),
            "but not once reordering was seen"
        );
    }

    #[test]
    fn each_round_with_a_dsack_widens_the_window_up_to_srtt() {
        let mut r = Rack::default();
        r.observe_rtt(ms(40));
        let wnd = |r: &Rack| r.reo_wnd(true, 3, Some(ms(35)));
        assert_eq!(wnd(&r), Duration::ZERO, "no reordering seen, in recovery");
        r.on_ack_dsack(Seq(1000), Seq(5000), Dsack::OfProbe);
        assert!(!r.reord, "a probe's duplicate is not reordering");
        r.on_ack_dsack(Seq(2000), Seq(6000), Dsack::Other);
        assert!(r.reord, "any other D-SACK is");
        assert_eq!(
            wnd(&r),
            ms(20),
            "two quarters of min_RTT: once per round trip"
        );
        r.on_ack_dsack(Seq(5000), Seq(7000), Dsack::Other);
        assert_eq!(wnd(&r), ms(30), "the next round's D-SACK");
        r.on_ack_dsack(Seq(7000), Seq(8000), Dsack::Absent);
        r.on_ack_dsack(Seq(7100), Seq(8000), Dsack::Other);
        assert_eq!(wnd(&r), ms(35), "capped at SRTT");
    }

    #[test]
    fn sixteen_recoveries_without_a_dsack_shrink_the_window_back() {
        let mut r = Rack::default();
        r.observe_rtt(ms(40));
        r.reord = true;
        r.on_ack_dsack(Seq(1000), Seq(5000), Dsack::Other);
        for _ in 0..15 {
            r.recovery_ended();
        }
        assert_eq!(r.reo_wnd(false, 0, None), ms(20), "fifteen are not enough");
        r.recovery_ended();
        assert_eq!(r.reo_wnd(false, 0, None), ms(10));
        r.recovery_ended();
        assert_eq!(
            r.reo_wnd(false, 0, None),
            ms(10),
            "and it stays at one step"
        );
    }

    #[test]
    fn a_lost_retransmission_is_found_by_what_was_sent_after_it() {
        let (mut b, mut r) = three_sacked_at_53();
        r.detect(&mut b, at(53), Duration::ZERO);
        // 1000–1100 resent at 53 ms, then new data 2000–2100 at 54 ms.
        b.retransmitted(Seq(1000), Seq(1100), at(53));
        b.sent(Seq(2000), Seq(2100), at(54), MSS);
        // The new data is SACKed at 95 ms, the retransmission is not.
        let d = b
            .sack(&[(Seq(2000), Seq(2100))], Seq(1000), Seq(2100))
            .newest
            .unwrap();
        assert!(r.update(d, at(95)));
        let m = r.detect(&mut b, at(95), Duration::ZERO);
        assert_eq!(m.retransmissions, 1, "the retransmission was lost too");
        assert_eq!(b.first_lost(), Some((Seq(1000), 100)));
    }

    #[test]
    fn a_retransmission_sent_after_new_data_at_the_same_instant_is_not_condemned_by_it() {
        let (mut b, mut r) = three_sacked_at_53();
        r.detect(&mut b, at(53), Duration::ZERO);
        // At 53 ms new data goes first, then the retransmission.
        b.sent(Seq(2000), Seq(2100), at(53), MSS);
        b.retransmitted(Seq(1000), Seq(1100), at(53));
        let d = b
            .sack(&[(Seq(2000), Seq(2100))], Seq(1000), Seq(2100))
            .newest
            .unwrap();
        assert!(r.update(d, at(93)));
        let m = r.detect(&mut b, at(93), Duration::ZERO);
        assert_eq!(m.retransmissions, 0, "the retransmission left later");
    }

    #[test]
    fn an_ack_of_an_earlier_copy_does_not_time_a_retransmission() {
        let mut r = Rack::default();
        r.observe_rtt(ms(40));
        let d = Delivered {
            xmit: at(100),
            order: 1,
            end: Seq(1100),
            retransmitted: true,
        };
        assert!(!r.update(d, at(101)), "1 ms: shorter than any round trip");
        assert!(r.update(d, at(150)));
    }

    #[test]
    fn a_probe_that_resent_data_answers_for_a_loss_unless_a_dsack_says_otherwise() {
        let probe = Tlp {
            end: Some(Seq(2000)),
            resent: Some((Seq(1900), Seq(2000))),
        };
        let mut t = probe;
        assert!(!t.on_ack(Seq(1900), None, false), "not yet covered");
        assert!(!t.on_ack(Seq(2000), None, false), "wait for more");
        assert!(t.on_ack(Seq(2100), None, false), "repaired a loss");
        assert_eq!(t, Tlp::default());
        let mut t = probe;
        let dsack = Some((Seq(1900), Seq(2000)));
        assert!(!t.on_ack(Seq(2000), dsack, false), "both copies arrived");
        assert_eq!(t.end, None);
        let mut t = Tlp {
            end: Some(Seq(2000)),
            resent: None,
        };
        assert!(!t.on_ack(Seq(2000), None, false), "new data probed");
        assert_eq!(t.end, None);
    }

    #[test]
    fn the_probe_timeout_is_two_round_trips_and_waits_for_a_delayed_ack_of_one_segment() {
        assert_eq!(pto(Some(ms(50)), 10 * MSS, MSS), Some(ms(100)));
        assert_eq!(pto(Some(ms(50)), MSS, MSS), Some(ms(300)));
        assert_eq!(
            pto(Some(Duration::from_micros(20)), 10 * MSS, MSS),
            Some(MIN_PTO)
        );
        assert_eq!(pto(None, MSS, MSS), None);
    }
}
