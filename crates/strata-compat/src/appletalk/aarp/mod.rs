//! AARP, the AppleTalk Address Resolution Protocol (Inside AppleTalk, 2nd
//! ed., ch. 2), for EtherTalk Phase 2, as a native Strata protocol over
//! `eth` (SNAP OUI 00-00-00, type 0x80F3).
//!
//! - **Probing for a node address**: when first used, AARP probes for its
//!   tentative node (from the `node` option, else the Ethernet address's last
//!   byte): ten probes to the AppleTalk broadcast, 200 ms apart. A response,
//!   or another node's packet from that address, is a conflict: the next
//!   node number is tried. After the tenth quiet probe the address is ours,
//!   and AARP answers requests and probes for it.
//! - **Resolution**: DDP asks [`AarpOp::Resolve`] for a node; an unknown
//!   one gets a request to the broadcast, repeated every 200 ms up to
//!   `retries` times, and DDP parks its datagrams with [`AarpOp::Hold`]
//!   (bounded per node). The response sends them, through Ethernet sessions
//!   AARP opens with DDP's number; running out of requests drops them,
//!   counted `unresolved`.
//! - **The address mapping table** learns from responses to us and from
//!   requests (a requester's address is known to be in use), refreshes
//!   entries from any request or response, and ages each entry out after
//!   `timeout` (default 10 s, Inside AppleTalk's suggestion for EtherTalk).
//! - **Hostile frames** are dropped and counted by reason: truncated, not
//!   Ethernet/AppleTalk (`not-ethertalk`), a bad function, malformed
//!   addresses, packets about other nodes (`not-for-us`).
//!
//! DDP uses AARP when the graph gives it one as a lower beside `eth` (the
//! TOML form: `ddp` below `["eth", "aarp"]`, `aarp` below `["eth"]`); on its
//! own, DDP glean-and-broadcasts as before.

mod config;
pub mod wire;

use std::any::Any;
use std::collections::VecDeque;
use std::time::Duration;

use rustc_hash::FxHashMap;
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, HwAddr, Instant, Message, Next, Open, PacketMeta,
    Participants, ProtoId, Protocol, Qos, Reply, SessionId, SessionRef, Target, TimerId, Up,
    UpiError,
};

use super::ddp::amt::BROADCAST;
use wire::{Function, NodeAddr, PACKET_LEN, Repr};

pub use config::{OPTIONS, SPEC};

/// Probes sent for a tentative address before it is ours.
pub const PROBES: u32 = 10;
/// Between probes, and between requests for one node.
pub const INTERVAL: Duration = Duration::from_millis(200);
/// Most Ethernet sessions AARP keeps open (all are closed when it is full).
const LINK_LIMIT: usize = 256;

const TIMER_PROBE: u64 = 1 << 32;
const TIMER_RETRY: u64 = 2 << 32;
const TIMER_EXPIRE: u64 = 3 << 32;

/// What DDP asks of AARP (through `Control::Private`).
pub enum AarpOp {
    /// The hardware address of a node: `Reply::Resolved` when known, else
    /// `Reply::Pending` with a request on its way.
    Resolve(NodeAddr),
    /// Keep `msg` (a whole DDP datagram) until `to` resolves, then send it
    /// on an Ethernet session carrying `number`.
    Hold {
        /// The node.
        to: NodeAddr,
        /// The datagram.
        msg: Message,
        /// DDP's number in Ethernet's space.
        number: u32,
    },
    /// This node's address: `Reply::Private(Box<(NodeAddr, bool)>)`, the
    /// bool saying whether probing has confirmed it.
    Address,
}

enum State {
    /// Being resolved: requests sent so far, datagrams waiting.
    Pending {
        requests: u32,
        held: VecDeque<(Message, u32)>,
    },
    /// Known until `expires`.
    Known { hw: HwAddr, expires: Instant },
}

struct Entry {
    state: State,
    timer: Option<TimerId>,
}

/// The AARP protocol object.
pub struct Aarp {
    eth: ProtoId,
    me: NodeAddr,
    /// Probes sent for `me`; `None` before the first, `Some(PROBES)` once
    /// the address is ours.
    probes: Option<u32>,
    /// Conflicts seen while probing.
    conflicts: u32,
    mac: Option<HwAddr>,
    timeout: Duration,
    retries: u32,
    pending: usize,
    max_entries: usize,
    table: FxHashMap<NodeAddr, Entry>,
    links: FxHashMap<(HwAddr, Option<u32>), SessionRef>,
}

