//! CPU time per in-memory 1-byte (or SIZE-byte) ping-pong round trip, every
//! stack of seed 000's Tables 1–3 that the ping-pong drives under the
//! architectures they compare, side by side in one process (issue 15).
//!
//! Time is the thread's own run time (`/proc/thread-self/schedstat`), not the
//! wall clock, so on a loaded machine the time other processes hold the CPU
//! is not counted (`strata bench rtt-peers` and `paper000 tables` report wall
//! means, which preemption dominates there). Each figure is the best of
//! ROUNDS runs of N round trips after 10,000 warm-up ones.
//!
//! Usage: `cargo run --release -p strata-bench --example cpu_rtt -- [N] [ROUNDS] [ck|nock] [SIZE]`;
//! `ONLY=eth:llm,ethdaa:daa` picks rows; `SMOL=1` adds smoltcp's UDP
//! ping-pong over its loopback device (checksums on, as `rtt-peers`).

use bytes::Bytes;
use strata::Arch;
use strata_bench::peers::smoltcp_udp::SmolUdpPingPong;
use strata_bench::rtt::{MemPingPong, RttSetup};

/// Nanoseconds this thread has run.
fn cpu_ns() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("run time")
}

/// The best mean of `rounds` runs of `n` calls of `f`, in ns per call.
fn best(n: usize, rounds: usize, mut f: impl FnMut()) -> f64 {
    let mut b = f64::MAX;
    for _ in 0..rounds {
        for _ in 0..10_000 {
            f();
        }
        let t = cpu_ns();
        for _ in 0..n {
            f();
        }
        b = b.min((cpu_ns() - t) / n as f64);
    }
    b
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(300_000);
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let checksum = args.get(2).is_some_and(|s| s == "ck");
    let size: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let only = std::env::var("ONLY").ok();
    let rows = [
        ("eth", Arch::Llm),
        ("ethdaa", Arch::Daa),
        ("ethdaa", Arch::Llm),
        ("eth", Arch::Illm),
        ("ip/eth", Arch::Llm),
        ("ip/ethdaa", Arch::Daa),
        ("ip/eth", Arch::Illm),
        ("udp/ip/eth", Arch::Llm),
        ("udp/ip/ethdaa", Arch::Daa),
        ("udp/ip/eth", Arch::Illm),
    ];
    let wanted = |s: &str, a: Arch| {
        only.as_ref()
            .is_none_or(|o| o.split(',').any(|x| x == format!("{s}:{a}")))
    };
    let payload = Bytes::from(vec![0x5a; size]);
    let mut out = Vec::new();
    for (stack, arch) in rows.into_iter().filter(|&(s, a)| wanted(s, a)) {
        let setup = RttSetup {
            stack: stack.into(),
            arch,
            checksum,
        };
        let mut pp = MemPingPong::new(&setup).expect("ping-pong");
        let ns = best(n, rounds, || pp.round_trip(&payload).expect("pong"));
        out.push((format!("strata {stack} ({arch})"), ns));
    }
    if std::env::var("SMOL").is_ok() {
        let mut smol = SmolUdpPingPong::new(size);
        let ns = best(n, rounds, || assert_eq!(smol.round_trip(), size));
        out.push(("smoltcp udp, loopback".into(), ns));
    }
    println!(
        "CPU time per {size}-byte round trip, best of {rounds} x {n} (checksums {}):",
        if checksum { "on" } else { "off" }
    );
    for (name, ns) in out {
        println!("  {name:32} {ns:7.1} ns");
    }
}
