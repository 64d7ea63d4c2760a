//! Strata's TCP at both ends, over the kernel-UDP link kind: `strata
//! tcp-send` to `strata tcp-recv` moves a file whose SHA-256 both ends agree
//! on, and `strata perf` measures the same path. Both captures must pass
//! tshark.

mod common;

use std::time::Duration;

use common::{
    Proc, STRATA, Scratch, Topology, assert_capture_clean, field, ok_in, random_file, sha256_file,
    text_field,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// The two ends of a kernel-UDP link on the namespace's loopback.
const RECEIVER_LINK: &str = "udp:127.0.0.1:9100,127.0.0.1:9101";
const SENDER_LINK: &str = "udp:127.0.0.1:9101,127.0.0.1:9100";

#[test]
fn over_the_udp_link_strata_tcp_send_and_recv_agree_on_20_mb_and_perf_measures_it() {
    let t = Topology::up("tu", &[]);
    let ns = t.ns("a");
    let dir = Scratch::new("tcp_udp_link");
    let (file, received) = (dir.file("file.bin"), dir.file("received.bin"));
    let size = 20_000_000;
    random_file(&file, size, 3);
    let want = sha256_file(&file);
    let (recv_pcap, send_pcap) = (dir.file("recv.pcap"), dir.file("send.pcap"));
    let receiver_ip = t.veth_ip(21);
    let receiver = Proc::strata(
        &ns,
        &[
            "tcp-recv",
            "5001",
            &received,
            "--link",
            RECEIVER_LINK,
            "--ip",
            &format!("{receiver_ip}/24"),
            "--pcap",
            &recv_pcap,
        ],
    );
    let sent = ok_in(
        &ns,
        STRATA,
        &[
            "tcp-send",
            &format!("{receiver_ip}:5001"),
            &file,
            "--link",
            SENDER_LINK,
            "--ip",
            &format!("{}/24", t.veth_ip(22)),
            "--pcap",
            &send_pcap,
        ],
        SECS(60),
    );
    // On failure this shows what tcp-recv said on stderr.
    receiver.wait_for("received bytes=", SECS(30));
    let (status, got) = receiver.wait(SECS(30));
    assert!(status.success(), "tcp-recv: {status}\n{got}");
    assert_eq!(text_field(&sent, "sent", "sha256"), want, "{sent}");
    assert_eq!(text_field(&got, "received", "sha256"), want, "{got}");
    assert_eq!(field(&got, "received", "bytes"), size as u64);
    assert_eq!(
        sha256_file(&received),
        want,
        "the file written is the file sent"
    );
    println!("{}\n{}", sent.trim(), got.trim());
    assert_capture_clean(&send_pcap, size / 1500);
    assert_capture_clean(&recv_pcap, size / 1500);

    let server = Proc::strata(
        &ns,
        &[
            "perf",
            "--server",
            "5201",
            "--once",
            "--link",
            RECEIVER_LINK,
            "--ip",
            &format!("{receiver_ip}/24"),
        ],
    );
    let client = ok_in(
        &ns,
        STRATA,
        &[
            "perf",
            "--client",
            &format!("{receiver_ip}:5201"),
            "--time",
            "2",
            "--interval",
            "0.5",
            "--link",
            SENDER_LINK,
            "--ip",
            &format!("{}/24", t.veth_ip(22)),
        ],
        SECS(30),
    );
    server.wait_for("received bytes=", SECS(30));
    let (status, served) = server.wait(SECS(30));
    assert!(status.success(), "perf --server: {status}\n{served}");
    println!("{client}");
    let reports = client.lines().filter(|l| l.contains("srtt")).count();
    assert!(reports >= 4, "a report per half second:\n{client}");
    let bytes = field(&client, "receiver:", "bytes");
    assert!(bytes > 1_000_000, "{client}");
    assert_eq!(field(&client, "sender:", "bytes"), bytes, "{client}");
    assert_eq!(field(&served, "received", "bytes"), bytes, "{served}");
}
