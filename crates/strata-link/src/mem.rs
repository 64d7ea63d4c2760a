//! The zero-delay in-memory link: two engines back to back in one thread, for
//! measuring what protocols cost.
//!
//! Nothing sits between the engines — no emulator, no event heap, no capture — so a
//! benchmark through a [`MemPair`] measures the engines and their protocols, as one
//! through smoltcp's loopback device measures smoltcp. Frames move as the
//! [`Message`](strata_core::Message)s the engines hand out, without copying, and
//! moving them allocates nothing.
//!
//! With [`offload`](MemPair::set_offload) on, the link does in software what a
//! NIC with TCP segmentation and receive offload does (Linux's GSO and GRO on a
//! veth): each engine's TCP hands down super-segments, the link cuts them into
//! MTU-sized frames with checksums of their own, and each receiver's link
//! verifies and merges runs of them before its engine sees them. The wire
//! between still carries MTU-sized frames; the cutting and merging are
//! measured with the rest.

use strata_core::{Engine, Instant, LinkId, Message};

use crate::error::LinkError;
use crate::offload::{self, Coalescer};

/// Two engines joined by one link of each, with nothing in between.
pub struct MemPair {
    a: Engine,
    b: Engine,
    link_a: LinkId,
    link_b: LinkId,
    /// Receive offload into `a` and into `b`, when offload is on.
    offload: Option<[Coalescer; 2]>,
    /// Super-segments no NIC could cut, dropped.
    dropped: u64,
}

fn find_link(engine: &Engine, host: &str, link: &str) -> Result<LinkId, LinkError> {
    engine.link_id(link).ok_or_else(|| LinkError::NoSuchLink {
        host: host.into(),
        link: link.into(),
        known: engine
            .links()
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

impl MemPair {
    /// Joins engine `a`'s link `link` to engine `b`'s link of the same name.
    pub fn new(a: Engine, b: Engine, link: &str) -> Result<MemPair, LinkError> {
        let link_a = find_link(&a, "a", link)?;
        let link_b = find_link(&b, "b", link)?;
        Ok(MemPair {
            a,
            b,
            link_a,
            link_b,
            offload: None,
            dropped: 0,
        })
    }

    /// Turns TCP segmentation and receive offload on or off on both ends. Set
    /// it before connections are established: TCP learns what its link cuts
    /// when it opens.
    pub fn set_offload(&mut self, on: bool) {
        let max = if on { offload::SEGMENTED_MAX } else { 0 };
        self.a.set_link_segmentation(self.link_a, max);
        self.b.set_link_segmentation(self.link_b, max);
        self.offload = on.then(Default::default);
    }

    /// Segments the receive offload merged into the one before (what the
    /// receivers' layers above the link were spared), both ways.
    pub fn merged(&self) -> u64 {
        self.offload
            .as_ref()
            .map_or(0, |[a, b]| a.merged() + b.merged())
    }

    /// Super-segments dropped because no NIC could cut them (not TCP in IPv4
    /// in Ethernet II).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Runs both engines at `now` and moves frames both ways until neither has
    /// anything left to do or send. Returns how many frames moved.
    ///
    /// Frames cross in batches — all an engine has queued, at most its transmit
    /// queue's limit — before the receiver runs, so the receiver's receive queue
    /// must be at least as long or the excess is dropped and counted (the
    /// `EngineConfig` defaults are equal).
    pub fn pump(&mut self, now: Instant) -> usize {
        // Both clocks must read `now` before a frame arrives: `receive` stamps it.
        self.a.run(now);
        self.b.run(now);
        let mut moved = 0;
        loop {
            let to_b = self.shuttle(true);
            if to_b > 0 {
                self.b.run(now);
            }
            let to_a = self.shuttle(false);
            if to_a > 0 {
                self.a.run(now);
            }
            if to_a + to_b == 0 {
                return moved;
            }
            moved += to_a + to_b;
        }
    }

    /// The earlier of the two engines' next timers.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        match (self.a.next_deadline(), self.b.next_deadline()) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Engine `a`.
    pub fn a(&mut self) -> &mut Engine {
        &mut self.a
    }

    /// Engine `b`.
    pub fn b(&mut self) -> &mut Engine {
        &mut self.b
    }

    /// Both engines at once.
    pub fn engines(&mut self) -> (&mut Engine, &mut Engine) {
        (&mut self.a, &mut self.b)
    }

    /// Takes the pair apart.
    pub fn into_engines(self) -> (Engine, Engine) {
        (self.a, self.b)
    }

    /// Moves every frame one engine has queued to the other (`a` to `b` when
    /// `to_b`); returns how many the sender handed out.
    fn shuttle(&mut self, to_b: bool) -> usize {
        let (from, out, to, into) = if to_b {
            (&mut self.a, self.link_a, &mut self.b, self.link_b)
        } else {
            (&mut self.b, self.link_b, &mut self.a, self.link_a)
        };
        let mut n = 0;
        let Some(coalescers) = &mut self.offload else {
            return from.hand_over(out, to, into);
        };
        let gro = &mut coalescers[usize::from(to_b)];
        let mut deliver = |frame: Message| to.receive(into, frame);
        while let Some(frame) = from.poll_transmit(out) {
            n += 1;
            match offload::segment(frame) {
                Ok(frames) => frames.for_each(|f| gro.push(f, &mut deliver)),
                Err(_) => self.dropped += 1,
            }
        }
        gro.flush(&mut deliver);
        n
    }
}
