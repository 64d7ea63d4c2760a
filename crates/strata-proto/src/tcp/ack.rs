//! What an acknowledgment does to the send side (RFC 9293 §3.10.7.4, fifth
//! step): SACK blocks mark what the receiver holds, SND.UNA moves and the
//! buffer releases what it covers, the RTT is sampled, the congestion window
//! grows (RFC 5681 §3.1) or loss recovery advances, RACK looks for losses
//! and the tail loss probe episode for its end (RFC 8985), duplicate ACKs are
//! counted towards NewReno's fast retransmit, the window is updated from the
//! newest segment (SND.WL1/SND.WL2), and an acknowledged FIN moves the state
//! on.

use strata_core::{AppEvent, Cx, Instant};

use super::config::Config;
use super::congestion::{Ack, slow_start};
use super::conn::Conn;
use super::rack::Tlp;
use super::recovery::Phase;
use super::sack::{DUP_THRESH, Delivered};
use super::seq::Seq;
use super::state::State;
use super::wire::Repr;

/// The D-SACK block of an ACK (RFC 2883 §4): a first block below the
/// cumulative ACK, or within the second block.
fn dsack(blocks: &[(Seq, Seq)], ack: Seq) -> Option<(Seq, Seq)> {
    let &(l, r) = blocks.first()?;
    let inside_second = blocks.get(1).is_some_and(|&(l2, r2)| l2 <= l && r <= r2);
    (r <= ack || inside_second).then_some((l, r))
}

impl Conn {
    /// Processes the ACK field (already checked to lie within
    /// [SND.UNA − MAX.SND.WND, SND.NXT]) of a segment; `pure` when it
    /// carries neither data nor SYN/FIN.
    pub fn on_ack(&mut self, seg: &Repr, pure: bool, cfg: &Config, cx: &mut Cx) {
        let ack = seg.ack;
        let una = self.snd.una;
        let prior_in_flight = self.rec.pipe(self.snd.flight());
        let blocks = seg.options.sack.as_slice();
        let mut delivered = None;
        let mut newly_sacked = 0;
        let mut reordered = false;
        if self.rec.sack && !blocks.is_empty() {
            let s = self.rec.board.sack(blocks, ack.max(una), self.snd.nxt);
            (delivered, newly_sacked, reordered) = (s.newest, s.bytes, s.reordered);
        }
        let window = u32::from(seg.window) << self.snd.wscale;
        let repeated = ack == una && pure && self.snd.flight() > 0;
        if ack > una {
            delivered = Delivered::newest(delivered, self.ack_new_data(seg, cx));
        } else if repeated {
            // RFC 5681 §2's duplicate ACK; with SACK, one that reports new data
            // (RFC 6675 §2).
            let duplicate = if self.rec.sack {
                newly_sacked > 0
            } else {
                window == self.snd.wnd
            };
            if duplicate {
                self.duplicate_ack(cx);
            }
        }
        if self.rec.sack {
            let dup_without_sack = repeated && blocks.is_empty();
            self.rack_on_ack(seg, delivered, reordered, dup_without_sack, cx);
        }
        self.on_rate_sample(prior_in_flight, cx.now());
        if self.snd.wl1 < seg.seq || (self.snd.wl1 == seg.seq && self.snd.wl2 <= ack) {
            self.snd.wnd = window;
            self.snd.wl1 = seg.seq;
            self.snd.wl2 = ack;
            self.snd.max_wnd = self.snd.max_wnd.max(window);
        }
        if self.snd.fin_acked() {
            self.fin_acked(cfg, cx);
        }
    }

