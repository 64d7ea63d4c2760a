//! `strata demo`: Strata's main job on the embedded in-memory network, no set-up.
//!
//! Two hosts on a simulated lossy link (virtual time, deterministic for a seed):
//! the protocol graph, a ping, a UDP echo exchange whose losses are accounted for
//! exactly, seed 000's Table 1 round trips on the in-memory link beside the
//! paper's, and every protocol's counters.

use std::any::Any;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use strata::apps::ping::{PingConfig, PingEvent, Pinger};
use strata::apps::udp_echo::UdpEcho;
use strata::link::{Direction, HostId, LinkParams, SimNet, WireId};
use strata::{
    Addr, App, AppCx, Arch, Engine, HostBuilder, HostParams, Message, PacketMeta, Participants,
    Qos, SessionRef,
};
use strata_bench::paper000::tables::{PAPER, SIZES};
use strata_bench::rtt::{self, RttSetup};

/// Run Strata's main job on the embedded in-memory network.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dispatch architecture of both hosts.
    #[arg(long, default_value = "llm")]
    arch: Arch,
    /// Seed of the simulated network (the same seed replays the same run).
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Random loss on the link, each way.
    #[arg(long, default_value = "2%")]
    loss: String,
    /// One-way delay of the link.
    #[arg(long, default_value = "1ms")]
    delay: String,
    /// Datagrams the UDP echo client sends.
    #[arg(long, default_value_t = 200)]
    datagrams: u64,
    /// Round trips per size for the RTT table.
    #[arg(long, default_value_t = 2000)]
    count: usize,
    /// Capture host 1's link to this pcap file.
    #[arg(long)]
    pcap: Option<PathBuf>,
}

const ECHO_PORT: u16 = 7;
const PROBE: u64 = 1;

/// Runs `strata demo`.
pub fn run(args: Args) -> Result<()> {
    let params = LinkParams {
        delay: strata::core::units::parse_duration(&args.delay)?,
        jitter: Duration::from_micros(100),
        loss: strata::core::units::parse_fraction(&args.loss)?,
        ..LinkParams::default()
    };
    // DAA needs its own link layer, which carries application identifiers.
    let stack = if args.arch == Arch::Daa {
        "udp/ip/ethdaa"
    } else {
        "udp/ip/eth"
    };
    let host = |n: u8| {
        HostBuilder::spec(stack, HostParams::numbered(n), "net0", strata::link::SIM)
            .arch(args.arch)
            .seed(args.seed + u64::from(n))
            .build()
    };
    let mut net = SimNet::new(args.seed);
    let h1 = net.add_host("h1", host(1)?);
    let h2 = net.add_host("h2", host(2)?);
    let wire = net.connect((h1, "net0"), (h2, "net0"), params.clone(), params.clone())?;
    if let Some(path) = &args.pcap {
        net.capture(h1, "net0", path)?;
    }

    println!(
        "Strata demo — two hosts on a simulated link ({params}), arch {}, seed {}\n",
        args.arch, args.seed
    );
    for (n, h) in [(1u8, h1), (2, h2)] {
        let p = HostParams::numbered(n);
        println!("  {}  {}  {}", net.host_name(h), p.address, p.mac);
    }
    println!("\nProtocol graph of h1 (strata graph --stack {stack}):\n");
    for line in net.engine(h1).graph_text().lines() {
        println!("  {line}");
    }

    ping(&mut net, h1)?;
    echo(&mut net, h1, h2, wire, args.datagrams)?;
    rtt_table(args.arch, args.count)?;
    counters(&mut net, h1, h2);
    section("Seed 001's transport: a file over a simulated long fat pipe");
    super::demo_xport::transfer(args.seed, params.delay, params.loss);
    section("Seed 003's Protocol Accelerator: a layered stack's round trip, PA off and on");
    super::demo_pa::round_trips(args.count)?;
    section("Seed 004: one ATP transaction through a hybrid graph (BSD and STREAMS code)");
    super::demo_atalk::transaction(args.arch, args.seed, params.clone())?;
    if let Some(path) = &args.pcap {
        net.flush_captures()?;
        println!(
            "\nh1's link captured to {} (open it with tshark or Wireshark).",
            path.display()
        );
    }
    Ok(())
}

fn section(title: &str) {
    println!(
        "\n── {title} {}",
        "─".repeat(70usize.saturating_sub(title.len()))
    );
}

fn ping(net: &mut SimNet, from: HostId) -> Result<()> {
    section("ping h2 from h1: ICMP echo through the simulated link");
    let target = HostParams::numbered(2).address.address();
    let config = PingConfig {
        target,
        count: Some(10),
        size: 56,
        interval: Duration::from_millis(100),
        linger: Duration::from_millis(500),
    };
    let (app, events) = Pinger::install(net.engine(from), config)?;
    let finished = net.run_until_condition(
        |n| {
            n.engine(from)
                .app::<Pinger>(app)
                .is_some_and(|p| p.is_finished())
        },
        Duration::from_secs(10),
    );
    for e in events.try_iter() {
        if let PingEvent::Reply {
            seq,
            bytes,
            from,
            ttl,
            rtt,
            ..
        } = e
        {
            println!(
                "  {bytes} bytes from {from}: icmp_seq={seq} ttl={ttl} time={:.3} ms",
                rtt.as_secs_f64() * 1e3
            );
        }
    }
    let pinger = net
        .engine(from)
        .app::<Pinger>(app)
        .context("the pinger is installed")?;
    let t = &pinger.totals;
    let loss = 100.0 * (t.transmitted - t.received) as f64 / t.transmitted.max(1) as f64;
    println!("  --- {target} ping statistics ---");
    print!(
        "  {} packets transmitted, {} received, {loss:.0}% packet loss",
        t.transmitted, t.received
    );
    if let Some((min, avg, max, mdev)) = t.rtt {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        print!(
            ", rtt min/avg/max/mdev = {:.3}/{:.3}/{:.3}/{:.3} ms",
            ms(min),
            ms(avg),
            ms(max),
            ms(mdev)
        );
    }
    println!();
    anyhow::ensure!(finished, "the ping did not finish in 10 s of virtual time");
    Ok(())
}

