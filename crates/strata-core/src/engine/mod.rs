//! The engine: one protocol graph, its sessions' work, its timers and its link
//! queues, run to completion on one thread.
//!
//! The engine is sans-I/O. A driver or the simulator hands it received frames with
//! [`Engine::receive`], calls [`Engine::run`] with the current time, and takes frames
//! to send with [`Engine::poll_transmit`]; [`Engine::next_deadline`] says when to
//! call again. Everything a protocol or application emits is queued and run in
//! order: no protocol calls another's data path, so there is no re-entrancy and
//! no recursion however tall the stack.

mod inbound;
mod paths;
mod queues;
mod timers;

use std::collections::VecDeque;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::app::{App, AppEvent};
use crate::arch::Arch;
use crate::control::{Control, Reply};
use crate::counters::{Counters, DropReason};
use crate::cx::{AppCx, Cx};
use crate::error::UpiError;
use crate::graph::{Built, LinkNode, Node};
use crate::ids::{AppId, LinkId, ProtoId, SessionId, SessionRef};
use crate::message::Message;
use crate::meta::PacketMeta;
use crate::time::Instant;
use crate::upi::Protocol;

pub use inbound::CONSUMED;
pub use paths::Path;
pub(crate) use paths::Paths;
pub(crate) use queues::{Early, RxFrame, UrgencyQueue};
pub(crate) use timers::{Owner, Timers};

/// The engine event counted for every delivery to an application.
pub const DELIVERED: &str = "delivered";

/// Settings for a new engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The architecture; `None` takes the graph config's, or LLM.
    pub arch: Option<Arch>,
    /// Seed of the engine's random number generator (deterministic simulations).
    pub seed: u64,
    /// Most received frames waiting for processing; more are dropped and counted.
    pub rx_limit: usize,
    /// Most frames waiting for each link; more are dropped and counted.
    pub tx_limit: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            arch: None,
            seed: 0x5742_4154,
            rx_limit: 4096,
            tx_limit: 4096,
        }
    }
}

/// Frame counts of one link, as the engine sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames received from the driver.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames refused because the receive queue was full.
    pub rx_dropped: u64,
    /// Frames handed to the driver.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Frames refused because the link's send queue was full.
    pub tx_dropped: u64,
}

pub(crate) struct LinkState {
    pub node: LinkNode,
    pub txq: UrgencyQueue<Message>,
    pub stats: LinkStats,
    /// The largest frame payload the link's driver cuts into MTU-sized
    /// frames (segmentation offload), 0 when it does not.
    pub segmentation: usize,
}

/// Queued work, run in order by the engine.
pub(crate) enum Work {
    Push {
        to: SessionRef,
        msg: Message,
    },
    /// Boxed: deliveries a protocol makes itself (TCP's stream data, say) are
    /// rarer than pushes, and an inline `PacketMeta` would make every queued
    /// push as large as a delivery.
    Deliver(Box<Delivery>),
    Event {
        app: AppId,
        event: AppEvent,
    },
}

/// A delivery a protocol queued with `Cx::deliver`.
pub(crate) struct Delivery {
    pub app: AppId,
    pub session: Option<SessionRef>,
    pub msg: Message,
    pub meta: PacketMeta,
}

/// Everything of the engine except the protocol and application objects, so that
/// a protocol being called can be handed the rest mutably.
pub(crate) struct Core {
    pub now: Instant,
    pub arch: Arch,
    pub nodes: Vec<Node>,
    pub links: Vec<LinkState>,
    pub counters: Vec<Counters>,
    pub stats: Counters,
    pub work: VecDeque<Work>,
    pub rx: UrgencyQueue<RxFrame>,
    pub timers: Timers,
    pub rng: ChaCha8Rng,
    pub paths: Paths,
    /// DAA: the sender's application identifier of the packet being processed or
    /// delivered, so that a session opened in response is addressed to it.
    pub reply_to: u32,
    /// DAA: the urgency of that packet, which a path opened in response keeps.
    pub reply_priority: crate::meta::Priority,
    /// Demux calls made, to show DAA's single demux against LLM's one per layer.
    pub demux_calls: u64,
    /// ILLM and DAA: data-manipulation stages declared by the layers of the packet
    /// being processed, fused before delivery.
    pub stages: Vec<Deferred>,
}

