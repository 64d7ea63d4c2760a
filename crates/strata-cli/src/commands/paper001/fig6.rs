//! Figure 6 (§4.2.1): goodput vs RTT for 1, 2, 4 and 8 application
//! buffers, beside kernel TCP with a 64 KB window (the paper's ttcp had no
//! window scaling), kernel TCP with the namespace's defaults, and UDT4 —
//! all through the same `strata wanem` link.
//!
//! The paper's buffer was 512 KB at 32 Mbit/s, 128 ms of data (§4.2.1):
//! two buffers keep its pipe full up to a 128 ms RTT. Ours keep that ratio,
//! 128 ms at the link's rate (1.6 MB at 100 Mbit/s, 16 MB at 1 Gbit/s), so
//! the figure's shape is the paper's. Table 1's other settings: one UDP
//! socket, checksum off, selective retransmission, rate control off.

use anyhow::Result;
use strata::xport::{RecoveryPolicy, XportOptions};
use strata_bench::peers::kernel_tcp;
use strata_bench::peers::transfer::{Transfer, deadline};
use strata_bench::peers::udt::UdtPeer;
use strata_bench::peers::xport::{XportPeer, transfer};
use strata_bench::plot::{self, Chart, Series};

use super::link::{Link, Net, Sizing, cell, load};
use super::paper;
use super::{Common, Rtts};

/// `strata bench paper001 fig6`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Link rates, Mbit/s (default 100 and 1000; 100 with --quick).
    #[arg(long, value_delimiter = ',')]
    rates: Vec<f64>,
    #[command(flatten)]
    rtts: Rtts,
    /// The application buffer counts to run (default 1,2,4,8).
    #[arg(long, value_delimiter = ',')]
    buffers: Vec<usize>,
}

impl Args {
    /// The defaults, with `common`.
    pub fn with(common: Common) -> Args {
        Args {
            common,
            rates: Vec::new(),
            rtts: Rtts::default(),
            buffers: Vec::new(),
        }
    }
}

/// The application buffer counts of the figure.
const BUFFERS: [usize; 4] = [1, 2, 4, 8];

/// The paper's buffer in time at its rate: 512 KB at 32 Mbit/s.
const BUFFER_SECS: f64 = 0.128;

/// One line of the figure.
#[derive(Clone, Copy)]
enum Peer {
    Xport(usize),
    Tcp64k,
    TcpDefault,
    Udt,
}

/// Table 1's settings with `buffer`-byte application buffers.
pub fn table1(buffer: u32) -> XportOptions {
    let mut o = XportOptions::default();
    o.config.app_buffer = buffer;
    o.config.recovery = RecoveryPolicy::Selective;
    o.config.rate_control = false;
    o.config.data_checksum = false;
    o.udp.data_sockets = 1;
    o
}

/// The rate `peer` should reach on a `mbit` link at `rtt_ms`.
fn expected(peer: Peer, mbit: f64, rtt_ms: f64, buffer: f64) -> f64 {
    let rtt = rtt_ms / 1e3;
    let window = match peer {
        // One buffer is sent, then acknowledged before the next goes.
        Peer::Xport(1) => return buffer * 8.0 / (buffer * 8.0 / (mbit * 1e6) + rtt) / 1e6,
        Peer::Xport(n) => buffer * (n - 1) as f64,
        Peer::Tcp64k => 65_535.0,
        Peer::TcpDefault | Peer::Udt => return mbit,
    };
    if rtt == 0.0 {
        mbit
    } else {
        (window * 8.0 / rtt / 1e6).min(mbit)
    }
}

