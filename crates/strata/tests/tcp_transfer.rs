//! 64 MB transfers whose SHA-256 must match at both ends, across loss (both
//! ways, repaired by RACK-TLP rather than timeouts), bursts of loss,
//! reordering, duplication, bit errors and round trips from 0 to 200 ms;
//! under LLM, and the core scenarios again under ILLM and DAA (on plain
//! Ethernet, where DAA falls back to layers, and on ETHDAA, where it follows
//! paths).

mod tcp_common;

use std::time::Duration;

use strata::Arch;
use strata::link::{BurstLoss, Direction, LinkParams};
use tcp_common::{Done, Transfer, transfer};

const MB: u64 = 1 << 20;
const SIZE: u64 = 64 * MB;

/// `rtt_ms` round trip, `loss` in each direction.
fn link(rtt_ms: u64, loss: f64) -> LinkParams {
    LinkParams {
        loss,
        ..LinkParams::delay(Duration::from_micros(rtt_ms * 500))
    }
}

fn on(arch: Arch, spec: &'static str, mut t: Transfer) -> Transfer {
    t.arch = arch;
    t.spec = spec;
    t
}

#[test]
fn sixty_four_megabytes_arrive_intact_on_a_clean_link_with_no_delay() {
    let d = transfer(&Transfer::new(SIZE, LinkParams::default()));
    assert_eq!(
        d.sender.stats.retransmits, 0,
        "nothing was lost, nothing resent"
    );
    assert_eq!(d.sender.congestion, "cubic", "the default");
}

#[test]
fn sixty_four_megabytes_arrive_intact_through_one_percent_loss_at_10_ms() {
    let d = transfer(&Transfer::new(SIZE, link(10, 0.01)));
    let s = d.sender.stats;
    assert!(
        s.fast_recoveries > 100,
        "losses are repaired by fast recovery: {s:?}"
    );
    assert!(
        s.timeouts * 100 < s.fast_recoveries,
        "hardly ever by timeouts: {s:?}"
    );
    assert!(
        s.lost_retransmits > 0 && s.loss_probes > 0,
        "RACK found lost retransmissions and TLP probed lost tails: {s:?}"
    );
    assert!(d.sender.sack && d.sender.timestamps);
}

#[test]
fn sixteen_megabytes_cross_2_percent_loss_at_100_ms_repaired_by_rack_tlp_not_timeouts() {
    let d = transfer(&Transfer::new(16 * MB, link(100, 0.02)));
    let s = d.sender.stats;
    assert!(s.fast_recoveries > 100, "{s:?}");
    assert!(
        s.timeouts * 50 < s.fast_recoveries,
        "a lost retransmission or tail costs a round trip, not a timeout: {s:?}"
    );
    assert!(s.loss_probes > 0, "{s:?}");
}

#[test]
fn sixty_four_megabytes_arrive_intact_in_super_segments_through_one_percent_loss() {
    let mut t = Transfer::new(SIZE, link(10, 0.01));
    t.offload = true;
    let d = transfer(&t);
    let s = d.sender.stats;
    let mut net = d.net;
    let e = net.engine(d.client);
    let frames = e.link_stats(e.link_id("net0").unwrap()).tx_frames;
    assert!(
        frames * 4 < s.segs_out,
        "the link cut most of {} segments out of {frames} frames",
        s.segs_out
    );
    let merged = net.merged(d.server);
    assert!(
        merged * 2 > s.segs_out,
        "the receiver merged most of {} segments: {merged}",
        s.segs_out
    );
    assert!(
        s.fast_recoveries > 100 && s.timeouts * 100 < s.fast_recoveries,
        "segments lost from super-segments are repaired one by one: {s:?}"
    );
}

#[test]
fn sixty_four_megabytes_arrive_intact_through_five_percent_loss_at_20_ms() {
    let d = transfer(&Transfer::new(SIZE, link(20, 0.05)));
    assert!(d.sender.stats.retransmits > 2_000, "{:?}", d.sender.stats);
}

#[test]
fn sixty_four_megabytes_arrive_intact_through_ten_percent_loss_at_2_ms() {
    let d = transfer(&Transfer::new(SIZE, link(2, 0.10)));
    let s = d.sender.stats;
    assert!(
        s.lost_retransmits > 100,
        "RACK repairs lost retransmissions: {s:?}"
    );
    assert!(
        s.timeouts > 0,
        "but at 10% some are the last of a window, or probes are lost too: {s:?}"
    );
}

