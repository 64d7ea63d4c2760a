//! Our wire code against etherparse's: what we emit parses there with the same
//! fields and checksums, and what etherparse builds parses here the same way.
//! Two independent readings of the RFCs agreeing is the cheap half of interop.

mod common;

use std::net::Ipv4Addr;

use etherparse::{
    ArpEthIpv4Packet, ArpOperation, EtherType, Ethernet2Header, IcmpEchoHeader, Icmpv4Header,
    Icmpv4Type, IpNumber, Ipv4Header, NetSlice, PacketBuilder, SlicedPacket, TransportSlice,
    UdpHeader, icmpv4::DestUnreachableHeader,
};
use strata_core::checksum::verifies;
use strata_core::{Addr, Arch, HwAddr, Message, Participants, Qos};
use strata_proto::arp::wire::{Operation, Packet as ArpPacket, Repr as ArpRepr};
use strata_proto::eth::wire::{Header as EthHeader, Repr as EthRepr};
use strata_proto::icmp::wire::{Header as IcmpHeader, Repr as IcmpRepr};
use strata_proto::ipv4::wire::{Header as IpHeader, Repr as IpRepr};
use strata_proto::udp::wire::{self as udp_wire, Header as UdpView, Repr as UdpRepr};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn ip_repr(protocol: u8, payload_len: usize) -> IpRepr {
    IpRepr {
        src: A,
        dst: B,
        protocol,
        ttl: 64,
        tos: 0xb8,
        ident: 0xbeef,
        dont_frag: false,
        more_frags: true,
        frag_offset: 1480,
        payload_len,
    }
}

#[test]
fn our_ethernet_header_reads_the_same_in_etherparse_and_back() {
    let ours = EthRepr {
        dst: HwAddr::BROADCAST,
        src: HwAddr::local(1),
        ethertype: 0x88b5,
    };
    let (theirs, _) = Ethernet2Header::from_slice(&ours.to_bytes()).unwrap();
    assert_eq!(
        (theirs.destination, theirs.source, theirs.ether_type),
        ([0xff; 6], HwAddr::local(1).0, EtherType(0x88b5))
    );
    let built = Ethernet2Header {
        source: HwAddr::local(2).0,
        destination: HwAddr::local(1).0,
        ether_type: EtherType::IPV4,
    };
    let back = EthRepr::parse(&EthHeader::new_checked(&built.to_bytes()[..]).unwrap()).unwrap();
    assert_eq!(
        (back.src, back.dst, back.ethertype),
        (HwAddr::local(2), HwAddr::local(1), 0x0800)
    );
}

#[test]
fn our_arp_packets_read_the_same_in_etherparse_and_back() {
    let ours = ArpRepr {
        operation: Operation::Reply,
        sender_hw: HwAddr::local(2),
        sender_ip: B,
        target_hw: HwAddr::local(1),
        target_ip: A,
    };
    let theirs = etherparse::ArpPacket::from_slice(&ours.to_bytes())
        .unwrap()
        .try_eth_ipv4()
        .unwrap();
    assert_eq!(theirs.operation, ArpOperation::REPLY);
    assert_eq!(
        (theirs.sender_mac, theirs.sender_ipv4),
        (HwAddr::local(2).0, B.octets())
    );
    assert_eq!(
        (theirs.target_mac, theirs.target_ipv4),
        (HwAddr::local(1).0, A.octets())
    );
    let built = ArpEthIpv4Packet {
        operation: ArpOperation::REQUEST,
        sender_mac: HwAddr::local(1).0,
        sender_ipv4: A.octets(),
        target_mac: [0; 6],
        target_ipv4: B.octets(),
    };
    let back = ArpRepr::parse(&ArpPacket::new_checked(&built.to_bytes()[..]).unwrap()).unwrap();
    assert_eq!(
        (
            back.operation,
            back.sender_hw,
            back.sender_ip,
            back.target_ip
        ),
        (Operation::Request, HwAddr::local(1), A, B)
    );
}

