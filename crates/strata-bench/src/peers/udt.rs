//! UDT4 (Debian's `libudt-dev`) at both ends of a bulk transfer: a small C++
//! harness of ours (`peers/udt/udt_peer.cpp`, embedded here) compiled with
//! g++ at run time, run in each namespace. UDT's buffers are raised to
//! 64 MB so a long fat pipe never starves it; its congestion control is its
//! default (DAIMD).

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::proc::{NsProc, field};
use super::transfer::Transfer;
use crate::cpu::children_cpu;

/// The harness's source.
pub const SOURCE: &str = include_str!("../../peers/udt/udt_peer.cpp");

/// The compiled harness.
pub struct UdtPeer {
    exe: PathBuf,
}

impl UdtPeer {
    /// Compiles the harness into the temporary directory (once per source:
    /// its name carries a hash of it; written under a temporary name and
    /// renamed, so concurrent builds never see half a binary).
    pub fn build() -> Result<UdtPeer> {
        let hash = SOURCE.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let dir = std::env::temp_dir().join(format!("strata-udt-peer-{hash:016x}"));
        let exe = dir.join("udt_peer");
        if exe.exists() {
            return Ok(UdtPeer { exe });
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let src = dir.join("udt_peer.cpp");
        std::fs::write(&src, SOURCE)?;
        let tmp = dir.join(format!("udt_peer.{}", std::process::id()));
        let out = Command::new("g++")
            .args(["-O2", "-o"])
            .arg(&tmp)
            .arg(&src)
            .args(["-ludt", "-lpthread"])
            .output()
            .context("running g++ (apt-get install g++ libudt-dev)")?;
        if !out.status.success() {
            bail!(
                "compiling the UDT harness: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::fs::rename(&tmp, &exe)?;
        Ok(UdtPeer { exe })
    }

    /// The harness's path.
    pub fn exe(&self) -> &str {
        self.exe.to_str().unwrap_or("udt_peer")
    }

    /// Moves `bytes` from namespace `from` to a receiver at `to` in
    /// namespace `into`; both are killed when `limit` runs out (then the
    /// transfer is an error: UDT has no partial count to give).
    pub fn transfer(
        &self,
        from: Option<&str>,
        into: Option<&str>,
        to: SocketAddrV4,
        bytes: u64,
        limit: Duration,
    ) -> Result<Transfer> {
        let (port, n) = (to.port().to_string(), bytes.to_string());
        let cpu0 = children_cpu();
        let start = Instant::now();
        let mut receiver = NsProc::spawn(into, self.exe(), &["recv", &port, &n])?;
        receiver.wait_for(Duration::from_secs(10), |l| l == "ready")?;
        let host = to.ip().to_string();
        let sender = NsProc::spawn(from, self.exe(), &["send", &host, &port, &n])?;
        let line = receiver.wait_for(limit, |l| l.starts_with("received "))?;
        let left = limit
            .saturating_sub(start.elapsed())
            .max(Duration::from_secs(5));
        let (status, said) = sender.finish(left)?;
        if !status.success() {
            bail!("the UDT sender failed: {}", said.join(" | "));
        }
        receiver.finish(Duration::from_secs(5))?;
        let get = |k| field(&line, k).unwrap_or(0.0);
        Ok(Transfer {
            bytes: get("bytes") as u64,
            secs: get("seconds"),
            cpu_secs: (children_cpu() - cpu0).as_secs_f64(),
            retransmits: get("retransmitted") as u64,
            naks: get("naks") as u64,
            cut: false,
            half_bytes: get("half_bytes") as u64,
            half_secs: get("half_seconds"),
        })
    }
}
