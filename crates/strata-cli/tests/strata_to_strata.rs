//! Two Strata hosts move a 10 MB UDP transfer — over the kernel-UDP link and
//! over a veth pair with AF_PACKET — and every datagram arrives intact (its
//! bytes checked one by one, UDP checksums verified on the way), with the
//! receiver's digest equal to the sender's. Both captures must pass tshark.

mod common;

use std::time::Duration;

use common::{Proc, STRATA, Scratch, Topology, assert_capture_clean, field, ok_in, tshark_count};

const TEN_MB: u64 = 10_000_000;

/// The hex value of `key=` on the first line starting with `prefix`.
pub fn hex_field(text: &str, prefix: &str, key: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' line in:\n{text}"));
    let start = line
        .find(&format!("{key}="))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + key.len()
        + 1;
    line[start..]
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// How the sink host is described: the short form, or a graph config file.
enum Sink<'a> {
    Short { link: &'a str },
    Config { path: &'a str },
}

/// Sends 10 MB from `sender_link` to a sink host at `sink_ip`, both hosts in
/// their namespaces, and checks every count.
fn transfer(sender: (&str, &str, &str), sink: (&str, Sink, &str), rate: &str, dir: &Scratch) {
    let (sender_ns, sender_link, sender_ip) = sender;
    let (sink_ns, sink_host, sink_ip) = sink;
    let (sink_pcap, sender_pcap) = (dir.file("sink.pcap"), dir.file("sender.pcap"));
    let run = std::process::id().to_string();
    let sink_cidr = format!("{sink_ip}/24");
    let mut args = match sink_host {
        Sink::Short { link } => vec!["host", "--link", link, "--ip", &sink_cidr],
        Sink::Config { path } => vec!["host", "--config", path],
    };
    let serve = format!("udp-sink:9:{run}");
    args.extend(["--serve", &serve, "--pcap", &sink_pcap]);
    let receiver = Proc::strata(sink_ns, &args);
    let out = ok_in(
        sender_ns,
        STRATA,
        &[
            "udp-send",
            &format!("{sink_ip}:9"),
            "--link",
            sender_link,
            "--ip",
            &format!("{sender_ip}/24"),
            "--bytes",
            "10MB",
            "--size",
            "1400",
            "--rate",
            rate,
            "--run",
            &run,
            "--wait",
            "500ms",
            "--pcap",
            &sender_pcap,
        ],
        Duration::from_secs(30),
    );
    let report = receiver.stop();
    let sent = field(&out, "sent", "datagrams");
    assert_eq!(sent, TEN_MB.div_ceil(1400), "{out}");
    assert_eq!(field(&out, "sent", "bytes"), TEN_MB, "{out}");
    let sink = "app udp-sink";
    assert_eq!(
        field(&report, sink, "intact"),
        sent,
        "every datagram arrived intact:\n{report}"
    );
    assert_eq!(field(&report, sink, "intact_bytes"), TEN_MB, "{report}");
    for bad in ["corrupt", "duplicates", "foreign"] {
        assert_eq!(field(&report, sink, bad), 0, "{bad}:\n{report}");
    }
    assert_eq!(
        hex_field(&report, sink, "digest"),
        hex_field(&out, "sent", "digest"),
        "digests"
    );
    assert_eq!(
        field(&report, "driver link net0", "kernel"),
        0,
        "the kernel dropped nothing before the sink read it:\n{report}"
    );
    assert!(
        !report.contains("bad-checksum"),
        "no datagram failed its checksum:\n{report}"
    );
    let frames = sent as usize + 1;
    assert_capture_clean(&sender_pcap, frames);
    assert_capture_clean(&sink_pcap, frames);
    // Every datagram carries a checksum (zero would mean none, RFC 768), which
    // tshark verified above.
    assert_eq!(tshark_count(&sink_pcap, "udp.dstport == 9"), sent as usize);
    assert_eq!(
        tshark_count(&sink_pcap, "udp.dstport == 9 && udp.checksum == 0"),
        0
    );
}

#[test]
fn two_strata_hosts_move_10mb_intact_over_the_udp_link() {
    let t = Topology::up("su", &[]);
    let dir = Scratch::new("transfer_udp_link");
    let ns = t.ns("a");
    // The sink is described by a graph config, the sender by the short form.
    let config = dir.file("sink.toml");
    let address = format!("{}/24", t.veth_ip(12));
    let text = format!(
        "[link.net0]\nkind = \"udp\"\nlocal = \"127.0.0.1:9001\"\npeer = \"127.0.0.1:9000\"\n\n\
         [protocol.eth]\nbelow = [\"net0\"]\nmac = \"02:53:54:00:00:0c\"\n\n\
         [protocol.arp]\nbelow = [\"eth\"]\naddress = \"{address}\"\n\n\
         [protocol.ip]\nbelow = [\"eth\", \"arp\"]\naddress = \"{address}\"\n\n\
         [protocol.icmp]\nbelow = [\"ip\"]\n\n[protocol.udp]\nbelow = [\"ip\"]\n"
    );
    std::fs::write(&config, text).unwrap();
    transfer(
        (&ns, "udp:127.0.0.1:9000,127.0.0.1:9001", &t.veth_ip(11)),
        (&ns, Sink::Config { path: &config }, &t.veth_ip(12)),
        "200mbit",
        &dir,
    );
}

#[test]
fn two_strata_hosts_move_10mb_intact_over_a_veth_with_af_packet() {
    let t = Topology::up("sv", &[]);
    let dir = Scratch::new("transfer_veth");
    transfer(
        (
            &t.ns("a"),
            &format!("packet:{}", t.dev("va")),
            &t.veth_ip(11),
        ),
        (
            &t.ns("b"),
            Sink::Short {
                link: &format!("packet:{}", t.dev("vb")),
            },
            &t.veth_ip(12),
        ),
        "200mbit",
        &dir,
    );
}
