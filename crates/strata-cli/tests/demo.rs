//! `strata demo`, the quick start's first command: it runs to the end with every
//! part shown and its UDP accounting balanced, and the capture of its link passes
//! tshark's checks (no malformed frame, no bad checksum).

mod common;

use std::process::Command;

use common::{STRATA, Scratch, assert_capture_clean, tshark_count};

#[test]
fn the_demo_runs_every_part_and_its_capture_is_clean() {
    let scratch = Scratch::new("demo");
    let pcap = scratch.file("demo.pcap");
    for arch in ["llm", "illm", "daa"] {
        let out = Command::new(STRATA)
            .args(["demo", "--arch", arch, "--count", "200", "--pcap", &pcap])
            .output()
            .expect("strata runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{arch}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for part in [
            "Protocol graph of h1",
            "ping statistics",
            "accounted for:",
            "Seed 000 Table",
            "udp/ip/eth",
            "h2 udp",
            "Seed 001's transport",
            "Seed 004: one ATP transaction",
            "the request reached b 1 time(s)",
            "Seed 003's Protocol Accelerator",
            "fast paths:",
        ] {
            assert!(
                text.contains(part),
                "{arch}: the demo shows '{part}':\n{text}"
            );
        }
        assert_eq!(
            text.matches(": intact, both ends closed").count(),
            2,
            "{arch}: both transport transfers arrive intact:\n{text}"
        );
        assert!(
            text.contains(": yes"),
            "{arch}: the echo accounting balances:\n{text}"
        );
        let frames = assert_capture_clean(&pcap, 400);
        assert!(
            tshark_count(&pcap, "icmp.type == 0") >= 9,
            "{arch}: the echo replies are in the capture ({frames} frames)"
        );
        assert!(tshark_count(&pcap, "udp.port == 7") >= 300, "{arch}");
    }
}
