//! Wires: full-duplex point-to-point links between a host's link and another host's
//! link or a switch port, each direction its own emulator.

use std::fmt;

use strata_core::LinkId;

use super::{HostId, SwitchId};
use crate::emulator::Emulator;

/// A wire of a [`SimNet`](super::SimNet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WireId(pub(crate) usize);

impl fmt::Display for WireId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wire#{}", self.0)
    }
}

/// One direction of a wire: from its first end to its second, or back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the end named first when the wire was made (`a`, or the host of a
    /// switch port) to the other.
    AToB,
    /// Back.
    BToA,
}

impl Direction {
    pub(crate) fn index(self) -> usize {
        match self {
            Direction::AToB => 0,
            Direction::BToA => 1,
        }
    }

    /// The direction that leaves end `side` (0 or 1).
    pub(crate) fn from_side(side: usize) -> Direction {
        if side == 0 {
            Direction::AToB
        } else {
            Direction::BToA
        }
    }
}

/// Where one end of a wire plugs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Host(HostId, LinkId),
    Switch(SwitchId, usize),
}

pub(crate) struct Wire {
    pub ends: [End; 2],
    /// `emulators[i]` carries frames leaving `ends[i]`.
    pub emulators: [Emulator; 2],
}
