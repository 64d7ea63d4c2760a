//! Seed 000 Figure 4: the latency of a 1-byte UDP ping-pong while N background
//! ping-pongs (1-byte or 1000-byte) load the same two hosts, under LLM and under
//! DAA with the foreground urgent.
//!
//! Each host is an engine on its own thread, in real time. The two are joined by
//! a wire that carries one frame at a time at a fixed rate: a host hands the wire
//! its next frame only when the last one has been serialised, so frames wait in
//! the engine's link queue — first come first served under LLM (the paper's
//! driver), most urgent first under DAA (Strata's). Frames that arrive wait in the
//! receiving engine's queue, ordered the same way. Every background client keeps
//! one request outstanding, so the load grows with N; the foreground is a
//! real-time flow: a 1-byte ping every `gap` (the paper's foreground also loops,
//! but a foreground that never pauses would, with strict priority, leave the
//! background only what it does not use, and measure that instead).

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread;
use std::time::{Duration, Instant as Wall};

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use strata::core::Priority;
use strata::{
    Addr, App, AppCx, Arch, Engine, HostBuilder, HostParams, Instant, LinkId, Message, PacketMeta,
    Participants, Qos, SessionRef,
};

use crate::stats::{Summary, nanos};

/// The service (UDP port and DAA identifier) of the foreground server.
const FOREGROUND: u16 = 7;
/// The service of the background server.
const BACKGROUND: u16 = 9;
/// Frames a host takes off the wire before it runs its engine again.
const RX_BATCH: usize = 64;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Fig4Setup {
    /// LLM or DAA.
    pub arch: Arch,
    /// Background ping-pongs.
    pub background: usize,
    /// Bytes each background message carries.
    pub bg_size: usize,
    /// The wire's rate, bits per second.
    pub rate: u64,
    /// Foreground round trips to time.
    pub samples: usize,
    /// Pause between a foreground answer and the next ping.
    pub gap: Duration,
}

/// One point of the figure.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Fig4Point {
    /// Architecture.
    pub arch: String,
    /// Background ping-pongs.
    pub background: usize,
    /// Their message size.
    pub bg_size: usize,
    /// Foreground round trips.
    pub foreground: Summary,
    /// Background round trips completed per second.
    pub background_per_s: f64,
}

/// Answers every message on the session it came from.
struct Echo;

impl App for Echo {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        if let Some(s) = s {
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

/// Keeps one message in flight: sends again when the answer arrives (after
/// `gap`, if any), and reports each round trip's wall-clock time when asked to.
struct Looper {
    session: Option<SessionRef>,
    payload: Bytes,
    sent_at: Wall,
    report: Option<Sender<u64>>,
    gap: Duration,
    done: u64,
}

impl Looper {
    fn send(&mut self, cx: &mut AppCx) {
        if let Some(s) = self.session {
            self.sent_at = Wall::now();
            cx.send(s, Message::from_bytes(self.payload.clone()));
        }
    }
}

impl App for Looper {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, cx: &mut AppCx) {
        if let Some(r) = &self.report {
            // The collector may have gone; then nobody wants the sample.
            let _ = r.send(nanos(self.sent_at.elapsed()));
        }
        self.done += 1;
        if self.gap.is_zero() {
            self.send(cx);
        } else {
            let at = cx.now() + self.gap;
            cx.set_timer(at, 0);
        }
    }

