//! AARP (Inside AppleTalk ch. 2) in Strata's native AppleTalk: two nodes
//! that know nothing of each other resolve each other's Ethernet addresses
//! through AARP before their ATP transactions run (no datagram sent to the
//! broadcast blind); a node probing for an address another node defends
//! takes another; requests and probes for our address are answered once the
//! address is ours; entries age out; hostile AARP frames are dropped and
//! counted by reason, each accounted for once.

mod appletalk_common;
mod mutate;

use std::time::Duration;

use appletalk_common::{NET, Requester, Responder, transactions};
use mutate::{Damage, apply, damage};
use proptest::prelude::*;
use strata::core::{CONSUMED, DELIVERED};
use strata::link::{LinkParams, SimNet};
use strata::proto::eth::snap;
use strata::{Arch, Engine, HostBuilder, HostParams, HwAddr, Instant, LinkId, Message};
use strata_compat::appletalk::aarp::wire::{Function, NodeAddr, PACKET_LEN, Repr};
use strata_compat::appletalk::aarp::{Aarp, PROBES};

const NET0: LinkId = LinkId(0);

/// Host `n` running `atp/ddp/eth` with AARP beside Ethernet below DDP,
/// probing first for node `node` (else `n`).
fn host(n: u8, node: Option<u8>, arch: Arch) -> Engine {
    let b = HostBuilder::spec(
        "atp/ddp/eth",
        HostParams::numbered(n),
        "net0",
        strata::link::SIM,
    )
    .arch(arch)
    .seed(u64::from(n));
    let mut g = b.graph().unwrap();
    let mut aarp = strata::core::graph::ProtocolConfig::new("aarp", &["eth"]);
    if let Some(node) = node {
        aarp.options.set("node", i64::from(node));
    }
    g.protocols.push(aarp);
    let ddp = g.protocols.iter_mut().find(|p| p.kind == "ddp").unwrap();
    ddp.below.push("aarp".into());
    HostBuilder::config(g, HostParams::numbered(n))
        .arch(arch)
        .seed(u64::from(n))
        .build()
        .unwrap()
}

fn aarp(e: &Engine) -> &Aarp {
    e.protocol::<Aarp>(e.proto_id("aarp").unwrap()).unwrap()
}

fn event(e: &Engine, proto: &str, name: &str) -> u64 {
    e.counters(e.proto_id(proto).unwrap()).events().get(name)
}

#[test]
fn two_nodes_resolve_each_other_through_aarp_and_run_their_transactions() {
    for arch in Arch::ALL {
        let mut net = SimNet::new(3);
        let a = net.add_host("a", host(1, None, arch));
        let b = net.add_host("b", host(2, None, arch));
        let params = LinkParams {
            delay: Duration::from_millis(5),
            ..LinkParams::default()
        };
        net.connect((a, "net0"), (b, "net0"), params.clone(), params)
            .unwrap();
        let (tx, rx) = transactions(&mut net, a, b, 20, 300);
        let done = net.run_until_condition(
            |n| n.engine(a).app::<Requester>(tx).unwrap().finished(),
            Duration::from_secs(60),
        );
        assert!(done, "{arch}: transactions finished");
        assert_eq!(net.engine(a).app::<Requester>(tx).unwrap().wrong, 0);
        let resp = net.engine(b).app::<Responder>(rx).unwrap();
        assert!(resp.deliveries.iter().all(|d| *d == 1), "{arch}");
        net.run_for(Duration::from_secs(3));
        // A asked, B answered; B learnt A from the request itself.
        let ea = net.engine(a);
        assert!(event(ea, "aarp", "requests") >= 1, "{arch}");
        assert_eq!(
            event(ea, "ddp", "sent-unmapped"),
            0,
            "{arch}: nothing sent blind"
        );
        let two = NodeAddr { net: NET, node: 2 };
        assert_eq!(aarp(ea).lookup(two), Some(HwAddr::local(2)), "{arch}");
        assert!(event(net.engine(b), "aarp", "responses") >= 1, "{arch}");
        for h in [a, b] {
            let e = net.engine(h);
            assert_eq!(event(e, "aarp", "probes"), u64::from(PROBES), "{arch}");
            assert_eq!(event(e, "aarp", "address-confirmed"), 1, "{arch}");
            assert!(aarp(e).address().1, "{arch}: address confirmed");
        }
    }
}

