//! `strata bench`: the seeds' experiments and today's peers, side by side.

use anyhow::Result;
use clap::Subcommand;
use strata_bench::insn::{Counter, Line};
use strata_bench::rtt_peers;

/// Experiments: each runs Strata beside its peer in one run, alternating.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(Subcommand, Debug)]
enum Experiment {
    /// UDP ping-pong: Strata's UDP-IP-ETH on the in-memory link vs smoltcp's UDP
    /// over its loopback device (checksums on in both).
    RttPeers(RttPeersArgs),
    /// Seed 000: Tables 1–3, Figure 4 and ILP, beside the paper's figures.
    Paper000(super::paper000::Args),
    /// Seed 001: the idle cost of an open connection of the transport.
    Paper001(super::paper001::Args),
    /// Seed 003: Table 4, Figures 4 and 5 and header bytes of the Protocol
    /// Accelerator's 4-layer stack, PA off and on.
    Paper003(super::paper003::Args),
    /// Seed 004's experiments in one run: Figure 5 (null transactions per
    /// graph, in memory and over veth), Figures 6 and 7, and smoltcp.
    #[command(name = "paper004")]
    Paper004(super::paper004::Args),
    /// Seed 004's smoltcp part: smoltcp's TCP imported into Strata vs
    /// Strata's TCP vs smoltcp on its own, bulk and 1-byte round trip, in
    /// memory.
    #[command(name = "paper004-smoltcp")]
    Paper004Smoltcp(super::paper004_smoltcp::Args),
    /// Seed 004's Figures 6 and 7b: BSD's DDP and ATP imported into STREAMS
    /// vs the STREAMS-native ones, per protocol and direction, and buffer
    /// allocation, native and encapsulated.
    #[command(name = "paper004-subsystems")]
    Paper004Subsystems(super::paper004_subsystems::Args),
    /// Bulk TCP: Strata's tcp/ip/eth on the in-memory link vs smoltcp's TCP
    /// over its loopback device (MTU 1500, checksums on in both).
    TcpPeers(super::bench_tcp::PeersArgs),
    /// Bulk TCP over a veth pair: Strata on AF_PACKET vs the kernel's TCP,
    /// both sending to the kernel (needs root).
    TcpVeth(super::bench_tcp::VethArgs),
    /// Bulk TCP through `strata wanem` (delay and loss): Strata's CUBIC vs the
    /// kernel's, both sending to the kernel (needs root).
    TcpWan(super::bench_tcp::WanArgs),
    /// One system's workload, untimed, for counting instructions under
    /// callgrind (`scripts/instructions`).
    Probe(super::bench_probe::Args),
}

#[derive(clap::Args, Debug)]
struct RttPeersArgs {
    /// Payload sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "1,1400")]
    size: Vec<usize>,
    /// Rounds; each round runs a batch of Strata, then a batch of smoltcp.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Round trips per batch.
    #[arg(long, default_value_t = 1_000)]
    batch: usize,
    /// Print one JSON object per line.
    #[arg(long)]
    json: bool,
}

/// Runs `strata bench`.
pub fn run(args: Args) -> Result<()> {
    match args.experiment {
        Experiment::RttPeers(a) => rtt_peers_cmd(a),
        Experiment::Paper000(a) => super::paper000::run(a),
        Experiment::Paper001(a) => super::paper001::run(a),
        Experiment::Paper003(a) => super::paper003::run(a),
        Experiment::Paper004(a) => super::paper004::run(a),
        Experiment::Paper004Smoltcp(a) => super::paper004_smoltcp::run(a),
        Experiment::Paper004Subsystems(a) => super::paper004_subsystems::run(a),
        Experiment::TcpPeers(a) => super::bench_tcp::peers(a),
        Experiment::TcpVeth(a) => super::bench_tcp::veth(a),
        Experiment::TcpWan(a) => super::bench_tcp::wan(a),
        Experiment::Probe(a) => super::bench_probe::run(a),
    }
}

fn rtt_peers_cmd(a: RttPeersArgs) -> Result<()> {
    let counter = Counter::open();
    let rows = rtt_peers::run(&a.size, a.rounds, a.batch, &counter)?;
    for r in &rows {
        if a.json {
            println!("{}", serde_json::to_string(r)?);
            continue;
        }
        println!(
            "UDP ping-pong, {} B payload, {} round trips each:",
            r.size, r.strata.count
        );
        println!("  strata  udp/ip/eth, mem link : {}", r.strata);
        println!("  smoltcp udp, loopback device : {}", r.smoltcp);
        println!(
            "ratio strata/smoltcp = {:.3}  ({} B, mean; below 1: Strata costs less)",
            r.ratio, r.size
        );
        let line = Line {
            counter: &counter,
            strata: r.strata_instructions,
            peer: r.smoltcp_instructions,
            unit: "round trip",
            script: "udp",
        };
        println!("{line}");
    }
    Ok(())
}