fn assert_same_ipv4(ours: &IpRepr, theirs: &Ipv4Header) {
    assert_eq!(
        (theirs.source, theirs.destination),
        (ours.src.octets(), ours.dst.octets())
    );
    assert_eq!(theirs.protocol, IpNumber(ours.protocol));
    assert_eq!(theirs.time_to_live, ours.ttl);
    assert_eq!(theirs.identification, ours.ident);
    assert_eq!(
        (theirs.dont_fragment, theirs.more_fragments),
        (ours.dont_frag, ours.more_frags)
    );
    assert_eq!(
        usize::from(theirs.fragment_offset.byte_offset()),
        ours.frag_offset
    );
    assert_eq!((theirs.dscp.value() << 2) | theirs.ecn.value(), ours.tos);
    assert_eq!(
        usize::from(theirs.total_len),
        theirs.header_len() + ours.payload_len
    );
}

#[test]
fn our_ipv4_header_reads_the_same_in_etherparse_with_the_same_checksum() {
    let ours = ip_repr(17, 1000);
    let bytes = ours.to_bytes();
    let (theirs, _) = Ipv4Header::from_slice(&bytes).unwrap();
    assert_same_ipv4(&ours, &theirs);
    assert_eq!(theirs.header_checksum, theirs.calc_header_checksum());
}

#[test]
fn our_ipv4_header_with_options_reads_the_same_in_etherparse() {
    let plain = ip_repr(6, 100);
    let mut bytes = [0u8; 28];
    bytes[..20].copy_from_slice(&plain.to_bytes());
    bytes[0] = 0x47;
    bytes[2..4].copy_from_slice(&128u16.to_be_bytes());
    bytes[20..28].copy_from_slice(&[0x94, 0x04, 0, 0, 1, 1, 1, 0]); // router alert, NOPs, end
    IpHeader::new_checked(&mut bytes[..])
        .unwrap()
        .fill_checksum();
    let (theirs, _) = Ipv4Header::from_slice(&bytes).unwrap();
    assert_eq!(theirs.options.as_slice(), &bytes[20..28]);
    assert_eq!(theirs.header_checksum, theirs.calc_header_checksum());
    assert_same_ipv4(
        &IpRepr {
            payload_len: 100,
            ..plain
        },
        &theirs,
    );
}

#[test]
fn etherparse_ipv4_headers_with_and_without_options_read_the_same_here() {
    for options in [
        &[][..],
        &[1, 1, 1, 0][..],
        &[0x44, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0][..],
    ] {
        let mut theirs = Ipv4Header::new(300, 17, IpNumber::UDP, A.octets(), B.octets()).unwrap();
        theirs.options = options.try_into().unwrap();
        theirs.identification = 0x1234;
        theirs.header_checksum = theirs.calc_header_checksum();
        let bytes = theirs.to_bytes();
        let view = IpHeader::new_checked(&bytes[..]).unwrap();
        assert!(view.verify_checksum(), "options {options:?}");
        assert_eq!(view.header_len(), 20 + options.len());
        assert_eq!(view.options(), options);
        let ours = IpRepr::parse(&view).unwrap();
        assert_same_ipv4(&ours, &theirs);
    }
}

#[test]
fn our_echo_request_reads_the_same_in_etherparse_with_the_same_checksum() {
    let data = b"abcdefghijklmnopqrstuvwabcdefghi";
    let header = IcmpRepr::EchoRequest {
        ident: 0x1c46,
        seq: 7,
    }
    .to_bytes_over([&data[..]]);
    let (theirs, _) = Icmpv4Header::from_slice(&header).unwrap();
    assert_eq!(
        theirs.icmp_type,
        Icmpv4Type::EchoRequest(IcmpEchoHeader { id: 0x1c46, seq: 7 })
    );
    assert_eq!(theirs.checksum, theirs.icmp_type.calc_checksum(data));
}

