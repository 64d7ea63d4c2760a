//! A connection's timers (RFC 9293 §3.8): retransmission (RFC 6298 §5), the
//! tail loss probe and RACK's reordering timer (RFC 8985 §7.2, §6.3),
//! persist with backoff and window probes (RFC 9293 §3.8.6.1), delayed ACK
//! (§3.8.6.3), keepalive (RFC 1122 §4.2.3.6), pacing (`output`) and the
//! linger timers — TIME-WAIT's 2·MSL (§3.6.1) and the FIN-WAIT-2 timeout of
//! a closed session.
//!
//! Each timer is only a deadline; one engine timer per connection is armed at
//! the earliest of them. Moving a deadline later (every ACK restarts the
//! retransmission timer) costs nothing: the engine timer fires early, finds
//! nothing due and is armed again. Only an earlier deadline re-arms it, so a
//! busy connection does not churn the engine's timer queue.

use std::time::Duration;

use strata_core::{AppEvent, Cx, Instant, TimerId, UpiError};

use super::config::Config;
use super::conn::Conn;
use super::rack::pto;
use super::recovery::Phase;
use super::state::State;

/// The deadlines of one connection.
#[derive(Debug, Default)]
pub struct Deadlines {
    /// Retransmission timeout (SYN, data or FIN outstanding).
    pub retransmit: Option<Instant>,
    /// Tail loss probe (RFC 8985 §7.2): outside recovery, with SACK.
    pub probe: Option<Instant>,
    /// RACK's reordering timer (RFC 8985 §6.3): a segment becomes lost then
    /// unless an ACK comes first.
    pub reorder: Option<Instant>,
    /// Persist: the peer's window stops us and nothing is in flight.
    pub persist: Option<Instant>,
    /// Delayed ACK.
    pub delack: Option<Instant>,
    /// Keepalive.
    pub keepalive: Option<Instant>,
    /// TIME-WAIT, or FIN-WAIT-2 of a closed session.
    pub linger: Option<Instant>,
    /// Pacing lets the next segment go (`output`).
    pub pace: Option<Instant>,
    /// Run `output` then: a SYN sent from a timer (see `Tcp::open`), or an
    /// ACK held back until the engine has processed the frames that arrived
    /// in the same batch (`Receiver::ack_soon`). A timer due now fires once
    /// the engine has nothing queued in front of it.
    pub kick: Option<Instant>,
    armed: Option<(Instant, TimerId)>,
}

impl Deadlines {
    fn earliest(&self) -> Option<Instant> {
        // Folded by hand, field by field (an array of them would be copied
        // first): this runs after every segment.
        let min = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        };
        let timers = min(
            min(self.retransmit, self.probe),
            min(self.reorder, self.persist),
        );
        let others = min(
            min(self.delack, self.keepalive),
            min(min(self.linger, self.kick), self.pace),
        );
        min(timers, others)
    }

    /// Makes sure the engine calls back no later than the earliest deadline.
    pub fn arm(&mut self, token: u64, cx: &mut Cx) {
        let Some(due) = self.earliest() else {
            return;
        };
        match self.armed {
            Some((at, _)) if at <= due => {}
            Some((_, id)) => {
                cx.cancel_timer(id);
                self.armed = Some((due, cx.set_timer(due, token)));
            }
            None => self.armed = Some((due, cx.set_timer(due, token))),
        }
    }

    /// The engine timer fired.
    pub fn fired(&mut self) {
        self.armed = None;
    }

    /// Cancels everything (the connection is deleted).
    pub fn cancel(&mut self, cx: &mut Cx) {
        if let Some((_, id)) = self.armed.take() {
            cx.cancel_timer(id);
        }
        *self = Deadlines::default();
    }

    /// Clears every deadline but the linger one.
    pub fn clear_all_but_linger(&mut self) {
        self.retransmit = None;
        self.probe = None;
        self.reorder = None;
        self.persist = None;
        self.delack = None;
        self.keepalive = None;
        self.pace = None;
    }
}

/// Takes `deadline` if it is due at `now`.
fn due(deadline: &mut Option<Instant>, now: Instant) -> bool {
    if deadline.is_some_and(|t| t <= now) {
        *deadline = None;
        return true;
    }
    false
}

