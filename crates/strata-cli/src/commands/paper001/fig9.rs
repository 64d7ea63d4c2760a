//! Figure 9 (§5.2): file-transfer goodput vs RTT. One `strata ftpd` in the
//! receiver's namespace serves a file; from the other side of the same
//! `strata wanem` link it is fetched by `strata ftp` over the transport
//! (the paper's tplftp), by curl and lftp over kernel TCP (the paper's OS
//! ftp, here with the kernel's default, window-scaled TCP), and sent by
//! SRT's `srt-file-transmit` in file mode. Every client is timed by the
//! wall clock around its whole run — log-in and set-up included, as a
//! user sees it; the file goes to a temporary folder. `strata ftp` runs
//! with `--no-verify` (curl and lftp hash nothing; its SHA-256 and the
//! server's HASH would read the file twice more inside its time), and its
//! own timing of the transfer command is printed beside the wall clock.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use strata_bench::peers::proc::NsProc;
use strata_bench::peers::srt;
use strata_bench::peers::transfer::Transfer;
use strata_bench::plot::{self, Chart, Series};

use super::link::{Link, Net, Sizing, cell, load};
use super::{Common, Rtts, paper};

/// `strata bench paper001 fig9`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// The link's rate, Mbit/s.
    #[arg(long, default_value_t = 100.0)]
    mbit: f64,
    #[command(flatten)]
    rtts: Rtts,
}

impl Args {
    /// The defaults, with `common`.
    pub fn with(common: Common) -> Args {
        Args {
            common,
            mbit: 100.0,
            rtts: Rtts::default(),
        }
    }
}

const CLIENTS: [&str; 4] = [
    "strata ftp (xport)",
    "curl (TCP)",
    "lftp (TCP)",
    "SRT file mode",
];

/// The FTP server's control port.
const FTP_PORT: u16 = 2121;

