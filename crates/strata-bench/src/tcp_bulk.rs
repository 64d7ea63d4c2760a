//! Bulk TCP transfer with Strata: an in-engine source that writes as fast as
//! TCP takes data and a sink that counts what arrives, and [`MemBulk`], two
//! hosts back to back on the zero-delay in-memory link (`strata bench
//! tcp-peers`). The same applications drive Strata's side of the real-link
//! benchmarks (`tcp-veth`, `tcp-wan`) on a runtime.
//!
//! The source hands TCP one preallocated chunk again and again: Strata's
//! send buffer keeps the application's own bytes (a `Bytes` clone, no copy),
//! so the application does no per-byte work, as smoltcp's benchmark
//! application commits ring space without writing it. The sink counts the
//! bytes of each delivery without copying them, as smoltcp's benchmark
//! dequeues them.

use std::any::Any;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant as Wall};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use strata::core::Reply;
use strata::link::MemPair;
use strata::proto::tcp::{self, ConnInfo};
use strata::{
    Addr, App, AppCx, AppEvent, AppId, Arch, Control, Engine, HostBuilder, HostParams, Instant,
    Message, PacketMeta, Participants, ProtoId, Qos, SessionRef,
};

use crate::cpu::thread_cpu;
use crate::throughput::Batch;

/// The sink's port (the discard port's neighbour, as iperf's 5001).
pub const PORT: u16 = 5001;

/// Bytes the source hands TCP per write.
pub const CHUNK: usize = 64 * 1024;

/// Connects and writes whatever credit it is given, as fast as `Control::Write`
/// takes it; told `Writable`, it writes again.
pub struct BulkSource {
    tcp: ProtoId,
    chunk: Bytes,
    /// The connection, once established.
    pub session: Option<SessionRef>,
    /// Bytes it may still write.
    credit: u64,
    /// Bytes TCP took.
    pub written: u64,
    /// The connection ended, with the error if any.
    pub closed: Option<Option<strata::UpiError>>,
}

impl BulkSource {
    /// A source on protocol `tcp` writing copies of one `CHUNK` of 0x5a.
    pub fn new(tcp: ProtoId) -> BulkSource {
        BulkSource {
            tcp,
            chunk: Bytes::from(vec![0x5a; CHUNK]),
            session: None,
            credit: 0,
            written: 0,
            closed: None,
        }
    }

    /// Allows `bytes` more and writes what TCP takes now.
    pub fn give(&mut self, bytes: u64, cx: &mut AppCx) {
        self.credit += bytes;
        self.pump(cx);
    }

    /// Writes until TCP refuses or the credit runs out.
    fn pump(&mut self, cx: &mut AppCx) {
        let Some(s) = self.session else { return };
        while self.credit > 0 {
            let len = (self.credit as usize).min(CHUNK);
            let msg = Message::from_bytes(self.chunk.slice(..len));
            let op = Control::Write(msg);
            let Ok(Reply::Size(n)) = cx.control(self.tcp, Some(s.sess), op) else {
                return;
            };
            self.credit -= n as u64;
            self.written += n as u64;
            if n < len {
                return;
            }
        }
    }
}

impl App for BulkSource {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match event {
            AppEvent::Connected(s) => {
                self.session = Some(s);
                self.pump(cx);
            }
            AppEvent::Writable(_) => self.pump(cx),
            AppEvent::Closed { error, .. } => self.closed = Some(error),
            _ => {}
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Listens and counts every byte that arrives.
#[derive(Default)]
pub struct BulkSink {
    /// The accepted connection.
    pub session: Option<SessionRef>,
    /// Bytes received.
    pub bytes: u64,
    /// Deliveries (each a segment or a run of segments made contiguous).
    pub deliveries: u64,
}

impl App for BulkSink {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        self.bytes += msg.len() as u64;
        self.deliveries += 1;
    }

