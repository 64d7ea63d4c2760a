//! BSD-native DDP and ATP — the very files the native BSD subsystem runs —
//! inside STREAMS, interoperating with the STREAMS-native modules over a
//! lossy link; mbufs in mblks without copying; flush, timers and errors
//! across the module boundary.

use std::collections::HashMap;
use std::time::Duration;

use super::bsd_in_streams::BsdModule;
use super::mbuf_mblk::{MblkMbufs, into_mblk, into_mbuf, to_mblk, to_mbuf};
use crate::atp_service::AtpService;
use crate::bsd::SockaddrAt;
use crate::bsd::mbuf::{MbufType, m_get, m_getcl};
use crate::bsd::netatalk::{atp as bsd_atp, ddp as bsd_ddp};
use crate::streams::Stream;
use crate::streams::atalk::harness::{NET, indication, native, open, run_transactions};
use crate::streams::atalk::{atp as str_atp, ddp as str_ddp};
use crate::streams::mblk::{DblkPool, Dblks, FLUSHRW, MsgType, mkmsg};
use crate::streams::tpi::{TAddr, Tpi};

/// ATP imported from BSD over STREAMS-native DDP.
fn atp_imported(pool: &DblkPool, node: u8) -> Stream {
    let mut s = Stream::open(pool.clone());
    s.push(Box::new(str_ddp::Ddp::new(TAddr::new(NET, node, 0))))
        .unwrap();
    s.push(Box::new(BsdModule::new(bsd_atp::Atp::new(), "atp@bsd")))
        .unwrap();
    s
}

/// STREAMS-native ATP over DDP imported from BSD (the paper's Import2).
fn ddp_imported(pool: &DblkPool, node: u8) -> Stream {
    let mut s = Stream::open(pool.clone());
    s.push(Box::new(
        BsdModule::new(bsd_ddp::Ddp::new(), "ddp@bsd")
            .with_interface(SockaddrAt::new(NET, node, 0)),
    ))
    .unwrap();
    s.push(Box::new(str_atp::Atp::new())).unwrap();
    s
}

/// Both imported, each in its own encapsulation module.
fn both_imported(pool: &DblkPool, node: u8) -> Stream {
    let mut s = Stream::open(pool.clone());
    s.push(Box::new(
        BsdModule::new(bsd_ddp::Ddp::new(), "ddp@bsd")
            .with_interface(SockaddrAt::new(NET, node, 0)),
    ))
    .unwrap();
    s.push(Box::new(BsdModule::new(bsd_atp::Atp::new(), "atp@bsd")))
        .unwrap();
    s
}

#[test]
fn imported_atp_interoperates_with_native_streams_atp() {
    run_transactions(atp_imported, native, 0, 21, 20);
    run_transactions(native, atp_imported, 0, 22, 20);
}

#[test]
fn imported_atp_is_exactly_once_at_10_percent_loss() {
    run_transactions(atp_imported, native, 10, 23, 30);
    run_transactions(native, atp_imported, 10, 24, 30);
}

#[test]
fn native_atp_over_imported_ddp_interoperates() {
    run_transactions(ddp_imported, native, 5, 25, 30);
    run_transactions(native, ddp_imported, 5, 26, 30);
}

#[test]
fn both_imported_interoperate_with_all_native() {
    run_transactions(both_imported, native, 10, 27, 30);
    run_transactions(native, both_imported, 10, 28, 30);
    run_transactions(both_imported, both_imported, 1, 29, 20);
}

#[test]
fn mbufs_and_mblks_convert_without_copying() {
    let dblks = Dblks::pool(100);
    let mbufs = MblkMbufs::pool(&dblks);
    let mut m = m_getcl(&mbufs, MbufType::Data, true).unwrap();
    m.m_append(&[5; 1000]).unwrap();
    assert_eq!(
        dblks.stats().in_use,
        1,
        "an encapsulated mbuf is a data block of the host"
    );
    let mp = to_mblk(&dblks, &m, MsgType::Data).unwrap();
    assert!(
        mp.storage().0.same(m.block()),
        "mbuf to mblk: pointers only"
    );
    let back = to_mbuf(&mbufs, &mp).unwrap();
    assert!(back.block().same(m.block()), "mblk to mbuf: pointers only");
    assert_eq!(back.to_vec(), vec![5; 1000]);
    drop((m, mp, back));
    assert_eq!(dblks.stats().in_use, 0);
    assert_eq!(mbufs.stats().clusters_in_use, 0);
}

