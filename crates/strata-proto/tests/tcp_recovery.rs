//! Loss recovery seen from the wire, frame by frame on a path of 10 ms each
//! way: RACK (RFC 8985 §6) finds a lost retransmission by the data sent after
//! it and resends it at once; a tail loss probe (§7) draws the SACK that
//! repairs a lost tail; neither waits for the retransmission timer.

mod common;

use std::time::Duration;

use common::{Host, tcp_opening};
use strata_core::{AppEvent, AppId, Control, Instant, Message, Reply, SessionRef};
use strata_proto::tcp::wire::{Header, Repr};
use strata_proto::tcp::{ConnInfo, Tcp};

/// One-way delay of the path the test plays.
const DELAY: Duration = Duration::from_millis(10);

/// A connection from A to B's port 80 that has measured the path's round
/// trip, with nothing in flight.
struct Path {
    a: Host,
    b: Host,
    client: AppId,
    server: AppId,
    sa: SessionRef,
    now: Instant,
}

fn segments(frames: &[Vec<u8>]) -> Vec<Repr> {
    frames
        .iter()
        .filter(|f| f.len() >= 34 && f[12..14] == [0x08, 0x00] && f[23] == 6)
        .filter_map(|f| Header::new_checked(&f[34..]).ok().map(|h| Repr::parse(&h)))
        .collect()
}

impl Path {
    fn new() -> Path {
        let (a, b, server, client, sa) = tcp_opening(&[]);
        let mut p = Path {
            a,
            b,
            client,
            server,
            sa,
            now: Instant::ZERO,
        };
        // ARP and the handshake, then two segments and their ACK, all at the
        // path's delay, so that both ends know its round trip.
        p.exchange();
        assert!(matches!(
            p.a.app(client).events.first(),
            Some(AppEvent::Connected(_))
        ));
        let mss = p.info().mss as usize;
        p.write(2 * mss);
        p.exchange();
        let i = p.info();
        assert!(i.srtt.is_some_and(|s| s >= 2 * DELAY), "{i:?}");
        assert_eq!(i.in_flight, 0);
        p
    }

    /// Frames cross both ways until neither host sends any more.
    fn exchange(&mut self) {
        for _ in 0..64 {
            let to_b = self.a_sends();
            if !to_b.is_empty() {
                self.deliver_to_b(&to_b);
            }
            let to_a = self.b_sends();
            if !to_a.is_empty() {
                self.deliver_to_a(&to_a);
            }
            if to_a.is_empty() && to_b.is_empty() {
                return;
            }
        }
        panic!("the hosts never went quiet");
    }

    fn info(&self) -> ConnInfo {
        self.a
            .engine
            .protocol::<Tcp>(self.sa.proto)
            .unwrap()
            .info(self.sa.sess)
            .unwrap()
    }

    fn write(&mut self, n: usize) {
        let tcp = self.a.proto("tcp");
        let (client, s) = (self.client, self.sa.sess);
        let op = Control::Write(Message::from(vec![7u8; n]));
        let r = self
            .a
            .engine
            .with_app(client, |_, cx| cx.control(tcp, Some(s), op))
            .unwrap();
        assert!(matches!(r, Ok(Reply::Size(m)) if m == n));
        self.a.run();
    }

    /// Both clocks move on by `d`, running what falls due.
    fn wait(&mut self, d: Duration) {
        self.now += d;
        self.a.now = self.now;
        self.b.now = self.now;
        self.a.run();
        self.b.run();
    }

    fn a_sends(&mut self) -> Vec<Vec<u8>> {
        self.a.sent()
    }

    fn b_sends(&mut self) -> Vec<Vec<u8>> {
        self.b.sent()
    }

    /// `frames` cross the path to B.
    fn deliver_to_b(&mut self, frames: &[Vec<u8>]) {
        self.wait(DELAY);
        for f in frames {
            self.b.engine.receive(self.b.link, Message::from(f.clone()));
        }
        self.b.run();
    }

    /// `frames` cross the path to A.
    fn deliver_to_a(&mut self, frames: &[Vec<u8>]) {
        self.wait(DELAY);
        for f in frames {
            self.a.engine.receive(self.a.link, Message::from(f.clone()));
        }
        self.a.run();
    }

