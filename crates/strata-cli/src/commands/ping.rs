//! `strata ping`: ICMP echo through a Strata host, printed as ping(8) prints it.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant as WallInstant};

use anyhow::{Result, anyhow, bail};
use signal_hook::consts::{SIGINT, SIGTERM};
use strata::apps::ping::{PingConfig, PingEvent, PingTotals, Pinger};
use strata::core::units;

use super::host::{HostArgs, report};

/// Send ICMP echo requests from a Strata host and print the replies.
///
/// The host runs on the link only for as long as the pings last. Lines and the
/// summary follow ping(8); the exit status is 1 when no reply came.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Who to ping.
    target: Ipv4Addr,
    #[command(flatten)]
    host: HostArgs,
    /// Requests to send (default: until interrupted).
    #[arg(short = 'c', long)]
    count: Option<u64>,
    /// Data bytes per request.
    #[arg(short = 's', long, default_value_t = 56)]
    size: usize,
    /// Time between requests, in seconds or with a unit ("0.2", "10ms").
    #[arg(short = 'i', long, default_value = "1", value_parser = parse_interval)]
    interval: Duration,
    /// How long to wait for replies after the last request.
    #[arg(short = 'W', long, default_value = "1", value_parser = parse_interval)]
    linger: Duration,
    /// Print the host's counters (every protocol and link) at the end.
    #[arg(long)]
    stats: bool,
}

/// A duration as ping takes it: plain seconds ("0.2") or with a unit ("10ms").
fn parse_interval(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Ok(Duration::from_secs_f64(secs)),
        Ok(_) => Err(format!("'{s}': want a non-negative number of seconds")),
        Err(_) => units::parse_duration(s).map_err(|e| e.to_string()),
    }
}

/// Runs `strata ping`.
pub fn run(args: Args) -> Result<()> {
    if args.size > 65_000 {
        bail!("-s {}: at most 65000 data bytes", args.size);
    }
    let mut engine = args.host.engine()?;
    let config = PingConfig {
        target: args.target,
        count: args.count,
        size: args.size,
        interval: args.interval,
        linger: args.linger,
    };
    let (id, events) = Pinger::install(&mut engine, config)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))?;
    }
    let thread = args.host.start(engine)?;
    let started = WallInstant::now();
    println!(
        "PING {0} ({0}) {1}({2}) bytes of data.",
        args.target,
        args.size,
        args.size + 28
    );
    loop {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        match events.recv_timeout(Duration::from_millis(50)) {
            Ok(PingEvent::Reply {
                seq,
                bytes,
                from,
                ttl,
                rtt,
                duplicate,
                corrupt,
            }) => println!(
                "{bytes} bytes from {from}: icmp_seq={seq} ttl={ttl} time={:.3} ms{}{}",
                rtt.as_secs_f64() * 1e3,
                if duplicate { " (DUP!)" } else { "" },
                if corrupt { " (BAD DATA)" } else { "" },
            ),
            Ok(PingEvent::Finished) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    let elapsed = started.elapsed();
    let totals = thread
        .handle()
        .call(move |e| e.app::<Pinger>(id).map(|p| p.totals.clone()))
        .map_err(|_| anyhow!("the host's engine has stopped"))?
        .unwrap_or_default();
    if args.stats {
        print!("{}", report(&thread, &[], started)?);
    }
    thread.stop()?;
    summary(args.target, &totals, elapsed);
    if totals.received == 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn summary(target: Ipv4Addr, t: &PingTotals, elapsed: Duration) {
    println!("\n--- {target} ping statistics ---");
    let loss = if t.transmitted == 0 {
        0.0
    } else {
        100.0 * (t.transmitted - t.received.min(t.transmitted)) as f64 / t.transmitted as f64
    };
    let mut line = format!(
        "{} packets transmitted, {} received",
        t.transmitted, t.received
    );
    if t.duplicates > 0 {
        line += &format!(", +{} duplicates", t.duplicates);
    }
    if t.corrupt > 0 {
        line += &format!(", {} corrupted", t.corrupt);
    }
    println!(
        "{line}, {loss:.0}% packet loss, time {}ms",
        elapsed.as_millis()
    );
    if let Some((min, avg, max, mdev)) = t.rtt {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "rtt min/avg/max/mdev = {:.3}/{:.3}/{:.3}/{:.3} ms",
            ms(min),
            ms(avg),
            ms(max),
            ms(mdev)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_as_seconds_or_with_a_unit() {
        assert_eq!(parse_interval("0.2"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_interval("1"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("10ms"), Ok(Duration::from_millis(10)));
        assert!(parse_interval("-1").is_err());
        assert!(parse_interval("soon").is_err());
    }
}
