//! Pacing seen from the wire, on a path of 10 ms each way: with BBR a
//! window's worth of data leaves a segment at a time as the pacing timer
//! lets it, where CUBIC sends the whole window at once.

mod common;

use std::time::Duration;

use common::{Host, carry, tcp_opening};
use strata_core::{Control, Message, Reply, SessionRef};
use strata_proto::tcp::Tcp;

const DELAY: Duration = Duration::from_millis(10);

/// Hosts A and B with A connected to B's port 80 using `congestion`.
struct Pair {
    a: Host,
    b: Host,
    client: strata_core::AppId,
    sa: SessionRef,
}

impl Pair {
    fn new(congestion: &str) -> Pair {
        let cc = [("tcp", "congestion", congestion.into())];
        let (a, b, _, client, sa) = tcp_opening(&cc);
        let mut p = Pair { a, b, client, sa };
        p.exchange();
        let mss = p.mss();
        // One round trip of data, so that BBR has a delivery rate.
        p.write(2 * mss);
        p.exchange();
        p
    }

    fn mss(&self) -> usize {
        let tcp = self.a.engine.protocol::<Tcp>(self.sa.proto).unwrap();
        tcp.info(self.sa.sess).unwrap().mss as usize
    }

    /// Both clocks move on by `DELAY`.
    fn wait(&mut self) {
        self.a.advance(DELAY);
        self.b.advance(DELAY);
    }

    /// Frames cross both ways, `DELAY` each, until both hosts are quiet.
    fn exchange(&mut self) {
        for _ in 0..64 {
            self.wait();
            let to_b = carry(&mut self.a, &mut self.b);
            self.wait();
            if to_b + carry(&mut self.b, &mut self.a) == 0 {
                return;
            }
        }
        panic!("the hosts never went quiet");
    }

    fn write(&mut self, n: usize) {
        let tcp = self.a.proto("tcp");
        let s = self.sa.sess;
        let client = self.client;
        let op = Control::Write(Message::from(vec![7u8; n]));
        let r = self
            .a
            .engine
            .with_app(client, |_, cx| cx.control(tcp, Some(s), op))
            .unwrap();
        assert!(matches!(r, Ok(Reply::Size(m)) if m == n));
        self.a.run();
    }
}

#[test]
fn cubic_sends_its_window_at_once() {
    let mut p = Pair::new("cubic");
    let mss = p.mss();
    p.write(8 * mss);
    assert_eq!(p.a.sent().len(), 8, "all within the window, unpaced");
}

#[test]
fn bbr_spreads_its_window_over_time_at_the_pacing_rate() {
    let mut p = Pair::new("bbr");
    let mss = p.mss();
    p.write(8 * mss);
    let first = p.a.sent().len();
    assert!(
        (1..8).contains(&first),
        "only what is due within a millisecond goes now: {first}"
    );
    let mut ms = 0;
    let mut total = first;
    while total < 8 && ms < 100 {
        p.a.advance(Duration::from_millis(1));
        total += p.a.sent().len();
        ms += 1;
    }
    assert_eq!(total, 8, "the pacing timer released the rest");
    // Two segments were delivered in a 20 ms round trip; Startup paces at
    // 2.89 times that (less 1 %): a segment every 3.5 ms, the last of eight
    // 24.5 ms after the first, sent up to a millisecond early.
    assert!(
        (22..=26).contains(&ms),
        "the last segment went after {ms} ms"
    );
}
