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
    /// Bumped whenever a session leaves the cache, so ways out copied from it
    /// (see `output::Way`) can tell they may name a closed session.
    epoch: u64,
}

impl Neighbours {
    pub fn new() -> Neighbours {
        Neighbours {
            map: BTreeMap::new(),
            epoch: 0,
        }
    }

    /// The session for `hop` and until when to trust it, if its address is
    /// still trusted at `now`.
    pub fn get(&self, hop: Ipv4Addr, now: Instant) -> Option<(SessionRef, Instant)> {
        self.map
            .get(&hop)
            .filter(|n| n.valid_until > now)
            .map(|n| (n.link, n.valid_until))
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
        if !gone.is_empty() {
            self.epoch += 1;
        }
        gone
    }

    /// Changes whenever a session leaves the cache.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many next hops are remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use strata_core::{ProtoId, SessionId};

    use super::*;

    fn link(n: u32) -> SessionRef {
        SessionRef::new(ProtoId(0), SessionId(n))
    }

    const HOP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    #[test]
    fn the_epoch_moves_only_when_a_session_leaves() {
        let mut n = Neighbours::new();
        let until = Instant::ZERO + Duration::from_secs(60);
        assert!(n.insert(HOP, HwAddr::local(2), until, link(1)).is_empty());
        assert_eq!(n.epoch(), 0, "a new entry lets nothing go");
        let later = until + Duration::from_secs(60);
        assert_eq!(n.confirm(HOP, HwAddr::local(2), later), Some(link(1)));
        assert_eq!(n.epoch(), 0, "a confirmation keeps the session");
        assert_eq!(n.get(HOP, until), Some((link(1), later)));
        let gone = n.insert(HOP, HwAddr::local(3), later, link(2));
        assert_eq!(gone, vec![link(1)]);
        assert_eq!(n.epoch(), 1, "a replaced session invalidates copied ways");
    }

    #[test]
    fn eviction_when_full_also_moves_the_epoch() {
        let mut n = Neighbours::new();
        let t = |s| Instant::ZERO + Duration::from_secs(s);
        for i in 0..LIMIT as u32 {
            let ip = Ipv4Addr::from(u32::from(HOP) + i);
            n.insert(ip, HwAddr::local(2), t(100 + u64::from(i)), link(i));
        }
        assert_eq!(n.epoch(), 0);
        let ip = Ipv4Addr::from(u32::from(HOP) + LIMIT as u32);
        let gone = n.insert(ip, HwAddr::local(2), t(1000), link(999));
        assert_eq!(gone, vec![link(0)], "the soonest to run out goes");
        assert_eq!((n.len(), n.epoch()), (LIMIT, 1));
    }
}
