//! Random and mutated frames against a whole `udp+tcp/ip/eth` host: nothing
//! panics, and every frame is accounted for exactly once.
//!
//! The ledger: a received frame ends *delivered* (the engine's `delivered`
//! event), *dropped* with a reason (protocol and engine drop counts) or
//! *consumed* by a layer that kept or answered it (the `consumed` events). One
//! case needs care, and the test is set up so the sum stays exact:
//!
//! - A fragment that does not complete its datagram is consumed (reassembly
//!   keeps it); the one that completes it takes the datagram's outcome. A
//!   fragment reassembly refuses (full, duplicate, malformed) is dropped. So
//!   each fragment has one outcome while the clock stands still. When the
//!   reassembly timer later gives the datagram up, that is a second count for
//!   frames already consumed: the second check advances time and expects the
//!   new drops to be exactly those timeouts plus held packets ARP gave up on.
//!
//! A datagram that opens a passive UDP session is delivered on the new session
//! (`Up::Opened`), once, like any other.
//!
//! TCP segments go to a listener (a SYN makes a half-open connection: consumed),
//! to a closed port (answered with a reset: dropped), or to a connection the
//! host accepted from a peer before the case began: in-order data is
//! delivered, out-of-order data is consumed (kept until the gap fills, then
//! delivered with the segment that fills it, as one delivery), and old or
//! out-of-window segments are dropped. Counts are taken from after that setup.
//!
//! Packets the host generates (ARP requests and replies, echo replies, ICMP
//! errors, echoes from the listener) must not add drops while the clock stands
//! still: the host has a default route so every answer has a way out, and ARP
//! may hold more packets than a case sends.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Host, host_with};
use proptest::prelude::*;
use strata_core::{Addr, Arch, CONSUMED, DELIVERED, HwAddr, Participants, Qos};
use strata_proto::arp::wire::{Operation, Repr as ArpRepr};
use strata_proto::eth::wire::{Repr as EthRepr, ethertype};
use strata_proto::icmp::wire::Repr as IcmpRepr;
use strata_proto::ipv4::wire::Repr as IpRepr;
use strata_proto::tcp::seq::Seq;
use strata_proto::tcp::wire::{Flags, Header as TcpHeader, Repr as TcpRepr};
use strata_proto::udp::wire::{self as udp_wire, Repr as UdpRepr};

const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const BOUND_PORT: u16 = 7;
const LISTEN_PORT: u16 = 9;
const TCP_PORT: u16 = 80;

/// The peer whose connection to B is open when a case begins.
const PEER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 253);
const PEER_PORT: u16 = 33_333;
const PEER_ISN: u32 = 1_000_000;

fn peer_mac() -> HwAddr {
    HwAddr::local(253)
}

/// A TCP segment from `src:sport` to B's `dport`.
fn tcp(
    src: Ipv4Addr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: Flags,
    data: &[u8],
) -> Vec<u8> {
    let r = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq: Seq(seq),
        ack: Seq(ack),
        flags,
        window: 65_535,
        ..TcpRepr::default()
    };
    [&r.to_bytes(src, B_IP, [data])[..], data].concat()
}

/// A frame from the peer to B carrying TCP `segment`.
fn from_peer(segment: &[u8]) -> Vec<u8> {
    eth(
        peer_mac(),
        HwAddr::local(2),
        ethertype::IPV4,
        &ip(PEER_IP, B_IP, 6, 1, 0, false, segment),
    )
}

/// The peer opens a connection to B's TCP listener; returns B's ISN.
fn handshake(b: &mut Host) -> u32 {
    b.receive(&from_peer(&tcp(
        PEER_IP,
        PEER_PORT,
        TCP_PORT,
        PEER_ISN,
        0,
        Flags::SYN,
        b"",
    )));
    let arp = ArpRepr {
        operation: Operation::Reply,
        sender_hw: peer_mac(),
        sender_ip: PEER_IP,
        target_hw: HwAddr::local(2),
        target_ip: B_IP,
    };
    b.receive(&eth(
        peer_mac(),
        HwAddr::local(2),
        ethertype::ARP,
        &arp.to_bytes(),
    ));
    let syn_ack = b
        .sent()
        .into_iter()
        .filter(|f| f.len() > 54 && f[12..14] == [0x08, 0x00] && f[23] == 6)
        .find_map(|f| {
            TcpHeader::new_checked(&f[34..])
                .ok()
                .map(|h| TcpRepr::parse(&h))
        })
        .expect("B answers the SYN");
    assert_eq!(syn_ack.flags, Flags::SYN | Flags::ACK);
    let iss = syn_ack.seq.0;
    b.receive(&from_peer(&tcp(
        PEER_IP,
        PEER_PORT,
        TCP_PORT,
        PEER_ISN + 1,
        iss + 1,
        Flags::ACK,
        b"",
    )));
    b.sent();
    iss
}

