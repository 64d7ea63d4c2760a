//! Seed 004's Figures 6 and 7 for its own case: BSD protocols imported into
//! STREAMS (the BSD encapsulation module of `strata-compat`) beside the
//! STREAMS-native versions, and BSD's native subsystem for reference — send
//! and receive processing time per protocol, and the cost of buffer
//! allocation, native and encapsulated. In memory, one thread, the
//! configurations alternating round by round so that whatever else the
//! machine does hits all alike.
//!
//! A protocol's time is its stack's time less the time of the stack below
//! it: DDP alone is a stream `head / ddp / device` (or `ddp@bsd`); ATP is
//! `head / atp / ddp / device` (or `atp@bsd` over the same native DDP) less
//! DDP's. Send: a `T_UNITDATA_REQ` written at the head until its datagram
//! is taken from the device. Receive: a datagram given to the device until
//! its `T_UNITDATA_IND` is read at the head. ATP sends at-least-once
//! requests and receives their one-response replies; nothing retransmits
//! (the clock does not move). BSD's figures are the same operations through
//! sockets (`sosend` … `if_dequeue`, `if_input` … `soreceive`, which copies
//! the data out to the user).
//!
//! Figure 7b: 10,000 allocations and frees of each buffer — small and
//! cluster mbufs from the native pool and encapsulated in STREAMS data
//! blocks, and mblks of the same sizes.

use std::fmt;
use std::hint::black_box;
use std::time::Instant;

use anyhow::{Result, ensure};
use strata_compat::appletalk::wire::{atp as watp, ddp as wddp};
use strata_compat::atp_service::{AtpService, RETRY_FOREVER};
use strata_compat::bsd::mbuf::{MCLBYTES, MLEN, MbufPool, m_get, m_getcl};
use strata_compat::bsd::netatalk::{ATPROTO_ATP, ATPROTO_DDP, atp as bsd_atp, ddp as bsd_ddp};
use strata_compat::bsd::{Bsd, MbufType, NativeMbufs, SockId, SockaddrAt, UsrreqOk};
use strata_compat::encap::BsdModule;
use strata_compat::encap::mbuf_mblk::MblkMbufs;
use strata_compat::streams::Stream;
use strata_compat::streams::atalk::{atp as str_atp, ddp as str_ddp};
use strata_compat::streams::mblk::{DblkPool, Dblks, MsgType, allocb, mkmsg};
use strata_compat::streams::tpi::{TAddr, Tpi};

const NET: u16 = 0xff00;
const ME: (u8, u8) = (1, 128);
const PEER: (u8, u8) = (2, 200);

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Rounds; each runs a batch of every configuration.
    pub rounds: usize,
    /// Operations per batch (at most 64: ATP's outstanding requests).
    pub batch: usize,
    /// Bytes of user data per datagram.
    pub payload: usize,
    /// Allocations per allocation batch (the paper: 10,000).
    pub allocs: usize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            rounds: 200,
            batch: 32,
            payload: 32,
            allocs: 10_000,
        }
    }
}

/// Send and receive time of one configuration, ns per operation (the
/// median over rounds of each round's mean).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Times {
    /// Send, ns.
    pub send: f64,
    /// Receive, ns.
    pub receive: f64,
}

