//! ICMP: echo as Linux's ping expects it, ping sessions, and error reports
//! with RFC 1122's restraint.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Host, carry, host, host_with, settle};
use strata_core::checksum::verifies;
use strata_core::{
    Addr, AppEvent, AppId, Arch, Control, HwAddr, Message, Participants, Qos, SessionRef, UpiError,
};
use strata_proto::arp::wire::{Operation, Repr as ArpRepr};
use strata_proto::eth::wire::{Repr as EthRepr, ethertype};
use strata_proto::icmp::wire::Repr as IcmpRepr;
use strata_proto::icmp::{ErrorKind, SendError};
use strata_proto::info::ip_source;
use strata_proto::ipv4::wire::Repr as IpRepr;

const A_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// An Ethernet/IPv4 frame from host 1 to host 2 (or `dst`) carrying `payload`.
fn frame_from_a(dst: Ipv4Addr, hw_dst: HwAddr, protocol: u8, payload: &[u8]) -> Vec<u8> {
    let eth = EthRepr {
        dst: hw_dst,
        src: HwAddr::local(1),
        ethertype: ethertype::IPV4,
    };
    let ip = IpRepr {
        src: A_IP,
        dst,
        protocol,
        ttl: 64,
        tos: 0,
        ident: 0x4242,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        payload_len: payload.len(),
    };
    [&eth.to_bytes()[..], &ip.to_bytes()[..], payload].concat()
}

/// Host 1 asking for host 2's address, which teaches host 2 host 1's.
fn arp_hello() -> Vec<u8> {
    let hello = ArpRepr {
        operation: Operation::Request,
        sender_hw: HwAddr::local(1),
        sender_ip: A_IP,
        target_hw: HwAddr::ZERO,
        target_ip: B_IP,
    };
    let eth = EthRepr {
        dst: HwAddr::BROADCAST,
        src: HwAddr::local(1),
        ethertype: ethertype::ARP,
    };
    [&eth.to_bytes()[..], &hello.to_bytes()[..]].concat()
}

/// Host 2 with host 1 already in its ARP table, so its answers leave at once.
fn b_knowing_a(arch: Arch) -> Host {
    let mut b = host(2, arch);
    b.receive(&arp_hello());
    b.sent();
    b
}

/// The 56 data bytes Linux's ping sends: a timeval, then 0x10, 0x11, …
fn linux_ping_data() -> Vec<u8> {
    let mut d = vec![
        0x5e, 0x1f, 0x2a, 0x66, 0, 0, 0, 0, 0x3c, 0x9d, 0x0b, 0, 0, 0, 0, 0,
    ];
    d.extend(0x10u8..0x38);
    d
}

#[test]
fn an_echo_request_is_answered_as_linux_ping_expects() {
    for arch in Arch::ALL {
        let mut b = b_knowing_a(arch);
        let data = linux_ping_data();
        let header = IcmpRepr::EchoRequest {
            ident: 0x1c46,
            seq: 1,
        }
        .to_bytes_over([&data[..]]);
        let request = [&header[..], &data[..]].concat();
        b.receive(&frame_from_a(B_IP, b.mac, 1, &request));
        let out = b.sent();
        assert_eq!(out.len(), 1, "{arch}");
        let f = &out[0];
        assert_eq!(
            (&f[..6], &f[6..12]),
            (&HwAddr::local(1).0[..], &b.mac.0[..]),
            "{arch}"
        );
        let ip = IpRepr::parse(&strata_proto::ipv4::wire::Header::new_checked(&f[14..]).unwrap())
            .unwrap();
        assert_eq!(
            (ip.src, ip.dst, ip.protocol, ip.ttl),
            (B_IP, A_IP, 1, 64),
            "{arch}: addresses swapped"
        );
        assert!(verifies(&f[14..34]), "{arch}: IP checksum");
        let icmp = &f[34..];
        assert_eq!(icmp.len(), 64, "{arch}");
        assert_eq!((icmp[0], icmp[1]), (0, 0), "{arch}: echo reply");
        assert_eq!(
            &icmp[4..8],
            &[0x1c, 0x46, 0, 1],
            "{arch}: same identifier and sequence"
        );
        assert_eq!(&icmp[8..], &data[..], "{arch}: same data");
        assert!(
            verifies(icmp),
            "{arch}: ICMP checksum over the whole message"
        );
        assert_eq!(b.events("icmp", strata_core::CONSUMED), 1, "{arch}");
    }
}

