//! The translation table of RFC 826: IPv4 address → hardware address, with the
//! packets waiting for an address that is still being resolved. Bounded: when
//! full, the entry updated longest ago makes room (RFC 1122 §2.3.2.1 leaves the
//! flushing policy to the implementation).

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use strata_core::{HwAddr, Instant, Message, TimerId};

/// A packet waiting for its next hop to resolve.
pub(crate) struct Held {
    /// The packet.
    pub msg: Message,
    /// Its sender's number in the link layer (IP's ethertype).
    pub number: u32,
}

/// Where resolution of one address stands.
pub(crate) enum State {
    /// Requests are out; packets wait.
    Pending {
        /// Requests sent so far.
        requests: u32,
        /// Packets waiting, oldest first.
        held: VecDeque<Held>,
    },
    /// The address is known until `expires`.
    Resolved {
        /// The neighbour's hardware address.
        hw: HwAddr,
        /// When the entry stops being trusted.
        expires: Instant,
        /// Whether a unicast refresh request went out for this lifetime.
        probed: bool,
    },
}

/// One address's entry.
pub(crate) struct Entry {
    /// Resolution state.
    pub state: State,
    /// Last change, for choosing whom to evict.
    pub updated: Instant,
    /// The entry's one armed timer: a retry while pending, expiry when resolved.
    pub timer: Option<TimerId>,
}

/// The bounded table.
pub(crate) struct Cache {
    entries: BTreeMap<Ipv4Addr, Entry>,
    limit: usize,
}

impl Cache {
    /// An empty table of at most `limit` entries.
    pub fn new(limit: usize) -> Cache {
        Cache {
            entries: BTreeMap::new(),
            limit,
        }
    }

    pub fn get(&self, ip: Ipv4Addr) -> Option<&Entry> {
        self.entries.get(&ip)
    }

    pub fn get_mut(&mut self, ip: Ipv4Addr) -> Option<&mut Entry> {
        self.entries.get_mut(&ip)
    }

    pub fn remove(&mut self, ip: Ipv4Addr) -> Option<Entry> {
        self.entries.remove(&ip)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Puts `entry` in place for `ip`, returning what it replaced and, when the
    /// table was full, the entry evicted to make room (its owner cleans up both).
    pub fn insert(&mut self, ip: Ipv4Addr, entry: Entry) -> Vec<(Ipv4Addr, Entry)> {
        let mut gone = Vec::new();
        if let Some(old) = self.entries.remove(&ip) {
            gone.push((ip, old));
        } else if self.entries.len() >= self.limit {
            // Ties broken by address, so simulations evict the same entry every run.
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(addr, e)| (e.updated, **addr))
                .map(|(addr, _)| *addr);
            if let Some(victim) = oldest
                && let Some(e) = self.entries.remove(&victim)
            {
                gone.push((victim, e));
            }
        }
        self.entries.insert(ip, entry);
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(at: u64) -> Entry {
        Entry {
            state: State::Resolved {
                hw: HwAddr::local(1),
                expires: Instant::FAR_FUTURE,
                probed: false,
            },
            updated: Instant::from_nanos(at),
            timer: None,
        }
    }

    #[test]
    fn a_full_cache_evicts_the_entry_updated_longest_ago() {
        let mut c = Cache::new(2);
        let ip = |n| Ipv4Addr::new(198, 18, 0, n);
        assert!(c.insert(ip(1), resolved(20)).is_empty());
        assert!(c.insert(ip(2), resolved(10)).is_empty());
        let gone = c.insert(ip(3), resolved(30));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].0, ip(2));
        assert_eq!(c.len(), 2);
        let replaced = c.insert(ip(1), resolved(40));
        assert_eq!(replaced[0].0, ip(1), "replacing is not evicting");
        assert!(c.get(ip(3)).is_some());
    }
}
