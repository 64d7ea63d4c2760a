//! `strata rtt --link packet`: Strata's UDP-IP-ETH ping-pong over a veth pair
//! with AF_PACKET, beside the Linux kernel's own UDP ping-pong over the same veth
//! pair in the same polling mode (`--busy-poll` or blocking) — in one run,
//! alternating.
//!
//! The command makes its own two namespaces joined by a veth pair (and removes
//! them at the end, also on error). Each round runs a batch of Strata round
//! trips — two runtimes, a client measuring in-engine and an echo server — and
//! then a batch of kernel round trips between two sockets on two threads, both
//! sides spinning or both sleeping; the next round swaps the order. Only one
//! side runs at a time, so on a two-core machine each side has a core per end.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::time::{Duration, Instant as WallInstant};

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use strata::apps::udp_echo::UdpEcho;
use strata::apps::udp_rtt::{RttConfig, UdpRtt};
use strata::link::{Runtime, RuntimeConfig};
use strata::{Arch, Engine, HostBuilder, HostParams, Ipv4Cidr};
use strata_bench::peers::kernel_udp::KernelUdpPingPong;
use strata_bench::pingpong::{self, Layer, Peer, PingPongClient};
use strata_bench::rtt::RttRow;
use strata_bench::stats::Summary;

use super::host::default_mac;

/// The kernels' and Strata hosts' addresses on the pair (198.18.250.0/24, in
/// namespaces of our own).
const KERNEL_A: Ipv4Addr = Ipv4Addr::new(198, 18, 250, 1);
const KERNEL_B: Ipv4Addr = Ipv4Addr::new(198, 18, 250, 2);
const STRATA_A: Ipv4Addr = Ipv4Addr::new(198, 18, 250, 11);
const STRATA_B: Ipv4Addr = Ipv4Addr::new(198, 18, 250, 12);

/// The echo port of both servers (RFC 862).
const ECHO_PORT: u16 = 7;

/// What `strata rtt --link packet` measures.
pub struct VethSetup {
    /// Payload sizes in bytes (at least 8).
    pub sizes: Vec<usize>,
    /// Rounds; each runs a batch of each side, the order swapped every round.
    pub rounds: usize,
    /// Timed round trips per side per round.
    pub count: usize,
    /// Untimed round trips before each batch.
    pub warmup: usize,
    /// Dispatch architecture of both Strata hosts.
    pub arch: Arch,
    /// Spin instead of sleeping, on both sides.
    pub busy_poll: bool,
    /// The packet links' segmentation offload (virtio-net headers).
    pub offload: bool,
}

