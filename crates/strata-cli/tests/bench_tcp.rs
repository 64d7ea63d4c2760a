//! `strata bench tcp-peers`, `tcp-veth` and `tcp-wan` each run briefly and
//! print their ratio line (the real-link ones make their own namespaces, so
//! they need root, as every real-link test does).

use std::process::Command;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

fn bench(args: &[&str]) -> String {
    let out = Command::new(STRATA)
        .arg("bench")
        .args(args)
        .output()
        .expect("strata runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "strata bench {} failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The number after `prefix` on the line that has it.
fn ratio(out: &str, prefix: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' line in:\n{out}"));
    line[prefix.len()..]
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number in '{line}'"))
}

#[test]
fn tcp_peers_runs_both_stacks_and_prints_the_ratio() {
    let out = bench(&["tcp-peers", "--rounds", "1", "--mb", "5"]);
    assert!(out.contains("smoltcp tcp, loopback device"), "{out}");
    assert!(ratio(&out, "ratio strata/smoltcp = ") > 0.0, "{out}");
    assert!(
        ratio(&out, "ratio strata without offloads/smoltcp = ") > 0.0,
        "{out}"
    );
    assert!(
        ratio(&out, "  strata with offloads: ") > 50.0,
        "most merged: {out}"
    );
    assert!(out.contains("(MTU 1500, MSS 1448,"), "{out}");
}

#[test]
fn tcp_peers_runs_at_the_mtu_it_is_given() {
    let out = bench(&["tcp-peers", "--rounds", "1", "--mb", "5", "--mtu", "9000"]);
    assert!(out.contains("(MTU 9000, MSS 8948,"), "{out}");
    assert!(ratio(&out, "ratio strata/smoltcp = ") > 0.0, "{out}");
}

#[test]
fn tcp_veth_runs_both_directions_beside_the_kernel_and_prints_both_ratios() {
    let out = bench(&["tcp-veth", "--rounds", "1", "--secs", "0.5"]);
    assert!(out.contains("kernel TCP (cubic)"), "{out}");
    assert!(out.contains("the kernel's default offloads"), "{out}");
    assert!(ratio(&out, "ratio strata/kernel = ") > 0.0, "{out}");
    assert!(
        ratio(&out, "ratio strata receiving/kernel = ") > 0.0,
        "{out}"
    );
}

#[test]
fn tcp_wan_runs_both_through_wanem_and_prints_the_ratio_and_loss_counts() {
    let out = bench(&[
        "tcp-wan", "--runs", "1", "--secs", "2", "--delay", "5ms", "--loss", "1%",
    ]);
    assert!(out.contains("  strata: retransmits "), "{out}");
    assert!(out.contains("  kernel: retransmits "), "{out}");
    assert!(ratio(&out, "ratio strata/kernel = ") > 0.0, "{out}");
}
