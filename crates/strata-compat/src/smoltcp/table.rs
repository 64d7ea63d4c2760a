//! The module's tables: Strata sessions and the smoltcp sockets behind them,
//! connections by 4-tuple, listeners by port, local ports in use, and the IP
//! sessions kept for segments that belong to no connection.
//!
//! smoltcp finds a socket for a segment by asking every socket in turn; a
//! Strata protocol must answer `demux` without changing anything, and say
//! which session a segment is for. The module keeps the 4-tuple map smoltcp
//! does without, and feeds smoltcp a segment with only the sockets that may
//! take it (see `input`).

use std::net::Ipv4Addr;

use rustc_hash::FxHashMap;
use smoltcp::iface::SocketHandle;
use strata_core::{Instant, Message, SessionId, SessionRef, Upper};
use strata_proto::tcp::PeerSessions;

use super::observe::Observed;

/// The dynamic and private ports (RFC 6335 §6) ephemeral ports come from,
/// as Strata's `tcp` takes them.
pub use strata_proto::tcp::EPHEMERAL;

/// (remote address, remote port, local port): the local address is the
/// host's one.
pub(super) type Tuple = (Ipv4Addr, u16, u16);

/// One session: a smoltcp socket and what the module keeps about it.
pub(super) struct Conn {
    /// The socket, in the connection socket set.
    pub socket: SocketHandle,
    /// Who sits above (an application).
    pub upper: Upper,
    /// The peer.
    pub remote: (Ipv4Addr, u16),
    /// Our port.
    pub local_port: u16,
    /// The IP session to the peer.
    pub ip: SessionRef,
    /// A passive child's listener port, until it is announced.
    pub listener: Option<u16>,
    /// The upper knows the session: it opened it, or heard `OpenDone`.
    pub announced: bool,
    /// The handshake's completion was reported (`Connected`, `OpenDone`).
    pub connected: bool,
    /// The upper still holds the session: events and data go to it.
    pub attached: bool,
    /// What the application did before the handshake ended.
    pub early: Early,
    /// `PeerClosed` was told.
    pub peer_closed: bool,
    /// `Closed` was told, or is not owed.
    pub closed: bool,
    /// Manual receive flow control.
    pub manual: bool,
    /// Bytes delivered and not yet reported consumed (manual flow control).
    pub unread: usize,
    /// The application was refused room and waits for `Writable`.
    pub wants_writable: bool,
    /// When a session its application closed ends at the latest: a peer
    /// that never sends its FIN must not hold the rings for ever (smoltcp's
    /// FIN-WAIT-2 has no timer; Linux gives an orphan `tcp_fin_timeout`).
    pub orphaned_until: Option<Instant>,
    /// The state smoltcp reported last, before the latest call.
    pub last: smoltcp::socket::tcp::State,
    /// What its segments showed.
    pub seen: Observed,
}

impl Conn {
    /// Its 4-tuple, as the table keys it.
    pub fn tuple(&self) -> Tuple {
        (self.remote.0, self.remote.1, self.local_port)
    }
}

/// What an application did before its connection was established, which
/// smoltcp refuses until then (it takes no data in SYN-SENT, and its `close`
/// there aborts) and Strata's TCP accepts: the module holds it and hands it
/// to smoltcp once the handshake is done.
#[derive(Default)]
pub(super) struct Early {
    /// Data written, in order.
    pub data: Vec<Message>,
    /// Bytes of it.
    pub len: usize,
    /// A shutdown was asked for.
    pub shutdown: bool,
}

impl Conn {
    /// A session for `socket` with `upper`, to `remote` from `local_port`
    /// over IP session `ip`; `listener` for a passive child.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        socket: SocketHandle,
        upper: Upper,
        remote: (Ipv4Addr, u16),
        local_port: u16,
        ip: SessionRef,
        listener: Option<u16>,
        manual: bool,
        last: smoltcp::socket::tcp::State,
    ) -> Conn {
        Conn {
            socket,
            upper,
            remote,
            local_port,
            ip,
            listener,
            // The opener of an active session knows it from the start.
            announced: listener.is_none(),
            connected: false,
            attached: true,
            early: Early::default(),
            peer_closed: false,
            closed: false,
            manual,
            unread: 0,
            wants_writable: false,
            orphaned_until: None,
            last,
            seen: Observed::default(),
        }
    }
}

/// A listening port.
pub(super) struct Listener {
    /// Who enabled it.
    pub upper: Upper,
    /// The socket listening on it, in the listening socket set.
    pub socket: SocketHandle,
    /// Most children in SYN-RECEIVED at once.
    pub backlog: usize,
    /// Children in SYN-RECEIVED now.
    pub pending: usize,
}

/// Every session and listener of a `smoltcp-tcp` instance.
#[derive(Default)]
pub(super) struct Table {
    /// Sessions.
    pub conns: FxHashMap<SessionId, Conn>,
    /// Sessions by 4-tuple.
    pub by_tuple: FxHashMap<Tuple, SessionId>,
    /// Listeners by port.
    pub listeners: FxHashMap<u16, Listener>,
    /// Local ports of sessions, with how many use each.
    ports: FxHashMap<u16, u32>,
    /// IP sessions kept for resets smoltcp sends and for sessions that
    /// just ended (Strata's TCP keeps its own the same way).
    pub peers: PeerSessions,
    next_id: u32,
}

impl Table {
    /// The session of a 4-tuple.
    pub fn lookup(&self, t: &Tuple) -> Option<SessionId> {
        self.by_tuple.get(t).copied()
    }

    /// A free ephemeral port, searched from `start` (RFC 6056 §3.3.1).
    pub fn ephemeral(&self, start: u32) -> Option<u16> {
        let base = u32::from(*EPHEMERAL.start());
        let span = u32::from(*EPHEMERAL.end()) - base + 1;
        (0..span)
            .map(|i| (base + start.wrapping_add(i) % span) as u16)
            .find(|p| !self.ports.contains_key(p) && !self.listeners.contains_key(p))
    }

    /// Stores a session and returns its id: ids count up and skip those in
    /// use, so a stale handle (a push queued for a session already gone)
    /// misses for four billion connections.
    pub fn insert(&mut self, conn: Conn) -> SessionId {
        let mut id = SessionId(self.next_id);
        while self.conns.contains_key(&id) {
            id = SessionId(id.0.wrapping_add(1));
        }
        self.next_id = id.0.wrapping_add(1);
        self.by_tuple.insert(conn.tuple(), id);
        *self.ports.entry(conn.local_port).or_default() += 1;
        self.conns.insert(id, conn);
        id
    }

    /// Removes a session and its index entries.
    pub fn remove(&mut self, id: SessionId) -> Option<Conn> {
        let c = self.conns.remove(&id)?;
        self.by_tuple.remove(&c.tuple());
        if let Some(n) = self.ports.get_mut(&c.local_port) {
            *n -= 1;
            if *n == 0 {
                self.ports.remove(&c.local_port);
            }
        }
        if let Some(l) = c.listener.and_then(|p| self.listeners.get_mut(&p)) {
            l.pending = l.pending.saturating_sub(1);
        }
        Some(c)
    }
}
