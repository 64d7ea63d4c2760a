//! The receive side: RCV.NXT and the window (RFC 9293 §3.3.1, §3.8.6.2.2),
//! the out-of-order queue and the SACK blocks it makes (RFC 2018 §4), the
//! delayed-ACK rule (RFC 9293 §3.8.6.3, RFC 5681 §4.2) and receive-buffer
//! autotuning.
//!
//! In-order data is not kept: it goes to the application at once, and only
//! counts against the window while the application has not consumed it (with
//! manual flow control, `tcp::Consumed`). Out-of-order data waits here, as the
//! received messages themselves (no copy), until the gap before it fills.
//!
//! Autotuning follows Linux's dynamic right-sizing (`tcp_rcv_space_adjust`):
//! once per receiver-side round trip the bytes the application took in that
//! round trip are compared with the previous round trip's; when they grew, the
//! buffer grows to twice that amount (the window must cover one round trip of
//! data and the sender's growth during the next), capped at `rcvbuf_max`. The
//! round trip is measured from timestamps (the TSecr of arriving data) or, with
//! timestamps off, by how long one window of data takes to arrive.

use std::collections::VecDeque;
use std::time::Duration;

use strata_core::{Instant, Message};

use super::seq::Seq;

/// Most out-of-order segments held; more are dropped and counted.
pub const MAX_OUT_OF_ORDER: usize = 4096;

/// Most SACK blocks remembered for reporting.
const SACK_MEMORY: usize = 4;

/// Most bytes one ACK acknowledges when data arrives in batches (Linux's
/// largest GRO packet).
pub const MAX_STRETCH_ACK: u32 = 64 * 1024;

/// What became of a segment's data.
#[derive(Debug, Default)]
pub struct Accepted {
    /// In-order data for the application, joined with any out-of-order data
    /// the segment made contiguous.
    pub data: Option<Message>,
    /// The FIN is now in order: the peer has finished.
    pub fin: bool,
    /// The data went to the out-of-order queue.
    pub queued: bool,
    /// The out-of-order queue was full; the data was dropped.
    pub overflow: bool,
}

/// A contiguous run of out-of-order data.
#[derive(Debug)]
struct Block {
    start: Seq,
    data: Message,
    /// Segments it was made of.
    segments: usize,
}

impl Block {
    fn end(&self) -> Seq {
        self.start + self.data.len() as u32
    }
}

/// Receiver-side round-trip estimate and autotuning state.
#[derive(Debug)]
struct Autotune {
    rtt: Option<Duration>,
    /// Without timestamps: when RCV.NXT reaches `.0`, a window has arrived
    /// since `.1`.
    probe: Option<(Seq, Instant)>,
    copied: u64,
    mark: (Instant, u64),
    space: u64,
}

/// The receive side of a connection.
#[derive(Debug)]
pub struct Receiver {
    /// IRS: the peer's initial sequence number.
    pub irs: Seq,
    /// RCV.NXT.
    pub nxt: Seq,
    /// The right edge of the last window advertised (RCV.NXT + RCV.WND when it
    /// was sent). It never moves left (RFC 9293 §3.8.6.2.2: no shrinking).
    pub adv: Seq,
    /// Our window scale (Rcv.Wind.Shift).
    pub wscale: u8,
    /// The buffer's current size.
    pub rcvbuf: usize,
    /// The most it may grow to.
    pub rcvbuf_max: usize,
    /// Delivered bytes the application has not consumed (manual flow control).
    pub unread: usize,
    /// Manual flow control: delivered data counts until `Consumed`.
    pub manual: bool,
    /// Out-of-order data, by sequence number: disjoint blocks that do not
    /// touch, each one message (the segments received, joined without copy).
    ooo: VecDeque<Block>,
    /// Segments held in `ooo`, for its bound.
    ooo_segments: usize,
    /// A FIN that arrived out of order.
    ooo_fin: Option<Seq>,
    /// SACK blocks, most recent first.
    sack: Vec<(Seq, Seq)>,
    /// A duplicate segment to report in the next ACK's first SACK block
    /// (D-SACK, RFC 2883), so the sender learns a retransmission was not
    /// needed.
    pub dsack: Option<(Seq, Seq)>,
    /// In-order bytes received since the last ACK we sent.
    pub unacked: u32,
    /// The largest segment seen (Linux's rcv_mss), for "every second full
    /// segment".
    pub rcv_mss: u32,
    /// Send an ACK without delay.
    pub ack_now: bool,
    /// Two full-sized segments have arrived since the last ACK: one is due
    /// once the segments that arrived with them have been processed (see
    /// [`accept`](Self::accept)).
    pub ack_soon: bool,
    tune: Autotune,
}

