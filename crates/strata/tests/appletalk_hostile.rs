//! Hostile input into Strata's native DDP and ATP (`atp/ddp/eth`) and into
//! the DDPs and ATPs imported from BSD and STREAMS (`atp/ddp@bsd/eth`,
//! `atp@bsd/ddp/eth`, `atp@streams/ddp@bsd/eth`, …): random
//! datagrams and mutated ATP packets — bits flipped, bytes set, cut short,
//! lengthened, the DDP checksum made right again or not — in EtherTalk frames
//! to a host whose ATP responder listens. Nothing panics, every frame is
//! delivered, dropped with a reason or consumed exactly once, and the tables
//! stay bounded.

mod mutate;

use mutate::{Damage, apply, damage};
use proptest::prelude::*;
use strata::core::{CONSUMED, DELIVERED};
use strata::proto::eth::snap;
use strata::{Addr, Arch, Engine, HostBuilder, HostParams, HwAddr, Instant, LinkId, Message};
use strata::{Participants, Qos};
use strata_compat::appletalk::atp::Atp;
use strata_compat::appletalk::wire::{atp, ddp};
use strata_compat::bsd_in_strata::atp::BsdAtp;
use strata_compat::streams_in_strata::atp::StreamsAtp;

const NET0: LinkId = LinkId(0);
const NET: u16 = 0xff00;

/// Every graph under test.
const STACKS: [&str; 7] = [
    "atp/ddp/eth",
    "atp/ddp@bsd/eth",
    "atp/ddp@streams/eth",
    "atp@bsd/ddp/eth",
    "atp@streams/ddp/eth",
    "atp@bsd/ddp@streams/eth",
    "atp@streams/ddp@bsd/eth",
];

/// The kind of ATP in `stack`.
fn atp_kind(stack: &str) -> &str {
    stack.split('/').next().unwrap()
}

/// How many sessions the ATP of `e`, native or imported, has.
fn atp_sessions(e: &Engine, stack: &str) -> usize {
    let id = e.proto_id(atp_kind(stack)).unwrap();
    e.protocol::<Atp>(id)
        .map(Atp::session_count)
        .or_else(|| e.protocol::<BsdAtp>(id).map(BsdAtp::session_count))
        .or_else(|| e.protocol::<StreamsAtp>(id).map(StreamsAtp::session_count))
        .unwrap()
}

/// Host 2 running `stack` with an ATP responder (a discarding app) on
/// socket 10, at most 16 ATP sessions.
fn target(arch: Arch, stack: &str) -> Engine {
    let mut e = HostBuilder::spec(stack, HostParams::numbered(2), "net0", strata::link::SIM)
        .arch(arch)
        .option(atp_kind(stack), "max_sessions", 16)
        .build()
        .unwrap();
    let app = e.add_app(Box::new(Sink));
    let atp = e.proto_id(atp_kind(stack)).unwrap();
    e.with_app(app, |_, cx| {
        cx.open_enable(atp, Participants::local([Addr::Port(10)]), Qos::default())
    })
    .unwrap()
    .unwrap();
    e
}

struct Sink;

impl strata::App for Sink {
    fn receive(
        &mut self,
        _: Option<strata::SessionRef>,
        _: Message,
        _: &strata::PacketMeta,
        _: &mut strata::AppCx,
    ) {
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// An EtherTalk frame from node `from` (MAC local(from)) to host 2.
fn frame(from: u8, datagram: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&HwAddr::local(2).0);
    f.extend_from_slice(&HwAddr::local(u16::from(from)).0);
    f.extend_from_slice(&((datagram.len() + snap::LEN) as u16).to_be_bytes());
    f.extend_from_slice(&snap::to_bytes(snap::DDP_TYPE).unwrap());
    f.extend_from_slice(datagram);
    f
}

/// A DDP datagram from `from`'s socket 200 to host 2's socket 10 with a
/// right checksum.
fn datagram(from: u8, ddp_type: u8, data: &[u8]) -> Vec<u8> {
    let r = ddp::Repr::new(
        ddp::Addr::new(NET, from, 200),
        ddp::Addr::new(NET, 2, 10),
        ddp_type,
        data.len().min(ddp::MAX_DATA),
    )
    .unwrap();
    let data = &data[..r.data_len()];
    [&r.to_bytes_checksummed([data]).unwrap()[..], data].concat()
}

/// Recomputes a datagram's checksum when its header still says how long it is.
fn fix_checksum(d: &mut [u8]) {
    let Ok(h) = ddp::Header::new_checked(&d[..]) else {
        return;
    };
    let len = h.length().min(d.len());
    if len < ddp::HEADER_LEN {
        return;
    }
    let mut sum = ddp::Checksum::new();
    sum.add(&d[ddp::SUMMED_FROM..len]);
    d[2..4].copy_from_slice(&sum.finish().to_be_bytes());
}

/// One hostile frame.
#[derive(Clone, Debug)]
enum Hostile {
    /// Random bytes as a whole datagram, checksum made right or not.
    Random(Vec<u8>, bool),
    /// An ATP packet (control byte, bitmap, TID), from node `from`, damaged.
    Atp(u8, u8, u8, u16, Vec<Damage>, bool),
}

fn hostile() -> impl Strategy<Value = Hostile> {
    prop_oneof![
        1 => (proptest::collection::vec(any::<u8>(), 0..60), any::<bool>())
            .prop_map(|(b, fix)| Hostile::Random(b, fix)),
        3 => (1u8..40, any::<u8>(), any::<u8>(), 0u16..8,
              proptest::collection::vec(damage(30, 20), 0..3), any::<bool>())
            .prop_map(|(from, c, b, tid, d, fix)| Hostile::Atp(from, c, b, tid, d, fix)),
    ]
}

fn build(h: &Hostile) -> Vec<u8> {
    match h {
        Hostile::Random(bytes, fix) => {
            let mut d = bytes.clone();
            if *fix {
                fix_checksum(&mut d);
            }
            frame(1, &d)
        }
        Hostile::Atp(from, control, bitmap, tid, damage, fix) => {
            let mut packet = vec![*control, *bitmap];
            packet.extend_from_slice(&tid.to_be_bytes());
            packet.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, *from]);
            let mut d = datagram(*from, atp::DDP_TYPE, &packet);
            for x in damage {
                apply(&mut d, x);
            }
            if *fix {
                fix_checksum(&mut d);
            }
            frame(*from, &d)
        }
    }
}

