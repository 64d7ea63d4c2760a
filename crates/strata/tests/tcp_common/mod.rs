//! What the TCP tests share: hosts on a simulated link, a source that writes
//! a deterministic stream through `tcp::Write` and a sink that hashes what
//! arrives, and a transfer runner that checks the SHA-256 of both ends.

#![allow(dead_code)]

use std::any::Any;
use std::net::Ipv4Addr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use strata::core::Reply;
use strata::link::{HostId, LinkParams, SimNet, WireId};
use strata::proto::tcp::{self, ConnInfo};
use strata::{
    Addr, App, AppCx, AppEvent, AppId, Arch, Control, Engine, HostBuilder, HostParams, Instant,
    Message, PacketMeta, Participants, ProtoId, Qos, SessionRef, UpiError,
};

/// The server's port.
pub const PORT: u16 = 5001;

/// Bytes per chunk of the test stream.
const CHUNK: usize = 64 * 1024;

/// The TCP of a stack spec: Strata's `tcp`, or smoltcp's imported one.
pub fn tcp_kind(spec: &str) -> &'static str {
    if spec.contains("smoltcp-tcp") {
        Tcp::Smoltcp.kind()
    } else {
        Tcp::Strata.kind()
    }
}

/// The TCP a test runs on: Strata's own, or smoltcp's imported into Strata
/// (seed 004), which answers the same API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tcp {
    /// `tcp`.
    Strata,
    /// `smoltcp-tcp`.
    Smoltcp,
}

impl Tcp {
    /// Its registry name.
    pub fn kind(self) -> &'static str {
        match self {
            Tcp::Strata => "tcp",
            Tcp::Smoltcp => "smoltcp-tcp",
        }
    }

    /// The stack spec of a host running it over IPv4 and Ethernet.
    pub fn spec(self) -> &'static str {
        match self {
            Tcp::Strata => "tcp/ip/eth",
            Tcp::Smoltcp => "smoltcp-tcp/ip/eth",
        }
    }
}

/// The state of session `s` of `engine`, `None` once it is gone.
pub fn state(engine: &mut Engine, s: SessionRef) -> Option<tcp::state::State> {
    info(engine, s).map(|i| i.state)
}

/// A host numbered `n` running `spec` under `arch` with TCP options `tcp`
/// (for the spec's TCP).
pub fn host(n: u8, arch: Arch, spec: &str, seed: u64, tcp: &[(&str, toml::Value)]) -> Engine {
    let mut b = HostBuilder::spec(spec, HostParams::numbered(n), "net0", strata::link::SIM)
        .arch(arch)
        .seed(seed.wrapping_mul(31).wrapping_add(u64::from(n)));
    for (k, v) in tcp {
        b = b.option(tcp_kind(spec), k, v.clone());
    }
    b.build().unwrap()
}

/// What `tcp::Info` answers about session `s` of `engine`.
pub fn info(engine: &mut Engine, s: SessionRef) -> Option<ConnInfo> {
    match engine.control(s.proto, Some(s.sess), Control::Private(Box::new(tcp::Info))) {
        Ok(Reply::Private(b)) => b.downcast::<ConnInfo>().ok().map(|i| *i),
        _ => None,
    }
}

/// The address of host `n`.
pub fn ip(n: u8) -> Ipv4Addr {
    HostParams::numbered(n).address.address()
}

/// Chunk `i` of the test stream: xorshift64* output seeded by the index.
pub fn chunk(i: u64, len: usize) -> Bytes {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(len);
    Bytes::from(v)
}

/// Stream lengths and their digests.
type Digests = Mutex<Vec<(u64, [u8; 32])>>;

/// SHA-256 of the first `total` bytes of the stream (computed once per size).
pub fn expected_digest(total: u64) -> [u8; 32] {
    static CACHE: OnceLock<Digests> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    if let Some((_, d)) = cache.lock().unwrap().iter().find(|(t, _)| *t == total) {
        return *d;
    }
    let mut h = Sha256::new();
    let mut done = 0u64;
    let mut i = 0;
    while done < total {
        let len = (total - done).min(CHUNK as u64) as usize;
        h.update(chunk(i, len));
        done += len as u64;
        i += 1;
    }
    let d: [u8; 32] = h.finalize().into();
    cache.lock().unwrap().push((total, d));
    d
}

