//! SEGMENT ARRIVES (RFC 9293 §3.10.7) for a connection: the SYN-SENT rules
//! (§3.10.7.3), then for every other state the checks in the RFC's order —
//! PAWS (RFC 7323 §5.3), sequence number acceptability, RST, SYN, ACK, the
//! text and the FIN — with RFC 5961's protections: a RST or SYN that is not
//! exactly where expected only earns a challenge ACK, and an ACK is accepted
//! only within [SND.UNA − MAX.SND.WND, SND.NXT].

use std::time::Duration;

use strata_core::{
    Addr, AppEvent, Control, Cx, DropReason, Instant, Message, Participant, Participants, Reply,
    UpiError,
};

use super::config::Config;
use super::conn::Conn;
use super::seq::Seq;
use super::state::State;
use super::timers::millis;
use super::wire::{Flags, Repr};

/// What became of a segment.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Used (its ACK, its control bits) or answered; nothing goes up.
    Consumed,
    /// Refused, for this reason.
    Drop(DropReason),
    /// In-order data for the upper layer.
    Deliver(Message),
}

/// RFC 7323 §5.5: TS.Recent older than 24 days cannot be trusted for PAWS.
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

/// Challenge ACKs one connection may send per second (RFC 5961 §7 asks for a
/// limit; per connection avoids the global counter's side channel,
/// CVE-2016-5696).
const CHALLENGE_ACKS_PER_SECOND: u32 = 100;

fn drop(reason: &'static str) -> Outcome {
    Outcome::Drop(DropReason::Other(reason))
}

impl Conn {
    /// Processes one segment whose header is `seg` and data `payload`.
    pub fn on_segment(
        &mut self,
        seg: &Repr,
        payload: Message,
        cfg: &Config,
        cx: &mut Cx,
    ) -> Outcome {
        let now = cx.now();
        self.stats.segs_in += 1;
        self.last_recv = now;
        self.probes = 0;
        self.probes_unanswered = 0;
        let outcome = match self.state {
            State::SynSent => self.syn_sent(seg, payload, cfg, cx),
            State::Closed => Outcome::Drop(DropReason::NoSession),
            _ => self.synchronized(seg, payload, cfg, cx),
        };
        self.output(cfg, cx);
        outcome
    }

    /// RFC 9293 §3.10.7.3.
    fn syn_sent(&mut self, seg: &Repr, payload: Message, cfg: &Config, cx: &mut Cx) -> Outcome {
        let f = seg.flags;
        let ack_ok = f.has(Flags::ACK) && seg.ack > self.snd.iss && seg.ack <= self.snd.nxt;
        if f.has(Flags::ACK) && !ack_ok {
            if !f.has(Flags::RST) {
                self.send_rst(seg.ack, cx);
            }
            return drop("bad-ack");
        }
        if f.has(Flags::RST) {
            if !ack_ok {
                return drop("rst-without-ack");
            }
            cx.count("refused");
            self.terminate(Some(UpiError::Refused), cx);
            return Outcome::Consumed;
        }
        if !f.has(Flags::SYN) {
            return drop("no-syn");
        }
        let retried = self.retries > 0;
        self.negotiate(seg.seq, &seg.options, cfg, cx.now());
        if retried {
            self.win.cwnd = self.snd.mss;
        }
        self.snd.wnd = u32::from(seg.window);
        self.snd.max_wnd = self.snd.wnd;
        self.snd.wl1 = seg.seq;
        self.snd.wl2 = seg.ack;
        if !ack_ok {
            // A simultaneous open: answer with SYN-ACK (§3.10.7.3 fourth).
            self.state = State::SynReceived;
            self.snd.nxt = self.snd.iss;
            return Outcome::Consumed;
        }
        self.snd.una = seg.ack;
        if let Some(sample) = self.rtt_sample(seg, cx.now()) {
            self.rto.sample(sample);
        }
        self.become_established(cx);
        self.rcv.ack_now = true;
        self.text(seg, seg.seq + 1, payload, cfg, cx)
    }

