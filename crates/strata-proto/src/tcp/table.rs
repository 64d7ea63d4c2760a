//! TCP's tables: connections by 4-tuple, listeners by port, local ports in
//! use, and the IP sessions kept for segments that belong to no connection.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use strata_core::{Cx, ProtoId, SessionId, SessionRef};

use super::conn::Conn;
use super::listen::Listener;
use super::peers::PeerSessions;
use crate::slab::{LastHit, Slab};

/// The dynamic and private ports (RFC 6335 §6) ephemeral ports come from.
pub const EPHEMERAL: std::ops::RangeInclusive<u16> = 49152..=65535;

/// (local address, local port, remote address, remote port).
pub type Tuple = (Ipv4Addr, u16, Ipv4Addr, u16);

/// Every connection and listener of a TCP instance.
pub(crate) struct Table {
    /// Connections.
    pub conns: Slab<Conn>,
    /// Connections by 4-tuple, after `last`.
    pub by_tuple: BTreeMap<Tuple, SessionId>,
    last: LastHit,
    /// Listeners by local port.
    pub listeners: BTreeMap<u16, Listener>,
    /// Local ports of connections, with how many use each.
    ports: BTreeMap<u16, u32>,
    /// IP sessions kept for resets and for connections that just ended.
    peers: PeerSessions,
}

impl Table {
    /// Empty tables for at most `max` connections.
    pub fn new(max: usize) -> Table {
        Table {
            conns: Slab::new(max),
            by_tuple: BTreeMap::new(),
            last: LastHit::default(),
            listeners: BTreeMap::new(),
            ports: BTreeMap::new(),
            peers: PeerSessions::default(),
        }
    }

    /// The connection of a 4-tuple.
    pub fn lookup(&self, t: &Tuple) -> Option<SessionId> {
        self.conns.find(
            &self.last,
            |c| (c.local.0, c.local.1, c.remote.0, c.remote.1) == *t,
            || self.by_tuple.get(t).copied(),
        )
    }

    /// Whether a connection or listener uses local `port`.
    pub fn port_in_use(&self, port: u16) -> bool {
        self.ports.contains_key(&port) || self.listeners.contains_key(&port)
    }

    /// A free ephemeral port, searched from `start` (RFC 6056 §3.3.1).
    pub fn ephemeral(&self, start: u32) -> Option<u16> {
        let base = u32::from(*EPHEMERAL.start());
        let span = u32::from(*EPHEMERAL.end()) - base + 1;
        (0..span)
            .map(|i| (base + (start.wrapping_add(i)) % span) as u16)
            .find(|p| !self.port_in_use(*p))
    }

    /// Stores a connection (its `id` is set here); `None` when full.
    pub fn insert(&mut self, conn: Conn) -> Option<SessionId> {
        let tuple = (conn.local.0, conn.local.1, conn.remote.0, conn.remote.1);
        let id = self.conns.insert(conn)?;
        if let Some(c) = self.conns.get_mut(id) {
            c.id = id;
        }
        self.by_tuple.insert(tuple, id);
        *self.ports.entry(tuple.1).or_default() += 1;
        Some(id)
    }

    /// Removes a connection and its index entries.
    pub fn remove(&mut self, id: SessionId) -> Option<Conn> {
        let c = self.conns.remove(id)?;
        self.by_tuple
            .remove(&(c.local.0, c.local.1, c.remote.0, c.remote.1));
        if let Some(n) = self.ports.get_mut(&c.local.1) {
            *n -= 1;
            if *n == 0 {
                self.ports.remove(&c.local.1);
            }
        }
        if let Some(l) = c.listener.and_then(|p| self.listeners.get_mut(&p)) {
            l.pending = l.pending.saturating_sub(1);
        }
        Some(c)
    }

    /// An IP session to `peer` for a segment outside any connection (a reset),
    /// opened on `ip` when none is kept.
    pub fn peer(&mut self, peer: Ipv4Addr, ip: ProtoId, cx: &mut Cx) -> Option<SessionRef> {
        self.peers.get(peer, ip, cx)
    }

    /// Takes over the IP session of a connection that ended (see
    /// [`PeerSessions::retire`]).
    pub fn retire(&mut self, peer: Ipv4Addr, session: SessionRef, cx: &mut Cx) {
        self.peers.retire(peer, session, cx);
    }
}