impl Receiver {
    /// A receive side for a peer whose ISN is `irs`.
    pub fn new(irs: Seq, rcvbuf: usize, rcvbuf_max: usize, wscale: u8, now: Instant) -> Receiver {
        let nxt = irs + 1;
        Receiver {
            irs,
            nxt,
            adv: nxt,
            wscale,
            rcvbuf,
            rcvbuf_max: rcvbuf_max.max(rcvbuf),
            unread: 0,
            manual: false,
            ooo: VecDeque::new(),
            ooo_segments: 0,
            ooo_fin: None,
            sack: Vec::new(),
            dsack: None,
            unacked: 0,
            rcv_mss: 536,
            ack_now: false,
            ack_soon: false,
            tune: Autotune {
                rtt: None,
                probe: None,
                copied: 0,
                mark: (now, 0),
                space: 0,
            },
        }
    }

    /// RCV.WND as last advertised.
    pub fn wnd(&self) -> u32 {
        self.adv.since(self.nxt)
    }

    /// Bytes held out of order.
    pub fn ooo_bytes(&self) -> usize {
        self.ooo.iter().map(|b| b.data.len()).sum()
    }

    /// True when data waits out of order.
    pub fn has_gap(&self) -> bool {
        !self.ooo.is_empty() || self.ooo_fin.is_some()
    }

    /// The largest window the scale can express.
    fn max_window(&self) -> u32 {
        u32::from(u16::MAX) << self.wscale
    }

    /// The window field for the segment about to be sent, moving the right
    /// edge (RFC 9293 §3.8.6.2.2's receiver SWS avoidance: only by at least
    /// min(RCV.BUFF/2, MSS)) and never to the left. The field is rounded up to
    /// the scale's unit, as Linux does, so the edge never appears to shrink.
    pub fn select_window(&mut self, mss: u32) -> u16 {
        let free = self
            .rcvbuf
            .saturating_sub(self.unread)
            .min(self.max_window() as usize) as u32;
        let right = self.nxt + free;
        let step = ((self.rcvbuf / 2) as u32).min(mss).max(1);
        if self.adv < self.nxt || right.since(self.adv) >= step {
            self.adv = right.max(self.adv);
        }
        let unit = 1u32 << self.wscale;
        let field = (self.wnd().div_ceil(unit)).min(u32::from(u16::MAX));
        self.adv = self.nxt + (field << self.wscale);
        field as u16
    }

    /// Whether freeing buffer space opened the window enough to announce it
    /// at once (a window update, RFC 9293 §3.8.6.2.2): the edge can move by
    /// min(RCV.BUFF/2, 2·MSS), or the window is below one MSS and can move by
    /// the receiver-SWS step.
    pub fn window_update_due(&self, mss: u32) -> bool {
        let free = self
            .rcvbuf
            .saturating_sub(self.unread)
            .min(self.max_window() as usize) as u32;
        let right = self.nxt + free;
        if right <= self.adv {
            return false;
        }
        let grow = right.since(self.adv);
        let half = (self.rcvbuf / 2) as u32;
        grow >= half.min(2 * mss).max(1) || (self.wnd() < mss && grow >= half.min(mss))
    }

