//! tools/wireshark/xport.lua decodes every packet kind of seed 001's
//! transport as strata-xport writes it, field by field, and every packet of
//! a real transfer captured on a veth; and its checks can fail: a bad data
//! checksum and a set-up without a payload size are expert errors, a bad
//! header checksum — a data packet cut short among them — is not claimed.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    Proc, STRATA, Scratch, Topology, assert_capture_clean, ok_in, random_file, sha256_file,
    tshark_count, tshark_problems, udp_frame, xport_dissector,
};
use strata::link::PcapWriter;
use strata_xport::wire::{self, ControlRepr, DataRepr, Recovery, Repr, SetupRepr, flags};

fn packet(repr: &Repr, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    repr.emit(&mut out, [payload]);
    if matches!(repr, Repr::Data(_)) {
        out.extend_from_slice(payload);
    }
    out
}

fn data(seq: u32, payload: &[u8], fl: u16) -> Vec<u8> {
    let repr = Repr::Data(DataRepr {
        to: 0x1122_3344_5566_7788,
        flags: fl,
        seq,
        tsval: 777,
        // Modulo 2^32 on the wire: a stream 5 × 2^32 bytes in.
        offset: (u64::from(seq) * 1000 + (5 << 32)) as u32,
        len: payload.len() as u32,
    });
    packet(&repr, payload)
}

/// One of each kind, in the order of a connection's life.
fn every_kind() -> Vec<Vec<u8>> {
    let setup = |own_id, ports: &[u16]| SetupRepr {
        own_id,
        isn: 4_000_000_000,
        app_buffer: 512_000,
        socket_buffer: 4 << 20,
        max_payload: 1444,
        data_checksum: own_id & 1 == 0,
        data_ports: ports.to_vec(),
    };
    vec![
        packet(
            &Repr::Connect {
                setup: setup(0xAAAA_0000_0000_0001, &[40001, 40002]),
                cookie: [0; 16],
            },
            &[],
        ),
        packet(
            &Repr::Retry {
                to: 0xAAAA_0000_0000_0001,
                cookie: [7; 16],
            },
            &[],
        ),
        packet(
            &Repr::Accept {
                to: 0xAAAA_0000_0000_0001,
                setup: setup(0xBBBB_0000_0000_0002, &[50001, 50002, 50003, 50004]),
            },
            &[],
        ),
        data(100, &[0x5a; 1357], flags::DATA_CHECKSUM),
        packet(
            &Repr::Control(ControlRepr {
                to: 0xAAAA_0000_0000_0001,
                flags: flags::FIN_SEEN,
                next_expected: 101,
                ts_echo: 777,
                cwnd: 64,
                recovery: Recovery::Selective,
                serial: 9,
                limit: 1 << 40,
                gaps: vec![(103, 105), (110, 111), (200, 300)],
            }),
            &[],
        ),
        data(101, b"last bytes", flags::FIN | flags::RETRANSMISSION),
        packet(
            &Repr::Reset {
                to: 0xBBBB_0000_0000_0002,
                reason: 1,
            },
            &[],
        ),
    ]
}

fn capture(dir: &Scratch, name: &str, packets: &[Vec<u8>]) -> String {
    let path = dir.file(name);
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, p) in packets.iter().enumerate() {
        let frame = udp_frame(40000 + i as u16, 50000, p);
        w.write_slice(Duration::from_millis(i as u64), &frame)
            .unwrap();
    }
    w.flush().unwrap();
    path
}

