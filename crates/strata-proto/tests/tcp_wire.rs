//! TCP headers and options against etherparse's `TcpHeader`: what we emit
//! parses there with the same fields, options and checksum, and what
//! etherparse builds parses here the same way; arbitrary bytes never make
//! our parser panic.

use std::net::Ipv4Addr;

use etherparse::{TcpHeader, TcpOptionElement};
use proptest::prelude::*;
use strata_proto::tcp::options::TcpOptions;
use strata_proto::tcp::seq::Seq;
use strata_proto::tcp::wire::{self, Flags, Header, Repr, SackBlocks, Timestamp};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn options() -> impl Strategy<Value = TcpOptions> {
    (
        proptest::option::of(any::<u16>()),
        proptest::option::of(0u8..=14),
        any::<bool>(),
        proptest::option::of((any::<u32>(), any::<u32>())),
        proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=3),
    )
        .prop_map(|(mss, window_scale, sack_permitted, ts, blocks)| {
            let mut sack = SackBlocks::default();
            for (l, r) in blocks {
                sack.push(Seq(l), Seq(r));
            }
            TcpOptions {
                mss,
                window_scale,
                sack_permitted,
                timestamp: ts.map(|(val, ecr)| Timestamp { val, ecr }),
                sack,
            }
        })
}

fn repr() -> impl Strategy<Value = Repr> {
    (
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        options(),
    )
        .prop_map(
            |(src_port, dst_port, seq, ack, flags, window, urgent, options)| Repr {
                src_port,
                dst_port,
                seq: Seq(seq),
                ack: Seq(ack),
                flags: Flags(flags),
                window,
                urgent,
                options,
            },
        )
}

/// Our options as etherparse reads them.
fn theirs(h: &TcpHeader) -> TcpOptions {
    let mut o = TcpOptions::default();
    for e in h.options_iterator() {
        match e.expect("etherparse reads every option we write") {
            TcpOptionElement::MaximumSegmentSize(m) => o.mss = Some(m),
            TcpOptionElement::WindowScale(w) => o.window_scale = Some(w),
            TcpOptionElement::SelectiveAcknowledgementPermitted => o.sack_permitted = true,
            TcpOptionElement::Timestamp(val, ecr) => o.timestamp = Some(Timestamp { val, ecr }),
            TcpOptionElement::SelectiveAcknowledgement(first, rest) => {
                o.sack.push(Seq(first.0), Seq(first.1));
                for (l, r) in rest.into_iter().flatten() {
                    o.sack.push(Seq(l), Seq(r));
                }
            }
            TcpOptionElement::Noop => {}
        }
    }
    o
}

fn elements(o: &TcpOptions) -> Vec<TcpOptionElement> {
    let mut e = Vec::new();
    if let Some(m) = o.mss {
        e.push(TcpOptionElement::MaximumSegmentSize(m));
    }
    if let Some(w) = o.window_scale {
        e.push(TcpOptionElement::WindowScale(w));
    }
    if o.sack_permitted {
        e.push(TcpOptionElement::SelectiveAcknowledgementPermitted);
    }
    if let Some(t) = o.timestamp {
        e.push(TcpOptionElement::Timestamp(t.val, t.ecr));
    }
    if let Some((first, rest)) = o.sack.as_slice().split_first() {
        let mut more = [None; 3];
        for (slot, (l, r)) in more.iter_mut().zip(rest) {
            *slot = Some((l.0, r.0));
        }
        e.push(TcpOptionElement::SelectiveAcknowledgement(
            (first.0.0, first.1.0),
            more,
        ));
    }
    e
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn what_we_write_etherparse_reads_with_the_same_fields_options_and_checksum(
        r in repr(),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let bytes = r.to_bytes(A, B, [&payload[..]]);
        let (h, rest) = TcpHeader::from_slice(&bytes).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!((h.source_port, h.destination_port), (r.src_port, r.dst_port));
        prop_assert_eq!((h.sequence_number, h.acknowledgment_number), (r.seq.0, r.ack.0));
        prop_assert_eq!((h.window_size, h.urgent_pointer), (r.window, r.urgent));
        let f = r.flags;
        prop_assert_eq!(
            (h.fin, h.syn, h.rst, h.psh, h.ack, h.urg),
            (f.has(Flags::FIN), f.has(Flags::SYN), f.has(Flags::RST), f.has(Flags::PSH), f.has(Flags::ACK), f.has(Flags::URG))
        );
        let mut expected = r.options;
        // Blocks beyond 40 option bytes are left out, the last first.
        let back = Repr::parse(&Header::new_checked(&bytes[..]).unwrap());
        expected.sack = back.options.sack;
        prop_assert_eq!(theirs(&h), expected);
        prop_assert_eq!(back, Repr { options: expected, ..r });
        prop_assert_eq!(h.calc_checksum_ipv4_raw(A.octets(), B.octets(), &payload).unwrap(), h.checksum);
        prop_assert!(wire::verifies(A, B, bytes.len() + payload.len(), [&bytes[..], &payload[..]]));
    }

    #[test]
    fn what_etherparse_builds_we_read_with_the_same_fields_and_options(r in repr()) {
        let mut h = TcpHeader::new(r.src_port, r.dst_port, r.seq.0, r.window);
        h.acknowledgment_number = r.ack.0;
        h.syn = true;
        h.ack = true;
        h.urgent_pointer = r.urgent;
        prop_assume!(h.set_options(&elements(&r.options)).is_ok());
        let ours = Repr::parse(&Header::new_checked(&h.to_bytes()[..]).unwrap());
        prop_assert_eq!(ours.options, r.options);
        prop_assert_eq!((ours.seq, ours.ack, ours.window), (r.seq, r.ack, r.window));
        prop_assert_eq!(ours.flags, Flags::SYN | Flags::ACK);
    }

    #[test]
    fn arbitrary_bytes_never_make_the_parser_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(h) = Header::new_checked(&bytes[..]) {
            let r = Repr::parse(&h);
            prop_assert!(h.header_len() >= 20 && h.header_len() <= bytes.len());
            prop_assert!(r.options.sack.as_slice().len() <= 4);
        }
        let _ = TcpOptions::parse(&bytes);
    }
}
