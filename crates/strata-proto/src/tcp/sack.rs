//! The sender's scoreboard (RFC 6675 §3, RFC 8985 §5.2): every segment sent
//! and not yet cumulatively acknowledged, lowest first, with when it was last
//! sent, how often it was retransmitted, whether the receiver holds it (its
//! SACK blocks, RFC 2018) and whether it is deemed lost.
//!
//! Loss detection (`rack`) marks segments lost; loss recovery resends them
//! lowest first; `pipe`, the data in the network (RFC 6675 SetPipe), is then
//! simply what was sent less what the receiver holds and what is lost — a
//! lost segment retransmitted is in the network again. The totals are kept
//! as the flags change, so neither `pipe` nor "is anything lost?" costs a
//! walk.
//!
//! A segment is recorded as it is sent, at most one SMSS; new data appended to
//! a segment that has not gone far (never retransmitted, nothing known about
//! it) joins it up to one SMSS, which bounds the records by the flight in
//! SMSS even when the application writes a byte at a time. SACK blocks and
//! retransmissions that cover part of a segment split it.
//!
//! Each segment also carries the delivery-rate snapshot of its last
//! transmission (`rate`); the scoreboard feeds the estimator as segments are
//! sent, delivered and deemed lost, so send times live in one place.

use std::collections::VecDeque;
use std::time::Duration;

use strata_core::Instant;

use super::rate::{Estimator, TxState};
use super::seq::Seq;

/// DupThresh (RFC 6675 §2, RFC 5681 §3.2; RFC 8985 §6.2 uses it too).
pub const DUP_THRESH: u32 = 3;

/// A segment sent and not yet cumulatively acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Its first sequence number.
    pub start: Seq,
    /// One past its last.
    pub end: Seq,
    /// When it was last sent (RACK's `Segment.xmit_ts`).
    pub xmit: Instant,
    /// The order of its last transmission among all of the connection's.
    pub order: u64,
    /// Times it was retransmitted.
    pub rexmits: u32,
    /// The receiver holds it (SACKed).
    pub sacked: bool,
    /// Deemed lost and not retransmitted since.
    pub lost: bool,
    /// The connection's delivery state at its last transmission (`rate`).
    pub tx: TxState,
}

impl Segment {
    /// Its length in sequence space.
    pub fn len(&self) -> u32 {
        self.end.since(self.start)
    }

    /// True when it covers no sequence space.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// The most recently sent of the segments an ACK newly delivered (RACK's
/// candidate, RFC 8985 §6.2 step 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// When it was last sent.
    pub xmit: Instant,
    /// The order of that transmission.
    pub order: u64,
    /// Its end.
    pub end: Seq,
    /// It had been retransmitted (its ACK may be for an earlier copy).
    pub retransmitted: bool,
}

impl Delivered {
    /// RACK_sent_after (RFC 8985 §6.2): sent after `order`. The RFC breaks
    /// ties of equal transmit times by sequence number, assuming segments
    /// sent together go lowest first; a retransmission decided after new data
    /// went at the same instant breaks that (every event of a simulation
    /// happens at a few instants), so the order of transmission decides.
    pub fn sent_after(&self, order: u64) -> bool {
        self.order > order
    }

    /// The later-sent of two candidates.
    pub fn newest(a: Option<Delivered>, b: Option<Delivered>) -> Option<Delivered> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if y.sent_after(x.order) { y } else { x }),
            (x, y) => x.or(y),
        }
    }
}

/// What the SACK blocks of one ACK told.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sacked {
    /// Bytes newly SACKed.
    pub bytes: u32,
    /// The most recently sent segment newly SACKed.
    pub newest: Option<Delivered>,
    /// A segment never retransmitted was newly SACKed below the highest
    /// SACKed byte: the network reordered (RFC 8985 §6.2 step 3).
    pub reordered: bool,
}

/// What loss detection decides about one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not (yet) lost, and no reason to look again on a timer.
    Keep,
    /// Lost.
    Lost,
    /// Lost unless an ACK says otherwise within this time.
    Wait(Duration),
}

