//! tools/wireshark/strata_pa.lua decodes the PA's frames in a capture: the
//! preamble, the compact headers by the compiled layout, in either byte
//! order, packed messages — and finds nothing malformed.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::pair;
use strata::link::LinkParams;

fn script() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/strata_pa.lua");
    format!("lua_script:{}", p.display())
}

/// One decoded frame: whether the PA claimed it, its flags, its fields
/// (`name=value`), its packing count.
struct Decoded {
    pa: bool,
    ident: bool,
    little: bool,
    fields: Vec<String>,
    packed: u32,
}

/// Frames tshark's expert marks as errors (malformed, bad checksum).
fn errors(pcap: &str) -> usize {
    let out = Command::new("tshark")
        .args([
            "-n",
            "-X",
            &script(),
            "-r",
            pcap,
            "-Y",
            "_ws.expert.severity == error",
        ])
        .output()
        .expect("tshark runs");
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Every frame of the capture, decoded by one run of tshark.
fn decode(pcap: &str) -> Vec<Decoded> {
    let out = Command::new("tshark")
        .args([
            "-n",
            "-X",
            &script(),
            "-r",
            pcap,
            "-T",
            "fields",
            "-E",
            "occurrence=a",
        ])
        .args([
            "-e",
            "frame.protocols",
            "-e",
            "pa.ident",
            "-e",
            "pa.little_endian",
        ])
        .args(["-e", "pa.field", "-e", "pa.packed"])
        .output()
        .expect("tshark runs (apt-get install tshark)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let at = |i: usize| c.get(i).copied().unwrap_or("");
            Decoded {
                pa: at(0).split(':').any(|p| p == "pa"),
                ident: matches!(at(1), "1" | "True"),
                little: matches!(at(2), "1" | "True"),
                fields: at(3).split(',').map(String::from).collect(),
                packed: at(4).parse().unwrap_or(0),
            }
        })
        .collect()
}

#[test]
fn the_dissector_decodes_every_pa_frame_in_both_byte_orders() {
    for order in ["big", "little"] {
        let dir = std::env::temp_dir().join(format!("strata-pa-{}-{order}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pcap = dir.join("pa.pcap").display().to_string();
        let mut p = pair(
            5,
            true,
            LinkParams::default(),
            &format!("order = \"{order}\""),
        );
        p.net.capture(p.a, "net0", &pcap).unwrap();
        p.set_echo(1);
        for i in 0..20u32 {
            p.send(0, &i.to_be_bytes());
            p.run(Duration::from_millis(1));
        }
        // A burst packs; a large message is cut into fragments.
        for i in 0..40u32 {
            p.send(0, &vec![i as u8; 1 + i as usize * 7]);
        }
        p.send(0, &[9u8; 4000]);
        p.run(Duration::from_millis(50));
        p.net.flush_captures().unwrap();
        let frames = decode(&pcap);
        let all = frames.len();
        let has = |f: &Decoded, x: &str| f.fields.iter().any(|y| y == x);
        assert!(all > 40, "{order}: {all} frames captured");
        assert!(
            frames.iter().all(|f| f.pa),
            "{order}: every frame is the PA's"
        );
        assert_eq!(errors(&pcap), 0, "{order}: nothing malformed");
        assert!(
            frames.iter().any(|f| f.ident),
            "{order}: the identification"
        );
        assert!(
            frames.iter().all(|f| f.little == (order == "little")),
            "{order}: both sides write {order}-endian"
        );
        for seq in [0, 5, 19] {
            let data = frames
                .iter()
                .filter(|f| has(f, &format!("seq={seq}")) && has(f, "ack-only=0"))
                .count();
            assert!(data >= 2, "{order}: data with seq {seq} both ways");
        }
        assert!(
            frames.iter().any(|f| f.packed >= 2),
            "{order}: a packed message"
        );
        let fragments = frames.iter().filter(|f| has(f, "frag=1")).count();
        assert!(fragments >= 3, "{order}: fragments");
        std::fs::remove_dir_all(&dir).ok();
    }
}
