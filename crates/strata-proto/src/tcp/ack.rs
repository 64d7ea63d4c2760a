//! What an acknowledgment does to the send side (RFC 9293 §3.10.7.4, fifth
//! step): SND.UNA moves and the buffer releases what it covers, the RTT is
//! sampled, the congestion window grows (RFC 5681 §3.1) or loss recovery
//! advances, duplicate ACKs and SACKs are counted towards fast retransmit,
//! the window is updated from the newest segment (SND.WL1/SND.WL2), and an
//! acknowledged FIN moves the state on.

use strata_core::{AppEvent, Cx, Instant};

use super::config::Config;
use super::congestion::{Ack, slow_start};
use super::conn::Conn;
use super::recovery::Phase;
use super::sack::DUP_THRESH;
use super::seq::Seq;
use super::state::State;
use super::wire::Repr;

impl Conn {
    /// Processes the ACK field (already checked to lie within
    /// [SND.UNA − MAX.SND.WND, SND.NXT]) of a segment; `pure` when it
    /// carries neither data nor SYN/FIN.
    pub fn on_ack(&mut self, seg: &Repr, pure: bool, cfg: &Config, cx: &mut Cx) {
        let ack = seg.ack;
        let una = self.snd.una;
        let newly_sacked = if self.rec.sack && !seg.options.sack.is_empty() {
            self.rec
                .board
                .add(seg.options.sack.as_slice(), ack.max(una), self.snd.nxt)
        } else {
            0
        };
        let window = u32::from(seg.window) << self.snd.wscale;
        if ack > una {
            self.ack_new_data(seg, cx);
        } else if ack == una && pure && self.snd.flight() > 0 {
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

    fn ack_new_data(&mut self, seg: &Repr, cx: &mut Cx) {
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
        self.retries = 0;
        if let Some(sample) = self.rtt_sample(seg, now) {
            self.rto.sample(sample);
        }
        // RFC 6298 §5.3: restart the timer (re-armed by `schedule`).
        let kept = self.timers.retransmit.take();
        let full = self.rec.advanced(ack);
        match phase {
            Phase::Recovery if full => {
                let flight = self.snd.flight().max(mss);
                self.win.cwnd = self.win.ssthresh.min(flight + mss);
            }
            Phase::Recovery if !self.rec.sack => {
                // RFC 6582 §3.2 step 5: a partial ACK deflates cwnd by what it
                // acknowledged, giving one segment back when that was a full one.
                let back = if acked >= mss { mss } else { 0 };
                self.win.cwnd = self.win.cwnd.saturating_sub(acked).saturating_add(back);
                self.rec.resend_una = true;
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

    fn duplicate_ack(&mut self, cx: &mut Cx) {
        let (una, nxt, mss) = (self.snd.una, self.snd.nxt, self.snd.mss);
        self.rec.dupacks += 1;
        match self.rec.phase {
            Phase::Open => {
                let lost =
                    self.rec.sack && self.rec.board.lost_below(mss).is_some_and(|l: Seq| l > una);
                if (self.rec.dupacks >= DUP_THRESH || lost) && self.rec.may_enter(una) {
                    let flight = self.snd.flight();
                    self.win.ssthresh = self.cc.ssthresh(&self.win, flight, cx.now());
                    self.win.cwnd = if self.rec.sack {
                        self.win.ssthresh
                    } else {
                        self.win.ssthresh.saturating_add(3 * mss)
                    };
                    self.rec.enter(una, nxt);
                    self.stats.fast_recoveries += 1;
                    cx.count("fast-retransmit");
                }
            }
            // RFC 6582 §3.2 step 4: each further duplicate inflates cwnd.
            Phase::Recovery if !self.rec.sack => {
                self.win.cwnd = self.win.cwnd.saturating_add(mss);
            }
            _ => {}
        }
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
