//! Loss recovery: when to retransmit, what, and what the congestion window
//! does meanwhile. One machine serves every congestion control algorithm:
//!
//! - **Open**: no loss known. With SACK, RACK (RFC 8985, see `rack`) deems
//!   segments lost by time and fast recovery starts at the first loss; a tail
//!   loss probe (TLP) brings the ACK that lets it see a lost tail. Without
//!   SACK, three duplicate ACKs start it (RFC 5681 §3.2), unless they do not
//!   pass the last recovery point (RFC 6582 §3.2 step 1: those duplicates
//!   belong to a loss already handled).
//! - **Recovery** with SACK (RFC 6675 with RACK's loss marks): cwnd =
//!   ssthresh; the first lost segment is resent at once (RFC 6675 §5 step
//!   4.3); then, while cwnd − pipe ≥ one segment, lost segments (lowest
//!   first), then new data. RACK keeps marking losses during the recovery —
//!   retransmissions lost again among them — and they are resent in turn, so
//!   a recovery ends by its ACKs, not by the retransmission timer. The full
//!   ACK leaves cwnd = ssthresh (RFC 5681 §3.2 step 6).
//! - **Recovery** without SACK (NewReno, RFC 6582): cwnd = ssthresh + 3·SMSS,
//!   inflated by one SMSS per further duplicate ACK; each partial ACK resends
//!   the next unacknowledged segment and deflates cwnd by the bytes it
//!   acknowledged (adding one SMSS back when that was at least one SMSS). A full
//!   ACK ends recovery with cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
//! - **Loss**, after a retransmission timeout (RFC 5681 §3.1, RFC 6298 §5):
//!   cwnd is one segment and everything unSACKed is deemed lost; slow start
//!   resends it lowest first. SACK information is kept (Linux's choice: our
//!   receivers never renege, and discarding it would resend what the
//!   receiver holds), and RACK goes on finding retransmissions lost again.

use super::rack::{Rack, Tlp};
use super::sack::Scoreboard;
use super::seq::Seq;

/// The phase of loss recovery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// No loss known.
    #[default]
    Open,
    /// Fast recovery after RACK's loss marks or duplicate ACKs.
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
    /// phase began; the phase ends when SND.UNA reaches it. Kept after, so
    /// that stale duplicate ACKs do not start another recovery.
    pub point: Option<Seq>,
    /// Duplicate ACKs in a row.
    pub dupacks: u32,
    /// Every segment outstanding and what is known of it.
    pub board: Scoreboard,
    /// SACK is in use (and with it RACK-TLP).
    pub sack: bool,
    /// RACK's loss detection.
    pub rack: Rack,
    /// The tail loss probe episode.
    pub tlp: Tlp,
    /// Resend a segment next, ahead of the window check: with SACK the first
    /// lost one on entering recovery; without, the one at SND.UNA (entering
    /// fast retransmit, or a NewReno partial ACK).
    pub resend_first: bool,
    /// A NewReno partial ACK has been seen in this recovery (the RTO timer is
    /// reset only on the first, RFC 6582 §3.2 step 5 "impatient" variant).
    pub partial_seen: bool,
}

impl Recovery {
    /// True while recovering (Recovery or Loss).
    pub fn recovering(&self) -> bool {
        self.phase != Phase::Open
    }

    /// Bytes in the network (RFC 6675 SetPipe; FlightSize for NewReno, whose
    /// cwnd is inflated instead) of a flight of `flight` bytes.
    pub fn pipe(&self, flight: u32) -> u32 {
        if self.phase == Phase::Recovery && !self.sack {
            return flight;
        }
        self.board.pipe(flight)
    }

    /// True when a duplicate ACK may start NewReno's fast recovery (RFC 6582
    /// §3.2 step 1): SND.UNA is past the point of the last recovery.
    pub fn may_enter(&self, una: Seq) -> bool {
        self.phase == Phase::Open && self.point.is_none_or(|p| una > p)
    }

