//! Seed 003 (the Horus Protocol Accelerator): Table 4, the round trip's
//! breakdown (Figure 4), latency against offered load (Figure 5) and header
//! bytes per message, for the paper's 4-layer stack with the PA off (four
//! Strata protocols on the engine) and on (`pa`), in one run.
//!
//! Two hosts run in one thread on an in-memory link that this module moves
//! frames over by hand, so each host's work is timed on its own. Latency
//! follows a two-host timeline: each host has its own CPU, the link takes no
//! time, and work a host does while idle (the PA's deferred
//! post-processing) delays a message only if that host is still busy with
//! it when the message arrives. Throughputs (messages/s, round trips/s,
//! bandwidth) and CPU per message are plain wall-clock on the one thread,
//! both hosts' work included: one core doing both ends.

use std::any::Any;
use std::time::{Duration, Instant as WallClock};

use anyhow::{Context, Result, anyhow};
use strata::{
    Addr, App, AppCx, AppId, Engine, EngineConfig, Instant, LinkId, Message, PacketMeta,
    Participants, Qos, SessionRef,
};
use strata_pa::example;

use crate::stats::{Summary, nanos};

/// The paper's Table 4 and §5 (two SparcStation 20s, 140 Mb/s ATM, U-Net).
pub mod paper {
    /// One-way latency with the PA, µs.
    pub const ONE_WAY_US: f64 = 85.0;
    /// Round trip with the PA, µs.
    pub const RTT_US: f64 = 170.0;
    /// Round trip of the C Horus without the PA, µs.
    pub const RTT_NO_PA_US: f64 = 1500.0;
    /// 8-byte messages per second, streamed.
    pub const MSGS_PER_S: f64 = 80_000.0;
    /// Round trips per second.
    pub const RT_PER_S: f64 = 6_000.0;
    /// Bandwidth with 1 KB messages, MB/s.
    pub const MB_PER_S: f64 = 15.0;
    /// Figure 4: time to the link, post-send, post-deliver, µs.
    pub const TO_LINK_US: f64 = 25.0;
    /// Figure 4's post-send.
    pub const POST_SEND_US: f64 = 80.0;
    /// Figure 4's post-deliver.
    pub const POST_DELIVER_US: f64 = 50.0;
}

/// Counts (and echoes) what arrives.
#[derive(Default)]
struct Sink {
    got: u64,
    bytes: u64,
    echo: bool,
}

