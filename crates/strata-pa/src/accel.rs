//! The Protocol Accelerator (seed 003 §4, Figures 2 and 3) as a Strata
//! protocol, `pa`, on Ethernet: one accelerator per connection between the
//! application and the connection's layers.
//!
//! A send takes the fast path when the send prediction is enabled, no
//! post-send is pending and the backlog is empty: the predicted headers, the
//! send filter (which fills the message-specific fields, or refuses), the
//! preamble, and out. A delivery takes it when the cookie is known, the
//! delivery filter accepts, the prediction is enabled and the
//! protocol-specific header equals the predicted one. Everything else goes
//! through the layers ([`Runner`]). Post-processing of a fast-path send or
//! delivery waits in the connection's queue until the engine is idle (its
//! idle call, `Cx::when_idle`: the frame leaves when the engine's run ends) or
//! until the next send or delivery of that connection needs it (§4,
//! Figure 4): the next send waits for post-sends only, the next delivery for
//! post-delivers only, and the slow path for both. Sends that arrive while a
//! post-send is pending, or while the prediction is disabled, queue in the
//! backlog and leave packed ([`crate::pack`]).
//!
//! Cookies (§2.2) go past the paper: a connection sends its identification
//! until the peer acknowledges the cookie (the PA's own gossip bit,
//! `cookie-ack`), so a lost first message leaves the next ones deliverable.
//! With `cookie_ack = false` it behaves as the paper's PA (identification on
//! the first message and on retransmissions only).
//!
//! The checksum (`check`'s, in the filters) covers the connection
//! identification and the preamble's cookie and byte order, whether they are
//! sent or not: the PA keeps two fields of its own in the identification
//! class, `cookie` (the sender's preamble, never sent there: the receiver
//! fills it from the preamble) and `echo` (sent with the identification: the
//! receiver's cookie as the sender knows it). A receiver that has a cookie of
//! its peer learns a new one only from a frame whose `echo` is its own cookie:
//! a forger who never saw the receiver's frames cannot replace the peer's
//! cookie, even with a correct sum (§2.2's "agree on the cookie").

use std::any::Any;
use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, GraphError, HwAddr, Instant, Message, Open, PacketMeta,
    Priority, ProtoId, Protocol, Reply, SessionId, SessionRef, Target, TimerId, Up, UpiError,
    Upper,
};

use crate::field::{ByteOrder, Class, FieldHandle, Layout, LayoutBuilder, LayoutError};
use crate::filter::{Compiled, Frame as FilterFrame, Op, Verified, verify};
use crate::layer::{Layer, ViewMut};
use crate::layered::{mac_number, stack_config};
use crate::pack::{self, Backlog};
use crate::preamble::{COOKIE_MASK, PREAMBLE_LEN, Preamble};
use crate::runner::{Frame, Output, Runner};
use crate::stack::{StackConfig, paper_stack};

/// The most connections of one accelerator.
const MAX_CONNS: usize = 1024;

/// The options of `pa`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "mac",
        doc: "this host's hardware address (the identification's source)",
    },
    OptionDoc {
        name: "app",
        doc: "application number in the connection identification (default 1)",
    },
    OptionDoc {
        name: "fragment",
        doc: "largest fragment in bytes (default 1400)",
    },
    OptionDoc {
        name: "rto_us",
        doc: "retransmission timeout in microseconds (default 20000)",
    },
    OptionDoc {
        name: "order",
        doc: "byte order of the headers this side writes: native, big or little (default native)",
    },
    OptionDoc {
        name: "filters",
        doc: "compiled (closures, default) or interpreted",
    },
    OptionDoc {
        name: "mac_key",
        doc: "a key both peers share: frames that carry the identification carry a keyed MAC of it (HMAC-SHA-256, 64 bits), and a frame whose MAC does not check teaches nothing (default: none)",
    },
    OptionDoc {
        name: "cookie_ack",
        doc: "send the identification until the peer acknowledges the cookie (default true; false: the paper's PA)",
    },
];

/// The registry entry of `pa`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "pa",
    doc: "seed 003's Protocol Accelerator over the paper's 4-layer stack",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let eth = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("eth"))?;
    let order = match c.options.get::<String>("order")?.as_deref() {
        None | Some("native") => ByteOrder::NATIVE,
        Some("big") => ByteOrder::Big,
        Some("little") => ByteOrder::Little,
        Some(_) => {
            return Err(GraphError::BadOption {
                owner: c.options.owner().into(),
                option: "order".into(),
                problem: "native, big or little".into(),
            });
        }
    };
    let compiled = match c.options.get::<String>("filters")?.as_deref() {
        None | Some("compiled") => true,
        Some("interpreted") => false,
        Some(_) => {
            return Err(GraphError::BadOption {
                owner: c.options.owner().into(),
                option: "filters".into(),
                problem: "compiled or interpreted".into(),
            });
        }
    };
    Ok(Box::new(Accelerator {
        eth,
        mac: c.options.get("mac")?.unwrap_or(HwAddr::ZERO),
        app: c.options.get("app")?.unwrap_or(1),
        config: stack_config(c)?,
        order,
        compiled,
        cookie_ack: c.options.get("cookie_ack")?.unwrap_or(true),
        mac_key: c
            .options
            .get::<String>("mac_key")?
            .map(|k| k.into_bytes().into()),
        conns: Vec::new(),
        by_cookie: FxHashMap::default(),
        tally: Tally::default(),
        idle: Vec::new(),
    }))
}

