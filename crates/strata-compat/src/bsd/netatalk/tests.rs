//! DDP and ATP between two native BSD hosts over an in-memory link that
//! carries real DDP datagrams: the wire bytes, hostile input, and ATP's
//! exactly-once transactions under loss, duplication and reordering.

use std::collections::HashMap;
use std::time::Duration;

use super::harness::{NET, atp_socket, native, run_transactions};
use super::{ATPROTO_ATP, ATPROTO_DDP};
use crate::atp_service::AtpService;
use crate::bsd::protosw::SockaddrAt;
use crate::testlink::{atp_request, mutate};

#[test]
fn atp_transactions_complete_exactly_once_without_loss() {
    run_transactions(native, native, 0, 1, 20);
}

#[test]
fn atp_transactions_complete_exactly_once_at_1_percent() {
    run_transactions(native, native, 1, 2, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_5_percent() {
    run_transactions(native, native, 5, 3, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_10_percent() {
    run_transactions(native, native, 10, 4, 40);
}

#[test]
fn a_request_that_is_never_answered_fails_after_its_retries() {
    let (mut a, mut b) = (native(1), native(2));
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
    let mut a = native(1);
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
    let mut b = native(2);
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
