//! IPv4 between hosts: fragmentation on the wire, reassembly in every order,
//! timeouts and bounds, routing, and the header checks of a host.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Host, host, host_with, settle};
use strata_core::checksum::verifies;
use strata_core::{
    Addr, AppId, Arch, Control, Message, Participants, Qos, Reply, SessionRef, UpiError,
};
use strata_proto::info::ip_source;
use strata_proto::ipv4::wire::{Header, Repr};
use strata_proto::ipv4::{GetOptPayload, Ipv4};

const A_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// The IPv4 header of an Ethernet frame.
fn ip_of(frame: &[u8]) -> Repr {
    Repr::parse(&Header::new_checked(&frame[14..]).unwrap()).unwrap()
}

/// A and B on one link, ARP settled, B with a bound (non-echoing) app on port
/// 7 and A with a session to it. Returns (a, b, a's app, a's session, b's app).
fn pair(arch: Arch) -> (Host, Host, AppId, SessionRef, AppId) {
    let (mut a, mut b) = (host(1, arch), host(2, arch));
    let sink = b.recorder();
    let udp = b.proto("udp");
    b.engine
        .with_app(sink, |_, cx| {
            cx.open(udp, Participants::local([Addr::Port(7)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let app = a.recorder();
    let udp = a.proto("udp");
    let parts =
        Participants::remote([Addr::Ip(B_IP), Addr::Port(7)]).with_local([Addr::Port(40000)]);
    let s = a
        .engine
        .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
        .unwrap()
        .unwrap();
    send(&mut a, app, s, b"warm-up");
    settle(&mut a, &mut b);
    b.app_mut(sink).received.clear();
    (a, b, app, s, sink)
}

fn send(h: &mut Host, app: AppId, s: SessionRef, data: &[u8]) {
    h.engine
        .with_app(app, |_, cx| cx.send(s, Message::from_slice(data)))
        .unwrap();
    h.run();
}

/// The frames of one 4000-byte UDP datagram from A to B.
fn fragmented(arch: Arch) -> (Host, Host, AppId, Vec<Vec<u8>>) {
    let (mut a, b, app, s, sink) = pair(arch);
    send(&mut a, app, s, &payload(4000));
    let frames = a.sent();
    (a, b, sink, frames)
}

#[test]
fn a_large_datagram_leaves_in_fragments_with_aligned_offsets_and_flags() {
    let (_a, _b, _sink, frames) = fragmented(Arch::Llm);
    assert_eq!(frames.len(), 3, "4008 bytes of UDP in 1480-byte pieces");
    let headers: Vec<Repr> = frames.iter().map(|f| ip_of(f)).collect();
    let layout: Vec<(usize, bool, usize)> = headers
        .iter()
        .map(|h| (h.frag_offset, h.more_frags, h.payload_len))
        .collect();
    assert_eq!(
        layout,
        vec![(0, true, 1480), (1480, true, 1480), (2960, false, 1048)]
    );
    assert!(
        headers.iter().all(|h| h.ident == headers[0].ident),
        "one identification"
    );
    assert!(
        headers
            .iter()
            .all(|h| !h.dont_frag && h.ttl == 64 && h.protocol == 17)
    );
    for f in &frames {
        assert!(f.len() <= 1514, "fits the link");
        assert!(
            verifies(&f[14..34]),
            "each fragment has a valid header checksum"
        );
    }
}

/// Feeds B `order` (indices into `frames`), returning what B's app received.
fn deliver(arch: Arch, order: &[usize]) -> Vec<Vec<u8>> {
    let (_a, mut b, sink, frames) = fragmented(arch);
    for &i in order {
        b.receive(&frames[i]);
    }
    b.app(sink).data()
}

#[test]
fn fragments_reassemble_in_order_and_reversed_under_every_architecture() {
    for arch in Arch::ALL {
        assert_eq!(
            deliver(arch, &[0, 1, 2]),
            vec![payload(4000)],
            "{arch} in order"
        );
        assert_eq!(
            deliver(arch, &[2, 1, 0]),
            vec![payload(4000)],
            "{arch} reversed"
        );
        assert_eq!(
            deliver(arch, &[1, 2, 0]),
            vec![payload(4000)],
            "{arch} middle first"
        );
    }
}

#[test]
fn duplicate_fragments_are_dropped_and_the_datagram_delivered_once() {
    let (_a, mut b, sink, frames) = fragmented(Arch::Llm);
    for i in [0, 0, 2, 1, 1] {
        b.receive(&frames[i]);
    }
    assert_eq!(b.app(sink).data(), vec![payload(4000)]);
    assert_eq!(
        b.drops("ip", "duplicate-fragment"),
        1,
        "the repeat after completion is a new datagram"
    );
}

/// A fragment of the datagram in `frames` covering UDP bytes [start, end).
fn refragment(frames: &[Vec<u8>], start: usize, end: usize, more: bool) -> Vec<u8> {
    let whole: Vec<u8> = frames.iter().flat_map(|f| f[34..].to_vec()).collect();
    let mut h = ip_of(&frames[0]);
    h.frag_offset = start;
    h.more_frags = more;
    h.payload_len = end - start;
    [&frames[0][..14], &h.to_bytes()[..], &whole[start..end]].concat()
}

#[test]
fn overlapping_fragments_reassemble_to_the_original() {
    let (_a, mut b, sink, frames) = fragmented(Arch::Llm);
    let overlap = refragment(&frames, 1000, 2000, true);
    for f in [&frames[0], &overlap, &frames[2], &frames[1]] {
        b.receive(f);
    }
    assert_eq!(b.app(sink).data(), vec![payload(4000)]);
}

#[test]
fn a_missing_fragment_times_out_counted_and_reported_to_the_sender() {
    let (_a, mut b, sink, frames) = fragmented(Arch::Llm);
    b.receive(&frames[0]);
    b.receive(&frames[2]);
    let ip: &Ipv4 = b.engine.protocol(b.proto("ip")).unwrap();
    assert_eq!(ip.reassembling(), 1);
    b.advance(Duration::from_secs(29));
    assert_eq!(b.drops("ip", "reassembly-timeout"), 0);
    b.advance(Duration::from_secs(1));
    assert_eq!(b.drops("ip", "reassembly-timeout"), 1, "30 s by default");
    let ip: &Ipv4 = b.engine.protocol(b.proto("ip")).unwrap();
    assert_eq!((ip.reassembling(), ip.reassembly_bytes()), (0, 0));
    assert!(b.app(sink).data().is_empty());
    let out = b.sent();
    assert_eq!(out.len(), 1);
    let icmp = &out[0][34..];
    assert_eq!(
        (icmp[0], icmp[1]),
        (11, 1),
        "time exceeded, reassembly (RFC 792)"
    );
    assert_eq!(
        &icmp[8..28],
        &frames[0][14..34],
        "quotes fragment zero's header"
    );
    assert_eq!(&icmp[28..36], &frames[0][34..42], "and its first 8 bytes");
}

#[test]
fn the_number_of_datagrams_being_reassembled_is_bounded() {
    let extra = [("ip", "reassembly_buffers", toml::Value::Integer(2))];
    let mut b = host_with(2, Arch::Llm, "udp/ip/eth", false, &extra);
    let (_a, _b, _sink, frames) = fragmented(Arch::Llm);
    for ident in 0..3u16 {
        let mut f = frames[0].clone();
        let mut h = ip_of(&f);
        h.ident = ident;
        f[14..34].copy_from_slice(&h.to_bytes());
        b.receive(&f);
    }
    assert_eq!(b.drops("ip", "queue-full"), 1);
    assert_eq!(
        b.engine
            .protocol::<Ipv4>(b.proto("ip"))
            .unwrap()
            .reassembling(),
        2
    );
}

#[test]
fn the_bytes_held_for_reassembly_are_bounded() {
    let extra = [("ip", "reassembly_bytes", toml::Value::String("2KB".into()))];
    let mut b = host_with(2, Arch::Llm, "udp/ip/eth", false, &extra);
    let (_a, _b, _sink, frames) = fragmented(Arch::Llm);
    b.receive(&frames[0]);
    b.receive(&frames[1]);
    assert_eq!(
        b.drops("ip", "queue-full"),
        1,
        "1480 + 1480 bytes do not fit in 2 KB"
    );
}

#[test]
fn ethernet_padding_is_trimmed_by_the_total_length() {
    let (mut a, mut b, app, s, sink) = pair(Arch::Llm);
    send(&mut a, app, s, b"hi");
    let mut frame = a.sent().remove(0);
    assert_eq!(frame.len(), 44, "sent unpadded");
    frame.resize(60, 0xee);
    b.receive(&frame);
    assert_eq!(b.app(sink).data(), vec![b"hi".to_vec()]);
}

#[test]
fn header_options_are_skipped() {
    let (mut a, mut b, app, s, sink) = pair(Arch::Illm);
    send(&mut a, app, s, b"with options");
    let frame = a.sent().remove(0);
    let mut h = frame[14..34].to_vec();
    h[0] = 0x46;
    let total = u16::from_be_bytes([h[2], h[3]]) + 4;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[1, 1, 1, 0]); // NOP, NOP, NOP, end of options
    h[10..12].copy_from_slice(&[0, 0]);
    let sum = strata_core::checksum::checksum(&h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    let with_options = [&frame[..14], &h[..], &frame[34..]].concat();
    b.receive(&with_options);
    assert_eq!(b.app(sink).data(), vec![b"with options".to_vec()]);
}

#[test]
fn a_bad_header_checksum_is_dropped_and_counted() {
    let (mut a, mut b, app, s, sink) = pair(Arch::Illm);
    send(&mut a, app, s, b"x");
    let mut frame = a.sent().remove(0);
    frame[24] ^= 0xff;
    b.receive(&frame);
    assert_eq!(b.drops("ip", "bad-checksum"), 1);
    assert!(b.app(sink).data().is_empty());
}

#[test]
fn datagrams_for_other_hosts_are_not_for_us_but_broadcasts_are() {
    let (mut a, mut b, app, s, sink) = pair(Arch::Llm);
    send(&mut a, app, s, b"x");
    let frame = a.sent().remove(0);
    // The UDP checksum covers the destination address, so a rewritten one no
    // longer matches: zero the field (no checksum, RFC 768).
    let redirect = |dst: Ipv4Addr| {
        let mut h = ip_of(&frame);
        h.dst = dst;
        let mut f = [&frame[..14], &h.to_bytes()[..], &frame[34..]].concat();
        f[40..42].copy_from_slice(&[0, 0]);
        f
    };
    b.receive(&redirect(Ipv4Addr::new(198, 18, 0, 3)));
    assert_eq!(b.drops("ip", "not-for-us"), 1);
    b.receive(&redirect(Ipv4Addr::new(198, 18, 0, 255)));
    b.receive(&redirect(Ipv4Addr::BROADCAST));
    assert_eq!(
        b.app(sink).data().len(),
        2,
        "subnet and limited broadcast are ours"
    );
}

#[test]
fn martian_sources_are_dropped() {
    let (mut a, mut b, app, s, _sink) = pair(Arch::Llm);
    send(&mut a, app, s, b"x");
    let frame = a.sent().remove(0);
    for src in [
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::new(198, 18, 0, 255),
        B_IP,
    ] {
        let mut h = ip_of(&frame);
        h.src = src;
        b.receive(&[&frame[..14], &h.to_bytes()[..], &frame[34..]].concat());
    }
    assert_eq!(b.drops("ip", "malformed"), 4);
}

#[test]
fn opening_towards_an_address_without_a_route_is_unreachable() {
    let mut a = host(1, Arch::Llm);
    let app = a.recorder();
    let udp = a.proto("udp");
    let parts = Participants::remote([Addr::Ip(Ipv4Addr::new(203, 0, 113, 5)), Addr::Port(7)]);
    let r = a
        .engine
        .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
        .unwrap();
    assert_eq!(r.unwrap_err(), UpiError::Unreachable);
}

/// The target of the ARP request `h` sends first when sending to `dst`.
fn first_hop(h: &mut Host, dst: Ipv4Addr) -> Ipv4Addr {
    let app = h.recorder();
    let udp = h.proto("udp");
    let parts = Participants::remote([Addr::Ip(dst), Addr::Port(7)]);
    let s = h
        .engine
        .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
        .unwrap()
        .unwrap();
    send(h, app, s, b"x");
    let frame = h.sent().remove(0);
    assert_eq!(&frame[12..14], &[0x08, 0x06], "an ARP request");
    Ipv4Addr::new(frame[38], frame[39], frame[40], frame[41])
}

#[test]
fn off_link_traffic_goes_to_the_gateway_and_the_longest_prefix_wins() {
    let routes = toml::Value::Array(vec![
        "203.0.113.0/24 via 198.18.0.10".into(),
        "203.0.0.0/8 via 198.18.0.20".into(),
    ]);
    let extra = [("ip", "routes", routes)];
    let new = || host_with(1, Arch::Llm, "udp/ip/eth", true, &extra);
    assert_eq!(
        first_hop(&mut new(), Ipv4Addr::new(203, 0, 113, 5)),
        Ipv4Addr::new(198, 18, 0, 10)
    );
    assert_eq!(
        first_hop(&mut new(), Ipv4Addr::new(203, 1, 2, 3)),
        Ipv4Addr::new(198, 18, 0, 20)
    );
    assert_eq!(
        first_hop(&mut new(), Ipv4Addr::new(192, 0, 2, 1)),
        Ipv4Addr::new(198, 18, 0, 254)
    );
    assert_eq!(
        first_hop(&mut new(), Ipv4Addr::new(198, 18, 0, 77)),
        Ipv4Addr::new(198, 18, 0, 77)
    );
}

#[test]
fn the_largest_payload_is_what_fragmentation_allows_and_the_optimal_one_what_a_frame_holds() {
    let mut a = host(1, Arch::Llm);
    let ip = a.proto("ip");
    assert!(matches!(
        a.engine.control(ip, None, Control::GetMaxPayload),
        Ok(Reply::Size(65515))
    ));
    let opt = a
        .engine
        .control(ip, None, Control::Private(Box::new(GetOptPayload)));
    assert!(matches!(opt, Ok(Reply::Size(1480))));
    let udp = a.proto("udp");
    assert!(matches!(
        a.engine.control(udp, None, Control::GetMaxPayload),
        Ok(Reply::Size(65507))
    ));
}

#[test]
fn the_largest_udp_datagram_crosses_in_45_fragments() {
    let extra = [("arp", "pending", toml::Value::Integer(64))];
    let mut a = host_with(1, Arch::Illm, "udp/ip/eth", false, &extra);
    let mut b = host(2, Arch::Illm);
    let sink = b.recorder();
    let udp = b.proto("udp");
    b.engine
        .with_app(sink, |_, cx| {
            cx.open(udp, Participants::local([Addr::Port(7)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let app = a.recorder();
    let udp = a.proto("udp");
    let parts = Participants::remote([Addr::Ip(B_IP), Addr::Port(7)]);
    let s = a
        .engine
        .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
        .unwrap()
        .unwrap();
    send(&mut a, app, s, &payload(65507));
    settle(&mut a, &mut b);
    assert_eq!(b.app(sink).data(), vec![payload(65507)]);
    assert_eq!(b.events("ip", "reassembled"), 1);
    assert_eq!(ip_source(&b.app(sink).received[0].2), Some(A_IP));
}
