//! Figure 6 at 1 Gbit/s in the simulator (issue 14): long RTTs, a queue far
//! shorter than the path.

use std::time::Duration;

use strata_xport::sim::{self, LinkSpec, Scenario, assert_intact};
use strata_xport::{Config, RecoveryPolicy};

const MB: usize = 1 << 20;
/// 1 Gbit/s, bytes per second.
const GIG: u64 = 125_000_000;
/// wanem's queue: 1.5 MB, 12 ms at 1 Gbit/s.
const QUEUE: u64 = 1_500_000;

/// Figure 6's settings at 1 Gbit/s: 4 buffers of 16 MB (128 ms of the
/// link), selective, rate control off, wanem's 1.5 MB queue.
fn fig6g(rtt_ms: u64) -> sim::Outcome {
    fig6g_late(rtt_ms, Duration::ZERO)
}

/// `fig6g` with every timer run up to `wake_late` late (a loaded host).
fn fig6g_late(rtt_ms: u64, wake_late: Duration) -> sim::Outcome {
    let config = Config {
        app_buffer: 16_000_000,
        recovery: RecoveryPolicy::Selective,
        rate_control: false,
        ..Config::default()
    };
    let o = assert_intact(&Scenario {
        seed: 29,
        bytes: 512 * MB,
        app_buffer: 16_000_000,
        app_buffers: 4,
        link: LinkSpec {
            delay: Duration::from_millis(rtt_ms / 2),
            rate: GIG,
            queue: QUEUE,
            ..LinkSpec::default()
        },
        client: config.clone(),
        server: config,
        limit: Duration::from_secs(600),
        wake_late,
        ..Scenario::default()
    });
    eprintln!(
        "1 Gbit/s {rtt_ms} ms, timers up to {wake_late:?} late: second half {:.1}%, all in {:.2} s, {} lost to the queue ({} in ss), {} cuts, {} random, {} timeouts, {} of {} resent",
        share(&o) * 100.0,
        o.full_at.unwrap().as_secs_f64(),
        o.overflows,
        o.slow_start_overflows,
        o.server.congestion_cuts,
        o.server.random_loss_episodes,
        o.client.timeouts,
        o.client.retransmitted,
        o.client.data_sent
    );
    o
}

/// The second half's goodput as a share of the 1 Gbit/s link.
fn share(o: &sim::Outcome) -> f64 {
    let span = o.full_at.unwrap() - o.half_at.unwrap();
    (o.received_bytes / 2) as f64 / span.as_secs_f64() / GIG as f64
}

#[test]
fn four_buffers_hold_a_gigabit_link_at_long_rtts() {
    // 1 Gbit/s × 100 ms is 8,929 packets in flight, × 200 ms 17,857;
    // wanem's 1.5 MB queue is 1,071 of them (12 ms). Before (second halves
    // 61.0% and 36.7% of the link): the receiver asked for the first 64
    // holes only, so the thousands of packets a slow start lost took
    // seconds to recover; each recovery's retransmissions of the losses
    // counted as new ones and cut the window again, to a quarter of the
    // path; halving left the link idle while the window regrew; and the
    // regrowth, an eighth per round trip, overflowed the queue again
    // within the round trip the delay signal takes.
    // At 200 ms (91% of the link before): wanem's queue, a sixteenth of
    // the path, fills and drains within each round trip, so no queue
    // "stood" when it overflowed — the pipe measured at the cut was not
    // taken for the path's, and the window grew an eighth per round trip
    // past it, into the queue again every second or two.
    // Past slow start (session 7): a recovery holds the oldest of the 4
    // buffers back, the sender runs out of data, and the buffer given back
    // (or the holes filled) let thousands of packets out at once; they are
    // now paced at the window's rate (`Sender::released`). Packets lost to
    // the queue after slow start at 100/150/200 ms: 5,757/4,314/11,513
    // before, 1,395/676/884 with it.
    for rtt in [0, 50, 100, 150, 200] {
        let o = fig6g(rtt);
        assert!(share(&o) >= 0.97, "{rtt} ms: {:.1}%", share(&o) * 100.0);
        assert_eq!(o.client.timeouts, 0, "{rtt} ms");
        let after = o.overflows - o.slow_start_overflows;
        assert!(after <= 2_500, "{rtt} ms: {after} lost past slow start");
    }
}

/// A loaded host runs the pacer's timer late: the packets it held back
/// leave when it wakes, up to 4 ms of the rate at once (`rate.rs`), and the
/// buffers given back are still paced. With every timer up to 1 ms late,
/// before: all in 10.38 s, 33,475 packets lost to the queue, 1 time-out;
/// with it: 7.82 s, 2,045 lost past slow start.
#[test]
fn late_timers_neither_slow_the_transfer_nor_flood_the_queue() {
    let o = fig6g_late(200, Duration::from_millis(1));
    let all = o.full_at.unwrap();
    assert!(all <= Duration::from_millis(8_300), "all in {all:?}");
    let after = o.overflows - o.slow_start_overflows;
    assert!(after <= 3_000, "{after} lost past slow start");
    assert_eq!(o.client.timeouts, 0);
}