/// The report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// Stream `ddp` (STREAMS-native).
    pub ddp_native: Times,
    /// Stream `ddp@bsd` (BSD DDP imported).
    pub ddp_imported: Times,
    /// BSD-native DDP in the BSD subsystem (a raw DDP socket).
    pub ddp_bsd: Times,
    /// Stream `atp/ddp`.
    pub atp_native_stack: Times,
    /// Stream `atp@bsd/ddp`.
    pub atp_imported_stack: Times,
    /// BSD subsystem, ATP socket over DDP.
    pub atp_bsd_stack: Times,
    /// Allocation and free, ns each: mbuf small, cluster (native), mbuf
    /// small, cluster (encapsulated), mblk small, large.
    pub alloc: [f64; 6],
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// A stream endpoint at node `ME`, bound, for one of the configurations.
fn stream(pool: &DblkPool, atp: Option<bool>, ddp_imported: bool) -> Result<Stream> {
    let mut s = Stream::open(pool.clone());
    if ddp_imported {
        s.push(Box::new(
            BsdModule::new(bsd_ddp::Ddp::new(), "ddp@bsd")
                .with_interface(SockaddrAt::new(NET, ME.0, 0)),
        ))?;
    } else {
        s.push(Box::new(str_ddp::Ddp::new(TAddr::new(NET, ME.0, 0))))?;
    }
    match atp {
        Some(true) => s.push(Box::new(BsdModule::new(bsd_atp::Atp::new(), "atp@bsd")))?,
        Some(false) => s.push(Box::new(str_atp::Atp::new()))?,
        None => {}
    }
    s.putmsg(
        Some(&Tpi::BindReq {
            addr: TAddr::new(0, 0, ME.1),
        }),
        None,
    )?;
    let ack = s.getmsg()?.as_ref().and_then(Tpi::of);
    ensure!(matches!(ack, Some(Tpi::BindAck { .. })), "bind: {ack:?}");
    Ok(s)
}

/// A datagram from the peer to us: DDP type `ddp_type` carrying `data`.
fn datagram(ddp_type: u8, data: &[u8]) -> Vec<u8> {
    let src = wddp::Addr::new(NET, PEER.0, PEER.1);
    let dst = wddp::Addr::new(NET, ME.0, ME.1);
    let repr = wddp::Repr::new(src, dst, ddp_type, data.len()).expect("short");
    let mut f = repr
        .to_bytes_checksummed([data])
        .expect("in range")
        .to_vec();
    f.extend_from_slice(data);
    f
}

/// ATP's one-response reply to request `tid`.
fn reply(tid: u16, payload: &[u8]) -> Vec<u8> {
    let mut d = watp::Repr::response(tid, 0, true, [0; 4])
        .to_bytes()
        .to_vec();
    d.extend_from_slice(payload);
    datagram(watp::DDP_TYPE, &d)
}

fn request_record() -> Vec<u8> {
    AtpService::SendRequest {
        xo: None,
        bitmap: 1,
        retries: RETRY_FOREVER,
        interval: 255,
        user: [0; 4],
    }
    .encode()
    .to_vec()
}

/// The timed loops, each a function of its own that is never inlined, so
/// that callgrind's inclusive count of it is that configuration's cost
/// alone (`strata bench paper004-subsystems --instructions`): the name says
/// the protocol, where it runs and the direction. Each passes its own name
/// through `black_box`, so the compiler cannot merge the identical bodies
/// into one function.
macro_rules! stream_loops {
    ($($send:ident, $receive:ident;)*) => {$(
        #[inline(never)]
        fn $send(s: &mut Stream, req: &Tpi, payload: &[u8], n: usize) -> Result<()> {
            black_box(stringify!($send));
            for _ in 0..n {
                s.putmsg(Some(req), Some(payload))?;
                black_box(s.device_output());
            }
            Ok(())
        }

        #[inline(never)]
        fn $receive(s: &mut Stream, pool: &DblkPool, inbound: &[Vec<u8>]) -> Result<()> {
            black_box(stringify!($receive));
            for f in inbound {
                s.device_input(mkmsg(pool, MsgType::Data, f)?);
                black_box(s.getmsg()?);
            }
            Ok(())
        }
    )*};
}

stream_loops! {
    ddp_streams_native_send, ddp_streams_native_receive;
    ddp_bsd_in_streams_send, ddp_bsd_in_streams_receive;
    atp_streams_native_send, atp_streams_native_receive;
    atp_bsd_in_streams_send, atp_bsd_in_streams_receive;
}