/// An AARP frame from `from` (MAC local(from)) to `to`.
fn frame(to: HwAddr, from: u8, packet: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&to.0);
    f.extend_from_slice(&HwAddr::local(u16::from(from)).0);
    f.extend_from_slice(&((packet.len() + snap::LEN) as u16).to_be_bytes());
    f.extend_from_slice(&snap::to_bytes(snap::AARP_TYPE).unwrap());
    f.extend_from_slice(packet);
    f
}

fn packet(function: Function, from: u8, src_node: u8, dst_node: u8) -> [u8; PACKET_LEN] {
    Repr {
        function,
        src_hw: HwAddr::local(u16::from(from)),
        src: NodeAddr {
            net: NET,
            node: src_node,
        },
        dst_hw: HwAddr::ZERO,
        dst: NodeAddr {
            net: NET,
            node: dst_node,
        },
    }
    .to_bytes()
}

/// The AARP packets `e` sent since last asked, parsed.
fn sent(e: &mut Engine) -> Vec<(HwAddr, Repr)> {
    let mut out = Vec::new();
    while let Some(f) = e.poll_transmit(NET0) {
        let f = f.to_vec();
        if f.len() >= 22 + PACKET_LEN && f[12] < 0x06 && f[20..22] == [0x80, 0xf3] {
            let mut to = [0u8; 6];
            to.copy_from_slice(&f[..6]);
            out.push((HwAddr(to), Repr::parse(&f[22..]).unwrap()));
        }
    }
    out
}

/// Starts `e`'s AARP (DDP asks it for the node when a socket opens).
fn start(e: &mut Engine) {
    let app = e.add_app(Box::new(appletalk_common::Responder {
        reply_len: 1,
        deliveries: Vec::new(),
        sessions: 0,
    }));
    let atp = e.proto_id("atp").unwrap();
    e.with_app(app, |_, cx| {
        cx.open_enable(
            atp,
            strata::Participants::local([strata::Addr::Port(10)]),
            strata::Qos::default(),
        )
    })
    .unwrap()
    .unwrap();
}

#[test]
fn a_node_probing_for_a_defended_address_takes_another_and_then_defends_its_own() {
    let mut e = host(2, Some(7), Arch::Llm);
    start(&mut e);
    e.run(Instant::ZERO);
    let probes = sent(&mut e);
    assert_eq!(probes.len(), 1, "the first probe: {probes:?}");
    let (to, p) = probes[0];
    assert_eq!(
        to,
        HwAddr([0x09, 0x00, 0x07, 0xff, 0xff, 0xff]),
        "to the AppleTalk broadcast"
    );
    assert_eq!(
        (p.function, p.src.node, p.dst.node),
        (Function::Probe, 7, 7)
    );
    // Node 9 already has address 7 and answers the probe.
    let mut defence = packet(Function::Response, 9, 7, 7);
    defence[18..24].copy_from_slice(&HwAddr::local(2).0);
    e.receive(NET0, Message::from(frame(HwAddr::local(2), 9, &defence)));
    e.run(Instant::ZERO);
    assert_eq!(event(&e, "aarp", "probe-conflicts"), 1);
    let (mine, confirmed) = aarp(&e).address();
    assert!(mine.node != 7 && !confirmed, "{mine:?}");
    // Ten quiet probes later the new address is ours.
    let mut now = Instant::ZERO;
    for _ in 0..12 {
        now += Duration::from_millis(200);
        e.run(now);
    }
    let probes: Vec<_> = sent(&mut e).into_iter().map(|(_, p)| p).collect();
    assert_eq!(probes.len(), PROBES as usize, "{probes:?}");
    assert!(
        probes
            .iter()
            .all(|p| p.function == Function::Probe && p.src == mine)
    );
    assert!(aarp(&e).address().1, "confirmed");
    // A probe and a request for it are answered, to the asker.
    for f in [Function::Probe, Function::Request] {
        let ask = packet(f, 5, 5, mine.node);
        e.receive(NET0, Message::from(frame(HwAddr::BROADCAST, 5, &ask)));
        e.run(now);
        let answers = sent(&mut e);
        assert_eq!(answers.len(), 1, "{f:?}: {answers:?}");
        let (to, r) = answers[0];
        assert_eq!(
            (to, r.function, r.src, r.dst_hw),
            (HwAddr::local(5), Function::Response, mine, HwAddr::local(5))
        );
    }
    // The request taught us node 5; ten seconds later it has aged out.
    let five = NodeAddr { net: NET, node: 5 };
    assert_eq!(aarp(&e).lookup(five), Some(HwAddr::local(5)));
    e.run(now + Duration::from_secs(11));
    assert_eq!(aarp(&e).lookup(five), None);
    assert_eq!(event(&e, "aarp", "aged-out"), 1);
}

