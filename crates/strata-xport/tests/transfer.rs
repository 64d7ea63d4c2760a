//! Whole transfers through the simulated path (seeded, virtual time): every
//! byte arrives, in order, with the same SHA-256, every application buffer
//! is given back, and both ends close.

use std::time::Duration;

use strata_xport::sim::{self, LinkSpec, Scenario, assert_intact};
use strata_xport::{Config, DropReason, RecoveryPolicy};

const MB: usize = 1 << 20;

fn path(loss: f64, rtt_ms: u64) -> LinkSpec {
    LinkSpec {
        loss,
        delay: Duration::from_millis(rtt_ms / 2),
        ..LinkSpec::default()
    }
}

fn both(c: Config) -> (Config, Config) {
    (c.clone(), c)
}

#[test]
fn a_clean_path_moves_the_stream_without_retransmitting() {
    let o = assert_intact(&Scenario::default());
    assert_eq!(o.client.retransmitted, 0);
    assert_eq!(o.server.recovery_episodes, 0);
}

#[test]
fn sixty_four_megabytes_arrive_intact_at_each_loss_rate() {
    for (seed, loss) in [(1, 0.0), (2, 0.01), (3, 0.05), (4, 0.10)] {
        let o = assert_intact(&Scenario {
            seed,
            bytes: 64 * MB,
            link: path(loss, 50),
            ..Scenario::default()
        });
        if loss > 0.0 {
            assert!(o.client.retransmitted > 0, "loss {loss}: nothing resent?");
            assert!(o.server.recovery_episodes > 0);
        }
    }
}

#[test]
fn sixty_four_megabytes_survive_reordering_duplication_and_bit_errors() {
    // No UDP checksum in the simulator, so the transport's own data
    // checksum is on (§3.3): corrupted packets are dropped and counted.
    let c = Config {
        data_checksum: true,
        ..Config::default()
    };
    let (client, server) = both(c);
    let o = assert_intact(&Scenario {
        seed: 5,
        bytes: 64 * MB,
        link: LinkSpec {
            loss: 0.01,
            reorder: 0.05,
            reorder_by: Duration::from_millis(5),
            duplicate: 0.02,
            bit_error: 0.01,
            ..path(0.0, 40)
        },
        client,
        server,
        ..Scenario::default()
    });
    assert!(o.server.drops.get(DropReason::Duplicate) > 0);
    let mut drops = o.listener.drops.clone();
    drops.add(&o.client.drops);
    let corrupted = drops.get(DropReason::DataChecksum) + drops.get(DropReason::HeaderChecksum);
    assert!(corrupted > 0, "bit errors were not caught: {drops:?}");
}

#[test]
fn round_trip_times_from_zero_to_two_hundred_milliseconds() {
    for (seed, rtt) in [(6, 0), (7, 100), (8, 200)] {
        let o = assert_intact(&Scenario {
            seed,
            bytes: 16 * MB,
            link: path(0.01, rtt),
            ..Scenario::default()
        });
        if rtt == 200 {
            assert!(
                o.elapsed > Duration::from_millis(400),
                "faster than light: {:?}",
                o.elapsed
            );
        }
    }
}

#[test]
fn go_back_n_and_selective_both_recover_and_selective_resends_less() {
    let run = |recovery| {
        let c = Config {
            recovery,
            ..Config::default()
        };
        let (client, server) = both(c);
        assert_intact(&Scenario {
            seed: 9,
            bytes: 16 * MB,
            link: path(0.02, 100),
            client,
            server,
            ..Scenario::default()
        })
    };
    let gbn = run(RecoveryPolicy::GoBackN);
    let sel = run(RecoveryPolicy::Selective);
    assert!(gbn.server.go_back_n_sent > 0 && gbn.server.selective_sent == 0);
    assert!(sel.server.selective_sent > 0 && sel.server.go_back_n_sent == 0);
    assert!(gbn.server.drops.get(DropReason::GoBackNDiscard) > 0);
    assert_eq!(sel.server.drops.get(DropReason::GoBackNDiscard), 0);
    assert!(
        sel.client.retransmitted < gbn.client.retransmitted,
        "selective {} vs go-back-N {}",
        sel.client.retransmitted,
        gbn.client.retransmitted
    );
}

