//! Connection cookies (seed 003 §2.2): the identification travels until
//! the peer acknowledges the cookie, so a lost first message no longer makes
//! the next ones undeliverable — the flaw the paper names.

mod common;

use std::time::Duration;

use common::shuttle::Shuttle;

fn lose_first(pa_extra: &str) -> Shuttle {
    let mut s = Shuttle::new(true, pa_extra);
    for i in 0..3u8 {
        s.send(0, &[i; 8]);
        // Before any retransmission (20 ms).
        s.run(Duration::from_millis(1), &mut |side, n, _| {
            !(side == 0 && n == 0)
        });
    }
    s
}

#[test]
fn a_lost_first_message_leaves_the_next_ones_deliverable() {
    let mut s = lose_first("");
    // The second message carried the identification: the receiver knew the
    // cookie at once and dropped nothing as unknown.
    assert_eq!(s.drops(1, "unknown-cookie"), 0);
    assert!(s.event(1, "cookie-learned") >= 1);
    // Its acknowledgement of the cookie stopped the identification.
    assert_eq!(s.event(0, "cookie-acked"), 1);
    s.run(Duration::from_millis(100), &mut |_, _, _| true);
    assert_eq!(s.got(1), vec![vec![0u8; 8], vec![1; 8], vec![2; 8]]);
    let with_ident = s.event(0, "ident-sent");
    s.send(0, &[3; 8]);
    s.run(Duration::from_millis(5), &mut |_, _, _| true);
    assert_eq!(
        s.event(0, "ident-sent"),
        with_ident,
        "no identification once acknowledged"
    );
}

#[test]
fn the_papers_pa_drops_what_follows_a_lost_first_message_until_retransmission() {
    let mut s = lose_first("cookie_ack = false");
    assert!(
        s.drops(1, "unknown-cookie") >= 2,
        "{}",
        s.drops(1, "unknown-cookie")
    );
    assert_eq!(s.got(1).len(), 0);
    // The window's retransmission carries the identification and repairs it.
    s.run(Duration::from_millis(100), &mut |_, _, _| true);
    assert_eq!(s.got(1), vec![vec![0u8; 8], vec![1; 8], vec![2; 8]]);
}

#[test]
fn unlike_endian_peers_understand_each_other() {
    for (a, b) in [("big", "little"), ("little", "big")] {
        let (oa, ob) = (format!("order = \"{a}\""), format!("order = \"{b}\""));
        let mut s = Shuttle::with(true, [&oa, &ob]);
        for i in 0..40u8 {
            s.send(0, &[i; 8]);
            s.send(1, &[i; 3000]);
            s.run(Duration::from_millis(1), &mut |_, _, _| true);
        }
        s.run(Duration::from_millis(100), &mut |_, _, _| true);
        assert_eq!(s.got(1), (0..40u8).map(|i| vec![i; 8]).collect::<Vec<_>>());
        assert_eq!(
            s.got(0),
            (0..40u8).map(|i| vec![i; 3000]).collect::<Vec<_>>()
        );
        assert!(
            s.event(1, "fast-deliver") > 30,
            "{a}/{b}: predictions hold across orders"
        );
    }
}
