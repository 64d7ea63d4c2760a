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
//!
//! All of DAA's path bookkeeping is here: making and forgetting paths (with
//! the identifiers the lowest protocol assigns), and whom a path made while a
//! packet is handled answers — that packet's sender, at its urgency
//! ([`Paths::answer`]).

use rustc_hash::FxHashMap;

use smallvec::SmallVec;

use super::core::{Core, Slots, call_proto};
use crate::arch::Arch;
use crate::error::UpiError;
use crate::ids::{AppId, PathId, ProtoId, SessionRef};
use crate::meta::Priority;
use crate::upi::{Qos, Target};

/// The pops of one packet along a path, lowest layer first, as a layered walk
/// records them.
pub(crate) type Record = SmallVec<[(ProtoId, Target); RECORD_LAYERS]>;

/// Layers a [`Record`] holds without allocating: as many as a stack has.
pub(crate) const RECORD_LAYERS: usize = 6;

/// A path's learned pops, shared: each packet on the path holds it while it is
/// popped (a reference count, not a copy of the record).
pub(crate) type Learned = std::sync::Arc<[(ProtoId, Target)]>;

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
    pub(crate) record: Option<Learned>,
}

/// Whom a path made now answers: the sender of the packet being handled (its
/// application identifier, zero for none) and that packet's urgency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub peer: u32,
    pub priority: Priority,
}

impl Default for Answer {
    fn default() -> Self {
        Answer {
            peer: 0,
            priority: Priority::BEST_EFFORT,
        }
    }
}

/// All paths of an engine.
#[derive(Default)]
pub(crate) struct Paths {
    slots: Vec<Option<Path>>,
    free: Vec<u32>,
    by_session: FxHashMap<SessionRef, PathId>,
    /// The last session [`of_session_sending`](Paths::of_session_sending)
    /// looked up and its path: an application sends on one session packet
    /// after packet. Cleared whenever `by_session` changes.
    last: Option<(SessionRef, Option<PathId>)>,
    answering: Answer,
}

impl Paths {
    /// From now on, paths made answer `peer` at `priority` (a packet from it
    /// is being handled); returns what was answered before, for
    /// [`restore`](Self::restore).
    #[inline]
    pub fn answer(&mut self, peer: u32, priority: Priority) -> Answer {
        std::mem::replace(&mut self.answering, Answer { peer, priority })
    }

    /// Goes back to answering what [`answer`](Self::answer) returned.
    #[inline]
    pub fn restore(&mut self, outer: Answer) {
        self.answering = outer;
    }

    /// Whom a path made now answers.
    pub fn answering(&self) -> Answer {
        self.answering
    }

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
            self.last = None;
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

    /// [`of_session`](Self::of_session) for a message being sent: the
    /// answer for the last session asked about is kept, so a stream of
    /// sends on one session costs one lookup.
    #[inline]
    pub fn of_session_sending(&mut self, s: SessionRef) -> Option<PathId> {
        if let Some((last, path)) = self.last
            && last == s
        {
            return path;
        }
        let path = self.of_session(s);
        self.last = Some((s, path));
        path
    }

    pub fn remove(&mut self, id: PathId) -> Option<Path> {
        let path = self.slots.get_mut(id.index())?.take()?;
        if let Some(s) = path.session {
            self.by_session.remove(&s);
            self.last = None;
        }
        self.free.push(id.0);
        Some(path)
    }

    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// DAA: makes a path for `app` (and `session`), with an identifier assigned by
/// the first link protocol that assigns them. Without DAA, or without such a
/// protocol (a plain Ethernet stack under `--arch daa`), nothing is made and
/// packets take the layered way, counted as `daa-no-path` when they arrive.
pub(crate) fn make(
    core: &mut Core,
    slots: &mut Slots,
    app: AppId,
    session: Option<SessionRef>,
    qos: Qos,
    remote_id: u32,
    listening: bool,
) -> Result<(), UpiError> {
    if core.arch != Arch::Daa {
        return Ok(());
    }
    let pid = core.paths.insert(Path {
        app,
        session,
        local_id: 0,
        remote_id,
        priority: qos.priority,
        bottom: ProtoId(0),
        listening,
        record: None,
    });
    let mut bottoms: SmallVec<[ProtoId; 4]> = core.links.iter().map(|l| l.node.upper).collect();
    bottoms.dedup();
    let mut refused = None;
    for bottom in bottoms {
        match call_proto(core, slots, bottom, |p, cx| {
            p.assign_app_id(pid, qos.app_id, cx)
        }) {
            Ok(Ok(id)) => {
                if let Some(path) = core.paths.get_mut(pid) {
                    path.local_id = id;
                    path.bottom = bottom;
                }
                return Ok(());
            }
            Ok(Err(UpiError::Unsupported(_))) | Err(_) => {}
            Ok(Err(e)) => refused = Some(e),
        }
    }
    core.paths.remove(pid);
    match refused {
        Some(e) => Err(e),
        None => {
            core.stats.event("daa-no-app-id");
            Ok(())
        }
    }
}

/// DAA: a path for a session a passive open made for the packet being
/// handled, addressed to its sender at its urgency; refusals are counted.
pub(crate) fn make_answering(core: &mut Core, slots: &mut Slots, app: AppId, session: SessionRef) {
    let Answer { peer, priority } = core.paths.answering;
    let qos = Qos {
        priority,
        app_id: None,
    };
    if make(core, slots, app, Some(session), qos, peer, false).is_err() {
        core.stats.event("daa-path-refused");
    }
}

/// DAA: removes the path of `session`, if any, and releases its identifier.
pub(crate) fn forget(core: &mut Core, slots: &mut Slots, session: SessionRef) {
    let Some(pid) = core.paths.of_session(session) else {
        return;
    };
    if let Some(path) = core.paths.remove(pid) {
        let _ = call_proto(core, slots, path.bottom, |p, cx| {
            p.release_app_id(path.local_id, cx)
        });
    }
}
