//! Seed 001's transport over the kernel's UDP, with the paper's semantics
//! and std::net's habits: an [`XportListener`] and a stream-like
//! [`XportStream`].
//!
//! - [`XportStream::send`] takes a list of application buffers (§3.5.2's
//!   multiple buffering) and returns, once at least one is acknowledged,
//!   those given back — never copied by the library;
//! - [`XportStream::recv`] fills an application buffer: data is placed at
//!   its final offset even when it arrives out of order;
//! - [`XportStream::wait`] replaces `select` for the application's own
//!   descriptors (§3.6): while it waits, the connection keeps running;
//! - errors are typed ([`XportError`]).
//!
//! [`Stream`] is the one API over this stream and the same transport over
//! Strata's own stack ([`crate::xport_stack::StackStream`]): tools written
//! against it run over either.
//!
//! Everything runs on the caller's thread: no signals, no helper threads,
//! no restriction on what the application may call (§3.7 had to forbid
//! `sleep` and `fork`).
//!
//! ```no_run
//! use bytes::Bytes;
//! use strata::xport::{XportListener, XportOptions, XportStream};
//!
//! # fn main() -> Result<(), strata::xport::XportError> {
//! let mut listener = XportListener::bind("127.0.0.1:7100", &XportOptions::default())?;
//! let server = std::thread::spawn(move || -> Result<Vec<u8>, strata::xport::XportError> {
//!     let mut stream = listener.accept()?;
//!     let mut all = Vec::new();
//!     loop {
//!         let (buf, len) = stream.recv(vec![0u8; 64 * 1024])?;
//!         if len == 0 {
//!             break;
//!         }
//!         all.extend_from_slice(&buf[..len]);
//!     }
//!     stream.close()?;
//!     Ok(all)
//! });
//! let mut stream = XportStream::connect("127.0.0.1:7100", &XportOptions::default())?;
//! let bufs = vec![Bytes::from(vec![1u8; 1 << 20]), Bytes::from(vec![2u8; 1 << 20])];
//! let _given_back = stream.send(bufs)?; // at least one is acknowledged
//! stream.close()?; // the rest are acknowledged, the peer's end closed
//! assert_eq!(server.join().unwrap()?.len(), 2 << 20);
//! # Ok(())
//! # }
//! ```

mod api;
mod stream;

pub use api::{Placement, Stream};
pub use strata_link::drivers::xudp::{BufferReport, XudpOptions, XudpStats};
pub use strata_xport::{
    BufId, Config as XportConfig, ConnectionError, DropReason, Drops, PathInfo, RecoveryPolicy,
    Stats as XportStats,
};
pub use stream::{XportListener, XportStream};

/// Settings of an end: the transport's and the UDP driver's.
#[derive(Clone, Debug, Default)]
pub struct XportOptions {
    /// The protocol's settings (MSS, recovery, rate control, time-outs …).
    pub config: XportConfig,
    /// Sockets: data sockets, socket buffers, GSO/GRO, busy-poll.
    pub udp: XudpOptions,
    /// At most this many set-ups wait for `accept` (listener only; 0: 64).
    pub backlog: usize,
}

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum XportError {
    /// A socket call failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The address did not resolve.
    #[error("address {0} did not resolve")]
    Resolve(String),
    /// The connection ended early.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The connection is closed; nothing more can be sent or received.
    #[error("connection closed")]
    Closed,
    /// A wait with a time-out ran out.
    #[error("timed out")]
    TimedOut,
    /// Over Strata's stack: the host's engine has stopped.
    #[error("the host has stopped")]
    Stopped,
    /// Over Strata's stack: the host has no `xport` node, or a UPI call failed.
    #[error(transparent)]
    Upi(#[from] strata_core::UpiError),
}
