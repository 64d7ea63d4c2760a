//! `strata bench tcp-peers`, `tcp-veth` and `tcp-wan`: Strata's TCP beside
//! its peers, each in one run, alternating, with the ratio printed.
//!
//! The real-link benchmarks make their own namespaces (removed at the end,
//! also on error): `a`, where the sender lives — a Strata host on AF_PACKET
//! (198.18.X.11) or the kernel (198.18.X.1) on the same veth end — and `b`,
//! where the kernel receives (198.18.X.2) for both. `tcp-veth` also has the
//! kernel in `a` send to a Strata host on AF_PACKET in `b` (198.18.X.12,
//! beside the kernel's receiver on the same veth end), so both directions
//! are measured against the kernel's own in one run. `tcp-wan` puts a
//! third namespace, `w`, between them, where `strata wanem` bridges its two
//! veth ends.
//!
//! `tcp-veth`'s veth keeps the kernel's default offloads, as `ip link add`
//! makes it: every sender hands the device TCP super-segments of up to 64 KB
//! that cross the pair whole (the kernel's TCP always; Strata's through its
//! packet link's `offload`, virtio-net headers, `--no-offload` sending every
//! segment itself), and a receiver takes them whole — the kernel's TCP, or
//! Strata's packet link through the same headers. `--device-offloads-off`
//! (and `tcp-wan` always) turns the device's checksum, segmentation and
//! receive offloads off instead, as `scripts/netns --no-offload` does: the
//! senders' super-segments are then cut by the kernel's generic segmentation
//! offload (GSO) on the way to the veth, and every receiver gets MTU-sized,
//! checksummed frames.
//!
//! Each batch is a fresh connection timed from its open (slow start
//! included) for a fixed time; the receiver counts what arrived. The kernel
//! sender writes with blocking `write`s and the receiver reads with blocking
//! `read`s; Strata's runtime sleeps in epoll the same way, or spins with
//! `--busy-poll` (the kernel has no user-space polling for a bulk sender).
//! Both use CUBIC with the kernel's and Strata's default, autotuned buffers.
//! CPU per byte is this process's user and system time over the bytes
//! received: both ends, and the kernel work their system calls start.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant as Wall};

use anyhow::{Context, Result, anyhow, ensure};
use strata::link::{Runtime, RuntimeConfig};
use strata::proto::tcp::Abort;
use strata::{Arch, Control, HostBuilder, HostParams, Ipv4Cidr};
use strata_bench::cpu::process_cpu;
use strata_bench::insn::{Counter, Line};
use strata_bench::peers::kernel_tcp::{KernelSink, kernel_send};
use strata_bench::tcp_bulk::{self, BulkSetup};
use strata_bench::tcp_peers::{self, PeersSetup};
use strata_bench::throughput::{Batch, Rate};

use super::host::default_mac;
use super::topology::{Topology, Veths, Wanem};

