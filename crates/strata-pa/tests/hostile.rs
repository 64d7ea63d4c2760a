//! Hostile input to the PA: random frames and mutated genuine ones (bad
//! cookies, truncated headers, forged identification) are dropped and
//! counted, never panic, never hand the application anything but what its
//! peer sent, and leave the connection working.

mod common;

use std::time::Duration;

use common::shuttle::Shuttle;
use proptest::prelude::*;
use strata::Message;
use strata_pa::field::{ByteOrder, Class, FieldHandle};

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

/// Bytes of the identification on the wire: its class but for the PA's
/// `cookie` field, which the preamble carries.
fn ident_bytes() -> usize {
    let l = strata_pa::accel::paper_layout(&Default::default()).unwrap();
    let cookie = l
        .fields()
        .iter()
        .any(|f| f.class == Class::ConnId && f.name == "cookie");
    l.class_bytes(Class::ConnId) - if cookie { 8 } else { 0 }
}

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
                let n = ident_bytes();
                f.splice(
                    ETH + 8..ETH + 8,
                    first[ETH + 8..ETH + 8 + n].iter().copied(),
                );
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
    // Another host's identification: all of it changed, the sum no matter.
    let mut stranger = frames[0].clone();
    for b in &mut stranger[ETH + 8..ETH + 8 + ident_bytes()] {
        *b ^= 0xff;
    }
    s.inject(1, Message::from_slice(&stranger));
    assert_eq!(s.drops(1, "unknown-ident"), 1);
}

/// Where the field `name` of class `class` (`window`'s `ack`, the PA's
/// `cookie-ack`, `frag`'s `last`) sits in a frame of `side` (from the
/// Ethernet header on): the frame offset of a one-field layout that places
/// it as the real one does, and its byte order.
fn header_field(
    s: &Shuttle,
    side: usize,
    frame: &[u8],
    class: Class,
    name: &str,
) -> (usize, strata_pa::field::Layout, FieldHandle, ByteOrder) {
    use strata_pa::field::LayoutBuilder;
    use strata_pa::stack::{StackConfig, layer_by_name};
    let pa = s.e[side].proto_id("pa").is_some();
    let config = StackConfig::default();
    let layout_of = |name: &str| {
        let mut l = layer_by_name(name, 0, 0, 0, &config).unwrap();
        let mut b = LayoutBuilder::new();
        l.declare(&mut b);
        b.compile().unwrap()
    };
    let (layout, at, order) = if pa {
        let l = strata_pa::accel::paper_layout(&config).unwrap();
        let p = strata_pa::preamble::Preamble::parse(&frame[ETH..]).unwrap();
        let ident = if p.ident { ident_bytes() } else { 0 };
        let at = ETH + strata_pa::preamble::PREAMBLE_LEN + ident + l.class_range(class).start
            - l.class_range(Class::Protocol).start;
        (l, at, p.order)
    } else {
        let padded = |name: &str| {
            layout_of(name)
                .total_bytes()
                .div_ceil(strata_pa::layered::ALIGN)
                * strata_pa::layered::ALIGN
        };
        let l = layout_of("window");
        let at = ETH + padded("ident") + padded("check") + l.class_range(class).start;
        (l, at, ByteOrder::Big)
    };
    let field = layout
        .fields()
        .iter()
        .find(|f| f.class == class && f.name == name)
        .unwrap();
    let mut b = LayoutBuilder::new();
    let h = b.add_field(class, field.name, field.bits, Some(field.offset));
    (at, b.compile().unwrap(), h, order)
}