/// A data-manipulation stage a layer declared, waiting to run fused.
pub(crate) struct Deferred {
    pub proto: ProtoId,
    pub stage: crate::ilp::Stage,
    /// How long the data was when the layer saw it.
    pub seen_len: usize,
    /// For a checksum, the message as the layer saw it: the part of its data
    /// upper layers strip as their headers is summed from here before the fused
    /// pass. Other stages must cover exactly the delivered data and keep nothing.
    pub seen: Option<Message>,
}

impl Core {
    /// Runs the deferred stages of the packet being delivered, fused (ILP). Returns
    /// false, having counted the drop against the stage's layer, when a verdict
    /// fails or a stage's data does not line up with the delivered data.
    pub(crate) fn fuse_stages(&mut self, msg: &mut Message) -> bool {
        if self.stages.is_empty() {
            return true;
        }
        let payload = msg.len();
        let mut stages = Vec::with_capacity(self.stages.len());
        let mut owners = Vec::with_capacity(self.stages.len());
        for mut d in self.stages.drain(..) {
            let stripped = d.seen_len.saturating_sub(payload);
            if stripped > 0 {
                // Upper layers' headers lay inside this layer's data. A checksum
                // can still read them from the message as the layer saw it; a stage
                // that changes bytes cannot, since upper layers read them as they
                // were.
                let (crate::ilp::Stage::Checksum(sum), Some(seen)) = (&mut d.stage, &d.seen) else {
                    self.counters[d.proto.index()].drop(DropReason::Other("ilp-range"));
                    return false;
                };
                let mut head = [0u8; 256];
                let mut at = 0;
                while at < stripped {
                    let n = (stripped - at).min(head.len());
                    seen.copy_to_slice(at, &mut head[..n]);
                    sum.add(&head[..n]);
                    at += n;
                }
            }
            owners.push(d.proto);
            stages.push(d.stage);
        }
        self.stats.event("ilp-fused");
        match crate::ilp::run_fused(&mut stages, msg) {
            None => true,
            Some(i) => {
                self.counters[owners[i].index()].drop(DropReason::BadChecksum);
                false
            }
        }
    }
}

pub(crate) enum AppSlot {
    Free,
    Busy,
    Live(Box<dyn App>),
}

/// The protocol and application objects. A slot is empty while its object is
/// being called, so a re-entrant call is refused instead of aliasing.
pub(crate) struct Slots {
    pub protos: Vec<Option<Box<dyn Protocol>>>,
    pub apps: Vec<AppSlot>,
}

/// Calls protocol `id` with a context for it.
pub(crate) fn call_proto<R>(
    core: &mut Core,
    slots: &mut Slots,
    id: ProtoId,
    f: impl FnOnce(&mut dyn Protocol, &mut Cx) -> R,
) -> Result<R, UpiError> {
    call_proto_for(core, slots, id, None, f)
}

/// Calls protocol `id` about one of its sessions: messages it makes while
/// handling the call belong to that session (and, under DAA, to its path).
pub(crate) fn call_proto_for<R>(
    core: &mut Core,
    slots: &mut Slots,
    id: ProtoId,
    current: Option<SessionRef>,
    f: impl FnOnce(&mut dyn Protocol, &mut Cx) -> R,
) -> Result<R, UpiError> {
    let slot = slots
        .protos
        .get_mut(id.index())
        .ok_or_else(|| UpiError::NoSuchObject(id.to_string()))?;
    let mut proto = slot.take().ok_or(UpiError::Busy)?;
    let result = {
        let mut cx = Cx::new(core, slots, id, current);
        f(proto.as_mut(), &mut cx)
    };
    slots.protos[id.index()] = Some(proto);
    Ok(result)
}

