//! `strata bench paper001` keeps running end to end: every peer of Figure 6
//! (the transport with 1–8 buffers, kernel TCP clamped and default, UDT4)
//! and every client of Figure 9 (strata ftp, curl, lftp, SRT) moves its
//! data through `strata wanem`, at a small rate so the test stays short.

mod common;

use std::process::Command;

use common::STRATA;
use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("strata-paper001-test-{}", std::process::id()));
    let out = Command::new(STRATA)
        .args(["bench", "paper001"])
        .args(args)
        .args(["--json", "--plot-dir", dir.to_str().unwrap()])
        .output()
        .expect("strata runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    serde_json::from_str(line).expect("valid JSON")
}

/// Every peer's transfer at every point moved what it was asked to.
fn all_moved(results: &Value, peers: usize) {
    let r = results.as_array().expect("results");
    assert_eq!(r.len(), peers);
    for (i, points) in r.iter().enumerate() {
        for p in points.as_array().unwrap() {
            assert!(p.is_object(), "peer {i} failed a point: {results}");
            assert!(p["bytes"].as_u64().unwrap() >= 1_000_000, "{p}");
            assert!(p["secs"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
}

#[test]
fn figure_6_moves_data_with_every_peer_through_wanem() {
    let v = bench(&["fig6", "--rates", "20", "--rtts", "0", "--secs", "0.4"]);
    all_moved(&v["fig6"][0]["results"], 7);
}

#[test]
fn figure_9_fetches_the_whole_file_with_every_client() {
    let v = bench(&["fig9", "--mbit", "20", "--rtts", "0", "--secs", "0.4"]);
    all_moved(&v["fig9"]["results"], 4);
}
