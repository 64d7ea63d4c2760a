//! Sending: which segments go out now, and how one is built.
//!
//! [`Conn::output`] runs after every event (a segment, a timer, the
//! application). It sends, in order: the SYN while the handshake needs one;
//! the retransmission loss recovery asks for first; then, while the
//! congestion window has room over `pipe`, segments deemed lost (lowest
//! first), then new data within the peer's window; the FIN once the data is
//! out; and an ACK when one is due and nothing else carried it. Every
//! segment sent is recorded on the scoreboard (`sack`) with its time, for
//! RACK (`rack`). New data
//! obeys sender SWS avoidance (RFC 9293 §3.8.6.2.1): a segment goes when it
//! is full, when it is the last of the data and Nagle allows (RFC 9293
//! §3.7.4: nothing unacknowledged, or Nagle off), or when it is at least half
//! the largest window the peer offered; otherwise the persist timer decides.
//!
//! When the congestion control asks for a pacing rate (BBR), each segment
//! of the window moves the next send time on by its length over the rate,
//! and the loop stops at a segment not yet due, leaving it to the pacing
//! timer. Segments due within [`PACING_SLACK`] go together, as Linux sends a
//! pacing quantum of about a millisecond at once: a timer per segment would
//! cost more than the sending, and no real timer is that precise. Window
//! algorithms (CUBIC, Reno) are not paced. The first retransmission of a
//! recovery and the tail loss probe are not held back either.
//!
//! Segmentation offload: when the link cuts TCP super-segments
//! (`snd.offload`, from `Control::GetSegmentation`), new data goes out in
//! spans of whole MSS-sized segments as long as the window, the data and the
//! offload allow, one segment header for all, with only the pseudo-header
//! summed into the checksum field for the link to finish per segment (Linux's
//! TSO/GSO). Paced, a span holds at most a pacing quantum. The scoreboard
//! records the segments the receiver will see; retransmissions go one
//! segment at a time.
//!
//! Sending also feeds delivery rate estimation (`rate`): when the sender
//! runs out of data with room in the window, the samples that follow are
//! marked application-limited.

use std::time::Duration;

use strata_core::{Cx, Message};

use super::config::Config;
use super::congestion::initial_window;
use super::conn::Conn;
use super::options::{MAX_SACK_BLOCKS, TcpOptions, Timestamp};
use super::seq::Seq;
use super::state::State;
use super::wire::{self, Flags, MAX_HEADER_LEN, Repr};

/// How early a paced segment may go: segments due within this go together.
pub const PACING_SLACK: Duration = Duration::from_millis(1);

impl Conn {
    /// Sends whatever is due, then sets the timers.
    pub fn output(&mut self, cfg: &Config, cx: &mut Cx) {
        match self.state {
            State::Closed => return,
            State::SynSent | State::SynReceived => {
                // In SYN-RECEIVED the answer to anything is our SYN-ACK again.
                let answer = self.state == State::SynReceived && self.rcv.ack_now;
                if self.snd.nxt == self.snd.iss || answer {
                    self.send_syn(cx);
                }
            }
            State::TimeWait => {
                if self.rcv.ack_now {
                    self.send_ack(cx);
                }
            }
            _ => {
                self.send_data(cx);
                if self.rcv.ack_now {
                    self.send_ack(cx);
                }
            }
        }
        self.schedule(cfg, cx);
    }

    fn send_data(&mut self, cx: &mut Cx) {
        let now = cx.now();
        let mss = self.snd.mss;
        // RFC 5681 §4.1: after an idle period longer than the RTO, restart
        // from the initial window, as the ACK clock has stopped.
        if self.snd.flight() == 0 && now.saturating_since(self.last_send) > self.rto.rto() {
            self.win.cwnd = self.win.cwnd.min(initial_window(mss));
        }
        if self.rec.resend_first {
            self.rec.resend_first = false;
            self.resend_first(cx);
        }
        // Nothing lost and nothing new: no window to work out.
        let idle = self.rec.board.lost() == 0 && self.snd.unsent() == 0;
        let pacing = self.cc.pacing_rate().filter(|&r| r > 0);
        self.timers.pace = None;
        if !idle {
            loop {
                let pipe = self.rec.pipe(self.snd.flight());
                let room = self.win.cwnd.saturating_sub(pipe);
                let (seq, span, rexmit) = match self.rec.next_retransmission(mss) {
                    Some((_, span)) if room < span => break,
                    Some((seq, span)) => (seq, span, true),
                    None => match self.new_span_len(room, pacing) {
                        Some(len) => (self.snd.nxt, len, false),
                        None => break,
                    },
                };
                if let Some(rate) = pacing {
                    if self.next_send > now + PACING_SLACK {
                        self.timers.pace = Some(self.next_send - PACING_SLACK);
                        break;
                    }
                    let gap = u128::from(span) * 1_000_000_000 / u128::from(rate);
                    let gap = Duration::from_nanos(gap.min(u128::from(u64::MAX)) as u64);
                    self.next_send = self.next_send.max(now) + gap;
                }
                self.send_span(seq, span, rexmit, cx);
            }
        }
        let pipe = self.rec.pipe(self.snd.flight());
        let out_of_data = (self.snd.unsent() as u64) < u64::from(mss);
        if out_of_data && pipe < self.win.cwnd && self.rec.board.lost() == 0 {
            self.rec.board.rate.app_limited(pipe);
        }
        // The FIN needs no window: it goes once every byte has been sent.
        if self.snd.fin_queued && !self.snd.fin_sent() && self.snd.unsent() == 0 {
            self.send_span(self.snd.nxt, 1, false, cx);
        }
    }