macro_rules! bsd_loops {
    ($($send:ident, $receive:ident;)*) => {$(
        #[inline(never)]
        fn $send(
            bsd: &mut Bsd,
            so: SockId,
            payload: &[u8],
            peer: SockaddrAt,
            control: &[u8],
            n: usize,
        ) -> Result<()> {
            black_box(stringify!($send));
            for _ in 0..n {
                bsd.sosend(so, payload, Some(peer), Some(control))?;
                black_box(bsd.if_dequeue(0));
            }
            Ok(())
        }

        #[inline(never)]
        fn $receive(bsd: &mut Bsd, so: SockId, inbound: &[Vec<u8>]) -> Result<()> {
            black_box(stringify!($receive));
            for f in inbound {
                bsd.if_input(0, f);
                bsd.netisr();
                black_box(bsd.soreceive(so)?);
            }
            Ok(())
        }
    )*};
}

bsd_loops! {
    ddp_bsd_native_send, ddp_bsd_native_receive;
    atp_bsd_native_send, atp_bsd_native_receive;
}

/// The batch of datagrams a round receives: ATP replies to the requests
/// just sent, or DDP datagrams.
fn inbound(atp: bool, tid: u16, payload: &[u8], batch: usize) -> Vec<Vec<u8>> {
    (0..batch as u16)
        .map(|i| {
            if atp {
                reply(tid.wrapping_add(i), payload)
            } else {
                datagram(watp::DDP_TYPE, payload)
            }
        })
        .collect()
}

/// One round of stream configuration `which` (0 `ddp`, 1 `ddp@bsd`,
/// 2 `atp/ddp`, 3 `atp@bsd/ddp`): `batch` sends, then `batch` receives (ATP: the replies to
/// those requests), ns per operation each.
fn stream_round(
    s: &mut Stream,
    pool: &DblkPool,
    which: usize,
    tid: &mut u16,
    setup: &Setup,
) -> Result<(f64, f64)> {
    type Loops = (
        fn(&mut Stream, &Tpi, &[u8], usize) -> Result<()>,
        fn(&mut Stream, &DblkPool, &[Vec<u8>]) -> Result<()>,
    );
    const LOOPS: [Loops; 4] = [
        (ddp_streams_native_send, ddp_streams_native_receive),
        (ddp_bsd_in_streams_send, ddp_bsd_in_streams_receive),
        (atp_streams_native_send, atp_streams_native_receive),
        (atp_bsd_in_streams_send, atp_bsd_in_streams_receive),
    ];
    let atp = which >= 2;
    let payload = vec![0x5a; setup.payload];
    let peer = TAddr::new(NET, PEER.0, PEER.1);
    let opt = if atp {
        request_record()
    } else {
        vec![watp::DDP_TYPE]
    };
    let inbound = inbound(atp, *tid, &payload, setup.batch);
    let req = Tpi::UnitdataReq { dest: peer, opt };
    let (send, receive) = LOOPS[which];
    let t = Instant::now();
    send(s, &req, &payload, setup.batch)?;
    let send = t.elapsed().as_nanos() as f64 / setup.batch as f64;
    let t = Instant::now();
    receive(s, pool, &inbound)?;
    let receive = t.elapsed().as_nanos() as f64 / setup.batch as f64;
    *tid = tid.wrapping_add(setup.batch as u16);
    Ok((send, receive))
}

/// A BSD host at `ME` with DDP and ATP, and a socket of `proto` bound.
fn bsd_host(proto: u8) -> Result<(Bsd, SockId)> {
    let mut bsd = Bsd::new(NativeMbufs::pool(4096, 512));
    bsd.add_protocol(Box::new(bsd_ddp::Ddp::new()));
    bsd.add_protocol(Box::new(bsd_atp::Atp::new()));
    bsd.if_attach(SockaddrAt::new(NET, ME.0, 0), ATPROTO_DDP);
    let so = bsd.socreate(proto)?;
    let bound = bsd.sobind(so, SockaddrAt::new(0, 0, ME.1))?;
    ensure!(matches!(bound, UsrreqOk::Addr(_)), "bind: {bound:?}");
    Ok((bsd, so))
}

