//! Seed 000's latency test (§5.2): a client sends N bytes, the server sends the same
//! bytes back, over the ETH, IP-ETH, UDP-IP-ETH (and TCP-IP-ETH) stacks. The same
//! in-engine applications serve `strata rtt`, `strata bench` and the demo.
//!
//! Both applications sit on the top protocol of the stack: on Ethernet and IPv4
//! they bind the raw numbers ([`RAW_ETHERTYPE`], [`RAW_IP_PROTOCOL`]); on UDP and
//! TCP the server makes a passive open on port [`ECHO_PORT`]. The server answers
//! on the session a message arrived on, so the message it received goes back
//! without a copy.
//!
//! TCP is a byte stream: the server echoes bytes as they arrive, and the client
//! counts a round trip when as many bytes as it sent have come back, however TCP
//! cut them. Both ends turn Nagle's algorithm off, as a latency test must (with
//! it, a reply shorter than a segment could wait for an ACK).

use rustc_hash::FxHashMap;
use std::any::Any;
use std::net::Ipv4Addr;

use bytes::Bytes;
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Control, Engine, HwAddr, Message, PacketMeta, Participants,
    Qos, SessionRef, UpiError,
};
use strata_proto::{Ipv4Info, RAW_ETHERTYPE, RAW_IP_PROTOCOL, info, tcp};

/// The UDP port the ping-pong server listens on (the echo port, RFC 862).
pub const ECHO_PORT: u16 = 7;

/// The well-known DAA application identifier the server demands (seed 000
/// §4.2.1) and the client addresses; unused by LLM and ILLM.
pub const SERVICE_APP_ID: u32 = 7;

/// The protocol the ping-pong applications sit on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Raw Ethernet frames (seed 000's ETH stack).
    Eth,
    /// Raw IPv4 datagrams (IP-ETH).
    Ip,
    /// Datagrams with UDP's addressing: UDP itself (UDP-IP-ETH) or a layer
    /// stacked on it that passes its participants through (the ILP layers).
    Udp,
    /// A TCP connection (TCP-IP-ETH).
    Tcp,
}

impl Layer {
    /// The layer at the top of a stack spec such as `udp/ip/eth`.
    pub fn of_spec(spec: &str) -> Option<Layer> {
        match top_of(spec)? {
            "eth" | "ethdaa" => Some(Layer::Eth),
            "ip" => Some(Layer::Ip),
            "udp" | "cipher" | "xdr" | "copy" => Some(Layer::Udp),
            // Strata's TCP, or smoltcp's imported (seed 004): the same API.
            "tcp" | "smoltcp-tcp" => Some(Layer::Tcp),
            _ => None,
        }
    }
}

/// The top protocol of a stack spec: the one the ping-pong applications sit on.
pub fn top_of(spec: &str) -> Option<&str> {
    Some(spec.split('/').next()?.split('+').next()?.trim())
}

/// Where the server is, as each layer names it.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// Its link address.
    pub mac: HwAddr,
    /// Its network address.
    pub ip: Ipv4Addr,
}

/// Echoes every message back on the session it came from.
pub struct PingPongServer {
    layer: Layer,
    /// Sessions back to each sender, for the raw layers where delivery carries no
    /// session (the x-kernel opens one per peer on first contact).
    replies: FxHashMap<(HwAddr, Ipv4Addr), SessionRef>,
    /// Messages echoed.
    pub echoed: u64,
}

