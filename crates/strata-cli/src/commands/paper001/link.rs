//! The link every experiment of seed 001 runs through, as §4.1's
//! delay/error generator: namespaces `a` (the sender, 198.18.253.1) and `b`
//! (the receiver, .2) with `strata wanem` between them in `w` — a rate
//! limit, a delay each way of half the RTT, bit errors — or a plain veth
//! pair. Each transfer gets a port of its own, so nothing of one (a socket
//! in TIME_WAIT, a late datagram) meets the next.

use std::cell::Cell;
use std::net::SocketAddrV4;
use std::time::Duration;

use anyhow::{Context, Result};
use strata_bench::peers::transfer::Transfer;

use super::super::topology::{Topology, Veths, Wanem};

/// The third octet of the experiments' subnet.
const NET: u8 = 253;

/// First port of the transfers.
const FIRST_PORT: u16 = 7600;

/// The namespaces and, for an emulated link, `strata wanem`.
pub struct Net {
    pub t: Topology,
    wanem: Option<Wanem>,
    port: Cell<u16>,
}

/// One setting of the emulated link.
#[derive(Clone, Debug, Default)]
pub struct Link {
    /// Bit rate, Mbit/s (0: no limit).
    pub mbit: f64,
    /// Round-trip delay added, milliseconds.
    pub rtt_ms: f64,
    /// Bit error rate, each way ("1e-8").
    pub ber: Option<String>,
    /// Bytes the rate limiter queues (wanem's default: 1500 KB).
    pub queue: Option<String>,
}

impl Link {
    fn options(&self) -> Vec<String> {
        let mut o = Vec::new();
        if self.mbit > 0.0 {
            o.extend([
                "--rate".into(),
                format!("{}kbit", (self.mbit * 1000.0) as u64),
            ]);
        }
        if self.rtt_ms > 0.0 {
            o.extend([
                "--delay".into(),
                format!("{}us", (self.rtt_ms * 500.0) as u64),
            ]);
        }
        if let Some(b) = &self.ber {
            o.extend(["--ber".into(), b.clone()]);
        }
        if let Some(q) = &self.queue {
            o.extend(["--queue".into(), q.clone()]);
        }
        o
    }
}

impl Net {
    /// Namespaces with `w` between them (offloads off: wanem forwards
    /// frames as they are on the wire).
    pub fn wan() -> Result<Net> {
        Net::up(true)
    }

    /// A plain veth pair with the kernel's default offloads, MTU 1500.
    pub fn veth() -> Result<Net> {
        Net::up(false)
    }

    fn up(wan: bool) -> Result<Net> {
        let veths = Veths {
            prefix: "p1",
            net: NET,
            wan,
            offloads: !wan,
            congctl: None,
            extra_hosts: &[],
        };
        let t = Topology::up(veths).context("making the namespaces (needs root)")?;
        Ok(Net {
            t,
            wanem: None,
            port: Cell::new(FIRST_PORT),
        })
    }

    /// (Re)starts `strata wanem` with `link`'s settings.
    pub fn emulate(&mut self, link: &Link) -> Result<()> {
        self.wanem = None;
        let o = link.options();
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        self.wanem = Some(Wanem::start(&self.t, &o)?);
        Ok(())
    }

    /// The sender's namespace.
    pub fn sender(&self) -> String {
        self.t.ns("a")
    }

    /// The receiver's namespace.
    pub fn receiver(&self) -> String {
        self.t.ns("b")
    }

    /// A fresh receiver address in `b`.
    pub fn to(&self) -> SocketAddrV4 {
        let p = self.port.get();
        self.port.set(if p >= 60_000 { FIRST_PORT } else { p + 1 });
        SocketAddrV4::new(self.t.ip(2), p)
    }

    /// Clamps the window `b` advertises to the sender (TCP) to `bytes`, as
    /// the paper's ttcp without window scaling had it (65535), or lifts the
    /// clamp (`None`). A route's `window` applies to connections opened
    /// after it.
    pub fn tcp_window(&self, bytes: Option<u32>) -> Result<()> {
        let (b, to, dev) = (self.receiver(), self.t.ip(1), self.t.dev("vb"));
        let _ = super::super::topology::ip(&format!("-n {b} route del {to}/32"));
        if let Some(w) = bytes {
            super::super::topology::ip(&format!("-n {b} route add {to}/32 dev {dev} window {w}"))?;
        }
        Ok(())
    }
}

/// How much each point moves: `secs` of data at the rate it should reach.
#[derive(Clone, Copy, Debug)]
pub struct Sizing {
    pub secs: f64,
}

impl Sizing {
    /// Bytes for a point expected to reach `mbit` (at least 1 MB).
    pub fn bytes(&self, mbit: f64) -> u64 {
        ((mbit * 1e6 / 8.0 * self.secs) as u64).max(1_000_000)
    }

    /// How long a point expected to reach `mbit` may run before its
    /// sender is stopped: four times its expected time and 20 s.
    pub fn limit(&self, mbit: f64) -> Duration {
        let expected = self.bytes(mbit) as f64 * 8.0 / (mbit * 1e6);
        Duration::from_secs_f64(expected * 4.0 + 20.0)
    }
}

/// A point's outcome as a table cell: Mbit/s, or why there is none.
pub fn cell(r: &Result<Transfer>) -> String {
    match r {
        Ok(t) if t.cut => format!("{:.1}*", t.mbit_s()),
        Ok(t) => format!("{:.1}", t.mbit_s()),
        Err(_) => "fail".into(),
    }
}

/// The machine's load averages, for the note beside every figure.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
