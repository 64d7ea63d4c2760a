//! # strata-xport
//!
//! Seed 001's transport: a high-speed reliable transport over UDP, written
//! sans-I/O so that the same connection code runs over the kernel's UDP
//! sockets, as a Strata protocol over `udp/ip/eth`, and in the deterministic
//! simulator.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod wire;