/// A filter, verified, run one way or the other.
struct Filter {
    verified: Verified,
    compiled: Option<Compiled>,
}

impl Filter {
    fn build(ops: Vec<Op>, layout: &Layout, compiled: bool) -> Result<Filter, UpiError> {
        let verified = verify(&ops, layout).map_err(|_| UpiError::Unsupported("filter"))?;
        let compiled = compiled.then(|| verified.compile(layout));
        Ok(Filter { verified, compiled })
    }

    fn run(&self, layout: &Layout, hdr: &mut [u8], order: ByteOrder, data: &Message) -> u64 {
        let mut f = FilterFrame { hdr, order, data };
        match &self.compiled {
            Some(c) => c.run(&mut f),
            None => self.verified.run(layout, &mut f),
        }
    }
}

/// Post-processing that waits (paper's Table 3 `pre_msg`).
enum Post {
    Send {
        hdr: Vec<u8>,
        data: Message,
    },
    Deliver {
        hdr: Vec<u8>,
        order: ByteOrder,
        data: Message,
    },
}

/// One connection's accelerator.
struct Conn {
    upper: Upper,
    lower: SessionRef,
    remote: HwAddr,
    run: Runner,
    /// This side's cookie.
    cookie: u64,
    /// The peer has acknowledged it.
    acked: bool,
    /// Messages sent so far (the first carries the identification).
    sent: u64,
    /// The peer's cookies: the current one and the one before.
    peer_cookies: [Option<u64>; 2],
    /// The identification class as it is for the peer's frames that do not
    /// carry it: as the peer last sent it, with `echo` this side's cookie.
    peer_ident: Vec<u8>,
    /// The PA's own fields.
    pa: PaFields,
    /// The key of the identification's MAC.
    key: Option<std::sync::Arc<[u8]>>,
    /// A layer's post-deliver reads a delivered message's data: the fast
    /// path keeps a copy for it.
    keep_delivered: bool,
    /// Agree on cookies (`cookie_ack`): send the identification until the
    /// peer acknowledges, learn a new cookie only with this side's echoed.
    agree: bool,
    /// The empty message the layers pre-send to predict.
    empty: Message,
    /// Each layer's [`Layer::prediction_varies`].
    varies: Vec<bool>,
    /// Any of them.
    any_varies: bool,
    send_filter: Filter,
    deliver_filter: Filter,
    backlog: Backlog,
    priority: Priority,
    pending: VecDeque<Post>,
    /// What post-processing produces, kept for the next (usually empty).
    out: Output,
    /// How many of `pending` are post-sends (a send checks per message).
    pending_sends: usize,
    /// Header buffers of finished posts, for the next ones: no allocation
    /// per message.
    spare: Vec<Vec<u8>>,
    /// The connection waits for the engine's idle call.
    post_armed: bool,
    /// The layers' timer as armed: one at a time, so a timer that fires
    /// early (its deadline moved later) arms the next without leaving
    /// duplicates behind.
    layers_armed: Option<(Instant, TimerId)>,
}

/// The accelerator protocol: its connections and the cookie table (the
/// paper's router).
pub struct Accelerator {
    eth: ProtoId,
    mac: HwAddr,
    app: u32,
    config: StackConfig,
    order: ByteOrder,
    compiled: bool,
    cookie_ack: bool,
    /// The key of the identification's MAC (`mac_key`), if any.
    mac_key: Option<std::sync::Arc<[u8]>>,
    conns: Vec<Conn>,
    by_cookie: FxHashMap<u64, usize>,
    tally: Tally,
    /// Connections whose post-processing waits for the idle call, in order.
    idle: Vec<usize>,
}

/// Fast-path counts, kept here and added to the engine's counters when
/// post-processing runs: a named count per message would cost a search of
/// the counter list on the critical path.
#[derive(Default)]
struct Tally {
    fast_send: u64,
    fast_deliver: u64,
    backlogged: u64,
}

/// The compiled layout of the paper's stack under the PA, with the PA's own
/// field first: what a dissector needs.
pub fn paper_layout(config: &StackConfig) -> Result<Layout, LayoutError> {
    Ok(layout_of(&mut paper_stack(0, 0, 0, config), false)?.0)
}

