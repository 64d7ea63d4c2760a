//! The simulator's event loop.
//!
//! At each instant: run every engine that has work, a due timer or a stale clock;
//! move what they transmit into their wires' emulators; deliver what the emulators
//! have due — to engines, or through switches into more wires; repeat until a round
//! moves nothing. Then jump to the next instant anything is due: the earliest
//! emulator delivery or engine timer. Hosts, links and wires are always visited in
//! the order they were added, so a run is a function of the seed and the calls
//! made.
//!
//! Zero-delay wires between protocols that answer every frame at once would keep
//! virtual time from moving; give such wires a delay.

use std::time::Duration;

use strata_core::{Engine, Instant, LinkId, Message};

use super::switch::Forward;
use super::wire::{Direction, End};
use super::{HostId, SimNet};
use crate::offload;

fn needs_run(engine: &mut Engine, now: Instant) -> bool {
    engine.now() < now || !engine.is_idle() || engine.next_deadline().is_some_and(|d| d <= now)
}

fn stamp(now: Instant) -> Duration {
    Duration::from_nanos(now.as_nanos())
}

impl SimNet {
    /// Runs until virtual time `t` (everything due at `t` included). Never goes
    /// backwards.
    pub fn run_until(&mut self, t: Instant) {
        self.advance(t, &mut |_| false);
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Runs until `condition` holds or `limit` of virtual time has passed, and
    /// says whether it held. The condition is checked whenever the net is quiet
    /// at an instant.
    pub fn run_until_condition(
        &mut self,
        mut condition: impl FnMut(&mut SimNet) -> bool,
        limit: Duration,
    ) -> bool {
        self.advance(self.now + limit, &mut condition)
    }

    fn advance(&mut self, until: Instant, condition: &mut dyn FnMut(&mut SimNet) -> bool) -> bool {
        let held = loop {
            self.settle();
            if condition(self) {
                break true;
            }
            match self.next_event() {
                Some(t) if t <= until => self.now = self.now.max(t),
                _ => {
                    if until > self.now {
                        self.now = until;
                        self.settle();
                    }
                    break condition(self);
                }
            }
        };
        self.flush_quietly();
        held
    }

    /// The earliest time anything is due: a frame's arrival or a timer.
    pub fn next_event(&mut self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for wire in &self.wires {
            for e in &wire.emulators {
                consider(e.next_delivery());
            }
        }
        for host in &mut self.hosts {
            consider(host.engine.next_deadline());
        }
        next
    }

    /// Processes everything due now until a round moves no frame.
    fn settle(&mut self) {
        loop {
            let now = self.now;
            for host in &mut self.hosts {
                if needs_run(&mut host.engine, now) {
                    host.engine.run(now);
                }
            }
            if self.transmit() + self.deliver() == 0 {
                return;
            }
        }
    }

    /// Moves every frame the engines have sent into the wires. Returns how many.
    fn transmit(&mut self) -> usize {
        let now = self.now;
        let mut moved = 0;
        for h in 0..self.hosts.len() {
            for l in 0..self.hosts[h].links.len() {
                let Some((w, side)) = self.hosts[h].links[l].wire else {
                    continue;
                };
                let link = LinkId(l as u16);
                while let Some(frame) = self.hosts[h].engine.poll_transmit(link) {
                    moved += 1;
                    // A super-segment is cut here, as a kernel's GSO would
                    // cut it: the wire carries MTU-sized frames.
                    // One that cannot be cut is dropped, as a NIC would.
                    for frame in offload::segment(frame).into_iter().flatten() {
                        self.record(HostId(h), link, &frame);
                        let fate = self.wires[w.0].emulators[side].offer(now, frame);
                        tracing::trace!(%w, direction = ?Direction::from_side(side), ?fate, "frame offered");
                    }
                }
            }
        }
        moved
    }

    /// Hands every frame due now to where its wire leads. Returns how many.
    fn deliver(&mut self) -> usize {
        let now = self.now;
        let mut moved = 0;
        for w in 0..self.wires.len() {
            for side in 0..2 {
                let to = self.wires[w].ends[1 - side];
                while let Some(frame) = self.wires[w].emulators[side].poll(now) {
                    moved += 1;
                    match to {
                        End::Host(h, link) => {
                            self.record(h, link, &frame);
                            let host = &mut self.hosts[h.0];
                            let engine = &mut host.engine;
                            match &mut host.links[link.index()].coalescer {
                                Some(c) => c.push(frame, &mut |f| engine.receive(link, f)),
                                None => engine.receive(link, frame),
                            }
                        }
                        End::Switch(s, port) => self.relay(s.0, port, frame),
                    }
                }
            }
        }
        // What arrived together is merged; nothing waits for later frames.
        for host in &mut self.hosts {
            let engine = &mut host.engine;
            for (i, l) in host.links.iter_mut().enumerate() {
                if let Some(c) = &mut l.coalescer {
                    c.flush(&mut |f| engine.receive(LinkId(i as u16), f));
                }
            }
        }
        moved
    }

    /// Sends a frame that reached a switch on to its ports' wires.
    fn relay(&mut self, s: usize, ingress: usize, frame: Message) {
        let now = self.now;
        let node = &mut self.switches[s];
        match node.switch.relay(ingress, &frame) {
            Forward::Drop => {}
            Forward::Port(p) => {
                let (w, side) = node.ports[p];
                self.wires[w.0].emulators[side].offer(now, frame);
            }
            Forward::Flood => {
                for (p, &(w, side)) in node.ports.iter().enumerate() {
                    if p != ingress {
                        self.wires[w.0].emulators[side].offer(now, frame.clone());
                    }
                }
            }
        }
    }

    /// Writes a frame to the host link's capture, if it has one.
    fn record(&mut self, h: HostId, link: LinkId, frame: &Message) {
        let now = self.now;
        let Some(capture) = &mut self.hosts[h.0].links[link.index()].capture else {
            return;
        };
        if let Err(e) = capture.write(stamp(now), frame) {
            self.capture_failed(h, link, e);
        }
    }
}
