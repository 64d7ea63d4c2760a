//! Workloads without timing, for counting instructions: `strata bench probe`
//! runs exactly one of the systems `rtt-peers` and `tcp-peers` compare, for a
//! given amount of work, and nothing else. `scripts/instructions` runs each
//! under `valgrind --tool=callgrind` twice, with N and 2N units of work, and
//! divides the difference by N: set-up, warm-up and exit cancel out, and
//! what is left is the cost of one round trip or one segment — a number that
//! does not move with the machine's load, as time does.

use anyhow::{Result, ensure};
use bytes::Bytes;
use strata::Arch;

use crate::peers::smoltcp_tcp::SmolTcpBulk;
use crate::peers::smoltcp_udp::SmolUdpPingPong;
use crate::rtt::{MemPingPong, RttSetup};
use crate::tcp_bulk::{BulkSetup, MemBulk};

/// The system a probe runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// Strata on its in-memory link.
    Strata,
    /// smoltcp on its loopback device.
    Smoltcp,
}

/// Round trips run before the counted ones (the same in both runs of a pair,
/// so they cancel out): neighbour resolution, pools and caches settle.
pub const UDP_WARMUP: usize = 200;

/// Bytes moved before the counted ones: slow start is over.
pub const TCP_WARMUP: u64 = 4_000_000;

/// `count` ping-pong round trips of `size` bytes after a warm-up, UDP
/// checksums on unless `no_checksum` (seed 000's tables run without); Strata
/// runs `stack` (any of seed 000's, TCP's included) under `arch`.
pub fn udp(
    system: System,
    stack: &str,
    arch: Arch,
    size: usize,
    count: usize,
    no_checksum: bool,
) -> Result<()> {
    match system {
        System::Strata => {
            let setup = RttSetup {
                stack: stack.into(),
                arch,
                checksum: !no_checksum,
            };
            let mut pp = MemPingPong::new(&setup)?;
            let payload = Bytes::from(vec![0x5a; size]);
            for _ in 0..UDP_WARMUP + count {
                pp.round_trip(&payload)?;
            }
        }
        System::Smoltcp => {
            let mut smol = SmolUdpPingPong::new(size);
            for _ in 0..UDP_WARMUP + count {
                ensure!(smol.round_trip() == size, "smoltcp lost a pong");
            }
        }
    }
    Ok(())
}

/// A bulk TCP transfer of `bytes` after a warm-up, 256 KiB buffers, MTU
/// 1500, checksums on, no offloads (every segment through every layer);
/// Strata runs under `arch`.
pub fn tcp(system: System, arch: Arch, bytes: u64) -> Result<()> {
    const BUFFER: usize = 256 * 1024;
    match system {
        System::Strata => {
            let setup = BulkSetup {
                tcp: "tcp",
                arch,
                buffer: Some(BUFFER),
            };
            let mut bulk = MemBulk::new(&setup, 1500, false)?;
            bulk.transfer(TCP_WARMUP)?;
            bulk.transfer(bytes)?;
        }
        System::Smoltcp => {
            let mut smol = SmolTcpBulk::new(BUFFER, 1500)?;
            smol.transfer(TCP_WARMUP)?;
            smol.transfer(bytes)?;
        }
    }
    Ok(())
}