/// The PA's own fields in a connection's layout.
#[derive(Clone, Copy)]
struct PaFields {
    /// Identification class, bytes 0–7, never sent in it: the sender's
    /// [`Preamble::covered`], so that the checksum covers the preamble.
    cookie: FieldHandle,
    /// Identification class, sent with it: the receiver's cookie as the
    /// sender knows it (0: not yet).
    echo: FieldHandle,
    /// Gossip: the sender knows a cookie of the receiver's.
    cookie_ack: FieldHandle,
    /// Identification class, with a key only: the MAC of the identification
    /// class (this field read as zero), cookie and echo included.
    mac: Option<FieldHandle>,
}

/// Bytes of the identification class that are not sent: `cookie`.
const COOKIE_BYTES: usize = 8;

fn layout_of(
    layers: &mut [Box<dyn Layer>],
    keyed: bool,
) -> Result<(Layout, PaFields), LayoutError> {
    let mut b = LayoutBuilder::new();
    let cookie_ack = b.add_field(Class::Gossip, "cookie-ack", 1, None);
    let cookie = b.add_field(Class::ConnId, "cookie", 64, Some(0));
    let echo = b.add_field(Class::ConnId, "echo", 64, Some(64));
    let mac = keyed.then(|| b.add_field(Class::ConnId, "mac", 64, Some(128)));
    for l in layers.iter_mut() {
        l.declare(&mut b);
    }
    let pa = PaFields {
        cookie,
        echo,
        cookie_ack,
        mac,
    };
    Ok((b.compile()?, pa))
}

/// Where the identification that is sent sits in a connection's headers:
/// the identification class but for the PA's `cookie`, which the preamble
/// carries. Its length is the identification's on the wire.
pub fn wire_ident(layout: &Layout) -> std::ops::Range<usize> {
    let c = layout.class_range(Class::ConnId);
    c.start + COOKIE_BYTES..c.end
}

/// Messages up to this many bytes (packing header included) go to the wire
/// on the fast path as a copy rather than shared with the one post-send
/// keeps: copying a few bytes costs less than sharing a buffer.
const COPY_SMALL: usize = 64;

/// Whether two protocol-specific headers are equal: a few bytes, compared
/// in place rather than by a call of `memcmp`.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The MAC of a connection identification class `conn` (the `mac` field
/// read as zero): HMAC-SHA-256 (RFC 2104) under `key`, its first 64 bits.
fn ident_mac(key: &[u8], layout: &Layout, mac: FieldHandle, conn: &[u8]) -> Option<u64> {
    use hmac::{Hmac, KeyInit as _, Mac as _};
    let mut bytes = conn.to_vec();
    // Byte order does not matter for a zero.
    layout.set(&mut bytes, ByteOrder::Big, mac, 0);
    // HMAC takes a key of any length: `new_from_slice` cannot fail here.
    let mut m = Hmac::<sha2::Sha256>::new_from_slice(key).ok()?;
    m.update(&bytes);
    let tag = m.finalize().into_bytes();
    Some(u64::from_be_bytes(tag[..8].try_into().ok()?))
}

/// Header buffers a connection keeps for reuse at most.
const SPARE: usize = 64;

impl Conn {
    /// Sets one of the PA's own fields in every message from now on: the
    /// send prediction and the slow path's preset.
    fn set_pa(&mut self, h: FieldHandle, v: u64) {
        let run = &mut self.run;
        if let Some(p) = run.preset.iter_mut().find(|p| p.0 == h) {
            p.1 = v;
        }
        run.layout.set(&mut run.predicted.send, run.order, h, v);
        if Some(h) != self.pa.mac {
            self.seal();
        }
    }

    /// With a key: the MAC of the identification as this side sends it
    /// now, into every message from now on.
    fn seal(&mut self) {
        let (Some(key), Some(mac)) = (self.key.clone(), self.pa.mac) else {
            return;
        };
        let l = &self.run.layout;
        let conn = l.class_range(Class::ConnId);
        // A MAC that could not be made (never, for HMAC) is sent as zero
        // and fails the peer's check.
        let v = ident_mac(&key, l, mac, &self.run.predicted.send[conn]);
        self.set_pa(mac, v.unwrap_or(0));
    }

    fn recycle(&mut self, hdr: Vec<u8>) {
        if self.spare.len() < SPARE {
            self.spare.push(hdr);
        }
    }

    fn filters(run: &Runner, compiled: bool) -> Result<(Filter, Filter), UpiError> {
        let mut send: Vec<Op> = run.layers.iter().flat_map(|l| l.send_filter()).collect();
        send.push(Op::Return(0));
        let mut deliver: Vec<Op> = run
            .layers
            .iter()
            .rev()
            .flat_map(|l| l.deliver_filter())
            .collect();
        deliver.push(Op::Return(0));
        Ok((
            Filter::build(send, &run.layout, compiled)?,
            Filter::build(deliver, &run.layout, compiled)?,
        ))
    }

