//! UDP's session tables: connected sessions by (local port, remote address,
//! remote port), bound sessions and passive opens by local port, and the
//! choice of ephemeral ports.

use std::net::Ipv4Addr;

use rustc_hash::FxHashMap;
use std::time::Duration;

use strata_core::{Instant, SessionId, SessionRef, TimerId, Upper};

use crate::slab::{LastHit, Slab};

/// The dynamic and private ports (RFC 6335 §6) ephemeral ports come from.
pub const EPHEMERAL: std::ops::RangeInclusive<u16> = 49152..=65535;

/// One UDP session.
#[derive(Debug)]
pub(crate) struct Session {
    pub upper: Upper,
    pub local_port: u16,
    /// The peer; `None` for a bound session, which accepts any peer and
    /// cannot send.
    pub remote: Option<(Ipv4Addr, u16)>,
    /// The IP session to the peer, for connected sessions.
    pub ip: Option<SessionRef>,
    /// Compute and verify checksums.
    pub checksum: bool,
    /// Made by a passive open, and so closed when idle.
    pub passive: bool,
    pub last_active: Instant,
    pub timer: Option<TimerId>,
}

/// A passive open on a port.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Enable {
    pub upper: Upper,
    pub checksum: bool,
}

/// Every session and listener of the protocol.
pub(crate) struct Table {
    pub sessions: Slab<Session>,
    /// Hashed (FxHash): demux looks a datagram up here, once per datagram,
    /// after `last`.
    pub connected: FxHashMap<(u16, Ipv4Addr, u16), SessionId>,
    last: LastHit,
    /// Connected sessions per local port, for `port_in_use`.
    connected_ports: FxHashMap<u16, u32>,
    pub bound: FxHashMap<u16, SessionId>,
    pub enables: FxHashMap<u16, Enable>,
    /// Sessions made by passive opens, bounded by `max_passive`.
    pub passive: usize,
    pub max_passive: usize,
    pub idle_timeout: Duration,
}

impl Table {
    pub fn new(max_passive: usize, idle_timeout: Duration) -> Table {
        Table {
            sessions: Slab::new(usize::MAX),
            connected: FxHashMap::default(),
            last: LastHit::default(),
            connected_ports: FxHashMap::default(),
            bound: FxHashMap::default(),
            enables: FxHashMap::default(),
            passive: 0,
            max_passive,
            idle_timeout,
        }
    }

    /// Whether anything uses `port` locally.
    pub fn port_in_use(&self, port: u16) -> bool {
        self.bound.contains_key(&port)
            || self.enables.contains_key(&port)
            || self.connected_ports.contains_key(&port)
    }

    /// A free ephemeral port, searched from `start` (RFC 6056 §3.3.1: a random
    /// starting point, then sequentially).
    pub fn ephemeral(&self, start: u32) -> Option<u16> {
        let base = u32::from(*EPHEMERAL.start());
        let span = u32::from(*EPHEMERAL.end()) - base + 1;
        (0..span)
            .map(|i| (base + (start + i) % span) as u16)
            .find(|p| !self.port_in_use(*p))
    }

    /// Stores a session and indexes it.
    pub fn insert(&mut self, s: Session) -> Option<SessionId> {
        let (port, remote, passive) = (s.local_port, s.remote, s.passive);
        let id = self.sessions.insert(s)?;
        match remote {
            Some((ip, rport)) => {
                self.connected.insert((port, ip, rport), id);
                *self.connected_ports.entry(port).or_default() += 1;
            }
            None => {
                self.bound.insert(port, id);
            }
        }
        if passive {
            self.passive += 1;
        }
        Some(id)
    }

    /// Removes a session and its index entries.
    pub fn remove(&mut self, id: SessionId) -> Option<Session> {
        let s = self.sessions.remove(id)?;
        match s.remote {
            Some((ip, rport)) => {
                self.connected.remove(&(s.local_port, ip, rport));
                if let Some(n) = self.connected_ports.get_mut(&s.local_port) {
                    *n -= 1;
                    if *n == 0 {
                        self.connected_ports.remove(&s.local_port);
                    }
                }
            }
            None => {
                self.bound.remove(&s.local_port);
            }
        }
        if s.passive {
            self.passive -= 1;
        }
        Some(s)
    }

    /// The session a datagram from `src:sport` to `dport` belongs to:
    /// connected first, then bound.
    #[inline]
    pub fn lookup(&self, dport: u16, src: Ipv4Addr, sport: u16) -> Option<SessionId> {
        self.sessions
            .find(
                &self.last,
                |s| s.local_port == dport && s.remote == Some((src, sport)),
                || self.connected.get(&(dport, src, sport)).copied(),
            )
            .or_else(|| self.bound.get(&dport).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_core::AppId;

    fn session(port: u16, remote: Option<(Ipv4Addr, u16)>) -> Session {
        Session {
            upper: Upper::App(AppId(0)),
            local_port: port,
            remote,
            ip: None,
            checksum: true,
            passive: false,
            last_active: Instant::ZERO,
            timer: None,
        }
    }

    #[test]
    fn connected_sessions_win_over_bound_ones() {
        let mut t = Table::new(8, Duration::from_secs(1));
        let peer = Ipv4Addr::new(198, 18, 0, 2);
        let bound = t.insert(session(7, None)).unwrap();
        let conn = t.insert(session(7, Some((peer, 9)))).unwrap();
        assert_eq!(t.lookup(7, peer, 9), Some(conn));
        assert_eq!(t.lookup(7, peer, 10), Some(bound));
        assert_eq!(t.lookup(8, peer, 9), None);
        t.remove(conn);
        assert_eq!(t.lookup(7, peer, 9), Some(bound));
    }

    #[test]
    fn ephemeral_ports_come_from_the_dynamic_range_and_skip_used_ones() {
        let mut t = Table::new(8, Duration::from_secs(1));
        t.insert(session(49152, None)).unwrap();
        assert_eq!(t.ephemeral(0), Some(49153));
        assert_eq!(t.ephemeral(16383), Some(65535));
        assert_eq!(t.ephemeral(16384), Some(49153), "wraps round the range");
        assert!(t.port_in_use(49152) && !t.port_in_use(49153));
    }
}
