//! Participants: the addresses an `open` names, as a stack each layer pops its own
//! part from (the x-kernel's `Part`). The application pushes the lowest layer's
//! address first and its own layer's last, so the top of the stack is always the
//! part for the layer being opened.

use std::fmt;
use std::net::Ipv4Addr;

use smallvec::SmallVec;

use crate::meta::HwAddr;

/// One layer's part of an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    /// A link-layer address.
    Hw(HwAddr),
    /// A network-layer address.
    Ip(Ipv4Addr),
    /// A transport port.
    Port(u16),
    /// A DAA application identifier (seed 000 §4.2.1).
    AppId(u32),
    /// An AppleTalk node: network and node number (Inside AppleTalk ch. 4;
    /// DDP's socket is a `Port` above it).
    AppleTalk {
        /// Network number.
        net: u16,
        /// Node number.
        node: u8,
    },
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Hw(a) => write!(f, "{a}"),
            Addr::Ip(a) => write!(f, "{a}"),
            Addr::Port(p) => write!(f, ":{p}"),
            Addr::AppId(id) => write!(f, "app:{id}"),
            Addr::AppleTalk { net, node } => write!(f, "{net}.{node}"),
        }
    }
}

/// One end of a conversation: a stack of per-layer address parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Participant(SmallVec<[Addr; 4]>);

macro_rules! pop_kind {
    ($(#[$doc:meta])* $fn:ident, $variant:ident, $ty:ty) => {
        $(#[$doc])*
        pub fn $fn(&mut self) -> Option<$ty> {
            match self.0.last() {
                Some(Addr::$variant(v)) => {
                    let v = *v;
                    self.0.pop();
                    Some(v)
                }
                _ => None,
            }
        }
    };
}

impl Participant {
    /// An empty participant (any address).
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a participant from parts, lowest layer first.
    pub fn of(parts: impl IntoIterator<Item = Addr>) -> Self {
        Participant(parts.into_iter().collect())
    }

    /// Pushes the part for the next layer up.
    pub fn push(&mut self, a: Addr) {
        self.0.push(a);
    }

    /// The part on top, for the layer being opened.
    pub fn top(&self) -> Option<Addr> {
        self.0.last().copied()
    }

    /// Pops the top part, whatever its kind.
    pub fn pop(&mut self) -> Option<Addr> {
        self.0.pop()
    }

    /// True when no part is left.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pop_kind!(
        /// Pops the top part if it is a port.
        pop_port, Port, u16
    );
    pop_kind!(
        /// Pops the top part if it is a network address.
        pop_ip, Ip, Ipv4Addr
    );
    pop_kind!(
        /// Pops the top part if it is a hardware address.
        pop_hw, Hw, HwAddr
    );
    pop_kind!(
        /// Pops the top part if it is an application identifier.
        pop_app_id, AppId, u32
    );

    /// Pops the top part if it is an AppleTalk node, as (network, node).
    pub fn pop_appletalk(&mut self) -> Option<(u16, u8)> {
        match self.0.last() {
            Some(&Addr::AppleTalk { net, node }) => {
                self.0.pop();
                Some((net, node))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Participant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 && !matches!(a, Addr::Port(_)) {
                f.write_str("/")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// The two ends an `open` names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Participants {
    /// The peer (empty for a passive open that accepts anyone).
    pub remote: Participant,
    /// This end (empty to let each layer choose).
    pub local: Participant,
}

impl Participants {
    /// Participants naming only the remote end.
    pub fn remote(parts: impl IntoIterator<Item = Addr>) -> Self {
        Participants {
            remote: Participant::of(parts),
            local: Participant::new(),
        }
    }

    /// Participants naming only the local end (a passive open).
    pub fn local(parts: impl IntoIterator<Item = Addr>) -> Self {
        Participants {
            remote: Participant::new(),
            local: Participant::of(parts),
        }
    }

    /// Adds local parts to these participants.
    pub fn with_local(mut self, parts: impl IntoIterator<Item = Addr>) -> Self {
        self.local = Participant::of(parts);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layer_pops_its_own_part() {
        let ip = Ipv4Addr::new(198, 18, 0, 2);
        let mut p = Participant::of([Addr::Ip(ip), Addr::Port(7)]);
        assert_eq!(p.pop_ip(), None, "the port is on top, not the address");
        assert_eq!(p.pop_port(), Some(7));
        assert_eq!(p.pop_ip(), Some(ip));
        assert!(p.is_empty());
    }
}
