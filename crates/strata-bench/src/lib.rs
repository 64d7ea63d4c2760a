//! # strata-bench
//!
//! Strata's experiments: the seed papers' tables and figures reproduced on today's
//! hardware, each run side by side with its peer in one process run, alternating,
//! and reported as a ratio. `strata bench …` in the CLI calls into this crate.

pub mod cpu;
pub mod insn;
pub mod paper000;
pub mod paper003;
pub mod paper004_graphs;
pub mod paper004_smoltcp;
pub mod paper004_subsystems;
pub mod peers;
pub mod pingpong;
pub mod plot;
pub mod probe;
pub mod rtt;
pub mod rtt_peers;
pub mod stats;
pub mod tcp_bulk;
pub mod tcp_peers;
pub mod throughput;
