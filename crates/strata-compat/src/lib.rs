//! # strata-compat
//!
//! Seed 004 (Krupczak, Calvert and Ammar, "Protocol Portability through Module
//! Encapsulation"): protocol code written for one subsystem runs *unmodified*
//! inside another, wrapped in an encapsulation module that emulates the
//! protocol's native subsystem to it and a native protocol to its host.
//! Strata is the host.
//!
//! Where to start reading:
//! - [`smoltcp`] — a real foreign stack imported unmodified: smoltcp's TCP,
//!   the crate as published, runs as the Strata protocol `smoltcp-tcp` over
//!   Strata's IPv4, usable wherever Strata's own `tcp` is.
//! - [`appletalk`] — the paper's protocols, DDP and ATP: [`appletalk::wire`]
//!   is their byte-exact headers, shared by every subsystem's version;
//!   [`appletalk::ddp`] and [`appletalk::atp`] are the native Strata versions
//!   (`strata graph --stack atp/ddp/eth`), registered by
//!   [`appletalk::register`].
//! - [`bsd_in_strata`] and [`streams_in_strata`] — BSD's and STREAMS' DDP
//!   (the same files their native subsystems compile) as Strata nodes,
//!   `ddp@bsd` and `ddp@streams` (`strata graph --stack atp/ddp@bsd/eth`).
//! - [`bsd`] — the BSD subsystem (protocol switch, mbufs, socket buffers,
//!   vertical processing) that BSD-native protocols are written against.
//! - [`streams`] — the STREAMS subsystem (queues, put and service
//!   procedures, flow control, TPI) that STREAMS-native modules are written
//!   against.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod appletalk;
pub mod atp_service;
pub mod bsd;
pub mod bsd_in_strata;
pub mod encap;
pub mod errno;
pub mod kmem;
pub mod smoltcp;
pub mod streams;
pub mod streams_in_strata;
#[cfg(test)]
mod testlink;
