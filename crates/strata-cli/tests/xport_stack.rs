//! Seed 001's transport over Strata's own `xport/udp/ip/eth` on a veth
//! (AF_PACKET, the kernel's default offloads) against the transport over
//! the kernel's UDP in the other namespace: `strata xsend --link` to a
//! plain `strata xrecv`, and a plain `xsend` to `xrecv --link`, 16 MB each,
//! SHA-256 checked at both ends; the Strata side's capture decoded by
//! tshark with the transport's dissector. Also: Strata on a TAP, both ends
//! on Strata's stack over the `udp:` tunnel link, and the transfer through
//! `strata wanem` at 50 ms and 1% loss; `strata ftp --link` against a
//! kernel `strata ftpd`, and `strata ftpd --link` serving curl and a kernel
//! `strata ftp`.

mod common;

use std::time::Duration;

use common::{
    Proc, STRATA, Scratch, Topology, assert_capture_clean, random_file, sha256_file, tshark_count,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;
const SIZE: usize = 16 << 20;

fn link(t: &Topology) -> [String; 4] {
    [
        "--link".into(),
        format!("packet:{}", t.dev("vb")),
        "--ip".into(),
        format!("{}/24", t.veth_ip(2)),
    ]
}

fn check(sent: &str, got: &str, file: &str, out_dir: &str) {
    let want = sha256_file(file);
    assert!(sent.contains(&format!("sha256={want}")), "{sent}");
    assert!(got.contains(&format!("sha256={want}")), "{got}");
    assert!(got.contains(&format!("bytes={SIZE}")), "{got}");
    assert_eq!(sha256_file(&format!("{out_dir}/in.bin")), want);
    let left: Vec<_> = std::fs::read_dir(out_dir).unwrap().collect();
    assert_eq!(left.len(), 1, "only the renamed file remains");
    for out in [sent, got] {
        assert!(out.contains("drops total="), "every refusal counted: {out}");
    }
}

#[test]
fn strata_stack_xsend_reaches_the_kernel_udp_xrecv_over_a_veth() {
    let t = Topology::up("xs", &[]);
    let dir = Scratch::new("xport_stack_send");
    let file = dir.file("in.bin");
    random_file(&file, SIZE, 21);
    let out_dir = dir.file("out");
    let pcap = dir.file("strata.pcap");
    let r = Proc::strata(&t.ns("a"), &["xrecv", "7600", &out_dir]);
    r.wait_for("ready", SECS(10));
    let to = format!("{}:7600", t.veth_ip(1));
    let mut args: Vec<String> = vec!["xsend".into(), file.clone(), to];
    args.extend(link(&t));
    args.extend(["--pcap".into(), pcap.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, sent) = Proc::spawn(&t.ns("b"), STRATA, &args).wait(SECS(60));
    assert!(status.success(), "xsend over Strata's stack failed: {sent}");
    let (status, got) = r.wait(SECS(20));
    assert!(status.success(), "kernel-UDP xrecv failed: {got}");
    check(&sent, &got, &file, &out_dir);

    // Strata's frames, and the kernel's answers, decode cleanly as the
    // transport over UDP; the data packets carry the whole file.
    assert_capture_clean(&pcap, SIZE / mss());
    let data = tshark_count(&pcap, "xport.type == 5");
    assert!(data >= SIZE / mss(), "{data} data packets in the capture");
    assert!(tshark_count(&pcap, "arp") >= 2, "Strata resolved the peer");
}

#[test]
fn kernel_udp_xsend_reaches_the_strata_stack_xrecv_over_a_veth() {
    let t = Topology::up("xk", &[]);
    let dir = Scratch::new("xport_stack_recv");
    let file = dir.file("in.bin");
    random_file(&file, SIZE, 22);
    let out_dir = dir.file("out");
    let pcap = dir.file("strata.pcap");
    let mut args: Vec<String> = vec!["xrecv".into(), "7601".into(), out_dir.clone()];
    args.extend(link(&t));
    args.extend(["--pcap".into(), pcap.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = Proc::strata(&t.ns("b"), &args);
    r.wait_for("ready", SECS(10));
    let to = format!("{}:7601", t.veth_ip(2));
    let (status, sent) = Proc::spawn(&t.ns("a"), STRATA, &["xsend", &file, &to]).wait(SECS(60));
    assert!(status.success(), "kernel-UDP xsend failed: {sent}");
    let (status, got) = r.wait(SECS(20));
    assert!(status.success(), "xrecv over Strata's stack failed: {got}");
    check(&sent, &got, &file, &out_dir);

    // The kernel's datagrams (its UDP segmentation offload's super-datagrams
    // cut by Strata's packet link) decode cleanly, the whole file in them.
    assert_capture_clean(&pcap, SIZE / mss());
    let data = tshark_count(&pcap, "xport.type == 5");
    assert!(data >= SIZE / mss(), "{data} data packets in the capture");
}

#[test]
fn strata_stack_xsend_reaches_the_kernel_over_a_tap() {
    let t = Topology::up("xt", &["--tap"]);
    let dir = Scratch::new("xport_stack_tap");
    let file = dir.file("in.bin");
    random_file(&file, SIZE, 23);
    let out_dir = dir.file("out");
    let r = Proc::strata(&t.ns("a"), &["xrecv", "7602", &out_dir]);
    r.wait_for("ready", SECS(10));
    let to = format!("{}:7602", t.tap_ip(1));
    let link = format!("tap:{}", t.dev("t"));
    let me = format!("{}/24", t.tap_ip(2));
    let (status, sent) = Proc::spawn(
        &t.ns("a"),
        STRATA,
        &["xsend", &file, &to, "--link", &link, "--ip", &me],
    )
    .wait(SECS(60));
    assert!(
        status.success(),
        "xsend over Strata's stack on a TAP failed: {sent}"
    );
    let (status, got) = r.wait(SECS(20));
    assert!(status.success(), "kernel-UDP xrecv failed: {got}");
    check(&sent, &got, &file, &out_dir);
}

#[test]
fn two_strata_stacks_move_a_file_over_a_udp_tunnel_link() {
    // Both ends on Strata's stack, their frames in kernel-UDP datagrams on
    // the loopback of a namespace of their own (the `udp:` link kind).
    let t = Topology::up("xu", &[]);
    let (ra, rb) = ("127.0.0.1:9100", "127.0.0.1:9101");
    let dir = Scratch::new("xport_stack_tunnel");
    let file = dir.file("in.bin");
    random_file(&file, SIZE, 24);
    let out_dir = dir.file("out");
    let recv_link = format!("udp:{rb},{ra}");
    let r = Proc::spawn(
        &t.ns("a"),
        STRATA,
        &[
            "xrecv",
            "7603",
            &out_dir,
            "--link",
            &recv_link,
            "--ip",
            "198.18.250.2/24",
        ],
    );
    r.wait_for("ready", SECS(10));
    let send_link = format!("udp:{ra},{rb}");
    let (status, sent) = Proc::spawn(
        &t.ns("a"),
        STRATA,
        &[
            "xsend",
            &file,
            "198.18.250.2:7603",
            "--link",
            &send_link,
            "--ip",
            "198.18.250.1/24",
            "--data-sockets",
            "2",
        ],
    )
    .wait(SECS(60));
    assert!(status.success(), "xsend failed: {sent}");
    let (status, got) = r.wait(SECS(20));
    assert!(status.success(), "xrecv failed: {got}");
    check(&sent, &got, &file, &out_dir);
}

#[test]
fn strata_stack_xsend_crosses_wanem_at_50_ms_and_1_percent_loss_to_the_kernel() {
    // The kernel-UDP test's transfer (xport.rs) with the sender on Strata's
    // own stack: AF_PACKET on NAME-vb, wanem between the namespaces.
    let t = Topology::up("xsw", &["--wan"]);
    let dir = Scratch::new("xport_stack_wanem");
    let (a, b) = (t.dev("wa"), t.dev("wb"));
    let _w = Proc::strata(
        &t.ns("w"),
        &[
            "wanem",
            "--between",
            &a,
            &b,
            "--delay",
            "25ms",
            "--loss",
            "1%",
            "--seed",
            "4",
        ],
    );
    let file = dir.file("in.bin");
    random_file(&file, 3 << 20, 25);
    let out_dir = dir.file("out");
    let r = Proc::strata(&t.ns("a"), &["xrecv", "7604", &out_dir]);
    let to = format!("{}:7604", t.veth_ip(1));
    let mut args: Vec<String> = vec!["xsend".into(), file.clone(), to];
    args.extend(link(&t));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, sent) = Proc::spawn(&t.ns("b"), STRATA, &args).wait(SECS(120));
    assert!(status.success(), "xsend over Strata's stack failed: {sent}");
    let (status, got) = r.wait(SECS(20));
    assert!(status.success(), "kernel-UDP xrecv failed: {got}");
    let want = sha256_file(&file);
    assert!(sent.contains(&format!("sha256={want}")), "{sent}");
    assert!(got.contains(&format!("sha256={want}")), "{got}");
    assert_eq!(sha256_file(&format!("{out_dir}/in.bin")), want);
}

#[test]
fn xperf_runs_over_the_strata_stack_both_ways() {
    let t = Topology::up("xp", &[]);
    let bytes = |out: &str, word: &str| -> u64 {
        let line = out
            .lines()
            .find(|l| l.starts_with(word))
            .unwrap_or_else(|| panic!("no '{word}' line in:\n{out}"));
        line.split_whitespace()
            .find_map(|w| w.strip_prefix("bytes="))
            .and_then(|n| n.parse().ok())
            .unwrap()
    };
    // Strata's stack sends, the kernel's transport receives; then the reverse.
    for (port, stack_sends) in [("7605", true), ("7606", false)] {
        let mut server: Vec<String> = vec!["xperf".into(), "server".into(), port.into()];
        server.extend(["--count".into(), "1".into()]);
        let mut client: Vec<String> = vec!["xperf".into(), "client".into()];
        client.extend(["--time".into(), "1s".into()]);
        let (server_ns, client_ns) = if stack_sends {
            client.push(format!("{}:{port}", t.veth_ip(1)));
            client.extend(link(&t));
            (t.ns("a"), t.ns("b"))
        } else {
            client.push(format!("{}:{port}", t.veth_ip(2)));
            server.extend(link(&t));
            (t.ns("b"), t.ns("a"))
        };
        let server: Vec<&str> = server.iter().map(String::as_str).collect();
        let client: Vec<&str> = client.iter().map(String::as_str).collect();
        let s = Proc::strata(&server_ns, &server);
        let (status, sent) = Proc::spawn(&client_ns, STRATA, &client).wait(SECS(30));
        assert!(status.success(), "xperf client failed: {sent}");
        let (status, got) = s.wait(SECS(20));
        assert!(status.success(), "xperf server failed: {got}");
        let n = bytes(&sent, "sent");
        assert!(n > 0, "{sent}");
        assert_eq!(bytes(&got, "received"), n, "{got}");
    }
}

#[test]
fn strata_ftp_over_the_strata_stack_gets_and_puts_through_a_kernel_ftpd() {
    // `strata ftp --link`: the client's control connection and passive TCP
    // data on Strata's TCP, its XPSV data on Strata's xport/udp, all on
    // AF_PACKET on NAME-vb; `strata ftpd` on the kernel's sockets in the
    // other namespace. Each file checked by SHA-256 here and by the
    // server's HASH (verified=yes).
    let t = Topology::up("xf", &[]);
    let dir = Scratch::new("xport_stack_ftp");
    let served = dir.file("served");
    std::fs::create_dir(&served).unwrap();
    let original = format!("{served}/big.bin");
    random_file(&original, SIZE / 2, 26);
    let want = sha256_file(&original);
    let listen = format!("{}:2121", t.veth_ip(1));
    let ftpd = Proc::strata(&t.ns("a"), &["ftpd", &served, "--listen", &listen]);
    ftpd.wait_for("ready", SECS(10));
    let ftp = |data: &str, action: &[&str]| -> String {
        let mut args: Vec<String> =
            vec!["ftp".into(), listen.clone(), "--data".into(), data.into()];
        args.extend(link(&t));
        args.extend(action.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, out) = Proc::spawn(&t.ns("b"), STRATA, &args).wait(SECS(60));
        assert!(
            status.success(),
            "strata ftp {action:?} over {data} failed: {out}"
        );
        assert!(out.contains(&format!("sha256={want}")), "{out}");
        assert!(out.contains("verified=yes"), "the server's hash: {out}");
        assert!(out.contains(&format!("data={data}")), "{out}");
        out
    };
    let got = dir.file("got.bin");
    ftp("xport", &["get", "big.bin", &got]);
    assert_eq!(sha256_file(&got), want);
    ftp("xport", &["put", &original, "up.bin"]);
    assert_eq!(sha256_file(&format!("{served}/up.bin")), want);
    let got_tcp = dir.file("got-tcp.bin");
    ftp("tcp", &["get", "big.bin", &got_tcp]);
    assert_eq!(sha256_file(&got_tcp), want);
    drop(ftpd);
}

#[test]
fn strata_ftpd_on_the_strata_stack_serves_curl_and_strata_ftp() {
    // `strata ftpd --link`: the server's control connection and passive
    // TCP data on Strata's TCP, its XPSV data on Strata's xport/udp, all on
    // AF_PACKET on NAME-vb; curl (the kernel's TCP) and `strata ftp` (the
    // kernel's TCP and UDP) in the other namespace. Each file checked by
    // SHA-256 here, and by the server's HASH for `strata ftp`.
    let t = Topology::up("xg", &[]);
    let dir = Scratch::new("xport_stack_ftpd");
    let served = dir.file("served");
    std::fs::create_dir(&served).unwrap();
    let original = format!("{served}/big.bin");
    random_file(&original, SIZE / 2, 27);
    let want = sha256_file(&original);
    let mut args = vec!["ftpd".to_string(), served.clone(), "--listen".into()];
    args.push("0.0.0.0:2121".into());
    args.extend(link(&t));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ftpd = Proc::strata(&t.ns("b"), &args);
    ftpd.wait_for("ready", SECS(10));
    let server = format!("{}:2121", t.veth_ip(2));
    let url = |name: &str| format!("ftp://{server}/{name}");

    let run = |program: &str, args: &[&str]| -> String {
        let (status, out) = Proc::spawn(&t.ns("a"), program, args).wait(SECS(60));
        assert!(status.success(), "{program} {args:?} failed: {out}");
        out
    };
    let got = dir.file("curl.bin");
    run("curl", &["-sS", "-o", &got, &url("big.bin")]);
    assert_eq!(sha256_file(&got), want, "curl get");
    run("curl", &["-sS", "-T", &original, &url("curl-up.bin")]);
    assert_eq!(
        sha256_file(&format!("{served}/curl-up.bin")),
        want,
        "curl put"
    );

    let ftp = |data: &str, action: &[&str]| {
        let mut args = vec!["ftp", &server, "--data", data];
        args.extend(action);
        let out = run(STRATA, &args);
        assert!(out.contains(&format!("sha256={want}")), "{out}");
        assert!(out.contains("verified=yes"), "the server's hash: {out}");
        assert!(out.contains(&format!("data={data}")), "{out}");
    };
    let got = dir.file("xport.bin");
    ftp("xport", &["get", "big.bin", &got]);
    assert_eq!(sha256_file(&got), want, "strata ftp get over the transport");
    ftp("xport", &["put", &original, "xport-up.bin"]);
    assert_eq!(sha256_file(&format!("{served}/xport-up.bin")), want);
    let got = dir.file("tcp.bin");
    ftp("tcp", &["get", "big.bin", &got]);
    assert_eq!(sha256_file(&got), want, "strata ftp get over TCP");
    drop(ftpd);
}

/// A full data packet's payload (what fills a 1500-byte MTU).
fn mss() -> usize {
    strata_xport::Config::default().mss as usize
}
