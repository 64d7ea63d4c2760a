//! `strata rtt`: seed 000's ping-pong (§5.2) round trips, Table 1's rows.

use anyhow::Result;
use strata::Arch;
use strata_bench::rtt::{self, RttRow, RttSetup};

/// Round trips of a ping-pong over a stack (seed 000 Tables 1–3).
///
/// The client sends SIZE bytes, the server sends them back; each size is measured
/// COUNT times after WARMUP untimed round trips. On the in-memory link (`--link
/// mem`) times are the CPU cost of the two stacks, as no wire is in between. With
/// `--link packet` the two hosts sit in two network namespaces joined by a veth
/// pair, Strata on AF_PACKET, and the Linux kernel's own UDP ping-pong runs over
/// the same veth in the same polling mode, alternating, with the ratio printed.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The stack, top first: eth, ip/eth, udp/ip/eth, tcp/ip/eth; `ethdaa` in
    /// place of `eth` for DAA's path-tagged Ethernet (any graph spec whose
    /// top is one of these, or an ILP layer over UDP, works).
    #[arg(long, default_value = "udp/ip/eth")]
    stack: String,
    /// Payload sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,100,500,1000,1400")]
    size: Vec<usize>,
    /// Timed round trips per size.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// Untimed round trips before timing.
    #[arg(long, default_value_t = 1_000)]
    warmup: usize,
    /// Dispatch architecture of both hosts.
    #[arg(long, default_value = "llm")]
    arch: Arch,
    /// Compute and verify UDP checksums (seed 000 measured without).
    #[arg(long)]
    checksum: bool,
    /// The link: `mem` (in-memory, no wire) or `packet` (veth with AF_PACKET,
    /// beside the kernel; udp/ip/eth only; needs root).
    #[arg(long, default_value = "mem")]
    link: Link,
    /// With `--link packet`: spin on the sockets instead of sleeping, on both sides.
    #[arg(long)]
    busy_poll: bool,
    /// With `--link packet`: no segmentation offload on the packet links
    /// (frames go without virtio-net headers, bypassing the qdisc).
    #[arg(long)]
    no_offload: bool,
    /// With `--link packet`: rounds, each a batch of each side in turn.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Mem,
    Packet,
}

/// Runs `strata rtt`.
pub fn run(args: Args) -> Result<()> {
    if args.link == Link::Packet {
        anyhow::ensure!(
            args.stack == "udp/ip/eth",
            "--link packet measures udp/ip/eth beside the kernel's UDP"
        );
        return super::rtt_veth::run(super::rtt_veth::VethSetup {
            sizes: args.size,
            rounds: args.rounds,
            count: args.count,
            warmup: args.warmup,
            arch: args.arch,
            busy_poll: args.busy_poll,
            offload: !args.no_offload,
        });
    }
    let setup = RttSetup {
        stack: args.stack.clone(),
        arch: args.arch,
        checksum: args.checksum,
    };
    let rows = rtt::rtt_mem(&setup, &args.size, args.warmup, args.count)?;
    print_rows(&rows, args.json)
}

/// Prints rows as a table or as JSON lines.
pub fn print_rows(rows: &[RttRow], json: bool) -> Result<()> {
    if json {
        for r in rows {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    println!(
        "{:<14} {:<5} {:<6} {:>6} {:>7} {:>10} {:>10} {:>10}",
        "stack", "arch", "link", "size", "count", "mean µs", "p50 µs", "p99 µs"
    );
    for r in rows {
        println!(
            "{:<14} {:<5} {:<6} {:>6} {:>7} {:>10.3} {:>10.3} {:>10.3}",
            r.stack, r.arch, r.link, r.size, r.count, r.rtt_us_mean, r.rtt_us_p50, r.rtt_us_p99
        );
    }
    Ok(())
}
