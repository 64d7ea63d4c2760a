//! Seed 004 beyond the paper: smoltcp's TCP imported into Strata
//! (`smoltcp-tcp`, through the encapsulation module of `strata-compat`)
//! beside Strata's own TCP and beside smoltcp on its own — bulk throughput
//! and the round trip of one byte, in memory, one thread, side by side in
//! one run, alternating so that whatever else the machine does hits all
//! three alike.
//!
//! The three carry the same segments: MTU 1500 (MSS 1448 with timestamps),
//! checksums computed and verified in software, the same buffer sizes, and
//! CUBIC (smoltcp's, on its own and imported; Strata's for `tcp`). No link
//! offloads: every segment goes through every layer, so what differs is what
//! a segment costs. Strata's two hosts (`smoltcp-tcp/ip/eth` or
//! `tcp/ip/eth`) are joined by the zero-delay in-memory link; smoltcp on its
//! own runs a client and a server socket on one interface over an in-memory
//! loopback (`peers::smoltcp_tcp`).
//!
//! The applications: in bulk, Strata's source hands its TCP one 64 KB buffer
//! again and again (`tcp::Write`) and the sink counts what is delivered;
//! smoltcp's client commits ring space without writing it and its server
//! dequeues without reading. So the imported TCP pays what the module must
//! do to be a Strata protocol — copy the application's bytes into smoltcp's
//! ring and out of it into a message, rebuild each received segment's
//! datagram in one buffer, and Strata's Ethernet and IPv4 around it — and
//! smoltcp on its own pays none of it. The ratios say how much that is.

use std::fmt;
use std::time::Instant as Wall;

use anyhow::{Result, ensure};
use bytes::Bytes;
use smoltcp::socket::tcp::CongestionControl;
use strata::Arch;

use crate::peers::smoltcp_tcp::SmolTcpBulk;
use crate::peers::smoltcp_tcp_rtt::SmolTcpPingPong;
use crate::rtt::{MemPingPong, RttSetup};
use crate::stats::{Summary, nanos};
use crate::tcp_bulk::{BulkSetup, MemBulk};
use crate::throughput::Rate;

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Strata's dispatch architecture.
    pub arch: Arch,
    /// Send and receive buffer of every socket, bytes.
    pub buffer: usize,
    /// Largest IP packet of every link, bytes.
    pub mtu: usize,
    /// Bytes per bulk batch.
    pub batch: u64,
    /// Bulk rounds; each runs a batch of each system, the order turned every
    /// round.
    pub rounds: usize,
    /// Bytes per round trip.
    pub size: usize,
    /// Round-trip rounds; each runs `rtt_batch` round trips of each system.
    pub rtt_rounds: usize,
    /// Round trips per system per round.
    pub rtt_batch: usize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            arch: Arch::Llm,
            buffer: 256 * 1024,
            mtu: 1500,
            batch: 100_000_000,
            rounds: 6,
            size: 1,
            rtt_rounds: 20,
            rtt_batch: 1_000,
        }
    }
}

/// One measure of the three systems.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Three<T> {
    /// smoltcp's TCP imported into Strata.
    pub imported: T,
    /// Strata's own TCP.
    pub native: T,
    /// smoltcp on its own.
    pub smoltcp: T,
}

/// The comparison's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// What ran.
    #[serde(skip)]
    pub setup: Setup,
    /// Bulk throughput.
    pub bulk: Three<Rate>,
    /// Bulk throughput of the imported TCP with the in-memory link's
    /// receive offload (runs of segments merged before Strata's Ethernet
    /// sees them, as Linux's GRO on a veth): smoltcp then takes one large
    /// segment per run. smoltcp sends one segment per MSS (the segmentation
    /// offload it publishes needs its IPv6 too, see docs/design.md), so the
    /// sender gains nothing.
    pub imported_offload: Rate,
    /// Runs of segments merged on receive, per segment sent, with the
    /// receive offload.
    pub merged_share: f64,
    /// Round trips.
    pub rtt: Three<Summary>,
    /// Segment size of the imported TCP's connection, bytes.
    pub imported_mss: u32,
    /// Segment size of Strata's TCP's connection, bytes.
    pub native_mss: u32,
}

/// Time per byte of `a` over that of `b` (above 1: `a` costs more).
fn bulk_cost(a: &Rate, b: &Rate) -> f64 {
    b.mean_mb_s / a.mean_mb_s
}

impl Report {
    /// Imported over smoltcp on its own, bulk (time per byte).
    pub fn imported_bulk(&self) -> f64 {
        bulk_cost(&self.bulk.imported, &self.bulk.smoltcp)
    }

