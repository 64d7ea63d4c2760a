//! Receiving straight into the application's buffers (§3.5.1): where a
//! connection expects its next data packets, and a data packet whose
//! payload a driver already put there.

use std::net::SocketAddr;
use std::time::Instant;

use super::{Channel, Connection, State};
use crate::endpoint::RxTargets;
use crate::stats::DropReason;
use crate::wire::{self, DataRepr, Repr};

impl Connection {
    /// Stretches of the posted receive buffers where the next data packets
    /// of data socket `channel` are expected (at most `max`), for a driver
    /// that scatters each datagram's header into its own buffer and the
    /// payload there; `None` when nothing is expected.
    pub fn rx_targets(&mut self, channel: Channel, max: usize) -> Option<RxTargets<'_>> {
        let Channel::Data(i) = channel else {
            return None;
        };
        if self.state != State::Established || self.peer_data.is_empty() {
            return None;
        }
        let lanes = self.peer_data.len() as u32;
        let places = self.receiver.targets(u32::from(i), lanes, max);
        if places.is_empty() {
            return None;
        }
        Some(RxTargets {
            conn: self.own_id,
            header: wire::data_header_len(if self.peer_data_checksum {
                wire::flags::DATA_CHECKSUM
            } else {
                0
            }),
            payload: crate::config::full_payload(self.config.mss, self.peer_data_checksum) as usize,
            places,
        })
    }

    /// Feeds a data packet whose header is `header` and whose `len` payload
    /// bytes a driver received straight into this connection's posted
    /// buffers, at the stream offset the header names (where
    /// [`Connection::rx_targets`] expected it). Checked and counted like
    /// [`Connection::handle`].
    pub fn handle_placed(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        len: usize,
    ) -> Option<DropReason> {
        match placed_header(channel, header, len).and_then(|d| self.on_placed(now, from, d, header))
        {
            Ok(()) => None,
            Err(r) => self.drop_packet(r),
        }
    }

    /// A placed data packet parsed (the listener parses to route).
    pub(crate) fn on_placed(
        &mut self,
        now: Instant,
        from: SocketAddr,
        d: DataRepr,
        header: &[u8],
    ) -> Result<(), DropReason> {
        let ok = self
            .receiver
            .posted(self.receiver.widen(d.offset), d.len as usize)
            .is_some_and(|p| wire::data_checksum_ok(header, p));
        if !ok {
            return Err(wire::WireError::DataChecksum.into());
        }
        self.handle_repr(now, from, Repr::Data(d), None)
    }
}

impl Connection {
    /// Feeds a data packet that arrived in two pieces, its header `header`
    /// and its payload `payload` (a message whose header and payload are
    /// separate segments, as Strata's own UDP hands them over): every check
    /// of [`Connection::handle`], then the payload copied once, straight
    /// from where it lies to its final offset in the posted buffers.
    pub fn handle_split(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        payload: &[u8],
    ) -> Option<DropReason> {
        match placed_header(channel, header, payload.len())
            .and_then(|d| self.on_split(now, from, d, header, payload))
        {
            Ok(()) => None,
            Err(r) => self.drop_packet(r),
        }
    }

    /// A split data packet parsed (the listener parses to route).
    pub(crate) fn on_split(
        &mut self,
        now: Instant,
        from: SocketAddr,
        d: DataRepr,
        header: &[u8],
        payload: &[u8],
    ) -> Result<(), DropReason> {
        if !wire::data_checksum_ok(header, payload) {
            return Err(wire::WireError::DataChecksum.into());
        }
        self.handle_repr(now, from, Repr::Data(d), Some(payload))
    }
}

/// A placed data packet's header, parsed: it must have come on a data socket.
pub(crate) fn placed_header(
    channel: Channel,
    header: &[u8],
    len: usize,
) -> Result<DataRepr, DropReason> {
    if channel == Channel::Control {
        return Err(DropReason::WrongChannel);
    }
    Ok(wire::parse_data_header(header, len)?)
}
