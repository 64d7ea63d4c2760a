//! Two hosts running the paper's 4-layer stack, with the PA on or off, over
//! Strata's simulated link.

#![allow(dead_code)]

use std::any::Any;
use std::time::Duration;

use strata::link::{LinkParams, SimNet, WireId};
use strata::{
    Addr, App, AppCx, Engine, EngineConfig, GraphConfig, Message, PacketMeta, Participants,
    ProtoId, Qos, SessionRef,
};

pub mod shuttle;

pub use strata_pa::example::mac;

/// A host's graph on the simulated link.
pub fn config(n: u8, pa: bool, extra: &str) -> GraphConfig {
    strata_pa::example::host_config(n, "sim", pa, extra).unwrap()
}

pub fn engine(cfg: &GraphConfig, seed: u64) -> Engine {
    engine_of(cfg, seed)
}

/// An engine for any graph with the PA's protocols registered.
pub fn engine_of(cfg: &GraphConfig, seed: u64) -> Engine {
    let mut reg = strata::registry();
    strata_pa::register(&mut reg);
    let built = strata::core::graph::build(cfg, &reg).unwrap();
    Engine::new(
        built,
        EngineConfig {
            seed,
            ..EngineConfig::default()
        },
    )
    .unwrap()
}

/// Keeps what arrives.
#[derive(Default)]
pub struct Sink {
    pub got: Vec<Vec<u8>>,
    /// Echo every message back (a round trip).
    pub echo: bool,
}

impl App for Sink {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        if self.echo
            && let Some(s) = s
        {
            cx.send(s, msg.clone());
        }
        self.got.push(msg.to_vec());
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Two connected hosts with an application each, sessions open both ways.
pub struct Pair {
    pub net: SimNet,
    pub a: strata::link::HostId,
    pub b: strata::link::HostId,
    pub wire: WireId,
    pub top: ProtoId,
    pub apps: [strata::AppId; 2],
    pub sessions: [SessionRef; 2],
}

pub fn pair(seed: u64, pa: bool, params: LinkParams, extra: &str) -> Pair {
    let mut net = SimNet::new(seed);
    let a = net.add_host("a", engine(&config(1, pa, extra), seed));
    let b = net.add_host("b", engine(&config(2, pa, extra), seed + 1));
    let wire = net
        .connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    let top = strata_pa::example::top(pa);
    let top = net.engine(a).proto_id(top).unwrap();
    let (app_a, s_a) = open_side(net.engine(a), top, 2);
    let (app_b, s_b) = open_side(net.engine(b), top, 1);
    let (apps, sessions) = ([app_a, app_b], [s_a, s_b]);
    Pair {
        net,
        a,
        b,
        wire,
        top,
        apps,
        sessions,
    }
}

/// A sink application on `e` and its session on `top` to host `peer`.
pub fn open_side(e: &mut Engine, top: ProtoId, peer: u8) -> (strata::AppId, SessionRef) {
    let app = e.add_app(Box::new(Sink::default()));
    let s = e
        .with_app(app, |_, cx| {
            cx.open(
                top,
                Participants::remote([Addr::Hw(mac(peer))]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    (app, s)
}

impl Pair {
    pub fn send(&mut self, from: usize, data: &[u8]) {
        let (h, app, s) = (self.host(from), self.apps[from], self.sessions[from]);
        let m = Message::from_slice(data);
        self.net
            .engine(h)
            .with_app(app, |_, cx| cx.send(s, m))
            .unwrap();
    }

    pub fn host(&self, i: usize) -> strata::link::HostId {
        if i == 0 { self.a } else { self.b }
    }

    pub fn got(&mut self, at: usize) -> Vec<Vec<u8>> {
        let (h, app) = (self.host(at), self.apps[at]);
        self.net.engine(h).app::<Sink>(app).unwrap().got.clone()
    }

    pub fn set_echo(&mut self, at: usize) {
        let (h, app) = (self.host(at), self.apps[at]);
        self.net.engine(h).app_mut::<Sink>(app).unwrap().echo = true;
    }

    pub fn event(&mut self, at: usize, name: &str) -> u64 {
        let h = self.host(at);
        let top = self.top;
        self.net.engine(h).counters(top).events().get(name)
    }

    pub fn drops(&mut self, at: usize, name: &str) -> u64 {
        let h = self.host(at);
        let top = self.top;
        self.net.engine(h).counters(top).drops().get(name)
    }

    pub fn run(&mut self, d: Duration) {
        self.net.run_for(d);
    }

    /// Whether side `at`'s PA predictions equal a full rebuild.
    pub fn predictions_current(&mut self, at: usize) -> bool {
        let (h, top, s) = (self.host(at), self.top, self.sessions[at]);
        let pa = self
            .net
            .engine(h)
            .protocol::<strata_pa::accel::Accelerator>(top);
        pa.and_then(|pa| pa.predictions_current(s.sess))
            .unwrap_or(false)
    }
}

/// Writes into `hdr` (the four headers in `order`) the checksum `sum` its
/// receiver computes over them and `data`: a forger who knows the
/// algorithm.
pub fn seal(
    l: &strata_pa::field::Layout,
    order: strata_pa::field::ByteOrder,
    sum: strata_pa::field::FieldHandle,
    hdr: &mut [u8],
    data: &Message,
) {
    let v = strata_pa::layer::View {
        layout: l,
        order,
        buf: hdr,
    };
    let x = strata_pa::stack::check::sum_of(sum, v, data);
    l.set(hdr, order, sum, x);
}