/// What [`Scoreboard::mark_lost`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marked {
    /// Bytes newly deemed lost.
    pub bytes: u32,
    /// Segments deemed lost that were retransmissions: lost again.
    pub retransmissions: u32,
    /// The longest wait a segment asked for.
    pub wait: Option<Duration>,
}

/// Every segment between SND.UNA and SND.NXT.
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    segments: VecDeque<Segment>,
    sacked: u32,
    sacked_segments: u32,
    lost: u32,
    /// One past the highest byte SACKed (RFC 8985's RACK.fack).
    fack: Option<Seq>,
    /// Transmissions so far, for [`Segment::order`].
    sends: u64,
    /// Delivery rate estimation, fed as segments are sent, delivered and
    /// deemed lost.
    pub rate: Estimator,
}

impl Scoreboard {
    /// The segments, lowest first.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.iter()
    }

    /// How many segments are recorded.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// True when nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// The highest segment sent.
    pub fn last(&self) -> Option<&Segment> {
        self.segments.back()
    }

    /// Bytes SACKed.
    pub fn sacked(&self) -> u32 {
        self.sacked
    }

    /// Segments SACKed (RACK's `segs_sacked`).
    pub fn sacked_segments(&self) -> u32 {
        self.sacked_segments
    }

    /// Bytes deemed lost and not retransmitted since.
    pub fn lost(&self) -> u32 {
        self.lost
    }

    /// One past the highest byte SACKed.
    pub fn highest_sacked(&self) -> Option<Seq> {
        self.fack
    }

    /// RFC 6675 SetPipe over a flight of `flight` bytes: what was sent, less
    /// what the receiver holds, less what is lost and not yet resent.
    pub fn pipe(&self, flight: u32) -> u32 {
        flight.saturating_sub(self.sacked + self.lost)
    }

    /// New data `[start, end)` went out at `now`: one segment at most `mss`
    /// long, or a super-segment the link cuts into `mss`-long ones
    /// (segmentation offload), recorded as the segments the receiver sees.
    pub fn sent(&mut self, start: Seq, end: Seq, now: Instant, mss: u32) {
        self.sends += 1;
        let order = self.sends;
        let tx = self.rate.on_send(now, self.segments.is_empty());
        if let Some(last) = self.segments.back_mut() {
            if start < last.end {
                // Below what was sent: a resend, not new data.
                self.retransmitted(start, end, now);
                return;
            }
            let fresh = last.rexmits == 0 && !last.sacked && !last.lost && last.end == start;
            if fresh && end.since(last.start) <= mss {
                last.end = end;
                last.xmit = now;
                last.order = order;
                return;
            }
        }
        let mut from = start;
        while from < end {
            let to = if end.since(from) > mss.max(1) {
                from + mss.max(1)
            } else {
                end
            };
            self.segments.push_back(Segment {
                start: from,
                end: to,
                xmit: now,
                order,
                rexmits: 0,
                sacked: false,
                lost: false,
                tx,
            });
            from = to;
        }
    }

    /// `[start, end)` was resent at `now`: in the network again.
    pub fn retransmitted(&mut self, start: Seq, end: Seq, now: Instant) {
        self.sends += 1;
        let order = self.sends;
        let tx = self.rate.on_send(now, false);
        let (from, to) = self.cut(start, end);
        for s in self.segments.range_mut(from..to) {
            if s.sacked {
                continue;
            }
            if s.lost {
                s.lost = false;
                self.lost -= s.len();
            }
            s.xmit = now;
            s.order = order;
            s.rexmits += 1;
            s.tx = tx;
        }
    }

    /// Splits segments so that `start` and `end` fall on boundaries; returns
    /// the index range of the segments within `[start, end)`.
    fn cut(&mut self, start: Seq, end: Seq) -> (usize, usize) {
        self.split_at(start);
        self.split_at(end);
        let from = self.segments.partition_point(|s| s.end <= start);
        let to = self.segments.partition_point(|s| s.start < end);
        (from, to.max(from))
    }

    /// Splits the segment holding `at` strictly inside it in two.
    fn split_at(&mut self, at: Seq) {
        let i = self.segments.partition_point(|s| s.end <= at);
        let Some(s) = self.segments.get_mut(i) else {
            return;
        };
        if s.start < at && at < s.end {
            let mut tail = *s;
            s.end = at;
            tail.start = at;
            if tail.sacked {
                self.sacked_segments += 1;
            }
            self.segments.insert(i + 1, tail);
        }
    }

    /// The cumulative ACK moved to `una`: forgets what lies below it and
    /// returns the most recently sent segment it delivered that the receiver
    /// did not already hold.
    pub fn advance(&mut self, una: Seq) -> Option<Delivered> {
        let mut newest = None;
        while let Some(s) = self.segments.front_mut() {
            if s.end <= una {
                let s = *s;
                self.segments.pop_front();
                self.forget(&s);
                if !s.sacked {
                    newest = Delivered::newest(newest, Some(delivered(&s)));
                    self.rate.on_delivered(s.tx, s.xmit, s.len(), s.rexmits > 0);
                }
            } else {
                if s.start < una {
                    let cut = una.since(s.start);
                    if s.sacked {
                        self.sacked -= cut;
                    } else {
                        self.rate.on_delivered(s.tx, s.xmit, cut, s.rexmits > 0);
                    }
                    if s.lost {
                        self.lost -= cut;
                    }
                    s.start = una;
                }
                break;
            }
        }
        if self.fack.is_some_and(|f| f <= una) {
            self.fack = None;
        }
        newest
    }

    fn forget(&mut self, s: &Segment) {
        if s.sacked {
            self.sacked -= s.len();
            self.sacked_segments -= 1;
        }
        if s.lost {
            self.lost -= s.len();
        }
    }

    /// Records the blocks of an ACK. Blocks outside `[una, nxt)` are invalid
    /// (RFC 2018 §3: they must name data sent and not yet acknowledged) and
    /// are clipped or ignored, which also ignores D-SACK blocks (RFC 2883).
    pub fn sack(&mut self, blocks: &[(Seq, Seq)], una: Seq, nxt: Seq) -> Sacked {
        let mut out = Sacked::default();
        let fack = self.fack;
        for &(l, r) in blocks {
            let (l, r) = (l.max(una), r.min(nxt));
            if l >= r {
                continue;
            }
            let (from, to) = self.cut(l, r);
            for i in from..to {
                let s = &mut self.segments[i];
                if s.sacked {
                    continue;
                }
                s.sacked = true;
                let len = s.len();
                if s.lost {
                    s.lost = false;
                    self.lost -= len;
                }
                let s = *s;
                self.sacked += len;
                self.sacked_segments += 1;
                self.rate.on_delivered(s.tx, s.xmit, len, s.rexmits > 0);
                out.bytes += len;
                out.newest = Delivered::newest(out.newest, Some(delivered(&s)));
                out.reordered |= s.rexmits == 0 && fack.is_some_and(|f| s.end < f);
                self.fack = Some(self.fack.map_or(s.end, |f| f.max(s.end)));
            }
        }
        out
    }

    /// Offers every segment neither SACKed nor already lost to `verdict`, in
    /// order, and marks lost those it condemns.
    pub fn mark_lost(&mut self, mut verdict: impl FnMut(&Segment) -> Verdict) -> Marked {
        let mut out = Marked::default();
        for s in self.segments.iter_mut().filter(|s| !s.sacked && !s.lost) {
            match verdict(s) {
                Verdict::Keep => {}
                Verdict::Wait(w) => out.wait = Some(out.wait.map_or(w, |o| o.max(w))),
                Verdict::Lost => {
                    s.lost = true;
                    out.bytes += s.len();
                    out.retransmissions += u32::from(s.rexmits > 0);
                }
            }
        }
        self.lost += out.bytes;
        self.rate.on_lost(out.bytes);
        out
    }

    /// A retransmission timeout: everything the receiver does not hold is
    /// deemed lost (RFC 5681 §3.1, RFC 8985 §6.3 as Linux does it).
    pub fn mark_all_lost(&mut self) {
        self.mark_lost(|_| Verdict::Lost);
    }

    /// The first lost segment, as `(start, length)`.
    pub fn first_lost(&self) -> Option<(Seq, u32)> {
        if self.lost == 0 {
            return None;
        }
        self.segments
            .iter()
            .find(|s| s.lost)
            .map(|s| (s.start, s.len()))
    }
}

