//! The capture check every interop test relies on must be able to fail: bad
//! UDP and IPv4 checksums and a cut IPv4 header are caught, a good frame
//! passes.

mod common;

use std::time::Duration;

use common::{Scratch, tshark_problems};
use strata::link::PcapWriter;

/// An Ethernet/IPv4/UDP frame from 198.18.0.1:4000 to 198.18.0.2:7 carrying
/// `payload`, with correct checksums.
fn udp_frame(payload: &[u8]) -> Vec<u8> {
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
    let mut udp = vec![0x0f, 0xa0, 0, 7, 0, 0, 0, 0];
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

fn capture(dir: &Scratch, name: &str, frames: &[Vec<u8>]) -> String {
    let path = dir.file(name);
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_slice(Duration::from_millis(i as u64), f).unwrap();
    }
    w.flush().unwrap();
    path
}

#[test]
fn the_capture_check_passes_good_frames_and_catches_bad_checksums_and_cut_headers() {
    let dir = Scratch::new("tshark_check");
    let good = udp_frame(b"hello");
    let (frames, problems) =
        tshark_problems(&capture(&dir, "good.pcap", std::slice::from_ref(&good)));
    assert_eq!((frames, problems.len()), (1, 0), "{problems:?}");

    let mut bad_udp = good.clone();
    *bad_udp.last_mut().unwrap() ^= 1;
    let (_, problems) = tshark_problems(&capture(&dir, "bad-udp.pcap", &[good.clone(), bad_udp]));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("Checksum") && problems[0].contains("UDP"),
        "{problems:?}"
    );

    let mut bad_ip = good.clone();
    bad_ip[24] ^= 0x40;
    let (_, problems) = tshark_problems(&capture(&dir, "bad-ip.pcap", &[bad_ip]));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("IPv4") && problems[0].contains("Bad checksum"),
        "{problems:?}"
    );

    let cut = good[..14 + 12].to_vec();
    let (_, problems) = tshark_problems(&capture(&dir, "cut.pcap", &[cut]));
    assert!(
        problems.iter().any(|p| p.contains("Malformed")),
        "a cut IPv4 header is malformed: {problems:?}"
    );
}
