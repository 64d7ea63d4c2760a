//! `strata bench paper004`: seed 004's experiments in one run — Figure 5
//! (null-transaction throughput of every native and hybrid AppleTalk graph,
//! over the in-memory link and over a veth pair between two namespaces with
//! AF_PACKET, default offloads), Figures 6 and 7 (per-protocol processing
//! time native vs imported, encapsulation components, buffer allocation:
//! `paper004-subsystems`), and smoltcp's TCP imported vs Strata's and
//! smoltcp on its own (`paper004-smoltcp`) — with the paper's figures
//! beside ours, plots in `docs/img/`, and at the end the lines a script
//! reads: `ratio imported/native PROTOCOL DIRECTION = X` and
//! `ratio smoltcp-in-strata/smoltcp = X`.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant as Wall};

use anyhow::{Context, Result, anyhow, bail};
use strata::link::{Runtime, RuntimeConfig};
use strata::{Arch, Engine, HostBuilder, HostParams, Ipv4Cidr};
use strata_bench::paper004_graphs::{self as graphs, GRAPHS, NET, Rate};
use strata_bench::plot::{self, Bars};
use strata_bench::{paper004_smoltcp, paper004_subsystems};

use super::host::default_mac;
use super::rtt_veth::Pair;

/// The Strata hosts' addresses on the pair (their namespaces' own; only
/// the MACs matter to AppleTalk: nodes 11 and 12).
const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 250, 11);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 250, 12);

/// Seed 004's experiments, all in one run.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Figure 5: rounds; each runs a batch of every graph.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Figure 5: null transactions per batch.
    #[arg(long, default_value_t = 2_000)]
    batch: u64,
    /// Figure 5: bytes of the server's fixed-length reply.
    #[arg(long, default_value_t = 64)]
    reply: usize,
    /// Figure 5 over veth: rounds (each a batch of every graph).
    #[arg(long, default_value_t = 3)]
    veth_rounds: usize,
    /// Skip the veth part of Figure 5 (it needs root for namespaces).
    #[arg(long)]
    no_veth: bool,
    /// Figure 5 over veth: both hosts spin instead of sleeping (on a
    /// loaded two-core machine spinning hosts take turns badly).
    #[arg(long)]
    busy_poll: bool,
    /// Figures 6 and 7: rounds (each a batch of every configuration).
    #[arg(long, default_value_t = 2_000)]
    subsystem_rounds: usize,
    /// smoltcp: megabytes per bulk batch.
    #[arg(long, default_value_t = 50)]
    smoltcp_mb: u64,
    /// smoltcp: bulk rounds.
    #[arg(long, default_value_t = 4)]
    smoltcp_rounds: usize,
    /// A short run of everything (a check that it works, not a measurement).
    #[arg(long)]
    quick: bool,
    /// Where the plots go.
    #[arg(long, default_value = "docs/img")]
    plots: PathBuf,
    /// Strata's dispatch architecture.
    #[arg(long, default_value = "llm")]
    arch: Arch,
    /// Figure 5 for this graph only (repeatable; default: every graph).
    #[arg(long = "graph")]
    graphs: Vec<String>,
    /// Figure 5 in memory only (no veth, no Figures 6–7, no smoltcp): for
    /// profiling one graph.
    #[arg(long)]
    figure5_only: bool,
    /// Figures 6 and 7b in instructions too: the subsystem benchmark run
    /// again under `valgrind --tool=callgrind` (100 rounds), with ratio lines
    /// ending in `instructions` (steady where the machine's load moves time).
    #[arg(long)]
    instructions: bool,
}

/// A host of `graph` on the pair's end `side`, AppleTalk node from its MAC,
/// the peer's address mapping configured.
fn veth_host(pair: &Pair, side: &str, graph: &str, arch: Arch) -> Result<Engine> {
    let (me, peer) = if side == "a" {
        (CLIENT, SERVER)
    } else {
        (SERVER, CLIENT)
    };
    let params = HostParams {
        mac: default_mac(me),
        address: Ipv4Cidr::new(me, 24).ok_or_else(|| anyhow!("bad prefix"))?,
        gateway: None,
    };
    let amt = vec![format!("{NET}.{}={}", peer.octets()[3], default_mac(peer))];
    let mut b = HostBuilder::spec(graph, params, "net0", "packet")
        .link_option("interface", pair.dev(side).as_str())
        .link_option("netns", pair.ns(side).as_str())
        .arch(arch);
    for ddp in ["ddp", "ddp@bsd", "ddp@streams"] {
        b = b.option(ddp, "amt", amt.clone());
    }
    Ok(b.build()?)
}

