//! smoltcp's TCP imported into Strata (`smoltcp-tcp`, seed 004): the
//! transfers of `tcp_transfer.rs` that make sense for it, through the same
//! source and sink, SHA-256 checked at both ends — clean, through 1% loss,
//! through reordering, duplication and bit errors (with and without the
//! link's receive offload), under ILLM and under DAA — and data held back by
//! manual flow control when the peer closes.

mod tcp_common;

use std::time::Duration;

use strata::Arch;
use strata::link::LinkParams;
use tcp_common::{Done, Tcp, Transfer, start, transfer};

const MB: u64 = 1 << 20;

fn smoltcp(bytes: u64, link: LinkParams) -> Transfer {
    let mut t = Transfer::new(bytes, link);
    t.spec = Tcp::Smoltcp.spec();
    t
}

/// `rtt_ms` round trip, `loss` in each direction.
fn link(rtt_ms: u64, loss: f64) -> LinkParams {
    LinkParams {
        loss,
        ..LinkParams::delay(Duration::from_micros(rtt_ms * 500))
    }
}

/// A module counter at the server.
fn server_count(d: &mut Done, drop: &str) -> u64 {
    let e = d.net.engine(d.server);
    let p = e.proto_id("smoltcp-tcp").unwrap();
    e.counters(p).drops().get(drop)
}

#[test]
fn sixteen_megabytes_arrive_intact_on_a_clean_link_with_no_delay() {
    let d = transfer(&smoltcp(16 * MB, LinkParams::default()));
    assert_eq!(
        d.sender.stats.retransmits, 0,
        "nothing lost, nothing resent"
    );
    assert_eq!(d.sender.congestion, "cubic", "the default");
    assert_eq!(d.sender.mss, 1448, "1500-byte MTU, timestamps on");
}

#[test]
fn sixteen_megabytes_arrive_intact_through_one_percent_loss_at_10_ms() {
    let d = transfer(&smoltcp(16 * MB, link(10, 0.01)));
    let s = d.sender.stats;
    // About 1% of 11,600 data segments lost on the way, and every one sent
    // again (smoltcp resends from the first unacknowledged byte).
    assert!(s.retransmits > 60, "losses were repaired: {s:?}");
}

/// A path that reorders, duplicates and flips bits, with a little loss.
fn messy() -> LinkParams {
    LinkParams {
        reorder: 0.03,
        reorder_delay: Duration::from_millis(3),
        duplicate: 0.01,
        ber: 1e-7,
        jitter: Duration::from_micros(500),
        ..link(10, 0.002)
    }
}

#[test]
fn sixteen_megabytes_arrive_intact_through_reordering_duplication_and_bit_errors() {
    let mut d = transfer(&smoltcp(16 * MB, messy()));
    assert!(
        server_count(&mut d, "bad-checksum") > 0,
        "bit errors were caught by the module, before smoltcp"
    );
}

#[test]
fn receive_offload_hands_smoltcp_merged_runs_and_still_lets_no_bit_error_through() {
    let mut t = smoltcp(16 * MB, messy());
    t.offload = true;
    let mut d = transfer(&t);
    let merged = d.net.merged(d.server);
    assert!(
        merged * 4 > 16 * MB / 1448,
        "a quarter of the data segments or more were merged: {merged}"
    );
    assert!(server_count(&mut d, "bad-checksum") > 0);
}

#[test]
fn sixteen_megabytes_arrive_intact_under_illm_with_the_passive_open_the_only_fallback() {
    let mut t = smoltcp(16 * MB, LinkParams::default());
    t.arch = Arch::Illm;
    let mut d = transfer(&t);
    let server = d.server;
    let c = d.net.engine(server).engine_counters().clone();
    assert_eq!(
        c.events().get("illm-fallback"),
        1,
        "the SYN (a passive open) falls back; data goes where demux said: {c}"
    );
}

#[test]
fn sixteen_megabytes_arrive_intact_under_daa_on_plain_ethernet_and_on_ethdaa_along_paths() {
    let mut t = smoltcp(16 * MB, link(10, 0.01));
    t.arch = Arch::Daa;
    transfer(&t);
    t.spec = "smoltcp-tcp/ip/ethdaa";
    t.forward = LinkParams::default();
    t.back = LinkParams::default();
    let mut d = transfer(&t);
    let server = d.server;
    let c = d.net.engine(server).engine_counters().clone();
    assert!(
        c.events().get("daa-path") > 10_000,
        "nearly every segment followed the connection's path: {c}"
    );
}

#[test]
fn data_held_back_by_manual_flow_control_all_arrives_when_the_peer_closes() {
    // The sink reports nothing consumed: the module hands it one ring's
    // worth (64 KiB) and leaves the rest in smoltcp's ring. The peer's FIN
    // makes the window moot: then everything goes up, before PeerClosed,
    // and nothing waits in the ring for TIME-WAIT's end, which empties it.
    let mut t = smoltcp(100 * 1024, LinkParams::delay(Duration::from_millis(5)));
    t.tcp = vec![("rcvbuf", "64KiB".into())];
    let mut r = start(&t);
    r.sink().manual = true;
    r.sink().paused = true;
    let d = tcp_common::finish(r, Duration::from_secs(30));
    assert!(d.sink_deliveries >= 2, "held back, then let go");
}
