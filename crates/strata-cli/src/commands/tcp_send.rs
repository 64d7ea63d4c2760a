//! `strata tcp-send`: a file to a TCP server (`strata tcp-recv`, `nc -l`, a
//! Strata or kernel discard service) through a Strata host, with a progress
//! bar and the SHA-256 of what was sent.
//!
//! It also holds what the TCP commands (`tcp-recv`, `perf`) share: the
//! progress bar, the wait for a closed connection's last acknowledgment, the
//! digest's spelling.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as WallInstant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use signal_hook::consts::{SIGINT, SIGTERM};
use strata::TcpStream;
use strata::core::units;
use strata::proto::tcp::state::State;

use super::host::{HostArgs, report};

/// How often a blocked call looks at the interrupt flag.
pub const POLL: Duration = Duration::from_millis(200);

/// How long a sender whose data was all acknowledged waits for the peer to
/// close too.
pub const PEER_CLOSE: Duration = Duration::from_secs(2);

/// Send a file over TCP from a Strata host.
///
/// Connects, sends the file, closes its direction and waits until the peer
/// acknowledged everything, then prints "sent bytes=N sha256=HEX seconds=S
/// rate=R Mbit/s". A progress bar shows on a terminal.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to send, ADDR:PORT.
    dest: SocketAddrV4,
    /// The file to send.
    file: PathBuf,
    #[command(flatten)]
    host: HostArgs,
    /// How long to try to connect.
    #[arg(long, default_value = "10s", value_parser = duration)]
    connect_timeout: Duration,
    /// How long to wait, after the last byte, for the peer to acknowledge it
    /// all.
    #[arg(long, default_value = "60s", value_parser = duration)]
    linger: Duration,
    /// Print the host's counters (every protocol and link) at the end.
    #[arg(long)]
    stats: bool,
}

/// A duration with a unit ("10s", "500ms").
pub fn duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s).map_err(|e| e.to_string())
}

/// A digest in lowercase hex, as sha256sum prints it.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A flag set by SIGINT or SIGTERM.
pub fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&flag))?;
    }
    Ok(flag)
}

/// A progress bar of `total` bytes (a spinner with the count when unknown);
/// drawn on stderr, and only when that is a terminal.
pub fn progress(total: Option<u64>) -> ProgressBar {
    let (bar, template) = match total {
        Some(t) => (
            ProgressBar::new(t),
            "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} {bytes} {binary_bytes_per_sec} {elapsed}",
        ),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

/// Writes all of `buf`, looking at `stop` while TCP has no room.
pub fn write_all(stream: &TcpStream, mut buf: &[u8], stop: &AtomicBool) -> Result<()> {
    while !buf.is_empty() {
        match (&*stream).write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e).context("sending"),
        }
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
    }
    Ok(())
}

/// After this end shut its direction down: waits until the peer has
/// acknowledged everything, our FIN included (or closed the connection
/// cleanly itself), for at most `limit`.
pub fn wait_acked(stream: &TcpStream, limit: Duration, stop: &AtomicBool) -> Result<()> {
    let end = WallInstant::now() + limit;
    while WallInstant::now() < end && !stop.load(Ordering::Relaxed) {
        match stream.info() {
            Ok(i) if matches!(i.state, State::FinWait2 | State::TimeWait | State::Closed) => {
                return Ok(());
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            // TCP forgot the connection: it ended, cleanly if reading
            // reaches the end of the stream.
            Err(_) => {
                stream.set_read_timeout(Some(POLL))?;
                let mut sink = [0u8; 4096];
                loop {
                    match (&*stream).read(&mut sink) {
                        Ok(0) => return Ok(()),
                        Ok(_) => {}
                        Err(e) => return Err(e).context("closing"),
                    }
                }
            }
        }
    }
    bail!("the peer did not acknowledge everything within {limit:?}")
}

/// After [`wait_acked`]: gives the peer up to `limit` to close its direction
/// too, so that this end acknowledges the peer's FIN before it goes away (a
/// peer whose FIN is never acknowledged retransmits it until it gives up).
pub fn wait_peer_close(stream: &TcpStream, limit: Duration) {
    let end = WallInstant::now() + limit;
    while WallInstant::now() < end {
        match stream.info() {
            Ok(i) if !matches!(i.state, State::TimeWait | State::Closed) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => return,
        }
    }
}

/// Runs `strata tcp-send`.
pub fn run(args: Args) -> Result<()> {
    let stop = interrupt_flag()?;
    let mut file =
        File::open(&args.file).with_context(|| format!("opening {}", args.file.display()))?;
    let total = file.metadata()?.len();
    let engine = args.host.engine()?;
    let thread = args.host.start(engine)?;
    let started = WallInstant::now();
    let stream = TcpStream::connect_timeout(thread.handle(), args.dest, args.connect_timeout)
        .with_context(|| format!("connecting to {}", args.dest))?;
    stream.set_write_timeout(Some(POLL))?;
    let bar = progress(Some(total));
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        write_all(&stream, &buf[..n], &stop)?;
        sent += n as u64;
        bar.set_position(sent);
    }
    stream.shutdown(Shutdown::Write)?;
    wait_acked(&stream, args.linger, &stop)?;
    wait_peer_close(&stream, PEER_CLOSE);
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "sent bytes={sent} sha256={} seconds={secs:.3} rate={:.1} Mbit/s",
        hex(&hasher.finalize()),
        sent as f64 * 8.0 / secs / 1e6
    );
    if args.stats {
        print!("{}", report(&thread, &[], started)?);
    }
    drop(stream);
    thread.stop()?;
    Ok(())
}
