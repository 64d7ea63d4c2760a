//! Captures are real pcap files: tshark reads them, counts the right frames and
//! shows the times they were sent and received.

mod toy;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use strata_core::Message;
use strata_link::{LinkParams, PcapWriter, SimNet};
use toy::{Echo, Ticker, add_app, host, mac, start_ticker};

fn temp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// tshark's view of a capture: one line per frame with the given fields.
fn tshark(path: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd
        .output()
        .expect("tshark must be installed to check captures");
    assert!(
        out.status.success(),
        "tshark refused {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect()
}

fn nanos(epoch: &str) -> u64 {
    let (secs, frac) = epoch.split_once('.').unwrap_or((epoch, "0"));
    let frac = format!("{frac:0<9}");
    secs.parse::<u64>().unwrap() * 1_000_000_000 + frac[..9].parse::<u64>().unwrap()
}

#[test]
fn tshark_reads_a_written_file_frame_by_frame() {
    let path = temp("writer.pcap");
    let mut w = PcapWriter::create(&path).unwrap();
    let mut split = Message::from_slice(&[0xff; 6]);
    split.append_bytes(Bytes::from(vec![2, 0, 0, 0, 0, 1, 0x88, 0xb5, 1, 2, 3]));
    w.write(Duration::from_millis(1), &split).unwrap();
    w.write_slice(Duration::new(2, 5), &[0u8; 60]).unwrap();
    w.write(Duration::from_secs(3), &Message::from(vec![1u8; 1514]))
        .unwrap();
    w.flush().unwrap();

    let rows = tshark(&path, &["frame.time_epoch", "frame.len", "eth.type"]);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let times: Vec<u64> = rows.iter().map(|r| nanos(&r[0])).collect();
    assert_eq!(times, [1_000_000, 2_000_000_005, 3_000_000_000]);
    let lens: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(lens, ["17", "60", "1514"]);
    assert_eq!(rows[0][2], "0x88b5");
}

#[test]
fn tshark_reads_a_sim_capture_with_every_frame_at_its_virtual_time() {
    let path = temp("sim-capture.pcap");
    let mut net = SimNet::new(4);
    let a = net.add_host("a", host(1));
    let b = net.add_host("b", host(2));
    let d = LinkParams::delay(Duration::from_millis(10));
    net.connect((a, "net0"), (b, "net0"), d.clone(), d).unwrap();
    net.capture(a, "net0", &path).unwrap();
    add_app(
        net.engine(b),
        Echo {
            echo: true,
            ..Echo::default()
        },
        mac(1),
        9,
    );
    start_ticker(
        net.engine(a),
        Ticker::new(Duration::from_millis(5), 4),
        mac(2),
        9,
    );
    net.run_for(Duration::from_millis(100));

    // Captures are flushed when a run returns: no need to drop the net.
    let rows = tshark(&path, &["frame.time_epoch", "eth.src", "eth.dst"]);
    assert_eq!(rows.len(), 8, "four ticks out, four echoes back: {rows:?}");
    let times: Vec<u64> = rows.iter().map(|r| nanos(&r[0]) / 1_000_000).collect();
    assert_eq!(times, [5, 10, 15, 20, 25, 30, 35, 40]);
    let (a_mac, b_mac) = (mac(1).to_string(), mac(2).to_string());
    assert_eq!((&rows[0][1], &rows[0][2]), (&a_mac, &b_mac), "sent by a");
    assert_eq!(
        (&rows[7][1], &rows[7][2]),
        (&b_mac, &a_mac),
        "received by a"
    );
    net.flush_captures().unwrap();
}