/// Runs `strata bench paper001 fig6`.
pub fn run(a: &Args) -> Result<()> {
    let quick = a.common.quick;
    let rates = if a.rates.is_empty() {
        if quick {
            vec![100.0]
        } else {
            vec![100.0, 1000.0]
        }
    } else {
        a.rates.clone()
    };
    let rtts = a.rtts.get(a.common.quick);
    let sizing = Sizing {
        secs: a.common.secs(),
    };
    let udt = UdtPeer::build()?;
    let mut net = Net::wan()?;
    let cc = net.t.default_cc()?;
    let load0 = load();
    let buffers = if a.buffers.is_empty() {
        &BUFFERS[..]
    } else {
        &a.buffers[..]
    };
    let mut peers: Vec<(String, Peer)> = buffers
        .iter()
        .map(|&n| (format!("strata ×{n}"), Peer::Xport(n)))
        .collect();
    peers.push(("TCP 64 KB".into(), Peer::Tcp64k));
    peers.push((format!("TCP {cc}"), Peer::TcpDefault));
    peers.push(("UDT4".into(), Peer::Udt));
    let ceiling = if rates.iter().any(|&r| r > 100.0) {
        Some(wanem_ceiling(&mut net, sizing)?)
    } else {
        None
    };
    let mut json = Vec::new();
    for &mbit in &rates {
        let buffer = (mbit * 1e6 / 8.0 * BUFFER_SECS) as u32;
        println!(
            "Figure 6 at {mbit} Mbit/s: goodput (Mbit/s) vs RTT through strata wanem; strata: {} KB application buffers, selective, rate control off, 1 UDP socket; {:.1} s of data per point",
            buffer / 1000,
            sizing.secs
        );
        let mut header = format!("{:>6}", "RTT ms");
        for (name, _) in &peers {
            header += &format!(" {name:>10}");
        }
        println!("{header}   paper(×4/8 ×1 TCP, % of link)");
        let mut results: Vec<Vec<Option<Transfer>>> = vec![Vec::new(); peers.len()];
        for &rtt in &rtts {
            net.emulate(&Link {
                mbit,
                rtt_ms: rtt,
                ..Link::default()
            })?;
            let mut row = format!("{rtt:>6}");
            for (i, (_, peer)) in peers.iter().enumerate() {
                let want = expected(*peer, mbit, rtt, f64::from(buffer));
                let r = point(&net, &udt, *peer, buffer, want, sizing);
                if let Err(e) = &r {
                    eprintln!("fig6: {} at {rtt} ms: {e:#}", peers[i].0);
                }
                row += &format!(" {:>10}", cell(&r));
                results[i].push(r.ok());
            }
            let p = paper::fig6(rtt);
            println!(
                "{row}   {:.0}% {:.0}% {:.0}%",
                p.lib4 * 100.0,
                p.lib1 * 100.0,
                p.tcp * 100.0
            );
        }
        println!(
            "  (whole transfers, slow start included; * the sender was stopped at its time limit; fail: see stderr)"
        );
        println!("  the same transfers' second halves (steady state, past slow start), Mbit/s:");
        for (k, rtt) in rtts.iter().enumerate() {
            let mut row = format!("{rtt:>6}");
            for r in &results {
                row += &match &r[k] {
                    Some(t) => format!(" {:>10.1}", t.steady_mbit_s()),
                    None => format!(" {:>10}", "fail"),
                };
            }
            println!("{row}");
        }
        println!(
            "  goal: strata ×4 and ×8 ≥ 95% of {mbit} Mbit/s = {:.1} at every RTT, ahead of UDT4 and TCP {cc}",
            0.95 * mbit
        );
        if let Some(c) = ceiling.filter(|&c| c < mbit) {
            println!(
                "  strata wanem forwards at most {c:.0} Mbit/s on this machine (kernel TCP through it, no rate limit, no delay): {mbit} Mbit/s is out of its reach"
            );
        }
        goals(&peers, &results, &rtts, mbit);
        if a.common.json {
            json.push(serde_json::json!({
                "mbit": mbit, "rtts": rtts, "wanem_ceiling": ceiling, "buffer": buffer, "cc": cc,
                "peers": peers.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
                "results": results,
            }));
        } else {
            draw(&a.common, mbit, &rtts, &peers, &results)?;
        }
    }
    println!(
        "  kernel TCP: {cc} is the namespaces' default (/proc/sys/net/ipv4/tcp_congestion_control); \"TCP 64 KB\": the receiver's route clamps its window to 65535 bytes"
    );
    println!("  load average before {load0}, after {}", load());
    if a.common.json {
        println!("{}", serde_json::json!({ "fig6": json }));
    }
    Ok(())
}

/// What `strata wanem` itself forwards here: kernel TCP through it with
/// no rate limit and no delay, Mbit/s.
fn wanem_ceiling(net: &mut Net, sizing: Sizing) -> Result<f64> {
    net.emulate(&Link::default())?;
    let (from, into, to) = (net.sender(), net.receiver(), net.to());
    let bytes = sizing.bytes(2000.0);
    let t = kernel_tcp::transfer(
        Some(&from),
        Some(&into),
        to,
        bytes,
        deadline(sizing.limit(500.0)),
    )?;
    Ok(t.mbit_s())
}

