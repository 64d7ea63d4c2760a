//! Without the PA: each layer of a stack as an ordinary Strata protocol
//! (`hp-frag`, `hp-window`, `hp-check`, `hp-ident`), stacked by the graph
//! config on Ethernet, every message through every layer on Strata's engine.
//!
//! This is the classic layering the PA is measured against (§2): each
//! layer's header holds its own fields of all four classes — connection
//! identification on every message — in network order, padded to 4 bytes.
//! The layer code is the same as under the PA; only the layout differs.
//!
//! ```toml
//! [protocol.hp-check]
//! below = ["eth"]
//! numbers = { eth = 0x88b5 }
//! [protocol.hp-ident]
//! below = ["hp-check"]
//! mac = "02:53:54:00:00:01"
//! [protocol.hp-window]
//! below = ["hp-ident"]
//! [protocol.hp-frag]
//! below = ["hp-window"]
//! ```
//!
//! An application opens `hp-frag` with the peer's hardware address as the
//! remote participant; each layer opens the one below with the same.

use std::any::Any;
use std::time::Duration;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, GraphError, HwAddr, Instant, Message, Next, Open,
    PacketMeta, ProtoId, Protocol, Reply, SessionId, SessionRef, Target, TimerId, Up, UpiError,
    Upper,
};
use strata_proto::info::EthInfo;

use crate::field::{ByteOrder, Layout, LayoutBuilder};
use crate::layer::{Check, Ctx, Effects, Layer, Verdict, View, ViewMut};
use crate::stack::{StackConfig, layer_by_name};

/// Each layer's header is padded to this many bytes (the paper's Horus: 4).
pub const ALIGN: usize = 4;

/// The most sessions (peers) of one layer.
const MAX_SESSIONS: usize = 1024;

/// The options of the `hp-*` protocols.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "mac",
        doc: "this host's hardware address (hp-ident: the connection identification's source)",
    },
    OptionDoc {
        name: "app",
        doc: "application number in the connection identification (default 1)",
    },
    OptionDoc {
        name: "fragment",
        doc: "largest fragment in bytes (hp-frag, default 1400)",
    },
    OptionDoc {
        name: "rto_us",
        doc: "retransmission timeout in microseconds (hp-window, default 20000)",
    },
];

macro_rules! spec {
    ($kind:literal, $doc:literal, $make:ident) => {
        ProtocolSpec {
            kind: $kind,
            doc: $doc,
            options: OPTIONS,
            demux_by_number: false,
            implies_above: &[],
            implies_beside: &[],
            factory: $make,
        }
    };
}

fn make_frag(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Layered::from_config("frag", c, b)
}
fn make_window(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Layered::from_config("window", c, b)
}
fn make_check(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Layered::from_config("check", c, b)
}
fn make_ident(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Layered::from_config("ident", c, b)
}

/// The registry entries of the four layers.
pub const SPECS: [ProtocolSpec; 4] = [
    spec!(
        "hp-frag",
        "seed 003 test stack: fragmentation (PA off)",
        make_frag
    ),
    spec!(
        "hp-window",
        "seed 003 test stack: sliding window of 16 (PA off)",
        make_window
    ),
    spec!(
        "hp-check",
        "seed 003 test stack: Internet checksum (PA off)",
        make_check
    ),
    spec!(
        "hp-ident",
        "seed 003 test stack: connection identification (PA off)",
        make_ident
    ),
];

/// Reads the stack settings shared by `hp-*` and `pa` from a config.
pub(crate) fn stack_config(c: &ProtocolConfig) -> Result<StackConfig, GraphError> {
    let mut s = StackConfig::default();
    if let Some(f) = c.options.get::<usize>("fragment")? {
        s.fragment = f.max(1);
    }
    if let Some(us) = c.options.get::<u64>("rto_us")? {
        s.rto = Duration::from_micros(us.max(1));
    }
    Ok(s)
}

