//! The engine's data path on a two-layer toy stack: what runs at once, what
//! is queued and in what order, and where deliveries go.
//!
//! `Wire` sits on the link: a 1-byte header names the upper protocol. `Top`
//! sits on it with one session per open; its push writes a 1-byte tag and
//! pushes down, and, for a message that says so, also pushes a copy to its own
//! session (a re-entrant push) and one more message down after it. Its pop
//! tells the application of a new peer before delivering its data. `Probe`
//! runs a test's closure with a real `Cx` of its own (a control call).

use std::any::Any;

use super::*;
use crate::app::AppEvent;
use crate::graph::{self, GraphConfig, GraphError, ProtocolConfig, ProtocolSpec, Registry};
use crate::upi::{Demux, Next, Open, Protocol, Qos, Target, Up};
use crate::{Cx, PacketMeta, Participants, Priority};

/// A test's code, run with the probe's `Cx`.
pub(crate) type Probe = Box<dyn FnOnce(&mut Cx) + Send>;

struct Wire;

impl Protocol for Wire {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        match hdr.first() {
            Some(&n) => Demux::To {
                target: Target::Protocol,
                hdr_len: 1,
                next: Next::Number(u32::from(n)),
            },
            None => Demux::Short(1),
        }
    }

    fn pop(&mut self, _: Target, msg: &mut Message, _: &mut PacketMeta, _: &mut Cx) -> Up {
        if msg.strip(1) {
            Up::Continue
        } else {
            Up::Drop(DropReason::Truncated)
        }
    }

    fn push(&mut self, _sess: SessionId, mut msg: Message, cx: &mut Cx) {
        // The only upper's number.
        msg.push_slice(&[7]);
        cx.transmit(LinkId(0), msg, Priority::BEST_EFFORT);
    }

    fn open(&mut self, _req: Open, _cx: &mut Cx) -> Result<SessionId, UpiError> {
        Ok(SessionId(0))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn control(
        &mut self,
        _sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match op {
            Control::Private(f) => match f.downcast::<Probe>() {
                Ok(f) => {
                    f(cx);
                    Ok(Reply::Done)
                }
                Err(_) => Err(UpiError::Unsupported("private")),
            },
            op => Err(UpiError::Unsupported(op.name())),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[derive(Default)]
struct Top {
    /// (application, lower session) per session.
    sessions: Vec<(AppId, SessionRef)>,
    /// Peers heard from, announced once each.
    announced: bool,
}

impl Protocol for Top {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        if hdr.is_empty() {
            return Demux::Short(1);
        }
        match self.sessions.first() {
            Some(&(app, _)) => Demux::To {
                target: Target::Session(SessionId(0)),
                hdr_len: 1,
                next: Next::App(app),
            },
            None => Demux::Drop(DropReason::NoSession),
        }
    }

    fn pop(&mut self, _: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        msg.strip(1);
        let Some(&(app, _)) = self.sessions.first() else {
            return Up::Drop(DropReason::NoSession);
        };
        if !self.announced {
            // The application hears of the peer first, then from it.
            self.announced = true;
            let session = SessionRef::new(cx.me(), SessionId(0));
            cx.notify(app, AppEvent::Connected(session));
            cx.deliver(app, Some(session), std::mem::take(msg), meta);
            return Up::Consumed;
        }
        Up::Continue
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let Some(&(_, lower)) = self.sessions.get(sess.index()) else {
            return;
        };
        let twice = msg.peek(5) == Some(&b"twice"[..]);
        msg.push_slice(b"T");
        cx.push(lower, msg);
        if twice {
            // Re-entrant: this protocol is on the stack, so the push waits,
            // and so does everything emitted after it.
            cx.push(
                SessionRef::new(cx.me(), sess),
                Message::from_slice(b"again"),
            );
            cx.push(lower, Message::from_slice(b"Tafter"));
        }
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let crate::Upper::App(app) = req.upper else {
            return Err(UpiError::Unsupported("protocol uppers"));
        };
        let lower = cx.open(ProtoId(0), Participants::default(), Qos::default())?;
        self.sessions.push((app, lower));
        Ok(SessionId(self.sessions.len() as u32 - 1))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Records what it is told, in order.
#[derive(Default)]
struct Log {
    seen: Vec<String>,
}

impl App for Log {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        self.seen
            .push(format!("data {}", String::from_utf8_lossy(&msg.to_vec())));
    }

    fn event(&mut self, event: AppEvent, _: &mut AppCx) {
        self.seen.push(format!("{event:?}"));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

const GRAPH: &str = r#"
[link.net0]
kind = "sim"

[protocol.wire]
below = ["net0"]

[protocol.top]
below = ["wire"]
numbers = { wire = 7 }
"#;

fn registry() -> Registry {
    let mut reg = Registry::new();
    reg.register_link(crate::graph::LinkSpec {
        kind: "sim",
        doc: "test link",
        options: &[],
        validate: None,
    });
    fn wire(_: &ProtocolConfig, _: &graph::BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
        Ok(Box::new(Wire))
    }
    fn top(_: &ProtocolConfig, _: &graph::BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
        Ok(Box::new(Top::default()))
    }
    for (kind, make) in [("wire", wire as _), ("top", top as _)] {
        reg.register_protocol(ProtocolSpec {
            kind,
            doc: "test protocol",
            options: &[],
            demux_by_number: kind == "wire",
            implies_above: &[],
            implies_beside: &[],
            factory: make,
        });
    }
    reg
}

/// An engine on the toy stack with a `Log` application holding a `Top`
/// session.
pub(crate) fn toy(arch: Arch) -> (Engine, AppId, SessionRef) {
    let cfg = GraphConfig::from_toml(GRAPH).unwrap();
    let built = graph::build(&cfg, &registry()).unwrap();
    let mut e = Engine::new(
        built,
        EngineConfig {
            arch: Some(arch),
            ..Default::default()
        },
    )
    .unwrap();
    let app = e.add_app(Box::new(Log::default()));
    let top = e.proto_id("top").unwrap();
    let s = e
        .with_app(app, |_, cx| {
            cx.open(top, Participants::default(), Qos::default())
        })
        .unwrap()
        .unwrap();
    (e, app, s)
}

/// Runs `f` with the `Cx` of the toy's lowest protocol.
pub(crate) fn with_cx(e: &mut Engine, f: impl FnOnce(&mut Cx) + Send + 'static) {
    let probe: Probe = Box::new(f);
    e.control(ProtoId(0), None, Control::Private(Box::new(probe)))
        .unwrap();
}

fn sent(e: &mut Engine) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| e.poll_transmit(LinkId(0)))
        .map(|m| m.to_vec())
        .collect()
}

#[test]
fn a_push_runs_through_every_layer_at_once_when_nothing_waits() {
    let (mut e, app, s) = toy(Arch::Llm);
    e.with_app(app, |_, cx| cx.send(s, Message::from_slice(b"hi")))
        .unwrap();
    assert!(e.is_idle(), "nothing was queued");
    assert_eq!(sent(&mut e), vec![b"\x07Thi".to_vec()], "no run needed");
    assert_eq!(e.counters(s.proto).packets_out, 1);
    assert_eq!(e.counters(ProtoId(0)).packets_out, 1);
}

#[test]
fn a_re_entrant_push_waits_and_what_follows_waits_behind_it() {
    let (mut e, app, s) = toy(Arch::Llm);
    e.with_app(app, |_, cx| cx.send(s, Message::from_slice(b"twice")))
        .unwrap();
    assert_eq!(sent(&mut e), vec![b"\x07Ttwice".to_vec()]);
    assert!(
        !e.is_idle(),
        "the re-entrant push and the one after it wait"
    );
    e.run(Instant::ZERO);
    // The queue runs first in, first out, and once it holds work everything
    // joins it: "again" goes down behind "after", as when every push was
    // queued.
    assert_eq!(
        sent(&mut e),
        vec![b"\x07Tafter".to_vec(), b"\x07Tagain".to_vec()],
    );
}

#[test]
fn a_delivery_behind_an_event_waits_for_it_and_later_ones_go_at_once() {
    for arch in Arch::ALL {
        let (mut e, app, _) = toy(arch);
        for data in [&b"\x07Tfirst"[..], b"\x07Tsecond"] {
            e.receive(LinkId(0), Message::from_slice(data));
            e.run(Instant::ZERO);
        }
        let log: &Log = e.app(app).unwrap();
        assert_eq!(
            log.seen,
            [
                "Connected(SessionRef { proto: ProtoId(1), sess: SessionId(0) })",
                "data first",
                "data second"
            ],
            "{arch}"
        );
        assert_eq!(e.engine_counters().delivered, 2, "{arch}");
    }
}

#[test]
fn a_push_to_a_protocol_that_is_not_there_is_dropped_and_counted() {
    let (mut e, _, _) = toy(Arch::Llm);
    with_cx(&mut e, |cx| {
        cx.push(
            SessionRef::new(ProtoId(9), SessionId(0)),
            Message::from_slice(b"x"),
        )
    });
    e.run(Instant::ZERO);
    assert_eq!(e.engine_counters().drops().get("no-session"), 1);
}