#[test]
fn rate_control_on_and_off_both_deliver() {
    for (seed, rate_control) in [(10, true), (11, false)] {
        let c = Config {
            rate_control,
            ..Config::default()
        };
        let (client, server) = both(c);
        assert_intact(&Scenario {
            seed,
            bytes: 16 * MB,
            link: LinkSpec {
                rate: 12_500_000,
                queue: 256 << 10,
                ..path(0.0, 50)
            },
            client,
            server,
            ..Scenario::default()
        });
    }
}

#[test]
fn four_data_sockets_are_negotiated_and_used() {
    let o = assert_intact(&Scenario {
        seed: 12,
        bytes: 64 * MB,
        data_sockets: 4,
        link: path(0.01, 50),
        ..Scenario::default()
    });
    assert_eq!(o.data_sockets, 4);
}

#[test]
fn a_slow_receiver_holds_the_sender_back_without_losing_data() {
    let o = assert_intact(&Scenario {
        seed: 13,
        bytes: 16 * MB,
        app_buffer: MB,
        app_buffers: 2,
        consume_delay: Duration::from_millis(100),
        link: path(0.0, 20),
        ..Scenario::default()
    });
    // Two 1 MB buffers, each taking 100 ms: about 10 MB/s at best.
    assert!(o.elapsed >= Duration::from_millis(700), "{:?}", o.elapsed);
    assert_eq!(o.server.drops.get(DropReason::OutOfWindow), 0);
}

#[test]
fn small_send_buffers_fill_a_large_receive_buffer_exactly() {
    // 12,500-byte buffers are cut 8 × 1444 + 948, so a packet straddles the
    // end of the receiver's only 1 MiB buffer: it leaves cut at the limit.
    // Held back whole, it waited for a buffer given back only when full.
    let o = assert_intact(&Scenario {
        seed: 16,
        bytes: 3 * MB,
        app_buffer: 12_500,
        app_buffers: 1,
        recv_buffer: Some(MB),
        link: path(0.0, 10),
        limit: Duration::from_secs(60),
        ..Scenario::default()
    });
    assert_eq!(o.server.drops.get(DropReason::OutOfWindow), 0);
}

#[test]
fn a_peer_that_vanishes_mid_transfer_is_reported_after_the_idle_timeout() {
    let c = Config {
        idle_timeout: Duration::from_secs(3),
        ..Config::default()
    };
    let (client, server) = both(c);
    let o = sim::run(&Scenario {
        seed: 14,
        bytes: 64 * MB,
        link: LinkSpec {
            rate: 1_250_000,
            ..path(0.0, 50)
        },
        vanish_at: Some(Duration::from_secs(2)),
        client,
        server,
        ..Scenario::default()
    });
    assert_eq!(
        o.client_lost,
        Some(strata_xport::ConnectionError::TimedOut(
            Duration::from_secs(3)
        ))
    );
    assert!(o.received_bytes < 64 * MB as u64);
    let t = o.elapsed;
    assert!(
        t >= Duration::from_secs(5) && t < Duration::from_secs(6),
        "lost at {t:?}"
    );
}

#[test]
fn reordering_within_the_reorder_window_is_not_taken_for_loss() {
    let o = assert_intact(&Scenario {
        seed: 15,
        bytes: 16 * MB,
        data_sockets: 4,
        link: LinkSpec {
            reorder: 0.2,
            reorder_by: Duration::from_micros(300),
            ..path(0.0, 20)
        },
        ..Scenario::default()
    });
    assert!(o.server.drops.get(DropReason::Duplicate) == 0);
    assert_eq!(
        o.server.recovery_episodes, 0,
        "late packets were taken for lost ones"
    );
    assert_eq!(o.client.retransmitted, 0);
}

/// Loss discrimination on or off. Slow start is left only on a loss here,
/// so that its overflow gives the congested cases their congestion (left on
/// the delay signal, it overflows a 256 KB queue at 50 ms no more).
fn discriminating(on: bool) -> (Config, Config) {
    both(Config {
        loss_discrimination: on,
        slow_start_exit: false,
        ..Config::default()
    })
}

