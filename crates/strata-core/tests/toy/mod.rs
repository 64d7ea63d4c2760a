//! A toy two-layer stack for testing the engine without real protocols: a "frame"
//! layer with a one-byte number header on a link, and a "port" layer with a
//! two-byte port header whose sessions belong to applications.

#![allow(dead_code)]

use std::any::Any;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{
    App, AppCx, Cx, Demux, DropReason, GraphError, LinkId, Message, Next, Open, PacketMeta,
    Priority, Protocol, Registry, SessionId, SessionRef, Target, Up, UpiError, Upper,
};

pub struct Frame {
    link: LinkId,
    /// Sessions are the numbers of the protocols above.
    sessions: Vec<u8>,
}

impl Protocol for Frame {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        match hdr.first() {
            None => Demux::Short(1),
            Some(&n) => Demux::To {
                target: Target::Protocol,
                hdr_len: 1,
                next: Next::Number(u32::from(n)),
            },
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, _m: &mut PacketMeta, _cx: &mut Cx) -> Up {
        if msg.strip(1) {
            Up::Continue
        } else {
            Up::Drop(DropReason::Truncated)
        }
    }

    fn pop_is_strip(&self) -> bool {
        true
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        msg.push(1)[0] = self.sessions[sess.index()];
        cx.transmit(self.link, msg, Priority::BEST_EFFORT);
    }

    fn open(&mut self, req: Open, _cx: &mut Cx) -> Result<SessionId, UpiError> {
        let n = req.number.ok_or(UpiError::NoNumber("frame".into()))?;
        self.sessions.push(n as u8);
        Ok(SessionId(self.sessions.len() as u32 - 1))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn as_any(&self) -> &dyn Any {
        self
    }
}

pub struct Port {
    lower: Option<SessionRef>,
    /// (port, owner) per session.
    sessions: Vec<(u16, Upper)>,
    /// Timer tokens that fired, for the timer test.
    pub fired: Vec<u64>,
    /// Idle calls so far, for the idle-call test.
    pub idle_calls: u64,
}

impl Protocol for Port {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        let Some(h) = hdr.get(..2) else {
            return Demux::Short(2);
        };
        let port = u16::from_be_bytes([h[0], h[1]]);
        match self.sessions.iter().position(|(p, _)| *p == port) {
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
        let port = self.sessions[sess.index()].0;
        msg.push_slice(&port.to_be_bytes());
        match self.lower {
            Some(lower) => cx.push(lower, msg),
            None => cx.count_drop(DropReason::NoRoute),
        }
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let port = req
            .parts
            .local
            .pop_port()
            .ok_or(UpiError::BadParticipant("port"))?;
        if self.lower.is_none() {
            let below = cx.lowers()[0];
            let strata_core::graph::Lower::Proto(p) = below else {
                return Err(UpiError::Unreachable);
            };
            self.lower = Some(cx.open(p, Default::default(), Default::default())?);
        }
        self.sessions.push((port, req.upper));
        Ok(SessionId(self.sessions.len() as u32 - 1))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn on_timer(&mut self, token: u64, _cx: &mut Cx) {
        self.fired.push(token);
    }

    /// Any private control asks for the idle call, twice.
    fn control(
        &mut self,
        _sess: Option<SessionId>,
        op: strata_core::Control,
        cx: &mut Cx,
    ) -> Result<strata_core::Reply, UpiError> {
        match op {
            strata_core::Control::Private(_) => {
                cx.when_idle();
                cx.when_idle();
                Ok(strata_core::Reply::Done)
            }
            _ => Err(UpiError::Unsupported("toy control")),
        }
    }

    fn on_idle(&mut self, _cx: &mut Cx) {
        self.idle_calls += 1;
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn make_frame(_c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let link = b.link().ok_or_else(|| b.needs_below("a link"))?;
    Ok(Box::new(Frame {
        link,
        sessions: Vec::new(),
    }))
}

fn make_port(c: &ProtocolConfig, _b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let _: u16 = c.options.get("base")?.unwrap_or(0);
    Ok(Box::new(Port {
        lower: None,
        sessions: Vec::new(),
        fired: Vec::new(),
        idle_calls: 0,
    }))
}

pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register_protocol(ProtocolSpec {
        kind: "frame",
        doc: "toy link layer",
        options: &[],
        demux_by_number: true,
        implies_above: &[],
        implies_beside: &[],
        factory: make_frame,
    });
    r.register_protocol(ProtocolSpec {
        kind: "port",
        doc: "toy transport",
        options: &[OptionDoc {
            name: "base",
            doc: "unused",
        }],
        demux_by_number: false,
        implies_above: &[],
        implies_beside: &[],
        factory: make_port,
    });
    r.register_link(strata_core::graph::LinkSpec {
        kind: "wire",
        doc: "test wire",
        options: &[],
        validate: None,
    });
    r.numbers_mut().insert("frame", "port", 7);
    r
}

pub const GRAPH: &str = r#"
[link.w]
kind = "wire"

[protocol.frame]
below = ["w"]

[protocol.port]
below = ["frame"]
"#;

/// Echoes every message back on the session it came from and remembers it.
#[derive(Default)]
pub struct Echo {
    pub seen: Vec<Vec<u8>>,
    pub echo: bool,
}

impl App for Echo {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _m: &PacketMeta, cx: &mut AppCx) {
        self.seen.push(msg.to_vec());
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
