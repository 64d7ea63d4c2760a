//! `strata udp-send`: a UDP client on a Strata host — a few datagrams and what
//! comes back (like `nc -u`), or a paced, checked transfer for a
//! `strata host --serve udp-sink:PORT:RUN` to receive.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant as WallInstant};

use anyhow::{Result, anyhow, bail};
use bytes::Bytes;
use signal_hook::consts::{SIGINT, SIGTERM};
use strata::apps::udp_blast::{BlastConfig, Phase, UdpBlast};
use strata::apps::udp_client::{ClientEvent, UdpClient};
use strata::core::units;
use strata::link::RuntimeThread;

use super::host::{HostArgs, report};

/// Send UDP datagrams from a Strata host and print what comes back.
///
/// With --data, each value is one datagram; replies are printed as they come
/// until --wait has passed since the last send (or --expect replies came).
/// With --bytes, a paced transfer of checked datagrams is sent instead and its
/// totals printed ("sent datagrams=N bytes=B digest=D").
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to send, ADDR:PORT.
    dest: SocketAddrV4,
    #[command(flatten)]
    host: HostArgs,
    /// Local port (0 picks one).
    #[arg(long, default_value_t = 0)]
    local_port: u16,
    /// A datagram to send; repeat for several.
    #[arg(long, conflicts_with = "bytes")]
    data: Vec<String>,
    /// How long to wait for replies after the last datagram ("1s", "500ms").
    #[arg(long, default_value = "1s", value_parser = duration)]
    wait: Duration,
    /// Stop as soon as this many replies came.
    #[arg(long)]
    expect: Option<u64>,
    /// Transfer this many bytes of checked datagrams ("10MB").
    #[arg(long, value_parser = size)]
    bytes: Option<u64>,
    /// Payload bytes per transfer datagram.
    #[arg(long, default_value_t = 1400, requires = "bytes")]
    size: usize,
    /// Transfer rate ("100mbit").
    #[arg(long, default_value = "100mbit", value_parser = rate, requires = "bytes")]
    rate: u64,
    /// The transfer's run id, which the sink must be given too.
    #[arg(long, default_value_t = 1, requires = "bytes")]
    run: u32,
    /// Print the host's counters (every protocol and link) at the end.
    #[arg(long)]
    stats: bool,
}

fn duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s).map_err(|e| e.to_string())
}

fn size(s: &str) -> Result<u64, String> {
    units::parse_size(s).map_err(|e| e.to_string())
}

fn rate(s: &str) -> Result<u64, String> {
    units::parse_rate(s).map_err(|e| e.to_string())
}

/// Runs `strata udp-send`.
pub fn run(args: Args) -> Result<()> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))?;
    }
    let started = WallInstant::now();
    let thread = match args.bytes {
        Some(total) => transfer(&args, total, &interrupted)?,
        None => datagrams(&args, &interrupted)?,
    };
    if args.stats {
        print!("{}", report(&thread, &[], started)?);
    }
    thread.stop()?;
    Ok(())
}

fn datagrams(args: &Args, interrupted: &AtomicBool) -> Result<RuntimeThread> {
    let mut engine = args.host.engine()?;
    let (id, events) = UdpClient::install(&mut engine, args.dest, args.local_port)?;
    let thread = args.host.start(engine)?;
    for text in &args.data {
        let data = Bytes::from(text.clone().into_bytes());
        thread
            .handle()
            .call(move |e| UdpClient::send(e, id, data))
            .map_err(|_| anyhow!("the host's engine has stopped"))??;
    }
    let deadline = WallInstant::now() + args.wait;
    let mut replies = 0;
    while !interrupted.load(Ordering::Relaxed) && args.expect.is_none_or(|n| replies < n) {
        let left = deadline.saturating_duration_since(WallInstant::now());
        if left.is_zero() {
            break;
        }
        match events.recv_timeout(left.min(Duration::from_millis(50))) {
            Ok(ClientEvent::Datagram { from, data }) => {
                replies += 1;
                println!(
                    "from {from} len={}: {}",
                    data.len(),
                    String::from_utf8_lossy(&data).escape_debug()
                );
            }
            Ok(ClientEvent::Closed(why)) => {
                println!("closed: {}", why.unwrap_or_else(|| "by the stack".into()));
                break;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    println!("sent {} received {replies}", args.data.len());
    Ok(thread)
}

fn transfer(args: &Args, total: u64, interrupted: &AtomicBool) -> Result<RuntimeThread> {
    let me = args
        .host
        .address()
        .ok_or_else(|| anyhow!("a transfer needs --ip"))?;
    let dest = *args.dest.ip();
    let next_hop = if me.contains(dest) {
        dest
    } else {
        args.host
            .gateway()
            .ok_or_else(|| anyhow!("{dest} is not on {me} and no --gw was given"))?
    };
    let mut engine = args.host.engine()?;
    let config = BlastConfig {
        dest: args.dest,
        next_hop,
        local_port: args.local_port,
        total,
        size: args.size,
        rate: args.rate,
        run: args.run,
    };
    let id = UdpBlast::install(&mut engine, config)?;
    let thread = args.host.start(engine)?;
    let state = |t: &RuntimeThread| {
        t.handle()
            .call(move |e| {
                e.app::<UdpBlast>(id)
                    .map(|b| (b.phase, b.sent, b.sent_bytes, b.digest))
            })
            .map_err(|_| anyhow!("the host's engine has stopped"))?
            .ok_or_else(|| anyhow!("the sender is gone"))
    };
    let (phase, sent, bytes, digest) = loop {
        let s = state(&thread)?;
        if matches!(s.0, Phase::Done | Phase::Failed) || interrupted.load(Ordering::Relaxed) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The last datagrams leave the engine's queues in the next turns.
    std::thread::sleep(args.wait.min(Duration::from_secs(5)));
    println!("sent datagrams={sent} bytes={bytes} digest={digest:#018x}");
    if phase != Phase::Done {
        bail!("the transfer stopped early ({phase:?}) after {sent} datagrams");
    }
    Ok(thread)
}
