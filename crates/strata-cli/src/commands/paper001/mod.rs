//! `strata bench paper001`: seed 001's experiments (§4–5) beside today's
//! peers, each through the same link: Figure 6 (goodput vs RTT for 1–8
//! application buffers, kernel TCP with a 64 KB window and with its
//! defaults, UDT4), Table 2 (rate control on and off), Figure 7 (bit
//! errors, go-back-N vs selective), Figure 9 (file transfer: `strata ftp`
//! vs curl/lftp vs SRT), a plain veth (CPU per byte) and the idle cost.
//!
//! Every point moves a fixed amount of data sized to the rate it should
//! reach (`--secs` of it), not a fixed time; `--quick` runs fewer points
//! and shorter transfers, so `all --quick` takes minutes.

mod fig6;
mod fig7;
mod fig9;
mod idle;
mod link;
mod paper;
mod table2;
mod veth;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::tcp_send::duration;

/// Seed 001's experiments.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    experiment: Experiment,
}

/// What every experiment takes.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Fewer points and shorter transfers (minutes for everything).
    #[arg(long)]
    quick: bool,
    /// Seconds of data per point at the rate it should reach (default 4,
    /// 1 with --quick).
    #[arg(long)]
    secs: Option<f64>,
    /// Where the plots go.
    #[arg(long, default_value = "docs/img")]
    plot_dir: PathBuf,
    /// Print one JSON object per experiment instead of tables and plots.
    #[arg(long)]
    json: bool,
}

impl Common {
    fn secs(&self) -> f64 {
        self.secs.unwrap_or(if self.quick { 1.0 } else { 4.0 })
    }
}

/// The round-trip times of a figure.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Rtts {
    /// Round-trip times, ms (default 0,50,100,150,200; 0,100,200 with --quick).
    #[arg(long, value_delimiter = ',')]
    rtts: Vec<f64>,
}

impl Rtts {
    /// The RTTs asked for, or the figures' 0–200 ms (fewer with `quick`).
    fn get(&self, quick: bool) -> Vec<f64> {
        if !self.rtts.is_empty() {
            self.rtts.clone()
        } else if quick {
            vec![0.0, 100.0, 200.0]
        } else {
            vec![0.0, 50.0, 100.0, 150.0, 200.0]
        }
    }
}

#[derive(clap::Subcommand, Debug)]
enum Experiment {
    /// Figure 6: goodput vs RTT for 1, 2, 4, 8 application buffers beside
    /// kernel TCP (64 KB window, and its defaults) and UDT4, through
    /// `strata wanem` at 100 Mbit/s and 1 Gbit/s.
    Fig6(fig6::Args),
    /// Table 2: rate control on and off, a fast sender to a slow receiver.
    Table2(table2::Args),
    /// Figure 7: goodput vs RTT with random bit errors, go-back-N vs
    /// selective retransmission.
    Fig7(fig7::Args),
    /// Figure 9: file transfer, `strata ftp` over the transport vs curl and
    /// lftp over kernel TCP (same `strata ftpd`) vs SRT's file mode.
    Fig9(fig9::Args),
    /// Goodput and CPU per byte on a plain veth pair: the transport, kernel
    /// TCP and UDT4.
    Veth(veth::Args),
    /// CPU seconds per minute of an open idle connection and of a
    /// rate-limited one.
    Idle {
        /// How long each connection is measured.
        #[arg(long, default_value = "60s", value_parser = duration)]
        time: Duration,
    },
    /// Everything, in that order.
    All {
        #[command(flatten)]
        common: Common,
    },
}

/// Runs `strata bench paper001`.
pub fn run(a: Args) -> Result<()> {
    match a.experiment {
        Experiment::Fig6(a) => fig6::run(&a),
        Experiment::Table2(a) => table2::run(&a),
        Experiment::Fig7(a) => fig7::run(&a),
        Experiment::Fig9(a) => fig9::run(&a),
        Experiment::Veth(a) => veth::run(&a),
        Experiment::Idle { time } => idle::run(time),
        Experiment::All { common } => {
            fig6::run(&fig6::Args::with(common.clone()))?;
            table2::run(&table2::Args::with(common.clone()))?;
            fig7::run(&fig7::Args::with(common.clone()))?;
            fig9::run(&fig9::Args::with(common.clone()))?;
            veth::run(&veth::Args::with(common.clone()))?;
            let time = if common.quick { 10 } else { 60 };
            idle::run(Duration::from_secs(time))
        }
    }
}
