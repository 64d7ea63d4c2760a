//! # strata-link
//!
//! The bottom of every Strata host: the drivers that carry an engine's frames, and
//! the tools to test protocols on links worse than any lab's.
//!
//! Sans-I/O and driven by virtual time:
//!
//! - [`emulator`] — one direction of a link with delay, jitter, random and burst
//!   loss, bit errors, duplication, reordering and a rate limit with a bounded
//!   queue: seed 001's "delay/error generator", deterministic for a seed.
//! - [`sim`] — [`SimNet`], N engines joined by emulated wires and learning switches,
//!   run in virtual time; the same seed replays the same run, so a failing seed is a
//!   regression test.
//! - [`mem`] — [`MemPair`], two engines joined back to back with nothing in
//!   between, for measuring what the protocols themselves cost.
//! - [`pcap`] — [`PcapWriter`], captures that tshark and Wireshark read.
//! - [`offload`] — TCP segmentation and receive offload in software (what a
//!   NIC's TSO and LRO do), for the simulator, the in-memory pair and every
//!   real link's receive path, and the cut of the kernel's UDP super-datagrams.
//!
//! On real links, in real time:
//!
//! - [`drivers`] — TAP devices, AF_PACKET sockets and kernel UDP, batched and
//!   non-blocking (the only modules with `unsafe`, for their system calls),
//!   speaking the kernel's offloads through virtio-net headers;
//! - [`runtime`] — [`Runtime`], the epoll (or busy-poll) event loop that runs one
//!   engine on its links, reachable from other threads through [`EngineHandle`];
//! - [`wanem`] — the emulator as a bridge between two interfaces, so kernel
//!   peers cross the same emulated links as Strata.
//! - [`perf`] — the processor's instruction counter (perf_event_open), for
//!   benchmarks that print instructions beside time.
//!
//! Start with [`SimNet`]: its tests (`tests/sim.rs`) show two and three hosts with a
//! toy stack exchanging frames over lossy, delayed links; then `runtime/tests.rs`
//! for two engines on a real UDP link. [`register_links`] tells a graph registry
//! about the link kinds this crate drives.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod drivers;
pub mod emulator;
pub mod error;
pub mod mem;
pub mod offload;
pub mod pcap;
pub mod perf;
pub mod runtime;
pub mod sim;
pub mod wanem;

pub use emulator::{BurstLoss, Emulator, EmulatorStats, Fate, LinkParams};
pub use error::LinkError;
pub use mem::MemPair;
pub use pcap::{CaptureError, PcapWriter};
pub use runtime::{
    EngineHandle, Job, JobQueue, PollMode, Runtime, RuntimeConfig, RuntimeError, RuntimeThread,
    Stopped,
};
pub use sim::{Direction, HostId, SimNet, SwitchId, SwitchStats, WireId};

use strata_core::graph::{LinkSpec, Registry};

/// The link kind of a [`SimNet`] wire; its options are the emulator's and apply to
/// both directions.
pub const SIM: &str = "sim";

/// The link kind of a [`MemPair`]: no emulation, no options.
pub const MEM: &str = "mem";

/// Registers the link kinds of this crate ("sim", "mem", and the real links
/// "tap", "packet", "udp") so graph configs may name them and have their
/// options checked.
pub fn register_links(reg: &mut Registry) {
    reg.register_link(LinkSpec {
        kind: SIM,
        doc: "a simulated wire in a SimNet, emulated in virtual time (the options apply to both directions)",
        options: emulator::OPTIONS,
        validate: Some(|o| emulator::LinkParams::from_options(o).map(drop)),
    });
    reg.register_link(LinkSpec {
        kind: MEM,
        doc: "an in-memory wire with no delay and no emulation, for CPU-cost measurements",
        options: &[],
        validate: None,
    });
    drivers::register(reg);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_link_kinds_are_registered_with_their_options() {
        let mut reg = Registry::new();
        register_links(&mut reg);
        let sim: Vec<&str> = reg
            .link(SIM)
            .unwrap()
            .options
            .iter()
            .map(|o| o.name)
            .collect();
        assert!(sim.contains(&"delay") && sim.contains(&"burst") && sim.contains(&"queue"));
        assert!(reg.link(MEM).unwrap().options.is_empty());
    }
}
