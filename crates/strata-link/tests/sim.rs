//! The simulator's contract: hosts exchange frames in virtual time, timers fire in
//! it, a seed replays a run exactly, and switches flood and learn.

mod toy;

use std::time::Duration;

use strata_core::{HwAddr, Instant};
use strata_link::{BurstLoss, Direction, LinkError, LinkParams, SimNet};
use toy::{Echo, Ticker, add_app, host, host_with, mac, seen, send, start_ticker};

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

fn echo() -> Echo {
    Echo {
        echo: true,
        ..Echo::default()
    }
}

#[test]
fn two_hosts_exchange_frames_across_a_delayed_wire_in_virtual_time() {
    let mut net = SimNet::new(1);
    let a = net.add_host("a", host(1));
    let b = net.add_host("b", host(2));
    let delay = LinkParams::delay(Duration::from_millis(10));
    let w = net
        .connect((a, "net0"), (b, "net0"), delay.clone(), delay)
        .unwrap();
    let (client, to_b) = add_app(net.engine(a), Echo::default(), mac(2), 9);
    let (server, _) = add_app(net.engine(b), echo(), mac(1), 9);

    send(net.engine(a), client, to_b, b"ping");
    let answered = net.run_until_condition(
        |n| !seen(n.engine(a), client).is_empty(),
        Duration::from_secs(1),
    );

    assert!(answered, "no echo within a second");
    assert_eq!(net.now(), ms(20), "one round trip of virtual time");
    assert_eq!(seen(net.engine(b), server), [(ms(10), b"ping".to_vec())]);
    assert_eq!(seen(net.engine(a), client), [(ms(20), b"ping".to_vec())]);
    assert_eq!(net.wire_stats(w, Direction::AToB).delivered, 1);
    assert_eq!(net.wire_stats(w, Direction::BToA).delivered, 1);
}

#[test]
fn timers_fire_at_their_virtual_times_and_not_before() {
    let mut net = SimNet::new(1);
    let a = net.add_host("a", host(1));
    let b = net.add_host("b", host(2));
    let delay = LinkParams::delay(Duration::from_millis(3));
    net.connect((a, "net0"), (b, "net0"), delay.clone(), delay)
        .unwrap();
    let (server, _) = add_app(net.engine(b), Echo::default(), mac(1), 9);
    // An hour of ticks, one a minute: virtual time costs nothing to wait for.
    let ticker = start_ticker(
        net.engine(a),
        Ticker::new(Duration::from_secs(60), 60),
        mac(2),
        9,
    );

    net.run_until(Instant::ZERO + Duration::from_secs(150));
    let fired = &net.engine(a).app::<Ticker>(ticker).unwrap().fired;
    assert_eq!(fired, &[ms(60_000), ms(120_000)]);

    net.run_for(Duration::from_secs(3600));
    let fired = &net.engine(a).app::<Ticker>(ticker).unwrap().fired;
    let expected: Vec<Instant> = (1..=60).map(|m| ms(m * 60_000)).collect();
    assert_eq!(fired, &expected);
    let arrivals: Vec<Instant> = seen(net.engine(b), server)
        .iter()
        .map(|(t, _)| *t)
        .collect();
    let expected: Vec<Instant> = expected
        .iter()
        .map(|&t| t + Duration::from_millis(3))
        .collect();
    assert_eq!(arrivals, expected);
    assert_eq!(net.now(), ms(150_000 + 3_600_000));
}

fn lossy() -> LinkParams {
    LinkParams {
        delay: Duration::from_millis(5),
        jitter: Duration::from_millis(2),
        loss: 0.2,
        burst: Some(BurstLoss {
            enter: 0.02,
            leave: 0.3,
            loss: 1.0,
        }),
        ber: 1e-5,
        duplicate: 0.05,
        reorder: 0.05,
        rate: 1_000_000,
        ..LinkParams::default()
    }
}

/// What one lossy run produced: both directions' statistics, what each end
/// received, and the bytes of a capture of host a.
type Run = (
    String,
    String,
    Vec<(Instant, Vec<u8>)>,
    Vec<(Instant, Vec<u8>)>,
    Vec<u8>,
);

fn lossy_run(seed: u64, name: &str) -> Run {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let pcap = dir.join(format!("sim-{name}-{seed}.pcap"));
    let mut net = SimNet::new(seed);
    let a = net.add_host("a", host(1));
    let b = net.add_host("b", host(2));
    let w = net
        .connect((a, "net0"), (b, "net0"), lossy(), lossy())
        .unwrap();
    net.capture(a, "net0", &pcap).unwrap();
    let (server, _) = add_app(net.engine(b), echo(), mac(1), 9);
    let ticker = start_ticker(
        net.engine(a),
        Ticker::new(Duration::from_millis(1), 300),
        mac(2),
        9,
    );
    net.run_for(Duration::from_secs(1));
    net.flush_captures().unwrap();
    (
        net.wire_stats(w, Direction::AToB).to_string(),
        net.wire_stats(w, Direction::BToA).to_string(),
        seen(net.engine(b), server),
        net.engine(a).app::<Ticker>(ticker).unwrap().got.clone(),
        std::fs::read(pcap).unwrap(),
    )
}

#[test]
fn a_seed_replays_a_lossy_run_exactly() {
    let first = lossy_run(9, "replay-1");
    let second = lossy_run(9, "replay-2");
    assert!(!first.3.is_empty(), "some echoes must get through");
    assert!(first.0.contains("lost"), "{}", first.0);
    assert_eq!(first, second);
}

