//! DDP's sessions: a socket of this node, connected to a remote socket or
//! bound to receive from any. Bounded; lookups by (local socket, remote
//! address) and by local socket.

use rustc_hash::FxHashMap;
use strata_core::{SessionId, Upper};

use crate::appletalk::wire::ddp::Addr;

/// The first dynamically assigned socket (Inside AppleTalk §4: 128–254).
pub const FIRST_DYNAMIC: u8 = 128;

/// The last usable socket number (255 is reserved).
pub const LAST_SOCKET: u8 = 254;

/// One DDP session.
#[derive(Debug)]
pub struct Session {
    /// Who sits above.
    pub upper: Upper,
    /// This node's socket.
    pub socket: u8,
    /// The peer's socket address; none for a bound socket.
    pub remote: Option<Addr>,
    /// The DDP type this session sends.
    pub ddp_type: u8,
    /// Whether it sends and verifies checksums.
    pub checksum: bool,
}

/// Every session, and the indexes demux reads.
#[derive(Debug)]
pub struct Table {
    sessions: Vec<Option<Session>>,
    free: Vec<u32>,
    connected: FxHashMap<(u8, Addr), SessionId>,
    bound: FxHashMap<u8, SessionId>,
    max: usize,
}

impl Table {
    /// An empty table of at most `max` sessions.
    pub fn new(max: usize) -> Table {
        Table {
            sessions: Vec::new(),
            free: Vec::new(),
            connected: FxHashMap::default(),
            bound: FxHashMap::default(),
            max,
        }
    }

    /// The session a datagram to `socket` from `src` belongs to.
    pub fn lookup(&self, socket: u8, src: Addr) -> Option<SessionId> {
        self.connected
            .get(&(socket, src))
            .or_else(|| self.bound.get(&socket))
            .copied()
    }

    /// A session.
    pub fn get(&self, id: SessionId) -> Option<&Session> {
        self.sessions.get(id.0 as usize)?.as_ref()
    }

    /// A session, to change.
    pub fn get_mut(&mut self, id: SessionId) -> Option<&mut Session> {
        self.sessions.get_mut(id.0 as usize)?.as_mut()
    }

    /// Whether a session of this shape exists already.
    pub fn taken(&self, socket: u8, remote: Option<Addr>) -> bool {
        match remote {
            Some(r) => self.connected.contains_key(&(socket, r)),
            None => self.bound.contains_key(&socket),
        }
    }

    /// Whether any session uses `socket`.
    fn in_use(&self, socket: u8) -> bool {
        self.bound.contains_key(&socket) || self.connected.keys().any(|(s, _)| *s == socket)
    }

    /// A free dynamic socket, searching from `start`.
    pub fn dynamic(&self, start: u32) -> Option<u8> {
        let span = u32::from(LAST_SOCKET - FIRST_DYNAMIC) + 1;
        (0..span)
            .map(|i| FIRST_DYNAMIC + ((start + i) % span) as u8)
            .find(|s| !self.in_use(*s))
    }

    /// Adds a session; `None` when the table is full.
    pub fn insert(&mut self, s: Session) -> Option<SessionId> {
        if self.len() >= self.max {
            return None;
        }
        let key = (s.socket, s.remote);
        let id = match self.free.pop() {
            Some(i) => {
                self.sessions[i as usize] = Some(s);
                SessionId(i)
            }
            None => {
                self.sessions.push(Some(s));
                SessionId(self.sessions.len() as u32 - 1)
            }
        };
        match key {
            (socket, Some(r)) => self.connected.insert((socket, r), id),
            (socket, None) => self.bound.insert(socket, id),
        };
        Some(id)
    }

    /// Removes a session.
    pub fn remove(&mut self, id: SessionId) -> Option<Session> {
        let s = self.sessions.get_mut(id.0 as usize)?.take()?;
        match s.remote {
            Some(r) => self.connected.remove(&(s.socket, r)),
            None => self.bound.remove(&s.socket),
        };
        self.free.push(id.0);
        Some(s)
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.sessions.len() - self.free.len()
    }
}
