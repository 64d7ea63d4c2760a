//! DDP and ATP between two native BSD hosts over an in-memory link that
//! carries real DDP datagrams: the wire bytes, hostile input, and ATP's
//! exactly-once transactions under loss, duplication and reordering.

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
use crate::testlink::{Link, atp_request, mutate};

const NET: u16 = 0xff00;

fn host(node: u8) -> Bsd {
    let mut bsd = Bsd::new(NativeMbufs::pool(4096, 512));
    bsd.add_protocol(Box::new(Ddp::new()));
    bsd.add_protocol(Box::new(Atp::new()));
    bsd.if_attach(SockaddrAt::new(NET, node, 0), ATPROTO_DDP);
    bsd
}

/// Move every queued frame across the link, both ways.
fn exchange(a: &mut Bsd, b: &mut Bsd, link: &mut Link, seen: &mut Vec<Vec<u8>>) {
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

fn atp_socket(bsd: &mut Bsd, port: u8) -> (crate::bsd::SockId, SockaddrAt) {
    let so = bsd.socreate(ATPROTO_ATP).unwrap();
    let UsrreqOk::Addr(a) = bsd.sobind(so, SockaddrAt::new(0, 0, port)).unwrap() else {
        panic!("bind names the address")
    };
    (so, a)
}

fn reply_for(req: &[u8]) -> Vec<u8> {
    // Three responses' worth, derived from the request.
    (0..1200)
        .map(|i| req[i % req.len()].wrapping_add(i as u8))
        .collect()
}

fn run_transactions(percent: u32, seed: u64, n: usize) {
    let (mut a, mut b) = (host(1), host(2));
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

#[test]
fn atp_transactions_complete_exactly_once_without_loss() {
    run_transactions(0, 1, 20);
}

#[test]
fn atp_transactions_complete_exactly_once_at_1_percent() {
    run_transactions(1, 2, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_5_percent() {
    run_transactions(5, 3, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_10_percent() {
    run_transactions(10, 4, 40);
}

#[test]
fn a_request_that_is_never_answered_fails_after_its_retries() {
    let (mut a, mut b) = (host(1), host(2));
    let (client, _) = atp_socket(&mut a, 0);
    let rec = AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: 2,
        interval: 10,
        user: [9; 4],
    };
    a.sosend(
        client,
        b"anyone?",
        Some(SockaddrAt::new(NET, 2, 77)),
        Some(&rec.encode()),
    )
    .unwrap();
    let mut sent = 0;
    for t in 1..=40 {
        a.advance_to(Duration::from_millis(100 * t));
        while a.if_dequeue(0).is_some() {
            sent += 1;
        }
    }
    assert_eq!(sent, 3, "the request and two retries");
    let r = a.soreceive(client).unwrap().expect("a failure record");
    assert!(matches!(
        AtpService::decode(&r.control),
        Some(AtpService::RequestFailed {
            user: [9, 9, 9, 9],
            ..
        })
    ));
    b.netisr();
}

#[test]
fn errors_return_at_once_from_the_send() {
    let mut a = host(1);
    let (client, _) = atp_socket(&mut a, 0);
    let rec = AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: 0,
        interval: 1,
        user: [0; 4],
    };
    let big = vec![0u8; 600];
    assert_eq!(
        a.sosend(
            client,
            &big,
            Some(SockaddrAt::new(NET, 2, 1)),
            Some(&rec.encode())
        ),
        Err(crate::errno::Errno::Emsgsize)
    );
    assert_eq!(
        a.sosend(client, b"x", None, Some(&rec.encode())),
        Err(crate::errno::Errno::Enotconn)
    );
    let (_, _) = atp_socket(&mut a, 200);
    let so = a.socreate(ATPROTO_ATP).unwrap();
    assert_eq!(
        a.sobind(so, SockaddrAt::new(0, 0, 200)),
        Err(crate::errno::Errno::Eaddrinuse)
    );
}

#[test]
fn hostile_frames_are_dropped_and_counted_never_trusted() {
    let mut b = host(2);
    let (_server, _) = atp_socket(&mut b, 200);
    let good = atp_request(NET, (2, 200), 1, &[]);
    for i in 0..5000u32 {
        let f = mutate(&good, i);
        b.if_input(0, &f);
        b.netisr();
    }
    b.advance_to(Duration::from_secs(120));
    // Every frame was either delivered or dropped for a counted reason.
    let ddp: HashMap<_, _> = b.counters(ATPROTO_DDP).into_iter().collect();
    let drops: u64 = [
        "short",
        "malformed",
        "bad_checksum",
        "not_for_us",
        "no_socket",
        "sb_full",
        "nobufs",
    ]
    .iter()
    .map(|k| ddp[k])
    .sum();
    assert_eq!(ddp["ipackets"], 5000);
    assert_eq!(ddp["delivered"] + drops, 5000);
    assert!(ddp["bad_checksum"] > 0 && ddp["short"] > 0);
    let atp: HashMap<_, _> = b.counters(ATPROTO_ATP).into_iter().collect();
    assert_eq!(
        ddp["delivered"],
        atp["requests_in"]
            + atp["dup_requests"]
            + atp["malformed"]
            + atp["no_transaction"]
            + atp["table_full"]
            + atp["sb_full"]
            + atp["releases"]
    );
}