#[test]
fn etherparse_echo_and_unreachable_messages_read_the_same_here() {
    let data = b"ping data";
    let echo = Icmpv4Header::with_checksum(
        Icmpv4Type::EchoReply(IcmpEchoHeader { id: 9, seq: 65535 }),
        data,
    );
    let bytes = [&echo.to_bytes()[..], &data[..]].concat();
    assert!(verifies(&bytes));
    let h = IcmpHeader::new_checked(&bytes[..]).unwrap();
    assert_eq!(
        IcmpRepr::parse(&h),
        Ok(IcmpRepr::EchoReply {
            ident: 9,
            seq: 65535
        })
    );
    let quoted = [0x45u8; 28];
    let port = Icmpv4Header::with_checksum(
        Icmpv4Type::DestinationUnreachable(DestUnreachableHeader::Port),
        &quoted,
    );
    let bytes = [&port.to_bytes()[..], &quoted[..]].concat();
    assert!(verifies(&bytes));
    let h = IcmpHeader::new_checked(&bytes[..]).unwrap();
    assert_eq!(
        IcmpRepr::parse(&h),
        Ok(IcmpRepr::DstUnreachable { code: 3 })
    );
    let ours = IcmpRepr::DstUnreachable { code: 3 }.to_bytes_over([&quoted[..]]);
    assert_eq!(ours, port.to_bytes()[..], "byte for byte");
}

#[test]
fn our_udp_header_and_checksum_match_etherparse() {
    let data = b"an odd-sized payload!";
    let mut ours = UdpRepr {
        src_port: 40000,
        dst_port: 7,
        length: 8 + data.len(),
        checksum: 0,
    };
    ours.checksum = udp_wire::checksum(A, B, ours.length, [&ours.to_bytes()[..], &data[..]]);
    let (theirs, _) = UdpHeader::from_slice(&ours.to_bytes()).unwrap();
    assert_eq!(
        (
            theirs.source_port,
            theirs.destination_port,
            usize::from(theirs.length)
        ),
        (40000, 7, ours.length)
    );
    assert_eq!(
        theirs.checksum,
        theirs
            .calc_checksum_ipv4_raw(A.octets(), B.octets(), data)
            .unwrap()
    );
}

#[test]
fn a_udp_frame_built_by_etherparse_reads_the_same_here_layer_by_layer() {
    let payload = b"hello from etherparse";
    let mut frame = Vec::new();
    PacketBuilder::ethernet2(HwAddr::local(1).0, HwAddr::local(2).0)
        .ipv4(A.octets(), B.octets(), 64)
        .udp(5353, 7)
        .write(&mut frame, payload)
        .unwrap();
    let eth = EthRepr::parse(&EthHeader::new_checked(&frame[..]).unwrap()).unwrap();
    assert_eq!(
        (eth.src, eth.dst, eth.ethertype),
        (HwAddr::local(1), HwAddr::local(2), 0x0800)
    );
    let ip_view = IpHeader::new_checked(&frame[14..]).unwrap();
    assert!(ip_view.verify_checksum());
    let ip = IpRepr::parse(&ip_view).unwrap();
    assert_eq!(
        (ip.src, ip.dst, ip.protocol, ip.payload_len),
        (A, B, 17, 8 + payload.len())
    );
    let udp = UdpRepr::parse(&UdpView::new_checked(&frame[34..]).unwrap()).unwrap();
    assert_eq!(
        (udp.src_port, udp.dst_port, udp.length),
        (5353, 7, 8 + payload.len())
    );
    assert_eq!(
        udp_wire::sum(A, B, udp.length, [&frame[34..]]).sum(),
        0xffff,
        "checksum verifies"
    );
}

