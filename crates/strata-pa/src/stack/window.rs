//! `window`: the sliding window of the paper's test stack (§5) — sequence
//! numbers, a window of 16 messages in flight, cumulative acknowledgements
//! as gossip (piggybacked on data, or alone when there is none to ride on),
//! in-order delivery and go-back-N retransmission.
//!
//! Canonical form (§3.1): pre-send writes `seq` (the next number) and `ack`
//! (what this side expects) without counting; post-send counts and keeps the
//! message for retransmission. Pre-deliver passes the message it expects and
//! absorbs anything else; post-deliver takes the acknowledgement, counts,
//! and acknowledges. A full window disables the send prediction (§3.2) until
//! an acknowledgement opens it.

use std::collections::VecDeque;
use std::time::Duration;

use strata_core::{Instant, Message};

use crate::field::{Class, FieldHandle, LayoutBuilder};
use crate::layer::{Check, Ctx, Emit, Layer, Verdict, View, ViewMut};

/// Messages in flight at most.
pub const WINDOW: usize = 16;
/// Bits of a sequence number: far more than twice the window.
pub const SEQ_BITS: u32 = 14;
const SEQ_MOD: u32 = 1 << SEQ_BITS;

fn seq_add(a: u32, n: u32) -> u32 {
    (a + n) % SEQ_MOD
}

/// How far `b` is ahead of `a`, in serial-number arithmetic.
fn seq_diff(b: u32, a: u32) -> u32 {
    (b + SEQ_MOD - a) % SEQ_MOD
}

#[derive(Clone, Copy)]
struct Handles {
    seq: FieldHandle,
    ack_only: FieldHandle,
    ack: FieldHandle,
}

/// Counters of the window.
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowStats {
    /// Messages sent again.
    pub retransmitted: u64,
    /// Acknowledgements sent alone.
    pub acks_sent: u64,
    /// Messages received twice.
    pub duplicates: u64,
    /// Messages received ahead of a missing one (dropped: go-back-N).
    pub out_of_order: u64,
    /// Messages held while the window was full.
    pub held: u64,
}

/// The sliding-window layer of one connection.
pub struct Window {
    h: Option<Handles>,
    rto: Duration,
    ack_delay: Duration,
    next_seq: u32,
    unacked: VecDeque<(u32, Vec<u8>, Message)>,
    /// Header buffers of acknowledged messages, for the next ones sent: no
    /// allocation per message.
    spare: Vec<Vec<u8>>,
    held: VecDeque<(Vec<u8>, Message)>,
    disabled: bool,
    expected: u32,
    /// The acknowledgement last sent (piggybacked or alone).
    acked: u32,
    rtx_at: Option<Instant>,
    ack_at: Option<Instant>,
    stats: WindowStats,
}

