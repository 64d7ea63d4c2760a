//! Two engines wired by hand: every frame passes through a closure that may
//! drop it, so a test can lose exactly the frames it means to.

use std::time::Duration;

use strata::{AppId, Engine, Instant, LinkId, Message, ProtoId, SessionRef};

use super::{Sink, config, engine, open_side};

pub struct Shuttle {
    pub e: [Engine; 2],
    pub link: LinkId,
    pub top: ProtoId,
    pub apps: [AppId; 2],
    pub sessions: [SessionRef; 2],
    pub now: Instant,
    /// Frames sent so far by each side.
    pub sent: [usize; 2],
}

impl Shuttle {
    pub fn new(pa: bool, extra: &str) -> Shuttle {
        Shuttle::with(pa, [extra, extra])
    }

    /// Each side with its own extra options.
    pub fn with(pa: bool, extra: [&str; 2]) -> Shuttle {
        let mut e = [
            engine(&config(1, pa, extra[0]), 1),
            engine(&config(2, pa, extra[1]), 2),
        ];
        let link = e[0].link_id("net0").unwrap();
        let top = e[0].proto_id(strata_pa::example::top(pa)).unwrap();
        let (app_a, s_a) = open_side(&mut e[0], top, 2);
        let (app_b, s_b) = open_side(&mut e[1], top, 1);
        Shuttle {
            e,
            link,
            top,
            apps: [app_a, app_b],
            sessions: [s_a, s_b],
            now: Instant::ZERO,
            sent: [0; 2],
        }
    }

    pub fn send(&mut self, from: usize, data: &[u8]) {
        let (app, s) = (self.apps[from], self.sessions[from]);
        let m = Message::from_slice(data);
        self.e[from].with_app(app, |_, cx| cx.send(s, m)).unwrap();
    }

    /// Runs both engines for `d` in steps of 100 µs; `keep(side, n, frame)`
    /// says whether side's `n`th frame reaches the other side.
    pub fn run(&mut self, d: Duration, keep: &mut dyn FnMut(usize, usize, &Message) -> bool) {
        let end = self.now + d;
        while self.now < end {
            self.now += Duration::from_micros(100);
            for _ in 0..8 {
                for side in 0..2 {
                    self.e[side].run(self.now);
                    while let Some(f) = self.e[side].poll_transmit(self.link) {
                        let n = self.sent[side];
                        self.sent[side] += 1;
                        if keep(side, n, &f) {
                            self.e[1 - side].receive(self.link, f);
                        }
                    }
                }
            }
        }
    }

    /// Sends `data` from side `from`, runs for `d` losing nothing, and
    /// returns the first frame `from` sent meanwhile.
    pub fn send_catching(&mut self, from: usize, data: &[u8], d: Duration) -> Vec<u8> {
        self.send(from, data);
        let mut first = None;
        self.run(d, &mut |side, _, f| {
            if side == from && first.is_none() {
                first = Some(f.to_vec());
            }
            true
        });
        first.expect("a frame")
    }

    pub fn got(&self, at: usize) -> Vec<Vec<u8>> {
        self.e[at].app::<Sink>(self.apps[at]).unwrap().got.clone()
    }

    pub fn event(&self, at: usize, name: &str) -> u64 {
        self.e[at].counters(self.top).events().get(name)
    }

    pub fn drops(&self, at: usize, name: &str) -> u64 {
        self.e[at].counters(self.top).drops().get(name)
    }

    /// Hands `frame` (from the Ethernet header on) to side `at`.
    pub fn inject(&mut self, at: usize, frame: Message) {
        self.e[at].receive(self.link, frame);
        self.e[at].run(self.now);
    }
}