/// One batch of `count` null transactions of `graph` over the pair, both
/// hosts sleeping when idle (or spinning); transactions per second.
fn veth_batch(pair: &Pair, graph: &str, a: &Args, count: u64) -> Result<f64> {
    let (arch, reply) = (a.arch, a.reply);
    let mode = if a.busy_poll {
        RuntimeConfig::busy_poll()
    } else {
        RuntimeConfig::default()
    };
    let mut server = veth_host(pair, "b", graph, arch)?;
    let mut client = veth_host(pair, "a", graph, arch)?;
    let id = graphs::install(&mut client, &mut server, graph, SERVER.octets()[3], reply)?;
    let server = Runtime::new(server, mode.clone())?.spawn("p4-server")?;
    let client = Runtime::new(client, mode)?.spawn("p4-client")?;
    let mut result = Err(anyhow!("not run"));
    for n in [50, count] {
        client
            .handle()
            .call(move |e| graphs::start(e, id, n))
            .map_err(|_| anyhow!("the client stopped"))?;
        let deadline = Wall::now() + Duration::from_secs(60);
        result = loop {
            std::thread::sleep(Duration::from_millis(5));
            let done = client
                .handle()
                .call(move |e| graphs::finished(e, id))
                .map_err(|_| anyhow!("the client stopped"))?;
            if let Some(t) = done {
                break Ok(n as f64 / t.as_secs_f64());
            }
            if Wall::now() > deadline {
                break Err(anyhow!(
                    "{graph} over veth: the batch did not finish in 60 s"
                ));
            }
        };
        if result.is_err() {
            break;
        }
    }
    client.stop()?;
    server.stop()?;
    result
}

/// Figure 5 over the veth pair: every graph, batches alternating.
fn veth(a: &Args, rounds: usize, batch: u64) -> Result<Vec<Rate>> {
    let pair = Pair::up().context("making the veth pair (needs root)")?;
    let all: Vec<String> = GRAPHS.iter().map(|g| g.to_string()).collect();
    let graphs = if a.graphs.is_empty() { &all } else { &a.graphs };
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); graphs.len()];
    for round in 0..rounds {
        for i in 0..graphs.len() {
            let g = (i + round) % graphs.len();
            rates[g].push(veth_batch(&pair, &graphs[g], a, batch)?);
        }
    }
    Ok(graphs
        .iter()
        .zip(rates)
        .map(|(g, mut r)| {
            r.sort_by(f64::total_cmp);
            Rate {
                graph: g.clone(),
                tps: r[r.len() / 2],
            }
        })
        .collect())
}

/// Figure 5's table.
fn figure5(mem: &[Rate], veth: Option<&[Rate]>, a: &Args) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "seed 004, Figure 5: null transactions per second (ATP request of 1 byte, {}-byte reply, one outstanding), {}",
        a.reply, a.arch
    );
    let _ = writeln!(
        s,
        "  {:<30} {:>12} {:>12} {:>9}",
        "graph (both hosts)", "memory", "veth", "vs native"
    );
    for (i, m) in mem.iter().enumerate() {
        let v = veth.and_then(|v| v.get(i)).map(|r| r.tps);
        let _ = writeln!(
            s,
            "  {:<30} {:>12.0} {:>12} {:>9.2}",
            m.graph,
            m.tps,
            v.map_or("-".into(), |v| format!("{v:.0}")),
            m.tps / mem[0].tps
        );
    }
    let _ = writeln!(
        s,
        "  paper (SPARCstation-LX, loopback, bars without figures in its text): Str(Sol2) native best; \
         hybrid Import2 (BSD ATP+DDP in STREAMS) above native BSD(SunOS); Import1 and Import3 below it; \
         Str(SunOS) and x-kernel(SunOS) worst"
    );
    s
}

/// Draws Figures 5 and 6 into `dir`.
fn plots(
    dir: &std::path::Path,
    mem: &[Rate],
    veth: Option<&[Rate]>,
    sub: &paper004_subsystems::Report,
) -> Result<()> {
    let mut series = vec![(
        "in-memory link".to_string(),
        mem.iter().map(|r| r.tps).collect(),
    )];
    if let Some(v) = veth {
        series.push((
            "veth, AF_PACKET".to_string(),
            v.iter().map(|r| r.tps).collect(),
        ));
    }
    plot::draw_bars(
        &dir.join("paper004_fig5.png"),
        &Bars {
            title: "Seed 004 Figure 5: null transactions per second, per graph",
            value_label: "transactions per second",
            categories: mem.iter().map(|r| r.graph.clone()).collect(),
            series,
        },
    )?;
    let rows = [
        (
            "DDP send",
            sub.ddp_native.send,
            sub.ddp_imported.send,
            sub.ddp_bsd.send,
        ),
        (
            "DDP receive",
            sub.ddp_native.receive,
            sub.ddp_imported.receive,
            sub.ddp_bsd.receive,
        ),
        (
            "ATP send",
            sub.atp_native().send,
            sub.atp_imported().send,
            sub.atp_bsd().send,
        ),
        (
            "ATP receive",
            sub.atp_native().receive,
            sub.atp_imported().receive,
            sub.atp_bsd().receive,
        ),
    ];
    plot::draw_bars(
        &dir.join("paper004_fig6.png"),
        &Bars {
            title: "Seed 004 Figure 6: processing time per protocol, ns",
            value_label: "ns per packet",
            categories: rows.iter().map(|r| r.0.to_string()).collect(),
            series: vec![
                ("STREAMS-native".into(), rows.iter().map(|r| r.1).collect()),
                (
                    "BSD imported into STREAMS".into(),
                    rows.iter().map(|r| r.2).collect(),
                ),
                (
                    "BSD in its own subsystem".into(),
                    rows.iter().map(|r| r.3).collect(),
                ),
            ],
        },
    )
}

