//! A test harness for BSD hosts joined by an in-memory link carrying DDP
//! datagrams, and a run of ATP transactions between two of them that
//! checks exactly-once delivery and the bytes on the wire.

use std::collections::HashMap;
use std::time::Duration;

use super::atp::Atp;
use super::ddp::Ddp;
use super::{ATPROTO_ATP, ATPROTO_DDP};
use crate::appletalk::wire::atp::TRelTimeout;
use crate::appletalk::wire::ddp::{self, Header, Repr};
use crate::atp_service::{AtpService, RETRY_FOREVER};
use crate::bsd::mbuf::NativeMbufs;
use crate::bsd::protosw::{SockaddrAt, UsrreqOk};
use crate::bsd::system::Bsd;
use crate::testlink::Link;

/// The network the hosts are on.
pub const NET: u16 = 0xff00;

/// How to build a host: a BSD subsystem with DDP (or what stands for it)
/// and ATP in its switch and one interface.
pub type Recipe = fn(u8) -> Bsd;

/// The all-native BSD host.
pub fn native(node: u8) -> Bsd {
    let mut bsd = Bsd::new(NativeMbufs::pool(4096, 512));
    bsd.add_protocol(Box::new(Ddp::new()));
    bsd.add_protocol(Box::new(Atp::new()));
    bsd.if_attach(SockaddrAt::new(NET, node, 0), ATPROTO_DDP);
    bsd
}

/// Move every queued frame across the link, both ways, until quiet.
pub fn exchange(a: &mut Bsd, b: &mut Bsd, link: &mut Link, seen: &mut Vec<Vec<u8>>) {
    loop {
        let mut moved = pump(a, b, link, seen);
        moved |= pump(b, a, link, seen);
        if let Some(f) = link.flush() {
            // A held frame goes to whichever host it is addressed to.
            let node = f.get(8).copied().unwrap_or(0);
            if node == 2 {
                b.if_input(0, &f)
            } else {
                a.if_input(0, &f)
            }
            a.netisr();
            b.netisr();
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

fn pump(from: &mut Bsd, to: &mut Bsd, link: &mut Link, seen: &mut Vec<Vec<u8>>) -> bool {
    let mut moved = false;
    while let Some((_, frame)) = from.if_dequeue(0) {
        seen.push(frame.clone());
        for f in link.carry(frame) {
            to.if_input(0, &f);
        }
        to.netisr();
        moved = true;
    }
    moved
}

/// An ATP socket bound to `port` (0: any) and its address.
pub fn atp_socket(bsd: &mut Bsd, port: u8) -> (crate::bsd::SockId, SockaddrAt) {
    let so = bsd.socreate(ATPROTO_ATP).unwrap();
    let UsrreqOk::Addr(a) = bsd.sobind(so, SockaddrAt::new(0, 0, port)).unwrap() else {
        panic!("bind names the address")
    };
    (so, a)
}

/// The reply a server gives to a request: three responses' worth.
pub fn reply_for(req: &[u8]) -> Vec<u8> {
    // Three responses' worth, derived from the request.
    (0..1200)
        .map(|i| req[i % req.len()].wrapping_add(i as u8))
        .collect()
}

/// `n` exactly-once transactions from a client host to a server host over
/// a link losing, duplicating and reordering `percent`% of frames.
pub fn run_transactions(client: Recipe, server: Recipe, percent: u32, seed: u64, n: usize) {
    let (mut a, mut b) = (client(1), server(2));
    let mut link = Link::new(seed, percent);
    let (client, _) = atp_socket(&mut a, 0);
    let (server, server_addr) = atp_socket(&mut b, 200);
    let mut seen = Vec::new();
    let mut expected = HashMap::new();
    for i in 0..n {
        let data: Vec<u8> = format!("request {i}").into_bytes();
        let rec = AtpService::SendRequest {
            xo: Some(TRelTimeout::Sec30),
            bitmap: 0xff,
            retries: RETRY_FOREVER,
            interval: 5,
            user: (i as u32).to_be_bytes(),
        };
        a.sosend(client, &data, Some(server_addr), Some(&rec.encode()))
            .unwrap();
        expected.insert((i as u32).to_be_bytes(), reply_for(&data));
    }
    let mut served: HashMap<(SockaddrAt, u16), u32> = HashMap::new();
    let mut done = HashMap::new();
    let mut now = Duration::ZERO;
    while done.len() < n && now < Duration::from_secs(600) {
        exchange(&mut a, &mut b, &mut link, &mut seen);
        while let Some(r) = b.soreceive(server).unwrap() {
            let Some(AtpService::RequestInd { tid, .. }) = AtpService::decode(&r.control) else {
                panic!("a request record")
            };
            *served.entry((r.from, tid)).or_default() += 1;
            let rec = AtpService::SendResponse { tid, user: [0; 4] };
            b.sosend(
                server,
                &reply_for(&r.data),
                Some(r.from),
                Some(&rec.encode()),
            )
            .unwrap();
            exchange(&mut a, &mut b, &mut link, &mut seen);
        }
        exchange(&mut a, &mut b, &mut link, &mut seen);
        while let Some(r) = a.soreceive(client).unwrap() {
            let Some(AtpService::ResponseInd { user, segments, .. }) =
                AtpService::decode(&r.control)
            else {
                panic!("a response record")
            };
            assert_eq!(segments, 3);
            assert_eq!(
                Some(&r.data),
                expected.get(&user),
                "the reply is the one for its request"
            );
            assert!(
                done.insert(user, ()).is_none(),
                "a transaction completes once"
            );
        }
        now += Duration::from_millis(100);
        a.advance_to(now);
        b.advance_to(now);
    }
    assert_eq!(
        done.len(),
        n,
        "every transaction completed at {percent}% loss"
    );
    assert!(
        served.values().all(|&c| c == 1),
        "exactly once: the server's user saw each request once"
    );
    assert_eq!(served.len(), n);
    for f in &seen {
        let h = Header::new_checked(&f[..]).expect("a DDP header");
        let r = Repr::parse(&h).unwrap();
        assert_eq!(r.length, f.len());
        assert!(ddp::verify(&h, [&f[ddp::HEADER_LEN..]]), "checksum holds");
        assert_eq!(r.ddp_type, ATPROTO_ATP);
    }
    if percent >= 5 {
        assert!(link.lost > 0, "the link did lose frames");
        let atp: HashMap<_, _> = a.counters(ATPROTO_ATP).into_iter().collect();
        assert!(atp["retries"] > 0, "losses were recovered by retries");
    }
}
