//! Counters of a connection or a listener: what was sent and received, and
//! every dropped datagram by reason (nothing is dropped silently).

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its header, or than its length field says.
    Truncated,
    /// A field holds an impossible value, or trailing bytes.
    Malformed,
    /// Unknown version or type.
    Unsupported,
    /// The mandatory header checksum failed.
    HeaderChecksum,
    /// The data checksum was present and failed.
    DataChecksum,
    /// No connection has this id (or it was forged).
    UnknownConnection,
    /// The right id from the wrong address.
    WrongAddress,
    /// A control packet on a data socket or the reverse.
    WrongChannel,
    /// A kind that makes no sense in the connection's state.
    Unexpected,
    /// A set-up whose cookie is missing is answered, a wrong or stale one dropped.
    BadCookie,
    /// The listener already holds its bound of pending set-ups.
    PendingFull,
    /// Data beyond the receiver's posted buffers.
    OutOfWindow,
    /// Data already received.
    Duplicate,
    /// Out-of-order data discarded during a go-back-N recovery (§3.2).
    GoBackNDiscard,
    /// An acknowledgement of data never sent, or an inconsistent offset.
    Inconsistent,
    /// A control packet older than one already processed.
    Stale,
}

impl DropReason {
    /// Every reason, in the order of [`Drops::iter`].
    pub const ALL: [DropReason; 16] = [
        DropReason::Truncated,
        DropReason::Malformed,
        DropReason::Unsupported,
        DropReason::HeaderChecksum,
        DropReason::DataChecksum,
        DropReason::UnknownConnection,
        DropReason::WrongAddress,
        DropReason::WrongChannel,
        DropReason::Unexpected,
        DropReason::BadCookie,
        DropReason::PendingFull,
        DropReason::OutOfWindow,
        DropReason::Duplicate,
        DropReason::GoBackNDiscard,
        DropReason::Inconsistent,
        DropReason::Stale,
    ];

    /// A short lower-case name for statistics output.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Malformed => "malformed",
            DropReason::Unsupported => "unsupported",
            DropReason::HeaderChecksum => "header-checksum",
            DropReason::DataChecksum => "data-checksum",
            DropReason::UnknownConnection => "unknown-connection",
            DropReason::WrongAddress => "wrong-address",
            DropReason::WrongChannel => "wrong-channel",
            DropReason::Unexpected => "unexpected",
            DropReason::BadCookie => "bad-cookie",
            DropReason::PendingFull => "pending-full",
            DropReason::OutOfWindow => "out-of-window",
            DropReason::Duplicate => "duplicate",
            DropReason::GoBackNDiscard => "go-back-n-discard",
            DropReason::Inconsistent => "inconsistent",
            DropReason::Stale => "stale",
        }
    }
}

impl From<crate::wire::WireError> for DropReason {
    fn from(e: crate::wire::WireError) -> DropReason {
        use crate::wire::WireError;
        match e {
            WireError::Short { .. } => DropReason::Truncated,
            WireError::Malformed => DropReason::Malformed,
            WireError::Unsupported => DropReason::Unsupported,
            WireError::HeaderChecksum => DropReason::HeaderChecksum,
            WireError::DataChecksum => DropReason::DataChecksum,
        }
    }
}

/// Drop counters, one per [`DropReason`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drops([u64; DropReason::ALL.len()]);

impl Drops {
    /// Counts one drop.
    pub fn count(&mut self, r: DropReason) {
        self.0[r as usize] += 1;
    }

    /// Drops for `r`.
    pub fn get(&self, r: DropReason) -> u64 {
        self.0[r as usize]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Each reason with its count.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.get(r)))
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Drops) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
}

/// A connection's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Data packets sent, first transmissions and retransmissions.
    pub data_sent: u64,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Data packets sent again.
    pub retransmitted: u64,
    /// Control packets sent (set-up, acknowledgements, requests, resets).
    pub control_sent: u64,
    /// Data packets accepted.
    pub data_received: u64,
    /// Payload bytes placed in application buffers (each byte once).
    pub bytes_received: u64,
    /// Control packets accepted.
    pub control_received: u64,
    /// Control packets sent without a recovery request (ACKs).
    pub acks_sent: u64,
    /// Go-back-N requests sent (NAKs).
    pub go_back_n_sent: u64,
    /// Selective retransmission requests sent (NAKs).
    pub selective_sent: u64,
    /// Recovery episodes the receiver entered.
    pub recovery_episodes: u64,
    /// Recovery episodes taken for random loss (no queue): window kept.
    pub random_loss_episodes: u64,
    /// Window halvings for congestion (a loss behind a standing queue).
    pub congestion_cuts: u64,
    /// Control packets received without a recovery request (ACKs).
    pub acks_received: u64,
    /// Control packets received with a recovery request (NAKs).
    pub naks_received: u64,
    /// Go-back-N requests the sender obeyed.
    pub go_back_n_obeyed: u64,
    /// Retransmission time-outs at the sender.
    pub timeouts: u64,
    /// Dropped datagrams by reason.
    pub drops: Drops,
}
