//! Loss recovery: when to retransmit, what, and what the congestion window
//! does meanwhile. One machine serves every congestion control algorithm:
//!
//! - **Open**: no loss suspected. Three duplicate ACKs (RFC 5681 §3.2), or a
//!   SACK scoreboard that deems SND.UNA lost (RFC 6675 §5), start fast
//!   recovery, unless the ACK does not pass the last recovery point (RFC 6582
//!   §3.2 step 1: those duplicates belong to a loss already handled).
//! - **Recovery** with SACK (RFC 6675): cwnd = ssthresh; the first
//!   unacknowledged segment is resent at once; then, while cwnd − pipe ≥ one
//!   segment, NextSeg picks lost holes (rule 1), new data (rule 2), or other
//!   holes below the highest SACK (rule 3). The optional rescue retransmission
//!   (rule 4) is not done.
//! - **Recovery** without SACK (NewReno, RFC 6582): cwnd = ssthresh + 3·SMSS,
//!   inflated by one SMSS per further duplicate ACK; each partial ACK resends
//!   the next unacknowledged segment and deflates cwnd by the bytes it
//!   acknowledged (adding one SMSS back when that was at least one SMSS). A full
//!   ACK ends recovery with cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
//! - **Loss**, after a retransmission timeout (RFC 5681 §3.1, RFC 6298 §5):
//!   cwnd is one segment and everything unSACKed that was sent before the
//!   timeout is deemed lost; slow start resends it hole by hole, below the
//!   point where the timeout happened. SACK information is kept (Linux's
//!   choice: our receivers never renege, and discarding it would resend what
//!   the receiver holds).

use super::sack::Scoreboard;
use super::seq::Seq;

/// The phase of loss recovery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// No loss suspected.
    #[default]
    Open,
    /// Fast recovery after duplicate ACKs or SACKs.
    Recovery,
    /// Recovering after a retransmission timeout.
    Loss,
}

/// Loss recovery state of a connection.
#[derive(Clone, Debug, Default)]
pub struct Recovery {
    /// The phase.
    pub phase: Phase,
    /// RecoveryPoint (RFC 6675) / `recover` (RFC 6582): SND.NXT when the
    /// phase began; the phase ends when SND.UNA passes it. Kept after, so
    /// that stale duplicate ACKs do not start another recovery.
    pub point: Option<Seq>,
    /// HighRxt: one past the highest byte retransmitted.
    pub high_rxt: Seq,
    /// Duplicate ACKs in a row.
    pub dupacks: u32,
    /// What the peer holds above SND.UNA.
    pub board: Scoreboard,
    /// SACK is in use.
    pub sack: bool,
    /// Resend the segment at SND.UNA next, ahead of the window check (entering
    /// fast retransmit, or a NewReno partial ACK).
    pub resend_una: bool,
    /// A NewReno partial ACK has been seen in this recovery (the RTO timer is
    /// reset only on the first, RFC 6582 §3.2 step 5 "impatient" variant).
    pub partial_seen: bool,
}

impl Recovery {
    /// True while recovering (Recovery or Loss).
    pub fn recovering(&self) -> bool {
        self.phase != Phase::Open
    }

    /// The boundary below which unSACKed bytes are deemed lost.
    pub fn lost_below(&self, una: Seq, mss: u32) -> Seq {
        match self.phase {
            Phase::Loss => self.point.unwrap_or(una).max(una),
            Phase::Recovery | Phase::Open if self.sack => {
                self.board.lost_below(mss).unwrap_or(una).max(una)
            }
            _ => una,
        }
    }

    /// Bytes in the network (RFC 6675 SetPipe; FlightSize for NewReno, whose
    /// cwnd is inflated instead).
    pub fn pipe(&self, una: Seq, nxt: Seq, mss: u32) -> u32 {
        if self.phase == Phase::Recovery && !self.sack {
            return nxt.since(una);
        }
        let lost = self.lost_below(una, mss);
        self.board.pipe(una, nxt, self.high_rxt.max(una), lost)
    }

    /// True when a duplicate ACK may start fast recovery (RFC 6582 §3.2 step
    /// 1): SND.UNA is past the point of the last recovery.
    pub fn may_enter(&self, una: Seq) -> bool {
        self.phase == Phase::Open && self.point.is_none_or(|p| una > p)
    }