impl App for PingPongServer {
    fn receive(
        &mut self,
        session: Option<SessionRef>,
        msg: Message,
        meta: &PacketMeta,
        cx: &mut AppCx,
    ) {
        let session = match session {
            Some(s) => s,
            None => match self.reply_session(meta, cx) {
                Ok(s) => s,
                Err(_) => return,
            },
        };
        cx.send(session, msg);
        self.echoed += 1;
    }

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        if let AppEvent::OpenDone { session, .. } = event {
            // Fails only for a connection already gone.
            let _ = nodelay(cx, session);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl PingPongServer {
    fn reply_session(&mut self, meta: &PacketMeta, cx: &mut AppCx) -> Result<SessionRef, UpiError> {
        let hw = info::hw_source(meta).unwrap_or(HwAddr::ZERO);
        let ip = Ipv4Info::from_meta(meta).src;
        let key = (hw, ip);
        if let Some(&s) = self.replies.get(&key) {
            return Ok(s);
        }
        let (proto, remote) = match self.layer {
            Layer::Eth => (find(cx, "eth")?, Addr::Hw(hw)),
            Layer::Ip => (find(cx, "ip")?, Addr::Ip(ip)),
            Layer::Udp | Layer::Tcp => return Err(UpiError::NoSuchSession),
        };
        let s = cx.open(proto, Participants::remote([remote]), Qos::default())?;
        self.replies.insert(key, s);
        Ok(s)
    }
}

/// Turns Nagle's algorithm off on a TCP session.
fn nodelay(cx: &mut AppCx, s: SessionRef) -> Result<(), UpiError> {
    let op = Control::Private(Box::new(tcp::SetNodelay(true)));
    cx.control(s.proto, Some(s.sess), op).map(|_| ())
}

fn find(cx: &AppCx, name: &str) -> Result<strata_core::ProtoId, UpiError> {
    cx.proto(name)
        .or_else(|| (name == "eth").then(|| cx.proto("ethdaa")).flatten())
        .ok_or_else(|| UpiError::NoSuchObject(name.into()))
}

/// A ping-pong the client drives itself, timing each round trip with the wall
/// clock: how round trips are measured on real links, where no test loop can
/// step the engines.
pub struct TimedRun {
    session: SessionRef,
    payload: Bytes,
    warmup: usize,
    left: usize,
    sent_at: std::time::Instant,
    /// Round trips, in nanoseconds, after the warm-up.
    pub samples: Vec<u64>,
}

impl TimedRun {
    /// True once every round trip has been timed.
    pub fn is_finished(&self) -> bool {
        self.left == 0
    }

    fn send(&mut self, cx: &mut AppCx) {
        self.sent_at = std::time::Instant::now();
        cx.send(self.session, Message::from_bytes(self.payload.clone()));
    }
}

/// Sends on request (or on its own, timing each round trip) and counts what
/// comes back.
#[derive(Default)]
pub struct PingPongClient {
    /// Messages received back.
    pub received: u64,
    /// Length of the last message received.
    pub last_len: usize,
    /// Bytes of the last message received (kept only when asked, for tests).
    pub last: Option<Vec<u8>>,
    /// Whether to keep them.
    pub keep: bool,
    /// A self-driven, timed run under way.
    pub run: Option<TimedRun>,
    /// The replies are a byte stream (TCP): a round trip ends when `owed`
    /// bytes have come back.
    stream: bool,
    /// Bytes of the current round trip still to come back, and come back
    /// so far (stream only).
    owed: usize,
    got: usize,
    /// The current round trip's bytes so far, when kept (stream only).
    partial: Vec<u8>,
}

impl App for PingPongClient {
    fn receive(&mut self, _s: Option<SessionRef>, msg: Message, _m: &PacketMeta, cx: &mut AppCx) {
        if self.stream {
            self.owed = self.owed.saturating_sub(msg.len());
            self.got += msg.len();
            if self.keep {
                self.partial.extend_from_slice(&msg.to_vec());
            }
            if self.owed > 0 {
                return;
            }
            self.last_len = std::mem::take(&mut self.got);
            if self.keep {
                self.last = Some(std::mem::take(&mut self.partial));
            }
        } else {
            self.last_len = msg.len();
            if self.keep {
                self.last = Some(msg.to_vec());
            }
        }
        self.received += 1;
        if let Some(run) = self.run.as_mut()
            && !run.is_finished()
        {
            if run.warmup > 0 {
                run.warmup -= 1;
            } else {
                run.samples.push(crate::stats::nanos(run.sent_at.elapsed()));
                run.left -= 1;
            }
            if !run.is_finished() {
                run.send(cx);
                if self.stream {
                    self.owed = run.payload.len();
                }
            }
        }
    }

    fn event(&mut self, _event: AppEvent, _cx: &mut AppCx) {}

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A ping-pong set up on a client and a server engine.
#[derive(Clone, Copy, Debug)]
pub struct PingPong {
    /// The client application.
    pub client: AppId,
    /// The server application.
    pub server: AppId,
    /// The client's session to the server.
    pub session: SessionRef,
}

/// Installs a ping-pong server on `server` and a client on `client` that talks to
/// it at `peer`, both on `layer` (protocol `proto`). `keep` makes the client keep
/// the bytes it receives.
pub fn install(
    client: &mut Engine,
    server: &mut Engine,
    layer: Layer,
    proto: &str,
    peer: Peer,
    keep: bool,
) -> Result<PingPong, UpiError> {
    let no_proto = || UpiError::NoSuchObject(proto.to_string());
    let server_proto = server.proto_id(proto).ok_or_else(no_proto)?;
    let client_proto = client.proto_id(proto).ok_or_else(no_proto)?;
    let server_app = server.add_app(Box::new(PingPongServer {
        layer,
        replies: FxHashMap::default(),
        echoed: 0,
    }));
    let service = Qos {
        app_id: Some(SERVICE_APP_ID),
        ..Qos::default()
    };
    server.with_app(server_app, |_, cx| match layer {
        Layer::Eth => cx.bind_with(server_proto, RAW_ETHERTYPE, service),
        Layer::Ip => cx.bind_with(server_proto, RAW_IP_PROTOCOL, service),
        Layer::Udp | Layer::Tcp => cx.open_enable(
            server_proto,
            Participants::local([Addr::Port(ECHO_PORT)]),
            service,
        ),
    })??;
    let app_id = Addr::AppId(SERVICE_APP_ID);
    let client_app = client.add_app(Box::new(PingPongClient {
        keep,
        stream: layer == Layer::Tcp,
        ..Default::default()
    }));
    let session = client.with_app(client_app, |_, cx| {
        let remote = match layer {
            Layer::Eth => {
                cx.bind(client_proto, RAW_ETHERTYPE)?;
                Participants::remote([app_id, Addr::Hw(peer.mac)])
            }
            Layer::Ip => {
                cx.bind(client_proto, RAW_IP_PROTOCOL)?;
                Participants::remote([app_id, Addr::Ip(peer.ip)])
            }
            Layer::Udp | Layer::Tcp => {
                Participants::remote([app_id, Addr::Ip(peer.ip), Addr::Port(ECHO_PORT)])
                    .with_local([Addr::Port(0)])
            }
        };
        let session = cx.open(client_proto, remote, Qos::default())?;
        if layer == Layer::Tcp {
            nodelay(cx, session)?;
        }
        Ok::<_, UpiError>(session)
    })??;
    Ok(PingPong {
        client: client_app,
        server: server_app,
        session,
    })
}

impl PingPong {
    /// Queues one ping of `payload` on the client (shared, not copied).
    pub fn ping(&self, client: &mut Engine, payload: &Bytes) {
        let session = self.session;
        let msg = Message::from_bytes(payload.clone());
        // The client app is always present: it was installed with this ping-pong.
        let _ = client.with_app(self.client, |app, cx| {
            if let Some(me) = app.as_any_mut().downcast_mut::<PingPongClient>() {
                me.owed += msg.len();
            }
            cx.send(session, msg)
        });
    }

    /// Starts a self-driven run of `warmup` untimed and `count` timed round trips
    /// of `payload` on the client.
    pub fn start_timed(
        &self,
        client: &mut Engine,
        payload: Bytes,
        warmup: usize,
        count: usize,
    ) -> Result<(), UpiError> {
        let session = self.session;
        client.with_app(self.client, |app, cx| {
            let me = app
                .as_any_mut()
                .downcast_mut::<PingPongClient>()
                .ok_or(UpiError::NoSuchSession)?;
            let mut run = TimedRun {
                session,
                payload,
                warmup,
                left: count,
                sent_at: std::time::Instant::now(),
                samples: Vec::with_capacity(count),
            };
            run.send(cx);
            me.owed = run.payload.len();
            me.run = Some(run);
            Ok(())
        })?
    }

    /// How many pongs the client has received.
    pub fn received(&self, client: &Engine) -> u64 {
        client
            .app::<PingPongClient>(self.client)
            .map_or(0, |c| c.received)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use strata::link::{LinkParams, SimNet};
    use strata::{Arch, HostBuilder, HostParams};

    use super::*;
    use crate::rtt::{MemPingPong, RttSetup};

    fn payload(size: usize) -> Bytes {
        (0..size)
            .map(|i| (i * 7 + 1) as u8)
            .collect::<Vec<u8>>()
            .into()
    }

    #[test]
    fn the_tcp_ping_pong_returns_every_byte_under_every_architecture_in_memory() {
        for stack in ["tcp/ip/eth", "tcp/ip/ethdaa"] {
            for arch in Arch::ALL {
                let setup = RttSetup {
                    stack: stack.into(),
                    arch,
                    checksum: true,
                };
                let mut pp = MemPingPong::new(&setup).unwrap();
                pp.keep_replies();
                // 4000 B cross as several segments, and come back as several.
                for size in [1, 100, 1400, 4000, 1] {
                    let sent = payload(size);
                    pp.round_trip(&sent)
                        .unwrap_or_else(|e| panic!("{stack} {arch} {size} B: {e:#}"));
                    assert_eq!(
                        pp.last_reply().as_deref(),
                        Some(&sent[..]),
                        "{stack} {arch}"
                    );
                }
                assert!(pp.measure(100, 10, 100).is_ok(), "{stack} {arch}");
            }
        }
    }

    #[test]
    fn a_timed_tcp_run_counts_round_trips_across_a_delayed_link() {
        let host = |n: u8| {
            HostBuilder::spec(
                "tcp/ip/eth",
                HostParams::numbered(n),
                "net0",
                strata::link::SIM,
            )
            .build()
            .unwrap()
        };
        let (mut client, mut server) = (host(1), host(2));
        let p = HostParams::numbered(2);
        let peer = Peer {
            mac: p.mac,
            ip: p.address.address(),
        };
        let pp = install(&mut client, &mut server, Layer::Tcp, "tcp", peer, true).unwrap();
        let mut net = SimNet::new(3);
        let a = net.add_host("a", client);
        let b = net.add_host("b", server);
        let link = LinkParams::delay(Duration::from_millis(5));
        net.connect((a, "net0"), (b, "net0"), link.clone(), link)
            .unwrap();
        let sent = payload(3000);
        pp.start_timed(net.engine(a), sent.clone(), 2, 10).unwrap();
        let done = net.run_until_condition(
            |n| {
                n.engine(a)
                    .app::<PingPongClient>(pp.client)
                    .and_then(|c| c.run.as_ref())
                    .is_some_and(TimedRun::is_finished)
            },
            Duration::from_secs(30),
        );
        assert!(done, "12 round trips");
        let c = net.engine(a).app::<PingPongClient>(pp.client).unwrap();
        let samples = &c.run.as_ref().unwrap().samples;
        assert_eq!(samples.len(), 10);
        assert_eq!(c.received, 12);
        assert_eq!(c.last_len, 3000);
        assert_eq!(c.last.as_deref(), Some(&sent[..]));
    }
}