/// `strata bench tcp-peers`.
#[derive(clap::Args, Debug)]
pub struct PeersArgs {
    /// Send and receive buffer of every socket, bytes.
    #[arg(long, default_value_t = 256 * 1024)]
    buffer: usize,
    /// MTU of both in-memory links (Ethernet's by default; smoltcp's
    /// loopback announces 65535), bytes.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u16).range(576..))]
    mtu: u16,
    /// Megabytes (10⁶ bytes) per batch.
    #[arg(long, default_value_t = 200)]
    mb: u64,
    /// Rounds; each runs a batch of Strata and one of smoltcp, the order
    /// swapped every round.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Strata's dispatch architecture.
    #[arg(long, default_value = "llm")]
    arch: Arch,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `strata bench tcp-peers`.
pub fn peers(a: PeersArgs) -> Result<()> {
    ensure!(
        a.rounds > 0 && a.mb > 0,
        "--rounds and --mb must be at least 1"
    );
    let setup = PeersSetup {
        arch: a.arch,
        buffer: a.buffer,
        mtu: usize::from(a.mtu),
        batch: a.mb * 1_000_000,
        rounds: a.rounds,
    };
    let counter = Counter::open();
    let r = tcp_peers::run(&setup, &counter)?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "Bulk TCP, one thread, in-memory link (MTU {}, MSS {}, checksums on), {} KiB buffers, {} rounds × {} MB each:",
        a.mtu,
        r.strata_mss,
        a.buffer / 1024,
        a.rounds,
        a.mb
    );
    println!(
        "  strata  tcp/ip/eth ({}), mem link, TCP offloads : {}",
        a.arch, r.strata
    );
    println!(
        "  strata  tcp/ip/eth ({}), mem link, no offloads  : {}",
        a.arch, r.strata_no_offload
    );
    println!(
        "  smoltcp tcp, loopback device (no offloads)    : {}",
        r.smoltcp
    );
    println!(
        "  strata with offloads: {:.1} % of data segments merged on receive",
        r.strata_merged_share * 100.0
    );
    println!(
        "  strata without offloads: {:.1} data segments per segment received back",
        r.strata_segments_per_ack
    );
    println!(
        "ratio strata/smoltcp = {:.3}  (throughput, mean; above 1: Strata is faster; CPU/B {:.3})",
        r.ratio,
        r.strata.cpu_ns_per_byte / r.smoltcp.cpu_ns_per_byte
    );
    println!(
        "ratio strata without offloads/smoltcp = {:.3}  (CPU/B {:.3})",
        r.ratio_no_offload,
        r.strata_no_offload.cpu_ns_per_byte / r.smoltcp.cpu_ns_per_byte
    );
    let line = |strata| Line {
        counter: &counter,
        strata,
        peer: r.smoltcp_instructions,
        unit: "1448-byte segment",
        script: "tcp",
    };
    println!("with offloads: {}", line(r.strata_instructions));
    println!(
        "without offloads: {}",
        line(r.strata_no_offload_instructions)
    );
    Ok(())
}

/// The third octet of `tcp-veth`'s subnet, 198.18.X.0/24.
const VETH_NET: u8 = 251;

/// The third octet of `tcp-wan`'s subnet.
const WAN_NET: u8 = 252;

/// The host number (198.18.X.N) of the Strata host the kernel sends to.
const STRATA_RECEIVER: u8 = 12;

/// Namespaces `tb<pid>-…`; the kernel sender uses CUBIC, as Strata does,
/// to either receiver.
const VETHS: Veths = Veths {
    prefix: "tb",
    net: 0,
    wan: false,
    offloads: false,
    congctl: Some("cubic"),
    extra_hosts: &[STRATA_RECEIVER],
};

/// The receiving kernel's port.
const PORT: u16 = tcp_bulk::PORT;

/// A bulk-transfer Strata host at 198.18.X.`host` on the veth end in
/// namespace `side` ("a": `va`, "b": `vb`).
fn strata_host(t: &Topology, side: &str, host: u8, arch: Arch) -> Result<HostBuilder> {
    let me = t.ip(host);
    let params = HostParams {
        mac: default_mac(me),
        address: Ipv4Cidr::new(me, 24).ok_or_else(|| anyhow!("bad prefix"))?,
        gateway: None,
    };
    let setup = BulkSetup {
        tcp: "tcp",
        arch,
        buffer: None,
    };
    Ok(tcp_bulk::bulk_host("packet", params, &setup)
        .link_option("interface", t.dev(&format!("v{side}")).as_str())
        .link_option("netns", t.ns(side).as_str()))
}

/// The kernel's TCP counters in namespace `a` (`nstat -az`).
fn nstat(t: &Topology) -> Result<LossCounters> {
    let out = t.exec("a", "nstat", &["-az"])?;
    let get = |name: &str| {
        out.lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some(name)).then(|| w.next()?.parse().ok())?
            })
            .unwrap_or(0)
    };
    Ok(LossCounters {
        retransmits: get("TcpRetransSegs"),
        timeouts: get("TcpExtTCPTimeouts"),
        probes: get("TcpExtTCPLossProbes"),
        recoveries: get("TcpExtTCPSackRecovery"),
        lost_retransmits: get("TcpExtTCPLostRetransmit"),
    })
}