    /// Imported over smoltcp on its own, median round trip (the median:
    /// a round trip is a microsecond or two, and the mean of a loaded
    /// machine's is its preemptions).
    pub fn imported_rtt(&self) -> f64 {
        self.rtt.imported.p50_us / self.rtt.smoltcp.p50_us
    }

    /// Strata's TCP over smoltcp on its own, bulk (time per byte).
    pub fn native_bulk(&self) -> f64 {
        bulk_cost(&self.bulk.native, &self.bulk.smoltcp)
    }

    /// Strata's TCP over smoltcp on its own, median round trip.
    pub fn native_rtt(&self) -> f64 {
        self.rtt.native.p50_us / self.rtt.smoltcp.p50_us
    }

    /// The imported TCP's ratio to smoltcp on its own: the larger of the
    /// two, as the goal (at most 1.2) holds for both.
    pub fn imported(&self) -> f64 {
        self.imported_bulk().max(self.imported_rtt())
    }

    /// Strata's TCP's ratio to smoltcp on its own, the larger of the two.
    pub fn native(&self) -> f64 {
        self.native_bulk().max(self.native_rtt())
    }
}

/// Runs the comparison.
pub fn run(setup: &Setup) -> Result<Report> {
    ensure!(
        setup.rounds > 0 && setup.rtt_rounds > 0 && setup.rtt_batch > 0 && setup.size > 0,
        "every count must be at least 1"
    );
    let (bulk, (imported_offload, merged_share), imported_mss, native_mss) = bulk(setup)?;
    let rtt = round_trips(setup)?;
    Ok(Report {
        setup: setup.clone(),
        bulk,
        imported_offload,
        merged_share,
        rtt,
        imported_mss,
        native_mss,
    })
}

/// The three systems' rates, the imported one's with receive offload and
/// its share of segments merged, and the two Strata connections' MSS.
type BulkResult = (Three<Rate>, (Rate, f64), u32, u32);

fn bulk(setup: &Setup) -> Result<BulkResult> {
    let host = |tcp| BulkSetup {
        tcp,
        arch: setup.arch,
        buffer: Some(setup.buffer),
    };
    let mut imported = MemBulk::new(&host("smoltcp-tcp"), setup.mtu, false)?;
    let mut offload = MemBulk::new(&host("smoltcp-tcp"), setup.mtu, true)?;
    let mut native = MemBulk::new(&host("tcp"), setup.mtu, false)?;
    let mut smol = SmolTcpBulk::with_congestion(setup.buffer, setup.mtu, CongestionControl::Cubic)?;
    // Warm up all three: caches, pools, the congestion windows.
    imported.transfer(setup.batch)?;
    offload.transfer(setup.batch)?;
    native.transfer(setup.batch)?;
    smol.transfer(setup.batch)?;
    let (mut i, mut o, mut n, mut m) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..setup.rounds {
        // Each takes each place in the order in turn.
        for slot in 0..4 {
            match (round + slot) % 4 {
                0 => i.push(imported.transfer(setup.batch)?),
                1 => o.push(offload.transfer(setup.batch)?),
                2 => n.push(native.transfer(setup.batch)?),
                _ => m.push(smol.transfer(setup.batch)?),
            }
        }
    }
    let mss = |b: &mut MemBulk| b.sender().map_or(0, |i| i.mss);
    let sent = offload.sender().map_or(0, |i| i.stats.segs_out).max(1);
    Ok((
        Three {
            imported: Rate::of(&i),
            native: Rate::of(&n),
            smoltcp: Rate::of(&m),
        },
        (Rate::of(&o), offload.merged() as f64 / sent as f64),
        mss(&mut imported),
        mss(&mut native),
    ))
}

