//! DDP and ATP between native STREAMS endpoints over an in-memory link
//! carrying real DDP datagrams: exactly-once under loss, duplication and
//! reordering; hostile input; water marks under a flood of requests.

use std::collections::HashMap;
use std::time::Duration;

use super::harness::{NET, indication, native, open, run_transactions};
use crate::atp_service::AtpService;
use crate::streams::Side;
use crate::streams::mblk::{Dblks, MsgType, mkmsg};
use crate::streams::tpi::{TAddr, Tpi};
use crate::testlink::{atp_request, mutate};

#[test]
fn atp_transactions_complete_exactly_once_without_loss() {
    run_transactions(native, native, 0, 11, 20);
}

#[test]
fn atp_transactions_complete_exactly_once_at_1_percent() {
    run_transactions(native, native, 1, 12, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_5_percent() {
    run_transactions(native, native, 5, 13, 40);
}

#[test]
fn atp_transactions_complete_exactly_once_at_10_percent() {
    run_transactions(native, native, 10, 14, 40);
}

#[test]
fn errors_come_back_as_messages() {
    let pool = Dblks::pool(1000);
    let mut ep = open(native, &pool, 1, 0);
    let rec = AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: 0,
        interval: 1,
        user: [0; 4],
    };
    let dest = TAddr::new(NET, 2, 9);
    ep.send(dest, rec, &[0; 600]).unwrap();
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
    ep.send(dest, rec, b"x").unwrap();
    ep.s.advance_to(Duration::from_secs(1));
    let (_, rec, _) = indication(&mut ep).unwrap();
    assert!(matches!(rec, AtpService::RequestFailed { .. }));
}

#[test]
fn hostile_datagrams_are_dropped_and_counted_never_trusted() {
    let pool = Dblks::pool(10_000);
    let mut ep = open(native, &pool, 2, 200);
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
    let mut ep = open(native, &pool, 2, 200);
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