impl Conn {
    /// The engine timer fired: runs every due timer, then sends what is due.
    pub fn on_timer(&mut self, cfg: &Config, cx: &mut Cx) {
        let now = cx.now();
        self.timers.fired();
        self.timers.kick = None;
        if due(&mut self.timers.linger, now) {
            self.linger_expired(cx);
            return;
        }
        if due(&mut self.timers.retransmit, now) {
            self.retransmission_timeout(cfg, cx);
        }
        if due(&mut self.timers.reorder, now) {
            self.detect_losses(cx);
        }
        if due(&mut self.timers.probe, now) {
            self.loss_probe(cx);
        }
        if due(&mut self.timers.persist, now) {
            self.persist_timeout(cfg, cx);
        }
        if due(&mut self.timers.delack, now) {
            self.rcv.ack_now = true;
        }
        if due(&mut self.timers.keepalive, now) {
            self.keepalive_timeout(cx);
        }
        if self.rcv.ack_soon {
            self.rcv.ack_now = true;
        }
        // A paced segment due now goes in `output`.
        due(&mut self.timers.pace, now);
        if self.state != State::Closed {
            self.output(cfg, cx);
        }
    }

    fn linger_expired(&mut self, cx: &mut Cx) {
        match self.state {
            State::TimeWait => self.state = State::Closed,
            // A closed session waited too long for the peer's FIN.
            _ => {
                cx.count("fin-wait-2-timeout");
                self.terminate(None, cx);
            }
        }
    }

    fn give_up(&mut self, cx: &mut Cx) {
        let error = self.soft_error.take().unwrap_or(UpiError::TimedOut);
        self.terminate(Some(error), cx);
    }

    /// RFC 6298 §5.4–5.6 (and RFC 9293 §3.8.1 for SYNs): back off, resend the
    /// earliest outstanding segment, give up after too many tries.
    fn retransmission_timeout(&mut self, cfg: &Config, cx: &mut Cx) {
        let now = cx.now();
        if self.snd.flight() == 0 {
            return;
        }
        let handshake = matches!(self.state, State::SynSent | State::SynReceived);
        let limit = match (self.state, self.listener.is_some()) {
            (State::SynSent, _) => cfg.syn_retries,
            (State::SynReceived, true) => cfg.synack_retries,
            _ => cfg.retries,
        };
        if self.retries >= limit {
            cx.count(if handshake {
                "handshake-timeout"
            } else {
                "retransmit-timeout"
            });
            self.give_up(cx);
            return;
        }
        self.retries += 1;
        self.stats.timeouts += 1;
        self.rto.back_off();
        self.rtt_timer.retransmitted();
        cx.count("rto");
        if handshake {
            // The SYN goes again; RFC 6298 §5.7: after a lost SYN the window
            // starts at one segment.
            self.snd.nxt = self.snd.iss;
            self.win.cwnd = self.snd.mss;
            return;
        }
        if self.rec.phase != Phase::Loss {
            let flight = self.snd.flight();
            self.win.ssthresh = self.cc.ssthresh(&self.win, flight, now);
        }
        self.cc.on_timeout(now);
        self.win.cwnd = self.snd.mss;
        self.rec.timeout(self.snd.nxt);
        self.timers.probe = None;
        self.timers.reorder = None;
    }

    /// Whether a tail loss probe may be scheduled (RFC 8985 §7.2): SACK in
    /// use, not recovering, no probe episode under way, data outstanding.
    fn probe_allowed(&self) -> bool {
        self.rec.sack
            && !self.rec.recovering()
            && self.rec.tlp.end.is_none()
            && self.state.is_synchronized()
            && self.snd.flight() > 0
    }

    /// The probe timeout expired (RFC 8985 §7.3): one new segment if the
    /// windows allow, else the last segment again, regardless of cwnd; then
    /// the retransmission timer runs from now.
    fn loss_probe(&mut self, cx: &mut Cx) {
        if !self.probe_allowed() {
            return;
        }
        let mss = self.snd.mss;
        let usable = (self.snd.una + self.snd.wnd).since(self.snd.nxt);
        let fresh = (self.snd.unsent() as u32).min(mss).min(usable);
        let resent = if fresh > 0 {
            self.send_span(self.snd.nxt, fresh, false, cx);
            None
        } else {
            let Some(last) = self.rec.board.last().copied() else {
                return;
            };
            let start = last.end - last.len().min(mss);
            self.send_span(start, last.end.since(start), true, cx);
            Some((start, last.end))
        };
        self.rec.tlp.end = Some(self.snd.nxt);
        self.rec.tlp.resent = resent;
        self.stats.loss_probes += 1;
        cx.count("loss-probe");
        self.timers.retransmit = Some(cx.now() + self.rto.rto());
    }

