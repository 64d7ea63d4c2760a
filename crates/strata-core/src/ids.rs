//! Small copyable handles for the objects the engine owns.
//!
//! Every handle is an index into a table the engine (or a protocol) keeps; none of
//! them carries a lifetime, so they can be stored in sessions, timers and work items.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $inner);

        impl $name {
            /// The index this handle stands for.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A protocol object in one engine's graph.
    ProtoId(u16),
    "proto#"
);
id_type!(
    /// A session, local to the protocol that owns it.
    SessionId(u32),
    "sess#"
);
id_type!(
    /// An application anchor (seed 000 §4.1: user processes are anchor protocols).
    AppId(u32),
    "app#"
);
id_type!(
    /// A link (driver anchor) at the bottom of the graph.
    LinkId(u16),
    "link#"
);
id_type!(
    /// A DAA path: the doubly linked stack of sessions of one connection (seed 000 §4.2).
    PathId(u32),
    "path#"
);

/// A session anywhere in the graph: the protocol that owns it and its local id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionRef {
    /// The owning protocol.
    pub proto: ProtoId,
    /// The session within that protocol.
    pub sess: SessionId,
}

impl SessionRef {
    /// Builds a reference from its parts.
    #[inline]
    pub fn new(proto: ProtoId, sess: SessionId) -> Self {
        Self { proto, sess }
    }
}

impl fmt::Display for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.proto, self.sess)
    }
}

/// Who sits above a session: an application anchor or a protocol of the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Upper {
    /// An application; sessions with an application above carry the up-boundary bit.
    App(AppId),
    /// A protocol of the graph.
    Proto(ProtoId),
}

/// A handle to a pending timer, used to cancel it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}