#[test]
fn another_seed_loses_other_frames() {
    let nine = lossy_run(9, "seed");
    let ten = lossy_run(10, "seed");
    assert_ne!(nine.2, ten.2, "seeds 9 and 10 delivered the same frames");
    assert_ne!(nine.0, ten.0);
}

#[test]
fn a_switch_floods_broadcast_and_unknown_destinations_then_forwards_what_it_learned() {
    let mut net = SimNet::new(3);
    let hosts: Vec<_> = (1..=3)
        .map(|n| net.add_host(&format!("h{n}"), host(n)))
        .collect();
    let sw = net.add_switch("sw");
    let d = LinkParams::delay(Duration::from_millis(1));
    for &h in &hosts {
        net.attach((h, "net0"), sw, d.clone(), d.clone()).unwrap();
    }
    let [h1, h2, h3] = [hosts[0], hosts[1], hosts[2]];
    let (a, to_all) = add_app(net.engine(h1), Echo::default(), HwAddr::BROADCAST, 7);
    let (b, _) = add_app(net.engine(h2), echo(), mac(1), 7);
    let (c, _) = add_app(net.engine(h3), echo(), mac(1), 7);

    // A broadcast reaches both others; both echo to h1, whom the switch has learned.
    send(net.engine(h1), a, to_all, b"hello all");
    net.run_for(Duration::from_millis(10));
    assert_eq!(seen(net.engine(h2), b).len(), 1);
    assert_eq!(seen(net.engine(h3), c).len(), 1);
    assert_eq!(seen(net.engine(h1), a).len(), 2);
    let s = net.switch_stats(sw).clone();
    assert_eq!((s.flooded, s.forwarded), (1, 2), "{s}");
    let rx = |net: &mut SimNet, h| {
        let e = net.engine(h);
        e.link_stats(e.link_id("net0").unwrap()).rx_frames
    };
    assert_eq!(rx(&mut net, h3), 1, "h2's echo to h1 must not reach h3");

    // h2 and h3 are known now: a frame to h2 goes to h2 alone.
    let (a2, to_h2) = add_app(net.engine(h1), Echo::default(), mac(2), 8);
    send(net.engine(h1), a2, to_h2, b"just you");
    net.run_for(Duration::from_millis(10));
    assert_eq!(net.switch_stats(sw).forwarded, 3);
    assert_eq!(rx(&mut net, h3), 1);
    assert_eq!(rx(&mut net, h2), 2);

    // An address never heard from is flooded: h3 receives the frame and drops it.
    let (a3, to_stranger) = add_app(net.engine(h1), Echo::default(), mac(99), 6);
    send(net.engine(h1), a3, to_stranger, b"anyone?");
    net.run_for(Duration::from_millis(10));
    assert_eq!(net.switch_stats(sw).flooded, 2);
    assert_eq!(rx(&mut net, h3), 2);
}

#[test]
fn a_wire_configured_in_the_graph_applies_both_ways() {
    let mut net = SimNet::new(1);
    let a = net.add_host("a", host_with(1, "sim", "delay = \"7ms\""));
    let b = net.add_host("b", host(2));
    net.connect_as_configured((a, "net0"), (b, "net0")).unwrap();
    let (client, to_b) = add_app(net.engine(a), Echo::default(), mac(2), 9);
    add_app(net.engine(b), echo(), mac(1), 9);
    send(net.engine(a), client, to_b, b"x");
    assert!(net.run_until_condition(
        |n| !seen(n.engine(a), client).is_empty(),
        Duration::from_secs(1)
    ));
    assert_eq!(net.now(), ms(14));
}

#[test]
fn wiring_mistakes_are_refused_naming_the_culprit() {
    let mut net = SimNet::new(1);
    let a = net.add_host("a", host_with(1, "sim", "delay = \"7ms\""));
    let b = net.add_host("b", host_with(2, "sim", "delay = \"8ms\""));
    let c = net.add_host("c", host_with(3, "mem", ""));
    let d = LinkParams::default();
    let err = |r: Result<_, LinkError>| r.unwrap_err().to_string();

    let e = err(net.connect((a, "eth9"), (b, "net0"), d.clone(), d.clone()));
    assert!(
        e.contains("host 'a' has no link 'eth9' (its links: net0)"),
        "{e}"
    );
    let e = err(net.connect_as_configured((a, "net0"), (b, "net0")));
    assert!(
        e.contains("disagree") && e.contains("7ms") && e.contains("8ms"),
        "{e}"
    );
    let e = err(net.connect_as_configured((a, "net0"), (c, "net0")));
    assert!(
        e.contains("host 'c': link 'net0' is of kind 'mem', not 'sim'"),
        "{e}"
    );
    net.connect((a, "net0"), (b, "net0"), d.clone(), d.clone())
        .unwrap();
    let e = err(net.connect((c, "net0"), (a, "net0"), d.clone(), d));
    assert!(
        e.contains("host 'a': link 'net0' is already connected"),
        "{e}"
    );
}

#[test]
fn running_never_moves_time_backwards() {
    let mut net = SimNet::new(1);
    net.run_until(ms(50));
    net.run_until(ms(20));
    assert_eq!(net.now(), ms(50));
    assert!(!net.run_until_condition(|_| false, Duration::from_millis(5)));
    assert_eq!(net.now(), ms(55));
}