    /// RFC 9293 §3.10.7.4 for every state past SYN-SENT.
    fn synchronized(
        &mut self,
        seg: &Repr,
        mut payload: Message,
        cfg: &Config,
        cx: &mut Cx,
    ) -> Outcome {
        let now = cx.now();
        let mut seg = *seg;
        if self.state == State::SynReceived && seg.flags.has(Flags::SYN) && seg.seq == self.rcv.irs
        {
            if !seg.flags.has(Flags::ACK) {
                // The peer did not hear our SYN-ACK: say it again.
                self.rcv.ack_now = true;
                return Outcome::Consumed;
            }
            // A simultaneous open: the peer's SYN-ACK repeats the SYN we have;
            // only its ACK is new (RFC 9293 §3.10.7.4: process the new part).
            seg.flags = Flags(seg.flags.0 & !Flags::SYN.0);
            seg.seq = seg.seq + 1;
        }
        let seg = &seg;
        let f = seg.flags;
        let len =
            payload.len() as u32 + u32::from(f.has(Flags::SYN)) + u32::from(f.has(Flags::FIN));
        if !f.has(Flags::RST) && self.paws_rejects(seg, len, now) {
            self.rcv.ack_now = true;
            return drop("paws");
        }
        // First: is the segment in the window?
        if !self.acceptable(seg.seq, len) {
            if f.has(Flags::RST) {
                return drop("rst-out-of-window");
            }
            if self.state == State::TimeWait && f.has(Flags::FIN) {
                // A retransmitted FIN: the ACK was lost; restart 2·MSL.
                self.timers.linger = Some(now + cfg.time_wait);
            }
            // An old duplicate means our ACK may have been lost: ACK again. Only
            // segments beyond the window are answered within the rate limit.
            if (seg.seq + len) <= self.rcv.nxt {
                self.rcv.ack_now = true;
                if !payload.is_empty() {
                    let end = seg.seq + payload.len() as u32;
                    self.rcv.dsack = Some((seg.seq, end));
                }
                return drop("duplicate");
            }
            self.challenge(now);
            return drop("out-of-window");
        }
        // Second: RST, only exactly at RCV.NXT (RFC 5961 §3.2).
        if f.has(Flags::RST) {
            if seg.seq != self.rcv.nxt {
                self.challenge(now);
                return drop("rst-challenged");
            }
            cx.count("reset");
            let error = match self.state {
                State::SynReceived if self.listener.is_some() => None,
                State::Closing | State::LastAck | State::TimeWait => None,
                _ => Some(UpiError::Refused),
            };
            self.terminate(error, cx);
            return Outcome::Consumed;
        }
        // Fourth: a SYN in a synchronized state (RFC 5961 §4.2).
        if f.has(Flags::SYN) {
            self.challenge(now);
            return drop("syn-challenged");
        }
        // Fifth: the ACK.
        if !f.has(Flags::ACK) {
            return drop("no-ack");
        }
        if self.state == State::SynReceived {
            if !(seg.ack > self.snd.una && seg.ack <= self.snd.nxt) {
                self.send_rst(seg.ack, cx);
                return drop("bad-ack");
            }
            self.establish(seg, cx);
        }
        if seg.ack > self.snd.nxt {
            self.rcv.ack_now = true;
            return drop("ack-unsent");
        }
        let oldest = self.snd.una - self.snd.max_wnd.max(1);
        if seg.ack < oldest {
            self.challenge(now);
            return drop("ack-too-old");
        }
        self.update_ts_recent(seg, len, now);
        self.on_ack(seg, payload.is_empty() && len == 0, cfg, cx);
        if self.state == State::Closed {
            return Outcome::Consumed;
        }
        // Seventh and eighth: the text and the FIN.
        if len == 0 {
            return Outcome::Consumed;
        }
        if seg.seq < self.rcv.nxt {
            let skip = self.rcv.nxt.since(seg.seq) as usize;
            payload.strip(skip.min(payload.len()));
        }
        let start = seg.seq.max(self.rcv.nxt);
        self.text(seg, start, payload, cfg, cx)
    }

