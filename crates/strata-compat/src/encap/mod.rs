//! Encapsulation modules between the foreign subsystems (seed 004 §3–4).
//!
//! - [`bsd_in_streams`]: the paper's case (§4, Figures 2–3) — an unmodified
//!   BSD protocol inside a STREAMS module that emulates the BSD kernel to it
//!   and a STREAMS module to its neighbours.
//! - [`adapter`]: the subsystem adapter (§6.3, Figure 9a) — BSD-native ATP
//!   in a native BSD subsystem over STREAMS-native DDP in native streams,
//!   joined at one boundary, nothing emulated.
//! - [`mbuf_mblk`]: mbufs encapsulated in mblks (Figure 3): the BSD
//!   protocol's buffers are STREAMS data blocks, converted without copying.

pub mod adapter;
pub mod bsd_in_streams;
pub mod mbuf_mblk;

pub use bsd_in_streams::BsdModule;

#[cfg(test)]
mod tests;
