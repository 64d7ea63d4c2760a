//! The STREAMS subsystem's unit tests: messages, TPI layouts, water marks
//! and back-enabling under a flood, flushing, errors as messages, push and
//! pop, perimeters and timeouts.

use std::time::Duration;

use super::kernel::{ModuleInfo, Side, StreamsKernel, StreamsModule};
use super::mblk::{Dblks, FLUSHRW, FLUSHW, Mblk, MsgType, allocb, mkmsg};
use super::stream::Stream;
use super::tpi::{T_UNITDATA_REQ, TAddr, Tpi};
use crate::errno::Errno;

#[test]
fn dupb_shares_the_data_block_and_copymsg_does_not() {
    let pool = Dblks::pool(16);
    let mut mp = mkmsg(&pool, MsgType::Data, b"hello").unwrap();
    mp.linkb(mkmsg(&pool, MsgType::Data, b" world").unwrap());
    let dup = mp.dupmsg().unwrap();
    assert!(dup.storage().0.same(mp.storage().0));
    assert_eq!(mp.storage().0.refs(), 2);
    let copy = mp.copymsg().unwrap();
    assert!(!copy.storage().0.same(mp.storage().0));
    assert_eq!(copy.to_vec(), b"hello world");
    assert_eq!(pool.stats().in_use, 6);
    drop((mp, dup, copy));
    assert_eq!(pool.stats().in_use, 0, "every block returned to the pool");
}

#[test]
fn adjmsg_and_pullupmsg_work_across_blocks() {
    let pool = Dblks::pool(16);
    let mut mp = mkmsg(&pool, MsgType::Data, b"abc").unwrap();
    mp.linkb(mkmsg(&pool, MsgType::Data, b"defgh").unwrap());
    assert!(mp.adjmsg(1));
    assert!(mp.adjmsg(-2));
    assert_eq!(mp.to_vec(), b"bcdef");
    assert!(!mp.adjmsg(9), "longer than the message: nothing trimmed");
    mp.pullupmsg(Some(4)).unwrap();
    assert_eq!(mp.len(), 4);
    assert_eq!(mp.to_vec(), b"bcdef");
    assert_eq!(mp.pullupmsg(Some(99)), Err(Errno::Einval));
}

#[test]
fn the_data_block_pool_is_bounded() {
    let pool = Dblks::pool(2);
    let a = allocb(&pool, 10).unwrap();
    let _b = a.dupb().unwrap();
    assert_eq!(allocb(&pool, 10).unwrap_err(), Errno::Enobufs);
    assert_eq!(pool.stats().fails, 1);
}

#[test]
fn tpi_primitives_round_trip_through_their_c_layout() {
    let prims = [
        Tpi::BindReq {
            addr: TAddr::new(1, 2, 0),
        },
        Tpi::BindAck {
            addr: TAddr::new(1, 2, 129),
        },
        Tpi::UnbindReq,
        Tpi::OkAck { correct_prim: 7 },
        Tpi::error_ack(6, Errno::Eaddrinuse),
        Tpi::UnitdataReq {
            dest: TAddr::new(0xff00, 3, 4),
            opt: vec![1, 2, 3],
        },
        Tpi::UnitdataInd {
            src: TAddr::new(7, 8, 9),
            opt: vec![],
        },
        Tpi::UderrorInd {
            dest: TAddr::new(1, 1, 1),
            opt: vec![9],
            error: 110,
        },
    ];
    for p in prims {
        assert_eq!(Tpi::decode(&p.encode()), Some(p.clone()), "{p:?}");
    }
    let req = Tpi::UnitdataReq {
        dest: TAddr::new(1, 2, 3),
        opt: vec![5; 8],
    }
    .encode();
    assert_eq!(&req[..4], &T_UNITDATA_REQ.to_le_bytes());
    for n in 0..req.len() {
        assert_eq!(
            Tpi::decode(&req[..n]),
            None,
            "a primitive cut at {n} bytes is refused"
        );
    }
}

/// A module that forwards through service procedures on both sides,
/// honouring flow control and answering `M_FLUSH` as a module must.
struct Relay {
    name: &'static str,
    info: ModuleInfo,
}

impl<K: StreamsKernel> StreamsModule<K> for Relay {
    fn name(&self) -> &'static str {
        self.name
    }
    fn info(&self) -> ModuleInfo {
        self.info
    }
    fn has_srv(&self, _side: Side) -> bool {
        true
    }
    fn put(&mut self, k: &mut K, side: Side, mp: Mblk) {
        if mp.mtype == MsgType::Flush {
            let flag = mp.data()[0];
            let mine = if side == Side::Write {
                FLUSHW
            } else {
                super::mblk::FLUSHR
            };
            if flag & mine != 0 {
                k.flushq(side, false);
            }
            return k.putnext(side, mp);
        }
        if mp.mtype.is_priority() {
            return k.putnext(side, mp);
        }
        k.putq(side, mp);
    }
    fn srv(&mut self, k: &mut K, side: Side) {
        super::kernel::forward(k, side);
    }
}

fn relay(name: &'static str) -> Box<Relay> {
    Box::new(Relay {
        name,
        info: ModuleInfo {
            hiwat: 1000,
            lowat: 200,
        },
    })
}

