//! # strata-xport
//!
//! Seed 001's transport: a high-speed reliable transport over UDP, written
//! sans-I/O so that the same connection code runs over the kernel's UDP
//! sockets, as a Strata protocol over `udp/ip/eth`, and in the deterministic
//! simulator.
//!
//! Start with [`wire`] (the packets), then [`Connection`] (how a driver
//! feeds it datagrams and time and takes datagrams and deadlines out) and
//! [`Listener`] (the server's set-up, cookie-checked). The halves of a
//! connection live in `send.rs` (application buffers, both recovery
//! algorithms), `recv.rs` (placement at the final offset, recovery choice),
//! `window.rs` (the receiver-driven congestion window) and `rate.rs` (SRTT
//! and pacing). [`sim`] runs a client and a listener in virtual time over a
//! simulated path: the deterministic simulator every test of the transport
//! uses.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod conn;
mod cookie;
mod endpoint;
mod held;
mod listener;
mod queue;
mod rate;
mod recv;
mod send;
pub mod sim;
mod slowstart;
mod stats;
mod window;
pub mod wire;

pub use config::{Config, RecoveryPolicy};
pub use conn::{Channel, Connection, ConnectionError, Event, PathInfo, State, Transmit};
pub use endpoint::{Endpoint, RxTargets};
pub use listener::{Listener, ListenerStats, PathPayload};
pub use rate::rate;
pub use send::BufId;
pub use stats::{DropReason, Drops, Stats};