    /// The segment that goes at once, ahead of the window (RFC 6675 §5 step
    /// 4.3, RFC 6582 §3.2 steps 2 and 5): with SACK the first lost one,
    /// without it the one at SND.UNA.
    fn resend_first(&mut self, cx: &mut Cx) {
        let mss = self.snd.mss;
        let first = if self.rec.sack {
            self.rec.next_retransmission(mss)
        } else {
            (self.snd.una < self.snd.nxt)
                .then(|| (self.snd.una, self.snd.nxt.since(self.snd.una).min(mss)))
        };
        if let Some((seq, span)) = first {
            self.send_span(seq, span, true, cx);
        }
    }

    /// The length of the next new-data span: one segment, or with
    /// segmentation offload as many whole segments as fit the window, the
    /// data, the offload and (paced) a pacing quantum.
    fn new_span_len(&self, room: u32, pacing: Option<u64>) -> Option<u32> {
        let one = self.new_segment_len(room)?;
        let mss = self.snd.mss;
        let mut max = self.snd.offload.saturating_sub(MAX_HEADER_LEN as u32);
        if let Some(rate) = pacing {
            let quantum = u128::from(rate) * PACING_SLACK.as_nanos() / 1_000_000_000;
            max = max.min(quantum.min(u128::from(u32::MAX)) as u32);
        }
        if one < mss || max < 2 * mss {
            return Some(one);
        }
        let unsent = self.snd.unsent().min(u32::MAX as usize) as u32;
        let usable = (self.snd.una + self.snd.wnd).since(self.snd.nxt);
        let span = unsent.min(usable).min(room).min(max);
        Some((span - span % mss).max(one))
    }

    /// The length of the next new-data segment, or `None` when none should go
    /// now (no data, no window, or SWS avoidance and Nagle say wait).
    fn new_segment_len(&self, room: u32) -> Option<u32> {
        let unsent = self.snd.unsent() as u32;
        let usable = (self.snd.una + self.snd.wnd).since(self.snd.nxt);
        let len = unsent.min(self.snd.mss).min(usable).min(room);
        if len == 0 {
            return None;
        }
        if len == self.snd.mss {
            return Some(len);
        }
        let last = len == unsent;
        let nagle_ok = self.snd.nodelay || self.snd.flight() == 0;
        let window_limited = len == usable && len < room.min(unsent);
        let half_window = window_limited && self.snd.max_wnd > 0 && len >= self.snd.max_wnd / 2;
        ((last && nagle_ok) || half_window).then_some(len)
    }

    /// Sends `span` bytes of sequence space from `seq`: data, and the FIN when
    /// the span covers it.
    pub fn send_span(&mut self, seq: Seq, span: u32, rexmit: bool, cx: &mut Cx) {
        let now = cx.now();
        let data_end = self.snd.data_end();
        let data_len = data_end.since(seq).min(span);
        let payload = if data_len > 0 {
            self.snd
                .buf
                .slice(self.snd.offset_of(seq), data_len as usize)
        } else {
            Message::new()
        };
        let data_len = payload.len() as u32;
        let mut flags = Flags::ACK;
        let mut end = seq + data_len;
        if data_len > 0 && end == data_end {
            flags = flags | Flags::PSH;
        }
        if self.snd.fin_queued && end == data_end && span > data_len {
            flags = flags | Flags::FIN;
            end = end + 1;
        }
        if end == seq {
            return;
        }
        self.emit(seq, flags, payload, cx);
        if rexmit {
            self.rec.board.retransmitted(seq, end, now);
        } else {
            self.rec.board.sent(seq, end, now, self.snd.mss);
            // RFC 8985 §7.2: new data pushes the probe timer back.
            self.timers.probe = None;
        }
        if end > self.snd.nxt {
            self.snd.nxt = end;
        }
        if rexmit {
            self.stats.retransmits += 1;
            self.rtt_timer.retransmitted();
            cx.count("retransmit");
        } else if self.ts.is_none() {
            self.rtt_timer.sent(end, now);
        }
        if data_len > 0 {
            self.last_send = now;
        }
        // The oldest segment sent again by RACK gets a whole RTO before the
        // path is given up on, as Linux re-arms the timer when it resends
        // the head (`tcp_xmit_retransmit_queue`): otherwise a head lost
        // twice in one recovery times out while ACKs still come. NewReno
        // keeps RFC 6582's impatient timer.
        let head_resent = rexmit && self.rec.sack && seq == self.snd.una;
        if self.timers.retransmit.is_none() || head_resent {
            self.timers.retransmit = Some(now + self.rto.rto());
        }
    }

