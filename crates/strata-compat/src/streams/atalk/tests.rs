//! DDP and ATP between native STREAMS endpoints over an in-memory link
//! carrying real DDP datagrams: exactly-once under loss, duplication and
//! reordering; hostile input; water marks under a flood of requests.

use std::collections::HashMap;
use std::time::Duration;

use super::atp::Atp;
use super::ddp::Ddp;
use crate::appletalk::wire::atp::TRelTimeout;
use crate::appletalk::wire::ddp::{self, Header, Repr};
use crate::atp_service::{AtpService, RETRY_FOREVER};
use crate::streams::mblk::{DblkPool, Dblks, MsgType, mkmsg};
use crate::streams::tpi::{TAddr, Tpi};
use crate::streams::{Side, Stream};
use crate::testlink::{Link, atp_request, mutate};

const NET: u16 = 0xff00;

struct Endpoint {
    s: Stream,
    addr: TAddr,
}

fn open_atp(pool: &DblkPool, node: u8, port: u8) -> Endpoint {
    let mut s = Stream::open(pool.clone());
    s.push(Box::new(Ddp::new(TAddr::new(NET, node, 0))))
        .unwrap();
    s.push(Box::new(Atp::new())).unwrap();
    assert_eq!(s.modules(), vec!["atp", "ddp"]);
    s.putmsg(
        Some(&Tpi::BindReq {
            addr: TAddr::new(0, 0, port),
        }),
        None,
    )
    .unwrap();
    let ack = s.getmsg().unwrap().expect("an answer to the bind");
    let Some(Tpi::BindAck { addr }) = Tpi::of(&ack) else {
        panic!("T_BIND_ACK, got {:?}", Tpi::of(&ack))
    };
    Endpoint { s, addr }
}

/// Carry every datagram the endpoints' devices send to the endpoint it is
/// addressed to (the driver's demultiplexing), until the link is quiet.
fn exchange(eps: &mut [&mut Endpoint], link: &mut Link, pool: &DblkPool, seen: &mut Vec<Vec<u8>>) {
    loop {
        let mut frames = Vec::new();
        for ep in eps.iter_mut() {
            while let Some(mp) = ep.s.device_output() {
                let f = mp.to_vec();
                seen.push(f.clone());
                frames.extend(link.carry(f));
            }
        }
        frames.extend(link.flush());
        if frames.is_empty() {
            return;
        }
        for f in frames {
            let (node, port) = (f.get(8).copied(), f.get(10).copied());
            if let Some(ep) = eps
                .iter_mut()
                .find(|e| Some(e.addr.node) == node && Some(e.addr.socket) == port)
            {
                ep.s.device_input(mkmsg(pool, MsgType::Data, &f).unwrap());
            }
        }
    }
}

/// The next indication at the head: its source, record and data.
fn indication(ep: &mut Endpoint) -> Option<(TAddr, AtpService, Vec<u8>)> {
    let mp = ep.s.getmsg().unwrap()?;
    let Some(Tpi::UnitdataInd { src, opt }) = Tpi::of(&mp) else {
        panic!("T_UNITDATA_IND, got {:?}", Tpi::of(&mp))
    };
    let data = mp.cont().map(|d| d.to_vec()).unwrap_or_default();
    Some((src, AtpService::decode(&opt).expect("an ATP record"), data))
}

fn reply_for(req: &[u8]) -> Vec<u8> {
    (0..1200)
        .map(|i| req[i % req.len()].wrapping_add(i as u8))
        .collect()
}

fn run_transactions(percent: u32, seed: u64, n: usize) {
    let pool = Dblks::pool(100_000);
    let mut client = open_atp(&pool, 1, 0);
    let mut server = open_atp(&pool, 2, 200);
    let mut link = Link::new(seed, percent);
    let mut seen = Vec::new();
    let mut expected = HashMap::new();
    for i in 0..n {
        let data = format!("request {i}").into_bytes();
        let rec = AtpService::SendRequest {
            xo: Some(TRelTimeout::Sec30),
            bitmap: 0xff,
            retries: RETRY_FOREVER,
            interval: 5,
            user: (i as u32).to_be_bytes(),
        };
        client
            .s
            .putmsg(
                Some(&Tpi::UnitdataReq {
                    dest: server.addr,
                    opt: rec.encode().to_vec(),
                }),
                Some(&data),
            )
            .unwrap();
        expected.insert((i as u32).to_be_bytes(), reply_for(&data));
        exchange(&mut [&mut client, &mut server], &mut link, &pool, &mut seen);
    }
    let mut served: HashMap<(TAddr, u16), u32> = HashMap::new();
    let mut done = HashMap::new();
    let mut now = Duration::ZERO;
    while done.len() < n && now < Duration::from_secs(600) {
        while let Some((src, rec, data)) = indication(&mut server) {
            let AtpService::RequestInd { tid, .. } = rec else {
                panic!("a request, got {rec:?}")
            };
            *served.entry((src, tid)).or_default() += 1;
            let rsp = AtpService::SendResponse { tid, user: [0; 4] };
            server
                .s
                .putmsg(
                    Some(&Tpi::UnitdataReq {
                        dest: src,
                        opt: rsp.encode().to_vec(),
                    }),
                    Some(&reply_for(&data)),
                )
                .unwrap();
            exchange(&mut [&mut client, &mut server], &mut link, &pool, &mut seen);
        }
        while let Some((_, rec, data)) = indication(&mut client) {
            let AtpService::ResponseInd { user, segments, .. } = rec else {
                panic!("a response, got {rec:?}")
            };
            assert_eq!(segments, 3);
            assert_eq!(
                Some(&data),
                expected.get(&user),
                "the reply is the one for its request"
            );
            assert!(
                done.insert(user, ()).is_none(),
                "a transaction completes once"
            );
        }
        now += Duration::from_millis(100);
        client.s.advance_to(now);
        server.s.advance_to(now);
        exchange(&mut [&mut client, &mut server], &mut link, &pool, &mut seen);
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
        assert_eq!(r.ddp_type, 3);
    }
    if percent >= 5 {
        let atp: HashMap<_, _> = client.s.counters("atp").into_iter().collect();
        assert!(atp["retries"] > 0, "losses were recovered by retries");
    }
}