fn round_trips(setup: &Setup) -> Result<Three<Summary>> {
    let strata = |stack: &str| {
        MemPingPong::new(&RttSetup {
            stack: stack.into(),
            arch: setup.arch,
            checksum: true,
        })
    };
    let mut imported = strata("smoltcp-tcp/ip/eth")?;
    let mut native = strata("tcp/ip/eth")?;
    let mut smol = SmolTcpPingPong::new(setup.buffer, setup.mtu, CongestionControl::Cubic)?;
    let payload = Bytes::from(vec![0x5a; setup.size]);
    for _ in 0..setup.rtt_batch {
        imported.round_trip(&payload)?;
        native.round_trip(&payload)?;
        smol.round_trip(&payload);
    }
    let count = setup.rtt_rounds * setup.rtt_batch;
    let (mut i, mut n, mut m) = (
        Vec::with_capacity(count),
        Vec::with_capacity(count),
        Vec::with_capacity(count),
    );
    for _ in 0..setup.rtt_rounds {
        for _ in 0..setup.rtt_batch {
            let t0 = Wall::now();
            imported.round_trip(&payload)?;
            i.push(nanos(t0.elapsed()));
        }
        for _ in 0..setup.rtt_batch {
            let t0 = Wall::now();
            native.round_trip(&payload)?;
            n.push(nanos(t0.elapsed()));
        }
        for _ in 0..setup.rtt_batch {
            let t0 = Wall::now();
            let back = smol.round_trip(&payload);
            m.push(nanos(t0.elapsed()));
            ensure!(back == setup.size, "smoltcp lost a pong");
        }
    }
    Ok(Three {
        imported: Summary::of(&mut i),
        native: Summary::of(&mut n),
        smoltcp: Summary::of(&mut m),
    })
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.setup;
        writeln!(
            f,
            "smoltcp's TCP imported into Strata (seed 004) beside Strata's TCP and smoltcp on its own: \
             in memory, one thread, MTU {}, checksums on, {} KiB buffers, CUBIC, no offloads ({})",
            s.mtu,
            s.buffer / 1024,
            s.arch
        )?;
        writeln!(
            f,
            "Bulk, {} rounds × {} MB each (MSS: imported {}, Strata {}):",
            s.rounds,
            s.batch / 1_000_000,
            self.imported_mss,
            self.native_mss
        )?;
        writeln!(
            f,
            "  smoltcp-tcp/ip/eth, mem link   : {}",
            self.bulk.imported
        )?;
        writeln!(
            f,
            "  the same, receive offload      : {}  ({:.0} % of segments merged)",
            self.imported_offload,
            self.merged_share * 100.0
        )?;
        writeln!(f, "  tcp/ip/eth, mem link           : {}", self.bulk.native)?;
        writeln!(
            f,
            "  smoltcp on its own, loopback   : {}",
            self.bulk.smoltcp
        )?;
        writeln!(
            f,
            "Round trip, {} B, {} rounds × {} each:",
            s.size, s.rtt_rounds, s.rtt_batch
        )?;
        writeln!(
            f,
            "  smoltcp-tcp/ip/eth, mem link   : {}",
            self.rtt.imported
        )?;
        writeln!(f, "  tcp/ip/eth, mem link           : {}", self.rtt.native)?;
        writeln!(f, "  smoltcp on its own, loopback   : {}", self.rtt.smoltcp)?;
        writeln!(
            f,
            "ratio smoltcp-in-strata/smoltcp bulk = {:.3}  (time per byte, mean; above 1: costs more than smoltcp on its own; goal ≤ 1.2)",
            self.imported_bulk()
        )?;
        writeln!(
            f,
            "ratio smoltcp-in-strata/smoltcp rtt = {:.3}  (median round trip)",
            self.imported_rtt()
        )?;
        writeln!(
            f,
            "ratio smoltcp-in-strata with receive offload/smoltcp bulk = {:.3}",
            bulk_cost(&self.imported_offload, &self.bulk.smoltcp)
        )?;
        writeln!(
            f,
            "ratio smoltcp-in-strata/strata-tcp bulk = {:.3}",
            bulk_cost(&self.bulk.imported, &self.bulk.native)
        )?;
        writeln!(
            f,
            "ratio smoltcp-in-strata/strata-tcp rtt = {:.3}",
            self.rtt.imported.p50_us / self.rtt.native.p50_us
        )?;
        writeln!(
            f,
            "ratio strata-tcp/smoltcp bulk = {:.3}",
            self.native_bulk()
        )?;
        writeln!(f, "ratio strata-tcp/smoltcp rtt = {:.3}", self.native_rtt())?;
        writeln!(
            f,
            "ratio strata-tcp/smoltcp = {:.3}  (the larger of bulk and rtt)",
            self.native()
        )?;
        write!(
            f,
            "ratio smoltcp-in-strata/smoltcp = {:.3}  (the larger of bulk and rtt)",
            self.imported()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_measures_all_three_and_ends_with_the_ratio_lines() {
        let r = run(&Setup {
            batch: 4_000_000,
            rounds: 1,
            rtt_rounds: 1,
            rtt_batch: 50,
            ..Setup::default()
        })
        .unwrap();
        assert_eq!(r.bulk.imported.bytes, 4_000_000);
        assert_eq!(r.imported_offload.bytes, 4_000_000);
        assert!(r.merged_share > 0.5, "the receive offload merged runs");
        assert_eq!(r.bulk.smoltcp.bytes, 4_000_000);
        assert_eq!(r.rtt.imported.count, 50);
        assert_eq!(
            r.imported_mss, 1448,
            "the same segments as smoltcp on its own"
        );
        let text = r.to_string();
        let last: Vec<&str> = text.lines().rev().take(2).collect();
        assert!(
            last[0].starts_with("ratio smoltcp-in-strata/smoltcp = "),
            "{text}"
        );
        assert!(last[1].starts_with("ratio strata-tcp/smoltcp = "), "{text}");
    }
}
