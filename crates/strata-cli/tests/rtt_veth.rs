//! `strata rtt-veth` runs both sides over its own veth pair, prints both
//! summaries and their ratio, and leaves no namespace behind.

mod common;

use std::process::Command;

use common::STRATA;

#[test]
fn rtt_veth_measures_strata_beside_the_kernel_and_cleans_up() {
    let out = Command::new(STRATA)
        .args([
            "rtt-veth", "--rounds", "2", "--count", "300", "--warmup", "50",
        ])
        .output()
        .expect("strata runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mean = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("(n=600)"), "every round trip counted: {line}");
        line.split("mean")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    let (strata, kernel) = (mean("strata udp/ip/eth"), mean("kernel UDP sockets"));
    assert!(strata > 0.0 && kernel > 0.0, "{text}");
    let ratio: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("ratio strata/kernel = "))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no ratio in:\n{text}"));
    assert!((ratio - strata / kernel).abs() < 0.01, "{text}");
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("rtt{}-", std::process::id() % 100_000);
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains(&prefix),
        "namespaces removed"
    );
}
