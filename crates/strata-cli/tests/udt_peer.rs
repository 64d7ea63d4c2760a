//! The UDT4 peer of `strata bench paper001` (our C++ harness over Debian's
//! libudt-dev, compiled at run time) keeps working: a file crosses a veth
//! between namespaces intact, and the benchmark's transfer reports every
//! byte.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use common::{Proc, Scratch, Topology, random_file, sha256_file};
use strata_bench::peers::udt::UdtPeer;

const LEN: usize = 6 << 20;

#[test]
fn a_file_crosses_the_udt_harness_intact_and_the_bench_counts_every_byte() {
    let peer = UdtPeer::build().expect("g++ compiles the UDT harness against libudt-dev");
    let t = Topology::up("udt", &["--both"]);
    let dir = Scratch::new("udt_peer");
    let (src, dst) = (dir.file("in.bin"), dir.file("out.bin"));
    random_file(&src, LEN, 21);
    let n = LEN.to_string();
    let r = Proc::spawn(&t.ns("b"), peer.exe(), &["recv", "7510", &n, &dst]);
    r.wait_for("ready", Duration::from_secs(10));
    let ip = t.veth_ip(2);
    let s = Proc::spawn(&t.ns("a"), peer.exe(), &["send", &ip, "7510", &n, &src]);
    let (status, sent) = s.wait(Duration::from_secs(60));
    assert!(status.success(), "sender: {sent}");
    let (status, got) = r.wait(Duration::from_secs(20));
    assert!(status.success(), "receiver: {got}");
    assert!(got.contains(&format!("received bytes={LEN} ")), "{got}");
    assert_eq!(sha256_file(&dst), sha256_file(&src));

    let to = SocketAddrV4::new(ip.parse::<Ipv4Addr>().unwrap(), 7511);
    let (a, b) = (t.ns("a"), t.ns("b"));
    let moved = peer
        .transfer(Some(&a), Some(&b), to, 3 << 20, Duration::from_secs(60))
        .expect("a bench transfer over UDT");
    assert_eq!(moved.bytes, 3 << 20);
    assert!(moved.secs > 0.0 && moved.mbit_s() > 0.0, "{moved:?}");
}