    /// The data and FIN of an acceptable segment, from `start` on.
    fn text(
        &mut self,
        seg: &Repr,
        start: Seq,
        mut payload: Message,
        cfg: &Config,
        cx: &mut Cx,
    ) -> Outcome {
        let mut fin = seg.flags.has(Flags::FIN);
        if payload.is_empty() && !fin {
            return Outcome::Consumed;
        }
        if !self.state.can_receive() {
            // After the peer's FIN nothing more can come (§3.10.7.4 seventh).
            return drop("after-fin");
        }
        if !payload.is_empty() && !self.attached {
            // Nobody will read it: Linux resets (RFC 2525 §2.17).
            cx.count("data-after-close");
            self.send_rst(self.snd.nxt, cx);
            self.terminate(None, cx);
            return drop("data-after-close");
        }
        let right = self.rcv.adv.max(self.rcv.nxt);
        let room = right.since(start) as usize;
        if payload.len() > room {
            payload.truncate(room);
            fin = false;
            self.rcv.ack_now = true;
        }
        if payload.is_empty() && !fin {
            return drop("window-full");
        }
        let accepted = self.rcv.accept(start, payload, fin);
        // "Full-sized" is at most what we told the peer to send.
        self.rcv.rcv_mss = self.rcv.rcv_mss.min(u32::from(self.offer.mss));
        if accepted.overflow {
            return Outcome::Drop(DropReason::QueueFull);
        }
        if !self.rcv.manual
            && let Some(d) = &accepted.data
        {
            self.rcv.copied(d.len(), cx.now());
        }
        if let Some(d) = &accepted.data {
            self.stats.bytes_received += d.len() as u64;
            if self.rcv.manual {
                self.rcv.unread += d.len();
            }
            // The receiver's round trip, for autotuning: the TSecr of data
            // echoes one of our ACKs, or, without timestamps, a window's time.
            match seg.options.timestamp {
                Some(t) if self.ts.is_some() && t.ecr != 0 => {
                    let elapsed = self.ts_val(cx.now()).wrapping_sub(t.ecr);
                    if elapsed < 1 << 31 {
                        self.rcv.rtt_sample(millis(elapsed));
                    }
                }
                _ => self.rcv.window_rtt(cx.now()),
            }
        }
        if accepted.fin {
            let fin_acked = self.snd.fin_acked();
            self.state = self.state.after_fin(fin_acked);
            self.peer_closed(cx);
            if self.state == State::TimeWait {
                self.enter_time_wait(cfg, cx);
            }
        }
        match accepted.data {
            Some(d) => Outcome::Deliver(d),
            None => Outcome::Consumed,
        }
    }

    /// SYN-RECEIVED → ESTABLISHED on an acceptable ACK. A passive connection
    /// announces itself to its listener's owner (`open_done`); the active end
    /// of a simultaneous open tells its application `Connected`.
    fn establish(&mut self, seg: &Repr, cx: &mut Cx) {
        self.become_established(cx);
        self.snd.wnd = u32::from(seg.window) << self.snd.wscale;
        self.snd.max_wnd = self.snd.max_wnd.max(self.snd.wnd);
        self.snd.wl1 = seg.seq;
        self.snd.wl2 = seg.ack;
    }

    fn become_established(&mut self, cx: &mut Cx) {
        self.state = State::Established;
        self.retries = 0;
        // Asked now, not when the host was built: a runtime tells the engine
        // what its link's driver can do only when it attaches it.
        self.snd.offload = match cx.control(self.ip.proto, None, Control::GetSegmentation) {
            Ok(Reply::Size(n)) => n.min(usize::from(u16::MAX)) as u32,
            _ => 0,
        };
        if self.snd.fin_queued {
            // The application closed during the handshake (RFC 9293 §3.10.4:
            // the FIN waits for ESTABLISHED).
            self.state = State::FinWait1;
        }
        if self.listener.is_some() && !self.announced {
            self.announced = true;
            let parts = Participants {
                remote: Participant::of([Addr::Ip(self.remote.0), Addr::Port(self.remote.1)]),
                local: Participant::of([Addr::Ip(self.local.0), Addr::Port(self.local.1)]),
            };
            cx.count("accepted");
            cx.open_done(self.upper, self.id, parts);
        } else {
            let session = self.session(cx);
            self.notify(cx, AppEvent::Connected(session));
        }
    }

