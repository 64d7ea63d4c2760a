//! ARP between hosts whose frames the test carries, drops and forges.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Host, carry, host, host_with};
use strata_core::{Addr, AppId, Arch, HwAddr, Message, Participants, Qos, SessionRef};
use strata_proto::arp::Arp;
use strata_proto::arp::wire::{Operation, PACKET_LEN, Packet, Repr as ArpRepr};
use strata_proto::eth::wire::{Header as EthHeader, Repr as EthRepr, ethertype};

const A_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const ABSENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 99);

fn arp_frame(dst: HwAddr, p: ArpRepr) -> Vec<u8> {
    let eth = EthRepr {
        dst,
        src: p.sender_hw,
        ethertype: ethertype::ARP,
    };
    [&eth.to_bytes()[..], &p.to_bytes()[..]].concat()
}

/// The ARP packet of a frame, if it is one.
fn arp_of(frame: &[u8]) -> Option<(EthRepr, ArpRepr)> {
    let eth = EthRepr::parse(&EthHeader::new_checked(frame).ok()?).ok()?;
    if eth.ethertype != ethertype::ARP {
        return None;
    }
    let p = ArpRepr::parse(&Packet::new_checked(&frame[14..]).ok()?).ok()?;
    Some((eth, p))
}

fn arp(h: &Host) -> &Arp {
    h.engine.protocol(h.proto("arp")).unwrap()
}

/// An app on `h` sending a datagram to `to`:7 from port 40000 per call.
struct Sender {
    app: AppId,
    session: SessionRef,
}

fn sender(h: &mut Host, to: Ipv4Addr) -> Sender {
    let app = h.recorder();
    let udp = h.proto("udp");
    let parts = Participants::remote([Addr::Ip(to), Addr::Port(7)]).with_local([Addr::Port(40000)]);
    let session = h
        .engine
        .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
        .unwrap()
        .unwrap();
    Sender { app, session }
}

fn send(h: &mut Host, s: &Sender, n: usize) {
    for i in 0..n {
        let data = format!("datagram {i}");
        h.engine
            .with_app(s.app, |_, cx| {
                cx.send(s.session, Message::from_slice(data.as_bytes()))
            })
            .unwrap();
    }
    h.run();
}

#[test]
fn a_request_for_our_address_is_answered_and_the_asker_learned() {
    let mut b = host(2, Arch::Llm);
    let asker = HwAddr::local(1);
    let request = ArpRepr {
        operation: Operation::Request,
        sender_hw: asker,
        sender_ip: A_IP,
        target_hw: HwAddr::ZERO,
        target_ip: B_IP,
    };
    b.receive(&arp_frame(HwAddr::BROADCAST, request));
    let sent = b.sent();
    assert_eq!(sent.len(), 1);
    let (eth, reply) = arp_of(&sent[0]).unwrap();
    assert_eq!(
        (eth.dst, eth.src),
        (asker, b.mac),
        "unicast back to the asker"
    );
    assert_eq!(reply.operation, Operation::Reply);
    assert_eq!((reply.sender_hw, reply.sender_ip), (b.mac, B_IP));
    assert_eq!((reply.target_hw, reply.target_ip), (asker, A_IP));
    assert_eq!(
        arp(&b).lookup(A_IP),
        Some(asker),
        "RFC 826: the asker is learned"
    );
    assert_eq!(
        b.engine
            .counters(b.proto("arp"))
            .events()
            .get(strata_core::CONSUMED),
        1
    );
}

#[test]
fn requests_for_other_hosts_are_neither_answered_nor_learned() {
    let mut b = host(2, Arch::Llm);
    let request = ArpRepr {
        operation: Operation::Request,
        sender_hw: HwAddr::local(1),
        sender_ip: A_IP,
        target_hw: HwAddr::ZERO,
        target_ip: ABSENT,
    };
    b.receive(&arp_frame(HwAddr::BROADCAST, request));
    assert!(b.sent().is_empty());
    assert_eq!(arp(&b).lookup(A_IP), None);
    assert_eq!(b.drops("arp", "not-for-us"), 1);
}