    fn event(&mut self, event: AppEvent, _: &mut AppCx) {
        if let AppEvent::OpenDone { session, .. } = event {
            self.session = Some(session);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Installs a listening [`BulkSink`] on `engine`'s TCP at [`PORT`].
pub fn install_sink(engine: &mut Engine) -> Result<AppId> {
    let tcp = strata::apps::tcp_of(engine).context("the stack has no TCP")?;
    let sink = engine.add_app(Box::new(BulkSink::default()));
    engine.with_app(sink, |_, cx| {
        cx.open_enable(tcp, Participants::local([Addr::Port(PORT)]), Qos::default())
    })??;
    Ok(sink)
}

/// The bytes the [`BulkSink`] installed as `sink` on `engine` has counted
/// (0 when it is not there).
pub fn sink_bytes(engine: &Engine, sink: AppId) -> u64 {
    engine
        .app::<BulkSink>(sink)
        .map_or(0, |s: &BulkSink| s.bytes)
}

/// Resets the connection the [`BulkSink`] installed as `sink` accepted, if
/// any (`tcp::Abort`), so that its peer stops sending at once.
pub fn abort_sink(engine: &mut Engine, sink: AppId) {
    let Some(session) = engine.app::<BulkSink>(sink).and_then(|s| s.session) else {
        return;
    };
    let _ = engine.control(
        session.proto,
        Some(session.sess),
        Control::Private(Box::new(tcp::Abort)),
    );
}

/// Installs a [`BulkSource`] on `engine` connecting to `server`:[`PORT`].
pub fn install_source(engine: &mut Engine, server: Ipv4Addr) -> Result<(AppId, SessionRef)> {
    let tcp = strata::apps::tcp_of(engine).context("the stack has no TCP")?;
    let source = engine.add_app(Box::new(BulkSource::new(tcp)));
    let session = engine.with_app(source, |_, cx| {
        let parts =
            Participants::remote([Addr::Ip(server), Addr::Port(PORT)]).with_local([Addr::Port(0)]);
        cx.open(tcp, parts, Qos::default())
    })??;
    Ok((source, session))
}

/// The sender's connection record, as `tcp::Info` answers it (whichever
/// TCP the stack has).
pub fn sender_info(engine: &mut Engine, session: SessionRef) -> Option<ConnInfo> {
    let op = Control::Private(Box::new(tcp::Info));
    match engine.control(session.proto, Some(session.sess), op) {
        Ok(Reply::Private(info)) => info.downcast::<ConnInfo>().ok().map(|i| *i),
        _ => None,
    }
}

/// Settings of the Strata hosts of a bulk transfer.
#[derive(Clone, Debug)]
pub struct BulkSetup {
    /// The TCP: Strata's `tcp`, or smoltcp's imported one, `smoltcp-tcp`.
    pub tcp: &'static str,
    /// Dispatch architecture.
    pub arch: Arch,
    /// Send and receive buffer of every connection, fixed (no autotuning), so
    /// that the window matches a peer's fixed buffers; `None` keeps TCP's
    /// defaults, which autotune as Linux's do.
    pub buffer: Option<usize>,
}

/// A host running `setup.tcp` over `ip/eth` on link `kind` with `setup`'s
/// settings.
pub fn bulk_host(kind: &str, params: HostParams, setup: &BulkSetup) -> HostBuilder {
    let spec = format!("{}/ip/eth", setup.tcp);
    let mut b = HostBuilder::spec(&spec, params, "net0", kind).arch(setup.arch);
    if let Some(size) = setup.buffer {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        // Keys a TCP does not have are not given to it (smoltcp-tcp's rings
        // are fixed: it has no `_max`).
        for key in ["rcvbuf", "rcvbuf_max", "sndbuf", "sndbuf_max"] {
            b = b.option(setup.tcp, key, size);
        }
    }
    b
}

/// Gives the source installed as `source` on `engine` `bytes` more to send.
pub fn give(engine: &mut Engine, source: AppId, bytes: u64) -> Result<()> {
    engine
        .with_app(source, |app, cx| {
            if let Some(s) = app.as_any_mut().downcast_mut::<BulkSource>() {
                s.give(bytes, cx);
            }
        })
        .context("the source is installed")
}

/// A Strata sender and receiver joined by a `MemPair`, connected.
pub struct MemBulk {
    pair: MemPair,
    source: AppId,
    sink: AppId,
    session: SessionRef,
    epoch: Wall,
    /// When set, engine time advances by this much per turn instead of
    /// following the wall clock: a run that repeats exactly (for tests).
    step: Option<Duration>,
    ticks: u64,
}

impl MemBulk {
    /// Builds both hosts, with Ethernet payloads of up to `mtu` bytes and TCP
    /// offloads on the link when `offload` ([`MemPair::set_offload`]), and
    /// opens the connection.
    pub fn new(setup: &BulkSetup, mtu: usize, offload: bool) -> Result<MemBulk> {
        let server = HostParams::numbered(2);
        let host = |params| {
            bulk_host(strata::link::MEM, params, setup)
                .option("eth", "mtu", i64::try_from(mtu).unwrap_or(i64::MAX))
                .build()
        };
        let mut a = host(HostParams::numbered(1))?;
        let mut b = host(server.clone())?;
        let sink = install_sink(&mut b)?;
        let (source, session) = install_source(&mut a, server.address.address())?;
        let mut pair = MemPair::new(a, b, "net0")?;
        pair.set_offload(offload);
        let mut bulk = MemBulk {
            pair,
            source,
            sink,
            session,
            epoch: Wall::now(),
            step: None,
            ticks: 0,
        };
        let deadline = Wall::now() + Duration::from_secs(5);
        while bulk.source_app().session.is_none() {
            let now = bulk.now();
            bulk.pair.pump(now);
            if Wall::now() > deadline {
                bail!("the handshake did not complete on the in-memory link");
            }
        }
        Ok(bulk)
    }

    /// Engine time: wall time since the pair was made, so that timers (the
    /// delayed ACK, the RTO) run as they would on a real link.
    fn now(&mut self) -> Instant {
        if let Some(step) = self.step {
            self.ticks += 1;
            let at = step.as_nanos().saturating_mul(u128::from(self.ticks));
            return Instant::from_nanos(u64::try_from(at).unwrap_or(u64::MAX));
        }
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// From now on engine time advances by `step` per turn of the link
    /// rather than with the wall clock, so that a run repeats exactly
    /// whatever the machine's load (tests; the benchmarks keep the wall
    /// clock, as a real link would).
    pub fn step_time(&mut self, step: Duration) {
        let now = self.now();
        let step_ns = u64::try_from(step.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.ticks = now.as_nanos() / step_ns;
        self.step = Some(step);
    }

    fn source_app(&mut self) -> &mut BulkSource {
        let id = self.source;
        self.pair
            .a()
            .app_mut::<BulkSource>(id)
            .expect("the source is installed")
    }

    fn received(&mut self) -> u64 {
        let id = self.sink;
        self.pair.b().app::<BulkSink>(id).map_or(0, |s| s.bytes)
    }

    /// Moves `bytes` from the source to the sink; times it.
    pub fn transfer(&mut self, bytes: u64) -> Result<Batch> {
        let (wall0, cpu0) = (Wall::now(), thread_cpu());
        self.move_bytes(bytes)?;
        Ok(Batch {
            bytes,
            wall: wall0.elapsed(),
            cpu: thread_cpu() - cpu0,
        })
    }

    /// Moves `bytes` from the source to the sink, untimed.
    pub fn move_bytes(&mut self, bytes: u64) -> Result<()> {
        let target = self.received() + bytes;
        let limit = Wall::now() + Duration::from_secs(60);
        let source = self.source;
        give(self.pair.a(), source, bytes)?;
        while self.received() < target {
            let now = self.now();
            self.pair.pump(now);
            if Wall::now() > limit {
                bail!("the transfer stalled: {:?}", self.sender());
            }
        }
        Ok(())
    }

    /// The sender's connection record.
    pub fn sender(&mut self) -> Option<ConnInfo> {
        let session = self.session;
        sender_info(self.pair.a(), session)
    }

    /// Segments the receive offload merged, both ways.
    pub fn merged(&self) -> u64 {
        self.pair.merged()
    }

    /// Deliveries the sink has had.
    pub fn deliveries(&mut self) -> u64 {
        let id = self.sink;
        self.pair
            .b()
            .app::<BulkSink>(id)
            .map_or(0, |s| s.deliveries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> BulkSetup {
        BulkSetup {
            tcp: "tcp",
            arch: Arch::Llm,
            buffer: Some(256 * 1024),
        }
    }

    #[test]
    fn a_bulk_transfer_on_the_in_memory_link_moves_every_byte_without_loss() {
        let mut bulk = MemBulk::new(&setup(), 1500, false).unwrap();
        for _ in 0..3 {
            let b = bulk.transfer(4 << 20).unwrap();
            assert_eq!(b.bytes, 4 << 20);
        }
        let info = bulk.sender().unwrap();
        assert_eq!(info.stats.retransmits, 0, "{info:?}");
        assert_eq!(info.mss, 1448, "a 1500-byte MTU with timestamps");
        assert_eq!(bulk.merged(), 0, "no offload asked for");
    }

    #[test]
    fn with_offload_super_segments_are_cut_and_runs_merged_on_the_way() {
        let mut bulk = MemBulk::new(&setup(), 1500, true).unwrap();
        bulk.transfer(4 << 20).unwrap();
        let info = bulk.sender().unwrap();
        assert_eq!(info.stats.retransmits, 0, "{info:?}");
        assert_eq!(info.mss, 1448, "segments stay Ethernet-sized on the wire");
        let segments = (4u64 << 20) / 1448;
        assert!(
            bulk.merged() * 10 > segments * 9,
            "nearly all of {segments} segments merged: {}",
            bulk.merged()
        );
        assert!(
            bulk.deliveries() * 20 < segments,
            "{} deliveries",
            bulk.deliveries()
        );
    }
}