fn bsd_round(
    bsd: &mut Bsd,
    so: SockId,
    atp: bool,
    tid: &mut u16,
    setup: &Setup,
) -> Result<(f64, f64)> {
    let payload = vec![0x5a; setup.payload];
    let peer = SockaddrAt::new(NET, PEER.0, PEER.1);
    let control = if atp {
        request_record()
    } else {
        vec![watp::DDP_TYPE]
    };
    let inbound = inbound(atp, *tid, &payload, setup.batch);
    type Loops = (
        fn(&mut Bsd, SockId, &[u8], SockaddrAt, &[u8], usize) -> Result<()>,
        fn(&mut Bsd, SockId, &[Vec<u8>]) -> Result<()>,
    );
    let (send, receive): Loops = if atp {
        (atp_bsd_native_send, atp_bsd_native_receive)
    } else {
        (ddp_bsd_native_send, ddp_bsd_native_receive)
    };
    let t = Instant::now();
    send(bsd, so, &payload, peer, &control, setup.batch)?;
    let send = t.elapsed().as_nanos() as f64 / setup.batch as f64;
    let t = Instant::now();
    receive(bsd, so, &inbound)?;
    let receive = t.elapsed().as_nanos() as f64 / setup.batch as f64;
    *tid = tid.wrapping_add(setup.batch as u16);
    Ok((send, receive))
}

macro_rules! alloc_loops {
    ($($name:ident($pool:ident) => $alloc:expr;)*) => {$(
        #[inline(never)]
        fn $name($pool: &Pools, n: usize) -> Result<()> {
            black_box(stringify!($name));
            for _ in 0..n {
                black_box($alloc?);
            }
            Ok(())
        }
    )*};
}

/// The pools Figure 7b allocates from.
struct Pools {
    native: MbufPool,
    dblks: DblkPool,
    encap: MbufPool,
}

alloc_loops! {
    alloc_mbuf_small_native(p) => m_get(&p.native, MbufType::Data);
    alloc_mbuf_cluster_native(p) => m_getcl(&p.native, MbufType::Data, false);
    alloc_mbuf_small_encapsulated(p) => m_get(&p.encap, MbufType::Data);
    alloc_mbuf_cluster_encapsulated(p) => m_getcl(&p.encap, MbufType::Data, false);
    alloc_mblk_small(p) => allocb(&p.dblks, MLEN);
    alloc_mblk_large(p) => allocb(&p.dblks, MCLBYTES);
}

/// Figure 7b's loops, in the order of [`Report::alloc`].
const ALLOCS: [fn(&Pools, usize) -> Result<()>; 6] = [
    alloc_mbuf_small_native,
    alloc_mbuf_cluster_native,
    alloc_mbuf_small_encapsulated,
    alloc_mbuf_cluster_encapsulated,
    alloc_mblk_small,
    alloc_mblk_large,
];

/// ns per allocation and free, for each buffer of Figure 7b.
fn alloc_round(setup: &Setup) -> Result<[f64; 6]> {
    let dblks = Dblks::pool(1 << 20);
    let pools = Pools {
        native: NativeMbufs::pool(1 << 20, 1 << 20),
        encap: MblkMbufs::pool(&dblks),
        dblks,
    };
    let n = setup.allocs;
    let mut out = [0.0; 6];
    for (o, run) in out.iter_mut().zip(ALLOCS) {
        let t = Instant::now();
        run(&pools, n)?;
        *o = t.elapsed().as_nanos() as f64 / n as f64;
    }
    Ok(out)
}

