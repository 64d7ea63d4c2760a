//! `strata bench paper004-smoltcp`: smoltcp's TCP imported into Strata
//! beside Strata's own TCP and smoltcp on its own — bulk throughput and the
//! round trip of one byte, in memory, in one run — ending with the ratio
//! lines (`ratio smoltcp-in-strata/smoltcp = X`). `strata bench paper004`
//! runs the same measurement as its smoltcp part.

use anyhow::Result;
use strata::Arch;
use strata_bench::paper004_smoltcp::{self, Setup};

/// The smoltcp comparison of seed 004's experiments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Send and receive buffer of every socket, bytes.
    #[arg(long, default_value_t = 256 * 1024)]
    buffer: usize,
    /// Megabytes (10⁶ bytes) per bulk batch.
    #[arg(long, default_value_t = 100)]
    mb: u64,
    /// Bulk rounds; each runs a batch of each system.
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Round-trip rounds; each runs a batch of each system.
    #[arg(long, default_value_t = 20)]
    rtt_rounds: usize,
    /// Round trips per batch.
    #[arg(long, default_value_t = 1_000)]
    rtt_batch: usize,
    /// Strata's dispatch architecture.
    #[arg(long, default_value = "llm")]
    arch: Arch,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `strata bench paper004-smoltcp`.
pub fn run(a: Args) -> Result<()> {
    let setup = Setup {
        arch: a.arch,
        buffer: a.buffer,
        batch: a.mb * 1_000_000,
        rounds: a.rounds,
        rtt_rounds: a.rtt_rounds,
        rtt_batch: a.rtt_batch,
        ..Setup::default()
    };
    let report = paper004_smoltcp::run(&setup)?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{report}");
    }
    Ok(())
}