/// The same transfer with every recovery episode halving the window (Reno,
/// as before) and with random loss told from congestion (`queue.rs`).
fn reno_and_discriminating(seed: u64, link: LinkSpec) -> (sim::Outcome, sim::Outcome) {
    let run = |on| {
        let (client, server) = discriminating(on);
        assert_intact(&Scenario {
            seed,
            bytes: 64 * MB,
            link: link.clone(),
            client,
            server,
            ..Scenario::default()
        })
    };
    (run(false), run(true))
}

#[test]
fn random_loss_at_a_long_rtt_keeps_the_window() {
    // 1% random loss, 50 ms RTT, a 1 Gbit/s path with a 4 MB queue.
    let (reno, kept) = reno_and_discriminating(17, path(0.01, 50));
    eprintln!(
        "1% loss, 50 ms, 1 Gbit/s: halving every episode {:?}, discriminating {:?}",
        reno.elapsed, kept.elapsed
    );
    assert!(kept.server.random_loss_episodes > 0);
    assert!(
        kept.elapsed * 10 < reno.elapsed,
        "{:?} vs {:?}",
        kept.elapsed,
        reno.elapsed
    );
}

/// A 100 Mbit/s bottleneck with a 256 KB queue, 50 ms RTT.
fn bottleneck(loss: f64) -> LinkSpec {
    LinkSpec {
        rate: 12_500_000,
        queue: 256 << 10,
        ..path(loss, 50)
    }
}

#[test]
fn random_loss_behind_a_bottleneck_does_not_overload_it() {
    // 1% random loss and a 100 Mbit/s bottleneck with a 256 KB queue: the
    // window grows while no queue stands and halves once one does.
    let (reno, kept) = reno_and_discriminating(19, bottleneck(0.01));
    eprintln!(
        "1% loss, 50 ms, 100 Mbit/s: halving every episode {:?}, discriminating {:?} ({} cuts, {} of {} sent resent)",
        reno.elapsed,
        kept.elapsed,
        kept.server.congestion_cuts,
        kept.client.retransmitted,
        kept.client.data_sent
    );
    assert!(kept.server.congestion_cuts > 0, "the queue was never seen");
    assert!(kept.elapsed * 5 < reno.elapsed);
    // 1% is lost at random; the queue adds little.
    assert!(kept.client.retransmitted * 100 < kept.client.data_sent * 3);
}

#[test]
fn a_congested_bottleneck_still_halves_the_window() {
    // No random loss: every loss is the bottleneck's queue overflowing.
    let (reno, kept) = reno_and_discriminating(18, bottleneck(0.0));
    eprintln!(
        "congested: halving every episode {:?} ({} resent), discriminating {:?} ({} resent)",
        reno.elapsed, reno.client.retransmitted, kept.elapsed, kept.client.retransmitted
    );
    assert_eq!(kept.server.random_loss_episodes, 0);
    assert!(kept.server.congestion_cuts > 0);
    assert!(kept.elapsed <= reno.elapsed * 11 / 10);
    assert!(kept.client.retransmitted <= reno.client.retransmitted * 3 / 2);
}

#[test]
fn a_shallow_bottleneck_queue_is_not_taken_for_random_loss() {
    // Table 2's slow receiver: 10 Mbit/s behind a 16 KB queue, no delay.
    // The queue overflows before it stands long enough to be seen, so every
    // loss looks random to the delay signal alone; the loss rate tells.
    let link = LinkSpec {
        rate: 1_250_000,
        queue: 16 << 10,
        ..path(0.0, 0)
    };
    let run = |on| {
        let (client, server) = discriminating(on);
        assert_intact(&Scenario {
            seed: 23,
            bytes: 4 * MB,
            link: link.clone(),
            client,
            server,
            ..Scenario::default()
        })
    };
    let (reno, kept) = (run(false), run(true));
    eprintln!(
        "shallow queue: halving every episode {:?} ({} of {} resent), discriminating {:?} ({} of {} resent)",
        reno.elapsed,
        reno.client.retransmitted,
        reno.client.data_sent,
        kept.elapsed,
        kept.client.retransmitted,
        kept.client.data_sent
    );
    assert!(kept.server.congestion_cuts > 0);
    // Halving on every episode resends least; discriminating resends two to
    // three times as much here (a block of retransmissions must pass before
    // the share says congestion), where the delay signal alone resent 1.5
    // times the data. The queue holds 11 packets of 1,400 bytes (2.2 times)
    // or 10 of 1,444 (2.8 times, version 2's full MTU).
    assert!(kept.client.retransmitted <= reno.client.retransmitted * 3);
    assert!(kept.client.retransmitted * 3 < kept.client.data_sent);
}

