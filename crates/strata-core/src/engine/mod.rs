//! The engine: one protocol graph, its sessions' work, its timers and its link
//! queues, run to completion on one thread.
//!
//! The engine is sans-I/O. A driver or the simulator hands it received frames with
//! [`Engine::receive`], calls [`Engine::run`] with the current time, and takes frames
//! to send with [`Engine::poll_transmit`]; [`Engine::next_deadline`] says when to
//! call again.
//!
//! `core.rs` holds the state and the data path every call into a protocol or
//! an application goes through: a push or a delivery runs at once when nothing
//! waits before it and its target is not on the call stack, and is queued in
//! order otherwise, so no object is entered twice and the order work was
//! emitted in is kept. `inbound.rs` is the three architectures; `paths.rs`
//! DAA's paths; `queues.rs` and `timers.rs` the bounded queues and the timer
//! heap. This file is the engine's public face and its run loop.

pub(crate) mod core;
mod inbound;
pub(crate) mod paths;
mod queues;
#[cfg(test)]
pub(crate) mod tests;
pub(crate) mod timers;

use std::collections::VecDeque;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use self::core::{Core, LinkState, Slots, call_app, call_proto, exec};
use crate::app::App;
use crate::arch::Arch;
use crate::control::{Control, Reply};
use crate::counters::{Counters, DropReason};
use crate::cx::AppCx;
use crate::error::UpiError;
use crate::graph::{Built, LinkNode, Node};
use crate::ids::{AppId, LinkId, ProtoId, SessionId, SessionRef};
use crate::message::Message;
use crate::time::Instant;

pub use self::core::LinkStats;
pub use paths::Path;
pub(crate) use paths::Paths;
pub(crate) use queues::{Arrival, RxFrame, UrgencyQueue};
pub(crate) use timers::{Owner, Timers};

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
        let strip_only = built.protocols.iter().map(|p| p.pop_is_strip()).collect();
        Ok(Engine {
            core: Core {
                now: Instant::ZERO,
                arch,
                nodes: built.nodes,
                strip_only,
                links,
                counters: vec![Counters::default(); n],
                stats: Counters::default(),
                work: VecDeque::new(),
                rx: UrgencyQueue::new(config.rx_limit),
                timers: Timers::default(),
                idle: Vec::new(),
                rng: ChaCha8Rng::seed_from_u64(config.seed),
                paths: Paths::default(),
                demux_calls: 0,
                stages: Vec::new(),
                arrivals: Vec::new(),
            },
            slots: Slots {
                protos: built.protocols.into_iter().map(Some).collect(),
                apps: Vec::new(),
                apps_removed: Vec::new(),
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
        self.slots.apps.push(Some(app));
        self.slots.apps_removed.push(false);
        AppId((self.slots.apps.len() - 1) as u32)
    }

    /// Removes an application; packets still arriving for it are dropped and
    /// counted. Its identifier is never reused.
    pub fn remove_app(&mut self, id: AppId) -> Option<Box<dyn App>> {
        let app = self.slots.apps.get_mut(id.index())?.take()?;
        self.slots.apps_removed[id.index()] = true;
        Some(app)
    }

    /// An application, for inspection.
    pub fn app<T: 'static>(&self, id: AppId) -> Option<&T> {
        self.slots
            .apps
            .get(id.index())?
            .as_ref()?
            .as_any()
            .downcast_ref()
    }

    /// An application, for changing it from outside.
    pub fn app_mut<T: 'static>(&mut self, id: AppId) -> Option<&mut T> {
        self.slots
            .apps
            .get_mut(id.index())?
            .as_mut()?
            .as_any_mut()
            .downcast_mut()
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
        let mut arrival = self.core.arrival(link);
        let priority = inbound::classify(&mut self.core, &self.slots, &frame, &mut arrival);
        let frame = RxFrame {
            msg: frame,
            arrival,
        };
        if let Err(refused) = self.core.rx.push(priority, frame) {
            self.core.links[link.index()].stats.rx_dropped += 1;
            self.core.arrivals.push(refused.arrival);
        }
    }

    /// Advances the clock to `now` (never backwards), fires due timers and runs
    /// all queued work and received frames to completion.
    #[inline]
    pub fn run(&mut self, now: Instant) {
        if now > self.core.now {
            self.core.now = now;
        }
        // A driver runs the engine after every batch of frames, and often
        // when it has nothing to do: that case costs a few checks, not a
        // call of the loop.
        if self.core.work.is_empty()
            && self.core.rx.is_empty()
            && self.core.idle.is_empty()
            && self.core.timers.none_due(self.core.now)
        {
            return;
        }
        self.run_queued();
    }

    /// The loop of [`run`](Self::run).
    fn run_queued(&mut self) {
        // The idle calls asked for before this run: the engine has been idle
        // since (its driver took the frames that run made).
        self.run_idle_calls();
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
                exec(&mut self.core, &mut self.slots, work);
            }
            while self.core.work.is_empty() {
                let Some(frame) = self.core.rx.pop() else {
                    break;
                };
                self.inbound(frame);
            }
        }
    }

    /// Calls [`Protocol::on_idle`](crate::Protocol) of the protocols that
    /// asked, in order; calls asked for meanwhile wait for the next run.
    fn run_idle_calls(&mut self) {
        let asked = std::mem::take(&mut self.core.idle);
        for &p in &asked {
            if call_proto(&mut self.core, &mut self.slots, p, |proto, cx| {
                proto.on_idle(cx)
            })
            .is_err()
            {
                self.core.stats.event("idle-for-vanished-owner");
            }
        }
        // The list goes back, emptied, for its buffer (unless calls were
        // asked for meanwhile: they keep theirs).
        if self.core.idle.is_empty() {
            self.core.idle = asked;
            self.core.idle.clear();
        }
    }

    /// True when nothing is queued (idle calls included).
    pub fn is_idle(&self) -> bool {
        self.core.work.is_empty() && self.core.rx.is_empty() && self.core.idle.is_empty()
    }

    /// The next frame to send on `link`, most urgent first.
    pub fn poll_transmit(&mut self, link: LinkId) -> Option<Message> {
        let state = self.core.links.get_mut(link.index())?;
        let frame = state.txq.pop()?;
        state.stats.tx_frames += 1;
        state.stats.tx_bytes += frame.len() as u64;
        Some(frame)
    }

    /// Moves every frame waiting for `link` to engine `to` as received on
    /// its link `into`, most urgent first; returns how many moved. What
    /// [`poll_transmit`](Self::poll_transmit) and [`receive`](Self::receive)
    /// do frame by frame, for a link with nothing in between (the in-memory
    /// pair), without handing each frame out and back in.
    pub fn hand_over(&mut self, link: LinkId, to: &mut Engine, into: LinkId) -> usize {
        let Some(state) = self.core.links.get_mut(link.index()) else {
            return 0;
        };
        let mut n = 0;
        while let Some(frame) = state.txq.pop() {
            state.stats.tx_frames += 1;
            state.stats.tx_bytes += frame.len() as u64;
            to.receive(into, frame);
            n += 1;
        }
        n
    }

    /// How many frames wait for `link`.
    pub fn transmit_backlog(&self, link: LinkId) -> usize {
        self.core.links.get(link.index()).map_or(0, |l| l.txq.len())
    }

    /// When the engine next needs to run (its earliest timer; now, when a
    /// protocol waits for its idle call).
    pub fn next_deadline(&mut self) -> Option<Instant> {
        if !self.core.idle.is_empty() {
            return Some(self.core.now);
        }
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
}
