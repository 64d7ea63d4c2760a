//! Seed 004's Figure 5: null-transaction throughput of every native and
//! hybrid AppleTalk graph. A client asks for a null transaction (an ATP
//! request of one byte), the server answers at once with a fixed-length
//! reply, the client asks again as soon as the reply is in: one transaction
//! outstanding, transactions per second. Client and server run the same
//! graph, on two hosts joined by the in-memory link (here) or by a veth
//! pair with AF_PACKET (`strata bench paper004`, which owns namespaces).
//!
//! The graphs: Strata's own `atp/ddp/eth`; native ATP over DDP imported
//! from BSD or STREAMS; ATP imported from BSD or STREAMS over native DDP;
//! both imported from one subsystem; and the two cross hybrids
//! (`atp@bsd/ddp@streams/eth`, `atp@streams/ddp@bsd/eth`).

use std::any::Any;
use std::time::{Duration, Instant as Wall};

use anyhow::{Result, bail};
use strata::link::MemPair;
use strata::{
    Addr, App, AppCx, AppId, Arch, Engine, HostBuilder, HostParams, Instant, Message, PacketMeta,
    Participants, Qos, SessionRef,
};

/// Every graph of Figure 5, native first.
pub const GRAPHS: [&str; 9] = [
    "atp/ddp/eth",
    "atp/ddp@bsd/eth",
    "atp/ddp@streams/eth",
    "atp@bsd/ddp/eth",
    "atp@streams/ddp/eth",
    "atp@bsd/ddp@bsd/eth",
    "atp@streams/ddp@streams/eth",
    "atp@bsd/ddp@streams/eth",
    "atp@streams/ddp@bsd/eth",
];

/// The server's DDP socket.
pub const SOCKET: u16 = 10;

/// AppleTalk's startup network, where both hosts live.
pub const NET: u16 = 0xff00;

/// The ATP of `graph` (its top kind).
pub fn atp_kind(graph: &str) -> &str {
    graph.split('/').next().unwrap_or("atp")
}

/// Asks for null transactions one after another, timing a batch.
pub struct NullClient {
    session: Option<SessionRef>,
    remaining: u64,
    /// Replies received.
    pub done: u64,
    /// Replies of the wrong length.
    pub wrong: u64,
    reply_len: usize,
    started: Option<Wall>,
    /// How long the last batch took, once it is over.
    pub elapsed: Option<Duration>,
}

impl NullClient {
    fn request(&self, cx: &mut AppCx) {
        if let Some(s) = self.session {
            cx.send(s, Message::from(vec![0u8]));
        }
    }
}

