//! Goodput on a plain veth pair between two namespaces — no emulator, MTU
//! 1500, the kernel's default offloads (TSO/GRO for TCP; UDP GSO/GRO where
//! a sender asks) — the transport, kernel TCP (the namespace's default
//! congestion control) and UDT4 in one run, taking turns, with CPU per
//! byte: this process's user and system time for the transport and TCP
//! (both ends run here, with the kernel work their system calls start),
//! the UDT harness processes' own for UDT4.
//!
//! The transport runs with `strata xsend`'s defaults: four application
//! buffers of 1 MiB, one data socket, 8 MB of socket buffer, rate control
//! on, adaptive recovery.

use anyhow::Result;
use strata::xport::XportOptions;
use strata_bench::peers::kernel_tcp;
use strata_bench::peers::transfer::{Transfer, deadline};
use strata_bench::peers::udt::UdtPeer;
use strata_bench::peers::xport::{XportPeer, transfer};

use super::Common;
use super::link::{Net, load};

/// `strata bench paper001 veth`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Megabytes (10⁶ bytes) per transfer (default 400; 150 with --quick).
    #[arg(long)]
    mb: Option<u64>,
    /// Rounds, each a transfer of every peer (default 3; 1 with --quick).
    #[arg(long)]
    rounds: Option<usize>,
}

impl Args {
    /// The defaults, with `common`.
    pub fn with(common: Common) -> Args {
        Args {
            common,
            mb: None,
            rounds: None,
        }
    }
}

/// Runs `strata bench paper001 veth`.
pub fn run(a: &Args) -> Result<()> {
    let quick = a.common.quick;
    let bytes = a.mb.unwrap_or(if quick { 150 } else { 400 }) * 1_000_000;
    let rounds = a.rounds.unwrap_or(if quick { 1 } else { 3 });
    let udt = UdtPeer::build()?;
    let net = Net::veth()?;
    let cc = net.t.default_cc()?;
    let load0 = load();
    let (from, into) = (net.sender(), net.receiver());
    let mut options = XportOptions::default();
    options.udp.socket_buffer = 8 << 20;
    let xport = XportPeer {
        options,
        buffers: 4,
    };
    let limit = std::time::Duration::from_secs(120);
    let names = [
        "strata xport".to_string(),
        format!("kernel TCP ({cc})"),
        "UDT4".to_string(),
    ];
    let mut runs: [Vec<Transfer>; 3] = Default::default();
    for round in 0..rounds {
        for k in 0..3 {
            let i = (round + k) % 3;
            let to = net.to();
            let t = match i {
                0 => transfer(&xport, Some(&from), Some(&into), to, bytes, deadline(limit))?,
                1 => kernel_tcp::transfer(Some(&from), Some(&into), to, bytes, deadline(limit))?,
                _ => udt.transfer(Some(&from), Some(&into), to, bytes, limit)?,
            };
            runs[i].push(t);
        }
    }
    let sum = |v: &[Transfer]| {
        let b: u64 = v.iter().map(|t| t.bytes).sum();
        let s: f64 = v.iter().map(|t| t.secs).sum();
        let c: f64 = v.iter().map(|t| t.cpu_secs).sum();
        (
            b as f64 * 8.0 / s.max(1e-9) / 1e6,
            c * 1e9 / b.max(1) as f64,
        )
    };
    if a.common.json {
        println!(
            "{}",
            serde_json::json!({"veth": {"names": names, "runs": runs}})
        );
        return Ok(());
    }
    println!(
        "Plain veth between namespaces (MTU 1500, default offloads, no emulator), {rounds} × {} MB per peer, taking turns:",
        bytes / 1_000_000
    );
    let rates: Vec<(f64, f64)> = runs.iter().map(|v| sum(v)).collect();
    for (name, (mbit, cpu)) in names.iter().zip(&rates) {
        println!("  {name:<20} {mbit:>9.1} Mbit/s  {cpu:>6.2} CPU ns/byte");
    }
    let (x, tcp, u) = (rates[0].0, rates[1].0, rates[2].0);
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    println!(
        "  strata/kernel TCP = {:.2} (goal ≥ 0.90: {}), strata/UDT4 = {:.2} (goal ≥ 2: {})",
        x / tcp,
        verdict(x / tcp >= 0.9),
        x / u,
        verdict(x / u >= 2.0)
    );
    println!("  load average before {load0}, after {}", load());
    Ok(())
}
