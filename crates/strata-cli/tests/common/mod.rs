//! What the real-link tests share: namespace topologies and processes that
//! clean up after themselves even when a test fails, and the tshark check
//! every capture must pass.
//!
//! Names are unique per test and per run — "s", the test process's id, and a
//! tag — so tests running in parallel, or two runs at once, never share a
//! namespace or a device.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The strata binary under test.
pub const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A topology made by `scripts/netns`, torn down on drop.
pub struct Topology {
    name: String,
    x: u8,
}

impl Topology {
    /// `scripts/netns up NAME FLAGS…` for a name made of this process's id and
    /// `tag` (at most 6 characters).
    pub fn up(tag: &str, flags: &[&str]) -> Topology {
        assert!(tag.len() <= 6, "tag '{tag}' too long for interface names");
        let name = format!("s{}{tag}", std::process::id() % 100_000);
        let script = repo_root().join("scripts/netns");
        // A leftover of an earlier run with the same id goes first.
        let _ = Command::new(&script).args(["down", &name]).status();
        let out = Command::new(&script)
            .arg("up")
            .arg(&name)
            .args(flags)
            .output()
            .expect("scripts/netns runs");
        let mut topology = Topology {
            name: name.clone(),
            x: 0,
        };
        assert!(
            out.status.success(),
            "scripts/netns up {name} {flags:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let subnet = Command::new(&script)
            .args(["subnet", &name])
            .output()
            .expect("scripts/netns runs");
        topology.x = String::from_utf8_lossy(&subnet.stdout)
            .trim()
            .parse()
            .expect("a subnet number");
        topology
    }

    /// Namespace `side` ("a", "b" or "w").
    pub fn ns(&self, side: &str) -> String {
        format!("{}-{side}", self.name)
    }

    /// Device `dev` ("va", "vb", "wa", "wb", "t").
    pub fn dev(&self, dev: &str) -> String {
        format!("{}-{dev}", self.name)
    }

    /// Address `host` of the veth subnet, 198.18.X.host.
    pub fn veth_ip(&self, host: u8) -> String {
        format!("198.18.{}.{host}", self.x)
    }

    /// Address `host` of the TAP subnet, 198.19.X.host.
    pub fn tap_ip(&self, host: u8) -> String {
        format!("198.19.{}.{host}", self.x)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/netns"))
            .args(["down", &self.name])
            .status();
    }
}

/// A process in a namespace whose output is collected as it comes; killed on
/// drop if still running.
pub struct Proc {
    child: Child,
    what: String,
    out: Arc<Mutex<Vec<String>>>,
    err: Arc<Mutex<Vec<String>>>,
}

fn collect(stream: impl Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            into.lock().unwrap().push(line);
        }
    });
}

impl Proc {
    /// Starts `program args…` in namespace `ns`.
    pub fn spawn(ns: &str, program: &str, args: &[&str]) -> Proc {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ip netns exec starts");
        let (out, err) = (Arc::default(), Arc::default());
        collect(child.stdout.take().unwrap(), Arc::clone(&out));
        collect(child.stderr.take().unwrap(), Arc::clone(&err));
        Proc {
            child,
            what: format!("{program} {}", args.join(" ")),
            out,
            err,
        }
    }

    /// Starts `strata args…` in namespace `ns` and waits for its "ready".
    pub fn strata(ns: &str, args: &[&str]) -> Proc {
        let p = Proc::spawn(ns, STRATA, args);
        p.wait_for("ready", Duration::from_secs(10));
        p
    }