/// Calls application `id` with a context for it.
pub(crate) fn call_app<R>(
    core: &mut Core,
    slots: &mut Slots,
    id: AppId,
    f: impl FnOnce(&mut dyn App, &mut AppCx) -> R,
) -> Result<R, UpiError> {
    let slot = slots
        .apps
        .get_mut(id.index())
        .ok_or_else(|| UpiError::NoSuchObject(id.to_string()))?;
    let mut app = match std::mem::replace(slot, AppSlot::Busy) {
        AppSlot::Live(app) => app,
        other => {
            let busy = matches!(other, AppSlot::Busy);
            *slot = other;
            return Err(if busy {
                UpiError::Busy
            } else {
                UpiError::NoSuchObject(id.to_string())
            });
        }
    };
    let result = {
        let mut cx = AppCx::new(core, slots, id);
        f(app.as_mut(), &mut cx)
    };
    slots.apps[id.index()] = AppSlot::Live(app);
    Ok(result)
}

/// One host's protocol graph and everything running on it.
pub struct Engine {
    core: Core,
    slots: Slots,
}

impl Engine {
    /// An engine running the built graph.
    pub fn new(built: Built, config: EngineConfig) -> Result<Engine, UpiError> {
        let arch = config.arch.or(built.arch).unwrap_or_default();
        let links = built
            .links
            .into_iter()
            .map(|node| LinkState {
                node,
                txq: UrgencyQueue::new(config.tx_limit),
                stats: LinkStats::default(),
                segmentation: 0,
            })
            .collect();
        let n = built.nodes.len();
        Ok(Engine {
            core: Core {
                now: Instant::ZERO,
                arch,
                nodes: built.nodes,
                links,
                counters: vec![Counters::default(); n],
                stats: Counters::default(),
                work: VecDeque::new(),
                rx: UrgencyQueue::new(config.rx_limit),
                timers: Timers::default(),
                rng: ChaCha8Rng::seed_from_u64(config.seed),
                paths: Paths::default(),
                reply_to: 0,
                reply_priority: crate::meta::Priority::BEST_EFFORT,
                demux_calls: 0,
                stages: Vec::new(),
            },
            slots: Slots {
                protos: built.protocols.into_iter().map(Some).collect(),
                apps: Vec::new(),
            },
        })
    }

    /// The dispatch architecture.
    pub fn arch(&self) -> Arch {
        self.core.arch
    }

    /// The engine's current time.
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// The protocols of the graph, indexed by `ProtoId`.
    pub fn nodes(&self) -> &[Node] {
        &self.core.nodes
    }

    /// The links of the graph, indexed by `LinkId`.
    pub fn links(&self) -> Vec<&LinkNode> {
        self.core.links.iter().map(|l| &l.node).collect()
    }

    /// The graph drawn as text.
    pub fn graph_text(&self) -> String {
        let links: Vec<LinkNode> = self.core.links.iter().map(|l| l.node.clone()).collect();
        crate::graph::to_text(&self.core.nodes, &links)
    }

    /// The graph in Graphviz dot.
    pub fn graph_dot(&self) -> String {
        let links: Vec<LinkNode> = self.core.links.iter().map(|l| l.node.clone()).collect();
        crate::graph::to_dot(&self.core.nodes, &links)
    }

