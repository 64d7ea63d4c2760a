//! Header prediction (seed 003 §3.2): hits take the fast paths; a full
//! window disables the send prediction through the window layer's counter,
//! the backlog fills and leaves packed once acknowledgements open it.

mod common;

use std::time::Duration;

use common::shuttle::Shuttle;
use strata::core::SessionId;
use strata_pa::accel::Accelerator;

fn counters(s: &Shuttle, side: usize) -> (Vec<i32>, Vec<i32>) {
    let pa = s.e[side].protocol::<Accelerator>(s.top).unwrap();
    pa.disable_counters(SessionId(0)).unwrap()
}

#[test]
fn a_full_window_disables_the_send_prediction_until_acknowledged() {
    let mut s = Shuttle::new(true, "");
    // Nothing comes back from side 1: no acknowledgement.
    for i in 0..40u8 {
        s.send(0, &[i; 8]);
        s.run(Duration::from_micros(200), &mut |side, _, _| side == 0);
    }
    let (send, deliver) = counters(&s, 0);
    // Layers top first: frag, window, check, ident.
    assert_eq!(
        send,
        vec![0, 1, 0, 0],
        "the window disabled the send prediction"
    );
    assert_eq!(deliver, vec![0, 0, 0, 0]);
    assert_eq!(s.event(0, "fast-send"), 16, "a window's worth went fast");
    assert!(s.event(0, "backlogged") >= 24);
    // Let acknowledgements through: the window opens, the backlog leaves
    // packed, everything arrives once and in order.
    s.run(Duration::from_millis(100), &mut |_, _, _| true);
    assert_eq!(counters(&s, 0).0, vec![0, 0, 0, 0], "re-enabled");
    assert!(s.event(0, "packed") >= 2);
    assert_eq!(s.got(1), (0..40u8).map(|i| vec![i; 8]).collect::<Vec<_>>());
}

#[test]
fn a_message_out_of_order_misses_the_prediction_and_goes_through_the_layers() {
    let mut s = Shuttle::new(true, "");
    s.send(0, b"one");
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    let slow = s.event(1, "slow-deliver");
    // Lose the next data frame from side 0; the one after arrives early.
    let lost = s.sent[0];
    s.send(0, b"two");
    s.run(Duration::from_millis(1), &mut |side, n, _| {
        !(side == 0 && n == lost)
    });
    s.send(0, b"three");
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    assert!(
        s.event(1, "slow-deliver") > slow,
        "the early one missed the prediction"
    );
    s.run(Duration::from_millis(100), &mut |_, _, _| true);
    assert_eq!(
        s.got(1),
        vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]
    );
}

#[test]
fn large_messages_are_refused_by_the_send_filter_and_cut_by_the_layers() {
    let mut s = Shuttle::new(true, "");
    let big = (0..5000u32).map(|i| i as u8).collect::<Vec<_>>();
    s.send(0, &big);
    s.run(Duration::from_millis(5), &mut |_, _, _| true);
    assert_eq!(s.event(0, "slow-send"), 1);
    assert_eq!(s.event(0, "fast-send"), 0);
    // Fragments carry the fragment bit: never predicted at the receiver.
    assert_eq!(s.event(1, "fast-deliver"), 0);
    assert_eq!(s.got(1), vec![big]);
}

#[test]
fn the_dissectors_default_layout_is_the_compiled_one() {
    let layout = strata_pa::accel::paper_layout(&strata_pa::stack::StackConfig::default()).unwrap();
    let lua = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/wireshark/strata_pa.lua"
    ))
    .unwrap();
    let want = format!("local DEFAULT_LAYOUT = \"{}\"", layout.describe());
    assert!(lua.contains(&want), "update strata_pa.lua: {want}");
}

#[test]
fn post_processing_rewrites_the_send_filter_when_the_fragment_size_changes() {
    use strata::Control;
    use strata_pa::stack::frag::SetFragment;
    let mut s = Shuttle::new(true, "");
    let m = [5u8; 1000];
    s.send(0, &m);
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    let op = Control::Private(Box::new(SetFragment(500)));
    s.e[0].control(s.top, Some(SessionId(0)), op).unwrap();
    // Sent with the filter as it was; its post-processing adopts the size
    // and the filter is rewritten.
    s.send(0, &m);
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    assert_eq!((s.event(0, "fast-send"), s.event(0, "slow-send")), (2, 0));
    assert_eq!(s.event(0, "refiltered"), 1);
    // Now the filter refuses 1000 bytes: through the layers, cut in two.
    s.send(0, &m);
    s.run(Duration::from_millis(5), &mut |_, _, _| true);
    assert_eq!((s.event(0, "fast-send"), s.event(0, "slow-send")), (2, 1));
    assert_eq!(s.got(1), vec![m.to_vec(); 3]);
}

/// A connection keeps one layer timer armed at a time, PA on and off: a
/// deadline moved earlier cancels the armed timer, and one that fires
/// early (its deadline moved later) arms the next without leaving
/// duplicates that would fire, and re-arm, again and again.
#[test]
fn layer_timers_do_not_multiply() {
    for pa in [false, true] {
        let mut s = Shuttle::new(pa, "");
        let mut most = 0;
        for i in 0..400u32 {
            s.send(0, &i.to_be_bytes());
            if i % 3 == 0 {
                s.send(1, &i.to_be_bytes());
            }
            s.run(Duration::from_micros(700), &mut |_, _, _| true);
            most = most.max(s.e[0].armed_timers()).max(s.e[1].armed_timers());
        }
        // PA on: the post-processing timer and the layers' timer; PA off:
        // one per layer protocol.
        let bound = if pa { 2 } else { 4 };
        assert!(most <= bound, "pa {pa}: up to {most} timers armed");
        assert_eq!(s.got(1).len(), 400);
    }
}
