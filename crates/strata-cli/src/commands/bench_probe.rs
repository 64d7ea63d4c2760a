//! `strata bench probe`: one system's workload, untimed, for counting
//! instructions under callgrind (`scripts/instructions` runs it).

use anyhow::Result;
use clap::{Subcommand, ValueEnum};
use strata::Arch;
use strata_bench::probe::{self, System};

/// What to run.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    workload: Workload,
}

#[derive(Subcommand, Debug)]
enum Workload {
    /// Ping-pong round trips (UDP checksums on), as `rtt-peers` runs them;
    /// any of seed 000's stacks with `--stack`.
    Udp {
        /// Strata or smoltcp.
        #[arg(long)]
        system: Which,
        /// Strata's stack.
        #[arg(long, default_value = "udp/ip/eth")]
        stack: String,
        /// Strata's dispatch architecture.
        #[arg(long, default_value = "llm")]
        arch: Arch,
        /// Payload bytes.
        #[arg(long, default_value_t = 1)]
        size: usize,
        /// Round trips after the warm-up.
        #[arg(long)]
        count: usize,
        /// UDP without checksums, as seed 000 measured (`paper000 tables`).
        #[arg(long)]
        no_checksum: bool,
    },
    /// A bulk TCP transfer without offloads, as `tcp-peers` runs it.
    Tcp {
        /// Strata or smoltcp.
        #[arg(long)]
        system: Which,
        /// Strata's dispatch architecture.
        #[arg(long, default_value = "llm")]
        arch: Arch,
        /// Bytes after the warm-up.
        #[arg(long)]
        bytes: u64,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Which {
    Strata,
    Smoltcp,
}

impl From<Which> for System {
    fn from(w: Which) -> System {
        match w {
            Which::Strata => System::Strata,
            Which::Smoltcp => System::Smoltcp,
        }
    }
}

/// Runs `strata bench probe`.
pub fn run(a: Args) -> Result<()> {
    match a.workload {
        Workload::Udp {
            system,
            stack,
            arch,
            size,
            count,
            no_checksum,
        } => probe::udp(system.into(), &stack, arch, size, count, no_checksum),
        Workload::Tcp {
            system,
            arch,
            bytes,
        } => probe::tcp(system.into(), arch, bytes),
    }
}