fn op(
    tcp: ProtoId,
    s: SessionRef,
    cx: &mut AppCx,
    op: impl Into<Control>,
) -> Result<Reply, UpiError> {
    cx.control(tcp, Some(s.sess), op.into())
}

/// Connects and writes `total` bytes of the stream, as fast as `Write` takes
/// them, then shuts its side down.
pub struct Source {
    pub tcp: ProtoId,
    pub total: u64,
    pub session: Option<SessionRef>,
    next_chunk: u64,
    generated: u64,
    pending: Option<Message>,
    pub written: u64,
    pub shut: bool,
    pub events: Vec<AppEvent>,
    pub closed: Option<Option<UpiError>>,
}

impl Source {
    pub fn new(tcp: ProtoId, total: u64) -> Source {
        Source {
            tcp,
            total,
            session: None,
            next_chunk: 0,
            generated: 0,
            pending: None,
            written: 0,
            shut: false,
            events: Vec::new(),
            closed: None,
        }
    }

    fn pump(&mut self, cx: &mut AppCx) {
        let Some(s) = self.session else { return };
        loop {
            let msg = match self.pending.take() {
                Some(m) => m,
                None if self.generated < self.total => {
                    let len = (self.total - self.generated).min(CHUNK as u64) as usize;
                    let m = Message::from_bytes(chunk(self.next_chunk, len));
                    self.next_chunk += 1;
                    self.generated += len as u64;
                    m
                }
                None => break,
            };
            let Ok(Reply::Size(n)) = op(self.tcp, s, cx, tcp::Write(msg.clone())) else {
                return;
            };
            self.written += n as u64;
            if n < msg.len() {
                let mut rest = msg;
                self.pending = Some(rest.split_off(n));
                return;
            }
        }
        if !self.shut && self.written == self.total {
            self.shut = true;
            let _ = op(self.tcp, s, cx, tcp::Shutdown);
        }
    }
}

impl App for Source {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match &event {
            AppEvent::Connected(s) => {
                self.session = Some(*s);
                self.pump(cx);
            }
            AppEvent::Writable(_) => self.pump(cx),
            AppEvent::Closed { error, .. } => self.closed = Some(error.clone()),
            _ => {}
        }
        self.events.push(event);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Listens, hashes every byte that arrives, and closes its side when the
/// peer has. With `manual`, it reports what it consumed with `tcp::Consumed`,
/// unless `paused`, when it holds on to it.
pub struct Sink {
    pub tcp: ProtoId,
    pub manual: bool,
    pub paused: bool,
    pub held: usize,
    hasher: Sha256,
    pub bytes: u64,
    pub deliveries: u64,
    pub session: Option<SessionRef>,
    pub peer_closed: bool,
    pub closed: Option<Option<UpiError>>,
    pub events: Vec<AppEvent>,
}

impl Sink {
    pub fn new(tcp: ProtoId) -> Sink {
        Sink {
            tcp,
            manual: false,
            paused: false,
            held: 0,
            hasher: Sha256::new(),
            bytes: 0,
            deliveries: 0,
            session: None,
            peer_closed: false,
            closed: None,
            events: Vec::new(),
        }
    }

    pub fn digest(&self) -> [u8; 32] {
        self.hasher.clone().finalize().into()
    }

