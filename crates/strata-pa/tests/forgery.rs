//! Issue 16: what the checksum covers and who may change a cookie. A bit
//! flipped in the preamble's cookie or in the connection identification is a
//! checksum drop (before, neither was covered: a corrupted cookie was learned,
//! a corrupted identification could reach another connection); and a forger
//! who writes whole frames with a correct sum, but has never seen the
//! receiver's frames, cannot replace the peer's cookie.

mod common;

use std::time::Duration;

use common::shuttle::Shuttle;
use strata::Message;
use strata_pa::field::{Class, FieldHandle, Layout, LayoutBuilder};
use strata_pa::preamble::{PREAMBLE_LEN, Preamble};
use strata_pa::stack::StackConfig;

const ETH: usize = 14;

/// The paper stack's layout under the PA, rebuilt field by field at the
/// compiled places, so that the test holds handles of its own.
fn layout() -> (Layout, Vec<FieldHandle>) {
    let real = strata_pa::accel::paper_layout(&StackConfig::default()).unwrap();
    let mut b = LayoutBuilder::new();
    let hs = real
        .fields()
        .iter()
        .map(|f| b.add_field(f.class, f.name, f.bits, Some(f.offset)))
        .collect();
    (b.compile().unwrap(), hs)
}

fn handle(l: &Layout, hs: &[FieldHandle], class: Class, name: &str) -> Option<FieldHandle> {
    let i = l
        .fields()
        .iter()
        .position(|f| f.class == class && f.name == name)?;
    Some(hs[i])
}

/// Writes into a PA frame (from the Ethernet header on) the checksum its
/// receiver computes: a forger who knows the algorithm.
fn reseal(frame: &mut [u8]) {
    let (l, hs) = layout();
    let p = Preamble::parse(&frame[ETH..]).unwrap();
    let cookie = handle(&l, &hs, Class::ConnId, "cookie");
    let conn = l.class_range(Class::ConnId);
    let sent = conn.start + if cookie.is_some() { 8 } else { 0 }..conn.end;
    let mut hdr = l.headers();
    let mut at = ETH + PREAMBLE_LEN;
    assert!(p.ident, "a frame with the identification");
    hdr[sent.clone()].copy_from_slice(&frame[at..at + sent.len()]);
    at += sent.len();
    if let Some(c) = cookie {
        let raw = u64::from_be_bytes(frame[ETH..ETH + 8].try_into().unwrap());
        l.set(&mut hdr, p.order, c, raw & !(1 << 63));
    }
    let rest = l.class_range(Class::Protocol).start..l.class_range(Class::Gossip).end;
    hdr[rest.clone()].copy_from_slice(&frame[at..at + rest.len()]);
    let data = Message::from_slice(&frame[at + rest.len()..]);
    let sum = handle(&l, &hs, Class::Message, "sum").unwrap();
    common::seal(&l, p.order, sum, &mut hdr, &data);
    frame[at..at + rest.len()].copy_from_slice(&hdr[rest]);
}

/// Side 0's first frame (it carries the identification), after an exchange
/// both ways.
fn warmed() -> (Shuttle, Vec<u8>) {
    let mut s = Shuttle::new(true, "");
    let first = s.send_catching(0, b"first", Duration::from_millis(1));
    s.send(1, b"reply");
    s.run(Duration::from_millis(5), &mut |_, _, _| true);
    assert_eq!(s.got(1), vec![b"first".to_vec()]);
    assert_eq!(s.got(0), vec![b"reply".to_vec()]);
    (s, first)
}

/// Flips, in `frame`, the bits `x` of host 1's number in the
/// identification's `src` (written in the frame's byte order).
fn flip_src(frame: &mut [u8], little: bool, x: u8) {
    let src = strata_pa::example::mac(1)
        .0
        .iter()
        .fold(0u64, |a, b| (a << 8) | u64::from(*b));
    let (pat, low) = if little {
        (src.to_le_bytes(), 0)
    } else {
        (src.to_be_bytes(), 7)
    };
    let at = frame
        .windows(8)
        .position(|w| w == pat)
        .expect("the identification's src");
    frame[at + low] ^= x;
}

#[test]
fn a_flipped_bit_in_the_cookie_is_a_checksum_drop_and_teaches_nothing() {
    let (mut s, first) = warmed();
    let learned = s.event(1, "cookie-learned");
    let checksum = s.drops(1, "checksum");
    for bit in [0u8, 3, 7] {
        let mut f = first.clone();
        f[ETH + 7] ^= 1 << bit;
        s.inject(1, Message::from_slice(&f));
    }
    assert_eq!(
        s.drops(1, "checksum"),
        checksum + 3,
        "a flipped cookie passed"
    );
    // The byte-order bit: the identification, read in the other order,
    // names no connection (had it named one, the sum covers the bit).
    let mut f = first.clone();
    f[ETH] ^= 0x40;
    let total = s.e[1].counters(s.top).drops().total();
    s.inject(1, Message::from_slice(&f));
    assert_eq!(s.e[1].counters(s.top).drops().total(), total + 1);
    assert_eq!(
        s.event(1, "cookie-learned"),
        learned,
        "a cookie was learned"
    );
    s.send(0, b"second");
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    assert_eq!(s.got(1), vec![b"first".to_vec(), b"second".to_vec()]);
}