    /// The next retransmission as `(seq, span)` in sequence space, at most
    /// `mss` long: NextSeg rule 1 (a lost hole above HighRxt), or with `rule3`
    /// rule 3 (any hole below the highest SACK). After a timeout every hole
    /// below the recovery point is lost. NewReno resends only through
    /// [`resend_una`](Self::resend_una).
    pub fn next_retransmission(&self, una: Seq, mss: u32, rule3: bool) -> Option<(Seq, u32)> {
        if self.phase == Phase::Open || (self.phase == Phase::Recovery && !self.sack) {
            return None;
        }
        let from = self.high_rxt.max(una);
        let lost = self.lost_below(una, mss);
        let hole = match self.board.next_hole(from, lost) {
            Some(h) => Some(h),
            None if rule3 && self.phase == Phase::Recovery => {
                self.board.next_hole(from, self.board.highest()?)
            }
            None => None,
        };
        hole.map(|(s, e)| (s, e.since(s).min(mss)))
    }

    /// Enters fast recovery at `nxt` (the caller sets cwnd and ssthresh).
    pub fn enter(&mut self, una: Seq, nxt: Seq) {
        self.phase = Phase::Recovery;
        self.point = Some(nxt);
        self.high_rxt = una;
        self.resend_una = true;
        self.partial_seen = false;
    }

    /// Enters the loss phase after a timeout at `nxt`.
    pub fn timeout(&mut self, una: Seq, nxt: Seq) {
        self.phase = Phase::Loss;
        self.point = Some(nxt);
        self.high_rxt = una;
        self.resend_una = false;
        self.dupacks = 0;
    }

    /// SND.UNA moved to `una`: forgets what it covers; true when that ends the
    /// phase (a full ACK).
    pub fn advanced(&mut self, una: Seq) -> bool {
        self.board.advance(una);
        self.high_rxt = self.high_rxt.max(una);
        self.dupacks = 0;
        let done = self.recovering() && self.point.is_none_or(|p| una >= p);
        if done {
            self.phase = Phase::Open;
            self.resend_una = false;
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 100;

    #[test]
    fn after_a_timeout_every_unsacked_byte_sent_before_it_is_resent_in_order() {
        let mut r = Recovery {
            sack: true,
            ..Recovery::default()
        };
        r.board.add(&[(Seq(1200), Seq(1300))], Seq(1000), Seq(1500));
        r.timeout(Seq(1000), Seq(1500));
        assert_eq!(
            r.next_retransmission(Seq(1000), MSS, false),
            Some((Seq(1000), 100))
        );
        r.high_rxt = Seq(1100);
        assert_eq!(
            r.next_retransmission(Seq(1000), MSS, false),
            Some((Seq(1100), 100))
        );
        r.high_rxt = Seq(1200);
        assert_eq!(
            r.next_retransmission(Seq(1000), MSS, false),
            Some((Seq(1300), 100)),
            "the SACKed range is skipped"
        );
        assert_eq!(
            r.pipe(Seq(1000), Seq(1500), MSS),
            200,
            "only the resent bytes are in flight"
        );
    }

    #[test]
    fn sack_recovery_resends_lost_holes_then_by_rule_3_the_others() {
        let mut r = Recovery {
            sack: true,
            ..Recovery::default()
        };
        // 1000–1100 lost, 1100–1400 SACKed (three segments), 1400–1500 a hole
        // below 1500–1600 SACKed: not lost yet (one segment above it).
        r.board.add(
            &[(Seq(1100), Seq(1400)), (Seq(1500), Seq(1600))],
            Seq(1000),
            Seq(2000),
        );
        r.enter(Seq(1000), Seq(2000));
        assert_eq!(
            r.next_retransmission(Seq(1000), MSS, false),
            Some((Seq(1000), 100))
        );
        r.high_rxt = Seq(1100);
        assert_eq!(r.next_retransmission(Seq(1000), MSS, false), None);
        assert_eq!(
            r.next_retransmission(Seq(1000), MSS, true),
            Some((Seq(1400), 100))
        );
    }

    #[test]
    fn newreno_recovery_counts_the_whole_flight_and_resends_only_on_request() {
        let mut r = Recovery::default();
        r.enter(Seq(1000), Seq(2000));
        assert!(r.resend_una);
        assert_eq!(r.next_retransmission(Seq(1000), MSS, true), None);
        assert_eq!(r.pipe(Seq(1000), Seq(2000), MSS), 1000);
    }

    #[test]
    fn duplicates_of_a_loss_already_handled_do_not_start_recovery_again() {
        let mut r = Recovery::default();
        r.timeout(Seq(1000), Seq(2000));
        assert!(!r.may_enter(Seq(1000)));
        assert!(!r.advanced(Seq(1500)), "a partial ACK");
        assert!(r.advanced(Seq(2000)), "the full ACK ends the phase");
        assert!(!r.may_enter(Seq(2000)), "still at the point");
        assert!(r.may_enter(Seq(2001)));
    }
}
