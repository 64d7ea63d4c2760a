//! Errno-like typed errors shared by the foreign subsystems.
//!
//! Both BSD and STREAMS report failures with UNIX error numbers: BSD returns
//! them immediately from `pr_usrreq`/`pr_output` (seed 004 §4.1.3), STREAMS
//! carries them back in messages (`T_ERROR_ACK`, `T_UDERROR_IND`, `M_ERROR`).
//! One type serves both so an encapsulation module translates by value.

/// A UNIX error number, as the subsystems of seed 004 return them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Errno {
    /// No buffer space: a pool or a socket/queue buffer is full.
    #[error("ENOBUFS: no buffer space available")]
    Enobufs,
    /// Invalid argument (a malformed request or address).
    #[error("EINVAL: invalid argument")]
    Einval,
    /// The address (socket number) is already bound.
    #[error("EADDRINUSE: address already in use")]
    Eaddrinuse,
    /// No free address (dynamic socket numbers exhausted) or not ours.
    #[error("EADDRNOTAVAIL: cannot assign requested address")]
    Eaddrnotavail,
    /// The operation is not supported by this protocol.
    #[error("EOPNOTSUPP: operation not supported")]
    Eopnotsupp,
    /// The message is larger than the protocol can carry.
    #[error("EMSGSIZE: message too long")]
    Emsgsize,
    /// No route or interface towards the destination.
    #[error("EHOSTUNREACH: no route to host")]
    Ehostunreach,
    /// The socket or stream is not bound/connected.
    #[error("ENOTCONN: not connected")]
    Enotconn,
    /// A transaction ran out of retries.
    #[error("ETIMEDOUT: timed out")]
    Etimedout,
    /// The operation would block (flow control).
    #[error("EWOULDBLOCK: operation would block")]
    Ewouldblock,
    /// The stream or socket was hung up or has an error latched.
    #[error("EIO: input/output error")]
    Eio,
    /// Too many outstanding operations (a table is full).
    #[error("EAGAIN: resource temporarily unavailable")]
    Eagain,
}

impl Errno {
    /// The classic UNIX number (Linux values), as TPI's `UNIX_error` carries it.
    pub fn number(self) -> u32 {
        match self {
            Errno::Enobufs => 105,
            Errno::Einval => 22,
            Errno::Eaddrinuse => 98,
            Errno::Eaddrnotavail => 99,
            Errno::Eopnotsupp => 95,
            Errno::Emsgsize => 90,
            Errno::Ehostunreach => 113,
            Errno::Enotconn => 107,
            Errno::Etimedout => 110,
            Errno::Ewouldblock => 11,
            Errno::Eio => 5,
            Errno::Eagain => 11 + 1000,
        }
    }

    /// The error for a number, when it is one of ours.
    pub fn from_number(n: u32) -> Option<Errno> {
        [
            Errno::Enobufs,
            Errno::Einval,
            Errno::Eaddrinuse,
            Errno::Eaddrnotavail,
            Errno::Eopnotsupp,
            Errno::Emsgsize,
            Errno::Ehostunreach,
            Errno::Enotconn,
            Errno::Etimedout,
            Errno::Ewouldblock,
            Errno::Eio,
            Errno::Eagain,
        ]
        .into_iter()
        .find(|e| e.number() == n)
    }
}
