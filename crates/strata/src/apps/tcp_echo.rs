//! The TCP echo service (RFC 862): every byte goes back to its sender.
//!
//! Each connection is echoed with TCP's own flow control end to end: data is
//! offered back with `tcp::Write`, and only what TCP took is reported
//! consumed (`tcp::ManualConsume`), so a client that does not read its echo
//! fills our send buffer, then our receive window closes and the client is
//! held back — nothing piles up here beyond one window. When the client
//! closes its direction and everything went back, the session is closed.

use std::collections::{HashMap, VecDeque};

use bytes::BytesMut;
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Control, Engine, Message, PacketMeta, Participants, Qos,
    Reply, SessionRef, UpiError,
};
use strata_proto::tcp;

use super::{any_app, tcp_of};

/// Segments at most this long are gathered while they wait.
const SMALL: usize = 512;
/// The largest gathered buffer.
const GATHER: usize = 16 * 1024;

/// Bytes received and not yet taken back by TCP, in order; short segments
/// are copied together so that many tiny ones make a short queue.
#[derive(Default)]
struct Backlog {
    queue: VecDeque<Message>,
    tail: BytesMut,
}

impl Backlog {
    fn push(&mut self, msg: Message) {
        if msg.len() > SMALL {
            self.seal();
            self.queue.push_back(msg);
            return;
        }
        if self.tail.len() + msg.len() > GATHER {
            self.seal();
        }
        for chunk in msg.chunks() {
            self.tail.extend_from_slice(chunk);
        }
    }

    fn seal(&mut self) {
        if !self.tail.is_empty() {
            let bytes = self.tail.split().freeze();
            self.queue.push_back(Message::from_bytes(bytes));
        }
    }

    /// The oldest waiting bytes.
    fn pop(&mut self) -> Option<Message> {
        if self.queue.is_empty() {
            self.seal();
        }
        self.queue.pop_front()
    }

    fn unpop(&mut self, msg: Message) {
        self.queue.push_front(msg);
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.tail.is_empty()
    }
}

/// One echoed connection.
#[derive(Default)]
struct Echoing {
    backlog: Backlog,
    /// Bytes TCP counted consumed before manual flow control was on.
    auto_consumed: usize,
    peer_closed: bool,
}

/// The echo server.
#[derive(Default)]
pub struct TcpEcho {
    conns: HashMap<SessionRef, Echoing>,
    /// Connections accepted.
    pub connections: u64,
    /// Bytes echoed (taken back by TCP).
    pub bytes: u64,
}

fn op(cx: &mut AppCx, s: SessionRef, op: impl Into<Control>) -> Result<Reply, UpiError> {
    cx.control(s.proto, Some(s.sess), op.into())
}

impl TcpEcho {
    /// Adds an echo server on TCP port `port` to `engine`.
    pub fn install(engine: &mut Engine, port: u16) -> Result<AppId, UpiError> {
        let tcp = tcp_of(engine)?;
        let id = engine.add_app(Box::new(TcpEcho::default()));
        engine.with_app(id, |_, cx| {
            cx.open_enable(tcp, Participants::local([Addr::Port(port)]), Qos::default())
        })??;
        Ok(id)
    }

    fn accept(&mut self, s: SessionRef, cx: &mut AppCx) {
        let auto = op(cx, s, tcp::ManualConsume(true)).and_then(|_| match op(cx, s, tcp::Info)? {
            Reply::Private(b) => b
                .downcast::<tcp::ConnInfo>()
                .map(|i| i.stats.bytes_received as usize)
                .map_err(|_| UpiError::Unsupported("tcp::Info")),
            _ => Err(UpiError::Unsupported("tcp::Info")),
        });
        match auto {
            Ok(auto_consumed) => {
                self.connections += 1;
                self.conns.insert(
                    s,
                    Echoing {
                        auto_consumed,
                        ..Echoing::default()
                    },
                );
            }
            Err(_) => {
                let _ = op(cx, s, tcp::Abort);
            }
        }
    }

    /// Offers waiting bytes back until TCP's buffer is full; closes once the
    /// peer is done and everything went back.
    fn pump(&mut self, s: SessionRef, cx: &mut AppCx) {
        let Some(c) = self.conns.get_mut(&s) else {
            return;
        };
        let mut taken = 0;
        while let Some(msg) = c.backlog.pop() {
            let len = msg.len();
            let n = match op(cx, s, tcp::Write(msg.clone())) {
                Ok(Reply::Size(n)) => n,
                _ => 0,
            };
            taken += n;
            if n < len {
                let mut rest = msg;
                c.backlog.unpop(rest.split_off(n));
                break;
            }
        }
        self.bytes += taken as u64;
        let skip = taken.min(c.auto_consumed);
        c.auto_consumed -= skip;
        if taken > skip {
            let _ = op(cx, s, tcp::Consumed(taken - skip));
        }
        if c.peer_closed && c.backlog.is_empty() {
            self.conns.remove(&s);
            let _ = cx.close(s);
        }
    }
}

impl App for TcpEcho {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        let Some(s) = s else { return };
        if let Some(c) = self.conns.get_mut(&s) {
            c.backlog.push(msg);
            self.pump(s, cx);
        }
    }

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match event {
            AppEvent::OpenDone { session, .. } => self.accept(session, cx),
            AppEvent::Writable(s) => self.pump(s, cx),
            AppEvent::PeerClosed(s) => {
                if let Some(c) = self.conns.get_mut(&s) {
                    c.peer_closed = true;
                }
                self.pump(s, cx);
            }
            AppEvent::Closed { session, .. } => {
                self.conns.remove(&session);
            }
            AppEvent::Connected(_) => {}
        }
    }

    any_app!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_keeps_order_and_gathers_short_segments() {
        let mut b = Backlog::default();
        b.push(Message::from_slice(&[1; 1000]));
        for _ in 0..100 {
            b.push(Message::from_slice(&[2]));
        }
        b.push(Message::from_slice(&[3; 600]));
        b.push(Message::from_slice(&[4; 10]));
        assert_eq!(b.queue.len(), 3, "the 100 one-byte segments are one");
        let mut out = Vec::new();
        while let Some(m) = b.pop() {
            out.extend(m.to_vec());
        }
        let mut want = vec![1; 1000];
        want.extend([2; 100]);
        want.extend([3; 600]);
        want.extend([4; 10]);
        assert_eq!(out, want);
        assert!(b.is_empty());
    }
}