    /// Everything printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.out.lock().unwrap().join("\n")
    }

    /// Everything printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.err.lock().unwrap().join("\n")
    }

    /// Waits until a line of stdout contains `needle`.
    pub fn wait_for(&self, needle: &str, timeout: Duration) {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self.out.lock().unwrap().iter().any(|l| l.contains(needle)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "'{}' did not print '{needle}' within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
            self.what,
            self.stdout(),
            self.stderr()
        );
    }

    /// Sends a signal ("INT", "USR1" …).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args(["-s", sig, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -s {sig} {} failed", self.child.id());
    }

    /// Waits for the process to end by itself; kills it after `timeout`.
    pub fn wait(mut self, timeout: Duration) -> (ExitStatus, String) {
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the readers take the last lines.
                std::thread::sleep(Duration::from_millis(50));
                return (status, self.stdout());
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                panic!(
                    "'{}' did not finish within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                    self.what,
                    self.stdout(),
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Interrupts the process (SIGINT) and returns its stdout once it exited
    /// successfully.
    pub fn stop(self) -> String {
        self.signal("INT");
        let what = self.what.clone();
        let err = Arc::clone(&self.err);
        let (status, out) = self.wait(Duration::from_secs(10));
        assert!(
            status.success(),
            "'{what}' exited with {status}\nstdout:\n{out}\nstderr:\n{}",
            err.lock().unwrap().join("\n")
        );
        out
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `program args…` in namespace `ns` to completion (at most `timeout`)
/// and returns its status and stdout.
pub fn run_in(ns: &str, program: &str, args: &[&str], timeout: Duration) -> (ExitStatus, String) {
    Proc::spawn(ns, program, args).wait(timeout)
}

/// Like [`run_in`], and the command must succeed.
pub fn ok_in(ns: &str, program: &str, args: &[&str], timeout: Duration) -> String {
    let (status, out) = run_in(ns, program, args, timeout);
    assert!(
        status.success(),
        "'{program} {}' in {ns} failed with {status}:\n{out}",
        args.join(" ")
    );
    out
}

/// A folder for one test's captures, under cargo's scratch space; removed
/// when the test passes, kept for inspection when it fails.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh folder named after the test and this process.
    pub fn new(test: &str) -> Scratch {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch folder");
        Scratch(dir)
    }

    /// A file in it, as a string for command lines.
    pub fn file(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// tshark's checksum checks, all on (they are off by default).
const CHECKSUMS: [&str; 6] = [
    "-o",
    "ip.check_checksum:TRUE",
    "-o",
    "udp.check_checksum:TRUE",
    "-o",
    "tcp.check_checksum:TRUE",
];

/// The protocols a Strata host (or a kernel through the bridge) puts on the
/// wire: any error tshark's expert finds in them is a problem.
const FRAME_LAYERS: [&str; 9] = [
    "Frame", "ETH", "Ethernet", "ARP", "IPv4", "ICMP", "UDP", "TCP", "XPORT",
];

/// tshark's option loading Strata's ETHDAA dissector, so frames on a DAA link are
/// dissected (and checked) down to the protocols they carry.
pub fn ethdaa_dissector() -> String {
    let script = repo_root().join("tools/wireshark/ethdaa.lua");
    assert!(script.exists(), "{} is missing", script.display());
    format!("lua_script:{}", script.display())
}

/// tshark's option loading the dissector of seed 001's transport (a
/// heuristic on UDP), so its datagrams are dissected and checked too.
pub fn xport_dissector() -> String {
    let script = repo_root().join("tools/wireshark/xport.lua");
    assert!(script.exists(), "{} is missing", script.display());
    format!("lua_script:{}", script.display())
}

/// What tshark's expert (`-z expert,error`) reports wrong with a capture, one
/// line per kind of error ("frequency group protocol summary"), and the
/// capture's frame count.
///
/// Every malformed packet and every bad checksum is a problem, in whatever
/// protocol, and so is every other error in the frame layers (a length that
/// disagrees with the packet, say). An error a payload dissector reports about
/// the content of its payload is not: tshark guesses application protocols
/// from payload bytes, and test payloads (iperf3's random data, the transfer
/// pattern) sometimes look enough like one — Thrift, say — for its dissector to
/// complain about data that was never of its protocol.
pub fn tshark_problems(path: &str) -> (usize, Vec<String>) {
    let dissector = ethdaa_dissector();
    let count = Command::new("tshark")
        .args(["-n", "-r", path, "-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark runs");
    assert!(
        count.status.success(),
        "tshark cannot read {path}: {}",
        String::from_utf8_lossy(&count.stderr)
    );
    let frames = String::from_utf8_lossy(&count.stdout).lines().count();
    let expert = Command::new("tshark")
        .args(["-X", &dissector, "-X", &xport_dissector()])
        .args(["-n", "-r", path, "-q", "-z", "expert,error"])
        .args(CHECKSUMS)
        .output()
        .expect("tshark runs");
    assert!(
        expert.status.success(),
        "tshark refused the check on {path}: {}",
        String::from_utf8_lossy(&expert.stderr)
    );
    let problems = String::from_utf8_lossy(&expert.stdout)
        .lines()
        .filter(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            match cols.as_slice() {
                [n, group, protocol, ..] if n.parse::<u64>().is_ok() => {
                    matches!(*group, "Malformed" | "Checksum") || FRAME_LAYERS.contains(protocol)
                }
                _ => false,
            }
        })
        .map(|l| l.trim().to_string())
        .collect();
    (frames, problems)
}

/// Asserts tshark reads the capture, finds at least `min_frames` frames and
/// nothing malformed or with a bad checksum. Returns the frame count.
pub fn assert_capture_clean(path: &str, min_frames: usize) -> usize {
    let (frames, problems) = tshark_problems(path);
    assert!(
        frames >= min_frames,
        "{path}: {frames} frames, expected at least {min_frames}"
    );
    assert!(
        problems.is_empty(),
        "{path}: tshark found problems:\n{}",
        problems.join("\n")
    );
    frames
}

/// Packets of a capture that match a tshark display filter.
pub fn tshark_count(path: &str, filter: &str) -> usize {
    let out = Command::new("tshark")
        .args(["-X", &ethdaa_dissector(), "-X", &xport_dissector()])
        .args([
            "-n",
            "-r",
            path,
            "-Y",
            filter,
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark -Y '{filter}' on {path} failed"
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .count()
}

/// The value of `key=` on the first line of `text` that starts with `prefix`.
pub fn field(text: &str, prefix: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with '{prefix}' in:\n{text}"));
    let pat = format!("{key}=");
    let start = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no '{key}=' in line '{line}'"))
        + pat.len();
    let digits: String = line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("'{key}=' is not a number in '{line}'"))
}

/// A Strata host's TCP super-segments that crossed its link whole, from its
/// report's driver line: (received from the kernel, sent to the kernel).
pub fn driver_super(report: &str) -> (u64, u64) {
    let line = report
        .lines()
        .find(|l| l.starts_with("driver link net0"))
        .unwrap_or_else(|| panic!("no driver line in:\n{report}"));
    let (rx, tx) = line
        .split_once("; tx ")
        .unwrap_or_else(|| panic!("no transmit counts in '{line}'"));
    (field(rx, "driver", "super"), field(tx, "", "super"))
}

/// The words after `word` on the first line starting with `prefix`, as a number
/// ("offered 7143 forwarded …" → `after(…, "udp", "offered")`).
pub fn after(text: &str, prefix: &str, word: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with '{prefix}' in:\n{text}"));
    let mut words = line.split_whitespace();
    words
        .find(|w| *w == word)
        .unwrap_or_else(|| panic!("no '{word}' in '{line}'"));
    words
        .next()
        .and_then(|w| w.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no number after '{word}' in '{line}'"))
}

/// The line of ping's summary "N packets transmitted, M received" as (N, M).
pub fn ping_counts(out: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary in:\n{out}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(2)
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}

/// The text after `key=` (up to the next space) on the first line of `text`
/// that starts with `prefix`.
pub fn text_field(text: &str, prefix: &str, key: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with '{prefix}' in:\n{text}"));
    let pat = format!("{key}=");
    let start = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no '{key}=' in line '{line}'"))
        + pat.len();
    line[start..]
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Writes `len` pseudo-random bytes (xorshift64*, from `seed`) to `path`.
pub fn random_file(path: &str, len: usize, seed: u64) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("creating a file"));
    let mut x = seed | 1;
    let mut left = len;
    while left > 0 {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let word = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        let n = left.min(8);
        out.write_all(&word[..n]).expect("writing a file");
        left -= n;
    }
    out.flush().expect("writing a file");
}

/// The SHA-256 of a file, in lowercase hex (as sha256sum and Strata print it).
pub fn sha256_file(path: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).expect("reading a file");
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Waits until a TCP socket listens on `port` in namespace `ns` (so a client
/// started next is not refused by a server still starting).
pub fn wait_listening(ns: &str, port: u16, timeout: Duration) {
    let end = Instant::now() + timeout;
    let filter = format!("sport = :{port}");
    while Instant::now() < end {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "ss", "-Hltn", &filter])
            .output()
            .expect("ss runs");
        if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on TCP port {port} in {ns} after {timeout:?}");
}

/// An Ethernet/IPv4/UDP frame from 198.18.0.1:`sport` to 198.18.0.2:`dport`
/// carrying `payload`, with correct checksums (for captures a test writes
/// itself with Strata's pcap writer).
pub fn udp_frame(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![
        0x02, 0x53, 0x54, 0, 0, 2, 0x02, 0x53, 0x54, 0, 0, 1, 0x08, 0x00,
    ];
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let sum = strata::core::checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let len = (8 + payload.len()) as u16;
    let mut udp = vec![0u8; 8];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&len.to_be_bytes());
    let mut c = strata::core::checksum::Checksum::new();
    c.add_pseudo_header([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), 17, len);
    c.add(&udp);
    c.add(payload);
    udp[6..8].copy_from_slice(&c.finish().to_be_bytes());
    f.extend(ip);
    f.extend(udp);
    f.extend_from_slice(payload);
    f
}