    fn received(&self) -> usize {
        self.b.app(self.server).data().iter().map(Vec::len).sum()
    }
}

#[test]
fn a_lost_retransmission_is_found_by_later_sacks_and_resent_without_the_timer() {
    let mut p = Path::new();
    let mss = p.info().mss as usize;
    let start = p.now;
    p.write(20 * mss);
    let first = p.a_sends();
    let first_seq = segments(&first)[0].seq;
    assert_eq!(first.len(), 10, "the initial window");
    // The first segment is lost; the other nine arrive and are SACKed.
    p.deliver_to_b(&first[1..]);
    let sacks = p.b_sends();
    p.deliver_to_a(&sacks);
    let mut repair = p.a_sends();
    let resent = segments(&repair);
    // New data went on the first SACKs (cwnd − pipe allowed it); the third
    // SACKed segment made the hole lost (DupThresh, RFC 8985 §6.2 step 4).
    let hole = resent
        .iter()
        .position(|s| s.seq == first_seq)
        .expect("RACK: the hole is lost and resent");
    assert!(
        hole > 0 && hole + 1 < resent.len(),
        "new data before and after"
    );
    // The retransmission is lost too; the new data sent after it arrives.
    repair.remove(hole);
    p.deliver_to_b(&repair);
    let sacks = p.b_sends();
    p.deliver_to_a(&sacks);
    let again = p.a_sends();
    assert!(
        segments(&again).iter().any(|s| s.seq == first_seq),
        "data sent after the retransmission was SACKed: it is lost again"
    );
    p.deliver_to_b(&again);
    let i = p.info();
    assert_eq!(
        (i.stats.lost_retransmits, i.stats.timeouts),
        (1, 0),
        "{:?}",
        i.stats
    );
    assert!(
        p.now.saturating_since(start) < i.rto,
        "within one RTO of the first loss"
    );
    // Everything now flows to the end.
    p.exchange();
    assert_eq!(p.received(), 22 * mss);
    assert_eq!(p.info().stats.timeouts, 0);
    assert_eq!(p.info().in_flight, 0);
}

#[test]
fn a_lost_tail_is_probed_after_two_round_trips_and_repaired_without_the_timer() {
    let mut p = Path::new();
    let mss = p.info().mss as usize;
    p.write(10 * mss);
    let sent = p.a_sends();
    assert_eq!(sent.len(), 10);
    // The last two segments are lost: B acknowledges the first eight.
    p.deliver_to_b(&sent[..8]);
    let acks = p.b_sends();
    p.deliver_to_a(&acks);
    assert!(p.a_sends().is_empty(), "nothing tells A of the loss");
    // The probe timeout runs from the last ACK: two SRTTs (no delayed ACK
    // term, two segments are outstanding).
    let srtt = p.info().srtt.unwrap();
    p.wait(2 * srtt - Duration::from_millis(1));
    assert!(p.a_sends().is_empty());
    p.wait(Duration::from_millis(1));
    let probe = p.a_sends();
    let probe_segs = segments(&probe);
    assert_eq!(probe_segs.len(), 1, "one probe");
    assert_eq!(
        probe_segs[0].seq,
        segments(&sent[9..])[0].seq,
        "no new data: the last segment again"
    );
    assert_eq!(p.a.events("tcp", "loss-probe"), 1);
    // The probe arrives; its SACK shows the ninth segment missing.
    p.deliver_to_b(&probe);
    let sack = p.b_sends();
    p.deliver_to_a(&sack);
    let repair_frames = p.a_sends();
    let repair = segments(&repair_frames);
    assert_eq!(repair.len(), 1);
    assert_eq!(repair[0].seq, segments(&sent[8..])[0].seq, "the lost ninth");
    let i = p.info();
    assert_eq!(
        (
            i.stats.loss_probes,
            i.stats.timeouts,
            i.stats.fast_recoveries
        ),
        (1, 0, 1),
        "{:?}",
        i.stats
    );
    p.deliver_to_b(&repair_frames);
    p.exchange();
    assert_eq!(p.received(), 12 * mss);
    assert_eq!(p.info().in_flight, 0);
}