    /// Cumulative acknowledgment of new data; returns the most recently sent
    /// segment it delivered.
    fn ack_new_data(&mut self, seg: &Repr, cx: &mut Cx) -> Option<Delivered> {
        let now = cx.now();
        let ack = seg.ack;
        let mss = self.snd.mss;
        let acked = ack.since(self.snd.una);
        let flight_before = self.snd.flight();
        let phase = self.rec.phase;
        self.snd.una = ack;
        let data_acked_to = ack.min(self.snd.data_end());
        let first_held = self.snd.seq_of(self.snd.buf.start());
        if data_acked_to > first_held {
            let offset = self.snd.offset_of(data_acked_to);
            self.stats.bytes_acked += offset - self.snd.buf.start();
            self.snd.buf.release_to(offset);
        }
        let delivered = self.rec.board.advance(ack);
        self.retries = 0;
        if let Some(sample) = self.rtt_sample(seg, now) {
            self.rto.sample(sample);
            self.rec.rack.observe_rtt(sample);
        }
        // RFC 6298 §5.3: restart the timer (re-armed by `schedule`), and the
        // probe timer with it (RFC 8985 §7.2).
        let kept = self.timers.retransmit.take();
        self.timers.probe = None;
        let full = self.rec.advanced(ack);
        match phase {
            // RFC 5681 §3.2 step 6: the full ACK leaves cwnd at ssthresh, as
            // Linux does; with SACK the recovery sent no more than pipe
            // allowed, so no burst follows.
            Phase::Recovery if full && self.rec.sack => {
                self.win.cwnd = self.win.ssthresh;
            }
            // RFC 6582 §3.2 step 6, option 1: NewReno's inflated window
            // could burst; what is in flight bounds it.
            Phase::Recovery if full => {
                let flight = self.snd.flight().max(mss);
                self.win.cwnd = self.win.ssthresh.min(flight + mss);
            }
            Phase::Recovery if !self.rec.sack => {
                // RFC 6582 §3.2 step 5: a partial ACK deflates cwnd by what it
                // acknowledged, giving one segment back when that was a full one.
                let back = if acked >= mss { mss } else { 0 };
                self.win.cwnd = self.win.cwnd.saturating_sub(acked).saturating_add(back);
                self.rec.resend_first = true;
                // Only the first partial ACK restarts the timer (the
                // "impatient" variant), so a long recovery still times out.
                if self.rec.partial_seen {
                    self.timers.retransmit = kept;
                }
                self.rec.partial_seen = true;
            }
            Phase::Recovery => {}
            Phase::Open | Phase::Loss => self.grow(acked, flight_before, now),
        }
        let limited = flight_before + mss > self.win.cwnd;
        self.snd.expand(self.win.cwnd, limited);
        if self.snd.take_writable() {
            let session = self.session(cx);
            self.notify(cx, AppEvent::Writable(session));
        }
        delivered
    }

    /// Hands the ACK's delivery rate sample to the congestion control, last,
    /// so that a model-based algorithm has the final word on cwnd whatever
    /// slow start or recovery did with it (Linux's `tcp_cong_control`).
    fn on_rate_sample(&mut self, prior_in_flight: u32, now: Instant) {
        let min_rtt = self.rec.rack.min_rtt();
        let mut rs = self.rec.board.rate.sample(now, min_rtt);
        rs.prior_in_flight = prior_in_flight;
        rs.in_flight = self.rec.pipe(self.snd.flight());
        rs.recovering = self.rec.recovering();
        self.cc.on_rate_sample(&mut self.win, &rs);
    }

    /// RACK (RFC 8985 §6.2) and the end of a probe episode (§7.4) for an ACK
    /// that delivered `delivered`.
    fn rack_on_ack(
        &mut self,
        seg: &Repr,
        delivered: Option<Delivered>,
        reordered: bool,
        dup_without_sack: bool,
        cx: &mut Cx,
    ) {
        let now = cx.now();
        if let Some(d) = delivered {
            self.rec.rack.update(d, now);
        }
        self.rec.rack.reord |= reordered;
        let dsack = dsack(seg.options.sack.as_slice(), seg.ack);
        let seen = self.rec.tlp.classify(dsack);
        self.rec.rack.on_ack_dsack(self.snd.una, self.snd.nxt, seen);
        if self.rec.tlp.on_ack(self.snd.una, dsack, dup_without_sack) && !self.rec.recovering() {
            // The probe repaired a loss nobody reduced the window for.
            let flight = self.snd.flight();
            self.win.ssthresh = self.cc.ssthresh(&self.win, flight, now);
            self.win.cwnd = self.win.ssthresh;
            cx.count("tlp-recovery");
        }
        self.detect_losses(cx);
    }