#[test]
fn sixty_four_megabytes_arrive_intact_through_bursts_of_loss() {
    let bursty = LinkParams {
        burst: Some(BurstLoss {
            enter: 0.002,
            leave: 0.2,
            loss: 1.0,
        }),
        ..link(10, 0.0)
    };
    let d = transfer(&Transfer::new(SIZE, bursty));
    let s = d.sender.stats;
    assert!(s.retransmits > 300 && s.fast_recoveries > 50, "{s:?}");
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

/// Asserts that the server's TCP caught bit errors and duplicates.
fn assert_errors_caught(d: &mut Done) {
    let e = d.net.engine(d.server);
    let tcp = e.proto_id("tcp").unwrap();
    let c = e.counters(tcp);
    assert!(
        c.drops().get("bad-checksum") > 0,
        "bit errors were caught: {c}"
    );
    assert!(
        c.drops().get("duplicate") > 0,
        "duplicates were recognised: {c}"
    );
}

#[test]
fn sixty_four_megabytes_arrive_intact_through_reordering_duplication_and_bit_errors() {
    assert_errors_caught(&mut transfer(&Transfer::new(SIZE, messy())));
}

#[test]
fn receive_offload_merges_runs_yet_lets_bit_errors_and_duplicates_through_to_tcp() {
    let mut t = Transfer::new(SIZE, messy());
    t.offload = true;
    let mut d = transfer(&t);
    let merged = d.net.merged(d.server);
    // Jitter spreads arrivals, so runs are shorter than on a clean path.
    assert!(
        merged * 4 > SIZE / 1448,
        "a quarter of the data segments or more were merged: {merged}"
    );
    assert_errors_caught(&mut d);
}

#[test]
fn sixty_four_megabytes_cross_a_200_ms_100_mbit_path_with_windows_scaled_and_buffers_grown() {
    let fast = LinkParams {
        rate: 100_000_000,
        ..link(200, 0.0)
    };
    let mut t = Transfer::new(SIZE, fast);
    t.back = link(200, 0.0);
    let mut d = transfer(&t);
    assert!(d.sender.wscale.is_some(), "window scaling in use");
    assert!(
        d.sender.snd_wnd > 2_500_000,
        "the receiver's window grew past the 2.5 MB bandwidth-delay product: {}",
        d.sender.snd_wnd
    );
    assert!(
        d.sender.sndbuf.0 > 2_500_000,
        "so did the send buffer: {:?}",
        d.sender.sndbuf
    );
    assert!(
        d.elapsed < Duration::from_secs(20),
        "64 MB at 100 Mbit/s take 5.4 s; slow start and one recovery add some: {:?}",
        d.elapsed
    );
    let server = d.server;
    let e = d.net.engine(server);
    let tcp = e.proto_id("tcp").unwrap();
    let grown = e
        .protocol::<strata::proto::tcp::Tcp>(tcp)
        .unwrap()
        .connections()
        .len();
    assert_eq!(grown, 0, "the server's side closed after LAST-ACK");
}

#[test]
fn sixty_four_megabytes_arrive_intact_with_newreno_and_neither_sack_nor_timestamps() {
    let mut t = Transfer::new(SIZE, link(20, 0.01));
    t.tcp = vec![
        ("congestion", "reno".into()),
        ("sack", false.into()),
        ("timestamps", false.into()),
    ];
    let d = transfer(&t);
    assert_eq!(d.sender.congestion, "reno");
    assert!(!d.sender.sack && !d.sender.timestamps);
    assert!(d.sender.stats.fast_recoveries > 50, "{:?}", d.sender.stats);
}

#[test]
fn sixty_four_megabytes_arrive_intact_under_illm_clean_and_through_loss_and_reordering() {
    let mut d = transfer(&on(
        Arch::Illm,
        "tcp/ip/eth",
        Transfer::new(SIZE, LinkParams::default()),
    ));
    let server = d.server;
    let c = d.net.engine(server).engine_counters().clone();
    assert_eq!(
        c.events().get("illm-fallback"),
        1,
        "in order, only the SYN (a passive open) falls back: {c}"
    );
    let messy = LinkParams {
        reorder: 0.02,
        ..link(10, 0.01)
    };
    let mut d = transfer(&on(Arch::Illm, "tcp/ip/eth", Transfer::new(SIZE, messy)));
    let server = d.server;
    let c = d.net.engine(server).engine_counters().clone();
    assert!(
        c.events().get("illm-fallback") > 0,
        "out-of-order data fell back: {c}"
    );
}

#[test]
fn sixty_four_megabytes_arrive_intact_under_daa_on_plain_ethernet_by_falling_back_to_layers() {
    transfer(&on(
        Arch::Daa,
        "tcp/ip/eth",
        Transfer::new(SIZE, LinkParams::default()),
    ));
    let mut d = transfer(&on(
        Arch::Daa,
        "tcp/ip/eth",
        Transfer::new(SIZE, link(10, 0.01)),
    ));
    let server = d.server;
    let c = d.net.engine(server).engine_counters().clone();
    assert!(c.events().get("daa-no-path") > 0, "{c}");
}

#[test]
fn sixty_four_megabytes_arrive_intact_under_daa_on_ethdaa_along_paths() {
    transfer(&on(
        Arch::Daa,
        "tcp/ip/ethdaa",
        Transfer::new(SIZE, LinkParams::default()),
    ));
    let mut d = transfer(&on(
        Arch::Daa,
        "tcp/ip/ethdaa",
        Transfer::new(SIZE, link(10, 0.01)),
    ));
    let server = d.server;
    let c = d.net.engine(server).engine_counters().clone();
    assert!(
        c.events().get("daa-path") > 40_000,
        "nearly every segment followed the connection's path: {c}"
    );
}

#[test]
fn bbr_keeps_a_100_mbit_path_busy_through_2_percent_loss_at_100_ms_where_cubic_crawls() {
    let path = LinkParams {
        rate: 100_000_000,
        ..link(100, 0.02)
    };
    let run = |congestion: &str, bytes: u64| {
        let mut t = Transfer::new(bytes, path.clone());
        t.tcp = vec![("congestion", congestion.into())];
        let d = transfer(&t);
        assert_eq!(d.sender.congestion, congestion);
        let bits_per_s = (bytes * 8) as f64 / d.elapsed.as_secs_f64();
        (d, bits_per_s)
    };
    let (bbr, bbr_rate) = run("bbr", SIZE);
    // CUBIC's loss response holds it near Mathis' 1.22·MSS/(RTT·√p) ≈
    // 1 Mbit/s: a smaller file tells its rate as well.
    let (_, cubic_rate) = run("cubic", 8 * MB);
    assert!(
        bbr_rate > 50e6,
        "BBR (measured 62 Mbit/s) keeps over half the link busy: {bbr_rate:.0} bit/s in {:?}, {:?}",
        bbr.elapsed,
        bbr.sender.stats
    );
    assert!(
        bbr_rate > 30.0 * cubic_rate,
        "BBR was measured 60 times as fast as CUBIC: {bbr_rate:.0} against {cubic_rate:.0} bit/s"
    );
    assert_eq!(
        bbr.sender.stats.timeouts, 0,
        "losses are repaired by recovery: {:?}",
        bbr.sender.stats
    );
}

#[test]
fn d_sacks_widen_the_reordering_window_until_reordering_costs_no_retransmissions() {
    // Frames held back 12 ms on a 20 ms path: more than RACK's first
    // reordering window (a quarter of the 20 ms minimum RTT), less than SRTT.
    let late = LinkParams {
        reorder: 0.01,
        reorder_delay: Duration::from_millis(12),
        ..link(20, 0.0)
    };
    let d = transfer(&Transfer::new(16 * MB, late));
    let s = d.sender.stats;
    let late = d.net.wire_stats(d.wire, Direction::AToB).reordered;
    assert!(
        late > 80,
        "about 1% of 11 600 segments were held back: {late}"
    );
    // Each late segment used to be deemed lost and resent (108 here before
    // D-SACKs widened the window); now the first few D-SACKs teach RACK the
    // path's reordering and the rest arrive inside the window.
    assert!(
        s.retransmits * 10 < late,
        "{} retransmissions for {late} late segments: {s:?}",
        s.retransmits
    );
}