struct Session {
    upper: Upper,
    lower: SessionRef,
    remote: HwAddr,
    layer: Box<dyn Layer>,
    layout: Layout,
    hdr_len: usize,
    /// The layer's timer as armed: one at a time (an earlier deadline
    /// cancels the armed one), so timers that fire early do not multiply.
    armed: Option<(Instant, TimerId)>,
}

/// One layer of a stack as a Strata protocol.
pub struct Layered {
    name: &'static str,
    lower: ProtoId,
    mac: HwAddr,
    app: u32,
    config: StackConfig,
    sessions: Vec<Session>,
}

/// A hardware address as the number the identification carries.
pub(crate) fn mac_number(m: HwAddr) -> u64 {
    m.0.iter().fold(0, |a, b| (a << 8) | u64::from(*b))
}

fn next_of(upper: Upper) -> Next {
    match upper {
        Upper::App(a) => Next::App(a),
        Upper::Proto(p) => Next::Proto(p),
    }
}

impl Layered {
    fn from_config(
        name: &'static str,
        c: &ProtocolConfig,
        b: &BuildInfo,
    ) -> Result<Box<dyn Protocol>, GraphError> {
        let lower = b
            .lower_proto_except(&[])
            .ok_or_else(|| b.needs_below("a protocol"))?;
        Ok(Box::new(Layered {
            name,
            lower,
            mac: c.options.get("mac")?.unwrap_or(HwAddr::ZERO),
            app: c.options.get("app")?.unwrap_or(1),
            config: stack_config(c)?,
            sessions: Vec::new(),
        }))
    }

    /// The layer of session `sess`, to read its counters.
    pub fn layer(&self, sess: SessionId) -> Option<&dyn Layer> {
        self.sessions.get(sess.index()).map(|s| &*s.layer)
    }

    /// Bytes of this layer's header on every message.
    pub fn header_len(&self) -> Option<usize> {
        self.sessions.first().map(|s| s.hdr_len)
    }

    /// Sends what post-processing emitted, asks for its timer.
    fn apply(&mut self, i: usize, fx: Effects, cx: &mut Cx) {
        let s = &mut self.sessions[i];
        for e in fx.down {
            let mut m = e.data;
            write_header(&mut m, &e.hdr, s.hdr_len);
            cx.push(s.lower, m);
        }
        if let Some(t) = fx.timer
            && s.armed.is_none_or(|(a, _)| t < a)
        {
            if let Some((_, old)) = s.armed {
                cx.cancel_timer(old);
            }
            let id = cx.set_timer(t, i as u64);
            s.armed = Some((t, id));
        }
    }
}

fn write_header(m: &mut Message, hdr: &[u8], len: usize) {
    let out = m.push(len);
    out.fill(0);
    out[..hdr.len()].copy_from_slice(hdr);
}