#[test]
fn frames_our_stack_sends_parse_cleanly_in_etherparse() {
    let mut a = common::host(1, Arch::Llm);
    let mut b = common::host(2, Arch::Llm);
    let app = a.recorder();
    let udp = a.proto("udp");
    let parts = Participants::remote([Addr::Ip(B), Addr::Port(7)]).with_local([Addr::Port(40000)]);
    let s = a
        .engine
        .with_app(app, |_, cx| cx.open(udp, parts, Qos::default()))
        .unwrap()
        .unwrap();
    let data = vec![0x5a; 3000];
    a.engine
        .with_app(app, |_, cx| cx.send(s, Message::from_slice(&data)))
        .unwrap();
    a.run();
    let arp = a.sent();
    let sliced = SlicedPacket::from_ethernet(&arp[0]).unwrap();
    assert!(
        matches!(sliced.net, Some(NetSlice::Arp(_))),
        "the ARP request"
    );
    for f in &arp {
        b.receive(f);
    }
    common::carry(&mut b, &mut a);
    let frames = a.sent();
    assert_eq!(frames.len(), 3);
    let first = SlicedPacket::from_ethernet(&frames[0]).unwrap();
    let Some(NetSlice::Ipv4(ip)) = &first.net else {
        panic!("IPv4 expected");
    };
    let h = ip.header().to_header();
    assert_eq!(h.header_checksum, h.calc_header_checksum());
    assert!(h.more_fragments && h.fragment_offset.value() == 0);
    let mut whole = Vec::new();
    for f in &frames {
        let (h, rest) = Ipv4Header::from_slice(&f[14..]).unwrap();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        whole.extend_from_slice(&rest[..usize::from(h.total_len) - h.header_len()]);
    }
    let (udp, payload) = UdpHeader::from_slice(&whole).unwrap();
    assert_eq!(payload, &data[..]);
    assert_eq!(
        udp.checksum,
        udp.calc_checksum_ipv4_raw(A.octets(), B.octets(), payload)
            .unwrap()
    );
    let small = SlicedPacket::from_ethernet(&frames[2]);
    assert!(small.is_ok(), "a non-first fragment is well formed too");
    let _ = TransportSlice::Udp;
}

#[test]
fn a_ping_built_by_etherparse_is_answered_and_the_answer_reads_cleanly_there() {
    let mut b = common::host(2, Arch::Illm);
    let mut arp = Vec::new();
    PacketBuilder::ethernet2(HwAddr::local(1).0, [0xff; 6])
        .arp(
            ArpEthIpv4Packet {
                operation: ArpOperation::REQUEST,
                sender_mac: HwAddr::local(1).0,
                sender_ipv4: A.octets(),
                target_mac: [0; 6],
                target_ipv4: B.octets(),
            }
            .into(),
        )
        .write(&mut arp)
        .unwrap();
    b.receive(&arp);
    let reply = b.sent();
    let sliced = SlicedPacket::from_ethernet(&reply[0]).unwrap();
    let Some(NetSlice::Arp(r)) = &sliced.net else {
        panic!("an ARP reply expected");
    };
    assert_eq!(
        r.to_packet().try_eth_ipv4().unwrap().operation,
        ArpOperation::REPLY
    );
    let mut ping = Vec::new();
    PacketBuilder::ethernet2(HwAddr::local(1).0, b.mac.0)
        .ipv4(A.octets(), B.octets(), 64)
        .icmpv4_echo_request(0x77, 3)
        .write(&mut ping, b"etherparse ping")
        .unwrap();
    b.receive(&ping);
    let out = b.sent();
    let sliced = SlicedPacket::from_ethernet(&out[0]).unwrap();
    let Some(TransportSlice::Icmpv4(icmp)) = &sliced.transport else {
        panic!("ICMP expected");
    };
    assert_eq!(
        icmp.icmp_type(),
        Icmpv4Type::EchoReply(IcmpEchoHeader { id: 0x77, seq: 3 })
    );
    assert_eq!(icmp.payload(), b"etherparse ping");
    assert_eq!(
        icmp.checksum(),
        icmp.icmp_type().calc_checksum(icmp.payload())
    );
}