/// Sends numbered datagrams to an echo port and notes which came back.
struct EchoProbe {
    session: SessionRef,
    total: u64,
    sent: u64,
    back: Vec<bool>,
    interval: Duration,
}

impl App for EchoProbe {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        let mut n = [0u8; 8];
        if msg.copy_to_slice(0, &mut n) == 8
            && let Some(slot) = self.back.get_mut(u64::from_be_bytes(n) as usize)
        {
            *slot = true;
        }
    }

    fn timer(&mut self, _: u64, cx: &mut AppCx) {
        if self.sent == self.total {
            return;
        }
        let mut payload = vec![0x5a; 512];
        payload[..8].copy_from_slice(&self.sent.to_be_bytes());
        cx.send(self.session, Message::from(payload));
        self.sent += 1;
        let at = cx.now() + self.interval;
        cx.set_timer(at, PROBE);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn echo(net: &mut SimNet, h1: HostId, h2: HostId, wire: WireId, total: u64) -> Result<()> {
    section("UDP echo: h1 sends numbered datagrams to h2's echo port, h2 sends them back");
    UdpEcho::install(net.engine(h2), ECHO_PORT)?;
    let engine = net.engine(h1);
    let udp = engine.proto_id("udp").context("udp in the graph")?;
    let server = HostParams::numbered(2).address.address();
    let app = engine.add_app(Box::new(EchoProbe {
        session: SessionRef::new(udp, strata::core::SessionId(0)),
        total,
        sent: 0,
        back: vec![false; total as usize],
        interval: Duration::from_millis(1),
    }));
    engine.with_app(app, |a, cx| {
        let remote = Participants::remote([Addr::Ip(server), Addr::Port(ECHO_PORT)])
            .with_local([Addr::Port(0)]);
        let session = cx.open(udp, remote, Qos::default())?;
        if let Some(p) = a.as_any_mut().downcast_mut::<EchoProbe>() {
            p.session = session;
        }
        let now = cx.now();
        cx.set_timer(now, PROBE);
        Ok::<_, strata::UpiError>(())
    })??;
    let before = (
        net.wire_stats(wire, Direction::AToB).lost(),
        net.wire_stats(wire, Direction::BToA).lost(),
    );
    net.run_for(Duration::from_millis(total + 100));
    let probe = net
        .engine(h1)
        .app::<EchoProbe>(app)
        .context("the probe is installed")?;
    let back = probe.back.iter().filter(|b| **b).count() as u64;
    let sent = probe.sent;
    let lost_out = net.wire_stats(wire, Direction::AToB).lost() - before.0;
    let lost_back = net.wire_stats(wire, Direction::BToA).lost() - before.1;
    println!("  sent {sent} datagrams of 512 bytes, {back} came back");
    println!("  the link lost {lost_out} on the way out and {lost_back} on the way back");
    println!(
        "  accounted for: {sent} sent = {back} back + {lost_out} lost out + {lost_back} lost back: {}",
        if sent == back + lost_out + lost_back {
            "yes"
        } else {
            "NO"
        }
    );
    anyhow::ensure!(
        sent == back + lost_out + lost_back,
        "the echo accounting does not add up"
    );
    Ok(())
}

fn rtt_table(arch: Arch, count: usize) -> Result<()> {
    let rows: Vec<_> = PAPER
        .iter()
        .filter(|r| r.arch == arch && !r.stack.starts_with("tcp"))
        .collect();
    let table = rows.first().map_or(1, |r| r.table);
    section(&format!(
        "Seed 000 Table {table} ({arch}): ping-pong round trips, in-memory link (µs) beside the paper's (ms)"
    ));
    println!("  checksums off, as in the paper; times are this machine's CPU cost for both hosts");
    print!("  {:<14}", "stack");
    for s in SIZES {
        print!(" {:>13}", format!("{s} B"));
    }
    println!();
    for row in rows {
        let setup = RttSetup {
            stack: row.stack.into(),
            arch,
            checksum: false,
        };
        let measured = rtt::rtt_mem(&setup, &SIZES, count / 10, count)?;
        print!("  {:<14}", row.stack);
        for (m, ms) in measured.iter().zip(row.ms) {
            print!(" {:>6.2}µs/{ms:.2}ms", m.rtt_us_mean);
        }
        println!();
    }
    println!(
        "  (strata bench paper000 runs all three tables and every stack under every architecture)"
    );
    Ok(())
}

fn counters(net: &mut SimNet, h1: HostId, h2: HostId) {
    section("Counters of every protocol (drops name their reason)");
    for h in [h1, h2] {
        let name = net.host_name(h).to_string();
        let engine: &mut Engine = net.engine(h);
        for (proto, c) in engine.all_counters() {
            println!("  {name} {proto:<6} {c}");
        }
        let events: Vec<String> = engine
            .engine_counters()
            .events()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!(
            "  {name} engine {} (demux calls {})",
            events.join(", "),
            engine.demux_calls()
        );
    }
}