    /// The protocol called `name`.
    pub fn proto_id(&self, name: &str) -> Option<ProtoId> {
        self.core
            .nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| ProtoId(i as u16))
    }

    /// The link called `name`.
    pub fn link_id(&self, name: &str) -> Option<LinkId> {
        self.core
            .links
            .iter()
            .position(|l| l.node.name == name)
            .map(|i| LinkId(i as u16))
    }

    /// A protocol object, for inspection.
    pub fn protocol<T: 'static>(&self, id: ProtoId) -> Option<&T> {
        self.slots
            .protos
            .get(id.index())?
            .as_ref()?
            .as_any()
            .downcast_ref()
    }

    /// What protocol `id` has counted.
    pub fn counters(&self, id: ProtoId) -> &Counters {
        &self.core.counters[id.index()]
    }

    /// What the engine itself has counted (architecture fallbacks, deliveries to
    /// vanished applications …).
    pub fn engine_counters(&self) -> &Counters {
        &self.core.stats
    }

    /// Says what the driver under `link` can do: cut frames of up to
    /// `bytes` of payload carrying TCP super-segments into MTU-sized frames
    /// (0: it cannot). The runtime tells the engine when it attaches the
    /// driver, before anything is sent; Ethernet answers
    /// `Control::GetSegmentation` from it.
    pub fn set_link_segmentation(&mut self, link: LinkId, bytes: usize) {
        if let Some(l) = self.core.links.get_mut(link.index()) {
            l.segmentation = bytes;
        }
    }

    /// Frame counts of a link.
    pub fn link_stats(&self, link: LinkId) -> &LinkStats {
        &self.core.links[link.index()].stats
    }

    /// Every protocol's counters with its name, lowest protocol first.
    pub fn all_counters(&self) -> impl Iterator<Item = (&str, &Counters)> {
        self.core
            .nodes
            .iter()
            .zip(&self.core.counters)
            .map(|(n, c)| (n.name.as_str(), c))
    }

    /// Adds an application anchor.
    pub fn add_app(&mut self, app: Box<dyn App>) -> AppId {
        self.slots.apps.push(AppSlot::Live(app));
        AppId((self.slots.apps.len() - 1) as u32)
    }

    /// Removes an application; packets still arriving for it are dropped and
    /// counted. Its identifier is never reused.
    pub fn remove_app(&mut self, id: AppId) -> Option<Box<dyn App>> {
        let slot = self.slots.apps.get_mut(id.index())?;
        match std::mem::replace(slot, AppSlot::Free) {
            AppSlot::Live(app) => Some(app),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// An application, for inspection.
    pub fn app<T: 'static>(&self, id: AppId) -> Option<&T> {
        match self.slots.apps.get(id.index())? {
            AppSlot::Live(app) => app.as_any().downcast_ref(),
            _ => None,
        }
    }

    /// An application, for changing it from outside.
    pub fn app_mut<T: 'static>(&mut self, id: AppId) -> Option<&mut T> {
        match self.slots.apps.get_mut(id.index())? {
            AppSlot::Live(app) => app.as_any_mut().downcast_mut(),
            _ => None,
        }
    }

    /// Acts on behalf of application `app` (open, send, close …) from outside the
    /// engine, as its callbacks would from inside.
    pub fn with_app<R>(
        &mut self,
        app: AppId,
        f: impl FnOnce(&mut dyn App, &mut AppCx) -> R,
    ) -> Result<R, UpiError> {
        call_app(&mut self.core, &mut self.slots, app, f)
    }

    /// A control operation on a protocol or session, from outside.
    pub fn control(
        &mut self,
        proto: ProtoId,
        sess: Option<SessionId>,
        op: Control,
    ) -> Result<Reply, UpiError> {
        call_proto(&mut self.core, &mut self.slots, proto, |p, cx| {
            p.control(sess, op, cx)
        })?
    }

    /// Hands the engine a frame received on `link`. It is processed by the next
    /// [`run`](Self::run); when the receive queue is full it is dropped and counted.
    pub fn receive(&mut self, link: LinkId, mut frame: Message) {
        // A path names one engine's path: a message handed over by an in-memory
        // link still carries its sender's.
        frame.set_path(None);
        let Some(state) = self.core.links.get_mut(link.index()) else {
            self.core.stats.drop(DropReason::Other("unknown-link"));
            return;
        };
        state.stats.rx_frames += 1;
        state.stats.rx_bytes += frame.len() as u64;
        let (priority, early) = inbound::classify(&mut self.core, &self.slots, link, &frame);
        let frame = RxFrame {
            link,
            msg: frame,
            received: self.core.now,
            early,
        };
        if self.core.rx.push(priority, frame).is_err() {
            self.core.links[link.index()].stats.rx_dropped += 1;
        }
    }

    /// Advances the clock to `now` (never backwards), fires due timers and runs
    /// all queued work and received frames to completion.
    pub fn run(&mut self, now: Instant) {
        if now > self.core.now {
            self.core.now = now;
        }
        // Timers first (they are due), then queued work before each new frame, so
        // every packet runs to completion; timers set while running for a time
        // already passed fire once the queues are empty.
        loop {
            while let Some((owner, token)) = self.core.timers.pop_due(self.core.now) {
                self.fire(owner, token);
            }
            if self.core.work.is_empty() && self.core.rx.is_empty() {
                break;
            }
            while let Some(work) = self.core.work.pop_front() {
                self.exec(work);
            }
            while self.core.work.is_empty() {
                let Some(frame) = self.core.rx.pop() else {
                    break;
                };
                self.inbound(frame);
            }
        }
    }

    /// True when nothing is queued.
    pub fn is_idle(&self) -> bool {
        self.core.work.is_empty() && self.core.rx.is_empty()
    }

    /// The next frame to send on `link`, most urgent first.
    pub fn poll_transmit(&mut self, link: LinkId) -> Option<Message> {
        let state = self.core.links.get_mut(link.index())?;
        let frame = state.txq.pop()?;
        state.stats.tx_frames += 1;
        state.stats.tx_bytes += frame.len() as u64;
        Some(frame)
    }

    /// How many frames wait for `link`.
    pub fn transmit_backlog(&self, link: LinkId) -> usize {
        self.core.links.get(link.index()).map_or(0, |l| l.txq.len())
    }

    /// When the engine next needs to run (its earliest timer).
    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.core.timers.next_deadline()
    }

    /// A DAA path.
    pub fn path(&self, id: crate::ids::PathId) -> Option<&Path> {
        self.core.paths.get(id)
    }

    /// The DAA path of a session, if it has one.
    pub fn path_of(&self, session: SessionRef) -> Option<crate::ids::PathId> {
        self.core.paths.of_session(session)
    }

    /// How many DAA paths exist.
    pub fn path_count(&self) -> usize {
        self.core.paths.len()
    }

    /// How many demux calls the engine has made: one per layer per packet under
    /// LLM and ILLM, one per packet for DAA packets that follow a path.
    pub fn demux_calls(&self) -> u64 {
        self.core.demux_calls
    }

    /// How many timers are armed.
    pub fn armed_timers(&self) -> usize {
        self.core.timers.len()
    }

    fn fire(&mut self, owner: Owner, token: u64) {
        let result = match owner {
            Owner::Proto(p) => call_proto(&mut self.core, &mut self.slots, p, |proto, cx| {
                proto.on_timer(token, cx)
            }),
            Owner::App(a) => call_app(&mut self.core, &mut self.slots, a, |app, cx| {
                app.timer(token, cx)
            }),
        };
        if result.is_err() {
            self.core.stats.event("timer-for-vanished-owner");
        }
    }

    fn exec(&mut self, work: Work) {
        match work {
            Work::Push { to, msg } => {
                let Some(c) = self.core.counters.get_mut(to.proto.index()) else {
                    self.core.stats.drop(DropReason::NoSession);
                    return;
                };
                c.packets_out += 1;
                c.bytes_out += msg.len() as u64;
                let pushed = call_proto_for(
                    &mut self.core,
                    &mut self.slots,
                    to.proto,
                    Some(to),
                    |p, cx| p.push(to.sess, msg, cx),
                );
                if pushed.is_err() {
                    self.core.stats.drop(DropReason::NoSession);
                }
            }
            Work::Deliver(d) => {
                let Delivery {
                    app,
                    session,
                    msg,
                    meta,
                } = *d;
                self.deliver(app, session, msg, &meta);
            }
            Work::Event { app, event } => {
                if let AppEvent::Closed { session, .. } = &event {
                    crate::cx::forget_path(&mut self.core, &mut self.slots, *session);
                }
                if call_app(&mut self.core, &mut self.slots, app, |a, cx| {
                    a.event(event, cx)
                })
                .is_err()
                {
                    self.core.stats.event("event-for-vanished-app");
                }
            }
        }
    }

    fn deliver(
        &mut self,
        app: AppId,
        session: Option<SessionRef>,
        mut msg: Message,
        meta: &PacketMeta,
    ) {
        if !self.core.fuse_stages(&mut msg) {
            return;
        }
        self.core.reply_to = meta.peer_app_id;
        let delivered = call_app(&mut self.core, &mut self.slots, app, |a, cx| {
            a.receive(session, msg, meta, cx)
        });
        self.core.reply_to = 0;
        match delivered {
            Ok(()) => self.core.stats.event(DELIVERED),
            Err(_) => self.core.stats.drop(DropReason::Other("no-app")),
        }
    }
}
