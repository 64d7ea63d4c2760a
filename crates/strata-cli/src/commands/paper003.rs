//! `strata bench paper003`: seed 003's Table 4, the round trip's breakdown
//! (Figure 4), latency against offered load (Figure 5) and header bytes, for
//! the paper's 4-layer stack with the PA off and on, in one run.

use std::path::PathBuf;

use anyhow::Result;
use strata_bench::paper003::{self, Duo, Figures, paper};
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
    /// Where to write the Figure 5 plot.
    #[arg(long, default_value = "docs/img")]
    img: PathBuf,
    /// Print one JSON object per mode instead of the table.
    #[arg(long)]
    json: bool,
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
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "pa_off": off, "pa_on": on, "figure5_off": fig5[0], "figure5_on": fig5[1] })
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
    if !args.json {
        println!("  plot: {}\n", path.display());
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
