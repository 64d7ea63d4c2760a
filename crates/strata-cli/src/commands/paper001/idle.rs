//! `strata bench paper001 idle`: the CPU time an open connection of the transport costs while nothing is
//! sent. The paper's library ran its timers from a 500 ms signal (§3.7) and
//! UDT's pacing spins; Strata's ends sleep in `ppoll` until their next
//! deadline (a keep-alive every 500 ms), so an idle connection must cost
//! almost nothing.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use strata::xport::{XportListener, XportOptions, XportStream};
use strata_bench::cpu::process_cpu;

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
    Ok(())
}
