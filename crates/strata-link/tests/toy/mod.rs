//! A toy Ethernet stack for driving links in tests: a "mac" layer with a real
//! 14-byte Ethernet header (so switches and tshark understand the frames) and a
//! "port" layer with a two-byte port, whose sessions belong to applications.

#![allow(dead_code)]

use std::any::Any;
use std::time::Duration;

use strata_core::graph::{self, BuildInfo, GraphConfig, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Addr, App, AppCx, AppId, Cx, Demux, DropReason, Engine, EngineConfig, GraphError, HwAddr,
    Instant, LinkId, Message, Next, Open, PacketMeta, Participants, Priority, Protocol, Qos,
    Registry, SessionId, SessionRef, Target, Up, UpiError, Upper,
};

/// The ethertype of the port layer (IEEE 802 local experimental).
pub const ETHERTYPE: u16 = 0x88b5;

pub struct Mac {
    link: LinkId,
    address: HwAddr,
    /// (peer, ethertype) per session.
    sessions: Vec<(HwAddr, u16)>,
}

impl Protocol for Mac {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        let Some(h) = hdr.get(..14) else {
            return Demux::Short(14);
        };
        let mut dst = HwAddr::ZERO;
        dst.0.copy_from_slice(&h[..6]);
        if dst != self.address && !dst.is_broadcast() {
            return Demux::Drop(DropReason::NotForUs);
        }
        Demux::To {
            target: Target::Protocol,
            hdr_len: 14,
            next: Next::Number(u32::from(u16::from_be_bytes([h[12], h[13]]))),
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, _m: &mut PacketMeta, _cx: &mut Cx) -> Up {
        if msg.strip(14) {
            Up::Continue
        } else {
            Up::Drop(DropReason::Truncated)
        }
    }

    fn pop_is_strip(&self) -> bool {
        true
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let (peer, ethertype) = self.sessions[sess.index()];
        let h = msg.push(14);
        h[..6].copy_from_slice(&peer.0);
        h[6..12].copy_from_slice(&self.address.0);
        h[12..].copy_from_slice(&ethertype.to_be_bytes());
        cx.transmit(self.link, msg, Priority::BEST_EFFORT);
    }

