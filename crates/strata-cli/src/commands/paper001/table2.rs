//! Table 2 (§4.2.2): rate control on and off from a fast sender to a slow
//! receiver — goodput and the receiver's retransmission requests.
//!
//! The paper sent from a SPARCstation 20 to a slower SPARCserver over
//! 10 Mbit/s Ethernet; the slow receiver's buffer overran. Here the
//! receiver's side of the path is a 10 Mbit/s `strata wanem` link with a
//! small queue (16 KB, about ten packets — an interface's buffer) in front
//! of it: a sender bursting its window overruns it, one pacing at
//! cwnd / SRTT (§3.1) should not. Table 1's settings otherwise, four
//! application buffers, as in the paper; kernel TCP (its defaults) beside.

use anyhow::Result;
use strata_bench::peers::kernel_tcp;
use strata_bench::peers::transfer::{Transfer, deadline};
use strata_bench::peers::xport::{XportPeer, transfer};

use super::Common;
use super::fig6::table1;
use super::link::{Link, Net, Sizing, load};
use super::paper;

/// `strata bench paper001 table2`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// The slow receiver's rate, Mbit/s.
    #[arg(long, default_value_t = 10.0)]
    mbit: f64,
    /// The queue in front of it.
    #[arg(long, default_value = "16KB")]
    queue: String,
    /// Transfers of each (default 3; 1 with --quick), taking turns.
    #[arg(long)]
    runs: Option<usize>,
}

impl Args {
    /// The defaults, with `common`.
    pub fn with(common: Common) -> Args {
        Args {
            common,
            mbit: 10.0,
            queue: "16KB".into(),
            runs: None,
        }
    }
}

/// Runs `strata bench paper001 table2`.
pub fn run(a: &Args) -> Result<()> {
    let runs = a.runs.unwrap_or(if a.common.quick { 1 } else { 3 });
    let sizing = Sizing {
        secs: a.common.secs().max(2.0),
    };
    let mut net = Net::wan()?;
    let cc = net.t.default_cc()?;
    let load0 = load();
    net.emulate(&Link {
        mbit: a.mbit,
        queue: Some(a.queue.clone()),
        ..Link::default()
    })?;
    let bytes = sizing.bytes(a.mbit);
    let limit = sizing.limit(a.mbit * 0.2);
    let mut rows: [(String, Vec<Transfer>); 3] = [
        ("rate control on".into(), Vec::new()),
        ("rate control off".into(), Vec::new()),
        (format!("kernel TCP ({cc})"), Vec::new()),
    ];
    let (from, into) = (net.sender(), net.receiver());
    for _ in 0..runs {
        for (i, row) in rows.iter_mut().enumerate() {
            let to = net.to();
            let t = if i < 2 {
                let mut options = table1(1 << 20);
                options.config.rate_control = i == 0;
                let p = XportPeer {
                    options,
                    buffers: 4,
                };
                transfer(&p, Some(&from), Some(&into), to, bytes, deadline(limit))?
            } else {
                kernel_tcp::transfer(Some(&from), Some(&into), to, bytes, deadline(limit))?
            };
            row.1.push(t);
        }
    }
    let sum = |v: &[Transfer]| {
        let b: u64 = v.iter().map(|t| t.bytes).sum();
        let s: f64 = v.iter().map(|t| t.secs).sum();
        let naks: u64 = v.iter().map(|t| t.naks).sum();
        let retx: u64 = v.iter().map(|t| t.retransmits).sum();
        (
            b as f64 * 8.0 / s.max(1e-9) / 1e6,
            naks / v.len().max(1) as u64,
            retx / v.len().max(1) as u64,
        )
    };
    if a.common.json {
        let j: Vec<_> = rows
            .iter()
            .map(|(n, v)| serde_json::json!({"name": n, "transfers": v}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"table2": j, "mbit": a.mbit, "queue": a.queue})
        );
        return Ok(());
    }
    println!(
        "Table 2: a fast sender to a slow receiver ({} Mbit/s, {} queue, no delay), {runs} × {:.1} MB each, 4 application buffers of 1 MB:",
        a.mbit,
        a.queue,
        bytes as f64 / 1e6
    );
    println!(
        "  {:<22} {:>10} {:>14} {:>10}   paper: Mbit/s  requests  (10 Mbit/s Ethernet)",
        "", "Mbit/s", "retx requests", "resent"
    );
    for (k, (name, v)) in rows.iter().enumerate() {
        let (mbit, naks, retx) = sum(v);
        let (pn, pm, pr) = paper::TABLE2[k];
        let (naks, retx) = if k < 2 {
            (naks.to_string(), retx.to_string())
        } else {
            ("-".into(), "-".into())
        };
        let pr = pr.map_or("-".into(), |r| r.to_string());
        println!("  {name:<22} {mbit:>10.2} {naks:>14} {retx:>10}   {pn:<17} {pm:>5.2} {pr:>8}");
    }
    let (on, off) = (sum(&rows[0].1), sum(&rows[1].1));
    println!(
        "  rate control: goodput {:+.1}% (paper +7.3%), retransmission requests {} → {} (paper 164 → 60); goal: fewer requests — {}",
        (on.0 / off.0 - 1.0) * 100.0,
        off.1,
        on.1,
        if on.1 < off.1 { "met" } else { "missed" }
    );
    println!(
        "  (requests: the receiver's go-back-N and selective requests per transfer; resent: data packets sent again)"
    );
    println!("  load average before {load0}, after {}", load());
    Ok(())
}