/// Two namespaces joined by a veth pair, removed when dropped.
pub(crate) struct Pair {
    name: String,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Pair {
    /// Makes the namespaces and the pair (needs root).
    pub(crate) fn up() -> Result<Pair> {
        let pair = Pair {
            name: format!("rtt{}", std::process::id() % 100_000),
        };
        pair.down();
        let (a, b) = (pair.ns("a"), pair.ns("b"));
        for ns in [&a, &b] {
            ip(&["netns", "add", ns])?;
            // No IPv6: no router solicitations or DAD on the wire while measuring.
            ip(&[
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let (va, vb) = (pair.dev("a"), pair.dev("b"));
        ip(&[
            "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b,
        ])?;
        for (ns, dev, addr) in [(&a, &va, KERNEL_A), (&b, &vb, KERNEL_B)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    pub(crate) fn ns(&self, side: &str) -> String {
        format!("{}-{side}", self.name)
    }

    pub(crate) fn dev(&self, side: &str) -> String {
        format!("{}-v{side}", self.name)
    }

    fn down(&self) {
        for side in ["a", "b"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(side)])
                .output();
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.down();
    }
}

/// A Strata host running `stack` on the pair's veth end `side` (opened inside
/// its namespace), its packet link with segmentation offload or not.
fn host(
    pair: &Pair,
    side: &str,
    addr: Ipv4Addr,
    arch: Arch,
    stack: &str,
    offload: bool,
) -> Result<Engine> {
    let params = HostParams {
        mac: default_mac(addr),
        address: Ipv4Cidr::new(addr, 24).ok_or_else(|| anyhow!("bad prefix"))?,
        gateway: None,
    };
    Ok(HostBuilder::spec(stack, params, "net0", "packet")
        .link_option("interface", pair.dev(side).as_str())
        .link_option("netns", pair.ns(side).as_str())
        .link_option("offload", offload)
        .arch(arch)
        .build()?)
}

/// One batch of Strata round trips, in nanoseconds.
fn strata_batch(
    pair: &Pair,
    size: usize,
    count: usize,
    warmup: usize,
    arch: Arch,
    offload: bool,
    mode: &RuntimeConfig,
) -> Result<Vec<u64>> {
    let mut server = host(pair, "b", STRATA_B, arch, "udp/ip/eth", offload)?;
    UdpEcho::install(&mut server, ECHO_PORT)?;
    let mut client = host(pair, "a", STRATA_A, arch, "udp/ip/eth", offload)?;
    let config = RttConfig {
        dest: SocketAddrV4::new(STRATA_B, ECHO_PORT),
        next_hop: STRATA_B,
        size,
        samples: count,
        warmup,
    };
    let id = UdpRtt::install(&mut client, config)?;
    let server = Runtime::new(server, mode.clone())?.spawn("strata-echo")?;
    let client = Runtime::new(client, mode.clone())?.spawn("strata-client")?;
    let deadline = WallInstant::now() + Duration::from_secs(60);
    let samples = loop {
        std::thread::sleep(Duration::from_millis(20));
        let done = client
            .handle()
            .call(move |e| {
                e.app_mut::<UdpRtt>(id)
                    .filter(|r| r.is_finished())
                    .map(|r| std::mem::take(&mut r.samples))
            })
            .map_err(|_| anyhow!("the Strata client stopped"))?;
        if let Some(s) = done {
            break s;
        }
        if WallInstant::now() > deadline {
            bail!("Strata's ping-pong did not finish in 60 s");
        }
    };
    client.stop()?;
    server.stop()?;
    Ok(samples)
}

/// Seed 000's ping-pong over `stack` between two busy-polling hosts on the pair,
/// one row per size: the paper's tables on a real link.
pub(crate) fn pingpong_rows(
    pair: &Pair,
    stack: &str,
    arch: Arch,
    sizes: &[usize],
    warmup: usize,
    count: usize,
) -> Result<Vec<RttRow>> {
    let layer = Layer::of_spec(stack).ok_or_else(|| anyhow!("no ping-pong for '{stack}'"))?;
    let proto = pingpong::top_of(stack).unwrap_or_default();
    let mut server = host(pair, "b", STRATA_B, arch, stack, true)?;
    let mut client = host(pair, "a", STRATA_A, arch, stack, true)?;
    let peer = Peer {
        mac: default_mac(STRATA_B),
        ip: STRATA_B,
    };
    let pp = pingpong::install(&mut client, &mut server, layer, proto, peer, false)?;
    let server = Runtime::new(server, RuntimeConfig::busy_poll())?.spawn("pp-server")?;
    let client = Runtime::new(client, RuntimeConfig::busy_poll())?.spawn("pp-client")?;
    let mut rows = Vec::new();
    for &size in sizes {
        let payload = Bytes::from(vec![0x5a; size]);
        client
            .handle()
            .call(move |e| pp.start_timed(e, payload, warmup, count))
            .map_err(|_| anyhow!("the client stopped"))??;
        let deadline = WallInstant::now() + Duration::from_secs(60);
        let mut samples = loop {
            std::thread::sleep(Duration::from_millis(10));
            let done = client
                .handle()
                .call(move |e| {
                    let c = e.app_mut::<PingPongClient>(pp.client)?;
                    let run = c.run.take_if(|r| r.is_finished())?;
                    Some(run.samples)
                })
                .map_err(|_| anyhow!("the client stopped"))?;
            if let Some(s) = done {
                break s;
            }
            if WallInstant::now() > deadline {
                bail!("{stack} under {arch}, {size} B: the ping-pong did not finish in 60 s");
            }
        };
        let s = Summary::of(&mut samples);
        rows.push(RttRow {
            stack: stack.into(),
            arch: arch.to_string(),
            link: "packet".into(),
            size,
            count,
            rtt_us_mean: s.mean_us,
            rtt_us_p50: s.p50_us,
            rtt_us_p99: s.p99_us,
        });
    }
    client.stop()?;
    server.stop()?;
    Ok(rows)
}

/// One batch of kernel round trips, in nanoseconds.
fn kernel_batch(
    pair: &Pair,
    size: usize,
    count: usize,
    warmup: usize,
    busy_poll: bool,
) -> Result<Vec<u64>> {
    let mut p = KernelUdpPingPong::start(
        Some(&pair.ns("a")),
        SocketAddrV4::new(KERNEL_A, 0),
        Some(&pair.ns("b")),
        SocketAddrV4::new(KERNEL_B, ECHO_PORT),
        size,
        busy_poll,
    )?;
    p.round_trips(warmup)?;
    let samples = p.round_trips(count)?;
    p.stop()?;
    Ok(samples)
}

/// Runs the veth comparison.
pub fn run(args: VethSetup) -> Result<()> {
    if args.sizes.iter().any(|&s| !(8..=1472).contains(&s)) {
        bail!("sizes must lie between 8 and 1472 bytes (one frame)");
    }
    if args.rounds == 0 || args.count == 0 {
        bail!("--rounds and --count must be at least 1");
    }
    let mode = if args.busy_poll {
        RuntimeConfig::busy_poll()
    } else {
        RuntimeConfig::default()
    };
    let poll = if args.busy_poll {
        "busy-poll"
    } else {
        "blocking"
    };
    let pair = Pair::up().context("making the veth pair (needs root)")?;
    for &size in &args.sizes {
        let (mut strata, mut kernel) = (Vec::new(), Vec::new());
        for round in 0..args.rounds {
            let batch_strata = || {
                strata_batch(
                    &pair,
                    size,
                    args.count,
                    args.warmup,
                    args.arch,
                    args.offload,
                    &mode,
                )
            };
            let batch_kernel =
                || kernel_batch(&pair, size, args.count, args.warmup, args.busy_poll);
            if round % 2 == 0 {
                strata.extend(batch_strata()?);
                kernel.extend(batch_kernel()?);
            } else {
                kernel.extend(batch_kernel()?);
                strata.extend(batch_strata()?);
            }
        }
        let (s, k) = (Summary::of(&mut strata), Summary::of(&mut kernel));
        println!(
            "UDP ping-pong over veth, {poll}, {size} B payload, {} rounds × {} round trips each:",
            args.rounds, args.count
        );
        println!("  strata udp/ip/eth ({}), AF_PACKET : {s}", args.arch);
        println!("  kernel UDP sockets ({poll})       : {k}");
        println!(
            "ratio strata/kernel = {:.3}  (mean; p50 {:.3}, p99 {:.3}; below 1: Strata is faster)",
            s.mean_us / k.mean_us,
            s.p50_us / k.p50_us,
            s.p99_us / k.p99_us
        );
    }
    Ok(())
}
