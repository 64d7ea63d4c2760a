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
    /// UDP ping-pong round trips (checksums on), as `rtt-peers` runs them.
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
        } => probe::udp(system.into(), &stack, arch, size, count),
        Workload::Tcp {
            system,
            arch,
            bytes,
        } => probe::tcp(system.into(), arch, bytes),
    }
}
