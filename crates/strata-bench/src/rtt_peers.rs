//! `strata bench rtt-peers`: Strata's in-memory UDP-IP-ETH ping-pong beside
//! smoltcp's UDP over its loopback device, in the same run, alternating in short
//! batches so that whatever else the machine does hits both alike.

use std::time::Instant as Wall;

use anyhow::Result;
use bytes::Bytes;
use strata::Arch;

use crate::insn::{Counter, Tally};
use crate::peers::smoltcp_udp::SmolUdpPingPong;
use crate::rtt::{MemPingPong, RttSetup};
use crate::stats::{Summary, nanos};

/// One size's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PeerRow {
    /// Payload bytes.
    pub size: usize,
    /// Strata UDP-IP-ETH on the in-memory link.
    pub strata: Summary,
    /// smoltcp UDP on its loopback device.
    pub smoltcp: Summary,
    /// strata mean / smoltcp mean (below 1: Strata costs less).
    pub ratio: f64,
    /// Strata's instructions, where the machine counts them.
    pub strata_instructions: Tally,
    /// smoltcp's.
    pub smoltcp_instructions: Tally,
}

/// Runs `rounds` rounds of `batch` round trips per system and size, counting
/// instructions with `counter` where it counts.
pub fn run(
    sizes: &[usize],
    rounds: usize,
    batch: usize,
    counter: &Counter,
) -> Result<Vec<PeerRow>> {
    // Both with checksums computed and verified, as smoltcp does by default.
    let setup = RttSetup {
        stack: "udp/ip/eth".into(),
        arch: Arch::Llm,
        checksum: true,
    };
    let mut rows = Vec::new();
    for &size in sizes {
        let mut strata = MemPingPong::new(&setup)?;
        let mut smol = SmolUdpPingPong::new(size);
        let payload = Bytes::from(vec![0x5a; size]);
        // Warm up both: caches, neighbour resolution, allocator pools.
        strata.measure(size, batch, 0)?;
        for _ in 0..batch {
            smol.round_trip();
        }
        let mut s_samples = Vec::with_capacity(rounds * batch);
        let mut m_samples = Vec::with_capacity(rounds * batch);
        let (mut s_insn, mut m_insn) = (Tally::default(), Tally::default());
        for _ in 0..rounds {
            counter.count(&mut s_insn, batch as u64, || -> Result<()> {
                for _ in 0..batch {
                    let t0 = Wall::now();
                    strata.round_trip(&payload)?;
                    s_samples.push(nanos(t0.elapsed()));
                }
                Ok(())
            })?;
            counter.count(&mut m_insn, batch as u64, || -> Result<()> {
                for _ in 0..batch {
                    let t0 = Wall::now();
                    let n = smol.round_trip();
                    m_samples.push(nanos(t0.elapsed()));
                    anyhow::ensure!(n == size, "smoltcp lost a pong");
                }
                Ok(())
            })?;
        }
        let strata = Summary::of(&mut s_samples);
        let smoltcp = Summary::of(&mut m_samples);
        rows.push(PeerRow {
            size,
            strata,
            smoltcp,
            ratio: strata.mean_us / smoltcp.mean_us,
            strata_instructions: s_insn,
            smoltcp_instructions: m_insn,
        });
    }
    Ok(rows)
}