#[test]
fn atp_transactions_complete_exactly_once_without_loss() {
    run_transactions(0, 11, 20);
}

#[test]
fn atp_transactions_complete_exactly_once_at_1_percent() {
    run_transactions(1, 12, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_5_percent() {
    run_transactions(5, 13, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_10_percent() {
    run_transactions(10, 14, 40);
}

#[test]
fn errors_come_back_as_messages() {
    let pool = Dblks::pool(1000);
    let mut ep = open_atp(&pool, 1, 0);
    let rec = AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: 0,
        interval: 1,
        user: [0; 4],
    };
    let dest = TAddr::new(NET, 2, 9);
    ep.s.putmsg(
        Some(&Tpi::UnitdataReq {
            dest,
            opt: rec.encode().to_vec(),
        }),
        Some(&[0; 600]),
    )
    .unwrap();
    let mp = ep.s.getmsg().unwrap().unwrap();
    assert_eq!(
        Tpi::of(&mp),
        Some(Tpi::UderrorInd {
            dest,
            opt: rec.encode().to_vec(),
            error: crate::errno::Errno::Emsgsize.number()
        })
    );
    ep.s.putmsg(
        Some(&Tpi::BindReq {
            addr: TAddr::new(0, 0, 5),
        }),
        None,
    )
    .unwrap();
    let mp = ep.s.getmsg().unwrap().unwrap();
    assert!(
        matches!(Tpi::of(&mp), Some(Tpi::ErrorAck { .. })),
        "a second bind is refused"
    );
    // An unanswered request fails after its retries, as a message.
    ep.s.putmsg(
        Some(&Tpi::UnitdataReq {
            dest,
            opt: rec.encode().to_vec(),
        }),
        Some(b"x"),
    )
    .unwrap();
    ep.s.advance_to(Duration::from_secs(1));
    let (_, rec, _) = indication(&mut ep).unwrap();
    assert!(matches!(rec, AtpService::RequestFailed { .. }));
}

#[test]
fn hostile_datagrams_are_dropped_and_counted_never_trusted() {
    let pool = Dblks::pool(10_000);
    let mut ep = open_atp(&pool, 2, 200);
    let good = atp_request(NET, (2, 200), 1, &[]);
    for i in 0..5000u32 {
        let f = mutate(&good, i);
        ep.s.device_input(mkmsg(&pool, MsgType::Data, &f).unwrap());
        while ep.s.getmsg().unwrap().is_some() {}
    }
    let ddp: HashMap<_, _> = ep.s.counters("ddp").into_iter().collect();
    let drops: u64 = [
        "short",
        "malformed",
        "bad_checksum",
        "not_for_us",
        "flow_drops",
        "nobufs",
    ]
    .iter()
    .map(|k| ddp[k])
    .sum();
    assert_eq!(ddp["ipackets"] + ep.s.stats.device_in_drops, 5000);
    assert_eq!(ddp["delivered"] + drops, ddp["ipackets"]);
    assert!(ddp["bad_checksum"] > 0 && ddp["short"] > 0);
    assert_eq!(pool.stats().in_use, 0, "no block leaked");
}

#[test]
fn a_flood_of_requests_stays_within_the_water_marks() {
    let pool = Dblks::pool(100_000);
    let mut ep = open_atp(&pool, 2, 200);
    for i in 0..3000u16 {
        let f = atp_request(NET, (2, 200), i, &[7; 100]);
        ep.s.device_input(mkmsg(&pool, MsgType::Data, &f).unwrap());
    }
    // Nobody reads: every queue stays within its high water mark (plus
    // the one message that crossed it).
    let head = ep.s.head_queue();
    assert!(
        head.peak <= head.q_hiwat + 200,
        "head {} > {}",
        head.peak,
        head.q_hiwat
    );
    for m in ["atp", "ddp"] {
        let q = ep.s.queue_of(m, Side::Read).unwrap();
        assert!(q.peak <= q.q_hiwat + 200, "{m} {} > {}", q.peak, q.q_hiwat);
    }
    let atp: HashMap<_, _> = ep.s.counters("atp").into_iter().collect();
    let ddp: HashMap<_, _> = ep.s.counters("ddp").into_iter().collect();
    let dropped =
        atp["flow_drops"] + atp["table_full"] + ddp["flow_drops"] + ep.s.stats.device_in_drops;
    assert_eq!(
        atp["requests_in"] + dropped,
        3000,
        "the excess was dropped and counted"
    );
    let mut read = 0;
    while ep.s.getmsg().unwrap().is_some() {
        read += 1;
    }
    assert_eq!(
        read, atp["requests_in"],
        "everything accepted reaches the user"
    );
}