    fn timer(&mut self, _: u64, cx: &mut AppCx) {
        self.send(cx);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn host(n: u8, arch: Arch) -> Result<Engine> {
    Ok(HostBuilder::spec(
        "udp/ip/ethdaa",
        HostParams::numbered(n),
        "net0",
        strata::link::MEM,
    )
    .arch(arch)
    .option("udp", "checksum", false)
    .build()?)
}

fn serve(e: &mut Engine, port: u16) -> Result<()> {
    let udp = e.proto_id("udp").context("udp")?;
    let app = e.add_app(Box::new(Echo));
    let qos = Qos {
        app_id: Some(u32::from(port)),
        ..Qos::default()
    };
    e.with_app(app, |_, cx| {
        cx.open_enable(udp, Participants::local([Addr::Port(port)]), qos)
    })??;
    Ok(())
}

fn looper(
    e: &mut Engine,
    port: u16,
    size: usize,
    urgent: bool,
    gap: Duration,
    report: Option<Sender<u64>>,
) -> Result<strata::AppId> {
    let udp = e.proto_id("udp").context("udp")?;
    let server = HostParams::numbered(2).address.address();
    let app = e.add_app(Box::new(Looper {
        session: None,
        payload: Bytes::from(vec![0x5a; size]),
        sent_at: Wall::now(),
        report,
        gap,
        done: 0,
    }));
    let qos = Qos {
        priority: if urgent {
            Priority(1)
        } else {
            Priority::BEST_EFFORT
        },
        app_id: None,
    };
    e.with_app(app, |a, cx| {
        let parts = Participants::remote([
            Addr::AppId(u32::from(port)),
            Addr::Ip(server),
            Addr::Port(port),
        ])
        .with_local([Addr::Port(0)]);
        let s = cx.open(udp, parts, qos)?;
        let me = a
            .as_any_mut()
            .downcast_mut::<Looper>()
            .ok_or(strata::UpiError::NoSuchSession)?;
        me.session = Some(s);
        me.sent_at = Wall::now();
        cx.send(s, Message::from_bytes(me.payload.clone()));
        Ok::<_, strata::UpiError>(())
    })??;
    Ok(app)
}

/// Runs one host until `stop`: takes frames off the wire, runs the engine, and
/// puts frames on the wire no faster than `rate`.
fn run_host(
    mut engine: Engine,
    rx: Receiver<Message>,
    tx: Sender<Message>,
    rate: u64,
    epoch: Wall,
    stop: Arc<AtomicBool>,
) -> Engine {
    let link = LinkId(0);
    let mut free_at = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let now = nanos(epoch.elapsed());
        for frame in rx.try_iter().take(RX_BATCH) {
            engine.receive(link, frame);
        }
        engine.run(Instant::from_nanos(now));
        if now >= free_at
            && let Some(frame) = engine.poll_transmit(link)
        {
            free_at = now.max(free_at) + frame.len() as u64 * 8 * 1_000_000_000 / rate;
            if tx.send(frame).is_err() {
                break;
            }
        }
    }
    engine
}

/// Measures one point.
pub fn measure(setup: &Fig4Setup) -> Result<Fig4Point> {
    let (mut a, mut b) = (host(1, setup.arch)?, host(2, setup.arch)?);
    serve(&mut b, FOREGROUND)?;
    serve(&mut b, BACKGROUND)?;
    let (samples_tx, samples_rx) = channel();
    let bg: Vec<strata::AppId> = (0..setup.background)
        .map(|_| {
            looper(
                &mut a,
                BACKGROUND,
                setup.bg_size,
                false,
                Duration::ZERO,
                None,
            )
        })
        .collect::<Result<_>>()?;
    looper(&mut a, FOREGROUND, 1, true, setup.gap, Some(samples_tx))?;

    let epoch = Wall::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (a_tx, b_rx) = channel();
    let (b_tx, a_rx) = channel();
    let rate = setup.rate;
    let stop_a = Arc::clone(&stop);
    let stop_b = Arc::clone(&stop);
    let host_a = thread::spawn(move || run_host(a, a_rx, a_tx, rate, epoch, stop_a));
    let host_b = thread::spawn(move || run_host(b, b_rx, b_tx, rate, epoch, stop_b));

    // Discard the first round trips (ARP, path learning), then time.
    let warmup = 50;
    let mut samples = Vec::with_capacity(setup.samples);
    let deadline = Wall::now() + Duration::from_secs(60);
    let started = Wall::now();
    for i in 0..warmup + setup.samples {
        let left = deadline.saturating_duration_since(Wall::now());
        match samples_rx.recv_timeout(left) {
            Ok(ns) if i >= warmup => samples.push(ns),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let a = host_a.join().map_err(|_| anyhow!("host a panicked"))?;
    host_b.join().map_err(|_| anyhow!("host b panicked"))?;
    anyhow::ensure!(
        samples.len() == setup.samples,
        "only {} of {} foreground round trips in 60 s",
        samples.len(),
        setup.samples
    );
    let background_done: u64 = bg
        .iter()
        .filter_map(|&app| a.app::<Looper>(app).map(|l| l.done))
        .sum();
    Ok(Fig4Point {
        arch: setup.arch.to_string(),
        background: setup.background,
        bg_size: setup.bg_size,
        foreground: Summary::of(&mut samples),
        background_per_s: background_done as f64 / elapsed.as_secs_f64(),
    })
}