impl Protocol for Layered {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        // A layer finds its session by the one below; the bottom layer, on
        // Ethernet, by the sender's address.
        let found = self
            .sessions
            .iter()
            .position(|s| Some(s.lower) == meta.lower)
            .or_else(|| {
                let src = meta.get::<EthInfo>().map(|e| e.src);
                self.sessions.iter().position(|s| Some(s.remote) == src)
            });
        let Some(i) = found else {
            return Demux::Drop(DropReason::NoSession);
        };
        let s = &self.sessions[i];
        if hdr.len() < s.hdr_len {
            return Demux::Short(s.hdr_len);
        }
        Demux::To {
            target: Target::Session(SessionId(i as u32)),
            hdr_len: s.hdr_len,
            next: next_of(s.upper),
        }
    }

    fn pop(&mut self, target: Target, msg: &mut Message, _: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Target::Session(id) = target else {
            return Up::Drop(DropReason::NoSession);
        };
        let i = id.index();
        let Some(s) = self.sessions.get_mut(i) else {
            return Up::Drop(DropReason::NoSession);
        };
        let Some(raw) = msg.pullup(s.hdr_len) else {
            return Up::Drop(DropReason::Truncated);
        };
        let hdr = raw[..s.layout.total_bytes()].to_vec();
        msg.strip(s.hdr_len);
        let v = View {
            layout: &s.layout,
            order: ByteOrder::Big,
            buf: &hdr,
        };
        let check = s.layer.pre_deliver(v, msg);
        if let Check::Drop(why) = check {
            return Up::Drop(DropReason::Other(why));
        }
        let absorbed = check == Check::Absorb;
        let mut fx = Effects::default();
        let mut ctx = Ctx {
            layout: &s.layout,
            order: ByteOrder::Big,
            now: cx.now(),
            fx: &mut fx,
            predicted: None,
        };
        s.layer.post_deliver(v, msg, absorbed, &mut ctx);
        let up = fx.up.take();
        self.apply(i, fx, cx);
        match up {
            Some(m) => {
                *msg = m;
                Up::Continue
            }
            None if absorbed => Up::Consumed,
            None => Up::Continue,
        }
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let i = sess.index();
        let Some(s) = self.sessions.get_mut(i) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let mut hdr = s.layout.headers();
        let mut v = ViewMut {
            layout: &s.layout,
            order: ByteOrder::Big,
            buf: &mut hdr,
        };
        let verdict = s.layer.pre_send(&mut v, &msg);
        // Post-send may take the data (to keep it): a sent message goes
        // down with its own.
        let mut data = if verdict == Verdict::Pass {
            let data = msg.clone();
            write_header(&mut msg, &hdr, s.hdr_len);
            cx.push(s.lower, msg);
            data
        } else {
            msg
        };
        let mut fx = Effects::default();
        let mut ctx = Ctx {
            layout: &s.layout,
            order: ByteOrder::Big,
            now: cx.now(),
            fx: &mut fx,
            predicted: None,
        };
        let v = View {
            layout: &s.layout,
            order: ByteOrder::Big,
            buf: &hdr,
        };
        s.layer
            .post_send(v, &mut data, verdict == Verdict::Divert, &mut ctx);
        self.apply(i, fx, cx);
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let Some(Addr::Hw(remote)) = req.parts.remote.top() else {
            return Err(UpiError::BadParticipant(
                "the stack needs the peer's hardware address",
            ));
        };
        if self.sessions.len() >= MAX_SESSIONS {
            return Err(UpiError::Exhausted("hp sessions"));
        }
        if self.sessions.iter().any(|s| s.remote == remote) {
            return Err(UpiError::InUse);
        }
        let lower = cx.open(self.lower, req.parts.clone(), req.qos)?;
        let mut layer = layer_by_name(
            self.name,
            mac_number(self.mac),
            mac_number(remote),
            self.app,
            &self.config,
        )
        .ok_or(UpiError::Unsupported("layer"))?;
        let mut b = LayoutBuilder::new();
        layer.declare(&mut b);
        let layout = b.compile().map_err(|_| UpiError::Unsupported("layout"))?;
        let hdr_len = layout.total_bytes().div_ceil(ALIGN) * ALIGN;
        self.sessions.push(Session {
            upper: req.upper,
            lower,
            remote,
            layer,
            layout,
            hdr_len,
            armed: None,
        });
        Ok(SessionId(self.sessions.len() as u32 - 1))
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.sessions.get(sess.index()) {
            cx.close(s.lower);
        }
    }

    /// `Control::Private` ops go to the session's layer.
    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        _: &mut Cx,
    ) -> Result<Reply, UpiError> {
        crate::layer::control_layers(sess, &op, |s| {
            self.sessions
                .get_mut(s.index())
                .map(|s| std::iter::once(&mut s.layer))
        })
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let i = token as usize;
        let Some(s) = self.sessions.get_mut(i) else {
            return;
        };
        s.armed = None;
        cx.acting_for(SessionId(i as u32));
        let mut fx = Effects::default();
        let mut ctx = Ctx {
            layout: &s.layout,
            order: ByteOrder::Big,
            now: cx.now(),
            fx: &mut fx,
            predicted: None,
        };
        s.layer.on_timer(&mut ctx);
        self.apply(i, fx, cx);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