    fn open(&mut self, mut req: Open, _cx: &mut Cx) -> Result<SessionId, UpiError> {
        let number = req.number.ok_or(UpiError::NoNumber("mac".into()))?;
        let peer = req.parts.remote.pop_hw().unwrap_or(HwAddr::BROADCAST);
        self.sessions.push((peer, number as u16));
        Ok(SessionId(self.sessions.len() as u32 - 1))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn as_any(&self) -> &dyn Any {
        self
    }
}

pub struct Port {
    /// (port, owner, lower session to the peer) per session.
    sessions: Vec<(u16, Upper, SessionRef)>,
}

impl Protocol for Port {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        let Some(h) = hdr.get(..2) else {
            return Demux::Short(2);
        };
        let port = u16::from_be_bytes([h[0], h[1]]);
        match self.sessions.iter().position(|(p, _, _)| *p == port) {
            Some(i) => Demux::To {
                target: Target::Session(SessionId(i as u32)),
                hdr_len: 2,
                next: match self.sessions[i].1 {
                    Upper::App(a) => Next::App(a),
                    Upper::Proto(p) => Next::Proto(p),
                },
            },
            None => Demux::Drop(DropReason::NoSession),
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, _m: &mut PacketMeta, _cx: &mut Cx) -> Up {
        if msg.strip(2) {
            Up::Continue
        } else {
            Up::Drop(DropReason::Truncated)
        }
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let (port, _, lower) = self.sessions[sess.index()];
        msg.push_slice(&port.to_be_bytes());
        cx.push(lower, msg);
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let port = req
            .parts
            .local
            .pop_port()
            .ok_or(UpiError::BadParticipant("port"))?;
        req.parts.remote.pop_port();
        let strata_core::graph::Lower::Proto(mac) = cx.lowers()[0] else {
            return Err(UpiError::Unreachable);
        };
        let lower = cx.open(
            mac,
            Participants {
                remote: req.parts.remote,
                local: Default::default(),
            },
            Qos::default(),
        )?;
        self.sessions.push((port, req.upper, lower));
        Ok(SessionId(self.sessions.len() as u32 - 1))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn make_mac(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Ok(Box::new(Mac {
        link: b.link().ok_or_else(|| b.needs_below("a link"))?,
        address: c.options.require("address")?,
        sessions: Vec::new(),
    }))
}

fn make_port(_c: &ProtocolConfig, _b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Ok(Box::new(Port {
        sessions: Vec::new(),
    }))
}

pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register_protocol(ProtocolSpec {
        kind: "mac",
        doc: "toy Ethernet",
        options: &[OptionDoc {
            name: "address",
            doc: "this host's MAC address",
        }],
        demux_by_number: true,
        implies_above: &[],
        implies_beside: &[],
        factory: make_mac,
    });
    r.register_protocol(ProtocolSpec {
        kind: "port",
        doc: "toy transport",
        options: &[],
        demux_by_number: false,
        implies_above: &[],
        implies_beside: &[],
        factory: make_port,
    });
    r.numbers_mut().insert("mac", "port", u32::from(ETHERTYPE));
    strata_link::register_links(&mut r);
    r
}

/// The MAC address of toy host `n`.
pub fn mac(n: u16) -> HwAddr {
    HwAddr::local(n)
}

/// A toy host with MAC address `mac(n)` whose link "net0" is of `kind` with the
/// extra option lines `link_options`.
pub fn host_with(n: u16, kind: &str, link_options: &str) -> Engine {
    let text = format!(
        "[link.net0]\nkind = \"{kind}\"\n{link_options}\n\
         [protocol.mac]\nbelow = [\"net0\"]\naddress = \"{}\"\n\
         [protocol.port]\nbelow = [\"mac\"]\n",
        mac(n)
    );
    let cfg = GraphConfig::from_toml(&text).unwrap();
    let built = graph::build(&cfg, &registry()).unwrap();
    Engine::new(
        built,
        EngineConfig {
            seed: u64::from(n),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A toy host on a "sim" link with no options.
pub fn host(n: u16) -> Engine {
    host_with(n, "sim", "")
}

/// Adds `app` to `engine` with a session on `port` to the host with MAC `peer`.
pub fn add_app(engine: &mut Engine, app: impl App, peer: HwAddr, port: u16) -> (AppId, SessionRef) {
    let proto = engine.proto_id("port").unwrap();
    let parts = Participants {
        remote: strata_core::Participant::of([Addr::Hw(peer), Addr::Port(port)]),
        local: strata_core::Participant::of([Addr::Port(port)]),
    };
    let id = engine.add_app(Box::new(app));
    let session = engine
        .with_app(id, |_, cx| cx.open(proto, parts, Qos::default()))
        .unwrap()
        .unwrap();
    (id, session)
}

/// Sends `data` from application `app` on `session`.
pub fn send(engine: &mut Engine, app: AppId, session: SessionRef, data: &[u8]) {
    engine
        .with_app(app, |_, cx| cx.send(session, Message::from_slice(data)))
        .unwrap();
}

/// What an `Echo` application has seen.
pub fn seen(engine: &Engine, app: AppId) -> Vec<(Instant, Vec<u8>)> {
    engine.app::<Echo>(app).unwrap().seen.clone()
}

/// Remembers every message with its arrival time, and echoes it when told to.
#[derive(Default)]
pub struct Echo {
    pub seen: Vec<(Instant, Vec<u8>)>,
    pub echo: bool,
}

impl App for Echo {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _m: &PacketMeta, cx: &mut AppCx) {
        self.seen.push((cx.now(), msg.to_vec()));
        if self.echo
            && let Some(s) = s
        {
            cx.send(s, msg);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Sends "tick N" on its session every `every`, `left` times, starting `every`
/// after `start_ticker`; remembers when each timer fired and what came back.
pub struct Ticker {
    pub session: Option<SessionRef>,
    pub every: Duration,
    pub left: u32,
    pub sent: u32,
    pub fired: Vec<Instant>,
    pub got: Vec<(Instant, Vec<u8>)>,
}

impl App for Ticker {
    fn receive(&mut self, _s: Option<SessionRef>, msg: Message, _p: &PacketMeta, cx: &mut AppCx) {
        self.got.push((cx.now(), msg.to_vec()));
    }

    fn timer(&mut self, _token: u64, cx: &mut AppCx) {
        self.fired.push(cx.now());
        if let Some(s) = self.session {
            cx.send(s, Message::from(format!("tick {}", self.sent).into_bytes()));
        }
        self.sent += 1;
        self.left -= 1;
        if self.left > 0 {
            let next = cx.now() + self.every;
            cx.set_timer(next, 0);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl Ticker {
    pub fn new(every: Duration, count: u32) -> Self {
        Ticker {
            session: None,
            every,
            left: count,
            sent: 0,
            fired: Vec::new(),
            got: Vec::new(),
        }
    }
}

/// Adds a ticker sending to `peer` on `port` and starts its first timer.
pub fn start_ticker(engine: &mut Engine, ticker: Ticker, peer: HwAddr, port: u16) -> AppId {
    let every = ticker.every;
    let (id, session) = add_app(engine, ticker, peer, port);
    engine.app_mut::<Ticker>(id).unwrap().session = Some(session);
    engine
        .with_app(id, |_, cx| {
            let at = cx.now() + every;
            cx.set_timer(at, 0);
        })
        .unwrap();
    id
}