/// Runs the measurement.
pub fn run(setup: &Setup) -> Result<Report> {
    ensure!(
        (1..=64).contains(&setup.batch),
        "batch must be 1..=64 (ATP's outstanding requests)"
    );
    let pool = Dblks::pool(1 << 16);
    let mut streams = [
        stream(&pool, None, false)?,
        stream(&pool, None, true)?,
        stream(&pool, Some(false), false)?,
        stream(&pool, Some(true), false)?,
    ];
    let (mut bsd_ddp, ddp_so) = bsd_host(ATPROTO_DDP)?;
    let (mut bsd_atp, atp_so) = bsd_host(ATPROTO_ATP)?;
    let mut tids = [0u16; 6];
    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); 6];
    let mut allocs: Vec<[f64; 6]> = Vec::new();
    for round in 0..setup.rounds {
        // Turn the order every round.
        let mut order: Vec<usize> = (0..7).collect();
        order.rotate_left(round % 7);
        for which in order {
            match which {
                0..=3 => {
                    samples[which].push(stream_round(
                        &mut streams[which],
                        &pool,
                        which,
                        &mut tids[which],
                        setup,
                    )?);
                }
                4 => samples[4].push(bsd_round(&mut bsd_ddp, ddp_so, false, &mut tids[4], setup)?),
                5 => samples[5].push(bsd_round(&mut bsd_atp, atp_so, true, &mut tids[5], setup)?),
                _ => allocs.push(alloc_round(setup)?),
            }
        }
    }
    let times = |i: usize| Times {
        send: median(samples[i].iter().map(|s| s.0).collect()),
        receive: median(samples[i].iter().map(|s| s.1).collect()),
    };
    let mut alloc = [0.0; 6];
    for (k, a) in alloc.iter_mut().enumerate() {
        *a = median(allocs.iter().map(|r| r[k]).collect());
    }
    Ok(Report {
        ddp_native: times(0),
        ddp_imported: times(1),
        atp_native_stack: times(2),
        atp_imported_stack: times(3),
        ddp_bsd: times(4),
        atp_bsd_stack: times(5),
        alloc,
    })
}

impl Report {
    fn atp(stack: Times, ddp: Times) -> Times {
        Times {
            send: stack.send - ddp.send,
            receive: stack.receive - ddp.receive,
        }
    }

    /// ATP's own time, STREAMS-native.
    pub fn atp_native(&self) -> Times {
        Report::atp(self.atp_native_stack, self.ddp_native)
    }

    /// ATP's own time, imported from BSD.
    pub fn atp_imported(&self) -> Times {
        Report::atp(self.atp_imported_stack, self.ddp_native)
    }

    /// ATP's own time in the BSD subsystem.
    pub fn atp_bsd(&self) -> Times {
        Report::atp(self.atp_bsd_stack, self.ddp_bsd)
    }

    /// `(protocol, direction, imported / STREAMS-native)` for each.
    pub fn ratios(&self) -> Vec<(&'static str, &'static str, f64)> {
        let (an, ai) = (self.atp_native(), self.atp_imported());
        vec![
            ("ddp", "send", self.ddp_imported.send / self.ddp_native.send),
            (
                "ddp",
                "receive",
                self.ddp_imported.receive / self.ddp_native.receive,
            ),
            ("atp", "send", ai.send / an.send),
            ("atp", "receive", ai.receive / an.receive),
        ]
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed 004, Figure 6: processing time per protocol, ns (median of per-round means)"
        )?;
        writeln!(f, "  {:<34} {:>10} {:>10}", "protocol", "send", "receive")?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, t: Times| {
            writeln!(f, "  {:<34} {:>10.0} {:>10.0}", name, t.send, t.receive)
        };
        row(f, "DDP  Str (STREAMS-native)", self.ddp_native)?;
        row(f, "DDP  BSD(Str) (imported)", self.ddp_imported)?;
        row(f, "DDP  BSD (native subsystem)", self.ddp_bsd)?;
        row(f, "ATP  Str (STREAMS-native)", self.atp_native())?;
        row(f, "ATP  BSD(Str) (imported)", self.atp_imported())?;
        row(f, "ATP  BSD (native subsystem)", self.atp_bsd())?;
        writeln!(
            f,
            "  paper (µs, SPARCstation-LX): imported/native ≈ 3:1 (Figure 6); ATP send BSD(StrSol2) 203"
        )?;
        writeln!(
            f,
            "seed 004, Figure 7b: allocate and free one buffer, ns (paper: encapsulated +12 µs small, +24 µs cluster)"
        )?;
        for (n, v) in ALLOC_LABELS.iter().zip(self.alloc) {
            writeln!(f, "  {n:<34} {v:>10.1}")?;
        }
        writeln!(
            f,
            "seed 004, Figure 7a: where an imported protocol's time goes, ns (imported less the same code in BSD's own subsystem = the encapsulation, above and below)"
        )?;
        let (ai, ab) = (self.atp_imported(), self.atp_bsd());
        for (name, imp, bsd) in [
            ("DDP send", self.ddp_imported.send, self.ddp_bsd.send),
            (
                "DDP receive",
                self.ddp_imported.receive,
                self.ddp_bsd.receive,
            ),
            ("ATP send", ai.send, ab.send),
            ("ATP receive", ai.receive, ab.receive),
        ] {
            writeln!(
                f,
                "  {name:<14} protocol in BSD {bsd:>6.0}  encapsulation {:>6.0}  imported {imp:>6.0}",
                imp - bsd
            )?;
        }
        for (p, d, r) in self.ratios() {
            writeln!(f, "ratio imported/native {p}@bsd-in-streams {d} = {r:.3}")?;
        }
        writeln!(
            f,
            "ratio encapsulated/native mbuf small = {:.3}",
            self.alloc[2] / self.alloc[0]
        )?;
        write!(
            f,
            "ratio encapsulated/native mbuf cluster = {:.3}",
            self.alloc[3] / self.alloc[1]
        )
    }
}

