//! `strata perf`: an iperf-like TCP throughput test between Strata hosts (or
//! a Strata client and `strata perf --server` anywhere).
//!
//! The client sends as fast as TCP takes data for `--time`, printing each
//! interval's throughput — bytes the peer acknowledged, so what crossed the
//! network, not what sits in the send buffer — with TCP's smoothed round
//! trip, congestion window and retransmissions from `tcp::Info`. Then it
//! closes its direction; the server answers with the byte count it received
//! (8 bytes, big-endian) and closes, and both print a summary.

use std::io::{ErrorKind, Read};
use std::net::{Shutdown, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as WallInstant};

use anyhow::{Context, Result, bail};
use strata::core::units;
use strata::link::RuntimeThread;
use strata::proto::tcp::ConnInfo;
use strata::{TcpListener, TcpStream};

use super::host::{HostArgs, report};
use super::tcp_send::{
    PEER_CLOSE, POLL, duration, interrupt_flag, wait_acked, wait_peer_close, write_all,
};

/// Measure TCP throughput between Strata hosts, like iperf.
///
/// `--server PORT` serves one client at a time ("ready" is printed once it
/// listens); `--client ADDR:PORT` sends for `--time` and prints a line per
/// interval and a summary.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve on this port.
    #[arg(
        long,
        value_name = "PORT",
        conflicts_with = "client",
        required_unless_present = "client"
    )]
    server: Option<u16>,
    /// Send to this server.
    #[arg(long, value_name = "ADDR:PORT")]
    client: Option<SocketAddrV4>,
    /// How long the client sends ("10s"; a plain number is seconds).
    #[arg(long, default_value = "10", value_parser = seconds)]
    time: Duration,
    /// Time between reports.
    #[arg(long, default_value = "1", value_parser = seconds)]
    interval: Duration,
    /// Bytes per write ("128KB").
    #[arg(long, default_value = "128KB", value_parser = size)]
    len: usize,
    /// Turn Nagle's algorithm off.
    #[arg(long)]
    nodelay: bool,
    /// Server: exit after one client.
    #[arg(long)]
    once: bool,
    #[command(flatten)]
    host: HostArgs,
    /// Print the host's counters (every protocol and link) at the end.
    #[arg(long)]
    stats: bool,
}

fn seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Duration::from_secs_f64(v)),
        Ok(_) => Err(format!("'{s}': want a positive number of seconds")),
        Err(_) => duration(s),
    }
}

fn size(s: &str) -> Result<usize, String> {
    let n = units::parse_size(s).map_err(|e| e.to_string())?;
    usize::try_from(n)
        .ok()
        .filter(|n| (1..=16 << 20).contains(n))
        .ok_or_else(|| format!("'{s}': want 1 B to 16 MB"))
}

fn mbit(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
}

/// One interval's line: throughput, then what TCP says.
fn interval_line(from: Duration, to: Duration, bytes: u64, i: &ConnInfo, retrans: u64) -> String {
    let srtt = i
        .srtt
        .map_or("-".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3));
    format!(
        "[{:6.2}-{:6.2} s] {:>10} B {:>9.1} Mbit/s  srtt {srtt:>9}  cwnd {:>8} B  retrans {retrans}",
        from.as_secs_f64(),
        to.as_secs_f64(),
        bytes,
        mbit(bytes, to - from),
        i.cwnd,
    )
}

/// Runs `strata perf`.
pub fn run(args: Args) -> Result<()> {
    let stop = interrupt_flag()?;
    let engine = args.host.engine()?;
    let thread = args.host.start(engine)?;
    let started = WallInstant::now();
    match (args.server, args.client) {
        (Some(port), _) => serve(&args, &thread, port, &stop)?,
        (None, Some(to)) => send(&args, &thread, to, &stop)?,
        (None, None) => bail!("give --server PORT or --client ADDR:PORT"),
    }
    if args.stats {
        print!("{}", report(&thread, &[], started)?);
    }
    thread.stop()?;
    Ok(())
}