    /// Sends our SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED) with the options we
    /// offer; the window of a SYN is never scaled (RFC 7323 §2.2).
    pub fn send_syn(&mut self, cx: &mut Cx) {
        let now = cx.now();
        let mut options = TcpOptions {
            mss: Some(self.offer.mss),
            window_scale: self.offer.wscale,
            sack_permitted: self.offer.sack,
            ..TcpOptions::default()
        };
        if self.offer.timestamps {
            let ecr = self.ts.map_or(0, |t| t.recent);
            options.timestamp = Some(Timestamp {
                val: self.ts_val(now),
                ecr,
            });
        }
        let (flags, ack) = match self.state {
            State::SynReceived => (Flags::SYN | Flags::ACK, self.rcv.nxt),
            _ => (Flags::SYN, Seq(0)),
        };
        let repr = Repr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            seq: self.snd.iss,
            ack,
            flags,
            window: self.rcv.rcvbuf.min(usize::from(u16::MAX)) as u16,
            urgent: 0,
            options,
        };
        self.push_segment(&repr, Message::new(), cx);
        if flags.has(Flags::ACK) {
            self.after_ack_sent();
        }
        self.snd.nxt = self.snd.iss + 1;
        if self.timers.retransmit.is_none() {
            self.timers.retransmit = Some(now + self.rto.rto());
        }
    }

    /// Sends a bare ACK: <SEQ=SND.NXT><ACK=RCV.NXT>.
    pub fn send_ack(&mut self, cx: &mut Cx) {
        self.emit(self.snd.nxt, Flags::ACK, Message::new(), cx);
    }

    /// Sends <SEQ=SND.UNA−1><ACK=RCV.NXT>: an old sequence number the peer
    /// answers with an ACK (keepalive and zero-window probes).
    pub fn send_probe(&mut self, cx: &mut Cx) {
        self.emit(self.snd.una - 1, Flags::ACK, Message::new(), cx);
    }

    /// Sends a reset with sequence number `seq` (RFC 9293 §3.10.7).
    pub fn send_rst(&mut self, seq: Seq, cx: &mut Cx) {
        let repr = Repr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            seq,
            ack: Seq(0),
            flags: Flags::RST,
            window: 0,
            urgent: 0,
            options: TcpOptions::default(),
        };
        self.push_segment(&repr, Message::new(), cx);
    }

    /// Builds a synchronized-state segment: ACK, window, timestamps, SACK.
    fn emit(&mut self, seq: Seq, flags: Flags, payload: Message, cx: &mut Cx) {
        let now = cx.now();
        let mut options = TcpOptions::default();
        if let Some(ts) = self.ts {
            options.timestamp = Some(Timestamp {
                val: self.ts_val(now),
                ecr: ts.recent,
            });
        }
        if self.rec.sack {
            let room = if self.ts.is_some() {
                3
            } else {
                MAX_SACK_BLOCKS
            };
            // A D-SACK block goes first (RFC 2883 §4), once.
            let dsack = self.rcv.dsack.take();
            for &(l, r) in dsack.iter().chain(self.rcv.sack_blocks()).take(room) {
                options.sack.push(l, r);
            }
        }
        let window = self.rcv.select_window(self.snd.mss);
        let repr = Repr {
            src_port: self.local.1,
            dst_port: self.remote.1,
            seq,
            ack: self.rcv.nxt,
            flags,
            window,
            urgent: 0,
            options,
        };
        self.push_segment(&repr, payload, cx);
        self.after_ack_sent();
    }

    fn after_ack_sent(&mut self) {
        self.rcv.acked();
        self.last_ack_sent = self.rcv.nxt;
        self.timers.delack = None;
    }

    /// Writes the header in front of `payload`, checksums, and hands the
    /// segment to IP. A payload longer than the MSS is a super-segment for
    /// the link to cut: its checksum field holds the pseudo-header's sum, which
    /// the link completes for each segment (so even with checksums off).
    fn push_segment(&mut self, repr: &Repr, mut payload: Message, cx: &mut Cx) {
        let mut hdr = [0u8; MAX_HEADER_LEN];
        let n = repr.emit(&mut hdr);
        let mss = self.snd.mss as usize;
        let segments = match self.snd.offload {
            0 => 1,
            _ => payload.len().div_ceil(mss.max(1)).max(1),
        };
        if segments > 1 {
            let len = n + payload.len();
            let partial = wire::sum(self.local.0, self.remote.0, len, []).sum();
            hdr[16..18].copy_from_slice(&partial.to_be_bytes());
            payload.set_segment_size(mss as u16);
        } else if self.checksum {
            let len = n + payload.len();
            let c = wire::checksum(
                self.local.0,
                self.remote.0,
                len,
                std::iter::once(&hdr[..n]).chain(payload.chunks()),
            );
            hdr[16..18].copy_from_slice(&c.to_be_bytes());
        }
        payload.push_slice(&hdr[..n]);
        self.stats.segs_out += segments as u64;
        cx.push(self.ip, payload);
    }
}
