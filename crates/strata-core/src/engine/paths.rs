//! DAA paths (seed 000 §4.2): the stack of sessions of one connection, from the
//! lowest layer to the application, so that a packet is demultiplexed once — by
//! the application identifier in the lowest header — and then popped along the
//! path without another lookup.
//!
//! A path is made when an application opens, enables or binds, and when a passive
//! open hands it a new session. Its identifier is assigned by the demultiplexing
//! protocol at the bottom (ETHDAA), which may grant a demanded, well-known one to a
//! server. Frames carry the receiver's identifier (the demux key) and the
//! sender's, so a path learns whom to answer from the first frame it receives.
//!
//! The layers a path pops are recorded from the first packet that reaches it by
//! ordinary layered demultiplexing — exactly the sessions LLM would find — and
//! reused for every later packet. A passive open's path is shared by every peer
//! that contacts the service, so it never keeps a record: its packets are
//! demultiplexed layer by layer until the peer learns its own path's identifier.

use rustc_hash::FxHashMap;

use smallvec::SmallVec;

use crate::ids::{AppId, PathId, ProtoId, SessionRef};
use crate::meta::Priority;
use crate::upi::Target;

/// The pops of one packet along a path, lowest layer first.
pub(crate) type Record = SmallVec<[(ProtoId, Target); 6]>;

/// One path.
#[derive(Clone, Debug)]
pub struct Path {
    /// The application at the top.
    pub app: AppId,
    /// The top session, when the path has one (a number binding has none).
    pub session: Option<SessionRef>,
    /// This end's application identifier: the demux key of frames for the path.
    pub local_id: u32,
    /// The peer's application identifier, zero until known.
    pub remote_id: u32,
    /// Urgency of the path's packets, both ways.
    pub priority: Priority,
    /// The protocol that assigned `local_id`.
    pub bottom: ProtoId,
    /// A passive open's path, shared by every peer: never keeps a record.
    pub listening: bool,
    pub(crate) record: Option<Record>,
}

/// All paths of an engine.
#[derive(Default)]
pub(crate) struct Paths {
    slots: Vec<Option<Path>>,
    free: Vec<u32>,
    by_session: FxHashMap<SessionRef, PathId>,
}

impl Paths {
    pub fn insert(&mut self, path: Path) -> PathId {
        let session = path.session;
        let id = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(path);
                PathId(i)
            }
            None => {
                self.slots.push(Some(path));
                PathId((self.slots.len() - 1) as u32)
            }
        };
        if let Some(s) = session {
            self.by_session.insert(s, id);
        }
        id
    }

    pub fn get(&self, id: PathId) -> Option<&Path> {
        self.slots.get(id.index())?.as_ref()
    }

    pub fn get_mut(&mut self, id: PathId) -> Option<&mut Path> {
        self.slots.get_mut(id.index())?.as_mut()
    }

    pub fn of_session(&self, s: SessionRef) -> Option<PathId> {
        self.by_session.get(&s).copied()
    }

    pub fn remove(&mut self, id: PathId) -> Option<Path> {
        let path = self.slots.get_mut(id.index())?.take()?;
        if let Some(s) = path.session {
            self.by_session.remove(&s);
        }
        self.free.push(id.0);
        Some(path)
    }

    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}