    /// The next retransmission as `(seq, span)`, at most `mss` long: the
    /// lowest lost segment. NewReno's fast recovery resends only through
    /// [`resend_first`](Self::resend_first).
    pub fn next_retransmission(&self, mss: u32) -> Option<(Seq, u32)> {
        if self.phase == Phase::Recovery && !self.sack {
            return None;
        }
        self.board
            .first_lost()
            .map(|(seq, len)| (seq, len.min(mss)))
    }

    /// Enters fast recovery at `nxt` (the caller sets cwnd and ssthresh).
    pub fn enter(&mut self, nxt: Seq) {
        self.phase = Phase::Recovery;
        self.point = Some(nxt);
        self.resend_first = true;
        self.partial_seen = false;
    }

    /// Enters the loss phase after a timeout at `nxt`: everything the
    /// receiver does not hold is deemed lost, and a probe episode ends.
    pub fn timeout(&mut self, nxt: Seq) {
        self.phase = Phase::Loss;
        self.point = Some(nxt);
        self.resend_first = false;
        self.dupacks = 0;
        self.tlp = Tlp::default();
        self.board.mark_all_lost();
    }

    /// SND.UNA moved to `una`: true when that ends the phase (a full ACK).
    pub fn advanced(&mut self, una: Seq) -> bool {
        self.dupacks = 0;
        let done = self.recovering() && self.point.is_none_or(|p| una >= p);
        if done {
            self.phase = Phase::Open;
            self.resend_first = false;
            self.rack.recovery_ended();
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::sack::Verdict;
    use strata_core::Instant;

    const MSS: u32 = 100;

    /// SND.UNA = 1000, ten segments of 100 bytes sent.
    fn sent(sack: bool) -> Recovery {
        let mut r = Recovery {
            sack,
            ..Recovery::default()
        };
        for i in 0..10 {
            r.board
                .sent(Seq(1000 + i * 100), Seq(1100 + i * 100), Instant::ZERO, MSS);
        }
        r
    }

    #[test]
    fn after_a_timeout_every_unsacked_byte_is_resent_lowest_first() {
        let mut r = sent(true);
        r.board
            .sack(&[(Seq(1200), Seq(1300))], Seq(1000), Seq(2000));
        r.timeout(Seq(2000));
        assert_eq!(r.next_retransmission(MSS), Some((Seq(1000), 100)));
        r.board.retransmitted(Seq(1000), Seq(1100), Instant::ZERO);
        assert_eq!(r.next_retransmission(MSS), Some((Seq(1100), 100)));
        r.board.retransmitted(Seq(1100), Seq(1200), Instant::ZERO);
        assert_eq!(
            r.next_retransmission(MSS),
            Some((Seq(1300), 100)),
            "the SACKed segment is skipped"
        );
        assert_eq!(r.pipe(1000), 200, "only the resent bytes are in flight");
    }

    #[test]
    fn sack_recovery_resends_what_is_marked_lost_and_counts_the_rest_in_flight() {
        let mut r = sent(true);
        r.board
            .sack(&[(Seq(1100), Seq(1400))], Seq(1000), Seq(2000));
        r.board.mark_lost(|s| {
            if s.start == Seq(1000) {
                Verdict::Lost
            } else {
                Verdict::Keep
            }
        });
        r.enter(Seq(2000));
        assert!(r.resend_first);
        assert_eq!(r.next_retransmission(MSS), Some((Seq(1000), 100)));
        assert_eq!(r.pipe(1000), 600);
    }

    #[test]
    fn newreno_recovery_counts_the_whole_flight_and_resends_only_on_request() {
        let mut r = sent(false);
        r.enter(Seq(2000));
        assert!(r.resend_first);
        assert_eq!(r.next_retransmission(MSS), None);
        assert_eq!(r.pipe(1000), 1000);
    }

    #[test]
    fn duplicates_of_a_loss_already_handled_do_not_start_recovery_again() {
        let mut r = Recovery::default();
        r.timeout(Seq(2000));
        assert!(!r.may_enter(Seq(1000)));
        assert!(!r.advanced(Seq(1500)), "a partial ACK");
        assert!(r.advanced(Seq(2000)), "the full ACK ends the phase");
        assert!(!r.may_enter(Seq(2000)), "still at the point");
        assert!(r.may_enter(Seq(2001)));
    }
}
