//! The sender's SACK scoreboard (RFC 2018, RFC 6675 §3–4): which bytes above
//! SND.UNA the receiver holds, which are deemed lost, how many are in the
//! network (`pipe`) and which to retransmit next (`NextSeg`).
//!
//! The board keeps byte ranges, not segments: sorted, disjoint `[start, end)`
//! ranges between SND.UNA and SND.NXT. RFC 6675's per-octet rules become range
//! arithmetic. IsLost(seq) is monotone — the lower a byte, the more is SACKed
//! above it — so it is summed up as one boundary: every unSACKed byte below
//! [`Scoreboard::lost_below`] is lost.

use super::seq::Seq;

/// DupThresh (RFC 6675 §2, RFC 5681 §3.2).
pub const DUP_THRESH: u32 = 3;

/// Most ranges kept; a receiver reports at most four per ACK, so only heavy,
/// scattered loss comes near this. Beyond it the highest ranges are forgotten,
/// which only makes the sender more conservative.
pub const MAX_RANGES: usize = 512;

/// SACKed ranges above SND.UNA.
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    ranges: Vec<(Seq, Seq)>,
}

impl Scoreboard {
    /// The SACKed ranges, lowest first.
    pub fn ranges(&self) -> &[(Seq, Seq)] {
        &self.ranges
    }

    /// Records the blocks of an ACK. Blocks outside `[una, nxt]` are invalid
    /// (RFC 2018 §3: they must name data sent and not yet acknowledged) and are
    /// clipped or ignored; this also ignores D-SACK blocks (RFC 2883), which
    /// lie below SND.UNA. Returns how many bytes became SACKed.
    pub fn add(&mut self, blocks: &[(Seq, Seq)], una: Seq, nxt: Seq) -> u32 {
        let before = self.sacked();
        for &(l, r) in blocks {
            let (l, r) = (l.max(una), r.min(nxt));
            if l < r {
                self.insert(l, r);
            }
        }
        self.sacked().saturating_sub(before)
    }

    fn insert(&mut self, mut l: Seq, mut r: Seq) {
        // The ranges that touch or overlap [l, r) merge with it.
        let first = self.ranges.partition_point(|&(_, e)| e < l);
        let mut last = first;
        while last < self.ranges.len() && self.ranges[last].0 <= r {
            l = l.min(self.ranges[last].0);
            r = r.max(self.ranges[last].1);
            last += 1;
        }
        self.ranges.splice(first..last, [(l, r)]);
        self.ranges.truncate(MAX_RANGES);
    }

    /// The cumulative ACK moved to `una`: drops what lies below it.
    pub fn advance(&mut self, una: Seq) {
        self.ranges.retain_mut(|(l, r)| {
            *l = (*l).max(una);
            *l < *r
        });
    }

    /// Bytes SACKed in all.
    pub fn sacked(&self) -> u32 {
        self.ranges.iter().map(|&(l, r)| r.since(l)).sum()
    }

    /// Bytes SACKed within `[a, b)`.
    pub fn sacked_in(&self, a: Seq, b: Seq) -> u32 {
        self.ranges
            .iter()
            .map(|&(l, r)| r.min(b).since(l.max(a)))
            .sum()
    }

    /// The end of the highest SACKed range (HighSACK + 1).
    pub fn highest(&self) -> Option<Seq> {
        self.ranges.last().map(|&(_, r)| r)
    }

    /// RFC 6675 IsLost, as a boundary: an unSACKed byte is lost when at least
    /// DupThresh ranges, or more than (DupThresh − 1)·SMSS bytes, are SACKed
    /// above it. `None` when no byte is lost.
    pub fn lost_below(&self, mss: u32) -> Option<Seq> {
        let mut bytes = 0u32;
        for (n, &(l, r)) in self.ranges.iter().rev().enumerate() {
            bytes = bytes.saturating_add(r.since(l));
            if n as u32 + 1 >= DUP_THRESH || bytes > (DUP_THRESH - 1) * mss {
                return Some(l);
            }
        }
        None
    }

    /// RFC 6675 SetPipe over `[una, nxt)`: every unSACKed byte not lost counts
    /// once, and once more when it was retransmitted (lies below `high_rxt`).
    pub fn pipe(&self, una: Seq, nxt: Seq, high_rxt: Seq, lost_below: Seq) -> u32 {
        let unsacked = |a: Seq, b: Seq| {
            if a < b {
                b.since(a) - self.sacked_in(a, b)
            } else {
                0
            }
        };
        unsacked(lost_below.max(una), nxt) + unsacked(una, high_rxt.min(nxt))
    }

