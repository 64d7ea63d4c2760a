//! `strata tcp-recv`: one TCP connection's bytes into a file, through a
//! Strata host, with a progress bar and the SHA-256 of what arrived.

use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::net::Shutdown;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant as WallInstant};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use strata::TcpListener;

use super::host::{HostArgs, report};
use super::tcp_send::{POLL, duration, hex, interrupt_flag, progress, wait_acked};

/// Receive one TCP connection's bytes into a file on a Strata host.
///
/// Listens on PORT ("ready" is printed once it does), accepts one
/// connection, writes everything it carries to FILE, and once the peer has
/// closed, closes too and prints "received bytes=N sha256=HEX from=PEER
/// seconds=S rate=R Mbit/s".
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The port to listen on.
    port: u16,
    /// Where to write what arrives (created or truncated).
    file: PathBuf,
    #[command(flatten)]
    host: HostArgs,
    /// How long to wait for the peer to acknowledge our close (a peer gone
    /// by then is reported, not an error: the data is all in).
    #[arg(long, default_value = "10s", value_parser = duration)]
    linger: Duration,
    /// Print the host's counters (every protocol and link) at the end.
    #[arg(long)]
    stats: bool,
}

/// Runs `strata tcp-recv`.
pub fn run(args: Args) -> Result<()> {
    let stop = interrupt_flag()?;
    let out =
        File::create(&args.file).with_context(|| format!("creating {}", args.file.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let engine = args.host.engine()?;
    let thread = args.host.start(engine)?;
    let listener = TcpListener::bind(thread.handle(), args.port)
        .with_context(|| format!("listening on port {}", args.port))?;
    println!("ready");
    std::io::stdout().flush()?;
    let (stream, peer) = loop {
        match listener.accept_timeout(POLL) {
            Ok(accepted) => break accepted,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e).context("accepting"),
        }
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted before a connection came");
        }
    };
    drop(listener);
    let started = WallInstant::now();
    stream.set_read_timeout(Some(POLL))?;
    let bar = progress(None);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut received = 0u64;
    loop {
        match (&stream).read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n])
                    .with_context(|| format!("writing {}", args.file.display()))?;
                received += n as u64;
                bar.set_position(received);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e).context("receiving"),
        }
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted after {received} bytes");
        }
    }
    out.flush()?;
    // Everything arrived; our own close is a courtesy the peer may no longer
    // be there to acknowledge.
    stream.shutdown(Shutdown::Write)?;
    if let Err(e) = wait_acked(&stream, args.linger, &stop) {
        eprintln!("strata: closing: {e:#}");
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "received bytes={received} sha256={} from={peer} seconds={secs:.3} rate={:.1} Mbit/s",
        hex(&hasher.finalize()),
        received as f64 * 8.0 / secs / 1e6
    );
    if args.stats {
        print!("{}", report(&thread, &[], started)?);
    }
    drop(stream);
    thread.stop()?;
    Ok(())
}