/// Seed 001's Table 1 settings (rate control off) through `link` at 100
/// Mbit/s: 4 application buffers of 1.6 MB (128 ms of the link) each way.
fn table1(
    seed: u64,
    bytes: usize,
    recovery: RecoveryPolicy,
    slow_start_exit: bool,
    link: LinkSpec,
) -> sim::Outcome {
    let config = Config {
        app_buffer: 1_600_000,
        recovery,
        rate_control: false,
        slow_start_exit,
        ..Config::default()
    };
    let (client, server) = both(config);
    assert_intact(&Scenario {
        seed,
        bytes,
        app_buffer: 1_600_000,
        app_buffers: 4,
        link: LinkSpec {
            rate: 12_500_000,
            ..link
        },
        client,
        server,
        limit: Duration::from_secs(600),
        ..Scenario::default()
    })
}

/// Figure 6 of seed 001 at 100 Mbit/s: Table 1's settings (selective,
/// rate control off), 4 application buffers of 1.6 MB (128 ms of the link),
/// `rtt_ms` round trip, a bottleneck queue of `queue` bytes (strata wanem's
/// default is 1.5 MB), slow start left on the delay signal or only on loss.
fn fig6(rtt_ms: u64, queue: u64, slow_start_exit: bool) -> sim::Outcome {
    let link = LinkSpec {
        queue,
        ..path(0.0, rtt_ms)
    };
    let o = table1(
        29,
        64 * MB,
        RecoveryPolicy::Selective,
        slow_start_exit,
        link,
    );
    eprintln!(
        "fig6 100 Mbit/s, {rtt_ms:>3} ms, {:>4} KB queue, exit on delay {slow_start_exit:>5}: second half {:.1}% of the link, all data in {:.2} s ({:.1}%), {} lost to the queue ({} in slow start), {} cuts, {} of {} resent",
        queue / 1000,
        link_share(&o) * 100.0,
        o.full_at.unwrap().as_secs_f64(),
        whole_share(&o) * 100.0,
        o.overflows,
        o.slow_start_overflows,
        o.server.congestion_cuts,
        o.client.retransmitted,
        o.client.data_sent
    );
    o
}

/// The second half's goodput (the steady state, as `strata bench paper001
/// fig6` judges it) as a share of the 100 Mbit/s link.
fn link_share(o: &sim::Outcome) -> f64 {
    let span = o.full_at.unwrap() - o.half_at.unwrap();
    (o.received_bytes / 2) as f64 / span.as_secs_f64() / 12_500_000.0
}

/// The whole stream's goodput, from the start (set-up included) to its
/// last byte, as a share of the link.
fn whole_share(o: &sim::Outcome) -> f64 {
    o.received_bytes as f64 / o.full_at.unwrap().as_secs_f64() / 12_500_000.0
}