fn key(a: NodeAddr) -> u64 {
    (u64::from(a.net) << 8) | u64::from(a.node)
}

fn of_key(k: u64) -> NodeAddr {
    NodeAddr {
        net: (k >> 8) as u16,
        node: k as u8,
    }
}

impl Aarp {
    /// AARP on `eth` for `net`, as `node` (from the Ethernet address when
    /// `None`); entries trusted for `timeout`, `retries` requests per node,
    /// `pending` datagrams held per node, at most `max_entries` nodes.
    pub fn new(
        eth: ProtoId,
        net: u16,
        node: Option<u8>,
        timeout: Duration,
        retries: u32,
        pending: usize,
        max_entries: usize,
    ) -> Aarp {
        Aarp {
            eth,
            me: NodeAddr {
                net,
                node: node.unwrap_or(0),
            },
            probes: None,
            conflicts: 0,
            mac: None,
            timeout,
            retries,
            pending,
            max_entries,
            table: FxHashMap::default(),
            links: FxHashMap::default(),
        }
    }

    /// This node's address and whether probing has confirmed it.
    pub fn address(&self) -> (NodeAddr, bool) {
        (self.me, self.probes == Some(PROBES))
    }

    /// How many nodes the table holds, known or being resolved.
    pub fn entries(&self) -> usize {
        self.table.len()
    }

    /// The hardware address the table holds for `a`, if known.
    pub fn lookup(&self, a: NodeAddr) -> Option<HwAddr> {
        match self.table.get(&a) {
            Some(Entry {
                state: State::Known { hw, .. },
                ..
            }) => Some(*hw),
            _ => None,
        }
    }

    fn mac(&mut self, cx: &mut Cx) -> Option<HwAddr> {
        if self.mac.is_none()
            && let Ok(Reply::Hw(mac)) = cx.control(self.eth, None, Control::GetHwAddr)
        {
            self.mac = Some(mac);
        }
        self.mac
    }

    /// Starts probing the first time AARP is used.
    fn start(&mut self, cx: &mut Cx) {
        if self.probes.is_some() {
            return;
        }
        if self.me.node == 0 {
            match self.mac(cx) {
                Some(mac) => self.me.node = super::ddp::node_from(mac),
                None => return,
            }
        }
        self.probes = Some(0);
        self.probe(cx);
    }

    fn probe(&mut self, cx: &mut Cx) {
        let Some(n) = self.probes.filter(|&n| n < PROBES) else {
            return;
        };
        self.probes = Some(n + 1);
        cx.count("probes");
        self.send_own(Function::Probe, BROADCAST, HwAddr::ZERO, self.me, cx);
        cx.set_timer(cx.now() + INTERVAL, TIMER_PROBE);
    }

    fn probe_timer(&mut self, cx: &mut Cx) {
        if self.probes == Some(PROBES) {
            // The tenth probe went unanswered: the address is ours.
            cx.count("address-confirmed");
            self.probes = Some(PROBES);
            return;
        }
        self.probe(cx);
    }

    /// Another node uses our tentative address: try another, chosen from
    /// our Ethernet address and the conflicts so far, so that two nodes
    /// that collided do not collide again in step.
    fn conflict(&mut self, cx: &mut Cx) {
        cx.count("probe-conflicts");
        self.conflicts += 1;
        let salt = self
            .mac
            .map_or(0, |m| u32::from(m.0[5]) * 37 + u32::from(m.0[4]));
        let next = u32::from(self.me.node) + 1 + (salt + self.conflicts * 101) % 252;
        self.me.node = (1 + (next - 1) % 253) as u8;
        self.probes = Some(0);
        // The probe timer still runs and sends the new address's probes.
    }

    /// An Ethernet session to `hw` carrying `number` (AARP's own when `None`).
    fn link(
        &mut self,
        hw: HwAddr,
        number: Option<u32>,
        cx: &mut Cx,
    ) -> Result<SessionRef, UpiError> {
        if let Some(s) = self.links.get(&(hw, number)) {
            return Ok(*s);
        }
        if self.links.len() >= LINK_LIMIT {
            for (_, s) in self.links.drain() {
                cx.close(s);
            }
        }
        let parts = Participants::remote([Addr::Hw(hw)]);
        let s = match number {
            None => cx.open(self.eth, parts, Qos::default())?,
            Some(n) => cx.open_numbered(self.eth, n, parts, Qos::default())?,
        };
        self.links.insert((hw, number), s);
        Ok(s)
    }