    /// Reports what it held back.
    pub fn resume(&mut self, cx: &mut AppCx) {
        self.paused = false;
        if let Some(s) = self.session
            && self.held > 0
        {
            let n = std::mem::take(&mut self.held);
            op(self.tcp, s, cx, tcp::Consumed(n)).unwrap();
        }
    }
}

impl App for Sink {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        for c in msg.chunks() {
            self.hasher.update(c);
        }
        self.bytes += msg.len() as u64;
        self.deliveries += 1;
        if self.manual {
            self.held += msg.len();
            if !self.paused {
                self.resume(cx);
            }
        }
        assert_eq!(s, self.session, "data arrives on the announced session");
    }

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match &event {
            AppEvent::OpenDone { session, .. } => {
                self.session = Some(*session);
                if self.manual {
                    op(self.tcp, *session, cx, tcp::ManualConsume(true)).unwrap();
                }
            }
            AppEvent::PeerClosed(s) => {
                self.peer_closed = true;
                let _ = op(self.tcp, *s, cx, tcp::Shutdown);
            }
            AppEvent::Closed { error, .. } => self.closed = Some(error.clone()),
            _ => {}
        }
        self.events.push(event);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One transfer to run.
#[derive(Clone)]
pub struct Transfer {
    pub arch: Arch,
    pub spec: &'static str,
    pub seed: u64,
    /// Client to server (the data direction).
    pub forward: LinkParams,
    /// Server to client (the ACKs).
    pub back: LinkParams,
    pub bytes: u64,
    pub tcp: Vec<(&'static str, toml::Value)>,
    /// Most virtual time to allow.
    pub limit: Duration,
    /// Both hosts' links have TCP offloads: they cut super-segments on the
    /// way out and merge runs of segments on the way in.
    pub offload: bool,
}

impl Transfer {
    pub fn new(bytes: u64, forward: LinkParams) -> Transfer {
        Transfer {
            arch: Arch::Llm,
            spec: "tcp/ip/eth",
            seed: 1,
            back: forward.clone(),
            forward,
            bytes,
            tcp: Vec::new(),
            limit: Duration::from_secs(3600),
            offload: false,
        }
    }
}

/// What a transfer did.
pub struct Done {
    pub net: SimNet,
    pub client: HostId,
    pub server: HostId,
    /// The wire between them.
    pub wire: WireId,
    /// Virtual time from the open to the sink's close.
    pub elapsed: Duration,
    /// The sender's connection at the end.
    pub sender: ConnInfo,
    pub sink_deliveries: u64,
}

/// The service's DAA application identifier on `ethdaa` stacks.
pub const SERVICE: u32 = 100;

/// A transfer under way.
pub struct Running {
    pub net: SimNet,
    pub client: HostId,
    pub server: HostId,
    /// The wire between them.
    pub wire: WireId,
    pub source: AppId,
    pub sink: AppId,
    /// The client's session.
    pub session: SessionRef,
    pub tcp_client: ProtoId,
    pub tcp_server: ProtoId,
    pub bytes: u64,
    start: Instant,
}

impl Running {
    pub fn sink(&mut self) -> &mut Sink {
        let b = self.server;
        let sink = self.sink;
        self.net.engine(b).app_mut::<Sink>(sink).unwrap()
    }

    pub fn source(&mut self) -> &mut Source {
        let a = self.client;
        let source = self.source;
        self.net.engine(a).app_mut::<Source>(source).unwrap()
    }

    /// The client's connection.
    pub fn sender(&mut self) -> Option<ConnInfo> {
        let (a, s) = (self.client, self.session);
        info(self.net.engine(a), s)
    }

