//! A deterministic simulator of N hosts in virtual time.
//!
//! A [`SimNet`] owns the hosts' engines, the wires between their links (each
//! direction an [`Emulator`]) and learning switches for segments of three or more
//! hosts. It runs everything in one thread with no wall clock: the next event is
//! the earliest frame delivery or engine timer, time jumps to it, and everything due
//! then runs to completion. Emulator seeds derive from the net's seed, so one seed
//! replays one run exactly — a failing seed is a regression test.
//!
//! ```no_run
//! # use strata_link::{SimNet, LinkParams};
//! # fn engines() -> (strata_core::Engine, strata_core::Engine) { panic!("built elsewhere") }
//! let (a, b) = engines();
//! let mut net = SimNet::new(7);
//! let (ha, hb) = (net.add_host("a", a), net.add_host("b", b));
//! let slow = LinkParams::delay(std::time::Duration::from_millis(50));
//! net.connect((ha, "net0"), (hb, "net0"), slow.clone(), slow)?;
//! net.run_for(std::time::Duration::from_secs(1));
//! # Ok::<(), strata_link::LinkError>(())
//! ```

mod run;
mod switch;
mod wire;

use std::fmt;
use std::path::Path;

use strata_core::{Engine, Instant, LinkId};

use crate::emulator::{Emulator, EmulatorStats, LinkParams};
use crate::error::LinkError;
use crate::offload::{self, Coalescer};
use crate::pcap::PcapWriter;

pub use switch::{SwitchStats, TABLE_LIMIT};
pub use wire::{Direction, WireId};

use switch::Switch;
use wire::{End, Wire};

/// A host of a [`SimNet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostId(usize);

impl HostId {
    /// The host's position among the net's hosts, in the order they were added.
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host#{}", self.0)
    }
}

/// A switch of a [`SimNet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwitchId(usize);

impl fmt::Display for SwitchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "switch#{}", self.0)
    }
}

/// One link of a host: what it is wired to and who records it.
#[derive(Default)]
struct HostLink {
    /// The wire and which of its ends this is.
    wire: Option<(WireId, usize)>,
    capture: Option<PcapWriter>,
    /// Receive offload: runs of TCP segments merged before the engine sees them.
    coalescer: Option<Coalescer>,
}

struct Host {
    name: String,
    engine: Engine,
    /// Indexed by the engine's `LinkId`.
    links: Vec<HostLink>,
}

struct SwitchNode {
    switch: Switch,
    /// The wire of each port and which of its ends is the switch's.
    ports: Vec<(WireId, usize)>,
}

/// N hosts, their wires and switches, in virtual time.
pub struct SimNet {
    seed: u64,
    now: Instant,
    hosts: Vec<Host>,
    wires: Vec<Wire>,
    switches: Vec<SwitchNode>,
    /// The first capture that failed; it is reported by `flush_captures`.
    capture_error: Option<LinkError>,
}