    /// Predicts the next send's and delivery's headers (§3.2): every layer
    /// pre-sends an empty message, and says what it expects next. With
    /// `all` false only the layers whose predictions vary run again; the
    /// others' fields stay as the last full prediction wrote them, or as
    /// their post-processing updated them in place.
    fn predict(&mut self, all: bool) {
        if !all && !self.any_varies {
            return;
        }
        let p = &mut self.run.predicted;
        let (mut send, mut deliver) = (std::mem::take(&mut p.send), std::mem::take(&mut p.deliver));
        self.predict_into(all, &mut send, &mut deliver);
        let p = &mut self.run.predicted;
        (p.send, p.deliver) = (send, deliver);
    }

    /// Whether the predictions kept (some layers update theirs in place)
    /// are what a full rebuild makes now, but for the message-specific
    /// fields: a check for tests.
    fn predictions_current(&self) -> bool {
        let (mut send, mut deliver) = (Vec::new(), Vec::new());
        self.predict_into(true, &mut send, &mut deliver);
        let (l, p) = (&self.run.layout, &self.run.predicted);
        // Message-specific fields are the send filter's, per message.
        let classes = [Class::ConnId, Class::Protocol, Class::Gossip];
        let same = |r: std::ops::Range<usize>| send[r.clone()] == p.send[r];
        let proto = l.class_range(Class::Protocol);
        classes.into_iter().all(|c| same(l.class_range(c)))
            && deliver[proto.clone()] == p.deliver[proto]
    }

    /// The layers' predictions written into `send` and `deliver`: by every
    /// layer when `all` (from zeroed headers), else by the layers whose
    /// predictions vary; and the PA's own fields.
    fn predict_into(&self, all: bool, send: &mut Vec<u8>, deliver: &mut Vec<u8>) {
        let run = &self.run;
        let layout = &run.layout;
        if all {
            for b in [&mut *send, &mut *deliver] {
                b.clear();
                b.resize(layout.total_bytes(), 0);
            }
        }
        let chosen = || {
            run.layers
                .iter()
                .zip(&self.varies)
                .filter(|(_, v)| all || **v)
        };
        let mut v = ViewMut {
            layout,
            order: run.order,
            buf: send,
        };
        for (l, _) in chosen() {
            l.pre_send(&mut v, &self.empty);
        }
        for &(h, x) in &run.preset {
            v.set(h, x);
        }
        let mut v = ViewMut {
            layout,
            order: run.predicted.deliver_order,
            buf: deliver,
        };
        for (l, _) in chosen() {
            l.predict_deliver(&mut v);
        }
    }
}

impl Accelerator {
    /// The connection's layers, for their counters.
    pub fn layers(&self, sess: SessionId) -> Option<&[Box<dyn Layer>]> {
        self.conns.get(sess.index()).map(|c| &c.run.layers[..])
    }

    /// The compiled layout of a connection.
    pub fn layout(&self, sess: SessionId) -> Option<&Layout> {
        self.conns.get(sess.index()).map(|c| &c.run.layout)
    }

    /// Whether the connection's predictions, some kept up to date in place
    /// by their layers, equal a full rebuild (a check for tests).
    pub fn predictions_current(&self, sess: SessionId) -> Option<bool> {
        self.conns.get(sess.index()).map(Conn::predictions_current)
    }

    /// Each layer's share of the send and delivery disable counters.
    pub fn disable_counters(&self, sess: SessionId) -> Option<(Vec<i32>, Vec<i32>)> {
        self.conns
            .get(sess.index())
            .map(|c| (c.run.send_disable.clone(), c.run.deliver_disable.clone()))
    }

    /// Bytes of PA headers on an ordinary message (no identification, not
    /// packed): preamble, protocol-specific, message-specific, gossip and
    /// packing header.
    pub fn header_bytes(layout: &Layout) -> usize {
        PREAMBLE_LEN
            + layout.class_bytes(Class::Protocol)
            + layout.class_bytes(Class::Message)
            + layout.class_bytes(Class::Gossip)
            + 1
    }

    /// Puts a frame on the wire: preamble, identification if needed, the
    /// other three headers, data.
    fn transmit(&mut self, i: usize, mut f: Frame, cx: &mut Cx) {
        self.put(i, &mut f.hdr, f.data, f.unusual, cx);
    }

    /// [`Self::transmit`] with the headers borrowed, for the fast path to
    /// keep them for post-processing. Preamble, identification and the
    /// other headers go in front of the data in one piece.
    fn put(&mut self, i: usize, hdr: &mut [u8], data: Message, unusual: bool, cx: &mut Cx) {
        let c = &mut self.conns[i];
        let l = &c.run.layout;
        // The PA's own fields are in `hdr` already: the checksum covers them.
        let ident = if self.cookie_ack {
            !c.acked || unusual
        } else {
            c.sent == 0 || unusual
        };
        let (start, end) = (
            l.class_range(Class::Protocol).start,
            l.class_range(Class::Gossip).end,
        );
        let wire = if ident { wire_ident(l) } else { 0..0 };
        let at = PREAMBLE_LEN + wire.len();
        let mut m = data;
        let front = m.push(at + end - start);
        front[..PREAMBLE_LEN].copy_from_slice(
            &Preamble {
                ident,
                order: c.run.order,
                cookie: c.cookie,
            }
            .to_bytes(),
        );
        front[PREAMBLE_LEN..at].copy_from_slice(&hdr[wire]);
        front[at..].copy_from_slice(&hdr[start..end]);
        if ident {
            cx.count("ident-sent");
        }
        c.sent += 1;
        cx.push(c.lower, m);
    }

