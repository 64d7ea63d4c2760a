//! Seed 001's transport over kernel UDP between two namespaces, through
//! `strata wanem`: `strata xsend`/`xrecv` move a file intact through delay
//! and loss, resume after the receiver is killed, and finish a transfer
//! under a rain of hostile datagrams, each counted as a drop.

mod common;

use std::time::Duration;

use common::{Proc, STRATA, Scratch, Topology, random_file, sha256_file};

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn wanem(t: &Topology, extra: &[&str]) -> Proc {
    let mut args = vec!["wanem", "--between"];
    let (a, b) = (t.dev("wa"), t.dev("wb"));
    args.push(&a);
    args.push(&b);
    args.extend_from_slice(extra);
    Proc::strata(&t.ns("w"), &args)
}

fn receiver(t: &Topology, dir: &str, port: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["xrecv", port, dir];
    args.extend_from_slice(extra);
    Proc::strata(&t.ns("b"), &args)
}

fn send(t: &Topology, file: &str, port: &str, extra: &[&str], limit: Duration) -> (bool, String) {
    let to = format!("{}:{port}", t.veth_ip(2));
    let mut args = vec!["xsend", file, &to];
    args.extend_from_slice(extra);
    let (status, out) = Proc::spawn(&t.ns("a"), STRATA, &args).wait(limit);
    (status.success(), out)
}

#[test]
fn a_file_crosses_wanem_at_50_ms_and_1_percent_loss_with_its_hash() {
    let t = Topology::up("xw", &["--wan", "--both"]);
    let dir = Scratch::new("xport_wanem");
    let _w = wanem(&t, &["--delay", "25ms", "--loss", "1%", "--seed", "3"]);
    let file = dir.file("in.bin");
    random_file(&file, 3 << 20, 11);
    let out_dir = dir.file("out");
    let r = receiver(&t, &out_dir, "7400", &[]);
    let (ok, sent) = send(&t, &file, "7400", &[], SECS(120));
    assert!(ok, "xsend failed: {sent}");
    let (status, got) = r.wait(SECS(20));
    assert!(status.success(), "xrecv failed: {got}");
    let want = sha256_file(&file);
    assert!(sent.contains(&format!("sha256={want}")), "{sent}");
    assert!(got.contains(&format!("sha256={want}")), "{got}");
    assert_eq!(sha256_file(&format!("{out_dir}/in.bin")), want);
    let leftovers: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "only the renamed file remains");
}

#[test]
fn a_transfer_resumes_after_the_receiver_is_killed() {
    let t = Topology::up("xr", &["--wan", "--both"]);
    let dir = Scratch::new("xport_resume");
    let _w = wanem(
        &t,
        &["--delay", "5ms", "--rate", "40mbit", "--queue", "512KB"],
    );
    let file = dir.file("big.bin");
    random_file(&file, 24 << 20, 12);
    let out_dir = dir.file("out");
    let r = receiver(&t, &out_dir, "7401", &["--resume"]);
    let to = format!("{}:7401", t.veth_ip(2));
    let sender = Proc::spawn(
        &t.ns("a"),
        STRATA,
        &["xsend", &file, &to, "--resume", "--idle-timeout", "2s"],
    );
    std::thread::sleep(SECS(2));
    r.signal("KILL");
    let (status, _) = sender.wait(SECS(30));
    assert!(
        !status.success(),
        "the sender must notice the receiver vanished"
    );
    let part: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(part.len() == 1 && part[0].ends_with(".xpart"), "{part:?}");

    let r = receiver(&t, &out_dir, "7401", &["--resume"]);
    let (ok, sent) = send(&t, &file, "7401", &["--resume"], SECS(60));
    assert!(ok, "resumed xsend failed: {sent}");
    let (_, got) = r.wait(SECS(20));
    let from: u64 = got
        .split("from=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no from= in {got}"));
    assert!(from > 0, "the second run started over: {got}");
    assert_eq!(
        sha256_file(&format!("{out_dir}/big.bin")),
        sha256_file(&file)
    );
}

#[test]
fn hostile_datagrams_at_the_control_and_data_ports_are_counted_and_harmless() {
    let t = Topology::up("xh", &["--wan", "--both"]);
    let dir = Scratch::new("xport_hostile");
    let _w = wanem(&t, &["--delay", "2ms", "--rate", "100mbit"]);
    let file = dir.file("in.bin");
    random_file(&file, 12 << 20, 13);
    let out_dir = dir.file("out");
    let r = receiver(&t, &out_dir, "7402", &[]);
    let ready = r.stdout();
    let data_ports = ready
        .split("data-ports=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no data ports in {ready}"))
        .to_string();
    // Random bytes, and packets shaped like the transport's (version 1, each
    // type) with random ids and fields, at the control and data ports.
    let script = format!(
        r#"
import os, random, socket, time
random.seed(5)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ports = [7402] + [int(p) for p in "{data_ports}".split(",")]
end = time.time() + 4
n = 0
while time.time() < end:
    for p in ports:
        k = random.randrange(3)
        if k == 0:
            d = os.urandom(random.randrange(0, 1500))
        else:
            d = bytes([1, random.randrange(1, 7)]) + os.urandom(random.choice([14, 30, 38, 54, 1438]))
        s.sendto(d, ("{ip}", p))
        n += 1
    time.sleep(0.0005)
print("flooded", n)
"#,
        ip = t.veth_ip(2)
    );
    let flood = Proc::spawn(&t.ns("a"), "python3", &["-c", &script]);
    let (ok, sent) = send(&t, &file, "7402", &[], SECS(60));
    assert!(ok, "xsend failed under the flood: {sent}");
    let (fstatus, fout) = flood.wait(SECS(20));
    assert!(fstatus.success(), "{fout}");
    let (status, got) = r.wait(SECS(20));
    assert!(status.success(), "xrecv failed: {got}");
    assert_eq!(
        sha256_file(&format!("{out_dir}/in.bin")),
        sha256_file(&file)
    );
    let drops: u64 = got
        .split("drops total=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no drops line in {got}"));
    assert!(drops > 100, "the flood was not counted: {got}");
}