impl App for Sink {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        self.got += 1;
        self.bytes += msg.len() as u64;
        if self.echo
            && let Some(s) = s
        {
            cx.send(s, msg);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Two hosts, the PA on or off, frames moved by hand.
pub struct Duo {
    e: [Engine; 2],
    link: LinkId,
    apps: [AppId; 2],
    sessions: [SessionRef; 2],
    clock: WallClock,
    /// A virtual clock in nanoseconds instead of the wall clock, advanced by
    /// [`VIRTUAL_STEP`] at each reading: what a count of instructions under
    /// callgrind (50 times slower) needs for the layers' timers to fire as
    /// often as at full speed.
    virtual_ns: Option<u64>,
    /// The shortest request frame of the round trips, in bytes.
    pub request: usize,
}

fn engine(n: u8, pa: bool) -> Result<Engine> {
    engine_of(n, &example::host_config(n, "sim", pa, "")?)
}

/// A sink application on `e` with a session of `top` to host `peer`.
fn sink_end(e: &mut Engine, top: strata::ProtoId, peer: u8) -> Result<(AppId, SessionRef)> {
    let app = e.add_app(Box::new(Sink::default()));
    let s = e
        .with_app(app, |_, cx| {
            cx.open(
                top,
                Participants::remote([Addr::Hw(example::mac(peer))]),
                Qos::default(),
            )
        })
        .context("no app")??;
    Ok((app, s))
}

fn engine_of(n: u8, cfg: &strata::core::GraphConfig) -> Result<Engine> {
    let mut reg = strata::registry();
    strata_pa::register(&mut reg);
    let built = strata::core::graph::build(cfg, &reg)?;
    Engine::new(
        built,
        EngineConfig {
            seed: u64::from(n),
            ..EngineConfig::default()
        },
    )
    .map_err(|e| anyhow!("{e}"))
}

impl Duo {
    /// Two hosts running the paper's stack, the PA on or off.
    pub fn new(pa: bool) -> Result<Duo> {
        let mut e = [engine(1, pa)?, engine(2, pa)?];
        let link = e[0].link_id("net0").context("no link")?;
        let top = e[0].proto_id(example::top(pa)).context("no stack")?;
        let mut apps = Vec::new();
        let mut sessions = Vec::new();
        for (i, peer) in [(0usize, 2u8), (1, 1)] {
            let (app, s) = sink_end(&mut e[i], top, peer)?;
            apps.push(app);
            sessions.push(s);
        }
        Ok(Duo {
            e,
            link,
            apps: [apps[0], apps[1]],
            sessions: [sessions[0], sessions[1]],
            clock: WallClock::now(),
            virtual_ns: None,
            request: usize::MAX,
        })
    }

    /// An event counted by side's stack top (`fast-send`, `packed` …).
    pub fn event(&self, side: usize, name: &str) -> u64 {
        let top = self.e[side]
            .proto_id("pa")
            .or_else(|| self.e[side].proto_id("hp-frag"));
        top.map_or(0, |t| self.e[side].counters(t).events().get(name))
    }

    /// Runs on a virtual clock from now on (see [`Duo::virtual_ns`]).
    pub fn virtual_clock(&mut self) {
        self.virtual_ns = Some(self.clock.elapsed().as_nanos() as u64 + 1);
    }

    fn now(&mut self) -> Instant {
        match &mut self.virtual_ns {
            Some(ns) => {
                *ns += VIRTUAL_STEP;
                Instant::from_nanos(*ns)
            }
            None => Instant::from_nanos(self.clock.elapsed().as_nanos() as u64 + 1),
        }
    }

    fn sink(&mut self, side: usize) -> &mut Sink {
        let app = self.apps[side];
        self.e[side]
            .app_mut::<Sink>(app)
            .expect("the duo's applications are sinks")
    }

    fn send(&mut self, side: usize, msgs: impl Iterator<Item = Message>) {
        let (app, s) = (self.apps[side], self.sessions[side]);
        let _ = self.e[side].with_app(app, |_, cx| {
            for m in msgs {
                cx.send(s, m);
            }
        });
    }

    /// Moves side's frames to the other side; the longest one's length.
    fn pump(&mut self, side: usize) -> usize {
        let mut longest = 0;
        while let Some(f) = self.e[side].poll_transmit(self.link) {
            longest = longest.max(f.len());
            self.e[1 - side].receive(self.link, f);
        }
        longest
    }

    /// Runs one side (timers due, frames received) and times it.
    fn run(&mut self, side: usize) -> Duration {
        let t = WallClock::now();
        self.step(side);
        t.elapsed()
    }

    /// Runs one side, untimed.
    fn step(&mut self, side: usize) {
        let now = self.now();
        self.e[side].run(now);
    }

    /// [`Duo::idle`] untimed.
    fn idle_untimed(&mut self) {
        for _ in 0..16 {
            let mut moved = 0;
            for side in 0..2 {
                self.step(side);
                moved += self.pump(side);
            }
            if moved == 0 {
                break;
            }
        }
    }

    /// Lets both sides finish what they do while idle; each side's time.
    fn idle(&mut self) -> [Duration; 2] {
        let mut spent = [Duration::ZERO; 2];
        for _ in 0..16 {
            let mut moved = 0;
            for (side, spent) in spent.iter_mut().enumerate() {
                *spent += self.run(side);
                moved += self.pump(side);
            }
            if moved == 0 {
                break;
            }
        }
        spent
    }
}

/// How far the virtual clock moves at each reading, ns: about one step of
/// the stack at full speed.
pub const VIRTUAL_STEP: u64 = 500;

/// One mode's figures.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Figures {
    /// One-way latency, µs (median).
    pub one_way_us: f64,
    /// One-way latency, µs (mean).
    pub one_way_mean_us: f64,
    /// Round trip, µs (median, two-host timeline).
    pub rtt_us: f64,
    /// Round trip, µs (mean).
    pub rtt_mean_us: f64,
    /// The round trip's sender part up to the link, µs.
    pub to_link_us: f64,
    /// The peer's delivery and reply, µs.
    pub turnaround_us: f64,
    /// Post-send done while idle, µs per round trip (the sender's).
    pub post_send_us: f64,
    /// Post-processing after delivery while idle, µs per round trip (both
    /// hosts' idle work after the round trip).
    pub post_deliver_us: f64,
    /// CPU per message, µs, both ends and all work (median round trip's
    /// work, halved).
    pub cpu_per_msg_us: f64,
    /// Round trips per second, one core for both ends (from the median).
    pub rt_per_s: f64,
    /// 8-byte messages per second streamed (packing with the PA).
    pub msgs_per_s: f64,
    /// 1 KB messages: MB/s.
    pub mb_per_s: f64,
    /// Bytes of stack headers on an ordinary 8-byte message.
    pub header_bytes: usize,
}

const ETH_HEADER: usize = 14;

/// One-way latency: send, the peer delivers; µs.
fn one_way(d: &mut Duo, n: usize) -> Summary {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        d.idle();
        let t = WallClock::now();
        d.send(0, std::iter::once(Message::from_slice(&[7; 8])));
        d.pump(0);
        d.run(1);
        samples.push(nanos(t.elapsed()));
    }
    Summary::of(&mut samples)
}