    fn output(&mut self, i: usize, out: Output, cx: &mut Cx) {
        for f in out.frames {
            self.transmit(i, f, cx);
        }
        for why in out.drops {
            cx.count_drop(DropReason::Other(why));
        }
        for m in out.up {
            self.hand_up(i, m, None, cx);
        }
    }

    /// Unpacks and hands to the application (Figure 3's `deliver`), with
    /// the metadata of the frame it came in (a fast delivery), or fresh
    /// metadata (what the layers pass up later).
    fn hand_up(&mut self, i: usize, m: Message, meta: Option<&PacketMeta>, cx: &mut Cx) {
        let c = &self.conns[i];
        let Upper::App(app) = c.upper else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let me = SessionRef::new(cx.me(), SessionId(i as u32));
        let fresh;
        let meta = match meta {
            Some(m) => m,
            None => {
                fresh = PacketMeta::new(strata_core::LinkId(0), cx.now());
                &fresh
            }
        };
        match pack::unpack_each(m, |m| cx.deliver(app, Some(me), m, meta)) {
            Ok(n) if n > 1 => cx.count_n("unpacked", n as u64),
            Ok(_) => {}
            Err(_) => cx.count_drop(DropReason::Other("bad-packing")),
        }
    }

    /// Runs waiting post-processing: all of it, or up to the last of one kind.
    fn flush(&mut self, i: usize, upto_send: bool, upto_deliver: bool, cx: &mut Cx) {
        let c = &self.conns[i];
        let last = if upto_send && upto_deliver {
            c.pending.len().checked_sub(1)
        } else {
            c.pending.iter().rposition(|p| match p {
                Post::Send { .. } => upto_send,
                Post::Deliver { .. } => upto_deliver,
            })
        };
        let Some(last) = last else { return };
        let now = cx.now();
        for _ in 0..=last {
            let c = &mut self.conns[i];
            let Some(p) = c.pending.pop_front() else {
                break;
            };
            let out = &mut c.out;
            let hdr = match p {
                Post::Send { hdr, mut data } => {
                    c.pending_sends -= 1;
                    c.run.post_send(&hdr, &mut data, now, out);
                    hdr
                }
                Post::Deliver { hdr, order, data } => {
                    c.run.post_deliver(&hdr, order, &data, now, out);
                    hdr
                }
            };
            c.recycle(hdr);
            if !c.out.is_empty() {
                let out = std::mem::take(&mut c.out);
                self.output(i, out, cx);
            }
        }
        self.settle(i, cx);
    }

    /// After post-processing: new predictions, new filters if a layer asked,
    /// the layers' timer. (The fast paths' counts are reported by
    /// [`Self::drain`], which every idle call, timer and slow delivery
    /// ends with: before the engine's next run is over.)
    fn settle(&mut self, i: usize, cx: &mut Cx) {
        let compiled = self.compiled;
        let c = &mut self.conns[i];
        if c.run.refilter {
            c.run.refilter = false;
            if let Ok((s, d)) = Conn::filters(&c.run, compiled) {
                c.send_filter = s;
                c.deliver_filter = d;
                cx.count("refiltered");
            }
        }
        c.predict(false);
        if !std::mem::take(&mut c.run.timers_moved) {
            return;
        }
        if let Some(t) = c.run.next_timer()
            && c.layers_armed.is_none_or(|(a, _)| t < a)
        {
            if let Some((_, old)) = c.layers_armed {
                cx.cancel_timer(old);
            }
            let id = cx.set_timer(t, i as u64);
            c.layers_armed = Some((t, id));
        }
    }

    /// Adds the fast paths' counts to the engine's counters.
    fn report(&mut self, cx: &mut Cx) {
        let t = std::mem::take(&mut self.tally);
        if t.fast_send > 0 {
            cx.count_n("fast-send", t.fast_send);
        }
        if t.fast_deliver > 0 {
            cx.count_n("fast-deliver", t.fast_deliver);
        }
        if t.backlogged > 0 {
            cx.count_n("backlogged", t.backlogged);
        }
    }

    fn defer(&mut self, i: usize, p: Post, cx: &mut Cx) {
        let c = &mut self.conns[i];
        if matches!(p, Post::Send { .. }) {
            c.pending_sends += 1;
        }
        c.pending.push_back(p);
        if !c.post_armed {
            c.post_armed = true;
            self.idle.push(i);
            cx.when_idle();
        }
    }

