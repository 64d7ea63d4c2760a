//! Linux talks to a Strata host: iputils ping (small, fragmented, flooded),
//! ARP, nc to UDP echo, and a closed port answered with ICMP port
//! unreachable — on a TAP device (with virtio-net headers, and UDP also
//! without) and on a veth end with AF_PACKET (with the kernel's default
//! offloads, and UDP also with them off). Every Strata host captures its
//! link, and tshark must find nothing wrong in it.

mod common;

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::time::Duration;

use common::{
    Proc, Scratch, Topology, assert_capture_clean, field, ok_in, ping_counts, tshark_count,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// Kernel pings from namespace `ns` to `addr`: 3 plain, 3 of 4000 bytes
/// (fragmented by Linux, reassembled by Strata), then a flood of 1000.
fn ping_plain_big_and_flood(ns: &str, addr: &str) {
    let out = ok_in(
        ns,
        "ping",
        &["-c", "3", "-i", "0.2", "-W", "2", addr],
        SECS(10),
    );
    assert_eq!(ping_counts(&out), (3, 3), "{out}");
    let out = ok_in(
        ns,
        "ping",
        &["-c", "3", "-i", "0.2", "-W", "2", "-s", "4000", addr],
        SECS(10),
    );
    assert_eq!(ping_counts(&out), (3, 3), "{out}");
    assert!(out.contains("4008 bytes from"), "full-size replies: {out}");
    let out = ok_in(ns, "ping", &["-f", "-c", "1000", "-W", "2", addr], SECS(30));
    assert_eq!(
        ping_counts(&out),
        (1000, 1000),
        "none of the flood lost: {out}"
    );
}

fn check_ping_counters(report: &str, echoes: u64) {
    assert_eq!(
        field(report, "proto icmp", "echo-replies"),
        echoes,
        "{report}"
    );
    assert!(field(report, "proto ip", "reassembled") >= 3, "{report}");
    assert!(
        field(report, "proto ip", "fragmented") >= 3,
        "Strata fragments its big replies: {report}"
    );
}

#[test]
fn linux_pings_strata_on_a_tap_under_illm_with_fragments_and_a_flood_and_none_is_lost() {
    let t = Topology::up("lt", &["--tap"]);
    let dir = Scratch::new("linux_pings_tap");
    let pcap = dir.file("host.pcap");
    let host = Proc::strata(
        &t.ns("a"),
        &[
            "host",
            "--link",
            &format!("tap:{}", t.dev("t")),
            "--ip",
            &format!("{}/24", t.tap_ip(2)),
            "--serve",
            "icmp",
            "--pcap",
            &pcap,
            "--arch",
            "illm",
        ],
    );
    ping_plain_big_and_flood(&t.ns("a"), &t.tap_ip(2));
    let report = host.stop();
    check_ping_counters(&report, 1006);
    assert_capture_clean(&pcap, 2 * 1006);
    assert_eq!(
        tshark_count(&pcap, "icmp.type == 0"),
        1006,
        "every reply is in the capture"
    );
}

#[test]
fn linux_pings_strata_on_a_veth_with_fragments_and_a_flood_and_none_is_lost() {
    let t = Topology::up("lv", &[]);
    let dir = Scratch::new("linux_pings_veth");
    let pcap = dir.file("host.pcap");
    let host = Proc::strata(
        &t.ns("b"),
        &[
            "host",
            "--link",
            &format!("packet:{}", t.dev("vb")),
            "--ip",
            &format!("{}/24", t.veth_ip(2)),
            "--serve",
            "icmp",
            "--pcap",
            &pcap,
        ],
    );
    ping_plain_big_and_flood(&t.ns("a"), &t.veth_ip(2));
    // SIGUSR1 prints a report and the host goes on serving.
    host.signal("USR1");
    host.wait_for("== report after", SECS(5));
    let out = ok_in(
        &t.ns("a"),
        "ping",
        &["-c", "1", "-W", "2", &t.veth_ip(2)],
        SECS(10),
    );
    assert_eq!(ping_counts(&out), (1, 1), "{out}");
    let all = host.stop();
    assert_eq!(all.matches("== report after").count(), 2, "{all}");
    let report = &all[all.rfind("== report after").unwrap_or(0)..];
    check_ping_counters(report, 1007);
    assert_eq!(
        field(report, "driver link net0", "outgoing ignored"),
        0,
        "{report}"
    );
    assert_capture_clean(&pcap, 2 * 1007);
}

#[test]
fn arp_resolves_both_ways_between_linux_and_strata() {
    let t = Topology::up("la", &[]);
    let dir = Scratch::new("arp_both_ways");
    let pcap = dir.file("host.pcap");
    let strata_mac = "02:53:54:12:".to_string();
    // Linux resolves Strata: its request is answered, its table learns our MAC.
    let host = Proc::strata(
        &t.ns("b"),
        &[
            "host",
            "--link",
            &format!("packet:{}", t.dev("vb")),
            "--ip",
            &format!("{}/24", t.veth_ip(2)),
            "--pcap",
            &pcap,
            "--busy-poll",
        ],
    );
    let out = ok_in(
        &t.ns("a"),
        "ping",
        &["-c", "1", "-W", "2", &t.veth_ip(2)],
        SECS(10),
    );
    assert_eq!(ping_counts(&out), (1, 1));
    let neigh = ok_in(&t.ns("a"), "ip", &["neigh", "show", &t.veth_ip(2)], SECS(5));
    assert!(
        neigh.contains(&strata_mac),
        "the kernel learned Strata's MAC: {neigh}"
    );
    assert!(
        !neigh.contains("FAILED") && !neigh.contains("INCOMPLETE"),
        "{neigh}"
    );
    let report = host.stop();
    assert_eq!(field(&report, "proto arp", "replies"), 1, "{report}");
    assert_capture_clean(&pcap, 4);
    assert_eq!(
        tshark_count(&pcap, "arp.opcode == 2"),
        1,
        "one reply, from Strata"
    );

    // Strata resolves Linux: a fresh Strata host has to ask.
    let out = ok_in(
        &t.ns("b"),
        common::STRATA,
        &[
            "ping",
            &t.veth_ip(1),
            "--link",
            &format!("packet:{}", t.dev("vb")),
            "--ip",
            &format!("{}/24", t.veth_ip(3)),
            "-c",
            "2",
            "-i",
            "0.1",
            "--stats",
        ],
        SECS(10),
    );
    assert_eq!(ping_counts(&out), (2, 2), "{out}");
    assert_eq!(field(&out, "proto arp", "requests"), 1, "{out}");
    let neigh = ok_in(&t.ns("a"), "ip", &["neigh", "show", &t.veth_ip(3)], SECS(5));
    assert!(
        neigh.contains(&strata_mac),
        "Linux learned the asker from its request: {neigh}"
    );
}

/// Strata serves UDP echo in `strata_ns`; from `kernel_ns` (the kernel at
/// `them`), nc's datagram comes back and a datagram to a closed port is
/// refused through ICMP port unreachable.
fn udp_echo_and_port_unreachable(
    strata_ns: &str,
    kernel_ns: &str,
    link: &str,
    me: &str,
    them: &str,
    pcap: &str,
) {
    let host = Proc::strata(
        strata_ns,
        &[
            "host",
            "--link",
            link,
            "--ip",
            &format!("{me}/24"),
            "--serve",
            "icmp,udp-echo:7,udp-discard:9",
            "--pcap",
            pcap,
        ],
    );
    // nc sends one datagram from stdin and prints what comes back.
    let out = ok_in(
        kernel_ns,
        "sh",
        &[
            "-c",
            &format!("printf 'strata echo test\\n' | nc -u -w 1 {me} 7"),
        ],
        SECS(10),
    );
    assert_eq!(out.trim(), "strata echo test", "nc got its datagram back");

    // A kernel socket to the discard port: taken, nothing comes back.
    let socket =
        strata::link::drivers::netns::within(Some(kernel_ns), || UdpSocket::bind((them, 0)))
            .expect("socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    socket.connect((me, 9)).unwrap();
    socket.send(b"into the void").unwrap();
    let err = socket
        .recv(&mut [0u8; 64])
        .expect_err("discard answers nothing");
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err}"
    );

    // A kernel socket, made in the kernel's namespace, to a closed port.
    let socket =
        strata::link::drivers::netns::within(Some(kernel_ns), || UdpSocket::bind((them, 0)))
            .expect("socket");
    socket.set_read_timeout(Some(SECS(3))).unwrap();
    socket.connect((me, 9999)).unwrap();
    socket.send(b"anyone?").unwrap();
    let err = socket
        .recv(&mut [0u8; 64])
        .expect_err("no answer but an error");
    assert_eq!(
        err.kind(),
        ErrorKind::ConnectionRefused,
        "Linux reports the port unreachable: {err}"
    );

    let report = host.stop();
    assert_eq!(field(&report, "app udp-echo", "echoed"), 1, "{report}");
    assert_eq!(
        field(&report, "app udp-discard", "datagrams"),
        1,
        "{report}"
    );
    assert_eq!(field(&report, "app udp-discard", "bytes"), 13, "{report}");
    assert_eq!(field(&report, "proto icmp", "errors-sent"), 1, "{report}");
    assert_capture_clean(pcap, 7);
    assert_eq!(
        tshark_count(
            pcap,
            "icmp.type == 3 && icmp.code == 3 && udp.dstport == 9999"
        ),
        1
    );
}

