//! `strata xperf`: throughput of seed 001's transport between two hosts,
//! printing per interval what UDT's sample apps print — rate, RTT, the
//! windows, the sending rate (cwnd / SRTT), ACK and NAK counts,
//! retransmissions.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use strata::xport::{XportListener, XportStream};
use strata::xport_stack::{StackListener, StackStream};

use super::tcp_send::duration;
use super::xport_args::{Ticker, XportArgs, say_buffers};
use super::xport_stack::{StackArgs, XStream};

/// Measure the transport's throughput (seed 001), like iperf.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    role: Role,
}

#[derive(clap::Subcommand, Debug)]
enum Role {
    /// Receive and discard, one connection after another; "ready" once listening.
    Server {
        /// The UDP port of the control socket.
        port: u16,
        /// The address to listen on.
        #[arg(long, default_value = "0.0.0.0")]
        bind: String,
        /// Serve this many connections, then exit (0: forever).
        #[arg(long, default_value_t = 0)]
        count: usize,
        /// Seconds between statistics lines.
        #[arg(long, default_value = "1s", value_parser = duration)]
        interval: Duration,
        #[command(flatten)]
        xport: XportArgs,
        #[command(flatten)]
        stack: StackArgs,
    },
    /// Send for a while and report.
    Client {
        /// The server's control address.
        to: String,
        /// How long to send.
        #[arg(long, default_value = "10s", value_parser = duration)]
        time: Duration,
        /// Seconds between statistics lines.
        #[arg(long, default_value = "1s", value_parser = duration)]
        interval: Duration,
        #[command(flatten)]
        xport: XportArgs,
        #[command(flatten)]
        stack: StackArgs,
    },
}

/// Runs `strata xperf`.
pub fn run(args: Args) -> Result<()> {
    match args.role {
        Role::Server {
            port,
            bind,
            count,
            interval,
            xport,
            stack,
        } => server(port, &bind, count, interval, &xport, &stack),
        Role::Client {
            to,
            time,
            interval,
            xport,
            stack,
        } => client(&to, time, interval, &xport, &stack),
    }
}

fn summary(what: &str, bytes: u64, started: Instant, s: &mut impl XStream) -> String {
    let secs = started.elapsed().as_secs_f64();
    let st = s.stats();
    format!(
        "{what} bytes={bytes} seconds={secs:.3} rate={:.2} Mbit/s retx={} naks-sent={} naks-received={} timeouts={} drops={}{}{}",
        bytes as f64 * 8.0 / secs / 1e6,
        st.retransmitted,
        st.go_back_n_sent + st.selective_sent,
        st.naks_received,
        st.timeouts,
        st.drops.total(),
        by_reason(&st.drops),
        s.driver_counters(),
    )
}

/// ` (reason=n,…)` for the reasons that dropped anything.
fn by_reason(d: &strata::xport::Drops) -> String {
    let v: Vec<String> = d
        .iter()
        .filter(|&(_, n)| n > 0)
        .map(|(r, n)| format!("{}={n}", r.name()))
        .collect();
    if v.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.join(","))
    }
}

fn server(
    port: u16,
    bind: &str,
    count: usize,
    every: Duration,
    x: &XportArgs,
    stack: &StackArgs,
) -> Result<()> {
    let Some(host) = stack.start(x)? else {
        let addr = format!("{bind}:{port}");
        let mut l = XportListener::bind(addr.as_str(), &x.options())
            .with_context(|| format!("listening on {addr}"))?;
        println!("ready");
        std::io::stdout().flush()?;
        let mut served = 0;
        while count == 0 || served < count {
            let s = l.accept()?;
            served += 1;
            if let Some(m) = say_buffers(&s) {
                eprintln!("strata: {m}");
            }
            serve(s, every, x)?;
        }
        return Ok(());
    };
    let served = StackListener::bind(host.handle(), port)
        .with_context(|| format!("listening on port {port} over xport/udp/ip/eth"))
        .and_then(|mut l| {
            println!("ready");
            std::io::stdout().flush()?;
            let mut served = 0;
            while count == 0 || served < count {
                let s: StackStream = l.accept()?;
                served += 1;
                serve(s, every, x)?;
            }
            Ok(())
        });
    let stopped = host.stop();
    served?;
    stopped.context("stopping the host")?;
    Ok(())
}

/// Receives one connection's stream and discards it, with statistics.
fn serve(mut s: impl XStream, every: Duration, x: &XportArgs) -> Result<()> {
    println!("connection from {}", s.peer());
    for _ in 1..x.buffers.max(1) {
        s.post_recv(vec![0u8; x.buffer])?;
    }
    let started = Instant::now();
    let mut ticker = Ticker::new();
    let mut got = 0u64;
    // Each buffer given back is posted again: no allocation (or zeroing of
    // a new megabyte) per buffer.
    let mut spare = vec![0u8; x.buffer];
    loop {
        let (buf, n) = s.recv(spare)?;
        if n == 0 {
            break;
        }
        got += n as u64;
        spare = buf;
        if let Some(line) = ticker.tick(&mut s, got, every) {
            println!("{line}");
        }
    }
    println!("{}", summary("received", got, started, &mut s));
    Ok(s.close()?)
}

fn client(
    to: &str,
    time: Duration,
    every: Duration,
    x: &XportArgs,
    stack: &StackArgs,
) -> Result<()> {
    let Some(host) = stack.start(x)? else {
        let s = XportStream::connect(to, &x.options())
            .with_context(|| format!("connecting to {to}"))?;
        if let Some(m) = say_buffers(&s) {
            eprintln!("strata: {m}");
        }
        return send_for(s, time, every, x);
    };
    let sent = to
        .parse()
        .context("with --link the server is ADDR:PORT")
        .and_then(|addr| {
            StackStream::connect(host.handle(), addr)
                .with_context(|| format!("connecting to {addr} over xport/udp/ip/eth"))
        })
        .and_then(|s| send_for(s, time, every, x));
    let stopped = host.stop();
    sent?;
    stopped.context("stopping the host")?;
    Ok(())
}

/// Sends the pattern for `time`, with statistics.
fn send_for(mut s: impl XStream, time: Duration, every: Duration, x: &XportArgs) -> Result<()> {
    let pattern: Bytes = (0..x.buffer)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let started = Instant::now();
    let mut ticker = Ticker::new();
    let mut acked = 0u64;
    let mut in_flight = 0usize;
    while started.elapsed() < time {
        let mut bufs = Vec::new();
        while in_flight + bufs.len() < x.buffers.max(1) {
            bufs.push(pattern.clone());
        }
        in_flight += bufs.len();
        let back = s.send(bufs)?;
        in_flight -= back.len();
        acked += back.iter().map(|b| b.len() as u64).sum::<u64>();
        if let Some(line) = ticker.tick(&mut s, acked, every) {
            println!("{line}");
        }
    }
    acked += s.finish()?.iter().map(|b| b.len() as u64).sum::<u64>();
    println!("{}", summary("sent", acked, started, &mut s));
    Ok(s.close()?)
}