/// Round trips on the two-host timeline: the round trip's summary and
/// (to link, turnaround, post-send, idle after, all work of both hosts) in
/// µs, medians.
fn round_trips(d: &mut Duo, n: usize) -> (Summary, [f64; 5]) {
    d.sink(1).echo = true;
    d.request = usize::MAX;
    d.idle();
    let mut parts: [Vec<u64>; 5] = Default::default();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = WallClock::now();
        d.send(0, std::iter::once(Message::from_slice(&[7; 8])));
        let request = d.pump(0);
        let d1 = t.elapsed();
        // The first carries the identification; the shortest is ordinary.
        d.request = d.request.min(request);

        // The sender's idle work (post-send) runs while the peer works.
        let d2 = d.run(0);
        let d3 = d.run(1);
        d.pump(1);
        let d5 = d.run(0);
        let rtt = (d1 + d2).max(d1 + d3) + d5;
        let after = d.idle();
        samples.push(nanos(rtt));
        let all = d1 + d2 + d3 + d5 + after[0] + after[1];
        for (p, x) in parts.iter_mut().zip([d1, d3, d2, after[0] + after[1], all]) {
            p.push(nanos(x));
        }
    }
    d.sink(1).echo = false;
    (
        Summary::of(&mut samples),
        parts.map(|mut p| Summary::of(&mut p).p50_us),
    )
}

