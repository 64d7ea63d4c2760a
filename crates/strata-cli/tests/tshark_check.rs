//! The capture check every interop test relies on must be able to fail: bad
//! UDP and IPv4 checksums and a cut IPv4 header are caught, a good frame
//! passes.

mod common;

use std::time::Duration;

use common::{Scratch, tshark_problems, udp_frame};
use strata::link::PcapWriter;

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
    let good = udp_frame(4000, 7, b"hello");
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
