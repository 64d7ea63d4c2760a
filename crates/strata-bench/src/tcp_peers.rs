//! `strata bench tcp-peers`: bulk TCP throughput between two Strata hosts on
//! the zero-delay in-memory link beside smoltcp's TCP over its in-memory
//! loopback device, in the same run, alternating batches so that whatever
//! else the machine does hits both alike.
//!
//! Both run on one thread, sender and receiver together, so wall time is CPU
//! time spent on the transfer; both have the same MTU (1500, Ethernet's,
//! unless asked for another), segment size (1448 bytes with timestamps at
//! 1500), send and receive buffers, and compute and verify checksums in
//! software.
//!
//! Strata runs twice: with the in-memory link's TCP offloads (segmentation
//! and receive offload in software, as Linux's GSO and GRO on a veth —
//! [`MemPair::set_offload`](strata::link::MemPair::set_offload)), and without,
//! so that the cost per segment through every layer stays in view. smoltcp
//! has no offloads.

use anyhow::Result;
use strata::Arch;

use crate::insn::{Counter, Tally};
use crate::peers::smoltcp_tcp::SmolTcpBulk;
use crate::tcp_bulk::{BulkSetup, MemBulk};
use crate::throughput::Rate;

/// What to run.
#[derive(Clone, Debug)]
pub struct PeersSetup {
    /// Strata's dispatch architecture.
    pub arch: Arch,
    /// Send and receive buffer of every socket, bytes.
    pub buffer: usize,
    /// Largest IP packet of both links, bytes.
    pub mtu: usize,
    /// Bytes per batch.
    pub batch: u64,
    /// Rounds; each runs a batch of each, the order swapped every round.
    pub rounds: usize,
}

/// The comparison's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PeersRow {
    /// Strata `tcp/ip/eth` on the in-memory link with TCP offloads.
    pub strata: Rate,
    /// The same without offloads: every segment through every layer.
    pub strata_no_offload: Rate,
    /// smoltcp TCP on its loopback device.
    pub smoltcp: Rate,
    /// Strata's mean rate (with offloads) / smoltcp's (above 1: Strata is
    /// faster).
    pub ratio: f64,
    /// Strata's mean rate without offloads / smoltcp's.
    pub ratio_no_offload: f64,
    /// Segments Strata's receive offload merged per segment sent.
    pub strata_merged_share: f64,
    /// Segments the Strata sink got per delivery (runs made contiguous).
    pub strata_segments_per_ack: f64,
    /// Strata's segment size on the connection, bytes.
    pub strata_mss: u32,
    /// Instructions of Strata with offloads, per 1448 bytes moved, where the
    /// machine counts them.
    pub strata_instructions: Tally,
    /// Without offloads.
    pub strata_no_offload_instructions: Tally,
    /// smoltcp's.
    pub smoltcp_instructions: Tally,
}

/// The payload of one full segment at MTU 1500 with timestamps: instructions
/// are counted per this many bytes moved.
pub const SEGMENT: u64 = 1448;

/// Runs the comparison, counting instructions with `counter` where it
/// counts.
pub fn run(setup: &PeersSetup, counter: &Counter) -> Result<PeersRow> {
    let bulk = BulkSetup {
        tcp: "tcp",
        arch: setup.arch,
        buffer: Some(setup.buffer),
    };
    let mut strata = MemBulk::new(&bulk, setup.mtu, true)?;
    let mut plain = MemBulk::new(&bulk, setup.mtu, false)?;
    let mut smol = SmolTcpBulk::new(setup.buffer, setup.mtu)?;
    // Warm up all three: caches, pools, and the congestion window out of slow start.
    strata.transfer(setup.batch)?;
    plain.transfer(setup.batch)?;
    smol.transfer(setup.batch)?;
    let (mut s, mut p, mut m) = (Vec::new(), Vec::new(), Vec::new());
    let (mut si, mut pi, mut mi) = (Tally::default(), Tally::default(), Tally::default());
    let units = setup.batch / SEGMENT;
    for round in 0..setup.rounds {
        let mut run_strata = || -> Result<()> {
            s.push(counter.count(&mut si, units, || strata.transfer(setup.batch))?);
            Ok(())
        };
        let mut run_plain = || -> Result<()> {
            p.push(counter.count(&mut pi, units, || plain.transfer(setup.batch))?);
            Ok(())
        };
        let mut run_smol = || -> Result<()> {
            m.push(counter.count(&mut mi, units, || smol.transfer(setup.batch))?);
            Ok(())
        };
        if round % 2 == 0 {
            run_strata()?;
            run_plain()?;
            run_smol()?;
        } else {
            run_smol()?;
            run_plain()?;
            run_strata()?;
        }
    }
    let info = plain.sender();
    let sent = strata.sender().map_or(0, |i| i.stats.segs_out).max(1);
    let merged = strata.merged();
    let (strata, strata_no_offload, smoltcp) = (Rate::of(&s), Rate::of(&p), Rate::of(&m));
    let acks = info.as_ref().map_or(0, |i| i.stats.segs_in).max(1);
    let segs = info.as_ref().map_or(0, |i| i.stats.segs_out);
    Ok(PeersRow {
        ratio: strata.mean_mb_s / smoltcp.mean_mb_s,
        ratio_no_offload: strata_no_offload.mean_mb_s / smoltcp.mean_mb_s,
        strata_merged_share: merged as f64 / sent as f64,
        strata,
        strata_no_offload,
        smoltcp,
        strata_segments_per_ack: segs as f64 / acks as f64,
        strata_mss: info.as_ref().map_or(0, |i| i.mss),
        strata_instructions: si,
        strata_no_offload_instructions: pi,
        smoltcp_instructions: mi,
    })
}
