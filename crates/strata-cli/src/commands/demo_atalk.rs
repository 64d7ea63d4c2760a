//! `strata demo`'s seed 004 section: one ATP transaction between two hybrid
//! graphs — on one host BSD's ATP over STREAMS' DDP, on the other STREAMS'
//! ATP over BSD's DDP, every one of them the very source file its own
//! subsystem compiles, imported unmodified into Strata — with the graph and
//! each subsystem's own counters.

use std::any::Any;
use std::time::Duration;

use anyhow::{Context, Result};
use strata::link::{LinkParams, SimNet};
use strata::{
    Addr, App, AppCx, Arch, HostBuilder, HostParams, Message, PacketMeta, Participants, Qos,
    SessionRef,
};
use strata_compat::bsd_in_strata::atp::BsdAtp;
use strata_compat::bsd_in_strata::ddp::BsdDdp;
use strata_compat::streams_in_strata::atp::StreamsAtp;
use strata_compat::streams_in_strata::ddp::StreamsDdp;

const REQUESTER: &str = "atp@bsd/ddp@streams/eth";
const RESPONDER: &str = "atp@streams/ddp@bsd/eth";
/// The responder's DDP socket.
const SOCKET: u16 = 10;
/// AppleTalk's startup network, where `HostParams::numbered` nodes live.
const NET: u16 = 0xff00;

/// Sends one request when its timer fires and keeps the reply.
struct Requester {
    session: Option<SessionRef>,
    reply: Option<(Vec<u8>, Duration)>,
}

impl App for Requester {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        self.reply = Some((msg.to_vec(), cx.now().saturating_since(Default::default())));
    }

    fn timer(&mut self, _: u64, cx: &mut AppCx) {
        if let Some(s) = self.session {
            cx.send(s, Message::from(b"what time is it?".to_vec()));
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Answers every request, counting how many reached it.
struct Responder {
    requests: u32,
}

impl App for Responder {
    fn receive(&mut self, s: Option<SessionRef>, _: Message, _: &PacketMeta, cx: &mut AppCx) {
        self.requests += 1;
        if let Some(s) = s {
            let answer = format!(
                "{:?} after the epoch",
                cx.now().saturating_since(Default::default())
            );
            cx.send(s, Message::from(answer.into_bytes()));
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Runs the transaction over `link` (each way) and prints what happened.
pub fn transaction(arch: Arch, seed: u64, link: LinkParams) -> Result<()> {
    let host = |n: u8, spec: &str| {
        HostBuilder::spec(spec, HostParams::numbered(n), "net0", strata::link::SIM)
            .arch(arch)
            .seed(seed + u64::from(n))
            .build()
    };
    let mut net = SimNet::new(seed);
    let a = net.add_host("a", host(1, REQUESTER)?);
    let b = net.add_host("b", host(2, RESPONDER)?);
    net.connect((a, "net0"), (b, "net0"), link.clone(), link)?;
    println!("  a runs {REQUESTER} (BSD's ATP over STREAMS' DDP);");
    println!("  b runs {RESPONDER} (STREAMS' ATP over BSD's DDP) — each the very source file");
    println!("  its own subsystem compiles, imported unmodified. a's graph:\n");
    for line in net.engine(a).graph_text().lines() {
        println!("    {line}");
    }

    let rx = net.engine(b).add_app(Box::new(Responder { requests: 0 }));
    let atp_b = net
        .engine(b)
        .proto_id("atp@streams")
        .context("b has atp@streams")?;
    net.engine(b)
        .with_app(rx, |_, cx| {
            cx.open_enable(
                atp_b,
                Participants::local([Addr::Port(SOCKET)]),
                Qos::default(),
            )
        })
        .context("responder")??;
    let tx = net.engine(a).add_app(Box::new(Requester {
        session: None,
        reply: None,
    }));
    let atp_a = net.engine(a).proto_id("atp@bsd").context("a has atp@bsd")?;
    net.engine(a)
        .with_app(tx, |app, cx| -> Result<()> {
            let to =
                Participants::remote([Addr::AppleTalk { net: NET, node: 2 }, Addr::Port(SOCKET)]);
            let s = cx.open(atp_a, to, Qos::default())?;
            if let Some(r) = app.as_any_mut().downcast_mut::<Requester>() {
                r.session = Some(s);
            }
            let now = cx.now();
            cx.set_timer(now, 0);
            Ok(())
        })
        .context("requester")??;
    let done = net.run_until_condition(
        |n| {
            n.engine(a)
                .app::<Requester>(tx)
                .is_some_and(|r| r.reply.is_some())
        },
        Duration::from_secs(60),
    );
    // The requester's release (TRel) is still on the wire: let it land, so
    // the responder's counters show the whole transaction.
    net.run_for(Duration::from_millis(100));
    let reply = net
        .engine(a)
        .app::<Requester>(tx)
        .and_then(|r| r.reply.clone());
    let requests = net.engine(b).app::<Responder>(rx).map_or(0, |r| r.requests);
    match (done, reply) {
        (true, Some((bytes, at))) => println!(
            "\n  a asked \"what time is it?\"; b answered \"{}\" — the reply was back at {at:?} (virtual); the request reached b {requests} time(s)",
            String::from_utf8_lossy(&bytes)
        ),
        _ => println!("\n  the transaction did not complete within 60 s (virtual)"),
    }

    let e = net.engine(a);
    let bsd_atp = e
        .proto_id("atp@bsd")
        .and_then(|id| e.protocol::<BsdAtp>(id))
        .map(|p| p.stats().named())
        .unwrap_or_default();
    let streams_ddp = e
        .proto_id("ddp@streams")
        .and_then(|id| e.protocol::<StreamsDdp>(id))
        .map(|d| d.counters())
        .unwrap_or_default();
    let e = net.engine(b);
    let streams_atp = e
        .proto_id("atp@streams")
        .and_then(|id| e.protocol::<StreamsAtp>(id))
        .map(|p| p.counters())
        .unwrap_or_default();
    let bsd_ddp = e
        .proto_id("ddp@bsd")
        .and_then(|id| e.protocol::<BsdDdp>(id))
        .map(|d| d.stats().named())
        .unwrap_or_default();
    for (who, what, c) in [
        ("a", "BSD's atpstat", bsd_atp),
        ("a", "STREAMS DDP", streams_ddp),
        ("b", "STREAMS ATP", streams_atp),
        ("b", "BSD's ddpstat", bsd_ddp),
    ] {
        let shown: Vec<String> = c
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("  {who} {what}: {}", shown.join(", "));
    }
    for h in [a, b] {
        let name = net.host_name(h).to_string();
        for (proto, c) in net.engine(h).all_counters() {
            println!("  {name} {proto:<12} {c}");
        }
    }
    Ok(())
}
