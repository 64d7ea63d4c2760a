//! `strata bench paper001 idle`: the CPU time an open connection of the
//! transport costs while nothing is sent, and while its sending rate is held
//! down by a slow link. The paper's library ran its timers from a 500 ms
//! signal (§3.7) and UDT's pacing spins; Strata's ends sleep in `ppoll`
//! until their next deadline (a keep-alive every 500 ms; the pacer's next
//! burst), so both must cost little.
//!
//! The rate-limited connection sends through a 10 Mbit/s `strata wanem`
//! link for the whole time, rate control on (the pacer is what holds the
//! sender back), both ends in this process; UDT4 (our harness, its own
//! processes) moves the same through the same link beside it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use strata::xport::{XportListener, XportOptions, XportStream};
use strata_bench::cpu::process_cpu;
use strata_bench::peers::transfer::deadline;
use strata_bench::peers::udt::UdtPeer;
use strata_bench::peers::xport::{XportPeer, transfer};

use super::link::{Link, Net, load};

/// Runs `strata bench paper001 idle`.
pub fn run(time: Duration) -> Result<()> {
    let opts = XportOptions::default();
    let mut listener = XportListener::bind("127.0.0.1:0", &opts).context("binding")?;
    let addr = listener.local_addr()?;
    // The server end waits a little longer, so the client's wait is what ends
    // the measurement with both still open.
    let server = std::thread::spawn(move || -> Result<()> {
        let mut s = listener.accept_timeout(Duration::from_secs(10))?;
        s.wait(&[], Some(time + Duration::from_secs(1)))?;
        Ok(())
    });
    let mut client = XportStream::connect(addr, &opts).context("connecting")?;
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    client.wait(&[], Some(time))?;
    let (cpu, wall) = (process_cpu() - cpu0, wall0.elapsed());
    server
        .join()
        .map_err(|_| anyhow!("the server end panicked"))??;
    let per_minute = cpu.as_secs_f64() * 60.0 / wall.as_secs_f64();
    println!("Idle cost of an open connection of seed 001's transport (both ends, loopback):");
    println!(
        "  strata  idle {:.1} s: cpu {:.3} s = {per_minute:.4} CPU s per minute ({:.3}% of a core)",
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        per_minute / 60.0 * 100.0
    );
    println!(
        "  paper   no figure (timers from a 500 ms signal, §3.7); a spinning pacer costs 60 CPU s per minute per end"
    );
    rate_limited(time)
}

/// The link's rate for the rate-limited connection, Mbit/s.
const LIMITED_MBIT: f64 = 10.0;

fn rate_limited(time: Duration) -> Result<()> {
    let mut net = Net::wan()?;
    net.emulate(&Link {
        mbit: LIMITED_MBIT,
        rtt_ms: 10.0,
        ..Link::default()
    })?;
    let bytes = (LIMITED_MBIT * 1e6 / 8.0 * time.as_secs_f64()) as u64;
    let limit = time * 3 + Duration::from_secs(30);
    let (from, into) = (net.sender(), net.receiver());
    let mut options = XportOptions::default();
    options.config.rate_control = true;
    let peer = XportPeer {
        options,
        buffers: 4,
    };
    let load0 = load();
    let x = transfer(
        &peer,
        Some(&from),
        Some(&into),
        net.to(),
        bytes,
        deadline(limit),
    )?;
    let udt = UdtPeer::build()?;
    let u = udt.transfer(Some(&from), Some(&into), net.to(), bytes, limit)?;
    println!(
        "Cost of a rate-limited connection ({LIMITED_MBIT} Mbit/s link, RTT 10 ms, {:.1} MB, both ends):",
        bytes as f64 / 1e6
    );
    for (name, t) in [("strata", &x), ("UDT4  ", &u)] {
        println!(
            "  {name}  {:.1} Mbit/s for {:.1} s: cpu {:.2} s = {:.2} CPU s per minute ({:.1}% of a core), {:.1} CPU ns/byte",
            t.mbit_s(),
            t.secs,
            t.cpu_secs,
            t.cpu_secs * 60.0 / t.secs,
            t.cpu_secs / t.secs * 100.0,
            t.cpu_ns_per_byte()
        );
    }
    println!("  load average before {load0}, after {}", load());
    Ok(())
}
