//! `strata bench paper003`: seed 003's Table 4, the round trip's breakdown
//! (Figure 4), latency against offered load (Figure 5) and header bytes, for
//! the paper's 4-layer stack with the PA off and on, in one run.

use std::path::PathBuf;

use anyhow::Result;
use strata_bench::paper003::{self, Duo, Figures, RealLink, paper};

use super::topology::{Topology, Veths};
use strata_bench::plot::{self, Chart, Series};

/// Seed 003's experiments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Round trips (and one-way messages) per mode and round.
    #[arg(long, default_value_t = 2_000)]
    count: usize,
    /// 8-byte messages streamed per mode and round (a tenth as many 1 KB).
    #[arg(long, default_value_t = 200_000)]
    stream: u64,
    /// Rounds; each measures PA off, then PA on.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Offered round trips per second for Figure 5.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "50000,100000,200000,300000,400000,500000,600000,800000"
    )]
    rates: Vec<f64>,
    /// Where to write the Figure 4 and Figure 5 plots.
    #[arg(long, default_value = "docs/img")]
    img: PathBuf,
    /// Print one JSON object per mode instead of the table.
    #[arg(long)]
    json: bool,
    /// Round trips per mode over each real link (kernel UDP on loopback,
    /// a veth pair with AF_PACKET); 0 skips the real links.
    #[arg(long, default_value_t = 2_000)]
    real_count: usize,
    /// 8-byte messages streamed per mode over each real link.
    #[arg(long, default_value_t = 200_000)]
    real_stream: u64,
}

/// The veth pair's subnet, 198.18.X.0/24 (the stack itself uses no
/// addresses: AF_PACKET with its own EtherType).
const VETH_NET: u8 = 249;

/// The real links, PA off and on side by side: each link's name and its
/// figures (or why it could not run).
fn real_links(args: &Args) -> Vec<(&'static str, Result<[RealLink; 2]>)> {
    let both = |links: [&str; 2]| -> Result<[RealLink; 2]> {
        Ok([
            paper003::real_link(false, links, args.real_count, args.real_stream)?,
            paper003::real_link(true, links, args.real_count, args.real_stream)?,
        ])
    };
    let udp = (|| {
        let port = || -> Result<String> {
            Ok(std::net::UdpSocket::bind("127.0.0.1:0")?
                .local_addr()?
                .to_string())
        };
        let (a, b) = (port()?, port()?);
        let link = |l: &str, p: &str| format!("kind = \"udp\"\nlocal = \"{l}\"\npeer = \"{p}\"");
        both([&link(&a, &b), &link(&b, &a)])
    })();
    let veth = (|| {
        // Torn down when dropped, on error too.
        let t = Topology::up(Veths {
            prefix: "pa3",
            net: VETH_NET,
            wan: false,
            offloads: true,
            congctl: None,
            extra_hosts: &[],
        })?;
        let link = |side: &str| {
            format!(
                "kind = \"packet\"\ninterface = \"{}\"\nnetns = \"{}\"",
                t.dev(&format!("v{side}")),
                t.ns(side)
            )
        };
        both([&link("a"), &link("b")])
    })();
    vec![("kernel UDP, loopback", udp), ("veth, AF_PACKET", veth)]
}