    /// Sends a (packed) message: the fast path, or through the layers.
    fn send(&mut self, i: usize, data: Message, cx: &mut Cx) {
        let c = &mut self.conns[i];
        let mut hdr = c.spare.pop().unwrap_or_default();
        hdr.clear();
        hdr.extend_from_slice(&c.run.predicted.send);
        let refused = c
            .send_filter
            .run(&c.run.layout, &mut hdr, c.run.order, &data);
        if refused == 0 && c.run.send_enabled() {
            self.tally.fast_send += 1;
            // Post-send keeps the message (the window, for retransmission)
            // and the wire gets its own: a small one as a copy of its bytes
            // behind the headers (one buffer, nothing shared to count and
            // free twice), a larger one shared.
            let wire = if data.len() <= COPY_SMALL {
                let mut w = Message::new();
                data.copy_to_slice(0, w.push(data.len()));
                w
            } else {
                data.clone()
            };
            self.put(i, &mut hdr, wire, false, cx);
            self.defer(i, Post::Send { hdr, data }, cx);
            return;
        }
        cx.count("slow-send");
        self.flush(i, true, true, cx);
        let mut out = Output::default();
        self.conns[i].run.send(data, cx.now(), &mut out);
        self.output(i, out, cx);
        self.settle(i, cx);
        self.report(cx);
    }

    /// Sends what waits, packed, while the prediction allows.
    fn drain(&mut self, i: usize, cx: &mut Cx) {
        // Called per message only while the prediction is disabled (a full
        // window): the counts stay current without a count per message on
        // the streaming path.
        self.report(cx);
        let max = self.config.fragment;
        loop {
            // Nothing waits (the common case): no post-send need run for it.
            if self.conns[i].backlog.is_empty() {
                return;
            }
            self.flush(i, true, false, cx);
            let c = &mut self.conns[i];
            if !c.run.send_enabled() {
                return;
            }
            let (packed, n) = c.backlog.take_packed(max);
            if n > 1 {
                cx.count_n("packed", n as u64);
            }
            self.send(i, packed, cx);
        }
    }

    /// Finds the connection a message belongs to (Figure 3's
    /// `from_network`); why not when it is dropped. Nothing is learned
    /// here: the message has not been checked yet.
    fn route(&self, p: &Preamble, msg: &Message) -> Result<usize, DropReason> {
        if !p.ident {
            return self
                .by_cookie
                .get(&p.cookie)
                .copied()
                .ok_or(DropReason::Other("unknown-cookie"));
        }
        let Some(first) = self.conns.first() else {
            return Err(DropReason::NoSession);
        };
        let l = &first.run.layout;
        let wire = wire_ident(l);
        let n = wire.len();
        let mut hdr = l.headers();
        if msg.copy_to_slice(PREAMBLE_LEN, &mut hdr[wire]) < n {
            return Err(DropReason::Truncated);
        }
        let view = crate::layer::View {
            layout: l,
            order: p.order,
            buf: &hdr,
        };
        self.conns
            .iter()
            .position(|c| c.run.layers.iter().all(|l| l.accepts_ident(view)))
            .ok_or(DropReason::Other("unknown-ident"))
    }

    /// Learns the peer's cookie and identification from a message that
    /// carried them and passed the delivery filter (the checksum): a
    /// corrupted message that fails it changes nothing. A new cookie for a
    /// connection that has one already is learned only from a message that
    /// echoes this side's cookie (when agreeing on cookies): a forger who
    /// has not seen this side's messages cannot replace the peer's cookie.
    /// Why not, when the message is to be dropped.
    fn learn(&mut self, i: usize, p: &Preamble, hdr: &[u8], cx: &mut Cx) -> Result<(), DropReason> {
        let c = &mut self.conns[i];
        let l = &c.run.layout;
        if let (Some(key), Some(mac)) = (&c.key, c.pa.mac) {
            // With a key, only the peer writes a MAC that checks: a forger
            // who has seen every frame still cannot teach a cookie.
            let conn = l.class_range(Class::ConnId);
            if ident_mac(key, l, mac, &hdr[conn]) != Some(l.get(hdr, p.order, mac)) {
                return Err(DropReason::Other("bad-mac"));
            }
        }
        if c.peer_cookies[0] != Some(p.cookie) {
            let proven = l.get(hdr, p.order, c.pa.echo) == c.cookie;
            let known = c.peer_cookies[1] == Some(p.cookie);
            if c.agree && c.peer_cookies[0].is_some() && !known && !proven {
                return Err(DropReason::Other("unproven-cookie"));
            }
            // Keep the cookie before too: a cookie changed in flight that
            // still passed cannot make the peer's messages undeliverable.
            if let Some(old) = c.peer_cookies[1].filter(|o| *o != p.cookie) {
                self.by_cookie.remove(&old);
            }
            c.peer_cookies = [Some(p.cookie), c.peer_cookies[0]];
            self.by_cookie.insert(p.cookie, i);
            // From now on every message acknowledges the cookie and echoes
            // it: written before the send filter or `check` sums.
            let (ack, echo) = (c.pa.cookie_ack, c.pa.echo);
            c.set_pa(ack, 1);
            if c.agree {
                c.set_pa(echo, p.cookie);
            }
            cx.count("cookie-learned");
        }
        let c = &mut self.conns[i];
        let l = &c.run.layout;
        let wire = wire_ident(l);
        if c.peer_ident.get(wire.clone()) != Some(&hdr[wire.clone()]) {
            let conn = l.class_range(Class::ConnId);
            c.peer_ident.clear();
            c.peer_ident.extend_from_slice(&hdr[conn]);
            // The peer sends its messages without the identification only
            // once this side acknowledged its cookie, which it learned
            // from one of this side's messages: it echoes this side's.
            let echo = if c.agree { c.cookie } else { 0 };
            l.set(&mut c.peer_ident, p.order, c.pa.echo, echo);
            // And its MAC is then of that identification.
            if let (Some(key), Some(mac)) = (&c.key, c.pa.mac) {
                let v = ident_mac(key, l, mac, &c.peer_ident);
                l.set(&mut c.peer_ident, p.order, mac, v.unwrap_or(0));
            }
        }
        Ok(())
    }
}

