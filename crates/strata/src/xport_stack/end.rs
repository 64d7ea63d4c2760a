//! One end of the `xport` node: a client connection or a listener with its
//! connections, its local ports (the control port first) and their bound UDP
//! sessions and its engine timer.

use strata_core::{Instant, SessionId, SessionRef, TimerId, Upper};
use strata_xport::{Channel, Connection, Endpoint, Listener};

pub(super) enum Kind {
    Client(Box<Connection>),
    Server(Box<Listener>),
}

/// One end: a client connection or a listener with its connections.
pub(super) struct End {
    pub(super) kind: Kind,
    pub(super) upper: Upper,
    /// Local ports, the control port first.
    pub(super) ports: Vec<u16>,
    /// The bound UDP session on each port.
    pub(super) bound: Vec<SessionRef>,
    /// Our sessions on this end (one for a client).
    pub(super) sessions: Vec<SessionId>,
    /// The engine timer and when it is due.
    pub(super) timer: Option<(Instant, TimerId)>,
    /// A listener's accepted connections, by id.
    pub(super) conns: Vec<u64>,
    /// What the receive path did, for [`super::XportReport`].
    pub(super) input: Input,
    /// A listener its application closed: it takes no new connections
    /// and goes once its accepted ones are closed (their control and data
    /// arrive on its ports).
    pub(super) draining: bool,
}

/// Counters of an end's receive path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Input {
    /// Payload bytes accepted with one copy, from the received frame
    /// straight to their final offset in the application's buffer.
    pub placed: u64,
    /// Payload bytes accepted after a first copy that gathered a datagram
    /// spread over several pieces of its message (an IP-reassembled one).
    pub copied: u64,
    /// Control datagrams read before data datagrams that had arrived
    /// ahead of them in the same batch (§3.6).
    pub control_first: u64,
}

impl End {
    pub(super) fn endpoint(&mut self) -> &mut dyn Endpoint {
        match &mut self.kind {
            Kind::Client(c) => c.as_mut(),
            Kind::Server(l) => l.as_mut(),
        }
    }

    pub(super) fn connection(&mut self, id: Option<u64>) -> Option<&mut Connection> {
        match (&mut self.kind, id) {
            (Kind::Client(c), _) => Some(c),
            (Kind::Server(l), Some(id)) => l.connection(id),
            (Kind::Server(_), None) => None,
        }
    }

    pub(super) fn channel(&self, port: u16) -> Option<Channel> {
        let i = self.ports.iter().position(|&p| p == port)?;
        match i {
            0 => Some(Channel::Control),
            i => u8::try_from(i - 1).ok().map(Channel::Data),
        }
    }

    pub(super) fn port(&self, channel: Channel) -> Option<u16> {
        match channel {
            Channel::Control => self.ports.first().copied(),
            Channel::Data(i) => self.ports.get(usize::from(i) + 1).copied(),
        }
    }
}