    /// The first unSACKed bytes at or after `from` and before `limit`, as
    /// `[start, end)` up to the next SACKed range or `limit`.
    pub fn next_hole(&self, from: Seq, limit: Seq) -> Option<(Seq, Seq)> {
        let mut start = from;
        for &(l, r) in &self.ranges {
            if r <= start {
                continue;
            }
            if l <= start {
                start = r;
                continue;
            }
            let end = l.min(limit);
            return (start < end).then_some((start, end));
        }
        (start < limit).then_some((start, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 100;

    /// SND.UNA = 1000, ten segments of 100 bytes sent.
    fn board(blocks: &[(u32, u32)]) -> Scoreboard {
        let mut b = Scoreboard::default();
        let blocks: Vec<(Seq, Seq)> = blocks.iter().map(|&(l, r)| (Seq(l), Seq(r))).collect();
        b.add(&blocks, Seq(1000), Seq(2000));
        b
    }

    #[test]
    fn blocks_merge_and_invalid_ones_are_ignored() {
        let mut b = board(&[(1200, 1300), (1300, 1400), (1600, 1700)]);
        assert_eq!(
            b.ranges(),
            &[(Seq(1200), Seq(1400)), (Seq(1600), Seq(1700))]
        );
        assert_eq!(
            b.add(&[(Seq(2000), Seq(2100))], Seq(1000), Seq(2000)),
            0,
            "beyond SND.NXT"
        );
        assert_eq!(
            b.add(&[(Seq(900), Seq(1000))], Seq(1000), Seq(2000)),
            0,
            "a D-SACK"
        );
        assert_eq!(b.add(&[(Seq(1350), Seq(1650))], Seq(1000), Seq(2000)), 200);
        assert_eq!(b.ranges(), &[(Seq(1200), Seq(1700))]);
        b.advance(Seq(1500));
        assert_eq!(b.ranges(), &[(Seq(1500), Seq(1700))]);
        assert_eq!(b.sacked(), 200);
    }

    #[test]
    fn a_byte_is_lost_once_dupthresh_segments_are_sacked_above_it() {
        let b = board(&[(1100, 1200), (1300, 1400)]);
        assert_eq!(b.lost_below(MSS), None, "two segments above are not enough");
        let b = board(&[(1100, 1200), (1300, 1400), (1500, 1600)]);
        assert_eq!(
            b.lost_below(MSS),
            Some(Seq(1100)),
            "three discontiguous ranges"
        );
        let b = board(&[(1200, 1501)]);
        assert_eq!(b.lost_below(MSS), Some(Seq(1200)), "more than 2·SMSS bytes");
    }

    #[test]
    fn pipe_counts_unsacked_bytes_not_lost_and_retransmissions_again() {
        // Lost: 1000–1100 (below the boundary 1100); SACKed 1100–1400.
        let b = board(&[(1100, 1400)]);
        let lost = b.lost_below(MSS).unwrap();
        assert_eq!(lost, Seq(1100));
        assert_eq!(
            b.pipe(Seq(1000), Seq(2000), Seq(1000), lost),
            600,
            "1400–2000 in flight"
        );
        assert_eq!(
            b.pipe(Seq(1000), Seq(2000), Seq(1100), lost),
            700,
            "the retransmitted segment is in flight again"
        );
        assert_eq!(
            Scoreboard::default().pipe(Seq(1000), Seq(2000), Seq(1000), Seq(1000)),
            1000,
            "no SACK: the whole flight"
        );
    }

    #[test]
    fn next_hole_walks_the_unsacked_bytes_in_order() {
        let b = board(&[(1100, 1200), (1300, 1400)]);
        assert_eq!(
            b.next_hole(Seq(1000), Seq(2000)),
            Some((Seq(1000), Seq(1100)))
        );
        assert_eq!(
            b.next_hole(Seq(1100), Seq(2000)),
            Some((Seq(1200), Seq(1300)))
        );
        assert_eq!(
            b.next_hole(Seq(1250), Seq(1280)),
            Some((Seq(1250), Seq(1280)))
        );
        assert_eq!(b.next_hole(Seq(1300), Seq(1400)), None);
        assert_eq!(
            b.next_hole(Seq(1300), Seq(2000)),
            Some((Seq(1400), Seq(2000)))
        );
    }
}