impl Protocol for Accelerator {
    fn demux(&self, hdr: &[u8], _: &mut PacketMeta) -> Demux {
        if hdr.len() < PREAMBLE_LEN {
            return Demux::Short(PREAMBLE_LEN);
        }
        // Only pop can tell: the cookie table, the prediction and the layers
        // decide where the message goes.
        Demux::Stateful {
            target: Target::Protocol,
        }
    }

    fn pop(&mut self, _: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let mut copy = [0u8; PREAMBLE_LEN];
        let pre = match msg.peek(PREAMBLE_LEN) {
            Some(pre) => pre,
            None if msg.copy_to_slice(0, &mut copy) == PREAMBLE_LEN => &copy[..],
            None => return Up::Drop(DropReason::Truncated),
        };
        let Some(p) = Preamble::parse(pre) else {
            return Up::Drop(DropReason::Truncated);
        };
        let i = match self.route(&p, msg) {
            Ok(i) => i,
            Err(why) => return Up::Drop(why),
        };
        let c = &mut self.conns[i];
        let l = &c.run.layout;
        let wire = wire_ident(l);
        let ident_len = if p.ident { wire.len() } else { 0 };
        let rest = l.class_range(Class::Protocol).start..l.class_range(Class::Gossip).end;
        // The headers as the layers see them: the identification (as sent,
        // or as the peer sent it last), then the other three classes, read
        // from the front of the message in place when it is contiguous.
        let mut hdr = c.spare.pop().unwrap_or_default();
        hdr.clear();
        if p.ident {
            hdr.resize(wire.start, 0);
        } else {
            let n = c.peer_ident.len().min(rest.start);
            hdr.extend_from_slice(&c.peer_ident[..n]);
            hdr.resize(rest.start, 0);
        }
        let need = ident_len + rest.len();
        match msg.peek(PREAMBLE_LEN + need) {
            Some(front) => hdr.extend_from_slice(&front[PREAMBLE_LEN..]),
            None => {
                let at = hdr.len();
                hdr.resize(at + need, 0);
                if msg.copy_to_slice(PREAMBLE_LEN, &mut hdr[at..]) < need {
                    c.recycle(hdr);
                    return Up::Drop(DropReason::Truncated);
                }
            }
        }
        // The checksum covers the preamble as it arrived.
        l.set(&mut hdr, p.order, c.pa.cookie, p.covered());
        let mut data = std::mem::take(msg);
        data.strip(PREAMBLE_LEN + ident_len + rest.len());
        // The fast path needs the post-delivers done; post-sends may wait.
        self.flush(i, false, true, cx);
        let c = &mut self.conns[i];
        if c.run.predicted.deliver_order != p.order {
            c.run.predicted.deliver_order = p.order;
            c.predict(true);
        }
        let l = &c.run.layout;
        let filter = c.deliver_filter.run(l, &mut hdr, p.order, &data);
        if filter == 0
            && p.ident
            && let Err(why) = self.learn(i, &p, &hdr, cx)
        {
            self.conns[i].recycle(hdr);
            return Up::Drop(why);
        }
        let c = &mut self.conns[i];
        let l = &c.run.layout;
        // Gossip is used only once the checksum (in the delivery filter,
        // the only check there) says the headers arrived as sent.
        if filter == 0 && !c.acked && l.get(&hdr, p.order, c.pa.cookie_ack) == 1 {
            c.acked = true;
            cx.count("cookie-acked");
        }
        if filter == 0
            && c.run.deliver_enabled()
            && same(
                &hdr[l.class_range(Class::Protocol)],
                &c.run.predicted.deliver[l.class_range(Class::Protocol)],
            )
        {
            self.tally.fast_deliver += 1;
            // Post-deliver gets the data only if a layer reads it.
            let up = if c.keep_delivered {
                data.clone()
            } else {
                std::mem::take(&mut data)
            };
            self.hand_up(i, up, Some(meta), cx);
            self.defer(
                i,
                Post::Deliver {
                    hdr,
                    order: p.order,
                    data,
                },
                cx,
            );
            return Up::Consumed;
        }
        cx.count("slow-deliver");
        self.flush(i, true, true, cx);
        let mut out = Output::default();
        self.conns[i]
            .run
            .deliver(hdr, p.order, data, cx.now(), &mut out);
        self.output(i, out, cx);
        self.settle(i, cx);
        self.drain(i, cx);
        Up::Consumed
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        let i = sess.index();
        let Some(c) = self.conns.get_mut(i) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        // While a post-send waits, or the prediction is off, or others wait
        // already, the message joins the backlog (§3.4).
        let busy = c.pending_sends > 0;
        if busy || !c.backlog.is_empty() || !c.run.send_enabled() {
            c.backlog.push(c.priority, msg);
            self.tally.backlogged += 1;
            if !busy {
                self.drain(i, cx);
            }
            return;
        }
        self.send(i, pack::pack_one(msg), cx);
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let Some(Addr::Hw(remote)) = req.parts.remote.top() else {
            return Err(UpiError::BadParticipant(
                "pa needs the peer's hardware address",
            ));
        };
        if self.conns.len() >= MAX_CONNS {
            return Err(UpiError::Exhausted("pa connections"));
        }
        if self.conns.iter().any(|c| c.remote == remote) {
            return Err(UpiError::InUse);
        }
        let lower = cx.open(self.eth, req.parts.clone(), req.qos)?;
        let mut layers = paper_stack(
            mac_number(self.mac),
            mac_number(remote),
            self.app,
            &self.config,
        );
        let (layout, pa) = layout_of(&mut layers, self.mac_key.is_some())
            .map_err(|_| UpiError::Unsupported("layout"))?;
        let varies: Vec<bool> = layers.iter().map(|l| l.prediction_varies()).collect();
        let mut run = Runner::new(layers, layout, self.order);
        let (send_filter, deliver_filter) = Conn::filters(&run, self.compiled)?;
        let cookie = (cx.random_u64() & COOKIE_MASK).max(1);
        let own = Preamble {
            ident: false,
            order: self.order,
            cookie,
        };
        run.preset = vec![(pa.cookie, own.covered()), (pa.echo, 0), (pa.cookie_ack, 0)];
        if let Some(mac) = pa.mac {
            run.preset.push((mac, 0));
        }
        let keep_delivered = run.reads_delivered_data();
        let mut c = Conn {
            upper: req.upper,
            lower,
            remote,
            run,
            cookie,
            acked: false,
            sent: 0,
            peer_cookies: [None; 2],
            peer_ident: Vec::new(),
            pa,
            key: self.mac_key.clone(),
            keep_delivered,
            agree: self.cookie_ack,
            empty: Message::new(),
            any_varies: varies.iter().any(|v| *v),
            varies,
            send_filter,
            deliver_filter,
            backlog: Backlog::new(),
            priority: req.qos.priority,
            pending: VecDeque::new(),
            out: Output::default(),
            pending_sends: 0,
            spare: Vec::new(),
            post_armed: false,
            layers_armed: None,
        };
        c.predict(true);
        c.seal();
        // The fast paths' counts first in the counter list: found at once
        // when the idle call reports them.
        for name in ["fast-send", "fast-deliver"] {
            cx.count_n(name, 0);
        }
        self.conns.push(c);
        Ok(SessionId(self.conns.len() as u32 - 1))
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(c) = self.conns.get(sess.index()) {
            cx.close(c.lower);
        }
    }