fn delivered(s: &Segment) -> Delivered {
    Delivered {
        xmit: s.xmit,
        order: s.order,
        end: s.end,
        retransmitted: s.rexmits > 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 100;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// SND.UNA = 1000, ten segments of 100 bytes sent 1 ms apart.
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

    fn seq(blocks: &[(u32, u32)]) -> Vec<(Seq, Seq)> {
        blocks.iter().map(|&(l, r)| (Seq(l), Seq(r))).collect()
    }

    #[test]
    fn sacks_mark_segments_held_and_invalid_blocks_are_ignored() {
        let mut b = board();
        let s = b.sack(&seq(&[(1200, 1400), (1600, 1700)]), Seq(1000), Seq(2000));
        assert_eq!((s.bytes, b.sacked(), b.sacked_segments()), (300, 300, 3));
        assert_eq!(s.newest.map(|d| d.end), Some(Seq(1700)), "sent last");
        assert_eq!(b.highest_sacked(), Some(Seq(1700)));
        let none = b.sack(&seq(&[(2000, 2100), (900, 1000)]), Seq(1000), Seq(2000));
        assert_eq!(none.bytes, 0, "beyond SND.NXT, and a D-SACK below SND.UNA");
        let again = b.sack(&seq(&[(1250, 1450)]), Seq(1000), Seq(2000));
        assert_eq!(again.bytes, 50, "a block splits the segments it ends in");
        assert_eq!(b.len(), 12);
        assert!(again.reordered, "1400–1450 arrived after 1600–1700");
    }

    #[test]
    fn the_cumulative_ack_forgets_what_it_covers_and_says_what_it_delivered() {
        let mut b = board();
        b.sack(&seq(&[(1200, 1300)]), Seq(1000), Seq(2000));
        let d = b.advance(Seq(1350)).unwrap();
        assert_eq!(
            (d.end, d.xmit),
            (Seq(1200), at(1)),
            "the latest sent; the segment SACKed before is not delivered again"
        );
        assert_eq!(b.segments().next().unwrap().start, Seq(1350));
        assert_eq!((b.sacked(), b.highest_sacked()), (0, None));
    }

    #[test]
    fn pipe_counts_what_is_neither_held_nor_lost_and_a_resend_counts_again() {
        let mut b = board();
        b.sack(&seq(&[(1100, 1400)]), Seq(1000), Seq(2000));
        let m = b.mark_lost(|s| {
            if s.start == Seq(1000) {
                Verdict::Lost
            } else {
                Verdict::Keep
            }
        });
        assert_eq!(m.bytes, 100);
        assert_eq!(b.pipe(1000), 600, "1400–2000 in flight");
        assert_eq!(b.first_lost(), Some((Seq(1000), 100)));
        b.retransmitted(Seq(1000), Seq(1100), at(20));
        assert_eq!(b.pipe(1000), 700, "the resent segment is in flight again");
        assert_eq!(b.first_lost(), None);
        b.mark_all_lost();
        assert_eq!(b.lost(), 700, "a timeout condemns all the receiver lacks");
        let m = b.mark_lost(|_| Verdict::Lost);
        assert_eq!(m.bytes, 0, "nothing is lost twice");
    }

    #[test]
    fn small_sends_join_up_to_one_segment() {
        let mut b = Scoreboard::default();
        for i in 0..10 {
            b.sent(
                Seq(1000 + i * 30),
                Seq(1030 + i * 30),
                at(u64::from(i)),
                MSS,
            );
        }
        let lens: Vec<u32> = b.segments().map(Segment::len).collect();
        assert_eq!(lens, [90, 90, 90, 30]);
    }
}