/// Issue 16: the acknowledgement rides in the gossip header. A frame whose
/// acknowledgement was changed in flight to claim messages the peer never
/// got must fail the checksum — with the PA off, where `window`'s header is
/// part of `check`'s data, and with the PA on, where the checksum covers the
/// protocol-specific and the gossip header — and the sender must keep those
/// messages and deliver them by retransmission.
#[test]
fn a_corrupted_acknowledgement_is_a_checksum_drop_and_releases_nothing() {
    for pa in [false, true] {
        let mut s = Shuttle::new(pa, "");
        s.send(0, b"first");
        s.run(Duration::from_millis(5), &mut |_, _, _| true);
        assert_eq!(s.got(1), vec![b"first".to_vec()], "pa {pa}");
        // Three messages lost on the way.
        for i in 0..3u8 {
            s.send(0, &[b'm', i]);
        }
        s.run(Duration::from_millis(1), &mut |side, _, _| side == 1);
        // The peer's reply, caught in flight: it acknowledges `first` only.
        s.send(1, b"reply");
        let mut caught = None;
        s.run(Duration::from_micros(300), &mut |side, _, f| {
            if side == 1 && caught.is_none() {
                caught = Some(f.to_vec());
                return false;
            }
            true
        });
        let genuine = caught.expect("the reply");
        let mut f = genuine.clone();
        let (at, l, h, order) = header_field(&s, 1, &f, Class::Gossip, "ack");
        let n = l.total_bytes();
        let mut g = f[at..at + n].to_vec();
        let ack = l.get(&g, order, h);
        // Claim the first lost frame arrived (with the PA, the other two
        // messages may have left packed in one frame).
        l.set(&mut g, order, h, ack + 1);
        f[at..at + n].copy_from_slice(&g);
        let check = if pa { "pa" } else { "hp-check" };
        let check = s.e[0].proto_id(check).unwrap();
        let before = s.e[0].counters(check).drops().get("checksum");
        s.inject(0, Message::from_slice(&f));
        assert_eq!(
            s.e[0].counters(check).drops().get("checksum"),
            before + 1,
            "pa {pa}: a changed acknowledgement passed the checksum"
        );
        if pa {
            // The PA's own gossip bit is covered too, and the
            // message-specific header beside the sum (`frag`'s `last`).
            let fields = [(Class::Gossip, "cookie-ack"), (Class::Message, "last")];
            for (k, (class, name)) in fields.into_iter().enumerate() {
                let mut f = genuine.clone();
                let (at, l, h, order) = header_field(&s, 1, &f, class, name);
                let n = l.total_bytes();
                let mut g = f[at..at + n].to_vec();
                let bit = l.get(&g, order, h);
                l.set(&mut g, order, h, 1 - bit);
                f[at..at + n].copy_from_slice(&g);
                s.inject(0, Message::from_slice(&f));
                assert_eq!(
                    s.e[0].counters(check).drops().get("checksum"),
                    before + 2 + k as u64,
                    "{name} is covered"
                );
            }
        }
        // Nothing was released: the lost messages come by retransmission.
        s.run(Duration::from_millis(100), &mut |_, _, _| true);
        let want: Vec<Vec<u8>> = std::iter::once(b"first".to_vec())
            .chain((0..3u8).map(|i| vec![b'm', i]))
            .collect();
        assert_eq!(s.got(1), want, "pa {pa}: messages lost");
        assert_eq!(s.got(0), vec![b"reply".to_vec()], "pa {pa}");
    }
}

/// A frame that carries the identification but fails the checksum (a
/// corruption, or a forgery with a cookie of its own) must not teach the
/// receiver a cookie. Before, the cookie was learned before any check: two
/// such frames pushed the genuine peer's cookie out of the two the PA keeps,
/// and the peer's next messages, which no longer carry the identification,
/// were dropped as `unknown-cookie` until a retransmission.
#[test]
fn a_frame_that_fails_the_checksum_teaches_no_cookie() {
    let mut s = Shuttle::new(true, "");
    let first = s.send_catching(0, b"first", Duration::from_millis(5));
    assert_eq!(s.got(1), vec![b"first".to_vec()]);
    let learned = s.event(1, "cookie-learned");
    let checksum = s.drops(1, "checksum");
    // The preamble follows the 14-byte Ethernet header.
    let pre = 14..14 + strata_pa::preamble::PREAMBLE_LEN;
    let p = strata_pa::preamble::Preamble::parse(&first[pre.clone()]).unwrap();
    assert!(p.ident, "the first frame carries the identification");
    for k in 1..=2u64 {
        let mut f = first.clone();
        let forged = strata_pa::preamble::Preamble {
            cookie: p.cookie ^ k,
            ..p
        };
        f[pre.clone()].copy_from_slice(&forged.to_bytes());
        *f.last_mut().unwrap() ^= 0x55;
        s.inject(1, Message::from_slice(&f));
    }
    assert_eq!(s.drops(1, "checksum"), checksum + 2);
    assert_eq!(
        s.event(1, "cookie-learned"),
        learned,
        "a cookie was learned"
    );
    // The peer's next message, without the identification, is delivered at
    // once (no retransmission in a millisecond).
    s.send(0, b"second");
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    assert_eq!(s.drops(1, "unknown-cookie"), 0);
    assert_eq!(s.got(1), vec![b"first".to_vec(), b"second".to_vec()]);
}