    /// `Control::Private` ops go to the connection's layers (e.g.
    /// [`crate::stack::frag::SetFragment`]).
    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        _: &mut Cx,
    ) -> Result<Reply, UpiError> {
        crate::layer::control_layers(sess, &op, |s| {
            self.conns
                .get_mut(s.index())
                .map(|c| c.run.layers.iter_mut())
        })
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let i = token as usize;
        if i >= self.conns.len() {
            return;
        }
        cx.acting_for(SessionId(i as u32));
        // Nothing is armed now: settle must look at the layers' timers
        // whether they moved or not.
        self.conns[i].layers_armed = None;
        self.conns[i].run.timers_moved = true;
        self.flush(i, true, true, cx);
        let mut out = Output::default();
        self.conns[i].run.on_timer(cx.now(), &mut out);
        self.output(i, out, cx);
        self.settle(i, cx);
        self.drain(i, cx);
    }

    /// The engine is idle: the post-processing that waited, then the
    /// backlog (§4).
    fn on_idle(&mut self, cx: &mut Cx) {
        let mut idle = std::mem::take(&mut self.idle);
        for &i in &idle {
            cx.acting_for(SessionId(i as u32));
            self.conns[i].post_armed = false;
            self.flush(i, true, true, cx);
            self.drain(i, cx);
        }
        // Keep the list's buffer unless connections asked again meanwhile.
        if self.idle.is_empty() {
            idle.clear();
            self.idle = idle;
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