fn print_real(args: &Args, real: &[(&'static str, Result<[RealLink; 2]>)]) {
    println!(
        "Real links: {} round trips and {} streamed 8 B messages per mode; one thread turns both hosts' runtimes (busy polling)",
        args.real_count, args.real_stream
    );
    // The gain: how many times lower the round trip, higher the rate.
    println!(
        "  {:<44} {:>12} {:>12} {:>8}",
        "", "PA off", "PA on", "gain"
    );
    for (name, r) in real {
        match r {
            Ok([off, on]) => {
                println!(
                    "  {:<44} {:>9.2} µs {:>9.2} µs {:>8.2}",
                    format!("{name}: round trip (median)"),
                    off.rtt_us,
                    on.rtt_us,
                    off.rtt_us / on.rtt_us
                );
                println!(
                    "  {:<44} {:>12.0} {:>12.0} {:>8.2}",
                    format!("{name}: 8 B messages/s"),
                    off.msgs_per_s,
                    on.msgs_per_s,
                    on.msgs_per_s / off.msgs_per_s
                );
                if off.round_trips < args.real_count || on.round_trips < args.real_count {
                    println!(
                        "  ({name}: only {} and {} round trips in the time allowed)",
                        off.round_trips, on.round_trips
                    );
                }
                if off.streamed < args.real_stream || on.streamed < args.real_stream {
                    println!(
                        "  ({name}: only {} and {} messages streamed in the time allowed)",
                        off.streamed, on.streamed
                    );
                }
            }
            Err(e) => println!("  {name}: not run: {e:#}"),
        }
    }
    println!();
}

fn mean(all: &[Figures]) -> Figures {
    let n = all.len().max(1) as f64;
    let avg = |f: fn(&Figures) -> f64| all.iter().map(f).sum::<f64>() / n;
    Figures {
        one_way_us: avg(|f| f.one_way_us),
        one_way_mean_us: avg(|f| f.one_way_mean_us),
        rtt_us: avg(|f| f.rtt_us),
        rtt_mean_us: avg(|f| f.rtt_mean_us),
        to_link_us: avg(|f| f.to_link_us),
        turnaround_us: avg(|f| f.turnaround_us),
        post_send_us: avg(|f| f.post_send_us),
        post_deliver_us: avg(|f| f.post_deliver_us),
        cpu_per_msg_us: avg(|f| f.cpu_per_msg_us),
        rt_per_s: avg(|f| f.rt_per_s),
        msgs_per_s: avg(|f| f.msgs_per_s),
        mb_per_s: avg(|f| f.mb_per_s),
        header_bytes: all.first().map_or(0, |f| f.header_bytes),
    }
}

/// Runs `strata bench paper003`.
pub fn run(args: Args) -> Result<()> {
    let mut duos = [Duo::new(false)?, Duo::new(true)?];
    let mut figs: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..args.rounds.max(1) {
        for (i, d) in duos.iter_mut().enumerate() {
            figs[i].push(paper003::measure(d, args.count, args.stream));
        }
    }
    let [off, on] = [mean(&figs[0]), mean(&figs[1])];
    let (fig5, left_out): (Vec<Vec<(f64, f64)>>, Vec<usize>) = duos
        .iter_mut()
        .map(|d| paper003::figure5(d, &args.rates, args.count))
        .unzip();
    let real = if args.real_count > 0 {
        real_links(&args)
    } else {
        Vec::new()
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "pa_off": off,
                "pa_on": on,
                "figure5_off": fig5[0],
                "figure5_on": fig5[1],
                "real_links": real
                    .iter()
                    .map(|(name, r)| serde_json::json!({
                        "link": name,
                        "pa_off": r.as_ref().ok().map(|r| r[0]),
                        "pa_on": r.as_ref().ok().map(|r| r[1]),
                        "error": r.as_ref().err().map(|e| format!("{e:#}")),
                    }))
                    .collect::<Vec<_>>(),
            })
        );
    } else {
        print_table(&args, &off, &on, &fig5);
        println!(
            "  (round trips preempted, left out: PA off {}, PA on {})",
            left_out[0], left_out[1]
        );
    }
    let path = args.img.join("paper003-figure5.png");
    let series = |name: &str, pts: &[(f64, f64)]| Series {
        name: name.into(),
        points: pts.iter().map(|&(r, l)| (r / 1000.0, l)).collect(),
    };
    plot::draw(
        &path,
        &Chart {
            title: "Seed 003 Figure 5: round trip against offered load, 4-layer stack",
            x_label: "offered round trips per second (thousands)",
            y_label: "round trip (µs, median, two-host timeline)",
            log_x: false,
            series: vec![series("PA off", &fig5[0]), series("PA on", &fig5[1])],
        },
    )?;
    let fig4 = args.img.join("paper003-figure4.png");
    // In nanoseconds: the bars' axis has whole numbers.
    let parts = |f: &Figures| {
        [
            f.to_link_us,
            f.turnaround_us,
            f.post_send_us,
            f.post_deliver_us,
        ]
        .map(|us| us * 1e3)
        .to_vec()
    };
    plot::draw_bars(
        &fig4,
        &plot::Bars {
            title: "Seed 003 Figure 4: the round trip's breakdown, 4-layer stack (medians)",
            value_label: "ns (post-processing runs while the host waits or idles)",
            categories: vec![
                "send to the link".into(),
                "peer: delivery and reply".into(),
                "post-send (sender, while waiting)".into(),
                "post-processing after the trip".into(),
            ],
            series: vec![("PA off".into(), parts(&off)), ("PA on".into(), parts(&on))],
        },
    )?;
    if !args.json {
        println!("  plots: {}, {}\n", path.display(), fig4.display());
        if !real.is_empty() {
            print_real(&args, &real);
        }
    }
    println!("ratio rtt pa-off/pa-on = {:.2}", off.rtt_us / on.rtt_us);
    println!(
        "ratio cpu-per-msg pa-off/pa-on = {:.2}",
        off.cpu_per_msg_us / on.cpu_per_msg_us
    );
    println!("packed msgs/s = {:.0}", on.msgs_per_s);
    println!("header bytes pa-on = {}", on.header_bytes);
    Ok(())
}

