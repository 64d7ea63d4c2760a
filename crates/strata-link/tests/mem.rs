//! The in-memory pair: frames cross at once, both ways, without being copied.

mod toy;

use std::any::Any;
use std::time::Duration;

use bytes::Bytes;
use strata_core::{App, AppCx, Instant, Message, PacketMeta, SessionRef};
use strata_link::MemPair;
use toy::{Echo, Ticker, add_app, host_with, mac, seen, send, start_ticker};

fn pair() -> MemPair {
    MemPair::new(host_with(1, "mem", ""), host_with(2, "mem", ""), "net0").unwrap()
}

#[test]
fn a_pump_moves_frames_both_ways_until_both_engines_are_idle() {
    let mut p = pair();
    let (client, to_b) = add_app(p.a(), Echo::default(), mac(2), 9);
    let (server, _) = add_app(
        p.b(),
        Echo {
            echo: true,
            ..Echo::default()
        },
        mac(1),
        9,
    );
    for word in [&b"one"[..], b"two", b"three"] {
        send(p.a(), client, to_b, word);
    }
    assert_eq!(p.pump(Instant::ZERO), 6, "three out, three echoes back");
    assert_eq!(seen(p.b(), server).len(), 3);
    let back: Vec<Vec<u8>> = seen(p.a(), client).into_iter().map(|(_, m)| m).collect();
    assert_eq!(back, [b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]);
    assert!(p.a().is_idle() && p.b().is_idle());
    assert_eq!(p.pump(Instant::ZERO), 0);
}

/// Keeps the messages it receives as they are.
#[derive(Default)]
struct Keep(Vec<Message>);

impl App for Keep {
    fn receive(&mut self, _s: Option<SessionRef>, msg: Message, _m: &PacketMeta, _cx: &mut AppCx) {
        self.0.push(msg);
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn a_payload_crosses_the_pair_without_being_copied() {
    let mut p = pair();
    let (client, to_b) = add_app(p.a(), Echo::default(), mac(2), 9);
    let (keeper, _) = add_app(p.b(), Keep::default(), mac(1), 9);
    let payload = Bytes::from(vec![42u8; 1400]);
    p.a()
        .with_app(client, |_, cx| {
            cx.send(to_b, Message::from_bytes(payload.clone()))
        })
        .unwrap();
    p.pump(Instant::ZERO);
    let got = &p.b().app::<Keep>(keeper).unwrap().0;
    assert_eq!(got.len(), 1);
    let body = got[0].chunks().last().unwrap();
    assert_eq!(body.as_ptr(), payload.as_ptr(), "the payload was copied");
}

#[test]
fn timers_fire_when_the_pair_is_pumped_at_their_time() {
    let mut p = pair();
    let (server, _) = add_app(p.b(), Echo::default(), mac(1), 9);
    start_ticker(p.a(), Ticker::new(Duration::from_millis(2), 2), mac(2), 9);
    let first = p.next_deadline().unwrap();
    assert_eq!(first, Instant::from_nanos(2_000_000));
    assert_eq!(p.pump(first - Duration::from_nanos(1)), 0);
    assert_eq!(p.pump(first), 1);
    let second = p.next_deadline().unwrap();
    assert_eq!(p.pump(second), 1);
    assert_eq!(p.next_deadline(), None);
    assert_eq!(seen(p.b(), server).len(), 2);
}

#[test]
fn a_pair_refuses_a_link_either_engine_lacks() {
    let err = MemPair::new(host_with(1, "mem", ""), host_with(2, "mem", ""), "eth9")
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("host 'a' has no link 'eth9'"),
        "{err}"
    );
}