#[test]
fn four_buffers_fill_a_hundred_megabit_link_at_every_rtt() {
    // Strata wanem's 1.5 MB queue is 1,071 packets, less than the path's
    // 1,785 at 200 ms. Slow start left only on a loss overflowed it by
    // thousands of packets (1,058–2,228 in slow start here, 5,210 resent at
    // 200 ms) and on the real link the recovery fell into the measured half:
    // 74% of the link at 200 ms. Paced and left on the delay signal, it
    // loses none.
    for rtt in [0, 50, 100, 150, 200] {
        let old = fig6(rtt, 1_500_000, false);
        let new = fig6(rtt, 1_500_000, true);
        let share = link_share(&new);
        assert!(share >= 0.95, "{rtt} ms: {:.1}% of the link", share * 100.0);
        assert!(old.slow_start_overflows > 1000, "{rtt} ms: {old:?}");
        assert!(
            new.slow_start_overflows * 100 <= old.slow_start_overflows,
            "{rtt} ms: {} lost in slow start, {} before",
            new.slow_start_overflows,
            old.slow_start_overflows
        );
        // Whole transfers: the same or faster (within 1%, pacing's cost).
        assert!(
            new.full_at.unwrap() <= old.full_at.unwrap() * 101 / 100,
            "{rtt} ms: slower"
        );
    }
}

#[test]
fn slow_start_leaves_before_a_shallow_queue_overflows() {
    // A 256 KB queue (180 packets): a fifth of the path at 100 ms, a
    // tenth at 200 ms. The delay signal reaches the sender a round trip
    // after the queue formed, while the window doubles, and a train paced
    // at four times the rate queues once the window passes a quarter of the
    // path: where the queue is shorter than that, the round after the one
    // that first queued overflows it, whatever the delay threshold. At
    // 100 ms the exit on delay alone lost more than no exit (243 against
    // 158 packets in slow start): the queue was
    // 3.8 ms in the round before, under the 8 ms threshold, and the window
    // raised to the path mid-overflow let the next train in too. Now a
    // train the bottleneck spread out ends slow start before the window
    // doubles past the path. At 200 ms slow start's last round still
    // overflows so short a queue (228 packets against 158 without the
    // exit), and in all the exit loses more (470 against 188; 1,795 before
    // session 7's paced release), though it ends sooner (7.9 s against
    // 9.5): printed, not judged. The spread is seen only in the round that
    // overflows — its train, paced at four times a window growing through
    // the round, outruns the bottleneck by 1.25 only in its last third —
    // so stopping it needs the bottleneck's rate from an earlier round.
    for rtt in [50, 100] {
        let old = fig6(rtt, 256_000, false);
        let new = fig6(rtt, 256_000, true);
        assert!(
            new.slow_start_overflows * 5 < old.slow_start_overflows * 4,
            "{rtt} ms: {} lost in slow start, {} before",
            new.slow_start_overflows,
            old.slow_start_overflows
        );
        // The whole transfer loses no more either, after slow start too.
        assert!(
            new.overflows <= old.overflows,
            "{rtt} ms: {} lost in all, {} without the exit",
            new.overflows,
            old.overflows
        );
    }
    fig6(200, 256_000, false);
    fig6(200, 256_000, true);
}

/// Figure 7 of seed 001: Figure 6's path and settings with bit errors at
/// `ber` each way, `recovery` asked by the receiver; 32 MB.
fn fig7(rtt_ms: u64, ber: f64, recovery: RecoveryPolicy) -> sim::Outcome {
    let link = LinkSpec {
        queue: 1_500_000,
        ber,
        ..path(0.0, rtt_ms)
    };
    let o = table1(31, 32 * MB, recovery, true, link);
    eprintln!(
        "fig7 100 Mbit/s, {rtt_ms:>3} ms, BER {ber:e}, {recovery:?}: {:.1} Mbit/s ({:.2} s), {} random episodes, {} cuts, {} timeouts, {} of {} resent, {} lost to the queue",
        o.received_bytes as f64 * 8.0 / o.full_at.unwrap().as_secs_f64() / 1e6,
        o.full_at.unwrap().as_secs_f64(),
        o.server.random_loss_episodes,
        o.server.congestion_cuts,
        o.client.timeouts,
        o.client.retransmitted,
        o.client.data_sent,
        o.overflows,
    );
    o
}

