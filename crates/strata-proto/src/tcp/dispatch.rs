//! Which connection a segment is for, and what goes up: TCP's demux, the
//! first half of its pop (header, checksum, lookup), and the translation of a
//! connection's verdict into the engine's `Up`.

use strata_core::{
    Cx, Demux, DropReason, Message, Next, PacketMeta, SessionId, SessionRef, Target, Up, Upper,
};

use super::Tcp;
use super::conn::Conn;
use super::input::Outcome;
use super::seq::Seq;
use super::state::State;
use super::wire::{self, Flags, HEADER_LEN, Header, Repr};
use crate::info::{Ipv4Info, Ports, link_broadcast};

fn next_of(upper: Upper) -> Next {
    match upper {
        Upper::App(a) => Next::App(a),
        Upper::Proto(p) => Next::Proto(p),
    }
}

/// Whether a segment is in-order data for an established connection whose
/// upper knows it: what demux sends straight up.
fn in_order_data(c: &Conn, seq: Seq, has_payload: bool, flags: Flags) -> bool {
    has_payload
        && c.announced
        && c.attached
        && c.state.is_synchronized()
        && c.state.can_receive()
        && seq == c.rcv.nxt
        && flags.has(Flags::ACK)
        && !flags.has(Flags::SYN)
        && !flags.has(Flags::RST)
}

impl Tcp {
    /// Pure demux (see the module docs).
    pub(super) fn demux_segment(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        let h = match Header::new_checked(hdr) {
            Ok(h) => h,
            Err(e) => return e.demux(),
        };
        let ports = Ports {
            src: h.src_port(),
            dst: h.dst_port(),
        };
        if meta.set(ports).is_err() {
            return Demux::Drop(DropReason::Other("meta-full"));
        }
        let hdr_len = h.header_len();
        let ip = Ipv4Info::from_meta(meta);
        let tuple = (ip.dst, ports.dst, ip.src, ports.src);
        if let Some(id) = self.table.lookup(&tuple)
            && let Some(c) = self.table.conns.get(id)
        {
            let has_payload = meta.present > hdr_len;
            let target = Target::Session(id);
            if in_order_data(c, h.seq(), has_payload, h.flags()) {
                return Demux::To {
                    target,
                    hdr_len,
                    next: next_of(c.upper),
                };
            }
            if has_payload && c.state.can_receive() && h.seq() != c.rcv.nxt {
                return Demux::Stateful { target };
            }
            return Demux::To {
                target,
                hdr_len,
                next: Next::Here,
            };
        }
        let target = if self.table.listeners.contains_key(&h.dst_port()) {
            Target::Enable(u32::from(h.dst_port()))
        } else {
            Target::Protocol
        };
        Demux::To {
            target,
            hdr_len,
            next: Next::Here,
        }
    }

    /// Pop: the connection is demux's target when that is the segment's
    /// (a path's target under DAA may be stale, so the 4-tuple is compared),
    /// and is looked up from the header otherwise.
    pub(super) fn pop_segment(
        &mut self,
        target: Target,
        msg: &mut Message,
        meta: &mut PacketMeta,
        cx: &mut Cx,
    ) -> Up {
        let Some(first) = msg.pullup(HEADER_LEN) else {
            return Up::Drop(DropReason::Truncated);
        };
        let need = (usize::from(first[12] >> 4) * 4).max(HEADER_LEN);
        let Some(bytes) = msg.pullup(need) else {
            return Up::Drop(DropReason::Truncated);
        };
        let seg = match Header::new_checked(bytes) {
            Ok(h) => Repr::parse(&h),
            Err(e) => return Up::Drop(e.into()),
        };
        if !meta.demuxed {
            let ports = Ports {
                src: seg.src_port,
                dst: seg.dst_port,
            };
            if meta.set(ports).is_err() {
                return Up::Drop(DropReason::Other("meta-full"));
            }
        }
        let ip = Ipv4Info::from_meta(meta);
        // TCP is unicast (RFC 1122 §4.2.3.10): nothing to a broadcast.
        if Some(ip.dst) != self.address(cx) || link_broadcast(meta) {
            return Up::Drop(DropReason::NotForUs);
        }
        let tuple = (ip.dst, seg.dst_port, ip.src, seg.src_port);
        let conn =
            match target {
                Target::Session(id)
                    if self.table.conns.get(id).is_some_and(|c| {
                        (c.local.0, c.local.1, c.remote.0, c.remote.1) == tuple
                    }) =>
                {
                    Some(id)
                }
                _ => self.table.lookup(&tuple),
            };
        // Segments the link's receive offload merged were verified one by one
        // as they arrived (`Message::segment_size`).
        let verify = conn
            .and_then(|id| self.table.conns.get(id))
            .map_or(self.cfg.checksum, |c| c.checksum)
            && msg.segment_size() == 0;
        if verify && !wire::verifies(ip.src, ip.dst, msg.len(), msg.chunks()) {
            return Up::Drop(DropReason::BadChecksum);
        }
        msg.strip(need);
        let payload = std::mem::take(msg);
        match conn {
            Some(id) => self.conn_segment(id, &seg, payload, msg, meta, cx),
            None if self.table.listeners.contains_key(&seg.dst_port) => {
                self.listen_segment(&seg, &payload, meta, cx)
            }
            None => {
                self.refuse(&seg, payload.len(), meta, cx);
                Up::Drop(DropReason::NoSession)
            }
        }
    }