/// Delivered, dropped and consumed frames so far.
fn ledger(e: &Engine) -> (u64, u64, u64) {
    let c = e.engine_counters();
    let mut dropped = c.dropped();
    let mut consumed = 0;
    for (_, p) in e.all_counters() {
        dropped += p.dropped();
        consumed += p.events().get(CONSUMED);
    }
    (c.events().get(DELIVERED), dropped, consumed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn hostile_frames_never_panic_and_each_is_accounted_for_once(
        frames in proptest::collection::vec(hostile(), 1..40),
        arch in prop::sample::select(Arch::ALL.to_vec()),
        stack in prop::sample::select(STACKS.to_vec()),
    ) {
        let mut e = target(arch, stack);
        let now = Instant::ZERO;
        for h in &frames {
            e.receive(NET0, Message::from(build(h)));
            e.run(now);
            while e.poll_transmit(NET0).is_some() {}
        }
        let (delivered, dropped, consumed) = ledger(&e);
        prop_assert_eq!(delivered + dropped + consumed, frames.len() as u64);
        prop_assert!(atp_sessions(&e, stack) <= 16);
    }
}

#[test]
fn bad_checksums_short_headers_and_strangers_are_dropped_by_reason() {
    for stack in STACKS {
        dropped_by_reason(stack);
    }
}

fn dropped_by_reason(stack: &str) {
    let mut e = target(Arch::Llm, stack);
    let treq = atp::Repr::request(1, 1, Some(atp::TRelTimeout::Sec30), [0; 4]).to_bytes();
    let mut bad = datagram(1, atp::DDP_TYPE, &treq);
    bad[20] ^= 0xff;
    let mut short = datagram(1, atp::DDP_TYPE, &treq);
    short.truncate(10);
    let mut elsewhere = datagram(1, atp::DDP_TYPE, &treq);
    elsewhere[8] = 99; // another node
    fix_checksum(&mut elsewhere);
    let no_function = datagram(1, atp::DDP_TYPE, &[0x00, 1, 0, 1, 0, 0, 0, 0]);
    let stray_response = datagram(
        1,
        atp::DDP_TYPE,
        &atp::Repr::response(5, 0, true, [0; 4]).to_bytes(),
    );
    for d in [bad, short, elsewhere, no_function, stray_response] {
        e.receive(NET0, Message::from(frame(1, &d)));
        e.run(Instant::ZERO);
    }
    let ddp_kind = stack.split('/').nth(1).unwrap();
    let (ddp, atp_id) = (
        e.proto_id(ddp_kind).unwrap(),
        e.proto_id(atp_kind(stack)).unwrap(),
    );
    let d = e.counters(ddp).drops().clone();
    let a = e.counters(atp_id).drops().clone();
    assert_eq!(d.get("bad-checksum"), 1, "{stack}: {d:?}");
    assert_eq!(d.get("truncated"), 1, "{stack}: {d:?}");
    assert_eq!(d.get("not-for-us"), 1, "{stack}: {d:?}");
    assert_eq!(a.get("malformed"), 1, "{stack}: {a:?}");
    // Native ATP has no session for it; an imported one no transaction.
    assert_eq!(
        a.get("no-session") + a.get("no-transaction"),
        1,
        "{stack}: a response to nobody: {a:?}"
    );
}
