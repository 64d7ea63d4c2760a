//! IP's side of neighbour resolution: for each next hop, the Ethernet session
//! that reaches it, trusted until ARP's `valid_until`. ARP owns the truth; this
//! cache only saves a control call and a session lookup per packet. Bounded:
//! when full, the entry that runs out soonest is dropped and its session closed.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use strata_core::{HwAddr, Instant, SessionRef};

/// Most next hops remembered.
const LIMIT: usize = 256;

struct Neighbour {
    hw: HwAddr,
    valid_until: Instant,
    link: SessionRef,
}

/// Next hop → Ethernet session.
pub(crate) struct Neighbours {
    map: BTreeMap<Ipv4Addr, Neighbour>,
}

impl Neighbours {
    pub fn new() -> Neighbours {
        Neighbours {
            map: BTreeMap::new(),
        }
    }

    /// The session for `hop` if its address is still trusted at `now`.
    pub fn get(&self, hop: Ipv4Addr, now: Instant) -> Option<SessionRef> {
        self.map
            .get(&hop)
            .filter(|n| n.valid_until > now)
            .map(|n| n.link)
    }

    /// Extends `hop`'s entry when ARP confirmed the same address; returns its
    /// session, or `None` when the caller must open one.
    pub fn confirm(
        &mut self,
        hop: Ipv4Addr,
        hw: HwAddr,
        valid_until: Instant,
    ) -> Option<SessionRef> {
        let n = self.map.get_mut(&hop).filter(|n| n.hw == hw)?;
        n.valid_until = valid_until;
        Some(n.link)
    }

    /// Records `hop` at `hw` through `link`; returns the sessions no longer used
    /// (the one replaced, or the one evicted to make room) for the caller to close.
    pub fn insert(
        &mut self,
        hop: Ipv4Addr,
        hw: HwAddr,
        valid_until: Instant,
        link: SessionRef,
    ) -> Vec<SessionRef> {
        let mut gone = Vec::new();
        if !self.map.contains_key(&hop) && self.map.len() >= LIMIT {
            let soonest = self
                .map
                .iter()
                .min_by_key(|(ip, n)| (n.valid_until, **ip))
                .map(|(ip, _)| *ip);
            if let Some(n) = soonest.and_then(|ip| self.map.remove(&ip)) {
                gone.push(n.link);
            }
        }
        let new = Neighbour {
            hw,
            valid_until,
            link,
        };
        // Every entry holds one reference of its session (Ethernet counts
        // opens), so the old one is released even if it is the same session.
        if let Some(old) = self.map.insert(hop, new) {
            gone.push(old.link);
        }
        gone
    }

    /// How many next hops are remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}