    /// Takes the data of an acceptable segment that starts at `seq` (already
    /// trimmed to start at or after RCV.NXT and end within the window).
    pub fn accept(&mut self, seq: Seq, mut payload: Message, fin: bool) -> Accepted {
        let mut out = Accepted::default();
        // Segments a link's receive offload merged (GRO) count as what they
        // were: the size it marked them with, not their sum.
        let segment = match payload.segment_size() {
            0 => payload.len() as u32,
            size => u32::from(size),
        };
        payload.set_segment_size(0);
        if segment > self.rcv_mss {
            self.rcv_mss = segment;
        }
        if seq != self.nxt {
            out.queued = true;
            if fin {
                self.ooo_fin = Some(seq + payload.len() as u32);
            }
            if !payload.is_empty() {
                out.overflow = !self.insert(seq, payload);
            }
            self.ack_now = true;
            return out;
        }
        let filled_gap = self.has_gap();
        self.nxt = self.nxt + payload.len() as u32;
        let mut data = (!payload.is_empty()).then_some(payload);
        if fin {
            out.fin = true;
            self.ooo.clear();
            self.ooo_segments = 0;
            self.ooo_fin = None;
        } else {
            while self.ooo.front().is_some_and(|b| b.start <= self.nxt) {
                let Some(mut b) = self.ooo.pop_front() else {
                    break;
                };
                self.ooo_segments -= b.segments;
                let overlap = self.nxt.since(b.start) as usize;
                if overlap >= b.data.len() {
                    continue;
                }
                b.data.strip(overlap);
                self.nxt = self.nxt + b.data.len() as u32;
                match &mut data {
                    Some(d) => d.join(b.data),
                    None => data = Some(b.data),
                }
            }
            if self.ooo_fin == Some(self.nxt) {
                out.fin = true;
                self.ooo_fin = None;
            }
        }
        if out.fin {
            self.nxt = self.nxt + 1;
        }
        self.sack.retain(|&(_, r)| r > self.nxt);
        let n = data.as_ref().map_or(0, Message::len);
        self.unacked = self.unacked.saturating_add(n as u32);
        // RFC 5681 §4.2: ACK at once a segment that fills a gap, and a FIN;
        // otherwise every second full-sized segment — not at once but after
        // the segments that arrived in the same batch, so that one ACK covers
        // them, as Linux acknowledges a GRO batch or a backlog of segments
        // with one ACK (a "stretch ACK"; the sender counts bytes, RFC 3465, so
        // its window grows as much). Like a GRO batch, one ACK covers at most
        // 64 KiB, so that a large batch still clocks the sender and the loss
        // of one ACK costs little.
        if filled_gap || out.fin || self.unacked >= MAX_STRETCH_ACK {
            self.ack_now = true;
        } else if self.unacked >= 2 * self.rcv_mss {
            self.ack_soon = true;
        }
        out.data = data;
        out
    }

    /// Stores out-of-order bytes that are not held yet; false when the queue
    /// is full. Bytes already held win (the first copy received is kept).
    fn insert(&mut self, seq: Seq, mut payload: Message) -> bool {
        if self.ooo_segments >= MAX_OUT_OF_ORDER {
            return false;
        }
        let base = self.nxt;
        let key = |s: Seq| s.since(base);
        let mut start = seq;
        let end = seq + payload.len() as u32;
        // The gaps of [start, end) between the blocks held.
        let mut pieces: Vec<(Seq, Message)> = Vec::new();
        let mut i = self.ooo.partition_point(|b| key(b.end()) <= key(start));
        while start < end {
            match self.ooo.get(i) {
                Some(b) if b.start <= start => {
                    let skip = b.end().since(start).min(end.since(start));
                    payload.strip(skip as usize);
                    start = start + skip;
                    i += 1;
                }
                next => {
                    let gap_end = next.map_or(end, |b| b.start.min(end));
                    let rest = payload.split_off(gap_end.since(start) as usize);
                    pieces.push((start, std::mem::replace(&mut payload, rest)));
                    start = gap_end;
                }
            }
        }
        for (s, m) in pieces {
            self.place(s, m, key);
        }
        self.note_sack(seq);
        true
    }

    /// Puts a piece that overlaps nothing held into the queue, joining it to
    /// the blocks it touches.
    fn place(&mut self, s: Seq, m: Message, key: impl Fn(Seq) -> u32) {
        let e = s + m.len() as u32;
        self.ooo_segments += 1;
        let i = self.ooo.partition_point(|b| key(b.end()) < key(s));
        let touches_left = self.ooo.get(i).is_some_and(|b| b.end() == s);
        if touches_left {
            let b = &mut self.ooo[i];
            b.data.join(m);
            b.segments += 1;
            if self.ooo.get(i + 1).is_some_and(|n| n.start == e)
                && let Some(next) = self.ooo.remove(i + 1)
            {
                let b = &mut self.ooo[i];
                b.data.join(next.data);
                b.segments += next.segments;
            }
        } else if let Some(b) = self.ooo.get_mut(i).filter(|b| b.start == e) {
            let mut joined = m;
            joined.join(std::mem::take(&mut b.data));
            b.data = joined;
            b.start = s;
            b.segments += 1;
        } else {
            self.ooo.insert(
                i,
                Block {
                    start: s,
                    data: m,
                    segments: 1,
                },
            );
        }
    }

    /// The out-of-order block holding `seq`.
    fn block_of(&self, seq: Seq) -> Option<(Seq, Seq)> {
        let base = self.nxt;
        let i = self
            .ooo
            .partition_point(|b| b.end().since(base) <= seq.since(base));
        let b = self.ooo.get(i).filter(|b| b.start <= seq)?;
        Some((b.start, b.end()))
    }

