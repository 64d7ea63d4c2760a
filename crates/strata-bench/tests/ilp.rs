//! Integrated layer processing gives the same bytes as separate passes: the
//! ping-pong over `copy/xdr/cipher/udp/ip/eth` (checksum, cipher, byte order and
//! copy on every message, both ways) under LLM (a pass per layer) and under ILLM
//! and DAA (all fused), for sizes that fit a frame and sizes that fragment.

use bytes::Bytes;
use strata::Arch;
use strata_bench::rtt::{MemPingPong, RttSetup};

const STACK: &str = "copy/xdr/cipher/udp/ip/eth";

fn payload(size: usize) -> Bytes {
    (0..size)
        .map(|i| (i * 7 + size) as u8)
        .collect::<Vec<u8>>()
        .into()
}

#[test]
fn every_architecture_returns_the_same_bytes_through_the_data_manipulation_stack() {
    for arch in Arch::ALL {
        let mut pp = MemPingPong::new(&RttSetup {
            stack: STACK.into(),
            arch,
            checksum: true,
        })
        .unwrap();
        pp.keep_replies();
        for size in [1, 4, 1000, 1400, 4000, 20_000] {
            let sent = payload(size);
            pp.round_trip(&sent).unwrap();
            assert_eq!(
                pp.last_reply().as_deref(),
                Some(&sent[..]),
                "{arch}, {size} bytes"
            );
        }
        let (client, server) = pp.engines();
        let fused = client.engine_counters().events().get("ilp-fused")
            + server.engine_counters().events().get("ilp-fused");
        if arch == Arch::Llm {
            assert_eq!(fused, 0, "LLM runs each stage as its own pass");
        } else {
            assert_eq!(fused, 12, "{arch}: every delivery ran its stages fused");
        }
    }
}

#[test]
fn a_corrupted_message_is_dropped_by_the_fused_checksum_and_counted_against_udp() {
    for arch in Arch::ALL {
        let mut pp = MemPingPong::new(&RttSetup {
            stack: STACK.into(),
            arch,
            checksum: true,
        })
        .unwrap();
        pp.round_trip(&payload(100)).unwrap();
        assert!(
            pp.round_trip_corrupted(&payload(3000), 500).is_err(),
            "{arch}"
        );
        let (_, server) = pp.engines();
        let udp = server.proto_id("udp").unwrap();
        assert_eq!(
            server.counters(udp).drops().get("bad-checksum"),
            1,
            "{arch}"
        );
    }
}