/// tcpdump of the UDP datagrams on NAME-va into `pcap`, started. Immediate
/// mode: each packet is written as it comes, not when a block of the
/// capture ring fills or a second passes — a transfer ends (its 226)
/// milliseconds after its last packet.
fn tcpdump(t: &Topology, pcap: &str) -> Proc {
    let dump = Proc::spawn(
        &t.ns("a"),
        "tcpdump",
        &[
            "-i",
            &t.dev("va"),
            "--immediate-mode",
            "-U",
            "-n",
            "-w",
            pcap,
            "udp",
        ],
    );
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while !dump.stderr().contains("listening on") {
        assert!(
            std::time::Instant::now() < end,
            "tcpdump did not start: {}",
            dump.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    dump
}

/// The values of `fields` for each xport packet, one line each, tab-separated.
fn fields(path: &str, fields: &[&str]) -> Vec<String> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-X", &xport_dissector(), "-n", "-r", path, "-Y", "xport"]);
    cmd.args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_packet_kind_is_decoded_field_by_field() {
    let dir = Scratch::new("xport_kinds");
    let path = capture(&dir, "kinds.pcap", &every_kind());
    let (frames, problems) = tshark_problems(&path);
    assert_eq!((frames, problems.len()), (7, 0), "{problems:?}");
    assert_eq!(tshark_count(&path, "xport"), 7);
    let got = fields(
        &path,
        &[
            "xport.type",
            "xport.connection_id",
            "xport.flags",
            "xport.data_port",
        ],
    );
    assert_eq!(
        got,
        [
            "1\t0x0000000000000000\t0x0000\t40001,40002",
            "2\t0xaaaa000000000001\t0x0000\t",
            "3\t0xaaaa000000000001\t0x0000\t50001,50002,50003,50004",
            "5\t0x1122334455667788\t0x0001\t",
            "4\t0xaaaa000000000001\t0x0010\t",
            "5\t0x1122334455667788\t0x0006\t",
            "6\t0xbbbb000000000002\t0x0000\t",
        ]
    );
    let setup = fields(
        &path,
        &[
            "xport.own_id",
            "xport.isn",
            "xport.app_buffer",
            "xport.data_sockets",
        ],
    );
    assert_eq!(setup[0], "0xaaaa000000000001\t4000000000\t512000\t2");
    assert_eq!(setup[2], "0xbbbb000000000002\t4000000000\t512000\t4");
    let options = fields(&path, &["xport.max_payload", "xport.options.data_checksum"]);
    assert_eq!(options[0], "1444\t0");
    assert_eq!(options[2], "1444\t1");
    let control = fields(
        &path,
        &[
            "xport.next_expected",
            "xport.cwnd",
            "xport.recovery",
            "xport.gap_count",
            "xport.serial",
            "xport.limit",
            "xport.gap.first",
            "xport.gap.end",
        ],
    );
    assert_eq!(
        control[4],
        "101\t64\t2\t3\t9\t1099511627776\t103,110,200\t105,111,300"
    );
    let data = fields(&path, &["xport.seq", "xport.offset", "xport.len"]);
    assert_eq!(data[3], "100\t100000\t1357");
    assert_eq!(data[5], "101\t101000\t10");
    assert_eq!(
        tshark_count(
            &path,
            "xport.flags.fin == 1 && xport.flags.retransmission == 1"
        ),
        1
    );
    assert_eq!(tshark_count(&path, "xport.data_checksum.bad"), 0);
}

#[test]
fn bad_data_checksums_and_set_ups_are_errors_and_bad_headers_are_not_claimed() {
    let dir = Scratch::new("xport_bad");
    let good = data(1, &[1, 2, 3, 4, 5], flags::DATA_CHECKSUM);

    // The payload changed under its data checksum.
    let mut bad_sum = good.clone();
    *bad_sum.last_mut().unwrap() ^= 0x10;
    let path = capture(&dir, "dsum.pcap", &[good.clone(), bad_sum]);
    let (_, problems) = tshark_problems(&path);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("Checksum") && problems[0].contains("XPORT"),
        "{problems:?}"
    );
    assert_eq!(tshark_count(&path, "xport.data_checksum.bad"), 1);

    // A set-up without a payload size, under a header checksum that
    // matches: claimed, and malformed.
    let mut no_size = every_kind().remove(0);
    no_size[38..40].fill(0);
    no_size[4..8].fill(0);
    let sum = wire::xtp_checksum([&no_size[..]]);
    no_size[4..8].copy_from_slice(&sum.to_be_bytes());
    let path = capture(&dir, "size.pcap", &[no_size]);
    let (_, problems) = tshark_problems(&path);
    assert!(
        problems.len() == 1 && problems[0].contains("Malformed"),
        "{problems:?}"
    );

    // A header that fails its checksum is someone else's datagram; so is a
    // data packet cut short or padded, whose length the checksum covers.
    let mut bad_header = good.clone();
    bad_header[20] ^= 1;
    let cut = good[..good.len() - 1].to_vec();
    let mut padded = good.clone();
    padded.push(0);
    let path = capture(&dir, "hdr.pcap", &[bad_header, cut, padded]);
    assert_eq!(tshark_count(&path, "xport"), 0);
    assert_eq!(tshark_count(&path, "udp"), 3);
    let path = capture(&dir, "good.pcap", &[good]);
    assert_eq!(tshark_count(&path, "xport"), 1);
}

/// Each way of the captured transfer: enough packets for every kind, few
/// enough for tshark to read quickly.
const SIZE: usize = 1 << 20;

#[test]
fn a_real_transfer_over_a_veth_is_decoded_packet_by_packet() {
    // Offloads off: every datagram crosses the veth whole, checksummed, as
    // tshark checks it.
    let t = Topology::up("xd", &["--both", "--no-offload"]);
    let dir = Scratch::new("xport_capture");
    let served = dir.file("served");
    std::fs::create_dir(&served).unwrap();
    let file = format!("{served}/f.bin");
    random_file(&file, SIZE, 17);
    let server = format!("{}:2121", t.veth_ip(1));
    let ftpd = Proc::strata(&t.ns("a"), &["ftpd", &served, "--listen", &server]);
    let pcap = dir.file("transfer.pcap");
    let dump = tcpdump(&t, &pcap);

    // A get and a put over the transport: data both ways.
    let got = dir.file("got.bin");
    let limit = Duration::from_secs(60);
    let out = ok_in(
        &t.ns("b"),
        STRATA,
        &["ftp", &server, "get", "f.bin", &got],
        limit,
    );
    assert!(
        out.contains("data=xport") && out.contains("verified=yes"),
        "{out}"
    );
    let out = ok_in(
        &t.ns("b"),
        STRATA,
        &["ftp", &server, "put", &got, "up.bin"],
        limit,
    );
    assert!(
        out.contains("data=xport") && out.contains("verified=yes"),
        "{out}"
    );
    assert_eq!(sha256_file(&format!("{served}/up.bin")), sha256_file(&file));
    std::thread::sleep(Duration::from_millis(200));
    dump.stop();
    ftpd.stop();

    // Every datagram is the transport's and none is malformed; each kind a
    // transfer uses is there, and the data packets carry both files.
    let frames = assert_capture_clean(
        &pcap,
        2 * SIZE / strata_xport::Config::default().mss as usize,
    );
    let decoded = fields(&pcap, &["xport.type", "xport.len"]);
    assert_eq!(decoded.len(), frames, "packets tshark did not decode");
    let kinds: Vec<&str> = decoded
        .iter()
        .filter_map(|l| l.split('\t').next())
        .collect();
    for (kind, name) in [
        ("1", "CONNECT"),
        ("3", "ACCEPT"),
        ("4", "CONTROL"),
        ("5", "DATA"),
    ] {
        assert!(kinds.contains(&kind), "no {name} in the capture");
    }
    let payload: usize = decoded
        .iter()
        .filter_map(|l| l.split('\t').nth(1)?.parse::<usize>().ok())
        .sum();
    assert!(payload >= 2 * SIZE, "{payload} bytes of data packets");

    // Full data packets fill the veth's 1500-byte MTU: 1,444 bytes of
    // payload behind the 28-byte header, in 1,514-byte Ethernet frames
    // (95.4% payload, the ceiling of Figure 6 through strata wanem).
    let data = tshark_count(&pcap, "xport.type == 5");
    let full = tshark_count(
        &pcap,
        "xport.type == 5 && xport.len == 1444 && frame.len == 1514",
    );
    assert!(full * 10 >= data * 9, "{full} of {data} data packets full");
    assert_eq!(tshark_count(&pcap, "frame.len > 1514"), 0);
}

#[test]
fn the_listener_fits_each_clients_payload_to_its_route() {
    // The server's route to the client carries 1,400-byte datagrams, the
    // client's to the server 1,500: the client announces 1,444 bytes of
    // payload, and the listener must send no more than its own route
    // takes (1,400 - 28 - 28 = 1,344), not the client's figure.
    let t = Topology::up("xm", &["--both", "--no-offload"]);
    let net = format!("{}.0/24", t.veth_ip(1).rsplit_once('.').unwrap().0);
    ok_in(
        &t.ns("a"),
        "ip",
        &["route", "replace", &net, "dev", &t.dev("va"), "mtu", "1400"],
        Duration::from_secs(5),
    );
    let dir = Scratch::new("xport_fit");
    let served = dir.file("served");
    std::fs::create_dir(&served).unwrap();
    let file = format!("{served}/f.bin");
    random_file(&file, 1 << 20, 19);
    let server = format!("{}:2121", t.veth_ip(1));
    let ftpd = Proc::strata(&t.ns("a"), &["ftpd", &served, "--listen", &server]);
    let pcap = dir.file("fit.pcap");
    let dump = tcpdump(&t, &pcap);
    let got = dir.file("got.bin");
    let out = ok_in(
        &t.ns("b"),
        STRATA,
        &["ftp", &server, "get", "f.bin", &got],
        Duration::from_secs(60),
    );
    assert!(
        out.contains("data=xport") && out.contains("verified=yes"),
        "{out}"
    );
    std::thread::sleep(Duration::from_millis(200));
    dump.stop();
    ftpd.stop();
    let from_server = format!("ip.src == {} && xport.type == 5", t.veth_ip(1));
    let lens: Vec<usize> = Command::new("tshark")
        .args([
            "-X",
            &xport_dissector(),
            "-n",
            "-r",
            &pcap,
            "-Y",
            &from_server,
        ])
        .args(["-T", "fields", "-e", "udp.length"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert!(
        lens.len() > 700,
        "{} data packets from the server",
        lens.len()
    );
    let largest = lens.iter().max().copied().unwrap_or(0);
    // UDP length = 8 + the 28-byte data header + the payload.
    assert_eq!(largest, 8 + 28 + 1344, "the server's largest data datagram");
    // XPSV's listener takes the control connection's peer without the
    // cookie round trip: no RETRY.
    let kinds = fields(&pcap, &["xport.type"]);
    assert!(kinds.iter().any(|k| k == "3"), "no ACCEPT: {kinds:?}");
    assert!(
        !kinds.iter().any(|k| k == "2"),
        "a RETRY to XPSV's own peer"
    );
}