    /// RFC 2018 §4: the first block reports the segment just received; the
    /// others repeat the most recently reported blocks, refreshed.
    fn note_sack(&mut self, seq: Seq) {
        let Some(first) = self.block_of(seq) else {
            return;
        };
        let mut blocks = vec![first];
        for &(l, _) in &self.sack {
            if let Some(b) = self.block_of(l)
                && !blocks.contains(&b)
            {
                blocks.push(b);
            }
        }
        blocks.truncate(SACK_MEMORY);
        self.sack = blocks;
    }

    /// The SACK blocks to send, most recent first.
    pub fn sack_blocks(&self) -> &[(Seq, Seq)] {
        &self.sack
    }

    /// An ACK carrying RCV.NXT was sent.
    pub fn acked(&mut self) {
        self.unacked = 0;
        self.ack_now = false;
        self.ack_soon = false;
    }

    /// A receiver-side round-trip sample (from the TSecr of arriving data).
    pub fn rtt_sample(&mut self, sample: Duration) {
        self.tune.rtt = Some(match self.tune.rtt {
            None => sample,
            Some(old) => (old * 7 + sample) / 8,
        });
    }

    /// Without timestamps: measures how long one window of data takes.
    pub fn window_rtt(&mut self, now: Instant) {
        match self.tune.probe {
            Some((target, since)) if self.nxt >= target => {
                self.rtt_sample(now.saturating_since(since));
                self.tune.probe = None;
            }
            Some(_) => {}
            None if self.wnd() > 0 => self.tune.probe = Some((self.nxt + self.wnd(), now)),
            None => {}
        }
    }

    /// The application took `n` more bytes: autotunes the buffer.
    pub fn copied(&mut self, n: usize, now: Instant) {
        let t = &mut self.tune;
        t.copied += n as u64;
        let Some(rtt) = t.rtt else {
            return;
        };
        if now.saturating_since(t.mark.0) < rtt {
            return;
        }
        let round = t.copied - t.mark.1;
        if round > t.space {
            t.space = round;
            let want = (2 * round).min(self.rcvbuf_max as u64) as usize;
            self.rcvbuf = self.rcvbuf.max(want);
        }
        t.mark = (now, t.copied);
    }