#[test]
fn handing_buffers_over_moves_their_count_and_copies_nothing() {
    let dblks = Dblks::pool(3);
    let other = Dblks::pool(10);
    let mbufs = MblkMbufs::pool(&dblks);
    // A received message of two blocks, one of another pool.
    let mut mp = mkmsg(&dblks, MsgType::Data, &[1; 40]).unwrap();
    mp.linkb(mkmsg(&other, MsgType::Data, &[2; 3000]).unwrap());
    let (first, second) = (
        mp.storage().0.clone(),
        mp.cont().unwrap().storage().0.clone(),
    );
    assert_eq!(dblks.stats().in_use, 1);
    let m = into_mbuf(&mbufs, &dblks, mp).unwrap();
    assert!(m.block().same(&first) && m.next().unwrap().block().same(&second));
    assert_eq!(m.to_vec().len(), 3040);
    assert_eq!(other.stats().in_use, 0, "the foreign block was freed");
    assert_eq!(dblks.stats().in_use, 2, "one moved, one charged");
    let s = mbufs.stats();
    assert_eq!((s.small_in_use, s.clusters_in_use), (1, 1));
    // And back: every mbuf is ours, so counts move and nothing is refused
    // even with the pool full.
    let spare = m_get(&mbufs, MbufType::Data).unwrap();
    assert!(m_get(&mbufs, MbufType::Data).is_err(), "the pool is full");
    let back = into_mblk(&mbufs, &dblks, m, MsgType::Data).unwrap();
    assert!(back.storage().0.same(&first));
    assert_eq!(back.to_vec()[..40], [1; 40]);
    assert_eq!(dblks.stats().in_use, 3);
    assert_eq!(mbufs.stats().small_in_use, 1, "only the spare is an mbuf");
    drop((back, spare));
    assert_eq!(dblks.stats().in_use, 0);
}

#[test]
fn m_flush_is_answered_by_the_encapsulated_protocol() {
    let pool = Dblks::pool(10_000);
    let mut ep = open(atp_imported, &pool, 1, 0);
    ep.s.flush(FLUSHRW).unwrap();
    assert_eq!(
        ep.s.stats.head_flushes, 1,
        "the flush went down and came back up"
    );
    let c: HashMap<_, _> = ep.s.counters("atp@bsd").into_iter().collect();
    assert_eq!(c["flushes"], 2, "the module answered it both ways");
}

#[test]
fn bsd_timeouts_run_from_the_hosts_timers() {
    let pool = Dblks::pool(10_000);
    let mut ep = open(atp_imported, &pool, 1, 0);
    let rec = AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: 2,
        interval: 10,
        user: [3; 4],
    };
    let dest = TAddr::new(NET, 9, 9);
    ep.send(dest, rec, b"hello").unwrap();
    let mut sent = 0;
    for t in 1..=40 {
        ep.s.advance_to(Duration::from_millis(100 * t));
        while ep.s.device_output().is_some() {
            sent += 1;
        }
    }
    assert_eq!(sent, 3, "the request and two retries, paced by pr_slowtimo");
    let (_, rec, _) = indication(&mut ep).expect("the failure comes up");
    assert!(matches!(
        rec,
        AtpService::RequestFailed {
            user: [3, 3, 3, 3],
            ..
        }
    ));
}

#[test]
fn a_send_error_of_the_bsd_protocol_comes_back_as_a_message() {
    let pool = Dblks::pool(10_000);
    let mut ep = open(atp_imported, &pool, 1, 0);
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
    let err = crate::errno::Errno::Emsgsize.number();
    assert_eq!(
        Tpi::of(&mp),
        Some(Tpi::UderrorInd {
            dest,
            opt: rec.encode().to_vec(),
            error: err
        })
    );
    // Hostile input into the imported DDP: dropped and counted, no panic.
    let mut ep = open(ddp_imported, &pool, 2, 200);
    let good = crate::testlink::atp_request(NET, (2, 200), 1, &[]);
    for i in 0..2000 {
        ep.s.device_input(mkmsg(&pool, MsgType::Data, &crate::testlink::mutate(&good, i)).unwrap());
        while ep.s.getmsg().unwrap().is_some() {}
    }
    let c: HashMap<_, _> = ep.s.counters("ddp@bsd").into_iter().collect();
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
    .map(|k| c[k])
    .sum();
    assert_eq!(c["delivered"] + drops, c["ipackets"]);
    assert!(c["bad_checksum"] > 0);
}

/// A BSD host whose ATP (BSD-native, in its native subsystem) runs over
/// STREAMS-native DDP through the subsystem adapter.
fn adapted(node: u8) -> crate::bsd::Bsd {
    use crate::bsd::netatalk::ATPROTO_DDP;
    let mut bsd = crate::bsd::Bsd::new(crate::bsd::NativeMbufs::pool(4096, 512));
    bsd.add_protocol(Box::new(super::adapter::StreamsDdpAdapter::new(
        Dblks::pool(10_000),
    )));
    bsd.add_protocol(Box::new(bsd_atp::Atp::new()));
    bsd.if_attach(SockaddrAt::new(NET, node, 0), ATPROTO_DDP);
    bsd
}

#[test]
fn the_subsystem_adapter_joins_bsd_atp_to_streams_ddp() {
    use crate::bsd::netatalk::harness::{native as bsd_native, run_transactions as bsd_run};
    bsd_run(adapted, bsd_native, 0, 31, 20);
    bsd_run(bsd_native, adapted, 10, 32, 30);
    bsd_run(adapted, adapted, 5, 33, 30);
}

