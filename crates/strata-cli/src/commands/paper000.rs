//! `strata bench paper000`: seed 000's Tables 1–3, Figure 4 and the ILP
//! measurement, printed beside the paper's figures, with PNG plots.

use std::path::PathBuf;

use anyhow::Result;
use strata::Arch;
use strata_bench::paper000::figure4::{self, Fig4Point, Fig4Setup};
use strata_bench::paper000::ilp;
use strata_bench::paper000::tables::{self, PAPER, SIZES};
use strata_bench::plot::{self, Chart, Series};
use strata_bench::rtt::RttRow;

/// Seed 000's experiments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which part: tables, figure4, ilp, or all.
    #[arg(default_value = "all")]
    part: Part,
    /// Round trips per size for the tables (the paper: 10,000).
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// Foreground round trips per point of Figure 4.
    #[arg(long, default_value_t = 2_000)]
    samples: usize,
    /// Background ping-pongs of Figure 4, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,8,16,32")]
    background: Vec<usize>,
    /// Rate of Figure 4's wire (the paper: 10 Mb/s Ethernet).
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// Pause between Figure 4's foreground round trips.
    #[arg(long, default_value = "200us")]
    gap: String,
    /// The link for the tables: `mem` (in-memory) or `packet` (a veth pair
    /// between two namespaces, AF_PACKET, busy-poll; needs root).
    #[arg(long, default_value = "mem")]
    link: TableLink,
    /// Where to write the PNG plots.
    #[arg(long, default_value = "docs/img")]
    img: PathBuf,
    /// Print JSON lines instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TableLink {
    Mem,
    Packet,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Tables,
    Figure4,
    Ilp,
    All,
}

/// Runs `strata bench paper000`.
pub fn run(args: Args) -> Result<()> {
    let all = args.part == Part::All;
    if all || args.part == Part::Tables {
        run_tables(&args)?;
    }
    if all || args.part == Part::Figure4 {
        run_figure4(&args)?;
    }
    if all || args.part == Part::Ilp {
        run_ilp(&args)?;
    }
    Ok(())
}

/// The tables' rows over a veth pair: every stack the ping-pong drives under
/// every architecture.
fn measure_packet(count: usize, warmup: usize) -> Result<(Vec<RttRow>, Vec<String>)> {
    let pair = super::rtt_veth::Pair::up()?;
    let (mut rows, mut missing) = (Vec::new(), Vec::new());
    for &stack in tables::STACKS {
        for arch in Arch::ALL {
            match super::rtt_veth::pingpong_rows(&pair, stack, arch, &SIZES, warmup, count) {
                Ok(r) => rows.extend(r),
                Err(e) => {
                    missing.push(format!("{stack} under {arch}: {e:#}"));
                    break;
                }
            }
        }
    }
    Ok((rows, missing))
}