    /// Runs until both ends have closed or `limit` passes; true when they did.
    pub fn run(&mut self, limit: Duration) -> bool {
        let (a, b, source, sink) = (self.client, self.server, self.source, self.sink);
        self.net.run_until_condition(
            |net| {
                let done_sink = net.engine(b).app::<Sink>(sink).unwrap().closed.is_some();
                let done_source = net
                    .engine(a)
                    .app::<Source>(source)
                    .unwrap()
                    .closed
                    .is_some();
                done_sink && done_source
            },
            limit,
        )
    }
}

/// Sets up `t`: a listening sink on the server, a source connecting from the
/// client.
pub fn start(t: &Transfer) -> Running {
    let mut net = SimNet::new(t.seed);
    let a = net.add_host("client", host(1, t.arch, t.spec, t.seed, &t.tcp));
    let b = net.add_host("server", host(2, t.arch, t.spec, t.seed, &t.tcp));
    let wire = net
        .connect((a, "net0"), (b, "net0"), t.forward.clone(), t.back.clone())
        .unwrap();
    if t.offload {
        assert!(net.offload(a, "net0") && net.offload(b, "net0"));
    }
    let daa = t.spec.contains("ethdaa");
    let qos = Qos {
        app_id: daa.then_some(SERVICE),
        ..Qos::default()
    };
    let e = net.engine(b);
    let tcp_b = e.proto_id(tcp_kind(t.spec)).unwrap();
    let sink = e.add_app(Box::new(Sink::new(tcp_b)));
    e.with_app(sink, |_, cx| {
        cx.open_enable(tcp_b, Participants::local([Addr::Port(PORT)]), qos)
    })
    .unwrap()
    .unwrap();
    let e = net.engine(a);
    let tcp_a = e.proto_id(tcp_kind(t.spec)).unwrap();
    let source = e.add_app(Box::new(Source::new(tcp_a, t.bytes)));
    let mut remote = vec![Addr::Ip(ip(2)), Addr::Port(PORT)];
    if daa {
        remote.insert(0, Addr::AppId(SERVICE));
    }
    let session = e
        .with_app(source, |_, cx| {
            cx.open(
                tcp_a,
                Participants::remote(remote).with_local([Addr::Port(0)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    let start = net.now();
    Running {
        net,
        client: a,
        server: b,
        wire,
        source,
        sink,
        session,
        tcp_client: tcp_a,
        tcp_server: tcp_b,
        bytes: t.bytes,
        start,
    }
}

/// Waits for `r` to finish within `limit` and checks it: the stream arrived
/// whole, hash equal, and both ends closed cleanly.
pub fn finish(mut r: Running, limit: Duration) -> Done {
    let (elapsed, sender) = verify(&mut r, limit);
    let sink_deliveries = r.sink().deliveries;
    Done {
        elapsed,
        sender: sender.expect("the client's connection lingers in TIME-WAIT"),
        sink_deliveries,
        client: r.client,
        server: r.server,
        wire: r.wire,
        net: r.net,
    }
}

/// The checks of [`finish`], for a transfer whose sender may be gone by
/// then (smoltcp's TIME-WAIT lasts 10 s): the time it took, and the
/// sender's record if it is still there.
pub fn verify(r: &mut Running, limit: Duration) -> (Duration, Option<ConnInfo>) {
    let finished = r.run(limit);
    let elapsed = r.net.now().saturating_since(r.start);
    let sender = r.sender();
    let bytes = r.bytes;
    let src = r.source();
    let (written, src_events, src_closed) = (src.written, src.events.clone(), src.closed.clone());
    let snk = r.sink();
    assert!(
        finished,
        "transfer did not finish in {limit:?}: wrote {written} of {bytes}, sink got {} (peer closed {}), source events {src_events:?}, sender {sender:?}",
        snk.bytes, snk.peer_closed
    );
    assert_eq!(snk.bytes, bytes, "every byte arrived once");
    assert_eq!(
        snk.digest(),
        expected_digest(bytes),
        "SHA-256 of what arrived"
    );
    assert_eq!(snk.closed, Some(None), "the server closed cleanly");
    assert_eq!(src_closed, Some(None), "the client closed cleanly");
    (elapsed, sender)
}

/// Runs `t` to the end and checks it (see [`finish`]).
pub fn transfer(t: &Transfer) -> Done {
    finish(start(t), t.limit)
}

/// Records what happens on its sessions and echoes nothing.
#[derive(Default)]
pub struct Peer {
    pub events: Vec<AppEvent>,
    pub data: Vec<u8>,
}

impl Peer {
    /// The sessions it heard of (`Connected` or `OpenDone`).
    pub fn sessions(&self) -> Vec<SessionRef> {
        self.events
            .iter()
            .filter_map(|e| match e {
                AppEvent::Connected(s) | AppEvent::OpenDone { session: s, .. } => Some(*s),
                _ => None,
            })
            .collect()
    }

    /// The `Closed` events it got, with their errors.
    pub fn closed(&self) -> Vec<Option<UpiError>> {
        self.events
            .iter()
            .filter_map(|e| match e {
                AppEvent::Closed { error, .. } => Some(error.clone()),
                _ => None,
            })
            .collect()
    }
}

impl App for Peer {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        self.data.extend_from_slice(&msg.to_vec());
    }

    fn event(&mut self, event: AppEvent, _: &mut AppCx) {
        self.events.push(event);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A private TCP operation on `s` from application `app` of `engine`.
pub fn control(
    engine: &mut Engine,
    app: AppId,
    s: SessionRef,
    o: impl Into<Control>,
) -> Result<Reply, UpiError> {
    engine.with_app(app, |_, cx| op(s.proto, s, cx, o)).unwrap()
}
