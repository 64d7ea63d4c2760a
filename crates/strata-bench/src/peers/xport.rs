//! Seed 001's transport (`strata::xport`) at both ends of a bulk transfer
//! between two namespaces, in this process: the receiver on a thread of its
//! own posting its application buffers, the sender handing `buffers`
//! application buffers of the negotiated size at a time (§3.5.2's multiple
//! buffering) and refilling each as it is given back — never copied.

use std::net::SocketAddrV4;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use strata::xport::{XportError, XportListener, XportOptions, XportStream};
use strata_link::drivers::netns;

use super::transfer::Transfer;
use crate::cpu::process_cpu;

/// The transport's side of a transfer.
#[derive(Clone, Debug)]
pub struct XportPeer {
    /// Both ends' settings (application buffer size, recovery, rate control).
    pub options: XportOptions,
    /// Application buffers the sender keeps in flight and the receiver posts.
    pub buffers: usize,
}

fn io(e: XportError) -> std::io::Error {
    std::io::Error::other(e)
}

/// What the receiving end saw.
struct Received {
    bytes: u64,
    secs: f64,
    naks: u64,
    half: (u64, f64),
}

/// Moves `bytes` from namespace `from` to a listener at `to` in namespace
/// `into`; the sender stops handing new buffers at `deadline`.
pub fn transfer(
    peer: &XportPeer,
    from: Option<&str>,
    into: Option<&str>,
    to: SocketAddrV4,
    bytes: u64,
    deadline: Instant,
) -> Result<Transfer> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let (opts, into_ns) = (peer.options.clone(), into.map(str::to_string));
    let buffers = peer.buffers.max(1);
    let size = peer.options.config.app_buffer as usize;
    let receiver = std::thread::spawn(move || {
        netns::within(into_ns.as_deref(), || {
            let mut l = XportListener::bind(to, &opts).map_err(io)?;
            let _ = ready_tx.send(());
            let mut s = l.accept_timeout(Duration::from_secs(20)).map_err(io)?;
            let t0 = Instant::now();
            for _ in 1..buffers {
                s.post_recv(vec![0u8; size]);
            }
            let mut got = 0u64;
            let mut half = (0, 0.0);
            let mut buf = vec![0u8; size];
            loop {
                let (b, n) = s.recv(buf).map_err(io)?;
                if n == 0 {
                    break;
                }
                got += n as u64;
                if half.0 == 0 && got >= bytes / 2 {
                    half = (got, t0.elapsed().as_secs_f64());
                }
                buf = b;
                if buf.len() < size {
                    buf = vec![0u8; size];
                }
            }
            let secs = t0.elapsed().as_secs_f64();
            let st = s.stats();
            let _ = s.close();
            Ok(Received {
                bytes: got,
                secs,
                naks: st.go_back_n_sent + st.selective_sent,
                half,
            })
        })
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| anyhow!("the transport's receiver did not start"))?;
    let cpu0 = process_cpu();
    let sent = netns::within(from, || {
        let mut s = XportStream::connect(to, &peer.options).map_err(io)?;
        let pattern: Bytes = (0..size)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>()
            .into();
        let (mut handed, mut in_flight) = (0u64, 0usize);
        let mut cut = false;
        while handed < bytes {
            if Instant::now() >= deadline {
                cut = true;
                break;
            }
            let mut bufs = Vec::new();
            while in_flight + bufs.len() < buffers && handed < bytes {
                let n = (bytes - handed).min(size as u64) as usize;
                bufs.push(pattern.slice(..n));
                handed += n as u64;
            }
            in_flight += bufs.len();
            in_flight -= s.send(bufs).map_err(io)?.len();
        }
        s.finish().map_err(io)?;
        let st = s.stats();
        s.close().map_err(io)?;
        Ok((st.retransmitted, cut))
    })
    .context("the transport's sender")?;
    let got = receiver
        .join()
        .map_err(|_| anyhow!("the transport's receiver panicked"))?
        .context("the transport's receiver")?;
    Ok(Transfer {
        bytes: got.bytes,
        secs: got.secs,
        cpu_secs: (process_cpu() - cpu0).as_secs_f64(),
        retransmits: sent.0,
        naks: got.naks,
        cut: sent.1,
        half_bytes: got.half.0,
        half_secs: got.half.1,
    })
}