#[test]
fn resolution_sends_one_broadcast_request_and_then_the_held_packets() {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let s = sender(&mut a, B_IP);
    send(&mut a, &s, 3);
    let out = a.sent();
    assert_eq!(out.len(), 1, "only the request goes out while resolving");
    let (eth, req) = arp_of(&out[0]).unwrap();
    assert_eq!(eth.dst, HwAddr::BROADCAST);
    assert_eq!(
        (req.operation, req.sender_ip, req.target_ip),
        (Operation::Request, A_IP, B_IP)
    );
    assert_eq!(arp(&a).held(B_IP), 3);
    for f in &out {
        b.receive(f);
    }
    carry(&mut b, &mut a);
    assert_eq!(arp(&a).lookup(B_IP), Some(b.mac));
    let released = a.sent();
    assert_eq!(released.len(), 3, "the held datagrams follow the reply");
    assert!(
        released
            .iter()
            .all(|f| f[..6] == b.mac.0 && f[12..14] == [0x08, 0x00])
    );
    assert_eq!(
        a.events("arp", "evicted-pending"),
        0,
        "resolving is not evicting"
    );
    assert_eq!(a.drops("arp", "queue-full"), 0);
}

#[test]
fn unanswered_requests_are_retried_each_second_then_held_packets_dropped_as_unresolved() {
    let mut a = host(1, Arch::Llm);
    let s = sender(&mut a, ABSENT);
    send(&mut a, &s, 2);
    let mut requests = a.sent().len();
    for _ in 0..2 {
        a.advance(Duration::from_millis(999));
        assert!(a.sent().is_empty(), "not before a second has passed");
        a.advance(Duration::from_millis(1));
        requests += a.sent().len();
    }
    assert_eq!(requests, 3, "retries = 3 requests");
    assert_eq!(a.drops("arp", "unresolved"), 0);
    a.advance(Duration::from_secs(1));
    assert_eq!(a.drops("arp", "unresolved"), 2, "both held datagrams");
    assert_eq!(arp(&a).entries(), 0, "the entry is gone");
    send(&mut a, &s, 1);
    assert_eq!(a.sent().len(), 1, "a later packet starts over");
}

#[test]
fn the_pending_queue_per_neighbour_is_bounded() {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let s = sender(&mut a, B_IP);
    send(&mut a, &s, 70);
    assert_eq!(arp(&a).held(B_IP), 64, "pending = 64 by default");
    assert_eq!(a.drops("arp", "queue-full"), 6);
    carry(&mut a, &mut b);
    carry(&mut b, &mut a);
    assert_eq!(a.sent().len(), 64);
}

#[test]
fn a_smaller_pending_option_is_honoured() {
    let extra = [("arp", "pending", toml::Value::Integer(1))];
    let mut a = host_with(1, Arch::Llm, "udp/ip/eth", false, &extra);
    let s = sender(&mut a, B_IP);
    send(&mut a, &s, 3);
    assert_eq!((arp(&a).held(B_IP), a.drops("arp", "queue-full")), (1, 2));
}

/// A and B with B resolved in A's table and A's IP layer holding an Ethernet
/// session for it (at time zero).
fn resolved_pair() -> (Host, Host, Sender) {
    let (mut a, mut b) = (host(1, Arch::Llm), host(2, Arch::Llm));
    let s = sender(&mut a, B_IP);
    send(&mut a, &s, 1);
    carry(&mut a, &mut b);
    carry(&mut b, &mut a);
    send(&mut a, &s, 1);
    assert_eq!(a.sent().len(), 2, "the held datagram and one sent directly");
    (a, b, s)
}

#[test]
fn entries_age_out_after_the_timeout_and_are_resolved_again() {
    let (mut a, _b, s) = resolved_pair();
    a.advance(Duration::from_secs(59));
    assert_eq!(arp(&a).lookup(B_IP), Some(HwAddr::local(2)));
    a.advance(Duration::from_secs(1));
    assert_eq!(arp(&a).lookup(B_IP), None, "60 s by default");
    assert_eq!(a.events("arp", "expired"), 1);
    send(&mut a, &s, 1);
    let (eth, _) = arp_of(&a.sent()[0]).unwrap();
    assert_eq!(eth.dst, HwAddr::BROADCAST);
}

