//! SRT's `srt-file-transmit` (Debian's `srt-tools`) in file mode
//! (`transtype=file`: SRT's file congestion control, everything delivered
//! in order) at both ends of a file transfer: the receiver listens in one
//! namespace and writes into a directory (under the name the sender's
//! stream id carries), the sender reads the file in another.
//!
//! Timed from the sender's start to the receiver's end: process start-up
//! and SRT's handshake are included (tens of milliseconds, as a client's
//! would be).

use std::net::SocketAddrV4;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::proc::NsProc;
use super::transfer::Transfer;
use crate::cpu::children_cpu;

const PROGRAM: &str = "srt-file-transmit";

/// Waits until a UDP socket of namespace `ns` is bound to `port`.
fn wait_udp_port(ns: Option<&str>, port: u16) -> Result<()> {
    let filter = format!("sport = :{port}");
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let mut ss = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "ss"]);
                c
            }
            None => Command::new("ss"),
        };
        let out = ss.args(["-Huan", &filter]).output()?;
        if !out.stdout.is_empty() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("{PROGRAM} did not open UDP port {port}")
}

/// Sends `file` from namespace `from` to a listener at `to` in namespace
/// `into`, which writes it into `out_dir`.
pub fn transfer(
    from: Option<&str>,
    into: Option<&str>,
    to: SocketAddrV4,
    file: &Path,
    out_dir: &Path,
    limit: Duration,
) -> Result<Transfer> {
    let listen = format!("srt://:{}?mode=listener&transtype=file", to.port());
    let out = format!("file://{}/", out_dir.display());
    let cpu0 = children_cpu();
    let receiver = NsProc::spawn(into, PROGRAM, &[&listen, &out])?;
    // srt-file-transmit says nothing until a caller connects: wait for its
    // UDP port to open.
    wait_udp_port(into, to.port())?;
    let t0 = Instant::now();
    let source = format!("file://{}", file.display());
    // The stream id names the file at the receiver; srt-file-transmit
    // derives it from the file's name, but once sent an empty one (the
    // receiver then failed to open its folder), so it is given.
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let target = format!("srt://{to}?transtype=file&streamid={name}");
    let sender = NsProc::spawn(from, PROGRAM, &[&source, &target])?;
    let (status, said) = receiver.finish(limit)?;
    let secs = t0.elapsed().as_secs_f64();
    if !status.success() || !said.iter().any(|l| l.contains("COMPLETE")) {
        bail!("srt-file-transmit's receiver: {}", said.join(" | "));
    }
    let (status, said) = sender.finish(Duration::from_secs(10))?;
    if !status.success() {
        bail!("srt-file-transmit's sender: {}", said.join(" | "));
    }
    let bytes = std::fs::metadata(out_dir.join(&*name))?.len();
    Ok(Transfer {
        bytes,
        secs,
        cpu_secs: (children_cpu() - cpu0).as_secs_f64(),
        ..Transfer::default()
    })
}
