//! Application anchors: the top of the graph (seed 000 §4.1 — in the x-kernel user
//! processes are anchor protocols). In-engine callback applications implement
//! [`App`] and run inside the engine with no overhead; socket-like handles in the
//! `strata` crate are an `App` that forwards to another thread.

use std::any::Any;

use crate::cx::AppCx;
use crate::ids::SessionRef;
use crate::message::Message;
use crate::meta::PacketMeta;
use crate::participant::Participants;

/// Something that happened to one of an application's sessions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppEvent {
    /// A passive open produced a new session (the x-kernel's `openDone`).
    OpenDone {
        /// The new session.
        session: SessionRef,
        /// Its two ends.
        parts: Participants,
    },
    /// An active open completed its handshake.
    Connected(SessionRef),
    /// The session can accept more data after refusing some.
    Writable(SessionRef),
    /// The peer will send no more data (end of stream).
    PeerClosed(SessionRef),
    /// The session is gone: closed by both ends, reset, timed out or unreachable.
    Closed {
        /// The session.
        session: SessionRef,
        /// Why, when it did not end cleanly.
        error: Option<crate::error::UpiError>,
    },
}

/// An application running inside the engine.
pub trait App: Send + 'static {
    /// Data arrived on `session` (or, for an application bound to a protocol number
    /// without a session, from the protocol below).
    fn receive(
        &mut self,
        session: Option<SessionRef>,
        msg: Message,
        meta: &PacketMeta,
        cx: &mut AppCx,
    );

    /// A session event.
    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        let _ = (event, cx);
    }

    /// A timer this application set has fired.
    fn timer(&mut self, token: u64, cx: &mut AppCx) {
        let _ = (token, cx);
    }

    /// Whether the application can take another packet now. DAA asks this at the
    /// lowest layer, before any protocol work (seed 000 §3.2's early resource check).
    fn has_room(&self) -> bool {
        true
    }

    /// The application as `Any`, so its owner can look inside.
    fn as_any(&self) -> &dyn Any;

    /// The application as mutable `Any`.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
