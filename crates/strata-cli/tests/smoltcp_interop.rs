//! smoltcp's TCP imported into Strata (`smoltcp-tcp`, seed 004) against
//! Linux's over a veth with AF_PACKET: `strata host --stack
//! udp+smoltcp-tcp/ip/eth` serves curl a 50 MB file over HTTP and nc its
//! 10 MB back through the echo service, every byte checked by SHA-256, with
//! the module's counters in the host's report; then, captured, a shorter
//! exchange of each kind whose every frame tshark must find clean (a 50 MB
//! capture would take tshark minutes on this machine; what it checks does
//! not grow with the size).

mod common;

use std::time::Duration;

use common::{
    Proc, Scratch, Topology, assert_capture_clean, field, ok_in, random_file, run_in, sha256_file,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;

const LIMIT: Duration = Duration::from_secs(120);

/// Where the hosts are and what they serve.
struct Setup {
    t: Topology,
    dir: Scratch,
    www: String,
}

impl Setup {
    /// `strata host` on smoltcp's TCP, serving HTTP from `www` and echo,
    /// capturing to `pcap` when given.
    fn host(&self, pcap: Option<&str>) -> Proc {
        let link = format!("packet:{}", self.t.dev("vb"));
        let cidr = format!("{}/24", self.t.veth_ip(2));
        let serve = format!("http:80:{},tcp-echo:7", self.www);
        let mut args = vec![
            "host",
            "--link",
            &link,
            "--ip",
            &cidr,
            "--stack",
            "udp+smoltcp-tcp/ip/eth",
            "--serve",
            &serve,
        ];
        if let Some(p) = pcap {
            args.extend(["--pcap", p]);
        }
        Proc::strata(&self.t.ns("b"), &args)
    }

    /// curl downloads `name`; returns its speed.
    fn download(&self, name: &str) -> String {
        let got = self.dir.file(&format!("got-{name}"));
        let url = format!("http://{}/{name}", self.t.veth_ip(2));
        let limit = LIMIT.as_secs().to_string();
        let args = [
            "-sS",
            "--fail",
            "--max-time",
            &limit,
            "-o",
            &got,
            "-w",
            "%{speed_download}",
            &url,
        ];
        let speed = ok_in(&self.t.ns("a"), "curl", &args, LIMIT + SECS(5));
        let want = sha256_file(&format!("{}/{name}", self.www));
        assert_eq!(sha256_file(&got), want, "curl got {name} as it is");
        speed
    }

    /// What curl's request for a missing file is answered.
    fn missing(&self) -> String {
        let url = format!("http://{}/no-such-file", self.t.veth_ip(2));
        let args = ["-sS", "-o", "/dev/null", "-w", "%{http_code}", &url];
        ok_in(&self.t.ns("a"), "curl", &args, SECS(30))
    }

    /// nc sends `len` bytes to the echo service and gets them back.
    fn echo(&self, len: usize, seed: u64) {
        let (sent, back) = (
            self.dir.file(&format!("echo-in-{len}")),
            self.dir.file(&format!("echo-out-{len}")),
        );
        random_file(&sent, len, seed);
        // `exec`, so that a kill on timeout reaches nc itself.
        let nc = format!("exec nc -N {} 7 < {sent} > {back}", self.t.veth_ip(2));
        let (status, _) = run_in(&self.t.ns("a"), "sh", &["-c", &nc], LIMIT);
        assert!(status.success(), "{nc}: {status}");
        assert_eq!(
            sha256_file(&back),
            sha256_file(&sent),
            "the echo came back whole"
        );
    }
}

#[test]
fn over_a_veth_curl_and_nc_exchange_50_mb_with_smoltcp_imported_into_strata() {
    let t = Topology::up("sv", &[]);
    let dir = Scratch::new("smoltcp_veth");
    let www = dir.file("www");
    std::fs::create_dir_all(&www).unwrap();
    random_file(&format!("{www}/big.bin"), 50_000_000, 1);
    random_file(&format!("{www}/small.bin"), 1_000_000, 3);
    let s = Setup { t, dir, www };

    let host = s.host(None);
    let speed = s.download("big.bin");
    println!("curl downloaded 50 MB from smoltcp-tcp at {speed} B/s");
    assert_eq!(s.missing().trim(), "404");
    s.echo(10_000_000, 2);
    let report = host.stop();
    let app = |line: &str, key: &str| field(&report, line, key);
    assert_eq!(app("app http", "ok"), 1, "{report}");
    assert_eq!(app("app http", "errors"), 1, "the 404: {report}");
    assert_eq!(app("app http", "body_bytes"), 50_000_000, "{report}");
    assert_eq!(app("app tcp-echo", "bytes"), 10_000_000, "{report}");
    assert_eq!(
        app("proto smoltcp-tcp", "passive-open"),
        3,
        "the download, the 404 and the echo went through smoltcp: {report}"
    );
    assert!(
        !report.contains("proto tcp "),
        "Strata's own TCP is not in the stack: {report}"
    );

    let pcap = s.dir.file("host.pcap");
    let host = s.host(Some(&pcap));
    s.download("small.bin");
    assert_eq!(s.missing().trim(), "404");
    s.echo(1_000_000, 4);
    host.stop();
    assert_capture_clean(&pcap, 3 * 1_000_000 / 1500);
}
