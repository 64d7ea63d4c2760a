//! Hostile input into smoltcp's TCP imported into Strata (`smoltcp-tcp`):
//! random segments, and segments of a live connection damaged — bits flipped,
//! bytes set, cut short, lengthened, their checksum made right again or not —
//! each in a well-formed IPv4 datagram so that it reaches the module. Nothing
//! panics, every frame is delivered, dropped with a reason or consumed
//! exactly once, the module's table stays bounded, and what smoltcp would
//! throw away without a word is counted by the module, by reason.

mod mutate;
mod tcp_common;

use std::net::Ipv4Addr;
use std::time::Duration;

use mutate::{Damage, apply, damage};
use proptest::prelude::*;
use strata::core::{CONSUMED, DELIVERED, checksum};
use strata::proto::eth::wire::{Repr as EthRepr, ethertype};
use strata::proto::ipv4::wire::Repr as IpRepr;
use strata::proto::tcp;
use strata::{
    Addr, Arch, Control, Engine, HostBuilder, HostParams, HwAddr, Instant, LinkId, Message,
    Participants, ProtoId, Qos,
};
use strata_compat::smoltcp::SmolTcp;
use tcp_common::{Peer, control, ip};

const PORT: u16 = 80;
const SPEC: &str = "smoltcp-tcp/ip/eth";

/// Host 2 under test and host 1, its peer (Strata's own TCP), joined by
/// hand so that every frame can be recorded and damaged.
struct Pair {
    a: Engine,
    b: Engine,
    now: Instant,
    /// The TCP frames host 1 sent to host 2 while the connection was opened
    /// and carried data: the templates of the damaged segments.
    templates: Vec<Vec<u8>>,
}

fn engine(n: u8, spec: &str, arch: Arch) -> Engine {
    HostBuilder::spec(spec, HostParams::numbered(n), "net0", strata::link::SIM)
        .arch(arch)
        // Replies to strangers wait for ARP; none may be dropped for room
        // while the clock stands still (the ledger below counts frames).
        .option("arp", "pending", 100_000)
        .option("smoltcp-tcp", "backlog", 8)
        .build()
        .unwrap()
}

const NET0: LinkId = LinkId(0);

