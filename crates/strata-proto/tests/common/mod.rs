//! Hosts for two-engine tests: each runs a stack built from a one-line spec
//! on a link called `net0`; tests move frames between them by hand, so they can
//! drop, reorder or rewrite any frame on the way.

#![allow(dead_code)]

use std::any::Any;
use std::net::Ipv4Addr;
use std::time::Duration;

use strata_core::graph::{self, LinkConfig, LinkSpec};
use strata_core::{
    App, AppCx, AppEvent, AppId, Arch, Engine, EngineConfig, HwAddr, Instant, LinkId, Message,
    PacketMeta, ProtoId, Registry, SessionRef,
};
use strata_proto::{Ipv4Cidr, host_options};

/// Every protocol of the crate and a test link kind.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    strata_proto::register(&mut r);
    r.register_link(LinkSpec {
        kind: "wire",
        doc: "frames moved by the test",
        options: &[],
        validate: None,
    });
    r
}

/// One host on 198.18.0.0/24.
pub struct Host {
    pub engine: Engine,
    pub link: LinkId,
    pub mac: HwAddr,
    pub ip: Ipv4Addr,
    pub now: Instant,
}

/// Options to change from the defaults, as (kind, option, value).
pub type Extra<'a> = &'a [(&'a str, &'a str, toml::Value)];

/// Host number `n` (address 198.18.0.n/24, MAC 02:53:54:00:00:0n) running
/// `spec`, with a gateway at 198.18.0.254 when `gateway` is set.
pub fn host_with(n: u8, arch: Arch, spec: &str, gateway: bool, extra: Extra) -> Host {
    let mac = HwAddr::local(u16::from(n));
    let ip = Ipv4Addr::new(198, 18, 0, n);
    let cidr = Ipv4Cidr::new(ip, 24).unwrap();
    let mut opts = host_options(mac, cidr, gateway.then_some(Ipv4Addr::new(198, 18, 0, 254)));
    for (kind, key, value) in extra {
        opts.entry(kind.to_string())
            .or_default()
            .insert(key.to_string(), value.clone());
    }
    let reg = registry();
    let cfg = graph::from_spec(spec, &reg, LinkConfig::new("net0", "wire"), &opts).unwrap();
    let built = graph::build(&cfg, &reg).unwrap();
    let engine = Engine::new(
        built,
        EngineConfig {
            arch: Some(arch),
            ..Default::default()
        },
    )
    .unwrap();
    let link = engine.link_id("net0").unwrap();
    Host {
        engine,
        link,
        mac,
        ip,
        now: Instant::ZERO,
    }
}

/// Host `n` running `udp/ip/eth` with default options and no gateway.
pub fn host(n: u8, arch: Arch) -> Host {
    host_with(n, arch, "udp/ip/eth", false, &[])
}

impl Host {
    pub fn proto(&self, name: &str) -> ProtoId {
        self.engine.proto_id(name).unwrap()
    }

    /// Runs the engine at its current time.
    pub fn run(&mut self) {
        self.engine.run(self.now);
    }

    /// Moves the clock on and runs due timers.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.engine.run(self.now);
    }

    /// Takes every frame the host has sent, as bytes.
    pub fn sent(&mut self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.engine.poll_transmit(self.link))
            .map(|m| m.to_vec())
            .collect()
    }

    /// Hands the host a frame as a driver would (one contiguous buffer) and runs.
    pub fn receive(&mut self, frame: &[u8]) {
        self.engine
            .receive(self.link, Message::from(frame.to_vec()));
        self.run();
    }

    /// Adds a recording application.
    pub fn recorder(&mut self) -> AppId {
        self.engine.add_app(Box::new(Recorder::default()))
    }

    pub fn app(&self, id: AppId) -> &Recorder {
        self.engine.app::<Recorder>(id).unwrap()
    }

    pub fn app_mut(&mut self, id: AppId) -> &mut Recorder {
        self.engine.app_mut::<Recorder>(id).unwrap()
    }

    /// A protocol's drop count for `reason`.
    pub fn drops(&self, proto: &str, reason: &str) -> u64 {
        self.engine.counters(self.proto(proto)).drops().get(reason)
    }

    /// A protocol's count of event `name`.
    pub fn events(&self, proto: &str, name: &str) -> u64 {
        self.engine.counters(self.proto(proto)).events().get(name)
    }
}

/// Moves every frame `from` sent to `to`; returns how many.
pub fn carry(from: &mut Host, to: &mut Host) -> usize {
    let frames = from.sent();
    for f in &frames {
        to.engine.receive(to.link, Message::from(f.clone()));
    }
    to.run();
    frames.len()
}

/// Carries frames both ways until neither host sends any more.
pub fn settle(a: &mut Host, b: &mut Host) {
    for _ in 0..64 {
        if carry(a, b) + carry(b, a) == 0 {
            return;
        }
    }
    panic!("the hosts never went quiet");
}

/// An application that records what it gets and, when asked, echoes data
/// back on the session it came from.
#[derive(Default)]
pub struct Recorder {
    pub received: Vec<(Option<SessionRef>, Vec<u8>, PacketMeta)>,
    pub events: Vec<AppEvent>,
    pub echo: bool,
}

impl Recorder {
    /// The data received, in order.
    pub fn data(&self) -> Vec<Vec<u8>> {
        self.received.iter().map(|(_, d, _)| d.clone()).collect()
    }
}

impl App for Recorder {
    fn receive(
        &mut self,
        session: Option<SessionRef>,
        msg: Message,
        meta: &PacketMeta,
        cx: &mut AppCx,
    ) {
        self.received.push((session, msg.to_vec(), meta.clone()));
        if self.echo
            && let Some(s) = session
        {
            cx.send(s, msg);
        }
    }

    fn event(&mut self, event: AppEvent, _cx: &mut AppCx) {
        self.events.push(event);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Host 2 listening on TCP port 80 (`tcp/ip/eth`, LLM) and host 1, with
/// `extra`, opening a connection to it; the SYN has been sent, not carried.
/// Returns both hosts, host 2's recorder (told of the connection when it
/// opens), host 1's recorder and its session.
pub fn tcp_opening(extra: Extra) -> (Host, Host, AppId, AppId, SessionRef) {
    use strata_core::{Addr, Participants, Qos};
    let mut a = host_with(1, Arch::Llm, "tcp/ip/eth", false, extra);
    let mut b = host_with(2, Arch::Llm, "tcp/ip/eth", false, &[]);
    let server = b.recorder();
    let tcp_b = b.proto("tcp");
    b.engine
        .with_app(server, |_, cx| {
            cx.open_enable(tcp_b, Participants::local([Addr::Port(80)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let client = a.recorder();
    let tcp_a = a.proto("tcp");
    let parts = Participants::remote([Addr::Ip(b.ip), Addr::Port(80)]);
    let sa = a
        .engine
        .with_app(client, |_, cx| cx.open(tcp_a, parts, Qos::default()))
        .unwrap()
        .unwrap();
    a.run();
    (a, b, server, client, sa)
}