/// A scratch folder, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `strata bench paper001 fig9`.
pub fn run(a: &Args) -> Result<()> {
    let rtts = a.rtts.get(a.common.quick);
    let sizing = Sizing {
        secs: a.common.secs(),
    };
    let scratch = Scratch(std::env::temp_dir().join(format!("strata-fig9-{}", std::process::id())));
    let (srv, cli) = (scratch.0.join("srv"), scratch.0.join("cli"));
    std::fs::create_dir_all(&srv)?;
    std::fs::create_dir_all(&cli)?;
    let bytes = sizing.bytes(a.mbit);
    let file = srv.join("fig9.bin");
    let chunk: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
    let mut data = Vec::with_capacity(bytes as usize);
    while (data.len() as u64) < bytes {
        let n = (bytes as usize - data.len()).min(chunk.len());
        data.extend_from_slice(&chunk[..n]);
    }
    std::fs::write(&file, &data).context("writing the file to serve")?;
    drop(data);
    let buffer = ((a.mbit * 1e6 / 8.0 * 0.128) as u64).to_string();
    let mut net = Net::wan()?;
    let load0 = load();
    let exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let listen = format!("{}:{FTP_PORT}", net.t.ip(2));
    let (sender, receiver) = (net.sender(), net.receiver());
    let mut ftpd = NsProc::spawn(
        Some(&receiver),
        &exe,
        &[
            "ftpd",
            srv.to_str().unwrap_or("."),
            "--listen",
            &listen,
            "--xport-buffers",
            "4",
            "--xport-buffer-size",
            &buffer,
        ],
    )?;
    ftpd.wait_for(Duration::from_secs(10), |l| l == "ready")?;
    println!(
        "Figure 9: file transfer goodput (Mbit/s, wall clock of each client's whole run) vs RTT, {} Mbit/s link, a {:.1} MB file; strata: 4 application buffers of {} KB:",
        a.mbit,
        bytes as f64 / 1e6,
        buffer.parse::<u64>().unwrap_or(0) / 1000
    );
    let mut header = format!("{:>6}", "RTT ms");
    for c in CLIENTS {
        header += &format!(" {c:>18}");
    }
    println!("{header}");
    let limit = sizing.limit(a.mbit * 0.1);
    let mut results: Vec<Vec<Option<Transfer>>> = vec![Vec::new(); CLIENTS.len()];
    for &rtt in &rtts {
        net.emulate(&Link {
            mbit: a.mbit,
            rtt_ms: rtt,
            ..Link::default()
        })?;
        let mut row = format!("{rtt:>6}");
        for (i, name) in CLIENTS.iter().enumerate() {
            let out = cli.join(format!("got{i}.bin"));
            let _ = std::fs::remove_file(&out);
            let r = match i {
                0 => client(
                    &sender,
                    &exe,
                    &[
                        "ftp",
                        &listen,
                        "--data",
                        "xport",
                        "--xport-buffers",
                        "4",
                        "--xport-buffer-size",
                        &buffer,
                        // Like curl and lftp: no second read of the file
                        // at either end for its hash.
                        "--no-verify",
                        "get",
                        "fig9.bin",
                        path(&out),
                    ],
                    &out,
                    limit,
                ),
                1 => client(
                    &sender,
                    "curl",
                    &["-sS", "-o", path(&out), &format!("ftp://{listen}/fig9.bin")],
                    &out,
                    limit,
                ),
                2 => client(
                    &sender,
                    "lftp",
                    &[
                        "-e",
                        &format!("set net:max-retries 1; get fig9.bin -o {}; bye", path(&out)),
                        &format!("ftp://{listen}"),
                    ],
                    &out,
                    limit,
                ),
                _ => {
                    let to = net.to();
                    srt::transfer(Some(&sender), Some(&receiver), to, &file, &cli, limit)
                }
            };
            let r = r.and_then(|t| check(t, bytes, &out, i == 3, &cli));
            if let Err(e) = &r {
                eprintln!("fig9: {name} at {rtt} ms: {e:#}");
            }
            row += &format!(" {:>18}", cell(&r));
            results[i].push(r.ok());
        }
        println!("{row}");
    }
    drop(ftpd);
    println!(
        "  paper (36.9 Mbit/s path): the OS's ftp about {} Mbit/s at no delay, falling dramatically with delay (64 KB window); tplftp always above it — its figure's digits are lost",
        paper::FIG9_FTP_AT_0
    );
    println!("  load average before {load0}, after {}", load());
    if a.common.json {
        println!(
            "{}",
            serde_json::json!({"fig9": {"mbit": a.mbit, "rtts": rtts, "clients": CLIENTS, "results": results}})
        );
        return Ok(());
    }
    let series = CLIENTS
        .iter()
        .zip(&results)
        .map(|(name, r)| Series {
            name: (*name).into(),
            points: rtts
                .iter()
                .zip(r)
                .filter_map(|(&x, t)| Some((x, t.as_ref()?.mbit_s())))
                .collect(),
        })
        .collect();
    let path = a.common.plot_dir.join("paper001_fig9.png");
    let title = format!(
        "Seed 001 Figure 9: file transfer vs RTT, {} Mbit/s link",
        a.mbit
    );
    plot::draw(
        &path,
        &Chart {
            title: &title,
            x_label: "round-trip time added (ms)",
            y_label: "goodput (Mbit/s, whole client run)",
            log_x: false,
            series,
        },
    )?;
    println!("  plot: {}", path.display());
    Ok(())
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or("")
}

/// Runs one client to its end, timed by the wall clock.
fn client(ns: &str, program: &str, args: &[&str], out: &Path, limit: Duration) -> Result<Transfer> {
    let t0 = Instant::now();
    let p = NsProc::spawn(Some(ns), program, args)?;
    let (status, said) = p.finish(limit)?;
    let secs = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!("{program} failed: {}", said.join(" | "));
    }
    // strata ftp times its transfer command (XPSV to the final reply): the
    // rest of the wall clock is start-up, log-in and the goodbye.
    if let Some(own) = said.iter().find_map(|l| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix("seconds="))
            .and_then(|v| v.parse::<f64>().ok())
    }) {
        eprintln!("fig9: {program}: transfer {own:.3} s of {secs:.3} s wall clock");
    }
    Ok(Transfer {
        bytes: std::fs::metadata(out).map(|m| m.len()).unwrap_or(0),
        secs,
        ..Transfer::default()
    })
}

/// A transfer counts only when the whole file arrived (SRT writes it under
/// its own name into `dir`).
fn check(t: Transfer, want: u64, out: &Path, srt: bool, dir: &Path) -> Result<Transfer> {
    let got = if srt {
        let f = dir.join("fig9.bin");
        let n = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
        let _ = std::fs::remove_file(f);
        n
    } else {
        let _ = std::fs::remove_file(out);
        t.bytes
    };
    if got != want {
        bail!("{got} of {want} bytes arrived");
    }
    Ok(Transfer { bytes: got, ..t })
}