/// Streams `n` messages of `size` bytes one way in bursts; messages/s.
fn stream(d: &mut Duo, n: u64, size: usize) -> f64 {
    d.idle();
    let start = d.sink(1).got;
    let data = Message::from_slice(&vec![7u8; size]);
    let burst = 256u64;
    let mut sent = 0;
    let t = WallClock::now();
    while d.sink(1).got - start < n {
        if sent < n {
            let k = burst.min(n - sent);
            d.send(0, (0..k).map(|_| data.clone()));
            sent += k;
        }
        for side in 0..2 {
            d.run(side);
            d.pump(side);
        }
        if t.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    (d.sink(1).got - start) as f64 / secs
}

/// The demo's figures: the median round trip (µs) and the header bytes of
/// an ordinary 8-byte message.
pub fn quick(d: &mut Duo, count: usize) -> (f64, usize) {
    let (rtt, _) = round_trips(d, count);
    (rtt.p50_us, d.request.saturating_sub(ETH_HEADER + 8))
}

/// Measures one mode.
pub fn measure(d: &mut Duo, count: usize, stream_count: u64) -> Figures {
    let one_way_us = one_way(d, count);

    let (rtt, [to_link, turnaround, post_send, after, cpu]) = round_trips(d, count);
    let header_bytes = d.request.saturating_sub(ETH_HEADER + 8);
    let msgs_per_s = stream(d, stream_count, 8);
    let kb_per_s = stream(d, stream_count / 10, 1024);
    Figures {
        one_way_us: one_way_us.p50_us,
        one_way_mean_us: one_way_us.mean_us,
        rtt_us: rtt.p50_us,
        rtt_mean_us: rtt.mean_us,
        to_link_us: to_link,
        turnaround_us: turnaround,
        post_send_us: post_send,
        post_deliver_us: after,
        cpu_per_msg_us: cpu / 2.0,
        rt_per_s: 1e6 / cpu,
        msgs_per_s,
        mb_per_s: kb_per_s * 1024.0 / 1e6,
        header_bytes,
    }
}

/// Round-trip latency against offered round trips per second (Figure 5):
/// round trips start on a schedule; one that finds a host still busy waits.
/// The figure is the median. A round trip in which one step took over
/// [`PREEMPTED`] was preempted (the stack's steps take about a microsecond):
/// it would queue every later round trip behind the preemption, so it is
/// left out of the timeline, and counted.
pub fn figure5(d: &mut Duo, rates: &[f64], count: usize) -> (Vec<(f64, f64)>, usize) {
    let mut left_out = 0;
    d.sink(1).echo = true;
    d.idle();
    let mut out = Vec::new();
    for &rate in rates {
        let gap = 1e6 / rate;
        // Each host's timeline, µs.
        let (mut free_a, mut free_b) = (0.0f64, 0.0f64);
        let mut lat = Vec::with_capacity(count);
        let us = |x: Duration| x.as_secs_f64() * 1e6;
        for i in 0..count {
            let start = i as f64 * gap;
            let t = WallClock::now();
            d.send(0, std::iter::once(Message::from_slice(&[7; 8])));
            d.pump(0);
            let d1 = us(t.elapsed());
            let d2 = us(d.run(0));
            let d3 = us(d.run(1));
            d.pump(1);
            let d5 = us(d.run(0));
            let after = d.idle();
            let limit = us(PREEMPTED);
            if [d1, d2, d3, d5, us(after[0]), us(after[1])]
                .iter()
                .any(|&x| x > limit)
            {
                left_out += 1;
                continue;
            }
            let sent = start.max(free_a) + d1;
            let replied = sent.max(free_b) + d3;
            let done = replied.max(sent + d2) + d5;
            lat.push(((done - start) * 1e3) as u64);
            free_a = done + us(after[0]);
            free_b = replied + us(after[1]);
        }
        out.push((rate, Summary::of(&mut lat).p50_us));
    }
    d.sink(1).echo = false;
    (out, left_out)
}

/// A step longer than this was preempted.
pub const PREEMPTED: Duration = Duration::from_micros(100);

/// `n` round trips in the steps [`round_trips`] takes, but without a
/// clock read or a sample kept: an instruction count of this is the two
/// stacks' work (and the engines'), without the measurement's own.
pub fn exercise_untimed(d: &mut Duo, n: usize) {
    d.sink(1).echo = true;
    d.idle_untimed();
    for _ in 0..n {
        d.send(0, std::iter::once(Message::from_slice(&[7; 8])));
        d.pump(0);
        d.step(0);
        d.step(1);
        d.pump(1);
        d.step(0);
        d.idle_untimed();
    }
    d.sink(1).echo = false;
}

/// A workload for counting instructions (`crates/strata-pa/scripts/profile`):
/// `n` round trips of 8-byte messages, or `n` 8-byte messages streamed.
pub fn exercise(d: &mut Duo, rtt: bool, n: usize) {
    if rtt {
        round_trips(d, n);
    } else {
        stream(d, n as u64, 8);
    }
    d.idle();
}

/// The stack's figures over a real link.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RealLink {
    /// Round trip of an 8-byte message, µs (median).
    pub rtt_us: f64,
    /// Round trips measured (fewer than asked when time ran out).
    pub round_trips: usize,
    /// 8-byte messages per second streamed one way (packing with the PA).
    pub msgs_per_s: f64,
    /// Streamed messages delivered (fewer than asked when time ran out).
    pub streamed: u64,
}