    /// Runs RACK's loss detection; starts fast recovery at the first loss and
    /// arms the reordering timer for segments whose window is still open.
    pub fn detect_losses(&mut self, cx: &mut Cx) {
        if self.rec.board.sacked() == 0 && !self.rec.recovering() {
            // Without SACKs outside recovery, what is outstanding was sent
            // after everything delivered: nothing to find.
            self.timers.reorder = None;
            return;
        }
        let now = cx.now();
        let reo_wnd = self.rec.rack.reo_wnd(
            self.rec.recovering(),
            self.rec.board.sacked_segments(),
            self.rto.srtt(),
        );
        let marked = self.rec.rack.detect(&mut self.rec.board, now, reo_wnd);
        self.timers.reorder = marked.wait.map(|w| now + w);
        self.stats.lost_retransmits += u64::from(marked.retransmissions);
        if marked.retransmissions > 0 {
            cx.count_n("lost-retransmit", u64::from(marked.retransmissions));
        }
        if marked.bytes > 0 && self.rec.phase == Phase::Open {
            self.enter_recovery(cx);
        }
    }

    /// Grows cwnd for `acked` bytes when the window was what limited the
    /// sender (Linux's `tcp_is_cwnd_limited`: in slow start, when at least
    /// half of it was in use), so an idle or application-limited connection
    /// does not build a window it never tested.
    fn grow(&mut self, acked: u32, flight_before: u32, now: Instant) {
        let limited = if self.win.in_slow_start() {
            self.win.cwnd < 2 * flight_before
        } else {
            flight_before + self.snd.mss > self.win.cwnd
        };
        if !limited {
            return;
        }
        let rest = if self.win.in_slow_start() {
            slow_start(&mut self.win, acked)
        } else {
            acked
        };
        if rest > 0 && !self.win.in_slow_start() {
            let ack = Ack {
                acked: rest,
                now,
                srtt: self.rto.srtt(),
            };
            self.cc.avoid(&mut self.win, ack);
        }
    }

    /// A duplicate ACK: NewReno counts them towards fast retransmit (RFC 5681
    /// §3.2) and inflates cwnd in recovery; with SACK, RACK decides instead.
    fn duplicate_ack(&mut self, cx: &mut Cx) {
        self.rec.dupacks += 1;
        if self.rec.sack {
            return;
        }
        match self.rec.phase {
            Phase::Open => {
                if self.rec.dupacks >= DUP_THRESH && self.rec.may_enter(self.snd.una) {
                    self.enter_recovery(cx);
                }
            }
            // RFC 6582 §3.2 step 4: each further duplicate inflates cwnd.
            Phase::Recovery => {
                self.win.cwnd = self.win.cwnd.saturating_add(self.snd.mss);
            }
            Phase::Loss => {}
        }
    }

    /// Fast recovery begins (RFC 5681 §3.2, RFC 6675 §5): ssthresh from the
    /// congestion control, cwnd = ssthresh (+ 3·SMSS for NewReno, whose
    /// window the duplicates inflate).
    fn enter_recovery(&mut self, cx: &mut Cx) {
        let flight = self.snd.flight();
        self.win.ssthresh = self.cc.ssthresh(&self.win, flight, cx.now());
        self.win.cwnd = if self.rec.sack {
            self.win.ssthresh
        } else {
            self.win.ssthresh.saturating_add(3 * self.snd.mss)
        };
        self.rec.enter(self.snd.nxt);
        // The recovery answers for whatever loss a probe under way finds.
        self.rec.tlp = Tlp::default();
        self.timers.probe = None;
        self.stats.fast_recoveries += 1;
        cx.count("fast-retransmit");
    }

    fn fin_acked(&mut self, cfg: &Config, cx: &mut Cx) {
        match self.state.after_fin_acked() {
            State::FinWait2 if self.state == State::FinWait1 => {
                self.state = State::FinWait2;
                self.orphan_linger(cfg, cx.now());
            }
            State::TimeWait if self.state == State::Closing => self.enter_time_wait(cfg, cx),
            State::Closed => self.terminate(None, cx),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dsack_is_a_first_block_below_the_ack_or_inside_the_second() {
        let b = |v: &[(u32, u32)]| v.iter().map(|&(l, r)| (Seq(l), Seq(r))).collect::<Vec<_>>();
        assert_eq!(
            dsack(&b(&[(900, 1000)]), Seq(1000)),
            Some((Seq(900), Seq(1000)))
        );
        assert_eq!(
            dsack(&b(&[(1200, 1300), (1100, 1400)]), Seq(1000)),
            Some((Seq(1200), Seq(1300)))
        );
        assert_eq!(dsack(&b(&[(1200, 1300), (1400, 1500)]), Seq(1000)), None);
        assert_eq!(dsack(&[], Seq(1000)), None);
    }
}