/// Loss-recovery counters of one batch, Strata's or the kernel's.
#[derive(Clone, Copy, Debug, Default)]
struct LossCounters {
    /// Segments retransmitted.
    retransmits: u64,
    /// Retransmission timeouts.
    timeouts: u64,
    /// Tail loss probes.
    probes: u64,
    /// Fast (SACK) recoveries entered.
    recoveries: u64,
    /// Retransmissions found lost again.
    lost_retransmits: u64,
}

impl LossCounters {
    fn since(self, before: LossCounters) -> LossCounters {
        LossCounters {
            retransmits: self.retransmits.saturating_sub(before.retransmits),
            timeouts: self.timeouts.saturating_sub(before.timeouts),
            probes: self.probes.saturating_sub(before.probes),
            recoveries: self.recoveries.saturating_sub(before.recoveries),
            lost_retransmits: self
                .lost_retransmits
                .saturating_sub(before.lost_retransmits),
        }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "retransmits": self.retransmits,
            "timeouts": self.timeouts,
            "loss_probes": self.probes,
            "recoveries": self.recoveries,
            "lost_retransmits": self.lost_retransmits,
        })
    }

    fn add(&mut self, o: LossCounters) {
        self.retransmits += o.retransmits;
        self.timeouts += o.timeouts;
        self.probes += o.probes;
        self.recoveries += o.recoveries;
        self.lost_retransmits += o.lost_retransmits;
    }
}

/// What a real-link sender does in one batch.
struct Run {
    batch: Batch,
    counters: LossCounters,
}

/// How the receiver's count (`received`) grows over `duration` from now;
/// `mid` runs halfway through.
fn measure(
    received: impl Fn() -> Result<u64>,
    duration: Duration,
    mid: impl FnOnce(),
) -> Result<(u64, Duration, Duration)> {
    let (rx0, cpu0, t0) = (received()?, process_cpu(), Wall::now());
    std::thread::sleep(duration / 2);
    mid();
    std::thread::sleep(duration.saturating_sub(t0.elapsed()));
    let (rx1, cpu1) = (received()?, process_cpu());
    Ok((rx1 - rx0, t0.elapsed(), cpu1 - cpu0))
}

/// One batch of a Strata sender in namespace `a`: a fresh connection, sending
/// for `duration`, timed from the open.
fn strata_run(
    t: &Topology,
    sink: &KernelSink,
    arch: Arch,
    mode: &RuntimeConfig,
    offload: bool,
    duration: Duration,
) -> Result<Run> {
    let mut host = strata_host(t, "a", 11, arch)?
        .link_option("offload", offload)
        .build()?;
    let (source, session) = tcp_bulk::install_source(&mut host, t.ip(2))?;
    tcp_bulk::give(&mut host, source, u64::MAX / 2)?;
    let runtime = Runtime::new(host, mode.clone())?.spawn("strata-tcp-send")?;
    let (bytes, wall, cpu) = measure(|| Ok(sink.received()), duration, || {})?;
    let info = runtime
        .handle()
        .call(move |e| {
            let info = tcp_bulk::sender_info(e, session);
            // A reset, so nothing queued competes with the next batch.
            let _ = e.control(
                session.proto,
                Some(session.sess),
                Control::Private(Box::new(Abort)),
            );
            info
        })
        .map_err(|_| anyhow!("the Strata sender stopped"))?;
    sink.cut();
    runtime.stop()?;
    let info = info.ok_or_else(|| anyhow!("the Strata connection was gone at the end"))?;
    let s = info.stats;
    Ok(Run {
        batch: Batch { bytes, wall, cpu },
        counters: LossCounters {
            retransmits: s.retransmits,
            timeouts: s.timeouts,
            probes: s.loss_probes,
            recoveries: s.fast_recoveries,
            lost_retransmits: s.lost_retransmits,
        },
    })
}