#[test]
fn hostile_aarp_packets_are_dropped_by_reason() {
    let mut e = host(2, None, Arch::Llm);
    start(&mut e);
    e.run(Instant::ZERO);
    let good = packet(Function::Request, 5, 5, 2);
    let mut arp = good;
    arp[2..4].copy_from_slice(&[0x08, 0x00]);
    let mut function = good;
    function[7] = 7;
    let mut pad = good;
    pad[14] = 1;
    let mut group = good;
    group[8] = 0x09;
    let probe_elsewhere = packet(Function::Probe, 5, 9, 9);
    for p in [
        &good[..20],
        &arp[..],
        &function[..],
        &pad[..],
        &group[..],
        &probe_elsewhere[..],
    ] {
        e.receive(NET0, Message::from(frame(HwAddr::BROADCAST, 5, p)));
        e.run(Instant::ZERO);
    }
    let d = e.counters(e.proto_id("aarp").unwrap()).drops().clone();
    assert_eq!(d.get("truncated"), 1, "{d:?}");
    assert_eq!(d.get("not-ethertalk"), 1, "{d:?}");
    assert_eq!(d.get("bad-function"), 1, "{d:?}");
    assert_eq!(d.get("malformed"), 2, "{d:?}");
    assert_eq!(d.get("not-for-us"), 1, "{d:?}");
}

/// Delivered, dropped and consumed frames so far.
fn ledger(e: &Engine) -> u64 {
    let c = e.engine_counters();
    let mut n = c.dropped() + c.events().get(DELIVERED);
    for (_, p) in e.all_counters() {
        n += p.dropped() + p.events().get(CONSUMED);
    }
    n
}

fn hostile() -> impl Strategy<Value = (u8, u8, u8, u8, Vec<Damage>)> {
    (
        1u8..=3,
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        proptest::collection::vec(damage(PACKET_LEN, 8), 0..4),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn random_and_mutated_aarp_frames_never_panic_and_each_is_accounted_for_once(
        frames in proptest::collection::vec(hostile(), 1..30),
        arch in prop::sample::select(Arch::ALL.to_vec()),
    ) {
        let mut e = host(2, None, arch);
        start(&mut e);
        e.run(Instant::ZERO);
        let before = ledger(&e);
        let mut now = Instant::ZERO;
        for (function, from, src, dst, harm) in &frames {
            let f = match function {
                1 => Function::Request,
                2 => Function::Response,
                _ => Function::Probe,
            };
            let mut p = packet(f, 5, *src, *dst).to_vec();
            p[13] = *from;
            for x in harm {
                apply(&mut p, x);
            }
            e.receive(NET0, Message::from(frame(HwAddr::BROADCAST, 5, &p)));
            now += Duration::from_millis(50);
            e.run(now);
            while e.poll_transmit(NET0).is_some() {}
        }
        prop_assert_eq!(ledger(&e) - before, frames.len() as u64);
        prop_assert!(aarp(&e).entries() <= 256);
    }
}