fn send(args: &Args, thread: &RuntimeThread, to: SocketAddrV4, stop: &AtomicBool) -> Result<()> {
    let stream = TcpStream::connect_timeout(thread.handle(), to, Duration::from_secs(10))
        .with_context(|| format!("connecting to {to}"))?;
    stream.set_nodelay(args.nodelay)?;
    stream.set_write_timeout(Some(POLL.min(args.interval)))?;
    println!(
        "connected {} -> {}",
        stream.local_addr(),
        stream.peer_addr()
    );
    let data = vec![0u8; args.len];
    let started = WallInstant::now();
    let first = stream.info()?;
    let (mut last_at, mut last) = (Duration::ZERO, first.clone());
    loop {
        let sending = started.elapsed() < args.time && !stop.load(Ordering::Relaxed);
        if sending {
            write_all(&stream, &data, stop)?;
        }
        let now = started.elapsed();
        // A report per interval, and one for the part of the last.
        if now - last_at >= args.interval || (!sending && now > last_at) {
            let i = stream.info()?;
            let acked = i.stats.bytes_acked - last.stats.bytes_acked;
            let retrans = i.stats.retransmits - last.stats.retransmits;
            println!("{}", interval_line(last_at, now, acked, &i, retrans));
            (last_at, last) = (now, i);
        }
        if !sending {
            break;
        }
    }
    stream.shutdown(Shutdown::Write)?;
    let sent_for = started.elapsed();
    // The server's count comes after everything arrived.
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut count = [0u8; 8];
    (&stream)
        .read_exact(&mut count)
        .context("reading the server's count")?;
    let received = u64::from_be_bytes(count);
    let done_at = started.elapsed();
    wait_acked(&stream, Duration::from_secs(10), stop)?;
    wait_peer_close(&stream, PEER_CLOSE);
    let i = stream.info()?;
    let s = i.stats;
    let sent = s.bytes_acked - first.stats.bytes_acked;
    println!(
        "sender: bytes={sent} seconds={:.3} rate={:.1} Mbit/s retransmits={} timeouts={} \
         fast_recoveries={} congestion={} srtt_ms={:.2}",
        sent_for.as_secs_f64(),
        mbit(sent, done_at),
        s.retransmits,
        s.timeouts,
        s.fast_recoveries,
        i.congestion,
        i.srtt.unwrap_or_default().as_secs_f64() * 1e3,
    );
    println!(
        "receiver: bytes={received} seconds={:.3} rate={:.1} Mbit/s",
        done_at.as_secs_f64(),
        mbit(received, done_at)
    );
    Ok(())
}

fn serve(args: &Args, thread: &RuntimeThread, port: u16, stop: &AtomicBool) -> Result<()> {
    let listener = TcpListener::bind(thread.handle(), port)
        .with_context(|| format!("listening on port {port}"))?;
    println!("ready");
    loop {
        let stream = match listener.accept_timeout(POLL) {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                continue;
            }
            Err(e) => return Err(e).context("accepting"),
        };
        serve_one(args, &stream, stop)?;
        if args.once || stop.load(Ordering::Relaxed) {
            return Ok(());
        }
    }
}

fn serve_one(args: &Args, stream: &TcpStream, stop: &AtomicBool) -> Result<()> {
    println!("accepted {} -> {}", stream.peer_addr(), stream.local_addr());
    stream.set_read_timeout(Some(POLL.min(args.interval)))?;
    let started = WallInstant::now();
    let mut buf = vec![0u8; 256 * 1024];
    let (mut total, mut in_interval, mut last_at) = (0u64, 0u64, Duration::ZERO);
    loop {
        let end = match (&*stream).read(&mut buf) {
            Ok(0) => true,
            Ok(n) => {
                total += n as u64;
                in_interval += n as u64;
                false
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => return Err(e).context("receiving"),
        };
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted after {total} bytes");
        }
        let now = started.elapsed();
        if now - last_at >= args.interval || (end && in_interval > 0) {
            println!(
                "[{:6.2}-{:6.2} s] {in_interval:>10} B {:>9.1} Mbit/s",
                last_at.as_secs_f64(),
                now.as_secs_f64(),
                mbit(in_interval, now - last_at)
            );
            (last_at, in_interval) = (now, 0);
        }
        if end {
            break;
        }
    }
    let elapsed = started.elapsed();
    write_all(stream, &total.to_be_bytes(), stop)?;
    stream.shutdown(Shutdown::Write)?;
    // The count went out; a client already gone cannot acknowledge our FIN.
    if let Err(e) = wait_acked(stream, Duration::from_secs(10), stop) {
        eprintln!("strata: closing: {e:#}");
    }
    println!(
        "received bytes={total} seconds={:.3} rate={:.1} Mbit/s",
        elapsed.as_secs_f64(),
        mbit(total, elapsed)
    );
    Ok(())
}