/// One batch of the kernel sender in namespace `a`; `cc` learns the
/// connection's congestion control.
fn kernel_run(t: &Topology, sink: &KernelSink, duration: Duration, cc: &mut String) -> Result<Run> {
    let before = nstat(t)?;
    let (ns, to) = (t.ns("a"), SocketAddrV4::new(t.ip(2), PORT));
    let sender = std::thread::spawn(move || kernel_send(Some(&ns), to, duration));
    let (bytes, wall, cpu) = measure(
        || Ok(sink.received()),
        duration,
        || {
            if let Ok(name) = t.kernel_cc(2) {
                *cc = name;
            }
        },
    )?;
    sink.cut();
    sender
        .join()
        .map_err(|_| anyhow!("the kernel sender panicked"))?
        .context("the kernel sender")?;
    let counters = nstat(t)?.since(before);
    Ok(Run {
        batch: Batch { bytes, wall, cpu },
        counters,
    })
}

/// One batch of the kernel sender in namespace `a` sending to a Strata host
/// on AF_PACKET in namespace `b`: a fresh host and connection, timed from
/// the open.
fn strata_receiving_run(
    t: &Topology,
    arch: Arch,
    mode: &RuntimeConfig,
    duration: Duration,
    cc: &mut String,
) -> Result<Run> {
    let me = t.ip(STRATA_RECEIVER);
    let mut host = strata_host(t, "b", STRATA_RECEIVER, arch)?.build()?;
    let sink = tcp_bulk::install_sink(&mut host)?;
    let runtime = Runtime::new(host, mode.clone())?.spawn("strata-tcp-recv")?;
    let handle = runtime.handle();
    let received = || {
        handle
            .call(move |e| tcp_bulk::sink_bytes(e, sink))
            .map_err(|_| anyhow!("the Strata receiver stopped"))
    };
    let before = nstat(t)?;
    let (ns, to) = (t.ns("a"), SocketAddrV4::new(me, PORT));
    let sender = std::thread::spawn(move || kernel_send(Some(&ns), to, duration));
    let measured = measure(received, duration, || {
        if let Ok(name) = t.kernel_cc(STRATA_RECEIVER) {
            *cc = name;
        }
    });
    // A reset, so the sender stops at once and nothing it still has queued
    // competes with the next batch.
    let _ = handle.call(move |e| tcp_bulk::abort_sink(e, sink));
    let sent = sender
        .join()
        .map_err(|_| anyhow!("the kernel sender panicked"))?;
    runtime.stop()?;
    let (bytes, wall, cpu) = measured?;
    sent.context("the kernel sender")?;
    Ok(Run {
        batch: Batch { bytes, wall, cpu },
        counters: nstat(t)?.since(before),
    })
}

/// Runs `rounds` batches of each runner, taking turns, each round in the
/// order of the one before turned by one (for two: swapped every round).
fn alternate<const N: usize>(
    rounds: usize,
    runners: [&mut dyn FnMut() -> Result<Run>; N],
) -> Result<[(Vec<Batch>, LossCounters); N]> {
    let mut out: [(Vec<Batch>, LossCounters); N] = std::array::from_fn(|_| Default::default());
    for round in 0..rounds {
        for k in 0..N {
            let i = (round + k) % N;
            let r = runners[i]()?;
            out[i].0.push(r.batch);
            out[i].1.add(r.counters);
        }
    }
    Ok(out)
}

fn poll_mode(busy_poll: bool, batch: usize) -> (RuntimeConfig, &'static str) {
    let (mut config, name) = if busy_poll {
        (RuntimeConfig::busy_poll(), "busy-poll")
    } else {
        (RuntimeConfig::default(), "blocking (epoll)")
    };
    config.batch = batch;
    (config, name)
}

