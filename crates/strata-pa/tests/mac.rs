//! Issue 16: a keyed MAC of the connection identification (`mac_key`),
//! beyond the cookie proof's return routability. The proof stops a forger
//! who has not seen this side's frames; one who has (say, on the path) can
//! echo the receiver's cookie and teach a cookie of its own. With a key both
//! peers share, a frame that carries the identification must carry its MAC,
//! and the forger, without the key, cannot write one that checks.

mod common;

use std::time::Duration;

use common::shuttle::Shuttle;
use strata::Message;
use strata_pa::accel::Accelerator;
use strata_pa::field::{Class, FieldHandle, Layout, LayoutBuilder};
use strata_pa::preamble::{PREAMBLE_LEN, Preamble};

const ETH: usize = 14;
const KEYED: &str = "mac_key = \"a key both hosts share\"";

/// Side `at`'s layout, rebuilt field by field at the compiled places so
/// that the test holds handles: each field's handle by name.
fn layout(s: &Shuttle, at: usize) -> (Layout, impl Fn(&str) -> FieldHandle) {
    let pa = s.e[at].protocol::<Accelerator>(s.top).unwrap();
    let real = pa.layout(s.sessions[at].sess).unwrap();
    let mut b = LayoutBuilder::new();
    let named: Vec<(&str, FieldHandle)> = real
        .fields()
        .iter()
        .map(|f| (f.name, b.add_field(f.class, f.name, f.bits, Some(f.offset))))
        .collect();
    let get = move |name: &str| named.iter().find(|(n, _)| *n == name).unwrap().1;
    (b.compile().unwrap(), get)
}

/// A frame with the identification whose cookie is replaced and whose
/// `echo` names the receiver's cookie (the forger has seen its frames),
/// with the checksum the receiver computes: what the cookie proof alone
/// lets through.
fn forge(s: &Shuttle, first: &[u8], receiver: u64) -> Vec<u8> {
    let (l, field) = layout(s, 1);
    let p = Preamble::parse(&first[ETH..]).unwrap();
    let conn = l.class_range(Class::ConnId);
    let at = ETH + PREAMBLE_LEN;
    let sent = at..at + conn.len() - 8;
    let rest = l.class_range(Class::Protocol).start..l.class_range(Class::Gossip).end;
    let after = sent.end..sent.end + rest.len();
    let q = Preamble {
        cookie: p.cookie ^ (5 << 20),
        ..p
    };
    let mut hdr = l.headers();
    hdr[conn.start + 8..conn.end].copy_from_slice(&first[sent.clone()]);
    hdr[rest.clone()].copy_from_slice(&first[after.clone()]);
    l.set(&mut hdr, p.order, field("echo"), receiver);
    l.set(
        &mut hdr,
        p.order,
        field("cookie"),
        q.to_bytes().iter().fold(0, |a, b| (a << 8) | u64::from(*b)) & !(1 << 63),
    );
    let data = Message::from_slice(&first[after.end..]);
    common::seal(&l, p.order, field("sum"), &mut hdr, &data);
    let mut f = first.to_vec();
    f[ETH..at].copy_from_slice(&q.to_bytes());
    f[sent].copy_from_slice(&hdr[conn.start + 8..conn.end]);
    f[after].copy_from_slice(&hdr[rest]);
    f
}

/// Side 0's first frame (with the identification) and side 1's cookie,
/// after an exchange both ways.
fn warmed(extra: &str) -> (Shuttle, Vec<u8>, u64) {
    let mut s = Shuttle::new(true, extra);
    let first = s.send_catching(0, b"first", Duration::from_millis(1));
    let theirs = s.send_catching(1, b"reply", Duration::from_millis(1));
    s.run(Duration::from_millis(5), &mut |_, _, _| true);
    assert_eq!(s.got(1), vec![b"first".to_vec()]);
    assert_eq!(s.got(0), vec![b"reply".to_vec()]);
    let receiver = Preamble::parse(&theirs[ETH..]).unwrap().cookie;
    (s, first, receiver)
}

#[test]
fn with_a_key_the_peers_talk_as_before() {
    let (mut s, _, _) = warmed(KEYED);
    for i in 0..20u8 {
        s.send(0, &[i; 8]);
        s.send(1, &[i; 4]);
        s.run(Duration::from_millis(1), &mut |_, _, _| true);
    }
    assert_eq!(s.got(1).len(), 21);
    assert_eq!(s.got(0).len(), 21);
    for side in 0..2 {
        assert_eq!(s.drops(side, "bad-mac"), 0);
        assert_eq!(s.drops(side, "checksum"), 0);
        assert!(
            s.event(side, "fast-deliver") > 0,
            "side {side} never predicted"
        );
    }
    let (l, _) = layout(&s, 0);
    assert!(
        l.fields()
            .iter()
            .any(|f| f.class == Class::ConnId && f.name == "mac")
    );
}

/// Without a key the forgery (the receiver's cookie echoed, a correct sum)
/// is learned: return routability is all the proof checks.
#[test]
fn without_a_key_a_forger_who_saw_the_receivers_frames_teaches_a_cookie() {
    let (mut s, first, receiver) = warmed("");
    let learned = s.event(1, "cookie-learned");
    let f = forge(&s, &first, receiver);
    s.inject(1, Message::from_slice(&f));
    assert_eq!(s.drops(1, "checksum"), 0, "the forger's sum is right");
    assert_eq!(s.event(1, "cookie-learned"), learned + 1);
}

/// With a key the same forgery, its MAC copied from the genuine frame or
/// not, is dropped as `bad-mac` and teaches nothing; the peer's messages
/// still arrive.
#[test]
fn with_a_key_the_forgery_is_dropped_and_teaches_nothing() {
    let (mut s, first, receiver) = warmed(KEYED);
    let learned = s.event(1, "cookie-learned");
    let f = forge(&s, &first, receiver);
    s.inject(1, Message::from_slice(&f));
    assert_eq!(s.drops(1, "checksum"), 0, "the forger's sum is right");
    assert_eq!(s.drops(1, "bad-mac"), 1);
    assert_eq!(s.event(1, "cookie-learned"), learned);
    // The genuine first frame again: its MAC checks.
    s.inject(1, Message::from_slice(&first));
    assert_eq!(s.drops(1, "bad-mac"), 1);
    s.send(0, b"second");
    s.run(Duration::from_millis(1), &mut |_, _, _| true);
    assert_eq!(s.drops(1, "unknown-cookie"), 0);
    assert_eq!(s.got(1), vec![b"first".to_vec(), b"second".to_vec()]);
}

/// Peers with different keys learn nothing of each other: every frame with
/// the identification is `bad-mac`, nothing is delivered.
#[test]
fn different_keys_teach_nothing() {
    let mut s = Shuttle::with(true, [KEYED, "mac_key = \"another key\""]);
    s.send(0, b"first");
    s.run(Duration::from_millis(5), &mut |_, _, _| true);
    assert!(s.drops(1, "bad-mac") >= 1);
    assert_eq!(s.event(1, "cookie-learned"), 0);
    assert!(s.got(1).is_empty());
}