fn run_tables(args: &Args) -> Result<()> {
    let (rows, missing) = match args.link {
        TableLink::Mem => tables::measure(args.count, args.count / 10)?,
        TableLink::Packet => measure_packet(args.count, args.count / 10)?,
    };
    if args.json {
        for r in &rows {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    let link = match args.link {
        TableLink::Mem => "in-memory link, UDP checksums off (as seed 000 measured)",
        TableLink::Packet => "veth pair, AF_PACKET, busy-poll, checksums on",
    };
    println!("Seed 000 Tables 1–3: ping-pong round trip, {link}");
    println!("Strata mean µs (this machine) / the paper's ms (1994, 10 Mb/s Ethernet)\n");
    for table in 1..=3u8 {
        let arch = PAPER.iter().find(|r| r.table == table).map(|r| r.arch);
        println!(
            "Table {table} ({}):",
            arch.map(|a| a.to_string()).unwrap_or_default()
        );
        print!("  {:<14}", "stack");
        for s in SIZES {
            print!(" {:>16}", format!("{s} B"));
        }
        println!();
        for row in PAPER.iter().filter(|r| r.table == table) {
            print!("  {:<14}", row.stack);
            match tables::means(&rows, row.stack, row.arch) {
                Some(us) => {
                    for (u, ms) in us.iter().zip(row.ms) {
                        print!(" {:>7.3}µs/{ms:.2}ms", u);
                    }
                }
                None => print!("  (not measured)"),
            }
            println!();
        }
        println!();
    }
    println!("Every stack under every architecture (mean µs; DAA forms use ETHDAA):");
    print!("  {:<28} {:<5}", "stack", "arch");
    for s in SIZES {
        print!(" {:>8}", format!("{s} B"));
    }
    println!();
    for &stack in tables::STACKS {
        for arch in Arch::ALL {
            if let Some(us) = tables::means(&rows, stack, arch) {
                print!("  {stack:<28} {:<5}", arch.to_string());
                for u in us {
                    print!(" {u:>8.3}");
                }
                println!();
            }
        }
    }
    for m in missing {
        println!("  not measured: {m}");
    }
    Ok(())
}

fn run_figure4(args: &Args) -> Result<()> {
    let rate = strata::core::units::parse_rate(&args.rate)?;
    let gap = strata::core::units::parse_duration(&args.gap)?;
    let mut points: Vec<Fig4Point> = Vec::new();
    if !args.json {
        println!(
            "Seed 000 Figure 4: 1-byte foreground UDP round trip while N background ping-pongs"
        );
        println!(
            "load both hosts (udp/ip/ethdaa, real time, two threads, {} wire)\n",
            args.rate
        );
        println!(
            "  {:<5} {:>6} {:>4}  {:>10} {:>10} {:>10}  {:>12}",
            "arch", "bg B", "N", "mean µs", "p50 µs", "p99 µs", "bg rt/s"
        );
    }
    for bg_size in [1, 1000] {
        for arch in [Arch::Llm, Arch::Daa] {
            for &n in &args.background {
                let p = figure4::measure(&Fig4Setup {
                    arch,
                    background: n,
                    bg_size,
                    rate,
                    samples: args.samples,
                    gap,
                })?;
                if args.json {
                    println!("{}", serde_json::to_string(&p)?);
                } else {
                    let f = &p.foreground;
                    println!(
                        "  {:<5} {:>6} {:>4}  {:>10.1} {:>10.1} {:>10.1}  {:>12.0}",
                        p.arch, bg_size, n, f.mean_us, f.p50_us, f.p99_us, p.background_per_s
                    );
                }
                points.push(p);
            }
        }
    }
    let series = |arch: &str, size: usize| Series {
        name: format!("{} foreground, {size}-byte background", arch.to_uppercase()),
        points: points
            .iter()
            .filter(|p| p.arch == arch && p.bg_size == size)
            .map(|p| (p.background as f64, p.foreground.mean_us))
            .collect(),
    };
    let path = args.img.join("paper000-figure4.png");
    plot::draw(
        &path,
        &Chart {
            title: "Seed 000 Figure 4: foreground 1-byte UDP round trip under background load",
            x_label: "background ping-pongs",
            y_label: "foreground round trip (µs, mean)",
            log_x: false,
            series: vec![
                series("llm", 1),
                series("daa", 1),
                series("llm", 1000),
                series("daa", 1000),
            ],
        },
    )?;
    if !args.json {
        println!("\n  plot: {}", path.display());
    }
    Ok(())
}

fn run_ilp(args: &Args) -> Result<()> {
    let sizes = [
        64,
        256,
        1024,
        4096,
        16_384,
        65_536,
        262_144,
        1 << 20,
        4 << 20,
    ];
    let mut points = Vec::new();
    for cipher in [true, false] {
        if !args.json {
            let stack = if cipher {
                "checksum + ChaCha20 + XDR byte order + copy"
            } else {
                "checksum + XDR byte order + copy (no cipher: memory-bound)"
            };
            println!("\nILP (seed 000 §2.2): {stack}, ns per byte");
            println!(
                "  {:>7} {:<5}  {:>10} {:>10}  {:>8}",
                "size", "cache", "separate", "fused", "speedup"
            );
        }
        for cold in [false, true] {
            for size in sizes {
                let p = ilp::measure(size, cold, cipher, 8 << 20, 5)?;
                if args.json {
                    println!("{}", serde_json::to_string(&p)?);
                } else {
                    println!(
                        "  {:>7} {:<5}  {:>10.3} {:>10.3}  {:>7.2}x",
                        size,
                        if cold { "cold" } else { "warm" },
                        p.separate_ns_per_byte,
                        p.fused_ns_per_byte,
                        p.speedup()
                    );
                }
                points.push(p);
            }
        }
    }
    for cipher in [true, false] {
        let series = |cold: bool, fused: bool| Series {
            name: format!(
                "{}, {} cache",
                if fused {
                    "fused (ILLM, DAA)"
                } else {
                    "separate passes (LLM)"
                },
                if cold { "cold" } else { "warm" }
            ),
            points: points
                .iter()
                .filter(|p| p.cold == cold && p.cipher == cipher)
                .map(|p| {
                    let v = if fused {
                        p.fused_ns_per_byte
                    } else {
                        p.separate_ns_per_byte
                    };
                    (p.size as f64, v)
                })
                .collect(),
        };
        let (name, title) = if cipher {
            (
                "paper000-ilp.png",
                "ILP: checksum + ChaCha20 + byte order + copy, separate vs fused",
            )
        } else {
            (
                "paper000-ilp-nocipher.png",
                "ILP: checksum + byte order + copy, separate vs fused",
            )
        };
        let path = args.img.join(name);
        plot::draw(
            &path,
            &Chart {
                title,
                x_label: "payload bytes (log)",
                y_label: "ns per byte",
                log_x: true,
                series: vec![
                    series(false, false),
                    series(false, true),
                    series(true, false),
                    series(true, true),
                ],
            },
        )?;
        if !args.json {
            println!("\n  plot: {}", path.display());
        }
    }
    Ok(())
}