/// The timed loops of each configuration, `(send, receive)`, in the order
/// of [`Report`]'s fields: what [`from_callgrind`] looks for.
const LOOP_NAMES: [(&str, &str); 6] = [
    ("ddp_streams_native_send", "ddp_streams_native_receive"),
    ("ddp_bsd_in_streams_send", "ddp_bsd_in_streams_receive"),
    ("ddp_bsd_native_send", "ddp_bsd_native_receive"),
    ("atp_streams_native_send", "atp_streams_native_receive"),
    ("atp_bsd_in_streams_send", "atp_bsd_in_streams_receive"),
    ("atp_bsd_native_send", "atp_bsd_native_receive"),
];

/// Figure 7b's rows, in the order of [`Report::alloc`].
const ALLOC_LABELS: [&str; 6] = [
    "mbuf small, native",
    "mbuf cluster, native",
    "mbuf small, encapsulated",
    "mbuf cluster, encapsulated",
    "mblk 108 B",
    "mblk 2048 B",
];

/// Figure 7b's loops by name, in the order of [`Report::alloc`].
const ALLOC_NAMES: [&str; 6] = [
    "alloc_mbuf_small_native",
    "alloc_mbuf_cluster_native",
    "alloc_mbuf_small_encapsulated",
    "alloc_mbuf_cluster_encapsulated",
    "alloc_mblk_small",
    "alloc_mblk_large",
];

