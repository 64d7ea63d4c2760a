//! `strata rtt --link packet` runs Strata and the kernel over its own veth pair,
//! in busy-poll and in blocking mode, prints both summaries and their ratio, and
//! leaves no namespace behind.

mod common;

use std::process::{Command, Stdio};

use common::STRATA;

fn mean(text: &str, prefix: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' line in:\n{text}"));
    assert!(line.contains("(n=600)"), "every round trip counted: {line}");
    line.split("mean")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no mean in: {line}"))
}

#[test]
fn rtt_over_packet_measures_strata_beside_the_kernel_in_both_polling_modes_and_cleans_up() {
    for busy in [true, false] {
        let mut args = vec![
            "rtt", "--link", "packet", "--size", "32", "--rounds", "2", "--count", "300",
            "--warmup", "50",
        ];
        if busy {
            args.push("--busy-poll");
        }
        let child = Command::new(STRATA)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("strata runs");
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mode = if busy { "busy-poll" } else { "blocking" };
        assert!(text.contains(mode), "{text}");
        let (strata, kernel) = (
            mean(&text, "strata udp/ip/eth"),
            mean(&text, "kernel UDP sockets"),
        );
        assert!(strata > 0.0 && kernel > 0.0, "{text}");
        let ratio: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("ratio strata/kernel = "))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no ratio in:\n{text}"));
        assert!((ratio - strata / kernel).abs() < 0.01, "{text}");
        let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let prefix = format!("rtt{}-", pid % 100_000);
        assert!(
            !String::from_utf8_lossy(&left.stdout).contains(&prefix),
            "namespaces {prefix}* removed"
        );
    }
}