    /// RFC 9293 §3.10.7.1: a segment for no connection and no listener.
    fn refuse(&mut self, seg: &Repr, payload_len: usize, meta: &PacketMeta, cx: &mut Cx) {
        if seg.flags.has(Flags::RST) {
            return;
        }
        if seg.flags.has(Flags::ACK) {
            self.reset(meta, seg.ack, None, cx);
        } else {
            let len = payload_len as u32
                + u32::from(seg.flags.has(Flags::SYN))
                + u32::from(seg.flags.has(Flags::FIN));
            self.reset(meta, Seq(0), Some(seg.seq + len), cx);
        }
    }

    /// A segment for connection `id`.
    fn conn_segment(
        &mut self,
        id: SessionId,
        seg: &Repr,
        payload: Message,
        msg: &mut Message,
        meta: &PacketMeta,
        cx: &mut Cx,
    ) -> Up {
        cx.acting_for(id);
        let Some(c) = self.table.conns.get_mut(id) else {
            return Up::Drop(DropReason::NoSession);
        };
        // RFC 9293 §3.10.7.4 and RFC 6191: a new SYN may reopen a connection
        // in TIME-WAIT when it is clearly of a new incarnation.
        if c.state == State::TimeWait
            && seg.flags == Flags::SYN
            && self.table.listeners.contains_key(&seg.dst_port)
            && new_incarnation(c, seg)
        {
            self.remove(id, cx);
            cx.count("time-wait-reopened");
            return self.listen_segment(seg, &payload, meta, cx);
        }
        let next = next_of(c.upper);
        let predicted = in_order_data(c, seg.seq, !payload.is_empty(), seg.flags);
        // Only a connection that was open before this segment can deliver
        // through the engine: one this segment opened must first be announced.
        let was_open = c.state.is_synchronized();
        let upper = c.upper;
        let outcome = c.on_segment(seg, payload, &self.cfg, cx);
        self.settle(id, cx);
        match outcome {
            Outcome::Consumed => Up::Consumed,
            Outcome::Drop(reason) => Up::Drop(reason),
            Outcome::Deliver(data) if was_open || matches!(upper, Upper::Proto(_)) => {
                *msg = data;
                if predicted {
                    Up::Continue
                } else {
                    Up::Redirect(next)
                }
            }
            Outcome::Deliver(data) => {
                if let Upper::App(app) = upper {
                    let session = SessionRef::new(cx.me(), id);
                    cx.deliver(app, Some(session), data, meta);
                    cx.count("delivered-after-open");
                }
                Up::Consumed
            }
        }
    }
}

/// RFC 6191: a SYN beyond the old connection's sequence numbers, or with a
/// newer timestamp, belongs to a new connection.
fn new_incarnation(c: &Conn, seg: &Repr) -> bool {
    match (c.ts, seg.options.timestamp) {
        (Some(ts), Some(t)) => (t.val.wrapping_sub(ts.recent) as i32) > 0,
        _ => seg.seq > c.rcv.nxt,
    }
}