/// The report in instructions instead of ns: read from the output file of
/// a run of this benchmark under `valgrind --tool=callgrind` with `setup`.
/// Each timed loop is a function of its own, so the inclusive cost of the
/// calls to it (summed over its call sites), divided by the operations it
/// ran, is one operation's instructions — the machine's load does not move
/// them.
pub fn from_callgrind(text: &str, setup: &Setup) -> Result<Report> {
    use std::collections::HashMap;
    const PREFIX: &str = "strata_bench::paper004_subsystems::";
    // callgrind compresses names: "cfn=(7) name" the first time, "cfn=(7)"
    // after; "calls=N …" is followed by "position inclusive-cost".
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut totals: HashMap<&str, (u64, u64)> = HashMap::new();
    let mut callee: Option<&str> = None;
    let mut calls: Option<u64> = None;
    for line in text.lines() {
        if let Some(n) = calls.take() {
            let cost = line
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse::<u64>().ok());
            if let (Some(f), Some(cost)) = (callee, cost) {
                let t = totals.entry(f).or_default();
                t.0 += cost;
                t.1 += n;
            }
        } else if let Some(rest) = line
            .strip_prefix("cfn=")
            .or_else(|| line.strip_prefix("fn="))
        {
            let (id, name) = rest.split_once(' ').unwrap_or((rest, ""));
            if !name.is_empty() {
                names.insert(id, name);
            }
            if line.starts_with("cfn=") {
                callee = names.get(id).copied();
            }
        } else if let Some(rest) = line.strip_prefix("calls=") {
            calls = rest.split_whitespace().next().and_then(|c| c.parse().ok());
        }
    }
    let per = |name: &str, ops: usize| -> Result<f64> {
        let (cost, n) = totals
            .get(format!("{PREFIX}{name}").as_str())
            .copied()
            .unwrap_or_default();
        ensure!(n > 0, "callgrind output has no calls to {name}");
        Ok(cost as f64 / (n as f64 * ops as f64))
    };
    let mut t = [Times::default(); 6];
    for (out, (send, receive)) in t.iter_mut().zip(LOOP_NAMES) {
        *out = Times {
            send: per(send, setup.batch)?,
            receive: per(receive, setup.batch)?,
        };
    }
    let mut alloc = [0.0; 6];
    for (out, name) in alloc.iter_mut().zip(ALLOC_NAMES) {
        *out = per(name, setup.allocs)?;
    }
    Ok(Report {
        ddp_native: t[0],
        ddp_imported: t[1],
        ddp_bsd: t[2],
        atp_native_stack: t[3],
        atp_imported_stack: t[4],
        atp_bsd_stack: t[5],
        alloc,
    })
}

impl Report {
    /// The report as instructions (from [`from_callgrind`]): per protocol
    /// and direction, then the ratio lines with `instructions` in them.
    pub fn instructions_text(&self) -> String {
        let mut s =
            String::from("seed 004, Figures 6 and 7b in instructions (callgrind; per operation)\n");
        let rows = [
            ("DDP  Str (STREAMS-native)", self.ddp_native),
            ("DDP  BSD(Str) (imported)", self.ddp_imported),
            ("DDP  BSD (native subsystem)", self.ddp_bsd),
            ("ATP  Str (STREAMS-native)", self.atp_native()),
            ("ATP  BSD(Str) (imported)", self.atp_imported()),
            ("ATP  BSD (native subsystem)", self.atp_bsd()),
        ];
        s += &format!("  {:<34} {:>10} {:>10}\n", "protocol", "send", "receive");
        for (name, t) in rows {
            s += &format!("  {:<34} {:>10.0} {:>10.0}\n", name, t.send, t.receive);
        }
        for (n, v) in ALLOC_LABELS.iter().zip(self.alloc) {
            s += &format!("  {n:<34} {v:>10.0}\n");
        }
        for (p, d, r) in self.ratios() {
            s += &format!("ratio imported/native {p}@bsd-in-streams {d} instructions = {r:.3}\n");
        }
        s += &format!(
            "ratio encapsulated/native mbuf small instructions = {:.3}\n",
            self.alloc[2] / self.alloc[0]
        );
        s += &format!(
            "ratio encapsulated/native mbuf cluster instructions = {:.3}",
            self.alloc[3] / self.alloc[1]
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_measures_every_configuration_and_ends_with_ratio_lines() {
        let r = run(&Setup {
            rounds: 3,
            batch: 8,
            payload: 16,
            allocs: 100,
        })
        .unwrap();
        for t in [
            r.ddp_native,
            r.ddp_imported,
            r.ddp_bsd,
            r.atp_native_stack,
            r.atp_imported_stack,
            r.atp_bsd_stack,
        ] {
            assert!(t.send > 0.0 && t.receive > 0.0, "{t:?}");
        }
        let text = r.to_string();
        let ratios: Vec<_> = text.lines().filter(|l| l.starts_with("ratio ")).collect();
        assert_eq!(ratios.len(), 6, "{text}");
        assert!(ratios[0].starts_with("ratio imported/native ddp@bsd-in-streams send = "));
    }
}