/// `strata bench tcp-veth`.
#[derive(clap::Args, Debug)]
pub struct VethArgs {
    /// Seconds per batch.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Rounds; each runs a batch of each sender, the order swapped every round.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Strata's dispatch architecture.
    #[arg(long, default_value = "llm")]
    arch: Arch,
    /// Strata's runtime spins instead of sleeping in epoll.
    #[arg(long)]
    busy_poll: bool,
    /// Frames Strata's runtime reads or writes per system call, at most.
    #[arg(long, default_value_t = strata::link::drivers::DEFAULT_BATCH)]
    batch: usize,
    /// Strata sends every segment itself instead of letting the kernel cut
    /// its super-segments (the packet link's `offload = false`).
    #[arg(long)]
    no_offload: bool,
    /// Turn the veth's device offloads off (checksums, segmentation,
    /// receive), as `scripts/netns --no-offload` does, instead of keeping
    /// the kernel's defaults.
    #[arg(long)]
    device_offloads_off: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `strata bench tcp-veth`.
pub fn veth(a: VethArgs) -> Result<()> {
    ensure!(
        a.rounds > 0 && a.secs > 0.0,
        "--rounds and --secs must be positive"
    );
    let duration = Duration::from_secs_f64(a.secs);
    let (mode, poll) = poll_mode(a.busy_poll, a.batch);
    let veths = Veths {
        net: VETH_NET,
        wan: false,
        offloads: !a.device_offloads_off,
        ..VETHS
    };
    let t = Topology::up(veths).context("making the namespaces (needs root)")?;
    let (mut cc, mut cc_to_strata) = (String::new(), String::new());
    let sink = KernelSink::start(Some(&t.ns("b")), SocketAddrV4::new(t.ip(2), PORT))?;
    let [(s, sc), (k, kc), (r, rc)] = alternate(
        a.rounds,
        [
            &mut || strata_run(&t, &sink, a.arch, &mode, !a.no_offload, duration),
            &mut || kernel_run(&t, &sink, duration, &mut cc),
            &mut || strata_receiving_run(&t, a.arch, &mode, duration, &mut cc_to_strata),
        ],
    )?;
    let (strata, kernel, receiving) = (Rate::of(&s), Rate::of(&k), Rate::of(&r));
    let ratio = strata.mean_mb_s / kernel.mean_mb_s;
    let ratio_receiving = receiving.mean_mb_s / kernel.mean_mb_s;
    if a.json {
        let row = serde_json::json!({
            "strata": strata, "kernel": kernel, "ratio": ratio,
            "strata_receiving": receiving, "ratio_receiving": ratio_receiving,
            "strata_counters": sc.json(), "kernel_counters": kc.json(),
            "kernel_to_strata_counters": rc.json(), "kernel_cc": cc,
            "kernel_to_strata_cc": cc_to_strata,
        });
        println!("{row}");
        return Ok(());
    }
    let device = if a.device_offloads_off {
        "device offloads off"
    } else {
        "the kernel's default offloads"
    };
    println!(
        "Bulk TCP over a veth pair (MTU 1500, {device}), both directions beside the kernel's, {} rounds × {:.1} s each:",
        a.rounds, a.secs
    );
    let (segments, kernel_segments) = match (a.no_offload, a.device_offloads_off) {
        (true, _) => ("every segment sent", "super-segments"),
        (false, true) => ("super-segments cut by GSO", "super-segments cut by GSO"),
        (false, false) => ("super-segments", "super-segments"),
    };
    println!(
        "  strata → linux  strata tcp/ip/eth ({}), AF_PACKET, {poll}, {segments} : {strata}",
        a.arch
    );
    println!("  linux → linux   kernel TCP ({cc}), blocking writes, {kernel_segments} : {kernel}");
    println!(
        "  linux → strata  kernel TCP ({cc_to_strata}) to strata tcp/ip/eth ({}), AF_PACKET, {poll} : {receiving}",
        a.arch
    );
    println!("  (CPU: this process, sender and receiver threads, user + system)");
    println!(
        "  kernel sender retransmits: to linux {}, to strata {}",
        kc.retransmits, rc.retransmits
    );
    println!(
        "ratio strata/kernel = {ratio:.3}  (strata → linux beside linux → linux: throughput, mean; 1 is parity; CPU/B {:.3})",
        strata.cpu_ns_per_byte / kernel.cpu_ns_per_byte
    );
    println!(
        "ratio strata receiving/kernel = {ratio_receiving:.3}  (linux → strata beside linux → linux: throughput, mean; goal 0.9; CPU/B {:.3})",
        receiving.cpu_ns_per_byte / kernel.cpu_ns_per_byte
    );
    Ok(())
}

/// `strata bench tcp-wan`.
#[derive(clap::Args, Debug)]
pub struct WanArgs {
    /// One-way delay of the emulated path, each way.
    #[arg(long, default_value = "50ms")]
    delay: String,
    /// Random loss, each way.
    #[arg(long, default_value = "1%")]
    loss: String,
    /// Seconds per run.
    #[arg(long, default_value_t = 30.0)]
    secs: f64,
    /// Runs of each sender, alternating.
    #[arg(long, default_value_t = 4)]
    runs: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `strata bench tcp-wan`.
pub fn wan(a: WanArgs) -> Result<()> {
    ensure!(
        a.runs > 0 && a.secs > 0.0,
        "--runs and --secs must be positive"
    );
    let duration = Duration::from_secs_f64(a.secs);
    let (mode, _) = poll_mode(false, strata::link::drivers::DEFAULT_BATCH);
    let veths = Veths {
        net: WAN_NET,
        wan: true,
        offloads: false,
        ..VETHS
    };
    let t = Topology::up(veths).context("making the namespaces (needs root)")?;
    let default_cc = t.default_cc()?;
    let mut cc = String::new();
    let wanem = Wanem::start(&t, &["--delay", &a.delay, "--loss", &a.loss])?;
    let sink = KernelSink::start(Some(&t.ns("b")), SocketAddrV4::new(t.ip(2), PORT))?;
    let [(s, sc), (k, kc)] = alternate(
        a.runs,
        [
            &mut || strata_run(&t, &sink, Arch::Llm, &mode, true, duration),
            &mut || kernel_run(&t, &sink, duration, &mut cc),
        ],
    )?;
    drop(wanem);
    let (strata, kernel) = (Rate::of(&s), Rate::of(&k));
    let ratio = strata.mean_mb_s / kernel.mean_mb_s;
    if a.json {
        let row = serde_json::json!({
            "strata": strata, "kernel": kernel, "ratio": ratio,
            "strata_counters": sc.json(), "kernel_counters": kc.json(), "kernel_cc": cc,
        });
        println!("{row}");
        return Ok(());
    }
    println!(
        "Bulk TCP through strata wanem ({} each way, {} loss each way), to the kernel's receiver, {} runs × {:.0} s each:",
        a.delay, a.loss, a.runs, a.secs
    );
    println!("  strata cubic, AF_PACKET, blocking : {strata}");
    println!("  kernel {cc}, blocking writes      : {kernel}");
    println!(
        "  (the kernel's connection: {cc} by its route's congctl; namespace default {default_cc})"
    );
    let line = |c: &LossCounters| {
        format!(
            "retransmits {} timeouts {} loss-probes {} recoveries {} lost-retransmits {}",
            c.retransmits, c.timeouts, c.probes, c.recoveries, c.lost_retransmits
        )
    };
    println!("  strata: {}", line(&sc));
    println!("  kernel: {}", line(&kc));
    println!("ratio strata/kernel = {ratio:.3}  (throughput, mean of runs; 1 is parity)");
    Ok(())
}
