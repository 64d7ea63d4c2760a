//! `strata wanem` between two namespaces: a Strata transfer through 1% loss is
//! accounted for datagram by datagram, and kernel ping and TCP (iperf3) cross
//! the same emulated link with its delay and rate.

mod common;

use std::time::Duration;

use common::{
    Proc, STRATA, Scratch, Topology, after, assert_capture_clean, field, ok_in, ping_counts,
    tshark_count,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// The lines of a wanem report for the direction whose header names `from`:
/// the header and its indented per-class lines.
fn direction(report: &str, from: &str) -> String {
    let header = format!("packet {from} →");
    let mut lines = report.lines().skip_while(|l| !l.starts_with(&header));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no direction from {from} in:\n{report}"));
    std::iter::once(first)
        .chain(lines.take_while(|l| l.starts_with(' ')))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn through_wanem_with_1_percent_loss_every_lost_datagram_is_accounted_for() {
    let t = Topology::up("wl", &["--wan"]);
    let dir = Scratch::new("wanem_loss");
    let (sink_pcap, sender_pcap) = (dir.file("sink.pcap"), dir.file("sender.pcap"));
    let wanem = Proc::strata(
        &t.ns("w"),
        &[
            "wanem",
            "--between",
            &t.dev("wa"),
            &t.dev("wb"),
            "--loss",
            "1%",
            "--delay",
            "2ms",
            "--seed",
            "7",
        ],
    );
    let run = "31";
    let receiver = Proc::strata(
        &t.ns("b"),
        &[
            "host",
            "--link",
            &format!("packet:{}", t.dev("vb")),
            "--ip",
            &format!("{}/24", t.veth_ip(12)),
            "--serve",
            &format!("udp-sink:9:{run}"),
            "--pcap",
            &sink_pcap,
        ],
    );
    let out = ok_in(
        &t.ns("a"),
        STRATA,
        &[
            "udp-send",
            &format!("{}:9", t.veth_ip(12)),
            "--link",
            &format!("packet:{}", t.dev("va")),
            "--ip",
            &format!("{}/24", t.veth_ip(11)),
            "--bytes",
            "10MB",
            "--rate",
            "200mbit",
            "--run",
            run,
            "--wait",
            "500ms",
            "--pcap",
            &sender_pcap,
        ],
        SECS(30),
    );
    let report = receiver.stop();
    let bridge = wanem.stop();
    let sent = field(&out, "sent", "datagrams");
    let intact = field(&report, "app udp-sink", "intact");
    let forward = direction(&bridge, &t.dev("wa"));
    let offered = after(&forward, "udp", "offered");
    let lost = after(&forward, "udp", "lost");
    let dropped = after(&forward, "udp", "dropped");
    let failed = after(&forward, "udp", "failed");
    assert_eq!(offered, sent, "the bridge saw every datagram:\n{bridge}");
    assert_eq!(
        sent,
        intact + lost + dropped + failed,
        "sent = received + the bridge's losses:\n{bridge}\n{report}"
    );
    assert!(
        (20..=200).contains(&lost),
        "about 1% of {sent} lost: {lost}"
    );
    assert_eq!(dropped + failed, 0, "only random loss here:\n{bridge}");
    // No frame died unseen in a kernel queue on the way (which would break
    // the account above; this says where, if it ever does).
    for port in [t.dev("wa"), t.dev("wb")] {
        assert_eq!(
            field(&bridge, &format!("port packet {port}"), "kernel"),
            0,
            "{bridge}"
        );
    }
    assert_eq!(field(&report, "driver link net0", "kernel"), 0, "{report}");
    assert!(
        forward.contains("in flight 0"),
        "nothing left in flight:\n{bridge}"
    );
    for bad in ["corrupt", "duplicates", "foreign"] {
        assert_eq!(field(&report, "app udp-sink", bad), 0, "{bad}:\n{report}");
    }
    assert_capture_clean(&sender_pcap, sent as usize);
    assert_capture_clean(&sink_pcap, intact as usize);
}

#[test]
fn kernel_ping_and_tcp_cross_wanem_with_its_delay_and_rate() {
    let t = Topology::up("wk", &["--wan", "--both"]);
    let dir = Scratch::new("wanem_kernel");
    let pcap = dir.file("wanem.pcap");
    let wanem = Proc::strata(
        &t.ns("w"),
        &[
            "wanem",
            "--between",
            &t.dev("wa"),
            &t.dev("wb"),
            "--delay",
            "10ms",
            "--jitter",
            "1ms",
            "--rate",
            "50mbit",
            "--queue",
            "256KB",
            "--pcap",
            &pcap,
        ],
    );
    let out = ok_in(
        &t.ns("a"),
        "ping",
        &["-c", "3", "-i", "0.2", &t.veth_ip(2)],
        SECS(10),
    );
    assert_eq!(ping_counts(&out), (3, 3), "{out}");
    let min_rtt: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("rtt min/avg/max/mdev = "))
        .and_then(|l| l.split('/').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no rtt line:\n{out}"));
    assert!(
        (18.0..40.0).contains(&min_rtt),
        "two 10 ms ± 1 ms crossings: {min_rtt} ms"
    );

    let server = Proc::spawn(&t.ns("b"), "iperf3", &["-s", "-1"]);
    std::thread::sleep(Duration::from_millis(300));
    let json = ok_in(
        &t.ns("a"),
        "iperf3",
        &["-c", &t.veth_ip(2), "-t", "2", "-J"],
        SECS(20),
    );
    drop(server);
    let rate = json
        .split("\"sum_received\"")
        .nth(1)
        .and_then(|s| s.split("\"bits_per_second\":").nth(1))
        .and_then(|s| s.split([',', '\n', '}']).next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no received rate in iperf3's output:\n{json}"));
    assert!(
        (10e6..=52e6).contains(&rate),
        "kernel TCP is held to the 50 Mbit/s link: {rate}"
    );

    wanem.signal("USR1");
    wanem.wait_for("== wanem report ==", SECS(5));
    let bridge = wanem.stop();
    let forward = direction(&bridge, &t.dev("wa"));
    assert!(after(&forward, "tcp", "forwarded") > 1000, "{bridge}");
    assert!(after(&forward, "icmp", "forwarded") >= 3, "{bridge}");
    // The sending kernel handed the bridge TCP super-segments (its veth
    // keeps the default offloads), which crossed the emulated wire cut.
    let port = format!("port packet {}", t.dev("wa"));
    assert!(field(&bridge, &port, "super") > 0, "{bridge}");
    // What entered the bridge from both kernels, as the frames of the MTU
    // it cut them into: TCP and ICMP with good checksums (those the
    // kernels left partial finished by the bridge's packet sockets).
    assert_capture_clean(&pcap, 1000);
    assert!(tshark_count(&pcap, "tcp.port == 5201") > 1000);
}