/// Host 2 has a second connection, to host 3. Host 1's first frame with one
/// bit of its identification flipped names host 3: it must not reach that
/// connection.
#[test]
fn a_flipped_bit_in_the_identification_reaches_no_connection() {
    let (mut s, first) = warmed();
    let (app3, _) = common::open_side(&mut s.e[1], s.top, 3);
    let checksum = s.drops(1, "checksum");
    let p = Preamble::parse(&first[ETH..]).unwrap();
    let mut f = first.clone();
    flip_src(&mut f, p.order == strata_pa::field::ByteOrder::Little, 2);
    s.inject(1, Message::from_slice(&f));
    let third = s.e[1].app::<common::Sink>(app3).unwrap().got.clone();
    assert!(third.is_empty(), "host 3's connection got {third:?}");
    assert_eq!(s.drops(1, "checksum"), checksum + 1);
}

/// Without the PA, `check` is below `ident`: its sum covers the
/// identification, and a flipped bit there is a checksum drop too.
#[test]
fn without_the_pa_the_checksum_covers_the_identification() {
    let mut s = Shuttle::new(false, "");
    let mut f = s.send_catching(0, b"first", Duration::from_millis(5));
    flip_src(&mut f, false, 2);
    let check = s.e[1].proto_id("hp-check").unwrap();
    s.inject(1, Message::from_slice(&f));
    assert_eq!(s.e[1].counters(check).drops().get("checksum"), 1);
    assert_eq!(s.got(1), vec![b"first".to_vec()]);
}

/// A forger writes whole frames with a correct sum: the genuine
/// identification under cookies of its own. Before, each was learned, and
/// two of them pushed the genuine peer's cookie out of the two the PA keeps:
/// the peer's next messages were dropped as `unknown-cookie`.
#[test]
fn a_forger_with_a_correct_sum_cannot_replace_the_peers_cookie() {
    let (mut s, first) = warmed();
    let learned = s.event(1, "cookie-learned");
    let p = Preamble::parse(&first[ETH..]).unwrap();
    let mut forged = Vec::new();
    for k in 1..=2u64 {
        let mut f = first.clone();
        let q = Preamble {
            cookie: p.cookie ^ (k << 20),
            ..p
        };
        f[ETH..ETH + PREAMBLE_LEN].copy_from_slice(&q.to_bytes());
        reseal(&mut f);
        s.inject(1, Message::from_slice(&f));
        forged.push(f);
    }
    assert_eq!(s.drops(1, "checksum"), 0, "the forger's sums are right");
    assert_eq!(
        s.event(1, "cookie-learned"),
        learned,
        "a forged cookie was learned"
    );
    assert_eq!(s.drops(1, "unproven-cookie"), 2);
    s.send(0, b"second");
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    assert_eq!(s.drops(1, "unknown-cookie"), 0);
    assert_eq!(s.got(1), vec![b"first".to_vec(), b"second".to_vec()]);
    // The genuine first frame, resealed the same way, still passes: the
    // forgeries failed for their cookies, not for the test's sums.
    let mut f = first.clone();
    reseal(&mut f);
    assert_eq!(f, first, "reseal computes what the sender did");
}

/// The proof works both ways: a new cookie under a frame that echoes the
/// receiver's own cookie is learned (a peer that restarted and has seen the
/// receiver's frames), and the cookie before it still routes.
#[test]
fn a_new_cookie_that_echoes_the_receivers_is_learned() {
    let (mut s, first) = warmed();
    let theirs = s.send_catching(1, b"x", Duration::from_millis(1));
    let receiver = Preamble::parse(&theirs[ETH..]).unwrap().cookie;
    let learned = s.event(1, "cookie-learned");
    let p = Preamble::parse(&first[ETH..]).unwrap();
    let (l, hs) = layout();
    let Some(echo) = handle(&l, &hs, Class::ConnId, "echo") else {
        panic!("no echo field: cookies cannot be proven");
    };
    // `echo` sits in the identification as sent, after the 8 bytes of the
    // PA's `cookie` that the preamble carries instead.
    let conn = l.class_range(Class::ConnId);
    let at = ETH + PREAMBLE_LEN;
    let sent = at..at + conn.len() - 8;
    let mut hdr = l.headers();
    hdr[conn.start + 8..conn.end].copy_from_slice(&first[sent.clone()]);
    l.set(&mut hdr, p.order, echo, receiver);
    let mut f = first.clone();
    f[sent].copy_from_slice(&hdr[conn.start + 8..conn.end]);
    let q = Preamble {
        cookie: p.cookie ^ (3 << 20),
        ..p
    };
    f[ETH..ETH + PREAMBLE_LEN].copy_from_slice(&q.to_bytes());
    reseal(&mut f);
    s.inject(1, Message::from_slice(&f));
    assert_eq!(s.drops(1, "unproven-cookie"), 0);
    assert_eq!(s.drops(1, "checksum"), 0);
    assert_eq!(s.event(1, "cookie-learned"), learned + 1);
    // The genuine cookie, now the one before, still routes.
    s.send(0, b"second");
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    assert_eq!(s.drops(1, "unknown-cookie"), 0);
    assert_eq!(s.got(1), vec![b"first".to_vec(), b"second".to_vec()]);
}