fn point(
    net: &Net,
    udt: &UdtPeer,
    peer: Peer,
    buffer: u32,
    want: f64,
    sizing: Sizing,
) -> Result<Transfer> {
    let (from, into, to) = (net.sender(), net.receiver(), net.to());
    let bytes = sizing.bytes(want);
    let limit = sizing.limit(want);
    match peer {
        Peer::Xport(n) => {
            let p = XportPeer {
                options: table1(buffer),
                buffers: n,
            };
            transfer(&p, Some(&from), Some(&into), to, bytes, deadline(limit))
        }
        Peer::Tcp64k | Peer::TcpDefault => {
            net.tcp_window(matches!(peer, Peer::Tcp64k).then_some(65_535))?;
            let r = kernel_tcp::transfer(Some(&from), Some(&into), to, bytes, deadline(limit));
            net.tcp_window(None)?;
            Ok(r?)
        }
        Peer::Udt => udt.transfer(Some(&from), Some(&into), to, bytes, limit),
    }
}

/// Says where the goals are met and by how much they are missed.
fn goals(peers: &[(String, Peer)], results: &[Vec<Option<Transfer>>], rtts: &[f64], mbit: f64) {
    let rate = |i: usize, k: usize| results[i][k].as_ref().map_or(0.0, Transfer::steady_mbit_s);
    let (tcp, udt) = (peers.len() - 2, peers.len() - 1);
    for (i, (name, peer)) in peers.iter().enumerate() {
        if !matches!(peer, Peer::Xport(n) if *n >= 4) {
            continue;
        }
        let mut missed = Vec::new();
        for (k, rtt) in rtts.iter().enumerate() {
            let r = rate(i, k);
            if r < 0.95 * mbit {
                missed.push(format!("{rtt} ms: {:.0}% of the link", r / mbit * 100.0));
            }
            if r <= rate(udt, k) {
                missed.push(format!(
                    "{rtt} ms: behind UDT4 ({r:.1} vs {:.1})",
                    rate(udt, k)
                ));
            }
            if r <= rate(tcp, k) {
                missed.push(format!(
                    "{rtt} ms: behind {} ({r:.1} vs {:.1})",
                    peers[tcp].0,
                    rate(tcp, k)
                ));
            }
        }
        if missed.is_empty() {
            println!("  {name}: goal met at every RTT (second halves)");
        } else {
            println!(
                "  {name}: goal missed (second halves) — {}",
                missed.join("; ")
            );
        }
    }
}

fn draw(
    c: &Common,
    mbit: f64,
    rtts: &[f64],
    peers: &[(String, Peer)],
    results: &[Vec<Option<Transfer>>],
) -> Result<()> {
    let mut series: Vec<Series> = peers
        .iter()
        .zip(results)
        .map(|((name, _), r)| Series {
            name: name.clone(),
            points: rtts
                .iter()
                .zip(r)
                .filter_map(|(&x, t)| Some((x, t.as_ref()?.steady_mbit_s() / mbit * 100.0)))
                .collect(),
        })
        .collect();
    let paper_rtts = [0.0, 50.0, 100.0, 150.0, 200.0];
    for (name, f) in [
        (
            "paper ×4/×8",
            (|p: paper::Fig6| p.lib4) as fn(paper::Fig6) -> f64,
        ),
        ("paper ×1", |p| p.lib1),
        ("paper TCP (ttcp)", |p| p.tcp),
    ] {
        series.push(Series {
            name: name.into(),
            points: paper_rtts
                .iter()
                .map(|&r| (r, f(paper::fig6(r)) * 100.0))
                .collect(),
        });
    }
    let path = c
        .plot_dir
        .join(format!("paper001_fig6_{}mbit.png", mbit as u64));
    let title = format!("Seed 001 Figure 6: goodput vs RTT, {mbit} Mbit/s link (paper: 36.9)");
    plot::draw(
        &path,
        &Chart {
            title: &title,
            x_label: "round-trip time added (ms)",
            y_label: "goodput (second half), % of the link's rate",
            log_x: false,
            series,
        },
    )?;
    println!("  plot: {}", path.display());
    Ok(())
}
