//! The paper's 4-layer stack over Strata's simulated link, with the PA off
//! (four protocols on the engine) and on: every message exactly once and in
//! order, whatever the link loses, reorders or duplicates.

mod common;

use std::time::Duration;

use common::pair;
use strata::link::LinkParams;

fn payload(i: u32) -> Vec<u8> {
    // Sizes from 1 byte to past a fragment, so some messages are cut.
    let len = 1 + (i as usize * 37) % 3000;
    let mut v = vec![(i % 251) as u8; len];
    v[..4.min(len)].copy_from_slice(&i.to_be_bytes()[..4.min(len)]);
    v
}

fn lossy(loss: f64) -> LinkParams {
    LinkParams {
        delay: Duration::from_micros(500),
        loss,
        duplicate: loss / 2.0,
        reorder: loss,
        reorder_delay: Duration::from_micros(700),
        ..LinkParams::default()
    }
}

fn exchange(pa: bool, loss: f64, seed: u64) {
    let mut p = pair(seed, pa, lossy(loss), "");
    let n = 300u32;
    for i in 0..n {
        p.send(0, &payload(i));
        if i % 3 == 0 {
            p.send(1, &payload(i));
        }
        p.run(Duration::from_micros(150));
        if pa {
            // Predictions kept up to date in place equal a full rebuild.
            for side in 0..2 {
                assert!(p.predictions_current(side), "pa loss={loss}: step {i}");
            }
        }
    }
    p.run(Duration::from_secs(20));
    let want_b: Vec<Vec<u8>> = (0..n).map(payload).collect();
    let want_a: Vec<Vec<u8>> = (0..n).filter(|i| i % 3 == 0).map(payload).collect();
    let (got_b, got_a) = (p.got(1), p.got(0));
    assert_eq!(got_b.len(), want_b.len(), "pa={pa} loss={loss}: a to b");
    assert!(
        got_b == want_b,
        "pa={pa} loss={loss}: a to b in order, once"
    );
    assert!(
        got_a == want_a,
        "pa={pa} loss={loss}: b to a in order, once"
    );
    let lost = p
        .net
        .wire_stats(p.wire, strata::link::Direction::AToB)
        .lost();
    assert_eq!(
        lost > 0,
        loss > 0.0,
        "pa={pa} loss={loss}: the link lost {lost}"
    );
    if pa {
        assert!(p.event(0, "fast-send") > 0 && p.event(1, "fast-deliver") > 0);
    }
}

#[test]
fn every_message_arrives_once_and_in_order_with_the_pa_off_and_on() {
    for pa in [false, true] {
        for (k, loss) in [0.0, 0.01, 0.05, 0.10].into_iter().enumerate() {
            exchange(pa, loss, 7 + k as u64);
        }
    }
}

#[test]
fn with_the_pa_on_most_messages_take_the_fast_paths() {
    let mut p = pair(3, true, lossy(0.0), "");
    p.set_echo(1);
    for i in 0..200u32 {
        p.send(0, &i.to_be_bytes());
        p.run(Duration::from_millis(2));
    }
    p.run(Duration::from_millis(100));
    assert_eq!(p.got(0).len(), 200, "every echo came back");
    let fast = p.event(0, "fast-send") + p.event(1, "fast-send");
    let fast_d = p.event(0, "fast-deliver") + p.event(1, "fast-deliver");
    assert!(fast >= 390, "fast sends: {fast}");
    assert!(fast_d >= 390, "fast deliveries: {fast_d}");
    // Only the first messages carry the identification.
    assert!(
        p.event(0, "ident-sent") <= 2,
        "{}",
        p.event(0, "ident-sent")
    );
}