#[test]
fn a_flood_stays_within_the_water_marks_and_back_enables_when_drained() {
    let mut s = Stream::open(Dblks::pool(10_000));
    s.push(relay("lower")).unwrap();
    s.push(relay("upper")).unwrap();
    let payload = [7u8; 100];
    let mut sent = 0;
    for _ in 0..10_000 {
        match s.putmsg(None, Some(&payload)) {
            Ok(()) => sent += 1,
            Err(e) => {
                assert_eq!(e, Errno::Ewouldblock);
                break;
            }
        }
    }
    assert!(sent < 10_000, "flow control stopped the writer");
    for name in ["upper", "lower"] {
        let q = s.queue_of(name, Side::Write).unwrap();
        assert!(
            q.peak <= q.q_hiwat + payload.len(),
            "{name} held {} over hiwat {}",
            q.peak,
            q.q_hiwat
        );
    }
    let dev = s.device_queue();
    assert!(dev.peak <= dev.q_hiwat + payload.len());
    let mut got = 0;
    while let Some(mp) = s.device_output() {
        assert_eq!(mp.to_vec(), payload);
        got += 1;
    }
    assert_eq!(
        got, sent,
        "every accepted message reached the device, none lost"
    );
    assert!(s.stats.head_wakeups > 0, "draining back-enabled the writer");
    assert!(s.putmsg(None, Some(&payload)).is_ok());
}

#[test]
fn i_flush_empties_every_queue_on_the_way_down_and_comes_back_up() {
    let mut s = Stream::open(Dblks::pool(10_000));
    s.push(relay("m")).unwrap();
    while s.putmsg(None, Some(&[1; 300])).is_ok() {}
    assert!(s.device_queue().q_count > 0);
    s.flush(FLUSHRW).unwrap();
    assert_eq!(s.device_queue().q_count, 0);
    assert_eq!(s.queue_of("m", Side::Write).unwrap().q_count, 0);
    assert_eq!(
        s.stats.head_flushes, 1,
        "the device turned FLUSHR back up to the head"
    );
    assert!(s.putmsg(None, Some(&[1; 10])).is_ok());
}

/// A module that answers each downward message with a reply turned around
/// at once (`qreply`), reports `M_ERROR` on a message starting with `!`,
/// and sends a message up when its timeout fires.
struct Echo;

impl<K: StreamsKernel> StreamsModule<K> for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }
    fn has_srv(&self, _side: Side) -> bool {
        false
    }
    fn put(&mut self, k: &mut K, side: Side, mp: Mblk) {
        match side {
            Side::Write if mp.data().first() == Some(&b'!') => {
                let e = mkmsg(
                    k.dblks(),
                    MsgType::Error,
                    &[Errno::Ehostunreach.number() as u8],
                )
                .unwrap();
                k.qreply(side, e);
            }
            Side::Write if mp.data() == b"later" => k.timeout(50, 7),
            Side::Write => k.qreply(side, mp),
            Side::Read => k.putnext(side, mp),
        }
    }
    fn timeout(&mut self, k: &mut K, id: u32) {
        let mp = mkmsg(k.dblks(), MsgType::Data, &[id as u8]).unwrap();
        k.putnext(Side::Read, mp);
    }
}

#[test]
fn a_reply_into_a_busy_module_waits_for_its_perimeter() {
    let mut s = Stream::open(Dblks::pool(100));
    s.push(Box::new(Echo)).unwrap();
    s.push(relay("top")).unwrap();
    assert_eq!(s.modules(), vec!["top", "echo"]);
    s.putmsg(None, Some(b"ping")).unwrap();
    let got = s.getmsg().unwrap().expect("the echo reached the head");
    assert_eq!(got.to_vec(), b"ping");
}

#[test]
fn errors_travel_up_as_messages_and_latch_at_the_head() {
    let mut s = Stream::open(Dblks::pool(100));
    s.push(Box::new(Echo)).unwrap();
    s.putmsg(None, Some(b"!bad")).unwrap();
    assert_eq!(s.error(), Some(Errno::Ehostunreach));
    assert_eq!(s.putmsg(None, Some(b"more")), Err(Errno::Ehostunreach));
    assert_eq!(s.getmsg().unwrap_err(), Errno::Ehostunreach);
}

#[test]
fn timeouts_fire_on_the_virtual_clock() {
    let mut s = Stream::open(Dblks::pool(100));
    s.push(Box::new(Echo)).unwrap();
    s.putmsg(None, Some(b"later")).unwrap();
    s.advance_to(Duration::from_millis(490));
    assert!(s.getmsg().unwrap().is_none());
    s.advance_to(Duration::from_millis(500));
    assert_eq!(s.getmsg().unwrap().unwrap().to_vec(), [7]);
}

#[test]
fn stop_and_start_hold_and_release_the_device() {
    let mut s = Stream::open(Dblks::pool(100));
    s.push(relay("m")).unwrap();
    s.putmsg(None, Some(b"x")).unwrap();
    let stop = mkmsg(&Dblks::pool(1), MsgType::Stop, &[]).unwrap();
    // M_STOP/M_START come from above like any control message.
    s.push(Box::new(Inject(Some(stop)))).unwrap();
    assert!(s.stopped());
    assert!(s.device_output().is_none());
    s.pop().unwrap();
    s.push(Box::new(Inject(Some(
        mkmsg(&Dblks::pool(1), MsgType::Start, &[]).unwrap(),
    ))))
    .unwrap();
    assert_eq!(s.device_output().unwrap().to_vec(), b"x");
    s.pop().unwrap();
    assert_eq!(s.modules(), vec!["m"]);
}

/// A module that sends one message down when it is opened.
struct Inject(Option<Mblk>);

impl<K: StreamsKernel> StreamsModule<K> for Inject {
    fn name(&self) -> &'static str {
        "inject"
    }
    fn has_srv(&self, _side: Side) -> bool {
        false
    }
    fn open(&mut self, k: &mut K) -> Result<(), Errno> {
        if let Some(mp) = self.0.take() {
            k.putnext(Side::Write, mp);
        }
        Ok(())
    }
    fn put(&mut self, k: &mut K, side: Side, mp: Mblk) {
        k.putnext(side, mp);
    }
}