/// The imported protocols' cost inside Strata, from Figure 5 in memory:
/// the time of a null transaction through a graph with one protocol
/// imported over the time through the all-native graph.
fn in_strata(mem: &[Rate]) -> Vec<String> {
    let Some(native) = mem.iter().find(|r| r.graph == "atp/ddp/eth") else {
        return Vec::new();
    };
    [
        ("atp@bsd/ddp/eth", "atp@bsd"),
        ("atp@streams/ddp/eth", "atp@streams"),
        ("atp/ddp@bsd/eth", "ddp@bsd"),
        ("atp/ddp@streams/eth", "ddp@streams"),
    ]
    .iter()
    .filter_map(|(graph, proto)| {
        let r = mem.iter().find(|r| r.graph == *graph)?;
        Some(format!(
            "ratio imported/native {proto}-in-strata transaction = {:.3}",
            native.tps / r.tps
        ))
    })
    .collect()
}

/// Splits a part's report into its table and its ratio lines.
fn split(report: &str) -> (String, Vec<String>) {
    let (ratios, rest): (Vec<&str>, Vec<&str>) =
        report.lines().partition(|l| l.starts_with("ratio "));
    (
        rest.join("\n"),
        ratios.into_iter().map(str::to_string).collect(),
    )
}

/// Runs `strata bench paper004`.
pub fn run(a: Args) -> Result<()> {
    let q = a.quick;
    let mem = graphs::memory(&graphs::Setup {
        rounds: if q { 2 } else { a.rounds },
        batch: if q { 100 } else { a.batch },
        reply: a.reply,
        arch: a.arch,
        graphs: a.graphs.clone(),
    })?;
    if a.figure5_only {
        println!("{}", figure5(&mem, None, &a));
        return Ok(());
    }
    let veth = if a.no_veth {
        None
    } else {
        let (rounds, batch) = if q {
            (1, 200)
        } else {
            (a.veth_rounds, a.batch)
        };
        Some(veth(&a, rounds, batch)?)
    };
    println!("{}", figure5(&mem, veth.as_deref(), &a));
    let sub = paper004_subsystems::run(&paper004_subsystems::Setup {
        rounds: if q { 20 } else { a.subsystem_rounds },
        ..paper004_subsystems::Setup::default()
    })?;
    let (table, mut ratios) = split(&sub.to_string());
    println!("{table}");
    if a.instructions {
        let counted = super::paper004_subsystems::instructions(&paper004_subsystems::Setup {
            rounds: if q { 5 } else { 100 },
            allocs: 1_000,
            ..paper004_subsystems::Setup::default()
        })?;
        let (table, counted) = split(&counted.instructions_text());
        println!("{table}");
        ratios.extend(counted);
    }
    let smol = paper004_smoltcp::run(&paper004_smoltcp::Setup {
        arch: a.arch,
        batch: if q {
            2_000_000
        } else {
            a.smoltcp_mb * 1_000_000
        },
        rounds: if q { 1 } else { a.smoltcp_rounds },
        rtt_rounds: if q { 2 } else { 20 },
        ..paper004_smoltcp::Setup::default()
    })?;
    let (table, smol_ratios) = split(&smol.to_string());
    println!("{table}");
    if let Err(e) = plots(&a.plots, &mem, veth.as_deref(), &sub) {
        eprintln!("plots not drawn: {e:#}");
    } else {
        println!(
            "plots: {}, {}",
            a.plots.join("paper004_fig5.png").display(),
            a.plots.join("paper004_fig6.png").display()
        );
    }
    ratios.extend(in_strata(&mem));
    ratios.extend(smol_ratios);
    if ratios.is_empty() {
        bail!("no ratio lines");
    }
    for r in ratios {
        println!("{r}");
    }
    Ok(())
}