#[test]
fn echo_requests_to_a_broadcast_address_are_ignored() {
    let mut b = b_knowing_a(Arch::Llm);
    let header = IcmpRepr::EchoRequest { ident: 1, seq: 1 }.to_bytes_over([&b"x"[..]]);
    let request = [&header[..], b"x"].concat();
    b.receive(&frame_from_a(
        Ipv4Addr::new(198, 18, 0, 255),
        HwAddr::BROADCAST,
        1,
        &request,
    ));
    assert!(b.sent().is_empty());
    assert_eq!(b.drops("icmp", "broadcast-echo"), 1);
}

#[test]
fn an_echo_request_with_a_bad_checksum_is_dropped() {
    let mut b = b_knowing_a(Arch::Llm);
    let header = IcmpRepr::EchoRequest { ident: 1, seq: 1 }.to_bytes(0x1234);
    b.receive(&frame_from_a(
        B_IP,
        b.mac,
        1,
        &[&header[..], b"data"].concat(),
    ));
    assert!(b.sent().is_empty());
    assert_eq!(b.drops("icmp", "bad-checksum"), 1);
}

/// A ping session on `a` towards B.
fn ping_session(a: &mut Host) -> (AppId, SessionRef) {
    let app = a.recorder();
    let icmp = a.proto("icmp");
    let s = a
        .engine
        .with_app(app, |_, cx| {
            cx.open(icmp, Participants::remote([Addr::Ip(B_IP)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    (app, s)
}

#[test]
fn a_ping_session_numbers_its_requests_and_gets_replies_with_the_sequence_in_front() {
    for arch in Arch::ALL {
        let (mut a, mut b) = (host(1, arch), host(2, arch));
        let (app, s) = ping_session(&mut a);
        for data in [&b"first"[..], b"second"] {
            a.engine
                .with_app(app, |_, cx| cx.send(s, Message::from_slice(data)))
                .unwrap();
            a.run();
            settle(&mut a, &mut b);
        }
        let got = a.app(app).data();
        assert_eq!(
            got,
            vec![b"\x00\x01first".to_vec(), b"\x00\x02second".to_vec()],
            "{arch}"
        );
        let (session, _, meta) = &a.app(app).received[0];
        assert_eq!((*session, ip_source(meta)), (Some(s), Some(B_IP)), "{arch}");
    }
}

#[test]
fn echo_replies_for_no_session_are_dropped() {
    let mut b = b_knowing_a(Arch::Llm);
    let header = IcmpRepr::EchoReply { ident: 77, seq: 1 }.to_bytes_over([&b"x"[..]]);
    b.receive(&frame_from_a(B_IP, b.mac, 1, &[&header[..], b"x"].concat()));
    assert_eq!(b.drops("icmp", "no-session"), 1);
}

/// A UDP datagram from A's port 40000 to B's `port`, carried to B. Returns the
/// frame and what B sent back.
fn udp_to_b(b: &mut Host, dst: Ipv4Addr, hw_dst: HwAddr, port: u16) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut udp = [0u8; 12];
    udp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&port.to_be_bytes());
    udp[4..6].copy_from_slice(&12u16.to_be_bytes());
    udp[8..].copy_from_slice(b"knok");
    let frame = frame_from_a(dst, hw_dst, 17, &udp);
    b.receive(&frame);
    (frame, b.sent())
}

#[test]
fn a_datagram_to_a_closed_port_gets_a_port_unreachable_quoting_its_header() {
    let mut b = b_knowing_a(Arch::Llm);
    let (frame, out) = udp_to_b(&mut b, B_IP, HwAddr::local(2), 9);
    assert_eq!(out.len(), 1);
    let icmp = &out[0][34..];
    assert_eq!((icmp[0], icmp[1]), (3, 3), "destination unreachable, port");
    assert_eq!(&icmp[4..8], &[0, 0, 0, 0], "unused");
    assert_eq!(
        &icmp[8..28],
        &frame[14..34],
        "the original IP header as received"
    );
    assert_eq!(
        &icmp[28..],
        &frame[34..42],
        "and the first 8 bytes: the UDP header"
    );
    assert!(verifies(icmp));
    assert_eq!(b.drops("udp", "no-session"), 1);
}

#[test]
fn no_error_is_sent_about_a_broadcast() {
    let mut b = b_knowing_a(Arch::Llm);
    let (_, out) = udp_to_b(&mut b, Ipv4Addr::new(198, 18, 0, 255), HwAddr::BROADCAST, 9);
    assert!(out.is_empty(), "IP broadcast");
    let (_, out) = udp_to_b(&mut b, B_IP, HwAddr::BROADCAST, 9);
    assert!(out.is_empty(), "link-layer broadcast");
    assert_eq!(b.events("icmp", "error-suppressed"), 2);
}

#[test]
fn errors_are_rate_limited_by_a_token_bucket() {
    let extra = [
        ("icmp", "error_burst", toml::Value::Integer(3)),
        ("icmp", "error_rate", toml::Value::Integer(10)),
    ];
    let mut b = host_with(2, Arch::Llm, "udp/ip/eth", false, &extra);
    b.receive(&arp_hello());
    b.sent();
    let errors = |b: &mut Host, n: usize| {
        (0..n)
            .map(|_| udp_to_b(b, B_IP, HwAddr::local(2), 9).1.len())
            .sum::<usize>()
    };
    assert_eq!(errors(&mut b, 6), 3, "the burst");
    b.advance(Duration::from_millis(200));
    assert_eq!(errors(&mut b, 6), 2, "10 a second for 0.2 s");
    assert_eq!(b.events("icmp", "error-rate-limited"), 7);
}

/// Asks B's ICMP directly for an error about `quoted`; returns how many frames left.
fn ask_for_error(b: &mut Host, quoted: Vec<u8>) -> usize {
    let icmp = b.proto("icmp");
    let e = SendError {
        kind: ErrorKind::PortUnreachable,
        quoted,
        broadcast: false,
    };
    b.engine
        .control(icmp, None, Control::Private(Box::new(e)))
        .unwrap();
    b.run();
    b.sent().len()
}

fn quoted(protocol: u8, frag_offset: usize, src: Ipv4Addr, first: &[u8]) -> Vec<u8> {
    let h = IpRepr {
        src,
        dst: B_IP,
        protocol,
        ttl: 64,
        tos: 0,
        ident: 1,
        dont_frag: false,
        more_frags: false,
        frag_offset,
        payload_len: first.len(),
    };
    [&h.to_bytes()[..], first].concat()
}

#[test]
fn no_error_is_sent_about_an_icmp_error_a_later_fragment_or_a_non_host_source() {
    let mut b = b_knowing_a(Arch::Llm);
    let echo = IcmpRepr::EchoRequest { ident: 1, seq: 1 }.to_bytes(0);
    let unreachable = IcmpRepr::DstUnreachable { code: 3 }.to_bytes(0);
    assert_eq!(
        ask_for_error(&mut b, quoted(1, 0, A_IP, &echo)),
        1,
        "about an echo request: yes"
    );
    assert_eq!(
        ask_for_error(&mut b, quoted(1, 0, A_IP, &unreachable)),
        0,
        "about an error: never"
    );
    assert_eq!(
        ask_for_error(&mut b, quoted(17, 1480, A_IP, &[0; 8])),
        0,
        "about a later fragment: never"
    );
    assert_eq!(
        ask_for_error(&mut b, quoted(17, 0, Ipv4Addr::UNSPECIFIED, &[0; 8])),
        0,
        "from 0.0.0.0: never"
    );
    assert_eq!(b.events("icmp", "error-suppressed"), 3);
}

#[test]
fn an_unknown_protocol_gets_a_protocol_unreachable() {
    let mut b = b_knowing_a(Arch::Illm);
    b.receive(&frame_from_a(B_IP, b.mac, 99, b"who speaks 99?"));
    let out = b.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0][34], out[0][35]),
        (3, 2),
        "destination unreachable, protocol"
    );
    assert_eq!(b.drops("ip", "no-protocol"), 1);
}

#[test]
fn a_port_unreachable_closes_the_connected_session_with_refused() {
    for arch in Arch::ALL {
        let (mut a, mut b) = (host(1, arch), host(2, arch));
        let app = a.recorder();
        let udp = a.proto("udp");
        let parts =
            Participants::remote([Addr::Ip(B_IP), Addr::Port(9)]).with_local([Addr::Port(40000)]);
        let s = a
            .engine
            .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
            .unwrap()
            .unwrap();
        a.engine
            .with_app(app, |_, cx| cx.send(s, Message::from_slice(b"anyone?")))
            .unwrap();
        a.run();
        settle(&mut a, &mut b);
        let events = &a.app(app).events;
        let refused = AppEvent::Closed {
            session: s,
            error: Some(UpiError::Refused),
        };
        assert_eq!(events, &vec![refused], "{arch}");
        a.engine
            .with_app(app, |_, cx| cx.send(s, Message::from_slice(b"again?")))
            .unwrap();
        a.run();
        assert_eq!(
            a.drops("udp", "no-session"),
            1,
            "{arch}: the session is gone"
        );
        assert_eq!(carry(&mut a, &mut b), 0, "{arch}");
    }
}
