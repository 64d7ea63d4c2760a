//! Errors of the uniform protocol interface.

use crate::counters::DropReason;

/// Why an `open`, `control` or other UPI call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpiError {
    /// The protocol does not implement this operation.
    #[error("operation not supported by {0}")]
    Unsupported(&'static str),
    /// The session handle does not name a live session.
    #[error("no such session")]
    NoSuchSession,
    /// A participant is missing a part this layer needs, or has the wrong kind.
    #[error("bad participant: {0}")]
    BadParticipant(&'static str),
    /// The address or port is already taken.
    #[error("address in use")]
    InUse,
    /// No route or no link address for the destination.
    #[error("destination unreachable")]
    Unreachable,
    /// The protocol graph has no number for this upper protocol in this lower one.
    #[error("no protocol number for the opener in {0}")]
    NoNumber(String),
    /// The protocol is busy in a call further up the stack (a re-entrant call).
    #[error("protocol is busy (re-entrant call)")]
    Busy,
    /// A bounded resource is exhausted.
    #[error("resource exhausted: {0}")]
    Exhausted(&'static str),
    /// The session is closed or closing.
    #[error("session closed")]
    Closed,
    /// The peer refused (a reset, an ICMP error).
    #[error("refused by peer")]
    Refused,
    /// An operation timed out.
    #[error("timed out")]
    TimedOut,
    /// The handle does not name a protocol, link or application of this engine.
    #[error("no such object: {0}")]
    NoSuchObject(String),
}

impl From<UpiError> for DropReason {
    fn from(e: UpiError) -> DropReason {
        match e {
            UpiError::Unreachable => DropReason::NoRoute,
            UpiError::Exhausted(_) => DropReason::QueueFull,
            UpiError::NoSuchSession | UpiError::Closed => DropReason::NoSession,
            _ => DropReason::Refused,
        }
    }
}
