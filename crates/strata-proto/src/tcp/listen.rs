//! Passive opens (RFC 9293 §3.10.7.2, LISTEN): a listener on a port turns
//! each acceptable SYN into a connection in SYN-RECEIVED that answers with
//! its SYN-ACK; when the handshake completes the connection announces itself
//! to the listener's owner with `open_done` (an application hears
//! `AppEvent::OpenDone`).
//!
//! The backlog bounds the connections of a listener still in SYN-RECEIVED
//! (the SYN queue). A SYN beyond it is dropped and counted (`backlog-full`);
//! the client's SYN retransmission tries again later, as with Linux without
//! SYN cookies. Established connections are announced at once, so the accept
//! queue of a socket API is the application's: in-engine applications take
//! every connection as it comes, and a socket layer that wants a bound on
//! unaccepted connections aborts (`tcp::Abort`) those beyond it.

use std::net::Ipv4Addr;

use strata_core::{Addr, Cx, DropReason, Message, PacketMeta, Participants, Qos, Up, Upper};

use super::Tcp;
use super::conn::{Conn, Offer};
use super::options::MAX_WINDOW_SCALE;
use super::seq::Seq;
use super::state::State;
use super::wire::{Flags, Repr};
use crate::info::{Ipv4Info, Ports, link_broadcast};

/// A passive open on a port.
#[derive(Clone, Debug)]
pub(crate) struct Listener {
    /// Who owns it.
    pub upper: Upper,
    /// Most connections in SYN-RECEIVED.
    pub backlog: usize,
    /// Connections in SYN-RECEIVED now.
    pub pending: usize,
}

/// The window scale that lets a window of `rcvbuf_max` bytes be advertised.
pub fn window_scale_for(rcvbuf_max: usize) -> u8 {
    let mut shift = 0;
    while shift < MAX_WINDOW_SCALE && (usize::from(u16::MAX) << shift) < rcvbuf_max {
        shift += 1;
    }
    shift
}

impl Tcp {
    /// A segment for a port with a listener and no connection.
    pub(super) fn listen_segment(
        &mut self,
        seg: &Repr,
        payload: &Message,
        meta: &PacketMeta,
        cx: &mut Cx,
    ) -> Up {
        let f = seg.flags;
        if f.has(Flags::RST) {
            return Up::Drop(DropReason::Other("rst-to-listener"));
        }
        if f.has(Flags::ACK) {
            // An ACK for a connection we do not have: <SEQ=SEG.ACK><CTL=RST>.
            self.reset(meta, seg.ack, None, cx);
            return Up::Drop(DropReason::NoSession);
        }
        if !f.has(Flags::SYN) {
            return Up::Drop(DropReason::Other("no-syn"));
        }
        let Some(listener) = self.table.listeners.get(&seg.dst_port).cloned() else {
            return Up::Drop(DropReason::NoSession);
        };
        if listener.pending >= listener.backlog {
            return Up::Drop(DropReason::Other("backlog-full"));
        }
        let Some(me) = self.address(cx) else {
            return Up::Drop(DropReason::NoRoute);
        };
        let remote = (Ipv4Info::from_meta(meta).src, seg.src_port);
        let ip = match cx.open(
            self.ip,
            Participants::remote([Addr::Ip(remote.0)]),
            Qos::default(),
        ) {
            Ok(ip) => ip,
            Err(e) => return Up::Drop(e.into()),
        };
        let peer = &seg.options;
        let cfg = &self.cfg;
        let offer = Offer {
            sack: cfg.sack && peer.sack_permitted,
            timestamps: cfg.timestamps && peer.timestamp.is_some(),
            wscale: (cfg.window_scaling && peer.window_scale.is_some())
                .then(|| window_scale_for(cfg.rcvbuf_max)),
            mss: self.mss(cx),
        };
        let now = cx.now();
        let isn = self.isn(cx);
        let iss = isn.isn((me, seg.dst_port), remote, now);
        let ts_offset = isn.ts_offset((me, seg.dst_port), remote);
        let mut conn = Conn::new(
            strata_core::SessionId(0),
            State::SynReceived,
            listener.upper,
            (me, seg.dst_port),
            remote,
            ip,
            iss,
            offer,
            &self.cfg,
            now,
            ts_offset,
        );
        conn.listener = Some(seg.dst_port);
        conn.negotiate(seg.seq, peer, &self.cfg, now);
        conn.snd.wnd = u32::from(seg.window);
        conn.snd.max_wnd = conn.snd.wnd;
        conn.snd.wl1 = seg.seq;
        if !payload.is_empty() {
            // Data on a SYN is not acknowledged, so the peer sends it again.
            cx.count("syn-data-ignored");
        }
        let Some(id) = self.table.insert(conn) else {
            self.table.retire(remote.0, ip, cx);
            return Up::Drop(DropReason::QueueFull);
        };
        if let Some(l) = self.table.listeners.get_mut(&seg.dst_port) {
            l.pending += 1;
        }
        cx.count("passive-open");
        cx.acting_for(id);
        if let Some(c) = self.table.conns.get_mut(id) {
            c.output(&self.cfg, cx);
        }
        Up::Consumed
    }

    /// Answers a segment that belongs to no connection with a reset (RFC 9293
    /// §3.10.7.1): <SEQ=SEG.ACK><CTL=RST> when it had an ACK, else
    /// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. Never to a broadcast.
    pub(super) fn reset(&mut self, meta: &PacketMeta, seq: Seq, ack: Option<Seq>, cx: &mut Cx) {
        let Some(me) = self.address(cx) else {
            return;
        };
        let ip = Ipv4Info::from_meta(meta);
        let Some(ports) = meta.get::<Ports>() else {
            return;
        };
        if ip.dst != me || link_broadcast(meta) || ip.src == Ipv4Addr::UNSPECIFIED {
            return;
        }
        let Some(session) = self.table.peer(ip.src, self.ip, cx) else {
            cx.count("reset-unroutable");
            return;
        };
        let repr = Repr {
            src_port: ports.dst,
            dst_port: ports.src,
            seq,
            ack: ack.unwrap_or(Seq(0)),
            flags: if ack.is_some() {
                Flags::RST | Flags::ACK
            } else {
                Flags::RST
            },
            window: 0,
            urgent: 0,
            options: Default::default(),
        };
        let bytes = repr.to_bytes(me, ip.src, std::iter::empty());
        cx.count("reset-sent");
        cx.push(session, Message::from(bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_scale_is_the_least_that_covers_the_largest_buffer() {
        assert_eq!(window_scale_for(65_535), 0);
        assert_eq!(window_scale_for(65_536), 1);
        assert_eq!(window_scale_for(6 * 1024 * 1024), 7);
        assert_eq!(window_scale_for(usize::MAX), 14);
    }
}
