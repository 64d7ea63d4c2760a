//! Round trips of the seed 000 ping-pong on the zero-delay in-memory link: what
//! the protocols themselves cost, with nothing else in the way.

use std::time::Instant as Wall;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use strata::link::MemPair;
use strata::{Arch, HostBuilder, HostParams, Instant};

use crate::pingpong::{self, Layer, Peer, PingPong, PingPongClient};
use crate::stats::{Summary, nanos};

/// What to measure.
#[derive(Clone, Debug)]
pub struct RttSetup {
    /// The stack spec, e.g. `udp/ip/eth`.
    pub stack: String,
    /// The dispatch architecture of both hosts.
    pub arch: Arch,
    /// Whether UDP computes and verifies checksums (seed 000 ran without).
    pub checksum: bool,
}

/// A client and a server host joined by a `MemPair`, with a ping-pong installed.
pub struct MemPingPong {
    pair: MemPair,
    pp: PingPong,
    now: Instant,
}

impl MemPingPong {
    /// Builds both hosts and the ping-pong.
    pub fn new(setup: &RttSetup) -> Result<MemPingPong> {
        let layer = Layer::of_spec(&setup.stack)
            .with_context(|| format!("no ping-pong for the top of '{}'", setup.stack))?;
        let build = |n: u8| {
            HostBuilder::spec(
                &setup.stack,
                HostParams::numbered(n),
                "net0",
                strata::link::MEM,
            )
            .arch(setup.arch)
            .option("udp", "checksum", setup.checksum)
            .build()
        };
        let server_params = HostParams::numbered(2);
        let mut client = build(1)?;
        let mut server = build(2)?;
        let peer = Peer {
            mac: server_params.mac,
            ip: server_params.address.address(),
        };
        let proto = pingpong::top_of(&setup.stack).unwrap_or_default();
        let pp = pingpong::install(&mut client, &mut server, layer, proto, peer, false)?;
        let pair = MemPair::new(client, server, "net0")?;
        Ok(MemPingPong {
            pair,
            pp,
            now: Instant::ZERO,
        })
    }

    /// One round trip with `payload`; fails if the pong does not come back.
    pub fn round_trip(&mut self, payload: &Bytes) -> Result<()> {
        let before = self.pp.received(self.pair.a());
        self.pp.ping(self.pair.a(), payload);
        self.pair.pump(self.now);
        if self.pp.received(self.pair.a()) != before + 1 {
            bail!("the pong did not come back");
        }
        Ok(())
    }

    /// Makes the client keep the last reply's bytes (for tests).
    pub fn keep_replies(&mut self) {
        let client = self.pp.client;
        if let Some(c) = self.pair.a().app_mut::<PingPongClient>(client) {
            c.keep = true;
        }
    }

    /// The bytes of the last reply, when kept.
    pub fn last_reply(&mut self) -> Option<Vec<u8>> {
        let client = self.pp.client;
        self.pair.a().app::<PingPongClient>(client)?.last.clone()
    }

    /// A round trip whose request has one bit flipped at byte `at` of its first
    /// frame on the way to the server (a test of the checksum path).
    pub fn round_trip_corrupted(&mut self, payload: &Bytes, at: usize) -> Result<()> {
        let before = self.pp.received(self.pair.a());
        self.pp.ping(self.pair.a(), payload);
        let (a, b) = self.pair.engines();
        a.run(self.now);
        let link = a.link_id("net0").context("the link")?;
        let mut first = true;
        while let Some(frame) = a.poll_transmit(link) {
            let mut bytes = frame.to_vec();
            if first && bytes.len() > at {
                bytes[at] ^= 0x10;
            }
            first = false;
            b.receive(link, strata::Message::from(bytes));
        }
        self.pair.pump(self.now);
        if self.pp.received(self.pair.a()) != before + 1 {
            bail!("the pong did not come back");
        }
        Ok(())
    }

    /// `count` timed round trips of `size` bytes after `warmup` untimed ones;
    /// returns the samples in nanoseconds.
    pub fn measure(&mut self, size: usize, warmup: usize, count: usize) -> Result<Vec<u64>> {
        let payload = Bytes::from(vec![0x5a; size]);
        for _ in 0..warmup {
            self.round_trip(&payload)?;
        }
        let mut samples = Vec::with_capacity(count);
        for _ in 0..count {
            let t0 = Wall::now();
            self.round_trip(&payload)?;
            samples.push(nanos(t0.elapsed()));
        }
        Ok(samples)
    }

    /// The client and server engines.
    pub fn engines(&mut self) -> (&mut strata::Engine, &mut strata::Engine) {
        self.pair.engines()
    }
}

/// One row of `strata rtt`: a stack, architecture and size, summarised.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RttRow {
    /// Stack spec.
    pub stack: String,
    /// Architecture.
    pub arch: String,
    /// Link kind.
    pub link: String,
    /// Payload bytes.
    pub size: usize,
    /// Round trips measured.
    pub count: usize,
    /// Mean round trip, µs.
    pub rtt_us_mean: f64,
    /// Median round trip, µs.
    pub rtt_us_p50: f64,
    /// 99th percentile round trip, µs.
    pub rtt_us_p99: f64,
}

/// Measures every size on the in-memory link.
pub fn rtt_mem(
    setup: &RttSetup,
    sizes: &[usize],
    warmup: usize,
    count: usize,
) -> Result<Vec<RttRow>> {
    let mut pp = MemPingPong::new(setup)?;
    sizes
        .iter()
        .map(|&size| {
            let mut samples = pp.measure(size, warmup, count)?;
            let s = Summary::of(&mut samples);
            Ok(RttRow {
                stack: setup.stack.clone(),
                arch: setup.arch.to_string(),
                link: "mem".into(),
                size,
                count,
                rtt_us_mean: s.mean_us,
                rtt_us_p50: s.p50_us,
                rtt_us_p99: s.p99_us,
            })
        })
        .collect()
}