fn print_table(args: &Args, off: &Figures, on: &Figures, fig5: &[Vec<(f64, f64)>]) {
    println!(
        "Seed 003 Table 4: the paper's 4-layer stack (frag, window of 16, check, ident), \
         two hosts on an in-memory link, one thread"
    );
    println!(
        "{} round trips and one-way messages, {} streamed 8 B messages, {} rounds alternating PA off and on\n",
        args.count, args.stream, args.rounds
    );
    println!(
        "  {:<34} {:>14} {:>14}   paper (1996, PA)",
        "", "PA off", "PA on"
    );
    let row = |what: &str, a: String, b: String, p: String| {
        println!("  {what:<34} {a:>14} {b:>14}   {p}");
    };
    row(
        "one-way latency, 8 B (median)",
        format!("{:.2} µs", off.one_way_us),
        format!("{:.2} µs", on.one_way_us),
        format!("{} µs", paper::ONE_WAY_US),
    );
    row(
        "round-trip latency, 8 B (median)",
        format!("{:.2} µs", off.rtt_us),
        format!("{:.2} µs", on.rtt_us),
        format!(
            "{} µs ({} µs without the PA)",
            paper::RTT_US,
            paper::RTT_NO_PA_US
        ),
    );
    row(
        "messages/s streamed, 8 B",
        format!("{:.0}", off.msgs_per_s),
        format!("{:.0}", on.msgs_per_s),
        format!("{}", paper::MSGS_PER_S),
    );
    row(
        "round trips/s (one core, both ends)",
        format!("{:.0}", off.rt_per_s),
        format!("{:.0}", on.rt_per_s),
        format!("{}", paper::RT_PER_S),
    );
    row(
        "bandwidth, 1 KB messages",
        format!("{:.0} MB/s", off.mb_per_s),
        format!("{:.0} MB/s", on.mb_per_s),
        format!("{} MB/s", paper::MB_PER_S),
    );
    row(
        "CPU per message (both ends)",
        format!("{:.2} µs", off.cpu_per_msg_us),
        format!("{:.2} µs", on.cpu_per_msg_us),
        String::new(),
    );
    row(
        "header bytes per 8 B message",
        format!("{}", off.header_bytes),
        format!("{}", on.header_bytes),
        "preamble 8; Horus: ≥12 padding + ~76 identification".into(),
    );
    println!(
        "\nFigure 4: the round trip's breakdown (µs, medians; post-processing runs while idle)"
    );
    println!("  {:<34} {:>14} {:>14}   paper", "", "PA off", "PA on");
    row(
        "send to the link",
        format!("{:.2}", off.to_link_us),
        format!("{:.2}", on.to_link_us),
        format!("{}", paper::TO_LINK_US),
    );
    row(
        "peer: delivery and reply",
        format!("{:.2}", off.turnaround_us),
        format!("{:.2}", on.turnaround_us),
        format!("{}", 2.0 * paper::TO_LINK_US),
    );
    row(
        "post-send (sender, while waiting)",
        format!("{:.2}", off.post_send_us),
        format!("{:.2}", on.post_send_us),
        format!("{}", paper::POST_SEND_US),
    );
    row(
        "post-processing after the trip",
        format!("{:.2}", off.post_deliver_us),
        format!("{:.2}", on.post_deliver_us),
        format!("{} (post-deliver)", paper::POST_DELIVER_US),
    );
    println!("\nFigure 5: round trip (µs, median) against offered round trips per second");
    println!("  {:>10} {:>12} {:>12}", "offered/s", "PA off", "PA on");
    for (a, b) in fig5[0].iter().zip(&fig5[1]) {
        println!("  {:>10.0} {:>12.2} {:>12.2}", a.0, a.1, b.1);
    }
}