    /// The peer's window has kept us from sending: probe it (RFC 9293
    /// §3.8.6.1). A closed window is probed with a segment one byte below
    /// SND.UNA, which any receiver answers with an ACK carrying its window (as
    /// Linux probes); a window too small for sender SWS avoidance gets what
    /// fits (the "override timeout"). The interval backs off like the RTO.
    fn persist_timeout(&mut self, cfg: &Config, cx: &mut Cx) {
        if self.snd.flight() > 0 || self.snd.unsent() == 0 || !self.state.is_synchronized() {
            self.persist_backoff = 0;
            return;
        }
        if self.probes_unanswered > cfg.retries {
            cx.count("persist-timeout");
            self.give_up(cx);
            return;
        }
        self.persist_backoff += 1;
        self.probes_unanswered += 1;
        let usable = (self.snd.una + self.snd.wnd).since(self.snd.nxt) as usize;
        let fits = usable.min(self.snd.unsent()).min(self.snd.mss as usize);
        if fits > 0 {
            self.send_span(self.snd.nxt, fits as u32, false, cx);
        } else {
            self.stats.window_probes += 1;
            cx.count("window-probe");
            self.send_probe(cx);
        }
    }

    /// RFC 1122 §4.2.3.6: after `idle` without a segment from the peer, probe
    /// every `interval`; give up after `probes` unanswered ones.
    fn keepalive_timeout(&mut self, cx: &mut Cx) {
        let Some(ka) = self.keepalive else {
            return;
        };
        if self.probes >= ka.probes {
            cx.count("keepalive-timeout");
            self.terminate(Some(UpiError::TimedOut), cx);
            return;
        }
        if self.snd.flight() > 0 || !self.keepalive_state() {
            return;
        }
        self.probes += 1;
        cx.count("keepalive-probe");
        self.send_probe(cx);
        self.timers.keepalive = Some(cx.now() + ka.interval);
    }

    fn keepalive_state(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::CloseWait | State::FinWait2
        )
    }

    /// Sets the deadlines the state asks for and arms the engine timer.
    pub fn schedule(&mut self, cfg: &Config, cx: &mut Cx) {
        let now = cx.now();
        let flight = self.snd.flight();
        let keepalive_on = flight == 0 && self.keepalive_state();
        let probe_allowed = self.probe_allowed();
        let t = &mut self.timers;
        if flight == 0 {
            t.retransmit = None;
            t.reorder = None;
        } else if t.retransmit.is_none() {
            t.retransmit = Some(now + self.rto.rto());
        }
        // The probe goes before the retransmission timer or not at all.
        if !probe_allowed {
            t.probe = None;
        } else if t.probe.is_none()
            && let (Some(pto), Some(rto)) =
                (pto(self.rto.srtt(), flight, self.snd.mss), t.retransmit)
            && now + pto < rto
        {
            t.probe = Some(now + pto);
        }
        let blocked = flight == 0 && self.state.is_synchronized() && self.snd.unsent() > 0;
        if !blocked {
            t.persist = None;
            self.persist_backoff = 0;
        } else if t.persist.is_none() {
            let backoff = 1u32 << self.persist_backoff.min(16);
            t.persist = Some(now + self.rto.rto().saturating_mul(backoff).min(cfg.rto_max));
        }
        if self.rcv.unacked == 0 {
            t.delack = None;
        } else if t.delack.is_none() {
            t.delack = Some(now + cfg.delayed_ack);
        }
        if self.rcv.ack_soon && t.kick.is_none() {
            t.kick = Some(now);
        }
        match self.keepalive {
            // With data outstanding the retransmission timer watches the peer.
            Some(ka) if keepalive_on => {
                if self.probes == 0 {
                    t.keepalive = Some(self.last_recv + ka.idle);
                }
            }
            _ => t.keepalive = None,
        }
        let token = u64::from(self.id.0);
        self.timers.arm(token, cx);
    }

    /// Enters TIME-WAIT: the application hears `Closed`, and the connection
    /// lingers 2·MSL answering retransmitted FINs (RFC 9293 §3.10.7.4).
    pub fn enter_time_wait(&mut self, cfg: &Config, cx: &mut Cx) {
        self.state = State::TimeWait;
        self.timers.clear_all_but_linger();
        self.timers.linger = Some(cx.now() + cfg.time_wait);
        self.detach(None, cx);
    }

    /// The peer's FIN arrived in order: the application hears `PeerClosed`.
    pub fn peer_closed(&mut self, cx: &mut Cx) {
        let session = self.session(cx);
        self.notify(cx, AppEvent::PeerClosed(session));
    }

    /// How long a closed session may wait in FIN-WAIT-2.
    pub fn orphan_linger(&mut self, cfg: &Config, now: Instant) {
        if self.state == State::FinWait2 && !self.attached {
            self.timers.linger = Some(now + cfg.fin_timeout);
        }
    }
}

/// A duration in whole milliseconds from a timestamp difference.
pub fn millis(ms: u32) -> Duration {
    Duration::from_millis(u64::from(ms))
}