impl Pair {
    /// Host 2 listening on port 80, host 1 connected to it and 3000 bytes
    /// sent.
    fn new(arch: Arch) -> Pair {
        let mut p = Pair {
            a: engine(1, "tcp/ip/eth", Arch::Llm),
            b: engine(2, SPEC, arch),
            now: Instant::ZERO,
            templates: Vec::new(),
        };
        let smol = p.b.proto_id("smoltcp-tcp").unwrap();
        let server = p.b.add_app(Box::new(Peer::default()));
        p.b.with_app(server, |_, cx| {
            cx.open_enable(
                smol,
                Participants::local([Addr::Port(PORT)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
        let tcp = p.a.proto_id("tcp").unwrap();
        let client = p.a.add_app(Box::new(Peer::default()));
        let s =
            p.a.with_app(client, |_, cx| {
                let parts = Participants::remote([Addr::Ip(ip(2)), Addr::Port(PORT)])
                    .with_local([Addr::Port(0)]);
                cx.open(tcp, parts, Qos::default())
            })
            .unwrap()
            .unwrap();
        p.settle();
        let data = Message::from_slice(&[0x5a; 3000]);
        control(&mut p.a, client, s, tcp::Write(data)).unwrap();
        p.settle();
        assert!(p.templates.len() >= 4, "SYN, ACK and data segments");
        p
    }

    /// Carries frames both ways until both hosts are quiet.
    fn settle(&mut self) {
        for _ in 0..64 {
            self.a.run(self.now);
            let to_b: Vec<Message> = std::iter::from_fn(|| self.a.poll_transmit(NET0)).collect();
            for f in &to_b {
                let bytes = f.to_vec();
                // TCP in IPv4 in Ethernet II: the ARP exchange is not a template.
                if bytes.len() >= 54 && bytes[12..14] == [0x08, 0x00] && bytes[23] == 6 {
                    self.templates.push(bytes);
                }
                self.b.receive(NET0, f.clone());
            }
            self.b.run(self.now);
            let to_a: Vec<Message> = std::iter::from_fn(|| self.b.poll_transmit(NET0)).collect();
            for f in to_a.iter() {
                self.a.receive(NET0, f.clone());
            }
            if to_b.is_empty() && to_a.is_empty() {
                return;
            }
        }
        panic!("the hosts never went quiet");
    }

    /// Hands host 2 a frame and runs it; what it answers is thrown away.
    fn feed(&mut self, frame: &[u8]) {
        self.b.receive(NET0, Message::from(frame.to_vec()));
        self.b.run(self.now);
        while self.b.poll_transmit(NET0).is_some() {}
    }

    fn smol(&self) -> ProtoId {
        self.b.proto_id("smoltcp-tcp").unwrap()
    }

    fn drops(&self, reason: &str) -> u64 {
        self.b.counters(self.smol()).drops().get(reason)
    }

    fn connections(&self) -> usize {
        self.b
            .protocol::<SmolTcp>(self.smol())
            .unwrap()
            .connection_count()
    }

    /// Delivered, dropped and consumed frames so far at host 2, less the
    /// deliveries no frame made (data that came with a handshake's last
    /// segment goes up after the event announcing the session: the frame
    /// was counted consumed).
    fn ledger(&self) -> (u64, u64, u64) {
        let e = self.b.engine_counters();
        let mut dropped = e.dropped();
        let mut consumed = 0;
        for (_, c) in self.b.all_counters() {
            dropped += c.dropped();
            consumed += c.events().get(CONSUMED);
        }
        let extra = self
            .b
            .counters(self.smol())
            .events()
            .get("delivered-after-open");
        (e.events().get(DELIVERED) - extra, dropped, consumed)
    }
}

/// Ethernet and IPv4 around `segment`, from `src` (host 1's MAC) to host 2.
fn frame(src: Ipv4Addr, segment: &[u8]) -> Vec<u8> {
    let ip = IpRepr {
        src,
        dst: ip(2),
        protocol: 6,
        ttl: 64,
        tos: 0,
        ident: 7,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        payload_len: segment.len(),
    };
    let eth = EthRepr {
        dst: HwAddr::local(2),
        src: HwAddr::local(1),
        ethertype: ethertype::IPV4,
    };
    [&eth.to_bytes()[..], &ip.to_bytes()[..], segment].concat()
}

/// The TCP segment of a template frame (Ethernet and a 20-byte IPv4 header
/// in front).
fn segment_of(frame: &[u8]) -> Vec<u8> {
    frame[34..].to_vec()
}

/// Makes a segment's checksum right for `src` → host 2.
fn fix_checksum(src: Ipv4Addr, segment: &mut [u8]) {
    if segment.len() < 18 {
        return;
    }
    segment[16..18].fill(0);
    let c = checksum::transport(src, ip(2), 6, segment.len(), [&*segment]).finish();
    segment[16..18].copy_from_slice(&c.to_be_bytes());
}

/// Ways to damage a segment.
/// One hostile frame, described.
#[derive(Clone, Debug)]
enum Hostile {
    /// Template `i` (of those recorded), its sequence number moved `ahead`
    /// segments of its length on (new data, in order or not), damaged,
    /// checksum made right or not.
    Damaged(usize, u8, Vec<Damage>, bool),
    /// Random bytes as a segment, checksum made right or not.
    Random(Vec<u8>, bool),
    /// A SYN from a stranger (`peer`, `port`) to port 80 or another one.
    Syn(u8, u16, bool),
}

fn hostile() -> impl Strategy<Value = Hostile> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..4, proptest::collection::vec(damage(60, 40), 0..3), any::<bool>())
            .prop_map(|(i, ahead, d, fix)| Hostile::Damaged(i, ahead, d, fix)),
        1 => (proptest::collection::vec(any::<u8>(), 0..80), any::<bool>())
            .prop_map(|(b, fix)| Hostile::Random(b, fix)),
        1 => (any::<u8>(), any::<u16>(), any::<bool>()).prop_map(|(p, port, open)| Hostile::Syn(p, port, open)),
    ]
}

/// The frame `h` describes, against templates `t`.
fn build(h: &Hostile, t: &[Vec<u8>]) -> Vec<u8> {
    let one = ip(1);
    match h {
        Hostile::Damaged(i, ahead, damage, fix) => {
            let mut s = segment_of(&t[i % t.len()]);
            let data = s.len().saturating_sub(usize::from(s[12] >> 4) * 4) as u32;
            let seq = u32::from_be_bytes([s[4], s[5], s[6], s[7]]);
            let moved = seq.wrapping_add(u32::from(*ahead) * data);
            s[4..8].copy_from_slice(&moved.to_be_bytes());
            fix_checksum(one, &mut s);
            for d in damage {
                apply(&mut s, d);
            }
            if *fix {
                fix_checksum(one, &mut s);
            }
            frame(one, &s)
        }
        Hostile::Random(bytes, fix) => {
            let mut s = bytes.clone();
            if *fix {
                fix_checksum(one, &mut s);
            }
            frame(one, &s)
        }
        Hostile::Syn(peer, port, open) => {
            let src = Ipv4Addr::new(198, 18, 0, peer % 200 + 10);
            let r = tcp::wire::Repr {
                src_port: port | 1,
                dst_port: if *open { PORT } else { PORT + 1 },
                seq: tcp::seq::Seq(u32::from(*port) << 8),
                flags: tcp::wire::Flags::SYN,
                window: 1000,
                ..tcp::wire::Repr::default()
            };
            frame(src, &r.to_bytes(src, ip(2), [&[][..]]))
        }
    }
}

fn check(arch: Arch, input: &[Hostile]) -> Result<(), TestCaseError> {
    let mut p = Pair::new(arch);
    let frames: Vec<Vec<u8>> = input.iter().map(|h| build(h, &p.templates)).collect();
    let base = p.ledger();
    for f in &frames {
        p.feed(f);
        prop_assert!(
            p.connections() <= 1 + 8,
            "the backlog bounds half-open connections"
        );
    }
    let now = p.ledger();
    let (delivered, dropped, consumed) = (now.0 - base.0, now.1 - base.1, now.2 - base.2);
    prop_assert_eq!(
        delivered + dropped + consumed,
        frames.len() as u64,
        "{}: delivered {} + dropped {} + consumed {}",
        arch,
        delivered,
        dropped,
        consumed
    );
    // Half-open connections give up within smoltcp's timeouts; the one
    // connection the peer opened may idle on (TCP keeps an idle connection
    // as long as it likes), and nothing else is kept.
    p.now += Duration::from_secs(600);
    p.b.run(p.now);
    while p.b.poll_transmit(NET0).is_some() {}
    p.now += Duration::from_secs(600);
    p.b.run(p.now);
    prop_assert!(p.connections() <= 1, "{} connections left", p.connections());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn hostile_segments_never_panic_and_every_frame_is_accounted_for_under_llm(
        input in proptest::collection::vec(hostile(), 1..32)
    ) {
        check(Arch::Llm, &input)?;
    }

    #[test]
    fn hostile_segments_never_panic_and_every_frame_is_accounted_for_under_illm(
        input in proptest::collection::vec(hostile(), 1..32)
    ) {
        check(Arch::Illm, &input)?;
    }
}

#[test]
fn what_smoltcp_would_drop_silently_is_counted_by_reason() {
    let mut p = Pair::new(Arch::Llm);
    let one = ip(1);
    let data = p
        .templates
        .iter()
        .find(|f| f.len() > 100)
        .cloned()
        .expect("a data segment");
    let mut bad_sum = segment_of(&data);
    bad_sum[40] ^= 1;
    p.feed(&frame(one, &bad_sum));
    assert_eq!(p.drops("bad-checksum"), 1);

    let mut short_offset = segment_of(&data);
    short_offset[12] = 4 << 4;
    fix_checksum(one, &mut short_offset);
    p.feed(&frame(one, &short_offset));
    assert_eq!(p.drops("malformed"), 1, "a data offset below 5 words");

    let mut port_zero = segment_of(&data);
    port_zero[0..2].fill(0);
    fix_checksum(one, &mut port_zero);
    p.feed(&frame(one, &port_zero));
    assert_eq!(p.drops("malformed"), 2, "smoltcp's parser refuses port 0");

    let mut bad_option = segment_of(&data);
    // The first option (a NOP of the timestamp's padding) becomes an option
    // of kind 2 (MSS) and length 1: smoltcp's parser refuses it.
    bad_option[20] = 2;
    bad_option[21] = 1;
    fix_checksum(one, &mut bad_option);
    p.feed(&frame(one, &bad_option));
    assert_eq!(
        p.drops("malformed"),
        3,
        "an option shorter than its own header"
    );

    let closed = build(&Hostile::Syn(7, 4000, false), &p.templates);
    p.feed(&closed);
    assert_eq!(
        p.drops("no-session"),
        1,
        "a SYN to a closed port, reset by smoltcp"
    );

    let smol = p.smol();
    p.b.control(
        smol,
        None,
        Control::Private(Box::new(tcp::SetBacklog {
            port: PORT,
            backlog: 1,
        })),
    )
    .unwrap();
    for i in 0..3u8 {
        p.feed(&build(
            &Hostile::Syn(i, 4000 + u16::from(i), true),
            &p.templates,
        ));
    }
    assert_eq!(p.drops("backlog-full"), 2, "one SYN-RECEIVED at a time");
    assert_eq!(
        p.b.counters(smol).events().get("passive-open"),
        2,
        "the setup's and one more"
    );
}

#[test]
fn the_generator_makes_new_data_smoltcp_takes_and_delivers() {
    // Guards the property above against testing only what smoltcp drops:
    // the last data segment moved on by its own length is the next one in
    // order, and its data goes up.
    let mut p = Pair::new(Arch::Llm);
    let last = p
        .templates
        .iter()
        .rposition(|f| f.len() > 34 + usize::from(f[34 + 12] >> 4) * 4)
        .expect("a data segment");
    let before = p.ledger();
    let next = build(&Hostile::Damaged(last, 1, vec![], false), &p.templates);
    p.feed(&next);
    let after = p.ledger();
    assert_eq!(after.0 - before.0, 1, "delivered");
    assert_eq!((after.1, after.2), (before.1, before.2));
}
