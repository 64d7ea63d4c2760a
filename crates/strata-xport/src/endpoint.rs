//! What a driver needs of either end: a [`crate::Connection`] (client or an
//! accepted one) or a [`crate::Listener`] (the server's set-up and all its
//! connections). A driver written against this trait runs both.

use std::net::SocketAddr;
use std::time::Instant;

use crate::conn::{Channel, Connection, Transmit};
use crate::listener::Listener;
use crate::stats::DropReason;

/// A sans-I/O end a driver moves datagrams and time for.
pub trait Endpoint {
    /// A datagram arrived on `channel` from `from`; returns the reason it
    /// was dropped, if it was (counted in the end's statistics too).
    fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        datagram: &[u8],
    ) -> Option<DropReason>;
    /// The next datagram to send; its header is written into `buf`.
    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit>;
    /// When the timers next need running.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Runs the timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
}

impl Endpoint for Connection {
    fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        datagram: &[u8],
    ) -> Option<DropReason> {
        Connection::handle(self, now, from, channel, datagram)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        Connection::poll_transmit(self, now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Connection::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Connection::handle_timeout(self, now)
    }
}

impl Endpoint for Listener {
    fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        datagram: &[u8],
    ) -> Option<DropReason> {
        Listener::handle(self, now, from, channel, datagram)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        Listener::poll_transmit(self, now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Listener::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Listener::handle_timeout(self, now)
    }
}