/// B's ISN for the peer's connection: every target is made alike, so it is
/// the same in each; the generator needs it to make segments B accepts.
fn b_isn() -> u32 {
    static ISN: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ISN.get_or_init(|| target(Arch::Llm).1)
}

/// Host B: a UDP app bound on port 7, an echoing listener on port 9, a TCP
/// listener on port 80 and a connection it accepted there; with B's ISN.
fn target(arch: Arch) -> (Host, u32) {
    let extra = [("arp", "pending", toml::Value::Integer(100_000))];
    let mut b = host_with(2, arch, "udp+tcp/ip/eth", true, &extra);
    let udp = b.proto("udp");
    let sink = b.recorder();
    b.engine
        .with_app(sink, |_, cx| {
            cx.open(
                udp,
                Participants::local([Addr::Port(BOUND_PORT)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    let echo = b.recorder();
    b.app_mut(echo).echo = true;
    b.engine
        .with_app(echo, |_, cx| {
            cx.open_enable(
                udp,
                Participants::local([Addr::Port(LISTEN_PORT)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    let tcp_listener = b.recorder();
    let tcp_proto = b.proto("tcp");
    b.engine
        .with_app(tcp_listener, |_, cx| {
            cx.open_enable(
                tcp_proto,
                Participants::local([Addr::Port(TCP_PORT)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    let isn = handshake(&mut b);
    (b, isn)
}

/// Delivered, dropped, consumed, and passive opens so far.
fn ledger(h: &Host) -> (u64, u64, u64, u64) {
    let e = h.engine.engine_counters();
    let mut dropped = e.dropped();
    let mut consumed = 0;
    for (_, c) in h.engine.all_counters() {
        dropped += c.dropped();
        consumed += c.events().get(CONSUMED);
    }
    (
        e.events().get(DELIVERED),
        dropped,
        consumed,
        h.events("udp", "passive-open"),
    )
}

/// `now` less `base`, field by field.
fn since(now: (u64, u64, u64, u64), base: (u64, u64, u64, u64)) -> (u64, u64, u64, u64) {
    (
        now.0 - base.0,
        now.1 - base.1,
        now.2 - base.2,
        now.3 - base.3,
    )
}

fn eth(src: HwAddr, dst: HwAddr, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let h = EthRepr {
        dst,
        src,
        ethertype,
    };
    [&h.to_bytes()[..], payload].concat()
}

fn ip(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    ident: u16,
    offset: usize,
    more: bool,
    payload: &[u8],
) -> Vec<u8> {
    let h = IpRepr {
        src,
        dst,
        protocol,
        ttl: 64,
        tos: 0,
        ident,
        dont_frag: false,
        more_frags: more,
        frag_offset: offset,
        payload_len: payload.len(),
    };
    [&h.to_bytes()[..], payload].concat()
}

fn udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let mut h = UdpRepr {
        src_port: sport,
        dst_port: dport,
        length: 8 + data.len(),
        checksum: 0,
    };
    h.checksum = udp_wire::checksum(src, dst, h.length, [&h.to_bytes()[..], data]);
    [&h.to_bytes()[..], data].concat()
}

/// A well-formed frame to B of one of the kinds B handles, from a peer on the
/// link (`peer` picks its address and MAC).
fn valid_frames(kind: u8, peer: u8, port: u16, data: Vec<u8>) -> Vec<Vec<u8>> {
    let peer = peer.max(1) % 250 + 3;
    let (src, mac) = (
        Ipv4Addr::new(198, 18, 0, peer),
        HwAddr::local(u16::from(peer)),
    );
    let to_b = |protocol, payload: &[u8]| {
        eth(
            mac,
            HwAddr::local(2),
            ethertype::IPV4,
            &ip(src, B_IP, protocol, 1, 0, false, payload),
        )
    };
    match kind % 13 {
        0 => {
            let p = ArpRepr {
                operation: Operation::Request,
                sender_hw: mac,
                sender_ip: src,
                target_hw: HwAddr::ZERO,
                target_ip: B_IP,
            };
            vec![eth(mac, HwAddr::BROADCAST, ethertype::ARP, &p.to_bytes())]
        }
        1 => {
            let p = ArpRepr {
                operation: Operation::Reply,
                sender_hw: mac,
                sender_ip: src,
                target_hw: HwAddr::local(2),
                target_ip: B_IP,
            };
            vec![eth(mac, HwAddr::local(2), ethertype::ARP, &p.to_bytes())]
        }
        2 => vec![to_b(17, &udp(src, B_IP, port, BOUND_PORT, &data))],
        3 => vec![to_b(17, &udp(src, B_IP, port, LISTEN_PORT, &data))],
        4 => vec![to_b(17, &udp(src, B_IP, port, 4444, &data))],
        5 => {
            let h = IcmpRepr::EchoRequest {
                ident: port,
                seq: 1,
            }
            .to_bytes_over([&data[..]]);
            vec![to_b(1, &[&h[..], &data[..]].concat())]
        }
        6 => {
            let sent = ip(
                B_IP,
                src,
                17,
                9,
                0,
                false,
                &udp(B_IP, src, LISTEN_PORT, port, b"12345678"),
            );
            let quoted = &sent[..28];
            let h = IcmpRepr::DstUnreachable { code: 3 }.to_bytes_over([quoted]);
            vec![to_b(1, &[&h[..], quoted].concat())]
        }
        7 => {
            // A datagram to the bound port in 3 fragments.
            let whole = udp(
                src,
                B_IP,
                port,
                BOUND_PORT,
                &[data.clone(), vec![0xab; 64]].concat(),
            );
            let cut1 = 24.min(whole.len() / 8 * 8);
            let cut2 = (cut1 + 24).min(whole.len() / 8 * 8);
            [(0, cut1), (cut1, cut2), (cut2, whole.len())]
                .iter()
                .filter(|(s, e)| e > s)
                .map(|&(s, e)| {
                    let more = e < whole.len();
                    eth(
                        mac,
                        HwAddr::local(2),
                        ethertype::IPV4,
                        &ip(src, B_IP, 17, port, s, more, &whole[s..e]),
                    )
                })
                .collect()
        }
        9 => vec![to_b(6, &tcp(src, port, TCP_PORT, 1, 0, Flags::SYN, b""))],
        10 => vec![to_b(6, &tcp(src, port, 4445, 1, 2, Flags::ACK, &data))],
        11 => {
            // Data on the open connection: in order or ahead of it.
            let offset = if port.is_multiple_of(3) {
                0
            } else {
                u32::from(port) % 3000
            };
            let seq = PEER_ISN + 1 + offset;
            let flags = Flags::ACK | Flags::PSH;
            vec![from_peer(&tcp(
                PEER_IP,
                PEER_PORT,
                TCP_PORT,
                seq,
                b_isn() + 1,
                flags,
                &data,
            ))]
        }
        12 => {
            let flags = [Flags::ACK, Flags::FIN | Flags::ACK, Flags::RST, Flags::SYN]
                [usize::from(port % 4)];
            let seq = PEER_ISN + 1 + u32::from(port % 64);
            vec![from_peer(&tcp(
                PEER_IP,
                PEER_PORT,
                TCP_PORT,
                seq,
                b_isn() + 1,
                flags,
                b"",
            ))]
        }
        _ => {
            let bcast = Ipv4Addr::new(198, 18, 0, 255);
            let frame = ip(
                src,
                bcast,
                17,
                3,
                0,
                false,
                &udp(src, bcast, port, 4444, &data),
            );
            vec![eth(mac, HwAddr::BROADCAST, ethertype::IPV4, &frame)]
        }
    }
}

/// Ways to damage a frame.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize),
    Truncate(usize),
    SetByte(usize, u8),
    /// Overwrite a 16-bit field at one of the length fields' places: IPv4
    /// total length, UDP length, or anywhere.
    SetU16(usize, u16),
    Append(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0usize..600).prop_map(Mutation::FlipBit),
        (0usize..120).prop_map(Mutation::Truncate),
        ((0usize..120), any::<u8>()).prop_map(|(at, v)| Mutation::SetByte(at, v)),
        (
            prop_oneof![Just(14usize), Just(16), Just(38), 0usize..100],
            any::<u16>()
        )
            .prop_map(|(at, v)| Mutation::SetU16(at, v)),
        proptest::collection::vec(any::<u8>(), 1..40).prop_map(Mutation::Append),
    ]
}

fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::FlipBit(bit) if !frame.is_empty() => {
            let at = (bit / 8) % frame.len();
            frame[at] ^= 1 << (bit % 8);
        }
        Mutation::Truncate(n) => frame.truncate(*n),
        Mutation::SetByte(at, v) if *at < frame.len() => frame[*at] = *v,
        Mutation::SetU16(at, v) if at + 2 <= frame.len() => {
            frame[*at..at + 2].copy_from_slice(&v.to_be_bytes())
        }
        Mutation::Append(tail) => frame.extend_from_slice(tail),
        _ => {}
    }
}

/// One input: several frames, each random or a (possibly damaged) valid one.
fn frames() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let random = proptest::collection::vec(any::<u8>(), 0..160).prop_map(|f| vec![f]);
    let valid = (
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..100),
        proptest::collection::vec(mutation(), 0..3),
    )
        .prop_map(|(kind, peer, port, data, mutations)| {
            let mut frames = valid_frames(kind, peer, port, data);
            if let Some(first) = frames.first_mut() {
                for m in &mutations {
                    apply(first, m);
                }
            }
            frames
        });
    proptest::collection::vec(prop_oneof![1 => random, 4 => valid], 1..24)
        .prop_map(|groups| groups.into_iter().flatten().collect())
}

fn check(arch: Arch, input: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let (mut b, isn) = target(arch);
    prop_assert_eq!(isn, b_isn(), "targets are made alike");
    let base = ledger(&b);
    for f in input {
        b.receive(f);
        b.sent();
    }
    let (delivered, dropped, consumed, passive) = since(ledger(&b), base);
    let fed = input.len() as u64;
    prop_assert_eq!(
        delivered + dropped + consumed,
        fed,
        "{}: delivered {} + dropped {} + consumed {} != fed {} ({} passive opens)",
        arch,
        delivered,
        dropped,
        consumed,
        fed,
        passive
    );

    let timeouts = |h: &Host| h.drops("ip", "reassembly-timeout") + h.drops("arp", "unresolved");
    let before = (timeouts(&b), dropped);
    b.advance(Duration::from_secs(31));
    b.sent();
    let (d2, dropped2, c2, p2) = since(ledger(&b), base);
    prop_assert_eq!(
        (d2, c2, p2),
        (delivered, consumed, passive),
        "{}: timers neither deliver nor consume",
        arch
    );
    prop_assert_eq!(
        dropped2 - before.1,
        timeouts(&b) - before.0,
        "{}: every later drop is a timeout",
        arch
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_is_delivered_dropped_or_consumed_exactly_once_under_llm(input in frames()) {
        check(Arch::Llm, &input)?;
    }

    #[test]
    fn every_frame_is_delivered_dropped_or_consumed_exactly_once_under_illm(input in frames()) {
        check(Arch::Illm, &input)?;
    }

    /// Plain Ethernet assigns no application identifiers, so DAA takes the
    /// layered way; the ledger must not care.
    #[test]
    fn every_frame_is_delivered_dropped_or_consumed_exactly_once_under_daa(input in frames()) {
        check(Arch::Daa, &input)?;
    }
}

#[test]
fn the_generator_makes_frames_each_layer_accepts() {
    // Guards the property above against testing only garbage: undamaged frames
    // of every kind reach the layer they are for.
    let (mut b, _) = target(Arch::Llm);
    let base = ledger(&b);
    for kind in 0..13 {
        for f in valid_frames(kind, 7, 5000 + u16::from(kind), b"0123456789".to_vec()) {
            b.receive(&f);
        }
    }
    let (delivered, dropped, consumed, passive) = since(ledger(&b), base);
    let consumed_at = |p: &str| b.events(p, CONSUMED);
    assert_eq!(delivered, 3, "bound port, listener, reassembled datagram");
    assert_eq!(passive, 1, "the listener's new peer");
    assert_eq!(
        b.drops("udp", "no-session"),
        2,
        "closed port, broadcast to a closed port"
    );
    assert_eq!(b.drops("tcp", "no-session"), 1, "a closed TCP port");
    assert_eq!(dropped, 3);
    assert_eq!(
        consumed_at("arp") - 1,
        2,
        "request and reply (besides the setup's)"
    );
    assert_eq!(
        consumed_at("icmp"),
        2,
        "echo request and destination unreachable"
    );
    assert_eq!(
        b.events("udp", "icmp-error-unmatched"),
        1,
        "the unreachable reached UDP"
    );
    assert_eq!(consumed_at("ip"), 2, "the fragments before the last");
    assert_eq!(
        consumed_at("udp"),
        0,
        "the listener's first datagram is delivered"
    );
    assert_eq!(
        consumed_at("tcp") - 2,
        3,
        "a SYN to the listener, data ahead of RCV.NXT, an ACK (besides the setup's)"
    );
    assert_eq!(
        b.events("tcp", "passive-open"),
        2,
        "the setup's and the SYN's"
    );
    assert_eq!(delivered + dropped + consumed, 15, "15 frames");
}