impl App for NullClient {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        self.done += 1;
        if msg.len() != self.reply_len {
            self.wrong += 1;
        }
        if self.remaining > 0 {
            self.remaining -= 1;
            self.request(cx);
        } else if let Some(t) = self.started.take() {
            self.elapsed = Some(t.elapsed());
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Answers every request at once with the same reply.
pub struct NullServer {
    reply: Message,
}

impl App for NullServer {
    fn receive(&mut self, s: Option<SessionRef>, _: Message, _: &PacketMeta, cx: &mut AppCx) {
        if let Some(s) = s {
            cx.send(s, self.reply.clone());
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Installs the server (listening on [`SOCKET`]) and the client (a session
/// to the server, node `server_node`); returns the client's id.
pub fn install(
    client: &mut Engine,
    server: &mut Engine,
    graph: &str,
    server_node: u8,
    reply_len: usize,
) -> Result<AppId> {
    let kind = atp_kind(graph);
    let (Some(atp_s), Some(atp_c)) = (server.proto_id(kind), client.proto_id(kind)) else {
        bail!("{graph}: no {kind}");
    };
    let srv = server.add_app(Box::new(NullServer {
        reply: Message::from(vec![0x5a; reply_len]),
    }));
    server
        .with_app(srv, |_, cx| {
            cx.open_enable(
                atp_s,
                Participants::local([Addr::Port(SOCKET)]),
                Qos::default(),
            )
        })
        .map_err(|e| anyhow::anyhow!("no server app: {e}"))??;
    let id = client.add_app(Box::new(NullClient {
        session: None,
        remaining: 0,
        done: 0,
        wrong: 0,
        reply_len,
        started: None,
        elapsed: None,
    }));
    let parts = Participants::remote([
        Addr::AppleTalk {
            net: NET,
            node: server_node,
        },
        Addr::Port(SOCKET),
    ]);
    let s = client
        .with_app(id, |_, cx| cx.open(atp_c, parts, Qos::default()))
        .map_err(|e| anyhow::anyhow!("no client app: {e}"))??;
    if let Some(c) = client.app_mut::<NullClient>(id) {
        c.session = Some(s);
    }
    Ok(id)
}

/// Starts a batch of `count` transactions on `client`.
pub fn start(client: &mut Engine, id: AppId, count: u64) {
    let _ = client.with_app(id, |app, cx| {
        if let Some(c) = app.as_any_mut().downcast_mut::<NullClient>() {
            c.remaining = count.saturating_sub(1);
            c.elapsed = None;
            c.started = Some(Wall::now());
            c.request(cx);
        }
    });
}

/// The elapsed time of the batch, once it is over.
pub fn finished(client: &mut Engine, id: AppId) -> Option<Duration> {
    client.app_mut::<NullClient>(id)?.elapsed.take()
}

/// What to run in memory.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Rounds; each runs a batch of every graph.
    pub rounds: usize,
    /// Transactions per batch.
    pub batch: u64,
    /// Bytes of the server's reply.
    pub reply: usize,
    /// Dispatch architecture of both hosts.
    pub arch: Arch,
    /// The graphs to run (all of [`GRAPHS`] when empty).
    pub graphs: Vec<String>,
}

impl Setup {
    /// The graphs to run.
    pub fn graphs(&self) -> Vec<String> {
        if self.graphs.is_empty() {
            GRAPHS.iter().map(|g| g.to_string()).collect()
        } else {
            self.graphs.clone()
        }
    }
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            rounds: 20,
            batch: 2_000,
            reply: 64,
            arch: Arch::Llm,
            graphs: Vec::new(),
        }
    }
}

/// One graph's throughput, transactions per second (median of rounds).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Rate {
    /// The graph.
    pub graph: String,
    /// Transactions per second.
    pub tps: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// A host of `graph` for the in-memory link, node `n`.
fn mem_host(graph: &str, n: u8, arch: Arch) -> Result<Engine> {
    Ok(
        HostBuilder::spec(graph, HostParams::numbered(n), "net0", strata::link::MEM)
            .arch(arch)
            .build()?,
    )
}

/// Figure 5 on the in-memory link: every graph, batches alternating.
pub fn memory(setup: &Setup) -> Result<Vec<Rate>> {
    let mut pairs = Vec::new();
    for graph in setup.graphs() {
        let graph = graph.as_str();
        let (mut c, mut s) = (
            mem_host(graph, 1, setup.arch)?,
            mem_host(graph, 2, setup.arch)?,
        );
        let id = install(&mut c, &mut s, graph, 2, setup.reply)?;
        let mut pair = MemPair::new(c, s, "net0")?;
        // Warm up: the hosts learn each other's addresses.
        start(pair.a(), id, 50);
        pair.pump(Instant::ZERO);
        if finished(pair.a(), id).is_none() {
            bail!("{graph}: the warm-up transactions did not finish");
        }
        pairs.push((graph.to_string(), pair, id, Vec::new()));
    }
    for round in 0..setup.rounds {
        let n = pairs.len();
        for i in 0..n {
            let (graph, pair, id, rates) = &mut pairs[(i + round) % n];
            start(pair.a(), *id, setup.batch);
            pair.pump(Instant::ZERO);
            let Some(t) = finished(pair.a(), *id) else {
                bail!("{graph}: a batch did not finish");
            };
            rates.push(setup.batch as f64 / t.as_secs_f64());
        }
    }
    let mut out = Vec::new();
    for (graph, mut pair, id, rates) in pairs {
        let c = pair.a().app::<NullClient>(id);
        if c.is_none_or(|c| c.wrong > 0) {
            bail!("{graph}: a reply of the wrong length");
        }
        out.push(Rate {
            graph,
            tps: median(rates),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_graph_completes_its_null_transactions_in_memory() {
        let r = memory(&Setup {
            rounds: 2,
            batch: 20,
            ..Setup::default()
        })
        .unwrap();
        assert_eq!(r.len(), GRAPHS.len());
        assert!(r.iter().all(|x| x.tps > 0.0), "{r:?}");
    }
}
