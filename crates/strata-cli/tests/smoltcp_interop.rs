//! smoltcp's TCP imported into Strata (`smoltcp-tcp`, seed 004) against
//! Linux's over a veth with AF_PACKET: `strata host --stack
//! udp+smoltcp-tcp/ip/eth` serves curl a 50 MB file over HTTP and nc its
//! 10 MB back through the echo service, every byte checked by SHA-256, the
//! capture clean for tshark, and the module's counters in the host's report.

mod common;

use std::time::Duration;

use common::{
    Proc, Scratch, Topology, assert_capture_clean, field, ok_in, random_file, run_in, sha256_file,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;

const FILE: usize = 50_000_000;
const ECHO: usize = 10_000_000;
const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn over_a_veth_curl_and_nc_exchange_50_mb_with_smoltcp_imported_into_strata() {
    let t = Topology::up("sv", &[]);
    let dir = Scratch::new("smoltcp_veth");
    let (strata_ns, linux_ns, strata_ip) = (t.ns("b"), t.ns("a"), t.veth_ip(2));
    let www = dir.file("www");
    std::fs::create_dir_all(&www).unwrap();
    let file = format!("{www}/file.bin");
    random_file(&file, FILE, 1);
    let pcap = dir.file("host.pcap");
    let link = format!("packet:{}", t.dev("vb"));
    let cidr = format!("{strata_ip}/24");
    let serve = format!("http:80:{www},tcp-echo:7");
    let host = Proc::strata(
        &strata_ns,
        &[
            "host",
            "--link",
            &link,
            "--ip",
            &cidr,
            "--stack",
            "udp+smoltcp-tcp/ip/eth",
            "--serve",
            &serve,
            "--pcap",
            &pcap,
        ],
    );

    let got = dir.file("curl.bin");
    let url = format!("http://{strata_ip}/file.bin");
    let limit = LIMIT.as_secs().to_string();
    let speed = ok_in(
        &linux_ns,
        "curl",
        &[
            "-sS",
            "--fail",
            "--max-time",
            &limit,
            "-o",
            &got,
            "-w",
            "%{speed_download}",
            &url,
        ],
        LIMIT + SECS(5),
    );
    assert_eq!(
        sha256_file(&got),
        sha256_file(&file),
        "curl got the file as it is"
    );
    println!("curl downloaded {FILE} B from smoltcp-tcp at {speed} B/s");
    let missing = format!("http://{strata_ip}/no-such-file");
    let status = ok_in(
        &linux_ns,
        "curl",
        &["-sS", "-o", "/dev/null", "-w", "%{http_code}", &missing],
        SECS(30),
    );
    assert_eq!(status.trim(), "404");

    let (sent, back) = (dir.file("echo-in.bin"), dir.file("echo-out.bin"));
    random_file(&sent, ECHO, 2);
    // `exec`, so that a kill on timeout reaches nc itself.
    let nc = format!("exec nc -N {strata_ip} 7 < {sent} > {back}");
    let (status, _) = run_in(&linux_ns, "sh", &["-c", &nc], LIMIT);
    assert!(status.success(), "{nc}: {status}");
    assert_eq!(
        sha256_file(&back),
        sha256_file(&sent),
        "the echo came back whole"
    );

    let report = host.stop();
    let app = |line: &str, key: &str| field(&report, line, key);
    assert_eq!(app("app http", "ok"), 1, "{report}");
    assert_eq!(app("app http", "errors"), 1, "the 404: {report}");
    assert_eq!(app("app http", "body_bytes"), FILE as u64, "{report}");
    assert_eq!(app("app tcp-echo", "bytes"), ECHO as u64, "{report}");
    assert_eq!(
        field(&report, "proto smoltcp-tcp", "passive-open"),
        3,
        "the download, the 404 and the echo went through smoltcp: {report}"
    );
    assert!(
        !report.contains("proto tcp "),
        "Strata's own TCP is not in the stack: {report}"
    );
    assert_capture_clean(&pcap, (FILE + 2 * ECHO) / 1500);
}
