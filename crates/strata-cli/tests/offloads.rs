//! A Strata host beside Linux on a veth as a plain `ip link add` makes it,
//! with the kernel's default offloads on: Linux's TCP super-segments of up
//! to 64 KB come into Strata whole, its `UDP_SEGMENT` super-datagrams come
//! in cut apart, nothing is dropped as oversize, everything arrives intact,
//! and the captures are clean for tshark. (Strata sending 50 MB to Linux on
//! the same kind of veth: `tcp_interop.rs`.)

mod common;

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

use common::{
    Proc, Scratch, Topology, assert_capture_clean, driver_super, field, random_file, run_in,
    sha256_file, text_field, tshark_count,
};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// `strata host` on `t`'s veth end in `b` (198.18.X.2) serving `serve`,
/// capturing to `pcap`.
fn host(t: &Topology, serve: &str, pcap: &str) -> Proc {
    Proc::strata(
        &t.ns("b"),
        &[
            "host",
            "--link",
            &format!("packet:{}", t.dev("vb")),
            "--ip",
            &format!("{}/24", t.veth_ip(2)),
            "--serve",
            serve,
            "--pcap",
            pcap,
        ],
    )
}

/// The reproduction: `head -c N /dev/zero | nc ADDR 9` stopped after
/// some 340 KB when Strata's packet link dropped every super-segment as
/// oversize.
#[test]
fn linux_sends_5_and_50_mb_into_strata_discard_on_a_default_veth_and_none_is_dropped() {
    let t = Topology::up("od", &[]);
    let dir = Scratch::new("offload_discard");
    let pcap = dir.file("host.pcap");
    let host = host(&t, "tcp-discard:9", &pcap);
    for bytes in [5_000_000, 50_000_000] {
        // -N: shut the connection down at the end of the input and wait for
        // Strata's close, so that every byte is in when nc exits.
        let nc = format!(
            "exec head -c {bytes} /dev/zero | nc -N -q1 {} 9",
            t.veth_ip(2)
        );
        let (status, _) = run_in(&t.ns("a"), "sh", &["-c", &nc], SECS(120));
        assert!(status.success(), "{nc}: {status}");
    }
    let report = host.stop();
    assert_eq!(
        field(&report, "app tcp-discard", "connections"),
        2,
        "{report}"
    );
    assert_eq!(
        field(&report, "app tcp-discard", "bytes"),
        55_000_000,
        "{report}"
    );
    let driver = "driver link net0";
    assert_eq!(field(&report, driver, "oversize"), 0, "{report}");
    assert_eq!(field(&report, driver, "vnet"), 0, "{report}");
    assert!(driver_super(&report).0 > 0, "super-segments came: {report}");
    assert!(
        report.contains("offloads=vnet,rx-csum,rx-tso4,rx-uso4,tx-tso4"),
        "{report}"
    );
    assert_capture_clean(&pcap, 55_000_000 / 1500);
}

#[test]
fn strata_tcp_recv_gets_50_mb_from_linux_nc_intact_on_a_default_veth() {
    let t = Topology::up("or", &[]);
    let dir = Scratch::new("offload_recv");
    let file = dir.file("file.bin");
    random_file(&file, 50_000_000, 13);
    let want = sha256_file(&file);
    let (got, pcap) = (dir.file("got.bin"), dir.file("recv.pcap"));
    let recv = Proc::strata(
        &t.ns("b"),
        &[
            "tcp-recv",
            "5001",
            &got,
            "--link",
            &format!("packet:{}", t.dev("vb")),
            "--ip",
            &format!("{}/24", t.veth_ip(2)),
            "--pcap",
            &pcap,
            "--stats",
        ],
    );
    let nc = format!("exec nc -N {} 5001 < {file}", t.veth_ip(2));
    let (status, _) = run_in(&t.ns("a"), "sh", &["-c", &nc], SECS(120));
    assert!(status.success(), "{nc}: {status}");
    let (status, out) = recv.wait(SECS(30));
    assert!(status.success(), "tcp-recv: {status}\n{out}");
    assert_eq!(field(&out, "received", "bytes"), 50_000_000, "{out}");
    assert_eq!(text_field(&out, "received", "sha256"), want, "{out}");
    assert_eq!(sha256_file(&got), want, "the file as it was sent");
    assert!(driver_super(&out).0 > 0, "super-segments came: {out}");
    assert_eq!(field(&out, "driver link net0", "oversize"), 0, "{out}");
    assert_capture_clean(&pcap, 50_000_000 / 1500);
}

/// `UDP_SEGMENT` (udp(7), Linux 4.18) on a socket: every datagram sent is cut
/// into datagrams of `size` payload bytes, by the device or the kernel's GSO.
fn segment_udp(socket: &UdpSocket, size: u16) {
    let value = libc::c_int::from(size);
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes at the pointer,
    // a live local, on a descriptor the socket owns for the whole call.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(ret, 0, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
}

#[test]
fn linux_udp_segment_super_datagrams_reach_strata_as_their_datagrams_and_echo_back_intact() {
    let t = Topology::up("ou", &[]);
    let dir = Scratch::new("offload_udp");
    let pcap = dir.file("host.pcap");
    let (me, them) = (t.veth_ip(2), t.veth_ip(1));
    let host = host(&t, "udp-echo:7", &pcap);
    let socket = strata::link::drivers::netns::within(Some(&t.ns("a")), || {
        UdpSocket::bind((them.as_str(), 0))
    })
    .expect("socket");
    socket.set_read_timeout(Some(SECS(3))).unwrap();
    socket.connect((me.as_str(), 7)).unwrap();
    segment_udp(&socket, 1000);
    let rounds: u32 = 5;
    for round in 0..rounds {
        // Ten datagrams in one send: nine of 1000 bytes and one of 500.
        let sent: Vec<u8> = (0..9500u32).map(|i| (i * 7 + round) as u8).collect();
        socket.send(&sent).expect("a super-datagram");
        let mut back = Vec::new();
        let mut buf = [0u8; 2000];
        for _ in 0..10 {
            let n = socket.recv(&mut buf).expect("an echoed datagram");
            assert!(n == 1000 || n == 500, "datagram of {n} bytes");
            back.extend_from_slice(&buf[..n]);
        }
        assert_eq!(back, sent, "round {round}: every byte back in order");
    }
    let report = host.stop();
    assert_eq!(field(&report, "app udp-echo", "echoed"), 50, "{report}");
    assert_eq!(field(&report, "app udp-echo", "bytes"), 47_500, "{report}");
    let driver = "driver link net0";
    assert_eq!(
        field(&report, driver, "super"),
        u64::from(rounds),
        "{report}"
    );
    assert_eq!(field(&report, driver, "cut"), 50, "{report}");
    assert_capture_clean(&pcap, 100);
    assert_eq!(tshark_count(&pcap, "udp.dstport == 7"), 50);
    assert_eq!(tshark_count(&pcap, "udp.srcport == 7"), 50);
}
