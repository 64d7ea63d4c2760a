//! The connection states of RFC 9293 §3.3.2 and the transitions that do not
//! depend on sequence numbers: the user's CLOSE, a FIN arriving in order, and
//! our FIN being acknowledged. Segment checks (which segments may cause a
//! transition) are in `input`; LISTEN is a listener, not a connection
//! (`listen`).
//!
//! ```text
//!   SYN-SENT ──SYN──▶ SYN-RECEIVED ◀──SYN── (listener)
//!      │                  │
//!      └─SYN,ACK──▶ ESTABLISHED ◀──ACK──┘
//!                   │         │
//!             CLOSE │         │ FIN
//!                   ▼         ▼
//!             FIN-WAIT-1   CLOSE-WAIT
//!             │ACK    │FIN       │ CLOSE
//!             ▼       ▼          ▼
//!       FIN-WAIT-2   CLOSING   LAST-ACK
//!             │FIN    │ACK       │ ACK
//!             ▼       ▼          ▼
//!             TIME-WAIT ──2·MSL──▶ CLOSED
//! ```

use std::fmt;

/// A connection's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Active open: our SYN is out, waiting for the peer's.
    SynSent,
    /// Both SYNs seen (passive open, or a simultaneous open); ours not
    /// acknowledged yet.
    SynReceived,
    /// Open in both directions.
    Established,
    /// We closed; our FIN is not acknowledged yet.
    FinWait1,
    /// We closed and our FIN is acknowledged; the peer may still send.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; our FIN is not acknowledged yet.
    Closing,
    /// The peer closed, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both closed; waiting 2·MSL so old duplicates die (RFC 9293 §3.6.1).
    TimeWait,
    /// Gone; the connection is about to be deleted.
    Closed,
}

impl State {
    /// True once both SYNs have been acknowledged (RFC 9293's synchronized
    /// states).
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::SynSent | State::SynReceived | State::Closed)
    }

    /// True while the application may still send data.
    pub fn can_send(self) -> bool {
        matches!(
            self,
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
        )
    }

    /// True while data from the peer is acceptable (RFC 9293 §3.10.7.4,
    /// seventh step).
    pub fn can_receive(self) -> bool {
        matches!(
            self,
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2
        )
    }

    /// The user's CLOSE (RFC 9293 §3.10.4): the state to enter once our FIN is
    /// queued, or `None` when the connection simply goes (SYN-SENT) — and the
    /// state itself when CLOSE has nothing left to do.
    pub fn after_close(self) -> Option<State> {
        match self {
            State::SynSent => None,
            State::SynReceived | State::Established => Some(State::FinWait1),
            State::CloseWait => Some(State::LastAck),
            other => Some(other),
        }
    }

    /// A FIN arrived in order (RFC 9293 §3.10.7.4, eighth step). `fin_acked`
    /// says whether this same segment acknowledged our FIN.
    pub fn after_fin(self, fin_acked: bool) -> State {
        match self {
            State::SynReceived | State::Established => State::CloseWait,
            State::FinWait1 if fin_acked => State::TimeWait,
            State::FinWait1 => State::Closing,
            State::FinWait2 => State::TimeWait,
            other => other,
        }
    }

    /// Our FIN was acknowledged (RFC 9293 §3.10.7.4, fifth step).
    pub fn after_fin_acked(self) -> State {
        match self {
            State::FinWait1 => State::FinWait2,
            State::Closing => State::TimeWait,
            State::LastAck => State::Closed,
            other => other,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
            State::Closed => "CLOSED",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::State::*;

    #[test]
    fn an_active_close_goes_through_fin_wait_to_time_wait() {
        let s = Established.after_close().unwrap();
        assert_eq!(s, FinWait1);
        let s = s.after_fin_acked();
        assert_eq!(s, FinWait2);
        assert_eq!(s.after_fin(false), TimeWait);
    }

    #[test]
    fn a_fin_that_also_acknowledges_ours_goes_straight_to_time_wait() {
        assert_eq!(FinWait1.after_fin(true), TimeWait);
    }

    #[test]
    fn a_simultaneous_close_goes_through_closing() {
        let s = Established.after_close().unwrap().after_fin(false);
        assert_eq!(s, Closing);
        assert_eq!(s.after_fin_acked(), TimeWait);
    }

    #[test]
    fn a_passive_close_goes_through_close_wait_and_last_ack_to_closed() {
        let s = Established.after_fin(false);
        assert_eq!(s, CloseWait);
        assert!(s.can_send() && !s.can_receive());
        let s = s.after_close().unwrap();
        assert_eq!(s, LastAck);
        assert_eq!(s.after_fin_acked(), Closed);
    }

    #[test]
    fn closing_before_the_handshake_ends_drops_or_fins_the_connection() {
        assert_eq!(SynSent.after_close(), None, "SYN-SENT just goes");
        assert_eq!(SynReceived.after_close(), Some(FinWait1));
        assert_eq!(SynReceived.after_fin(false), CloseWait);
    }

    #[test]
    fn closing_twice_or_late_changes_nothing() {
        for s in [FinWait1, FinWait2, Closing, LastAck, TimeWait] {
            assert_eq!(s.after_close(), Some(s), "{s}");
        }
        for s in [CloseWait, Closing, LastAck, TimeWait] {
            assert_eq!(s.after_fin(false), s, "a repeated FIN in {s}");
        }
        for s in [Established, CloseWait, FinWait2, TimeWait] {
            assert_eq!(s.after_fin_acked(), s, "no FIN of ours in flight in {s}");
        }
    }

    #[test]
    fn only_synchronized_states_are_synchronized() {
        assert!(!SynSent.is_synchronized() && !SynReceived.is_synchronized());
        for s in [
            Established,
            FinWait1,
            FinWait2,
            CloseWait,
            Closing,
            LastAck,
            TimeWait,
        ] {
            assert!(s.is_synchronized(), "{s}");
        }
    }
}
