//! `strata wanem`: the link emulator as a bridge between two interfaces.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Result, bail};
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use strata::core::graph::Options;
use strata::link::LinkParams;
use strata::link::drivers::packet::{PacketConfig, PacketDriver};
use strata::link::drivers::tap::{TapConfig, TapDriver};
use strata::link::drivers::{DEFAULT_BATCH, Driver};
use strata::link::wanem::Wanem;

/// Bridge two interfaces through an emulated link, both ways.
///
/// Every frame that arrives on one interface leaves on the other after the
/// emulator decided its fate: delay ± jitter, random loss, bit errors, a rate
/// limit with a finite queue. Typical use: a namespace between two hosts whose
/// two veth ends it bridges, so kernel TCP, iperf3 or Strata hosts cross the
/// same long fat pipe. On SIGUSR1 it prints what it forwarded, lost, dropped,
/// corrupted and delayed (by direction and kind of frame); on SIGINT or SIGTERM
/// it prints that and exits. "ready" is printed once both ports are open.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The two interfaces: names for AF_PACKET, or tap:NAME for TAP devices.
    #[arg(long, num_args = 2, value_names = ["IF_A", "IF_B"], required = true)]
    between: Vec<String>,
    /// One-way delay ("50ms").
    #[arg(long)]
    delay: Option<String>,
    /// Delay varies uniformly within ± this ("1ms").
    #[arg(long)]
    jitter: Option<String>,
    /// Random loss ("1%").
    #[arg(long)]
    loss: Option<String>,
    /// Gilbert–Elliott burst loss ("enter 1% leave 25%").
    #[arg(long)]
    burst: Option<String>,
    /// Bit error rate ("1e-8").
    #[arg(long)]
    ber: Option<String>,
    /// Duplication probability ("0.1%").
    #[arg(long)]
    duplicate: Option<String>,
    /// Reordering probability ("1%").
    #[arg(long)]
    reorder: Option<String>,
    /// Bit rate ("100mbit").
    #[arg(long)]
    rate: Option<String>,
    /// Bytes the rate limiter queues ("256KB").
    #[arg(long)]
    queue: Option<String>,
    /// Seed of the emulators' random streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Capture every frame read on either interface, as it arrived (before
    /// the emulator), to this pcap file.
    #[arg(long)]
    pcap: Option<PathBuf>,
}

impl Args {
    /// The emulator settings, checked as a `[link]` table's would be.
    fn params(&self) -> Result<LinkParams> {
        let mut o = Options::new("strata wanem".into());
        let given = [
            ("delay", &self.delay),
            ("jitter", &self.jitter),
            ("loss", &self.loss),
            ("burst", &self.burst),
            ("ber", &self.ber),
            ("duplicate", &self.duplicate),
            ("reorder", &self.reorder),
            ("rate", &self.rate),
            ("queue", &self.queue),
        ];
        for (key, value) in given {
            if let Some(v) = value {
                o.set(key, v.as_str());
            }
        }
        Ok(LinkParams::from_options(&o)?)
    }
}

fn port(spec: &str) -> Result<Box<dyn Driver>> {
    Ok(match spec.strip_prefix("tap:") {
        Some(name) => Box::new(TapDriver::with_config(
            &TapConfig::new(name),
            DEFAULT_BATCH,
        )?),
        None => Box::new(PacketDriver::with_config(
            &PacketConfig::new(spec),
            DEFAULT_BATCH,
        )?),
    })
}

/// Runs `strata wanem`.
pub fn run(args: Args) -> Result<()> {
    let [a, b] = args.between.as_slice() else {
        bail!("--between takes two interfaces");
    };
    if a == b {
        bail!("--between needs two different interfaces");
    }
    let params = args.params()?;
    let stop = Arc::new(AtomicBool::new(false));
    let report = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    signal_hook::flag::register(SIGUSR1, Arc::clone(&report))?;
    let mut bridge = Wanem::new(
        port(a)?,
        port(b)?,
        params.clone(),
        params.clone(),
        args.seed,
    )?;
    if let Some(path) = &args.pcap {
        bridge.capture(path)?;
    }
    println!("wanem {a} ⇄ {b}: {params}");
    println!("ready");
    bridge.run_until(&stop, &report, |r| print!("== wanem report ==\n{r}"))?;
    print!("== wanem final report ==\n{}", bridge.report());
    if let Some(e) = bridge.finish_capture() {
        bail!("capture: {e}");
    }
    Ok(())
}