#[test]
fn selective_retransmission_keeps_the_window_through_bit_errors() {
    // Figure 7 at 1e-6: about one 1,450-byte datagram in 86 is lost, at
    // random. Bursts of an unpaced window (rate control off) queued for a
    // moment at the bottleneck, and a 32-packet block within a burst read
    // as a standing queue: every loss was taken for congestion, and so was
    // the first one, before any estimate. Before: selective 18.8, 8.8 and
    // 6.9 Mbit/s at 50, 100 and 200 ms, go-back-N 4.0, 2.1 and 1.1.
    for rtt in [50, 100, 200] {
        let gbn = fig7(rtt, 1e-6, RecoveryPolicy::GoBackN);
        let sel = fig7(rtt, 1e-6, RecoveryPolicy::Selective);
        let mbit = |o: &sim::Outcome| {
            o.received_bytes as f64 * 8.0 / o.full_at.unwrap().as_secs_f64() / 1e6
        };
        assert!(
            mbit(&sel) >= 30.0,
            "{rtt} ms: selective {:.1} Mbit/s",
            mbit(&sel)
        );
        assert!(
            mbit(&sel) > 3.0 * mbit(&gbn),
            "{rtt} ms: selective {:.1}, go-back-N {:.1} Mbit/s",
            mbit(&sel),
            mbit(&gbn)
        );
    }
}

/// The CONNECT echoing the cookie leaves when the RETRY arrives; its own
/// time-out must run from then. At a 200 ms RTT the first CONNECT's 250 ms
/// retry timer used to fire while the ACCEPT was still on its way, and a
/// third CONNECT left for nothing.
#[test]
fn the_connect_after_a_retry_is_not_sent_again_before_its_accept_can_arrive() {
    use std::net::SocketAddr;
    use std::time::Instant;
    use strata_xport::{Channel, Connection, Listener, State};

    let t0 = Instant::now();
    let half = Duration::from_millis(100);
    let server: SocketAddr = "198.18.0.2:2000".parse().unwrap();
    let client_addr: SocketAddr = "198.18.0.1:1000".parse().unwrap();
    let mut client = Connection::connect(Config::default(), t0, 7, server, &[1001]);
    let mut listener = Listener::new(Config::default(), t0, 8, &[2001], 4);
    // Everything a side sends at `now`, as datagrams.
    let out = |c: &mut dyn FnMut(&mut Vec<u8>) -> Option<strata_xport::Transmit>| {
        let mut v = Vec::new();
        let mut b = Vec::new();
        while let Some(t) = c(&mut b) {
            let mut d = b.clone();
            d.extend_from_slice(&t.payload);
            v.push(d);
        }
        v
    };
    let connects = out(&mut |b| client.poll_transmit(t0, b));
    assert_eq!(connects.len(), 1);
    // The CONNECT reaches the listener at 100 ms; its RETRY the client at 200 ms.
    listener.handle(t0 + half, client_addr, Channel::Control, &connects[0]);
    let retries = out(&mut |b| listener.poll_transmit(t0 + half, b));
    assert_eq!(retries.len(), 1, "one RETRY");
    let t = t0 + 2 * half;
    assert!(
        client
            .handle(t, server, Channel::Control, &retries[0])
            .is_none()
    );
    let second = out(&mut |b| client.poll_transmit(t, b));
    assert_eq!(second.len(), 1, "the CONNECT with the cookie");
    // Its ACCEPT is due at 400 ms: nothing leaves before, whatever timers fire.
    let mut now = t;
    while let Some(d) = client.poll_timeout().filter(|&d| d < t0 + 4 * half) {
        now = d.max(now);
        client.handle_timeout(now);
        let again = out(&mut |b| client.poll_transmit(now, b));
        assert!(again.is_empty(), "CONNECT sent again at {:?}", now - t0);
        if d == now && client.poll_timeout() == Some(d) {
            break;
        }
    }
    listener.handle(t0 + 3 * half, client_addr, Channel::Control, &second[0]);
    let accepts = out(&mut |b| listener.poll_transmit(t0 + 3 * half, b));
    assert_eq!(accepts.len(), 1, "one ACCEPT");
    client.handle(t0 + 4 * half, server, Channel::Control, &accepts[0]);
    assert_eq!(client.state(), State::Established);
    assert_eq!(client.stats().control_sent, 2, "two CONNECTs in all");
}
