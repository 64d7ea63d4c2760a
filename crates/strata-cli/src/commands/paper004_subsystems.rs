//! `strata bench paper004-subsystems`: seed 004's Figures 6 and 7b for its
//! own case — BSD's DDP and ATP imported into STREAMS beside the
//! STREAMS-native ones (and BSD's own subsystem for reference), processing
//! time per protocol and buffer allocation, in memory, in one run — ending
//! with `ratio imported/native PROTOCOL DIRECTION = X` lines.

use anyhow::Result;
use strata_bench::paper004_subsystems::{self, Setup};

/// The subsystem comparison of seed 004's experiments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rounds; each runs a batch of every configuration.
    #[arg(long, default_value_t = 2_000)]
    rounds: usize,
    /// Operations per batch (1–64).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Bytes of user data per datagram.
    #[arg(long, default_value_t = 32)]
    payload: usize,
    /// Allocations per allocation batch.
    #[arg(long, default_value_t = 10_000)]
    allocs: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `strata bench paper004-subsystems`.
pub fn run(a: Args) -> Result<()> {
    let setup = Setup {
        rounds: a.rounds,
        batch: a.batch,
        payload: a.payload,
        allocs: a.allocs,
    };
    let report = paper004_subsystems::run(&setup)?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{report}");
    }
    Ok(())
}