/// SplitMix64: spreads (seed, stream) into independent-looking seeds, so wire 0
/// and wire 1 of seed 7 share nothing.
fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SimNet {
    /// An empty net at virtual time zero whose randomness all follows from `seed`.
    pub fn new(seed: u64) -> Self {
        SimNet {
            seed,
            now: Instant::ZERO,
            hosts: Vec::new(),
            wires: Vec::new(),
            switches: Vec::new(),
            capture_error: None,
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Adds a host running `engine`. Seed its `EngineConfig` from the net's seed
    /// too if its protocols draw random numbers, or replays will differ.
    pub fn add_host(&mut self, name: &str, engine: Engine) -> HostId {
        let links = engine.links().iter().map(|_| HostLink::default()).collect();
        self.hosts.push(Host {
            name: name.into(),
            engine,
            links,
        });
        HostId(self.hosts.len() - 1)
    }

    /// Adds a learning switch with no ports yet; [`attach`](Self::attach) hosts
    /// to it.
    pub fn add_switch(&mut self, name: &str) -> SwitchId {
        self.switches.push(SwitchNode {
            switch: Switch::new(name),
            ports: Vec::new(),
        });
        SwitchId(self.switches.len() - 1)
    }

    /// The hosts, in the order they were added.
    pub fn hosts(&self) -> impl Iterator<Item = HostId> + use<> {
        (0..self.hosts.len()).map(HostId)
    }

    /// A host's engine, to open sessions, send and inspect.
    ///
    /// # Panics
    /// If `h` belongs to another net.
    pub fn engine(&mut self, h: HostId) -> &mut Engine {
        &mut self.hosts[h.0].engine
    }

    /// Gives host `h`'s link `link` TCP offloads, as a packet link with
    /// `offload` or the in-memory link with offload has: its TCP sends
    /// super-segments, which the simulated link cuts into MTU-sized frames as
    /// the kernel would, and runs of TCP segments it receives are merged
    /// before its engine sees them ([`Coalescer`]). Captures show the frames
    /// the wire carries. Set it before the host's connections are
    /// established. False when there is no such link.
    pub fn offload(&mut self, h: HostId, link: &str) -> bool {
        let host = &mut self.hosts[h.0];
        let Some(id) = host.engine.link_id(link) else {
            return false;
        };
        host.engine
            .set_link_segmentation(id, offload::SEGMENTED_MAX);
        host.links[id.index()].coalescer = Some(Coalescer::new());
        true
    }

    /// Segments host `h`'s receive offload has merged into the one before,
    /// over all its links.
    pub fn merged(&self, h: HostId) -> u64 {
        self.hosts[h.0]
            .links
            .iter()
            .filter_map(|l| l.coalescer.as_ref())
            .map(Coalescer::merged)
            .sum()
    }

    /// A host's name.
    pub fn host_name(&self, h: HostId) -> &str {
        &self.hosts[h.0].name
    }

    /// Joins host link `a` to host link `b` with a full-duplex wire; each
    /// direction is its own emulator, seeded from the net's seed.
    pub fn connect(
        &mut self,
        a: (HostId, &str),
        b: (HostId, &str),
        a_to_b: LinkParams,
        b_to_a: LinkParams,
    ) -> Result<WireId, LinkError> {
        let la = self.free_link(a)?;
        let lb = self.free_link(b)?;
        if (a.0, la) == (b.0, lb) {
            return Err(self.in_use(a.0, la));
        }
        let w = self.add_wire([End::Host(a.0, la), End::Host(b.0, lb)], [a_to_b, b_to_a]);
        self.hosts[a.0.0].links[la.index()].wire = Some((w, 0));
        self.hosts[b.0.0].links[lb.index()].wire = Some((w, 1));
        Ok(w)
    }

    /// Joins two host links as their graph configs say: both must be of kind
    /// "sim", and the options of either (the same both ways) set both directions.
    /// Ends that both give options must agree.
    pub fn connect_as_configured(
        &mut self,
        a: (HostId, &str),
        b: (HostId, &str),
    ) -> Result<WireId, LinkError> {
        let (pa, given_a) = self.configured(a)?;
        let (pb, given_b) = self.configured(b)?;
        let params = match (given_a, given_b) {
            (true, true) if pa != pb => {
                return Err(LinkError::Disagreement {
                    a: format!("{}:{}", self.hosts[a.0.0].name, a.1),
                    a_params: pa.to_string(),
                    b: format!("{}:{}", self.hosts[b.0.0].name, b.1),
                    b_params: pb.to_string(),
                });
            }
            (_, true) => pb,
            _ => pa,
        };
        self.connect(a, b, params.clone(), params)
    }

    /// Plugs a host link into a new port of `switch`.
    pub fn attach(
        &mut self,
        host: (HostId, &str),
        switch: SwitchId,
        to_switch: LinkParams,
        from_switch: LinkParams,
    ) -> Result<WireId, LinkError> {
        let link = self.free_link(host)?;
        let port = self.switches[switch.0].ports.len();
        let w = self.add_wire(
            [End::Host(host.0, link), End::Switch(switch, port)],
            [to_switch, from_switch],
        );
        self.hosts[host.0.0].links[link.index()].wire = Some((w, 0));
        self.switches[switch.0].ports.push((w, 1));
        Ok(w)
    }

    /// Records every frame `host` sends or receives on `link` to a pcap file at
    /// `path`, stamped with virtual time, as the host sees them: a sent frame when
    /// the host hands it to the wire (before the wire loses or corrupts it), a
    /// received one when it arrives. Files are flushed whenever a run returns.
    pub fn capture(
        &mut self,
        host: HostId,
        link: &str,
        path: impl AsRef<Path>,
    ) -> Result<(), LinkError> {
        let id = self.link(host, link)?;
        let writer = PcapWriter::create(path).map_err(|source| LinkError::Capture {
            host: self.hosts[host.0].name.clone(),
            link: link.into(),
            source,
        })?;
        self.hosts[host.0].links[id.index()].capture = Some(writer);
        Ok(())
    }

    /// Flushes every capture and reports the first one that failed since the
    /// last call (a failed capture stops; the simulation goes on).
    pub fn flush_captures(&mut self) -> Result<(), LinkError> {
        self.flush_quietly();
        self.capture_error.take().map_or(Ok(()), Err)
    }

    /// What one direction of a wire has done to its frames.
    pub fn wire_stats(&self, w: WireId, direction: Direction) -> &EmulatorStats {
        self.wires[w.0].emulators[direction.index()].stats()
    }

    /// What a switch has done.
    pub fn switch_stats(&self, s: SwitchId) -> &SwitchStats {
        &self.switches[s.0].switch.stats
    }

    /// A switch's name.
    pub fn switch_name(&self, s: SwitchId) -> &str {
        &self.switches[s.0].switch.name
    }

    fn add_wire(&mut self, ends: [End; 2], params: [LinkParams; 2]) -> WireId {
        let w = self.wires.len() as u64;
        let [p0, p1] = params;
        self.wires.push(Wire {
            ends,
            emulators: [
                Emulator::new(p0, derive_seed(self.seed, 2 * w)),
                Emulator::new(p1, derive_seed(self.seed, 2 * w + 1)),
            ],
        });
        WireId(self.wires.len() - 1)
    }

    fn link(&self, h: HostId, link: &str) -> Result<LinkId, LinkError> {
        let host = &self.hosts[h.0];
        host.engine
            .link_id(link)
            .ok_or_else(|| LinkError::NoSuchLink {
                host: host.name.clone(),
                link: link.into(),
                known: host
                    .engine
                    .links()
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    fn in_use(&self, h: HostId, link: LinkId) -> LinkError {
        let host = &self.hosts[h.0];
        LinkError::LinkInUse {
            host: host.name.clone(),
            link: host.engine.links()[link.index()].name.clone(),
        }
    }

    fn free_link(&self, (h, link): (HostId, &str)) -> Result<LinkId, LinkError> {
        let id = self.link(h, link)?;
        if self.hosts[h.0].links[id.index()].wire.is_some() {
            return Err(self.in_use(h, id));
        }
        Ok(id)
    }

    /// A "sim" link's emulator settings, and whether its config gave any.
    fn configured(&self, (h, link): (HostId, &str)) -> Result<(LinkParams, bool), LinkError> {
        let id = self.link(h, link)?;
        let host = &self.hosts[h.0];
        let node = host.engine.links()[id.index()];
        if node.kind != crate::SIM {
            return Err(LinkError::WrongKind {
                host: host.name.clone(),
                link: link.into(),
                kind: node.kind.clone(),
                wanted: crate::SIM,
            });
        }
        let given = node.options.keys().next().is_some();
        Ok((LinkParams::from_options(&node.options)?, given))
    }

    fn flush_quietly(&mut self) {
        for h in 0..self.hosts.len() {
            for l in 0..self.hosts[h].links.len() {
                let flushed = match &mut self.hosts[h].links[l].capture {
                    Some(c) => c.flush(),
                    None => Ok(()),
                };
                if let Err(e) = flushed {
                    self.capture_failed(HostId(h), LinkId(l as u16), e);
                }
            }
        }
    }

    /// Stops a failed capture and keeps the first error for `flush_captures`.
    fn capture_failed(&mut self, h: HostId, link: LinkId, source: crate::pcap::CaptureError) {
        let host = &mut self.hosts[h.0];
        host.links[link.index()].capture = None;
        let link = host.engine.links()[link.index()].name.clone();
        tracing::warn!(host = %host.name, %link, error = %source, "capture stopped");
        self.capture_error.get_or_insert(LinkError::Capture {
            host: host.name.clone(),
            link,
            source,
        });
    }
}