#[test]
fn an_entry_in_use_is_refreshed_by_a_unicast_request_before_it_expires() {
    let (mut a, mut b, s) = resolved_pair();
    a.advance(Duration::from_secs(44));
    send(&mut a, &s, 1);
    assert_eq!(a.sent().len(), 1, "no refresh in the first three quarters");
    a.advance(Duration::from_secs(2));
    b.now = a.now;
    send(&mut a, &s, 1);
    let out = a.sent();
    let probes: Vec<_> = out.iter().filter_map(|f| arp_of(f)).collect();
    assert_eq!(probes.len(), 1, "one refresh request");
    assert_eq!(
        probes[0].0.dst, b.mac,
        "sent to the known address, not broadcast"
    );
    assert_eq!(out.len(), 2, "and the datagram was not held");
    for f in &out {
        b.receive(f);
    }
    carry(&mut b, &mut a);
    a.advance(Duration::from_secs(30));
    assert_eq!(
        arp(&a).lookup(B_IP),
        Some(b.mac),
        "the reply renewed the entry"
    );
}

#[test]
fn gratuitous_arp_updates_known_entries_and_only_those() {
    let (mut a, _b, _s) = resolved_pair();
    let moved = HwAddr::local(0x0202);
    let announce = |ip, hw| ArpRepr {
        operation: Operation::Request,
        sender_hw: hw,
        sender_ip: ip,
        target_hw: HwAddr::ZERO,
        target_ip: ip,
    };
    a.receive(&arp_frame(HwAddr::BROADCAST, announce(B_IP, moved)));
    assert_eq!(arp(&a).lookup(B_IP), Some(moved), "RFC 826 merge");
    a.receive(&arp_frame(
        HwAddr::BROADCAST,
        announce(ABSENT, HwAddr::local(99)),
    ));
    assert_eq!(arp(&a).lookup(ABSENT), None, "strangers are not learned");
    assert!(a.sent().is_empty(), "announcements are not answered");
}

#[test]
fn a_probe_for_our_address_is_answered_without_learning_its_zero_sender() {
    let mut b = host(2, Arch::Llm);
    let probe = ArpRepr {
        operation: Operation::Request,
        sender_hw: HwAddr::local(7),
        sender_ip: Ipv4Addr::UNSPECIFIED,
        target_hw: HwAddr::ZERO,
        target_ip: B_IP,
    };
    b.receive(&arp_frame(HwAddr::BROADCAST, probe));
    let (eth, reply) = arp_of(&b.sent()[0]).unwrap();
    assert_eq!(
        (eth.dst, reply.target_ip),
        (HwAddr::local(7), Ipv4Addr::UNSPECIFIED)
    );
    assert_eq!(arp(&b).entries(), 0);
}

#[test]
fn malformed_and_foreign_arp_is_dropped_and_counted() {
    let mut b = host(2, Arch::Llm);
    let good = arp_frame(
        HwAddr::BROADCAST,
        ArpRepr {
            operation: Operation::Request,
            sender_hw: HwAddr::local(1),
            sender_ip: A_IP,
            target_hw: HwAddr::ZERO,
            target_ip: B_IP,
        },
    );
    b.receive(&good[..14 + PACKET_LEN - 1]);
    assert_eq!(b.drops("arp", "truncated"), 1);
    let mut ipv6 = good.clone();
    ipv6[16..18].copy_from_slice(&0x86ddu16.to_be_bytes());
    b.receive(&ipv6);
    assert_eq!(b.drops("arp", "unsupported"), 1);
    let mut group = good.clone();
    group[22] |= 1; // sender hardware address becomes a group address
    b.receive(&group);
    assert_eq!(b.drops("arp", "malformed"), 1);
    assert!(b.sent().is_empty());
}
