//! A Strata host talks to Linux: `strata ping` to the kernel's address, and a
//! Strata UDP client exchanging datagrams with `nc -u -l` — on a veth end with
//! AF_PACKET and on a TAP. The Strata side's capture must pass tshark.

mod common;

use std::time::Duration;

use common::{
    Proc, STRATA, Scratch, Topology, assert_capture_clean, ok_in, ping_counts, tshark_count,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn strata_pings_kernel(ns: &str, link: &str, me: &str, kernel: &str, pcap: &str) {
    let out = ok_in(
        ns,
        STRATA,
        &[
            "ping",
            kernel,
            "--link",
            link,
            "--ip",
            &format!("{me}/24"),
            "-c",
            "5",
            "-i",
            "0.05",
            "-s",
            "3000",
            "--pcap",
            pcap,
        ],
        SECS(10),
    );
    assert_eq!(ping_counts(&out), (5, 5), "{out}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with(&format!("3008 bytes from {kernel}: icmp_seq=")))
            .count(),
        5,
        "a ping(8) line per reply: {out}"
    );
    assert!(out.contains("rtt min/avg/max/mdev = "), "{out}");
    assert_capture_clean(pcap, 2 + 5 * 2 * 3);
    assert_eq!(
        tshark_count(pcap, &format!("icmp.type == 8 && ip.dst == {kernel}")),
        5
    );
    assert_eq!(
        tshark_count(pcap, &format!("icmp.type == 0 && ip.src == {kernel}")),
        5
    );
    assert_eq!(
        tshark_count(pcap, "arp.opcode == 1 && eth.src[0:3] == 02:53:54"),
        1,
        "Strata asked once"
    );
}

#[test]
fn strata_pings_the_kernel_over_a_veth() {
    let t = Topology::up("pv", &[]);
    let dir = Scratch::new("strata_ping_veth");
    let pcap = dir.file("ping.pcap");
    strata_pings_kernel(
        &t.ns("b"),
        &format!("packet:{}", t.dev("vb")),
        &t.veth_ip(2),
        &t.veth_ip(1),
        &pcap,
    );
}

#[test]
fn strata_pings_the_kernel_over_a_tap() {
    let t = Topology::up("pt", &["--tap"]);
    let dir = Scratch::new("strata_ping_tap");
    let pcap = dir.file("ping.pcap");
    strata_pings_kernel(
        &t.ns("a"),
        &format!("tap:{}", t.dev("t")),
        &t.tap_ip(2),
        &t.tap_ip(1),
        &pcap,
    );
}

#[test]
fn a_strata_udp_client_and_nc_listening_on_the_kernel_exchange_datagrams() {
    let t = Topology::up("nv", &[]);
    let dir = Scratch::new("strata_udp_nc");
    let pcap = dir.file("client.pcap");
    // nc answers the first datagram's sender with a line of its own, a moment
    // after the datagram came (it reads stdin once it knows its peer).
    let nc = Proc::spawn(
        &t.ns("a"),
        "sh",
        &[
            "-c",
            "(sleep 1; printf 'hello from nc\\n'; sleep 3) | nc -u -l -p 5000",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let out = ok_in(
        &t.ns("b"),
        STRATA,
        &[
            "udp-send",
            &format!("{}:5000", t.veth_ip(1)),
            "--link",
            &format!("packet:{}", t.dev("vb")),
            "--ip",
            &format!("{}/24", t.veth_ip(2)),
            "--local-port",
            "4000",
            "--data",
            "hello from strata\n",
            "--expect",
            "1",
            "--wait",
            "5s",
            "--pcap",
            &pcap,
        ],
        SECS(15),
    );
    assert!(
        out.contains(&format!(
            "from {}:5000 len=14: hello from nc\\n",
            t.veth_ip(1)
        )),
        "Strata got nc's datagram: {out}"
    );
    assert!(out.contains("sent 1 received 1"), "{out}");
    nc.wait_for("hello from strata", SECS(5));
    drop(nc);
    assert_capture_clean(&pcap, 4);
    assert_eq!(
        tshark_count(&pcap, "udp.srcport == 4000 && udp.dstport == 5000"),
        1
    );
    assert_eq!(
        tshark_count(&pcap, "udp.srcport == 5000 && udp.dstport == 4000"),
        1
    );
}
