//! What a driver needs of either end: a [`crate::Connection`] (client or an
//! accepted one) or a [`crate::Listener`] (the server's set-up and all its
//! connections). A driver written against this trait runs both.

use std::net::SocketAddr;
use std::time::Instant;

use crate::conn::{Channel, Connection, Transmit};
use crate::listener::Listener;
use crate::stats::DropReason;

/// Stretches of an application's posted receive buffers where a connection
/// expects the next data packets of one data socket, in the order that
/// socket should bring them (§3.5.1: received data goes straight into the
/// application's buffer, the header into the library's). Every stretch but
/// the last holds a whole packet's payload; none holds data received yet, so
/// a datagram that lands in a stretch not its own overwrites nothing — the
/// driver reads each header with [`crate::wire::data_place`], feeds a packet
/// that landed at its place with [`Endpoint::handle_placed`], and copies any
/// other out before feeding it with [`Endpoint::handle`].
pub struct RxTargets<'a> {
    /// The connection whose buffers these are.
    pub conn: u64,
    /// A data packet's header length ([`crate::wire::data_header_len`]):
    /// 4 bytes longer when the peer sends the data checksum.
    pub header: usize,
    /// A whole packet's payload, bytes.
    pub payload: usize,
    /// `(stream offset, room)`.
    pub places: Vec<(u64, &'a mut [u8])>,
}

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
    /// Where the next data packets of `channel` are expected (at most
    /// `max`), or `None`: receive into the driver's own buffers.
    fn rx_targets(&mut self, channel: Channel, max: usize) -> Option<RxTargets<'_>>;
    /// A data packet with header `header` whose `len` payload bytes the
    /// driver received straight into the place [`Endpoint::rx_targets`]
    /// gave for the stream offset the header names.
    fn handle_placed(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        len: usize,
    ) -> Option<DropReason>;
    /// A data packet that arrived as a header and a payload lying apart:
    /// checked like [`Endpoint::handle`], the payload copied once, to its
    /// final offset in the application's buffers.
    fn handle_split(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        payload: &[u8],
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
    fn rx_targets(&mut self, channel: Channel, max: usize) -> Option<RxTargets<'_>> {
        Connection::rx_targets(self, channel, max)
    }
    fn handle_placed(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        len: usize,
    ) -> Option<DropReason> {
        Connection::handle_placed(self, now, from, channel, header, len)
    }
    fn handle_split(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        payload: &[u8],
    ) -> Option<DropReason> {
        Connection::handle_split(self, now, from, channel, header, payload)
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
    fn rx_targets(&mut self, channel: Channel, max: usize) -> Option<RxTargets<'_>> {
        Listener::rx_targets(self, channel, max)
    }
    fn handle_placed(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        len: usize,
    ) -> Option<DropReason> {
        Listener::handle_placed(self, now, from, channel, header, len)
    }
    fn handle_split(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        payload: &[u8],
    ) -> Option<DropReason> {
        Listener::handle_split(self, now, from, channel, header, payload)
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