    /// The receiver-side round-trip estimate.
    pub fn rtt(&self) -> Option<Duration> {
        self.tune.rtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx() -> Receiver {
        Receiver::new(Seq(999), 10_000, 100_000, 0, Instant::ZERO)
    }

    fn data(n: usize, fill: u8) -> Message {
        Message::from(vec![fill; n])
    }

    #[test]
    fn out_of_order_data_waits_and_is_delivered_joined_when_the_gap_fills() {
        let mut r = rx();
        assert_eq!(r.nxt, Seq(1000));
        let q = r.accept(Seq(1100), data(100, 2), false);
        assert!(q.queued && q.data.is_none() && r.ack_now);
        assert_eq!(r.sack_blocks(), &[(Seq(1100), Seq(1200))]);
        r.accept(Seq(1300), data(100, 4), true);
        assert_eq!(
            r.sack_blocks(),
            &[(Seq(1300), Seq(1400)), (Seq(1100), Seq(1200))]
        );
        let a = r.accept(Seq(1000), data(100, 1), false);
        assert_eq!(
            a.data.unwrap().to_vec(),
            [vec![1; 100], vec![2; 100]].concat()
        );
        assert!(!a.fin && r.nxt == Seq(1200));
        assert_eq!(r.sack_blocks(), &[(Seq(1300), Seq(1400))]);
        let b = r.accept(Seq(1200), data(100, 3), false);
        assert_eq!(
            b.data.unwrap().to_vec(),
            [vec![3; 100], vec![4; 100]].concat()
        );
        assert!(b.fin, "the FIN queued behind the gap is now in order");
        assert_eq!(r.nxt, Seq(1401));
        assert!(r.sack_blocks().is_empty() && !r.has_gap());
    }

    #[test]
    fn segments_merged_by_receive_offload_count_at_the_size_they_were() {
        let mut r = rx();
        let mut merged = data(10 * 536, 1);
        merged.set_segment_size(536);
        let a = r.accept(Seq(1000), merged, false);
        assert_eq!(r.rcv_mss, 536, "not the merged 5360 bytes");
        let data = a.data.expect("in order");
        assert_eq!(data.len(), 5360);
        assert_eq!(data.segment_size(), 0, "delivered data is no super-segment");
        assert!(r.ack_soon, "ten full-sized segments are due an ACK");
    }

    #[test]
    fn overlapping_out_of_order_data_keeps_the_bytes_held_first() {
        let mut r = rx();
        r.accept(Seq(1100), data(100, 1), false);
        r.accept(Seq(1050), data(200, 2), false);
        assert_eq!(r.ooo_bytes(), 200, "1050–1250 held once");
        assert_eq!(r.sack_blocks(), &[(Seq(1050), Seq(1250))]);
        let a = r.accept(Seq(1000), data(50, 0), false);
        let got = a.data.unwrap().to_vec();
        assert_eq!(got.len(), 250);
        assert_eq!(&got[50..100], &[2; 50][..]);
        assert_eq!(
            &got[100..200],
            &[1; 100][..],
            "the first copy of 1100–1200 won"
        );
    }

    #[test]
    fn out_of_order_segments_that_touch_become_one_block_reported_once() {
        let mut r = rx();
        r.accept(Seq(1300), data(100, 3), false);
        r.accept(Seq(1100), data(100, 1), false);
        assert_eq!(
            r.sack_blocks(),
            &[(Seq(1100), Seq(1200)), (Seq(1300), Seq(1400))]
        );
        r.accept(Seq(1200), data(100, 2), false);
        assert_eq!(
            r.sack_blocks(),
            &[(Seq(1100), Seq(1400))],
            "the gap between them filled"
        );
        r.accept(Seq(1050), data(50, 0), false);
        assert_eq!(
            r.sack_blocks(),
            &[(Seq(1050), Seq(1400))],
            "joined in front too"
        );
        let a = r.accept(Seq(1000), data(50, 9), false);
        let got = a.data.unwrap().to_vec();
        assert_eq!(got.len(), 400);
        assert_eq!(
            (got[0], got[50], got[100], got[200], got[399]),
            (9, 0, 1, 2, 3)
        );
    }

    #[test]
    fn every_second_full_segment_is_acknowledged_after_its_batch_and_64_kib_at_once() {
        let mut r = Receiver::new(Seq(999), 1 << 20, 1 << 20, 0, Instant::ZERO);
        r.accept(Seq(1000), data(1000, 0), false);
        assert!(!r.ack_now && !r.ack_soon);
        r.accept(Seq(2000), data(1000, 0), false);
        assert!(r.ack_soon && !r.ack_now);
        r.acked();
        assert_eq!(r.unacked, 0);
        assert!(!r.ack_soon);
        for i in 0..66 {
            r.accept(Seq(3000 + i * 1000), data(1000, 0), false);
        }
        assert!(
            r.ack_now,
            "a batch of more than 64 KiB is acknowledged within"
        );
    }

    #[test]
    fn the_window_edge_moves_only_by_a_useful_step_and_never_back() {
        let mut r = rx();
        r.manual = true;
        assert_eq!(r.select_window(1000), 10_000);
        r.accept(Seq(1000), data(9_500, 0), false);
        r.unread = 9_500;
        assert_eq!(r.select_window(1000), 500, "the edge stays where it was");
        r.unread = 9_000;
        assert_eq!(
            r.select_window(1000),
            500,
            "500 bytes freed: less than one MSS"
        );
        assert!(!r.window_update_due(1000));
        r.unread = 0;
        assert!(r.window_update_due(1000));
        assert_eq!(r.select_window(1000), 10_000);
    }

    #[test]
    fn a_scaled_window_is_rounded_up_to_the_scale_unit() {
        let mut r = Receiver::new(Seq(0), 1_000_000, 1_000_000, 7, Instant::ZERO);
        let field = r.select_window(1448);
        assert_eq!(u32::from(field), 1_000_000u32.div_ceil(128));
        assert!(r.wnd() >= 1_000_000 && r.wnd() < 1_000_000 + 128);
    }

    #[test]
    fn autotuning_grows_the_buffer_to_twice_what_one_round_trip_delivered() {
        let mut r = rx();
        let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
        r.rtt_sample(Duration::from_millis(10));
        r.copied(30_000, ms(5));
        assert_eq!(r.rcvbuf, 10_000, "within the first round trip");
        r.copied(10_000, ms(10));
        assert_eq!(r.rcvbuf, 80_000, "40 kB in one round trip");
        r.copied(10_000, ms(20));
        assert_eq!(r.rcvbuf, 80_000, "less than before: no change");
        r.copied(90_000, ms(30));
        assert_eq!(r.rcvbuf, 100_000, "capped");
    }
}
