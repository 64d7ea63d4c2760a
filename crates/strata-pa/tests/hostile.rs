//! Hostile input to the PA: random frames and mutated genuine ones (bad
//! cookies, truncated headers, forged identification) are dropped and
//! counted, never panic, never hand the application anything but what its
//! peer sent, and leave the connection working.

mod common;

use std::time::Duration;

use common::shuttle::Shuttle;
use proptest::prelude::*;
use strata::Message;

/// A connection after a short exchange, and the frames its side 0 sent.
fn warmed() -> (Shuttle, Vec<Vec<u8>>) {
    let mut s = Shuttle::new(true, "");
    let mut frames = Vec::new();
    for i in 0..6u8 {
        s.send(0, &[i; 20]);
        s.run(Duration::from_millis(1), &mut |side, _, f| {
            if side == 0 {
                frames.push(f.to_vec());
            }
            true
        });
    }
    (s, frames)
}

#[derive(Clone, Debug)]
enum Mutation {
    Random(Vec<u8>),
    Truncate(usize, usize),
    Flip(usize, usize, u8),
    Cookie(usize, u64),
    ForgeIdent(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..120).prop_map(Mutation::Random),
        (any::<usize>(), 0usize..60).prop_map(|(f, n)| Mutation::Truncate(f, n)),
        (any::<usize>(), any::<usize>(), 1u8..=255).prop_map(|(f, at, x)| Mutation::Flip(f, at, x)),
        (any::<usize>(), any::<u64>()).prop_map(|(f, c)| Mutation::Cookie(f, c)),
        any::<usize>().prop_map(Mutation::ForgeIdent),
    ]
}

const ETH: usize = 14;

fn apply(m: &Mutation, frames: &[Vec<u8>]) -> Vec<u8> {
    let pick = |i: usize| frames[i % frames.len()].clone();
    match m {
        Mutation::Random(tail) => {
            let mut f = pick(0)[..ETH].to_vec();
            f.extend(tail);
            f
        }
        Mutation::Truncate(i, n) => {
            let mut f = pick(*i);
            f.truncate(ETH + n);
            f
        }
        Mutation::Flip(i, at, x) => {
            let mut f = pick(*i);
            let k = ETH + at % (f.len() - ETH);
            f[k] ^= x;
            f
        }
        Mutation::Cookie(i, c) => {
            let mut f = pick(*i);
            f[ETH..ETH + 8].copy_from_slice(&c.to_be_bytes());
            f
        }
        Mutation::ForgeIdent(i) => {
            // The first frame's identification on a later frame's headers,
            // under a cookie of the forger's choosing.
            let first = pick(0);
            let mut f = pick(*i);
            f[ETH..ETH + 8].copy_from_slice(&first[ETH..ETH + 8]);
            f[ETH] |= 0x80;
            f[ETH + 7] ^= 0x5a;
            if f[ETH] == first[ETH] {
                f.splice(ETH + 8..ETH + 8, first[ETH + 8..ETH + 28].iter().copied());
            }
            f
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn hostile_frames_are_dropped_or_harmless_and_the_connection_survives(
        muts in prop::collection::vec(mutation(), 1..12),
    ) {
        let (mut s, frames) = warmed();
        let genuine: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 20]).collect();
        prop_assert_eq!(s.got(1), genuine.clone());
        for m in &muts {
            s.inject(1, Message::from_slice(&apply(m, &frames)));
        }
        // Only what the peer sent, once, in order.
        prop_assert_eq!(s.got(1), genuine.clone());
        // And the connection still works.
        s.send(0, b"after");
        s.run(Duration::from_millis(60), &mut |_, _, _| true);
        let got = s.got(1);
        prop_assert_eq!(got.last().map(Vec::as_slice), Some(&b"after"[..]));
        prop_assert_eq!(got.len(), genuine.len() + 1);
    }
}

#[test]
fn each_kind_of_bad_frame_is_counted_by_reason() {
    let (mut s, frames) = warmed();
    s.inject(
        1,
        Message::from_slice(&apply(&Mutation::Truncate(2, 5), &frames)),
    );
    assert_eq!(s.drops(1, "truncated"), 1);
    s.inject(
        1,
        Message::from_slice(&apply(&Mutation::Cookie(2, 77), &frames)),
    );
    assert_eq!(s.drops(1, "unknown-cookie"), 1);
    let mut bad_sum = frames[3].clone();
    let last = bad_sum.len() - 1;
    bad_sum[last] ^= 1;
    s.inject(1, Message::from_slice(&bad_sum));
    assert_eq!(s.drops(1, "checksum"), 1);
    let mut stranger = frames[0].clone();
    stranger[ETH + 8] ^= 0xff;
    s.inject(1, Message::from_slice(&stranger));
    assert_eq!(s.drops(1, "unknown-ident"), 1);
}