/// [`udp_echo_and_port_unreachable`] with Strata on the TAP of a fresh
/// topology, its link's options (`",vnet=false"`) after the device.
fn on_a_tap(tag: &str, options: &str) {
    let t = Topology::up(tag, &["--tap"]);
    let dir = Scratch::new(&format!("udp_{tag}"));
    udp_echo_and_port_unreachable(
        &t.ns("a"),
        &t.ns("a"),
        &format!("tap:{}{options}", t.dev("t")),
        &t.tap_ip(2),
        &t.tap_ip(1),
        &dir.file("host.pcap"),
    );
}

/// The same with Strata on the veth end of a topology made with `flags`.
fn on_a_veth(tag: &str, flags: &[&str]) {
    let t = Topology::up(tag, flags);
    let dir = Scratch::new(&format!("udp_{tag}"));
    udp_echo_and_port_unreachable(
        &t.ns("b"),
        &t.ns("a"),
        &format!("packet:{}", t.dev("vb")),
        &t.veth_ip(2),
        &t.veth_ip(1),
        &dir.file("host.pcap"),
    );
}

#[test]
fn nc_gets_its_datagram_back_and_a_closed_port_is_refused_on_a_tap() {
    on_a_tap("ut", "");
}

#[test]
fn nc_gets_its_datagram_back_and_a_closed_port_is_refused_on_a_veth() {
    on_a_veth("uv", &[]);
}

#[test]
fn nc_gets_its_datagram_back_and_a_closed_port_is_refused_on_a_tap_without_virtio_net_headers() {
    on_a_tap("un", ",vnet=false");
}

#[test]
fn nc_gets_its_datagram_back_and_a_closed_port_is_refused_on_a_veth_with_offloads_off() {
    on_a_veth("uo", &["--no-offload"]);
}