#[test]
fn the_adapter_crosses_into_the_stream_and_back() {
    use crate::bsd::netatalk::harness::atp_socket;
    use crate::bsd::netatalk::{ATPROTO_ATP, ATPROTO_DDP};
    let mut a = adapted(1);
    let (so, me) = atp_socket(&mut a, 0);
    assert_eq!(
        me.port,
        crate::streams::atalk::ddp::DDP_DYNAMIC_FIRST,
        "bound by the STREAMS DDP"
    );
    let rec = AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: 0,
        interval: 1,
        user: [0; 4],
    };
    a.sosend(
        so,
        b"hi",
        Some(SockaddrAt::new(NET, 2, 200)),
        Some(&rec.encode()),
    )
    .unwrap();
    let (_, frame) = a.if_dequeue(0).expect("the datagram reached the interface");
    let c: HashMap<_, _> = a.counters(ATPROTO_DDP).into_iter().collect();
    assert_eq!(
        (c["down"], c["opackets"]),
        (1, 1),
        "through the STREAMS DDP module"
    );
    assert!(a.counters(ATPROTO_ATP).contains(&("requests", 1)));
    assert_eq!(frame.len(), 13 + 8 + 2);
}

/// A module above the imported protocol that sends one control message
/// down when it is pushed (as a terminal module sends `M_STOP`).
struct Control(Option<MsgType>);

impl<K: crate::streams::StreamsKernel> crate::streams::StreamsModule<K> for Control {
    fn name(&self) -> &'static str {
        "control"
    }
    fn has_srv(&self, _side: crate::streams::Side) -> bool {
        false
    }
    fn open(&mut self, k: &mut K) -> Result<(), crate::errno::Errno> {
        if let Some(t) = self.0.take() {
            k.putnext(crate::streams::Side::Write, mkmsg(k.dblks(), t, &[])?);
        }
        Ok(())
    }
    fn put(&mut self, k: &mut K, side: crate::streams::Side, mp: crate::streams::Mblk) {
        k.putnext(side, mp);
    }
}

#[test]
fn stop_and_start_pass_the_imported_protocol_and_hangup_reaches_it_and_the_head() {
    let pool = Dblks::pool(10_000);
    let mut ep = open(atp_imported, &pool, 1, 0);
    ep.s.push(Box::new(Control(Some(MsgType::Stop)))).unwrap();
    assert!(ep.s.stopped(), "M_STOP went through atp@bsd to the device");
    let rec = AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: 0,
        interval: 50,
        user: [0; 4],
    };
    let dest = TAddr::new(NET, 2, 9);
    ep.send(dest, rec, b"held").unwrap();
    assert!(ep.s.device_output().is_none(), "output waits while stopped");
    ep.s.pop().unwrap();
    ep.s.push(Box::new(Control(Some(MsgType::Start)))).unwrap();
    assert!(ep.s.device_output().is_some(), "and goes once started");
    ep.s.device_input(mkmsg(&pool, MsgType::Hangup, &[]).unwrap());
    assert!(ep.s.hung_up());
    assert!(
        ep.s.putmsg(None, Some(b"x")).is_err(),
        "a hung-up stream refuses writes"
    );
}

#[test]
fn imported_ddp_writes_its_header_in_the_room_the_head_leaves_no_block_added() {
    // The module asked the head for write offset (M_SETOPTS SO_WROFF) at
    // open, so BSD's DDP prepends its header in front of the user's data in
    // place: the datagram leaves as one block, header and data together.
    let pool = Dblks::pool(100);
    let mut s = Stream::open(pool.clone());
    s.push(Box::new(
        BsdModule::new(bsd_ddp::Ddp::new(), "ddp@bsd").with_interface(SockaddrAt::new(NET, 1, 0)),
    ))
    .unwrap();
    s.putmsg(
        Some(&Tpi::BindReq {
            addr: TAddr::new(0, 0, 200),
        }),
        None,
    )
    .unwrap();
    assert!(matches!(
        s.getmsg().unwrap().as_ref().and_then(Tpi::of),
        Some(Tpi::BindAck { .. })
    ));
    let req = Tpi::UnitdataReq {
        dest: TAddr::new(NET, 2, 10),
        opt: vec![3],
    };
    s.putmsg(Some(&req), Some(&[7; 40])).unwrap();
    let out = s.device_output().expect("a datagram");
    assert_eq!(out.iter().count(), 1, "one block: {out:?}");
    assert_eq!(out.msgsize(), crate::appletalk::wire::ddp::HEADER_LEN + 40);
    assert_eq!(
        &out.data()[crate::appletalk::wire::ddp::HEADER_LEN..],
        &[7; 40]
    );
    drop(out);
    drop(s);
    assert_eq!(pool.stats().in_use, 0, "no block leaked");
}