    /// RFC 9293 §3.10.7.4's acceptability test. RCV.WND is the window last
    /// advertised. A segment starting exactly at RCV.NXT is always let in, so
    /// that its ACK, FIN or RST counts even when the window is closed (the
    /// RFC's "special allowance"; its data is trimmed to the window later).
    fn acceptable(&self, seq: Seq, len: u32) -> bool {
        let nxt = self.rcv.nxt;
        let end = nxt + self.rcv.wnd();
        if seq == nxt {
            return true;
        }
        match (len, self.rcv.wnd()) {
            (0, 0) => false,
            (0, _) => seq.within(nxt, end),
            (_, 0) => false,
            _ => seq.within(nxt, end) || (seq + len - 1).within(nxt, end),
        }
    }

    /// PAWS (RFC 7323 §5.3): a segment whose TSval is older than TS.Recent
    /// is an old duplicate. A bare ACK at RCV.NXT whose TSval is less than
    /// one RTO old is let through, as Linux lets "disordered ACKs" through
    /// (`tcp_disordered_ack`): ACKs overtake each other in the network, and
    /// dropping one loses its SACK blocks while protecting no data.
    fn paws_rejects(&self, seg: &Repr, len: u32, now: Instant) -> bool {
        let (Some(ts), Some(t)) = (self.ts, seg.options.timestamp) else {
            return false;
        };
        let behind = ts.recent.wrapping_sub(t.val);
        if (behind as i32) <= 0 || now.saturating_since(ts.recent_at) >= PAWS_IDLE {
            return false;
        }
        let disordered_ack = len == 0
            && seg.flags == Flags::ACK
            && seg.seq == self.rcv.nxt
            && u128::from(behind) <= self.rto.rto().as_millis();
        !disordered_ack
    }

    /// RFC 7323 §4.3: TS.Recent follows the segment that covers
    /// Last.ACK.sent.
    fn update_ts_recent(&mut self, seg: &Repr, len: u32, now: Instant) {
        let (Some(ts), Some(t)) = (&mut self.ts, seg.options.timestamp) else {
            return;
        };
        let fresh = (t.val.wrapping_sub(ts.recent) as i32) >= 0;
        if fresh && seg.seq <= self.last_ack_sent && self.last_ack_sent <= seg.seq + len {
            ts.recent = t.val;
            ts.recent_at = now;
        }
    }

    /// A round-trip sample from an ACK of new data: from its TSecr, or the
    /// timed segment (Karn's rule applies there).
    pub fn rtt_sample(&mut self, seg: &Repr, now: Instant) -> Option<Duration> {
        match (self.ts, seg.options.timestamp) {
            (Some(_), Some(t)) if t.ecr != 0 => {
                let elapsed = self.ts_val(now).wrapping_sub(t.ecr);
                (elapsed < 1 << 31).then(|| millis(elapsed))
            }
            (Some(_), _) => None,
            (None, _) => self.rtt_timer.acked(seg.ack, now),
        }
    }

    /// Answers with an ACK, within RFC 5961 §7's rate limit.
    fn challenge(&mut self, now: Instant) {
        let second = now.as_nanos() / 1_000_000_000;
        if self.challenge_window.0 != second {
            self.challenge_window = (second, 0);
        }
        if self.challenge_window.1 < CHALLENGE_ACKS_PER_SECOND {
            self.challenge_window.1 += 1;
            self.rcv.ack_now = true;
        }
    }
}
