//! UDP between two hosts: sessions, passive opens, checksums, ports.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use common::{Host, carry, host, host_with, settle};
use strata_core::{
    Addr, AppEvent, AppId, Arch, Control, Message, Participants, Qos, SessionRef, UpiError,
};
use strata_proto::Ports;
use strata_proto::info::source;
use strata_proto::udp::wire as udp_wire;
use strata_proto::udp::{EPHEMERAL, Udp};

const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// An app on `h` with a session from `local` to 198.18.0.2:`port`.
fn connect(h: &mut Host, local: u16, port: u16) -> (AppId, SessionRef) {
    let app = h.recorder();
    let udp = h.proto("udp");
    let parts =
        Participants::remote([Addr::Ip(B_IP), Addr::Port(port)]).with_local([Addr::Port(local)]);
    let s = h
        .engine
        .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
        .unwrap()
        .unwrap();
    (app, s)
}

/// An app on `h` listening passively on `port`, echoing what it gets.
fn listen(h: &mut Host, port: u16) -> AppId {
    let app = h.recorder();
    h.app_mut(app).echo = true;
    let udp = h.proto("udp");
    h.engine
        .with_app(app, |_, cx| {
            cx.open_enable(udp, Participants::local([Addr::Port(port)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    app
}

fn send(h: &mut Host, app: AppId, s: SessionRef, data: &[u8]) {
    h.engine
        .with_app(app, |_, cx| cx.send(s, Message::from_slice(data)))
        .unwrap();
    h.run();
}

/// The UDP header and payload of an Ethernet/IPv4 frame without options.
fn udp_of(frame: &[u8]) -> &[u8] {
    &frame[34..]
}

#[test]
fn a_passive_open_makes_a_session_per_peer_and_echoes_on_it() {
    for arch in Arch::ALL {
        let (mut a, mut b) = (host(1, arch), host(2, arch));
        let server = listen(&mut b, 7);
        let (client, s) = connect(&mut a, 40000, 7);
        send(&mut a, client, s, b"ping");
        settle(&mut a, &mut b);
        assert_eq!(b.app(server).data(), vec![b"ping".to_vec()], "{arch}");
        assert!(
            matches!(b.app(server).events[0], AppEvent::OpenDone { .. }),
            "{arch}: open_done first"
        );
        assert_eq!(
            a.app(client).data(),
            vec![b"ping".to_vec()],
            "{arch}: the echo"
        );
        let (session, _, meta) = &a.app(client).received[0];
        assert_eq!(
            *session,
            Some(s),
            "{arch}: delivered on the connected session"
        );
        assert_eq!(
            (source(meta), meta.get::<Ports>().map(|p| p.dst)),
            (SocketAddrV4::new(B_IP, 7), Some(40000)),
            "{arch}"
        );
        send(&mut a, client, s, b"again");
        settle(&mut a, &mut b);
        let udp_b: &Udp = b.engine.protocol(b.proto("udp")).unwrap();
        assert_eq!(
            udp_b.passive_sessions(),
            1,
            "{arch}: the second datagram reuses the session"
        );
        assert_eq!(b.events("udp", "passive-open"), 1, "{arch}");
    }
}

#[test]
fn a_bound_session_receives_from_anyone_with_the_sender_in_meta_but_cannot_send() {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let sink = b.recorder();
    let udp = b.proto("udp");
    let bound = b
        .engine
        .with_app(sink, |_, cx| {
            cx.open(udp, Participants::local([Addr::Port(9)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let (client, s) = connect(&mut a, 5555, 9);
    send(&mut a, client, s, b"discard me");
    settle(&mut a, &mut b);
    let (session, data, meta) = &b.app(sink).received[0];
    assert_eq!(
        (*session, data.as_slice()),
        (Some(bound), &b"discard me"[..])
    );
    assert_eq!(
        source(meta),
        SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 5555)
    );
    send(&mut b, sink, bound, b"reply?");
    assert_eq!(b.drops("udp", "unconnected"), 1);
}

#[test]
fn checksums_are_computed_with_the_pseudo_header_by_default() {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let (client, s) = connect(&mut a, 40000, 9);
    send(&mut a, client, s, b"odd-length payload");
    settle(&mut a, &mut b); // resolves ARP; the datagram is on its way
    let (client2, s2) = connect(&mut a, 40001, 9);
    send(&mut a, client2, s2, b"odd-length payload");
    let frames = a.sent();
    let d = udp_of(&frames[0]);
    assert_ne!(&d[6..8], &[0, 0], "a checksum was computed");
    let sum = udp_wire::sum(a.ip, B_IP, d.len(), [d]).sum();
    assert_eq!(
        sum, 0xffff,
        "and it verifies over pseudo-header, header and data"
    );
}

#[test]
fn set_checksum_false_sends_zero_and_the_receiver_accepts_it() {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let server = listen(&mut b, 7);
    let (client, s) = connect(&mut a, 40000, 7);
    let udp = a.proto("udp");
    a.engine
        .control(udp, Some(s.sess), Control::SetChecksum(false))
        .unwrap();
    send(&mut a, client, s, b"no sum");
    carry(&mut a, &mut b);
    carry(&mut b, &mut a);
    let frames = a.sent();
    assert_eq!(&udp_of(&frames[0])[6..8], &[0, 0], "no checksum sent");
    for f in &frames {
        b.receive(f);
    }
    assert_eq!(
        b.app(server).data(),
        vec![b"no sum".to_vec()],
        "zero means none (RFC 768)"
    );
    assert_eq!(b.drops("udp", "bad-checksum"), 0);
}

/// A frame from host 1 to host 2's port 7 carrying `data`, its UDP checksum
/// field replaced by `checksum` when given.
fn datagram_to_b(data: &[u8], checksum: Option<u16>) -> (Host, Host, AppId, Vec<u8>) {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let server = listen(&mut b, 7);
    b.app_mut(server).echo = false;
    let (client, s) = connect(&mut a, 40000, 7);
    send(&mut a, client, s, b"warm-up");
    settle(&mut a, &mut b);
    send(&mut a, client, s, data);
    let mut frame = a.sent().remove(0);
    if let Some(c) = checksum {
        frame[40..42].copy_from_slice(&c.to_be_bytes());
    }
    (a, b, server, frame)
}

#[test]
fn a_bad_checksum_is_dropped_and_counted() {
    let (_a, mut b, server, frame) = datagram_to_b(b"payload", Some(0x1234));
    b.receive(&frame);
    assert_eq!(b.drops("udp", "bad-checksum"), 1);
    assert_eq!(b.app(server).data().len(), 1, "only the warm-up arrived");
}

#[test]
fn a_zero_checksum_is_accepted_even_with_checksums_on() {
    let (_a, mut b, server, frame) = datagram_to_b(b"payload", Some(0));
    b.receive(&frame);
    assert_eq!(b.app(server).data().last().unwrap(), b"payload");
}

#[test]
fn a_receiver_with_checksums_off_accepts_a_bad_one() {
    let (_a, mut b, server, frame) = datagram_to_b(b"payload", Some(0x1234));
    let udp = b.proto("udp");
    let session = b.app(server).received[0].0.unwrap();
    b.engine
        .control(udp, Some(session.sess), Control::SetChecksum(false))
        .unwrap();
    b.receive(&frame);
    assert_eq!(b.app(server).data().last().unwrap(), b"payload");
}

#[test]
fn ephemeral_ports_come_from_the_dynamic_range_and_never_repeat() {
    let mut a = host(1, Arch::Llm);
    let app = a.recorder();
    let udp = a.proto("udp");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let s = a
            .engine
            .with_app(app, |_, cx| {
                cx.open(udp, Participants::local([Addr::Port(0)]), Qos::default())
            })
            .unwrap()
            .unwrap();
        let port = a
            .engine
            .protocol::<Udp>(udp)
            .unwrap()
            .local_port(s.sess)
            .unwrap();
        assert!(EPHEMERAL.contains(&port), "{port}");
        assert!(seen.insert(port), "{port} handed out twice");
    }
}

#[test]
fn a_port_in_use_is_refused() {
    let mut a = host(1, Arch::Llm);
    let app = a.recorder();
    let udp = a.proto("udp");
    let open = |a: &mut Host| {
        a.engine
            .with_app(app, |_, cx| {
                cx.open(udp, Participants::local([Addr::Port(53)]), Qos::default())
            })
            .unwrap()
    };
    assert!(open(&mut a).is_ok());
    assert_eq!(open(&mut a).unwrap_err(), UpiError::InUse);
    let enable = a
        .engine
        .with_app(app, |_, cx| {
            cx.open_enable(udp, Participants::local([Addr::Port(53)]), Qos::default())
        })
        .unwrap();
    assert_eq!(enable.unwrap_err(), UpiError::InUse);
}

#[test]
fn passive_sessions_are_bounded_by_max_sessions() {
    let extra = [("udp", "max_sessions", toml::Value::Integer(2))];
    let mut b = host_with(2, Arch::Llm, "udp/ip/eth", false, &extra);
    let server = listen(&mut b, 7);
    for n in 1..=3u8 {
        let mut a = host(n + 10, Arch::Llm);
        let (client, s) = connect(&mut a, 40000, 7);
        send(&mut a, client, s, b"hi");
        settle(&mut a, &mut b);
    }
    assert_eq!(
        b.engine
            .protocol::<Udp>(b.proto("udp"))
            .unwrap()
            .passive_sessions(),
        2
    );
    assert_eq!(
        b.drops("udp", "queue-full"),
        1,
        "the third peer is dropped and counted"
    );
    assert_eq!(b.app(server).data().len(), 2);
}

#[test]
fn idle_passive_sessions_close_and_the_app_is_told() {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let server = listen(&mut b, 7);
    let (client, s) = connect(&mut a, 40000, 7);
    send(&mut a, client, s, b"hi");
    settle(&mut a, &mut b);
    b.advance(Duration::from_secs(60));
    send(&mut a, client, s, b"still here");
    a.now = b.now;
    settle(&mut a, &mut b);
    b.advance(Duration::from_secs(119));
    assert_eq!(
        b.engine
            .protocol::<Udp>(b.proto("udp"))
            .unwrap()
            .passive_sessions(),
        1,
        "traffic kept it"
    );
    b.advance(Duration::from_secs(2));
    assert_eq!(
        b.engine
            .protocol::<Udp>(b.proto("udp"))
            .unwrap()
            .passive_sessions(),
        0
    );
    let closed = b
        .app(server)
        .events
        .iter()
        .any(|e| matches!(e, AppEvent::Closed { error: None, .. }));
    assert!(closed, "{:?}", b.app(server).events);
    assert_eq!(b.events("udp", "idle-closed"), 1);
}