impl Window {
    /// A window retransmitting after `rto` without acknowledgement and
    /// acknowledging alone after `ack_delay` without data to ride on.
    pub fn new(rto: Duration, ack_delay: Duration) -> Window {
        Window {
            h: None,
            rto,
            ack_delay,
            next_seq: 0,
            unacked: VecDeque::new(),
            spare: Vec::new(),
            held: VecDeque::new(),
            disabled: false,
            expected: 0,
            acked: 0,
            rtx_at: None,
            ack_at: None,
            stats: WindowStats::default(),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> WindowStats {
        self.stats
    }

    fn fill(&self, h: &Handles, hdr: &mut ViewMut) {
        hdr.set(h.seq, u64::from(self.next_seq));
        hdr.set(h.ack_only, 0);
        hdr.set(h.ack, u64::from(self.expected));
    }

    /// Counts a message as sent: kept until acknowledged. The send
    /// prediction's `seq` follows in place (§3.2).
    fn sent(&mut self, h: &Handles, hdr: &[u8], data: Message, ack: u32, cx: &mut Ctx) {
        let mut kept = self.spare.pop().unwrap_or_default();
        kept.clear();
        kept.extend_from_slice(hdr);
        self.unacked.push_back((self.next_seq, kept, data));
        self.next_seq = seq_add(self.next_seq, 1);
        cx.predict_send(h.seq, u64::from(self.next_seq));
        self.acked = ack;
        if self.rtx_at.is_none() {
            self.rtx_at = Some(cx.now + self.rto);
        }
    }

    fn ack_alone(&mut self, h: &Handles, cx: &mut Ctx) {
        let mut hdr = cx.headers();
        let mut v = ViewMut {
            layout: cx.layout,
            order: cx.order,
            buf: &mut hdr,
        };
        self.fill(h, &mut v);
        v.set(h.ack_only, 1);
        cx.fx.down.push(Emit {
            hdr,
            data: Message::new(),
            unusual: false,
        });
        self.acked = self.expected;
        self.ack_at = None;
        self.stats.acks_sent += 1;
    }

    /// Disables the send prediction while the window is full or messages
    /// wait, re-enables it after; asks for the earliest timer.
    fn settle(&mut self, cx: &mut Ctx) {
        let disabled = self.unacked.len() >= WINDOW || !self.held.is_empty();
        if disabled != self.disabled {
            cx.fx.send_disable += if disabled { 1 } else { -1 };
            self.disabled = disabled;
        }
        cx.fx.timer = match (self.rtx_at, self.ack_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

impl Layer for Window {
    fn name(&self) -> &'static str {
        "window"
    }

    fn declare(&mut self, f: &mut LayoutBuilder) {
        self.h = Some(Handles {
            seq: f.add_field(Class::Protocol, "seq", SEQ_BITS, None),
            ack_only: f.add_field(Class::Protocol, "ack-only", 1, None),
            ack: f.add_field(Class::Gossip, "ack", SEQ_BITS, None),
        });
    }

    /// Post-processing keeps the predictions up to date in place.
    fn prediction_varies(&self) -> bool {
        false
    }

    fn pre_send(&self, hdr: &mut ViewMut, _: &Message) -> Verdict {
        let Some(h) = self.h else {
            return Verdict::Pass;
        };
        // Filled when diverting too: a prediction built while the window
        // is full is right once it opens.
        self.fill(&h, hdr);
        if self.unacked.len() >= WINDOW || !self.held.is_empty() {
            return Verdict::Divert;
        }
        Verdict::Pass
    }

    fn post_send(&mut self, hdr: View, data: &mut Message, diverted: bool, cx: &mut Ctx) {
        let Some(h) = self.h else { return };
        let data = std::mem::take(data);
        if diverted {
            self.held.push_back((hdr.buf.to_vec(), data));
            self.stats.held += 1;
        } else {
            // What was really sent may be the PA's prediction, made before
            // the last delivery: its acknowledgement can be older.
            let ack = hdr.get(h.ack) as u32;
            self.sent(&h, hdr.buf, data, ack, cx);
            if self.acked == self.expected {
                self.ack_at = None;
            }
        }
        self.settle(cx);
    }

    fn pre_deliver(&self, hdr: View, _: &Message) -> Check {
        let Some(h) = self.h else {
            return Check::Pass;
        };
        if hdr.get(h.ack_only) == 0 && hdr.get(h.seq) as u32 == self.expected {
            Check::Pass
        } else {
            Check::Absorb
        }
    }

    fn post_deliver(&mut self, hdr: View, _: &Message, absorbed: bool, cx: &mut Ctx) {
        let Some(h) = self.h else { return };
        // The acknowledgement: everything before `ack` arrived.
        let ack = hdr.get(h.ack) as u32;
        let in_flight = self.unacked.len() as u32;
        let base = self.unacked.front().map_or(self.next_seq, |u| u.0);
        let newly = seq_diff(ack, base);
        if newly > 0 && newly <= in_flight {
            for _ in 0..newly {
                let Some((_, buf, _)) = self.unacked.pop_front() else {
                    break;
                };
                if self.spare.len() < WINDOW {
                    self.spare.push(buf);
                }
            }
            self.rtx_at = (!self.unacked.is_empty()).then(|| cx.now + self.rto);
        }
        // Released room goes to held messages first, in order.
        while self.unacked.len() < WINDOW {
            let Some((mut buf, data)) = self.held.pop_front() else {
                break;
            };
            let mut v = ViewMut {
                layout: cx.layout,
                order: cx.order,
                buf: &mut buf,
            };
            self.fill(&h, &mut v);
            let expected = self.expected;
            self.sent(&h, &buf, data.clone(), expected, cx);
            cx.fx.down.push(Emit {
                hdr: buf,
                data,
                unusual: false,
            });
        }
        if hdr.get(h.ack_only) == 0 {
            if !absorbed {
                self.expected = seq_add(self.expected, 1);
                let e = u64::from(self.expected);
                cx.predict_send(h.ack, e);
                cx.predict_deliver(h.seq, e);
            } else if seq_diff(hdr.get(h.seq) as u32, self.expected) < SEQ_MOD / 2 {
                self.stats.out_of_order += 1;
            } else {
                self.stats.duplicates += 1;
            }
            let due = seq_diff(self.expected, self.acked);
            if absorbed || due as usize >= WINDOW / 2 {
                // A duplicate says our acknowledgement was lost; a half
                // window unacknowledged stalls the sender soon.
                self.ack_alone(&h, cx);
            } else if due > 0 && self.ack_at.is_none() {
                self.ack_at = Some(cx.now + self.ack_delay);
            }
        }
        self.settle(cx);
    }

    /// Post-deliver reads the headers only.
    fn reads_delivered_data(&self) -> bool {
        false
    }

    fn predict_deliver(&self, hdr: &mut ViewMut) {
        if let Some(h) = self.h {
            hdr.set(h.seq, u64::from(self.expected));
            hdr.set(h.ack_only, 0);
        }
    }

    fn on_timer(&mut self, cx: &mut Ctx) {
        let Some(h) = self.h else { return };
        if self.rtx_at.is_some_and(|t| t <= cx.now) {
            // Go-back-N: everything unacknowledged, oldest first, with a
            // fresh acknowledgement.
            for (_, buf, data) in &self.unacked {
                let mut hdr = buf.clone();
                cx.layout
                    .set(&mut hdr, cx.order, h.ack, u64::from(self.expected));
                cx.fx.down.push(Emit {
                    hdr,
                    data: data.clone(),
                    unusual: true,
                });
                self.stats.retransmitted += 1;
            }
            self.acked = self.expected;
            self.ack_at = None;
            self.rtx_at = (!self.unacked.is_empty()).then(|| cx.now + self.rto);
        }
        if self.ack_at.is_some_and(|t| t <= cx.now) {
            self.ack_alone(&h, cx);
        }
        self.settle(cx);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats;
        vec![
            ("retransmitted", s.retransmitted),
            ("acks-sent", s.acks_sent),
            ("duplicates", s.duplicates),
            ("out-of-order", s.out_of_order),
            ("held", s.held),
        ]
    }
}
