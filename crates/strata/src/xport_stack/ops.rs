//! What an application asks of an `xport` session beyond the UPI's write:
//! the private operations (post a receive buffer, finish, abort, take what
//! is ready, report) and what they answer.

use std::net::SocketAddr;

use bytes::Bytes;
use strata_core::{Cx, Message, Reply, SessionId, UpiError};
use strata_xport::{ConnectionError, Drops, PathInfo, State, Stats};

use super::XportNode;
use super::end::Input;

/// A session's private operations (`Control::Private`).
#[derive(Debug)]
pub enum XportOp {
    /// Posts a receive buffer for the next bytes of the peer's stream.
    Post(Vec<u8>),
    /// No more buffers: the stream ends after those written.
    Finish,
    /// Resets the connection.
    Abort,
    /// Takes what is ready: answered with a [`Taken`].
    Take,
    /// Counters and path figures: answered with an [`XportReport`].
    Report,
    /// To the node, no session: the listener on control port `port` takes
    /// a first set-up from `peer` without the cookie round trip, `peer`'s
    /// address being proven another way (FTP's `XPSV`: the control
    /// connection's TCP peer). See `strata_xport::Listener::expect`.
    Expect {
        /// The listener's control port.
        port: u16,
        /// The peer's address.
        peer: std::net::IpAddr,
    },
}

/// What a session had ready ([`XportOp::Take`]).
#[derive(Debug, Default)]
pub struct Taken {
    /// Buffers given back: every byte acknowledged (§3.5.2).
    pub done: Vec<Bytes>,
    /// Receive buffers filled (or, at the end of the stream, filled up to the count).
    pub filled: Vec<(Vec<u8>, usize)>,
    /// The set-up completed.
    pub connected: bool,
    /// The peer's stream ended and all of it was delivered.
    pub peer_finished: bool,
    /// Both directions completed and were acknowledged.
    pub closed: bool,
    /// The connection ended early.
    pub lost: Option<ConnectionError>,
}

impl Taken {
    pub(super) fn is_empty(&self) -> bool {
        self.done.is_empty()
            && self.filled.is_empty()
            && !self.connected
            && !self.peer_finished
            && !self.closed
            && self.lost.is_none()
    }
}

/// A session's figures ([`XportOp::Report`]).
#[derive(Clone, Debug)]
pub struct XportReport {
    /// The connection's state.
    pub state: State,
    /// RTT, windows and rate.
    pub info: PathInfo,
    /// The connection's counters.
    pub stats: Stats,
    /// Every datagram refused for this connection, by reason, with (on an
    /// accepted connection) those its listener refused before routing.
    pub drops: Drops,
    /// The local control port.
    pub control_port: u16,
    /// The local data ports.
    pub data_ports: Vec<u16>,
    /// The peer's control address.
    pub peer: SocketAddr,
    /// The end's receive path: bytes placed with one copy or gathered
    /// first, control datagrams read first (a listener's, over all its
    /// connections).
    pub input: Input,
}

impl XportNode {
    pub(super) fn write(
        &mut self,
        sess: SessionId,
        msg: Message,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        let (s, end) = self.session(sess)?;
        let (i, conn) = (s.end, s.conn);
        let len = msg.len();
        if len > 0 {
            let c = end.connection(conn).ok_or(UpiError::Closed)?;
            c.send(msg.into_bytes()).ok_or(UpiError::Closed)?;
            self.wake_at(i, cx.now(), cx);
        } else {
            s.ready.done.push(Bytes::new());
        }
        Ok(Reply::Size(len))
    }

    pub(super) fn private(
        &mut self,
        sess: SessionId,
        op: XportOp,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match op {
            XportOp::Report => return Ok(Reply::Private(Box::new(self.report(sess)?))),
            XportOp::Expect { .. } => {
                return Err(UpiError::Unsupported("Expect on a session: ask the node"));
            }
            _ => {}
        }
        let (s, end) = self.session(sess)?;
        let (i, conn) = (s.end, s.conn);
        if let XportOp::Take = op {
            let ready = std::mem::take(&mut s.ready);
            return Ok(Reply::Private(Box::new(ready)));
        }
        let c = end.connection(conn).ok_or(UpiError::Closed)?;
        match op {
            XportOp::Post(buf) => c.post_recv(buf),
            XportOp::Finish => c.finish(),
            XportOp::Abort => c.abort(),
            XportOp::Take | XportOp::Report | XportOp::Expect { .. } => {}
        }
        self.wake_at(i, cx.now(), cx);
        Ok(Reply::Done)
    }
}
