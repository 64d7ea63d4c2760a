//! The zero-delay in-memory link: two engines back to back in one thread, for
//! measuring what protocols cost.
//!
//! Nothing sits between the engines — no emulator, no event heap, no capture — so a
//! benchmark through a [`MemPair`] measures the engines and their protocols, as one
//! through smoltcp's loopback device measures smoltcp. Frames move as the
//! [`Message`](strata_core::Message)s the engines hand out, without copying, and
//! moving them allocates nothing.

use strata_core::{Engine, Instant, LinkId};

use crate::error::LinkError;

/// Two engines joined by one link of each, with nothing in between.
pub struct MemPair {
    a: Engine,
    b: Engine,
    link_a: LinkId,
    link_b: LinkId,
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
        })
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
            let to_b = shuttle(&mut self.a, self.link_a, &mut self.b, self.link_b);
            if to_b > 0 {
                self.b.run(now);
            }
            let to_a = shuttle(&mut self.b, self.link_b, &mut self.a, self.link_a);
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
}

fn shuttle(from: &mut Engine, out: LinkId, to: &mut Engine, into: LinkId) -> usize {
    let mut n = 0;
    while let Some(frame) = from.poll_transmit(out) {
        to.receive(into, frame);
        n += 1;
    }
    n
}