/// The longest a real-link measurement runs.
const REAL_LIMIT: Duration = Duration::from_secs(10);

/// Messages streamed but not yet delivered at most: the window layer holds
/// what it cannot send, and the PA's backlog packs it, but neither should
/// grow without bound while the kernel drops what overflows its buffers.
const REAL_AHEAD: u64 = 2048;

/// The stack over a real link between two runtimes (`links`: each host's
/// link table), the PA on or off: `count` round trips of 8-byte messages
/// and `stream` 8-byte messages one way. One thread turns the two
/// runtimes in turn (busy polling), so a round trip is both hosts' work
/// and the kernel's, and the machine's other load matters less than with a
/// thread per host on two shared cores.
pub fn real_link(pa: bool, links: [&str; 2], count: usize, stream: u64) -> Result<RealLink> {
    use strata::link::{Runtime, RuntimeConfig};
    let mut rt = Vec::new();
    for n in [1u8, 2] {
        let cfg = example::host_config_on(n, links[n as usize - 1], pa, "")?;
        rt.push(Runtime::new(
            engine_of(n, &cfg)?,
            RuntimeConfig::busy_poll(),
        )?);
    }
    let top = rt[0]
        .engine()
        .proto_id(example::top(pa))
        .context("no stack")?;
    let mut ends = Vec::new();
    for (i, peer) in [(0usize, 2u8), (1, 1)] {
        ends.push(sink_end(rt[i].engine_mut(), top, peer)?);
    }
    let got = |rt: &Vec<Runtime>, side: usize| {
        rt[side]
            .engine()
            .app::<Sink>(ends[side].0)
            .map_or(0, |s| s.got)
    };
    let turn = |rt: &mut Vec<Runtime>| -> Result<()> {
        for r in rt.iter_mut() {
            r.run_for(Duration::from_micros(1))?;
        }
        Ok(())
    };
    let send = |rt: &mut Vec<Runtime>, n: u64| {
        let (app, s) = ends[0];
        let _ = rt[0].engine_mut().with_app(app, |_, cx| {
            for _ in 0..n {
                cx.send(s, Message::from_slice(&[7; 8]));
            }
        });
    };
    // Round trips: the peer echoes; one at a time.
    if let Some(sink) = rt[1].engine_mut().app_mut::<Sink>(ends[1].0) {
        sink.echo = true;
    }
    let start = WallClock::now();
    let mut samples = Vec::with_capacity(count);
    while samples.len() < count && start.elapsed() < REAL_LIMIT {
        let before = got(&rt, 0);
        let t = WallClock::now();
        send(&mut rt, 1);
        while got(&rt, 0) == before && start.elapsed() < REAL_LIMIT {
            turn(&mut rt)?;
        }
        if got(&rt, 0) > before {
            samples.push(nanos(t.elapsed()));
        }
    }
    let round_trips = samples.len();
    let rtt_us = Summary::of(&mut samples).p50_us;
    if let Some(sink) = rt[1].engine_mut().app_mut::<Sink>(ends[1].0) {
        sink.echo = false;
    }
    // Let the last acknowledgements settle, then stream.
    for _ in 0..100 {
        turn(&mut rt)?;
    }
    let base = got(&rt, 1);
    let (mut sent, burst) = (0u64, 64u64);
    let start = WallClock::now();
    while got(&rt, 1) - base < stream && start.elapsed() < REAL_LIMIT {
        if sent < stream && sent - (got(&rt, 1) - base) < REAL_AHEAD {
            let k = burst.min(stream - sent);
            send(&mut rt, k);
            sent += k;
        }
        turn(&mut rt)?;
    }
    let streamed = got(&rt, 1) - base;
    Ok(RealLink {
        rtt_us,
        round_trips,
        msgs_per_s: streamed as f64 / start.elapsed().as_secs_f64(),
        streamed,
    })
}
