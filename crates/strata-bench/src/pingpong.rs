//! Seed 000's latency test (§5.2): a client sends N bytes, the server sends the same
//! bytes back, over the ETH, IP-ETH, UDP-IP-ETH (and TCP-IP-ETH) stacks. The same
//! in-engine applications serve `strata rtt`, `strata bench` and the demo.
//!
//! Both applications sit on the top protocol of the stack: on Ethernet and IPv4
//! they bind the raw numbers ([`RAW_ETHERTYPE`], [`RAW_IP_PROTOCOL`]); on UDP the
//! server makes a passive open on port [`ECHO_PORT`]. The server answers on the
//! session a message arrived on, so the message it received goes back without a
//! copy.

use std::any::Any;
use std::collections::HashMap;
use std::net::Ipv4Addr;

use bytes::Bytes;
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Engine, HwAddr, Message, PacketMeta, Participants, Qos,
    SessionRef, UpiError,
};
use strata_proto::{RAW_ETHERTYPE, RAW_IP_PROTOCOL};

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
}

impl Layer {
    /// The layer at the top of a stack spec such as `udp/ip/eth`.
    pub fn of_spec(spec: &str) -> Option<Layer> {
        match top_of(spec)? {
            "eth" | "ethdaa" => Some(Layer::Eth),
            "ip" => Some(Layer::Ip),
            "udp" | "cipher" | "xdr" | "copy" => Some(Layer::Udp),
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
    replies: HashMap<(HwAddr, Ipv4Addr), SessionRef>,
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

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl PingPongServer {
    fn reply_session(&mut self, meta: &PacketMeta, cx: &mut AppCx) -> Result<SessionRef, UpiError> {
        let key = (meta.hw_src, meta.ip_src);
        if let Some(&s) = self.replies.get(&key) {
            return Ok(s);
        }
        let (proto, remote) = match self.layer {
            Layer::Eth => (find(cx, "eth")?, Addr::Hw(meta.hw_src)),
            Layer::Ip => (find(cx, "ip")?, Addr::Ip(meta.ip_src)),
            Layer::Udp => return Err(UpiError::NoSuchSession),
        };
        let s = cx.open(proto, Participants::remote([remote]), Qos::default())?;
        self.replies.insert(key, s);
        Ok(s)
    }
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
}

impl App for PingPongClient {
    fn receive(&mut self, _s: Option<SessionRef>, msg: Message, _m: &PacketMeta, cx: &mut AppCx) {
        self.received += 1;
        self.last_len = msg.len();
        if self.keep {
            self.last = Some(msg.to_vec());
        }
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
        replies: HashMap::new(),
        echoed: 0,
    }));
    let service = Qos {
        app_id: Some(SERVICE_APP_ID),
        ..Qos::default()
    };
    server.with_app(server_app, |_, cx| match layer {
        Layer::Eth => cx.bind_with(server_proto, RAW_ETHERTYPE, service),
        Layer::Ip => cx.bind_with(server_proto, RAW_IP_PROTOCOL, service),
        Layer::Udp => cx.open_enable(
            server_proto,
            Participants::local([Addr::Port(ECHO_PORT)]),
            service,
        ),
    })??;
    let app_id = Addr::AppId(SERVICE_APP_ID);
    let client_app = client.add_app(Box::new(PingPongClient {
        keep,
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
            Layer::Udp => Participants::remote([app_id, Addr::Ip(peer.ip), Addr::Port(ECHO_PORT)])
                .with_local([Addr::Port(0)]),
        };
        cx.open(client_proto, remote, Qos::default())
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
        let _ = client.with_app(self.client, |_, cx| cx.send(session, msg));
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
