//! `strata bench paper004-subsystems`: seed 004's Figures 6 and 7b for its
//! own case — BSD's DDP and ATP imported into STREAMS beside the
//! STREAMS-native ones (and BSD's own subsystem for reference), processing
//! time per protocol and buffer allocation, in memory, in one run — ending
//! with `ratio imported/native PROTOCOL DIRECTION = X` lines.
//!
//! `--instructions` runs the same benchmark once more under callgrind and
//! prints the figures in instructions per operation too, which the
//! machine's load does not move (this machine has no hardware counters).

use std::process::Command;

use anyhow::{Context, Result, ensure};
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
    /// Also count instructions: run `--instructions-rounds` rounds under
    /// `valgrind --tool=callgrind` and print the figures per operation.
    #[arg(long)]
    instructions: bool,
    /// Rounds of the callgrind run (allocations: a tenth of `--allocs`).
    #[arg(long, default_value_t = 100)]
    instructions_rounds: usize,
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
    if a.instructions {
        let counted = Setup {
            rounds: a.instructions_rounds,
            allocs: (a.allocs / 10).max(1),
            ..setup
        };
        println!("{}", instructions(&counted)?.instructions_text());
    }
    Ok(())
}

/// The report in instructions: this program run again under callgrind
/// with `setup`, its output file read back.
pub fn instructions(setup: &Setup) -> Result<paper004_subsystems::Report> {
    let out =
        std::env::temp_dir().join(format!("strata-paper004-{}.callgrind", std::process::id()));
    let exe = std::env::current_exe()?;
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["bench", "paper004-subsystems", "--json"])
        .args(["--rounds", &setup.rounds.to_string()])
        .args(["--batch", &setup.batch.to_string()])
        .args(["--payload", &setup.payload.to_string()])
        .args(["--allocs", &setup.allocs.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .context("running valgrind (apt-get install valgrind)")?;
    ensure!(
        status.success(),
        "valgrind --tool=callgrind failed: {status}"
    );
    let text = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    paper004_subsystems::from_callgrind(&text?, setup)
}