    fn send_own(&mut self, f: Function, to: HwAddr, dst_hw: HwAddr, dst: NodeAddr, cx: &mut Cx) {
        let Some(mac) = self.mac(cx) else {
            cx.count_drop(DropReason::Other("no-hw-address"));
            return;
        };
        let packet = Repr {
            function: f,
            src_hw: mac,
            src: self.me,
            dst_hw,
            dst,
        };
        match self.link(to, None, cx) {
            Ok(s) => cx.push(s, Message::from_slice(&packet.to_bytes())),
            Err(e) => cx.count_drop(e.into()),
        }
    }

    /// Replaces `a`'s entry; what it held is dropped and counted.
    fn put(&mut self, a: NodeAddr, entry: Entry, cx: &mut Cx) {
        if !self.table.contains_key(&a) && self.table.len() >= self.max_entries {
            cx.count_drop(DropReason::Other("table-full"));
            return;
        }
        if let Some(old) = self.table.insert(a, entry) {
            if let Some(t) = old.timer {
                cx.cancel_timer(t);
            }
            if let State::Pending { held, .. } = old.state {
                for _ in held {
                    cx.count_drop(DropReason::QueueFull);
                }
            }
        }
    }

    /// Records that `a` is at `hw` and sends whatever waited for it.
    fn learn(&mut self, a: NodeAddr, hw: HwAddr, cx: &mut Cx) {
        if a.node == 0 || a.node >= 254 {
            return;
        }
        let held = match self.table.get_mut(&a) {
            Some(Entry {
                state: State::Pending { held, .. },
                ..
            }) => std::mem::take(held),
            _ => VecDeque::new(),
        };
        let expires = cx.now() + self.timeout;
        let timer = Some(cx.set_timer(expires, TIMER_EXPIRE | key(a)));
        self.put(
            a,
            Entry {
                state: State::Known { hw, expires },
                timer,
            },
            cx,
        );
        cx.count("learned");
        for (msg, number) in held {
            match self.link(hw, Some(number), cx) {
                Ok(s) => cx.push(s, msg),
                Err(e) => cx.count_drop(e.into()),
            }
        }
    }

    fn request(&mut self, a: NodeAddr, cx: &mut Cx) {
        cx.count("requests");
        self.send_own(Function::Request, BROADCAST, HwAddr::ZERO, a, cx);
    }

    fn resolve(&mut self, a: NodeAddr, cx: &mut Cx) -> Reply {
        self.start(cx);
        match self.table.get(&a).map(|e| &e.state) {
            Some(State::Known { hw, expires }) if *expires > cx.now() => {
                return Reply::Resolved {
                    hw: *hw,
                    valid_until: *expires,
                };
            }
            Some(State::Pending { .. }) => return Reply::Pending,
            _ => {}
        }
        let timer = Some(cx.set_timer(cx.now() + INTERVAL, TIMER_RETRY | key(a)));
        self.put(
            a,
            Entry {
                state: State::Pending {
                    requests: 1,
                    held: VecDeque::new(),
                },
                timer,
            },
            cx,
        );
        self.request(a, cx);
        Reply::Pending
    }

    fn hold(&mut self, a: NodeAddr, msg: Message, number: u32, cx: &mut Cx) -> Reply {
        if let Reply::Resolved { hw, .. } = self.resolve(a, cx) {
            match self.link(hw, Some(number), cx) {
                Ok(s) => cx.push(s, msg),
                Err(e) => cx.count_drop(e.into()),
            }
            return Reply::Done;
        }
        match self.table.get_mut(&a) {
            Some(Entry {
                state: State::Pending { held, .. },
                ..
            }) if held.len() < self.pending => held.push_back((msg, number)),
            _ => cx.count_drop(DropReason::QueueFull),
        }
        Reply::Pending
    }

    fn retry(&mut self, a: NodeAddr, cx: &mut Cx) {
        let Some(Entry {
            state: State::Pending { requests, held },
            timer,
        }) = self.table.get_mut(&a)
        else {
            return;
        };
        if *requests >= self.retries {
            cx.count_n("unresolved", held.len() as u64);
            for _ in held.drain(..) {
                cx.count_drop(DropReason::Unresolved);
            }
            self.table.remove(&a);
            return;
        }
        *requests += 1;
        *timer = Some(cx.set_timer(cx.now() + INTERVAL, TIMER_RETRY | key(a)));
        self.request(a, cx);
    }

    fn expire(&mut self, a: NodeAddr, cx: &mut Cx) {
        if let Some(Entry {
            state: State::Known { expires, .. },
            ..
        }) = self.table.get(&a)
            && *expires <= cx.now()
        {
            self.table.remove(&a);
            cx.count("aged-out");
        }
    }

    /// Inside AppleTalk's reception rules for a checked packet.
    fn receive(&mut self, p: Repr, cx: &mut Cx) -> Up {
        self.start(cx);
        let mine = self.mac(cx);
        if Some(p.src_hw) == mine {
            // Our own broadcast, looped back by the link.
            return Up::Drop(DropReason::Other("own-packet"));
        }
        let confirmed = self.probes == Some(PROBES);
        if p.src == self.me && !confirmed {
            // Someone already has the address we are probing for.
            self.conflict(cx);
            return Up::Consumed;
        }
        match p.function {
            Function::Response if p.dst == self.me && !confirmed => {
                // An answer to our probe: the address is taken.
                self.conflict(cx);
                Up::Consumed
            }
            Function::Response => {
                if Some(p.dst_hw) != mine && !self.table.contains_key(&p.src) {
                    return Up::Drop(DropReason::NotForUs);
                }
                self.learn(p.src, p.src_hw, cx);
                Up::Consumed
            }
            Function::Request | Function::Probe => {
                if p.function == Function::Request && p.src.node != 0 {
                    // The requester's address is in use: glean it.
                    self.learn(p.src, p.src_hw, cx);
                }
                if p.dst != self.me {
                    return if p.function == Function::Request {
                        Up::Consumed
                    } else {
                        Up::Drop(DropReason::NotForUs)
                    };
                }
                if !confirmed {
                    return Up::Consumed;
                }
                cx.count("responses");
                self.send_own(Function::Response, p.src_hw, p.src_hw, p.src, cx);
                Up::Consumed
            }
        }
    }
}

fn drop_reason(e: wire::Error) -> DropReason {
    match e {
        wire::Error::Truncated => DropReason::Truncated,
        wire::Error::NotEthertalk => DropReason::Other("not-ethertalk"),
        wire::Error::BadFunction => DropReason::Other("bad-function"),
        wire::Error::Malformed => DropReason::Malformed,
    }
}

impl Protocol for Aarp {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        match Repr::parse(hdr) {
            Ok(_) => Demux::To {
                target: Target::Protocol,
                hdr_len: PACKET_LEN,
                next: Next::Here,
            },
            Err(wire::Error::Truncated) => Demux::Short(PACKET_LEN),
            Err(e) => Demux::Drop(drop_reason(e)),
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, _meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(bytes) = msg.pullup(PACKET_LEN) else {
            return Up::Drop(DropReason::Truncated);
        };
        match Repr::parse(bytes) {
            Ok(p) => self.receive(p, cx),
            Err(e) => Up::Drop(drop_reason(e)),
        }
    }

    fn push(&mut self, _sess: SessionId, _msg: Message, cx: &mut Cx) {
        // AARP has no sessions to send on: DDP uses Hold.
        cx.count_drop(DropReason::NoSession);
    }

    fn open(&mut self, _req: Open, _cx: &mut Cx) -> Result<SessionId, UpiError> {
        Err(UpiError::Unsupported(
            "open on aarp (DDP uses Resolve and Hold)",
        ))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn control(
        &mut self,
        _sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        let Control::Private(op) = op else {
            return Err(UpiError::Unsupported(op.name()));
        };
        let op = op
            .downcast::<AarpOp>()
            .map_err(|_| UpiError::Unsupported("aarp: not an AarpOp"))?;
        Ok(match *op {
            AarpOp::Resolve(a) => self.resolve(a, cx),
            AarpOp::Hold { to, msg, number } => self.hold(to, msg, number, cx),
            AarpOp::Address => {
                self.start(cx);
                Reply::Private(Box::new(self.address()))
            }
        })
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let a = of_key(token & 0xff_ffff);
        match token & !0xffff_ffff {
            TIMER_PROBE => self.probe_timer(cx),
            TIMER_RETRY => self.retry(a, cx),
            TIMER_EXPIRE => self.expire(a, cx),
            _ => cx.count("unknown-timer"),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
