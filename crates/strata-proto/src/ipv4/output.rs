//! The outbound half of IPv4: next hop, fragmentation, and finding the
//! neighbour's Ethernet session through ARP (holding packets while it resolves).

use std::net::Ipv4Addr;

use strata_core::{
    Addr, Control, Cx, DropReason, HwAddr, Instant, Message, Participants, Qos, Reply, SessionRef,
    UpiError,
};

use super::fragment::fragments;
use super::wire::MIN_HEADER_LEN;
use super::wire::Repr;
use super::{Ipv4, MAX_PAYLOAD};

/// Where a datagram goes on the link.
#[derive(Clone, Copy)]
pub(super) enum Hop {
    /// Everyone on the link (limited or subnet broadcast).
    Broadcast,
    /// This neighbour.
    Via(Ipv4Addr),
}

/// A session's way out: the next hop's Ethernet session, and until when ARP
/// vouches for it. IPv4 sessions keep one, so a datagram on a session goes down
/// with no route or neighbour lookup (the downward half of a DAA path). A way
/// is stale once the neighbour cache has let any session go (`epoch`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Way {
    link: SessionRef,
    valid_until: Instant,
    epoch: u64,
}

/// The Ethernet session for a next hop, or why there is none yet.
enum Link {
    Ready(SessionRef, Instant),
    Pending(Ipv4Addr),
    Failed(DropReason),
}

/// Where each piece of a datagram goes.
#[derive(Clone, Copy)]
enum Out {
    /// Down this Ethernet session.
    Push(SessionRef),
    /// To ARP, held for this next hop, to go out under this ethertype.
    Hold(Ipv4Addr, u32),
}

impl Ipv4 {
    /// Where a datagram to `dst` goes first; `None` when nowhere: no route, or
    /// an address a host does not send to (0.0.0.0, loopback, multicast, itself).
    pub(super) fn hop(&self, dst: Ipv4Addr) -> Option<Hop> {
        if self.is_broadcast(dst) {
            return Some(Hop::Broadcast);
        }
        if dst.is_unspecified()
            || dst.is_multicast()
            || dst.is_loopback()
            || dst == self.cidr.address()
        {
            return None;
        }
        self.routes.next_hop(dst).map(Hop::Via)
    }

    /// The link's MTU, asked once of the link layer.
    pub(super) fn mtu(&mut self, cx: &mut Cx) -> usize {
        if let Some(m) = self.mtu {
            return m;
        }
        match cx.control(self.link, None, Control::GetMaxPayload) {
            Ok(Reply::Size(m)) => {
                self.mtu = Some(m);
                m
            }
            // RFC 791 §3.1: every host must accept datagrams of 576 bytes.
            _ => 576,
        }
    }

    /// The largest payload the link cuts for us (segmentation offload), 0
    /// when it does not.
    pub(super) fn segmentation(&mut self, cx: &mut Cx) -> usize {
        match cx.control(self.link, None, Control::GetSegmentation) {
            Ok(Reply::Size(n)) => n
                .min(MAX_PAYLOAD + MIN_HEADER_LEN)
                .saturating_sub(MIN_HEADER_LEN),
            _ => 0,
        }
    }

    /// Where a datagram to `dst` goes: down an Ethernet session (with the way to
    /// keep), or into ARP's queue while it resolves. `None`, counted, when it
    /// cannot leave.
    fn way_out(&mut self, dst: Ipv4Addr, cx: &mut Cx) -> Option<(Out, Option<Way>)> {
        let Some(hop) = self.hop(dst) else {
            cx.count_drop(DropReason::NoRoute);
            return None;
        };
        match self.link_for(hop, cx) {
            Link::Ready(link, valid_until) => {
                let epoch = self.neighbours.epoch();
                let way = Way {
                    link,
                    valid_until,
                    epoch,
                };
                Some((Out::Push(link), Some(way)))
            }
            Link::Pending(next_hop) => match cx.number_in(self.link) {
                Some(number) => Some((Out::Hold(next_hop, number), None)),
                None => {
                    cx.count_drop(DropReason::NoProtocol);
                    None
                }
            },
            Link::Failed(reason) => {
                cx.count_drop(reason);
                None
            }
        }
    }

    /// The Ethernet session reaching `hop`, opening one when ARP knows the
    /// neighbour and it is new or changed.
    fn link_for(&mut self, hop: Hop, cx: &mut Cx) -> Link {
        let key = match hop {
            Hop::Broadcast => Ipv4Addr::BROADCAST,
            Hop::Via(ip) => ip,
        };
        if let Some((s, until)) = self.neighbours.get(key, cx.now()) {
            return Link::Ready(s, until);
        }
        let (hw, valid_until) = match hop {
            Hop::Broadcast => (HwAddr::BROADCAST, Instant::FAR_FUTURE),
            Hop::Via(ip) => match cx.control(self.arp, None, Control::Resolve(ip)) {
                Ok(Reply::Resolved { hw, valid_until }) => (hw, valid_until),
                Ok(Reply::Pending) => return Link::Pending(ip),
                _ => return Link::Failed(DropReason::Unresolved),
            },
        };
        if let Some(s) = self.neighbours.confirm(key, hw, valid_until) {
            return Link::Ready(s, valid_until);
        }
        match cx.open(
            self.link,
            Participants::remote([Addr::Hw(hw)]),
            Qos::default(),
        ) {
            Ok(s) => {
                for old in self.neighbours.insert(key, hw, valid_until, s) {
                    cx.close(old);
                }
                Link::Ready(s, valid_until)
            }
            Err(e) => Link::Failed(e.into()),
        }
    }

    /// Sends one datagram of `protocol` to `dst`, fragmenting as needed, by the
    /// session's `way` out while ARP vouches for it. Returns the way to keep.
    pub(super) fn send(
        &mut self,
        dst: Ipv4Addr,
        protocol: u8,
        payload: Message,
        way: Option<Way>,
        cx: &mut Cx,
    ) -> Option<Way> {
        if payload.len() > MAX_PAYLOAD {
            cx.count_drop(DropReason::Other("too-big"));
            return way;
        }
        let now = cx.now();
        let epoch = self.neighbours.epoch();
        let (out, way) = match way.filter(|w| w.valid_until > now && w.epoch == epoch) {
            Some(w) => (Out::Push(w.link), Some(w)),
            None => self.way_out(dst, cx)?,
        };
        let seg = usize::from(payload.segment_size());
        // A super-segment is one datagram the link cuts into as many as
        // there are segments, each taking the next identification.
        let (mtu, idents) = if seg > 0 {
            (usize::MAX, payload.len().div_ceil(seg).max(1))
        } else {
            (self.mtu(cx), 1)
        };
        let ident = *self.ident.get_or_insert_with(|| cx.random_u32() as u16);
        self.ident = Some(ident.wrapping_add(idents as u16));
        let src = self.cidr.address();
        let ttl = self.ttl;

        // One piece when the payload fits, built straight away: the common
        // case costs one header and no fragment iterator.
        let header = |more_frags, frag_offset, payload_len| Repr {
            src,
            dst,
            protocol,
            ttl,
            tos: 0,
            ident,
            dont_frag: false,
            more_frags,
            frag_offset,
            payload_len,
        };
        if payload.len() + MIN_HEADER_LEN <= mtu {
            let header = header(false, 0, payload.len());
            let mut frame = payload;
            if let Some(room) = frame.push(MIN_HEADER_LEN).first_chunk_mut() {
                header.write(room);
            }
            frame.set_segment_size(seg as u16);
            self.emit(out, frame, cx);
            return way;
        }
        let mut pieces = 0;
        for piece in fragments(payload, mtu) {
            pieces += 1;
            let header = header(piece.more, piece.offset, piece.payload.len());
            let mut frame = piece.payload;
            frame.push_slice(&header.to_bytes());
            frame.set_segment_size(seg as u16);
            self.emit(out, frame, cx);
        }
        if pieces > 1 {
            cx.count("fragmented");
        }
        way
    }

    /// Sends one finished datagram (or fragment) its way: down the Ethernet
    /// session, or to ARP to hold.
    #[inline]
    fn emit(&mut self, out: Out, frame: Message, cx: &mut Cx) {
        match out {
            Out::Push(s) => cx.push(s, frame),
            Out::Hold(next_hop, number) => {
                let hold = Control::Hold {
                    next_hop,
                    msg: frame,
                    number,
                };
                // ARP counts every held packet it drops. These errors mean
                // the call never reached ARP's Hold: the packet is ours to count.
                if let Err(
                    e @ (UpiError::Busy | UpiError::NoSuchObject(_) | UpiError::Unsupported(_)),
                ) = cx.control(self.arp, None, hold)
                {
                    cx.count_drop(e.into());
                }
            }
        }
    }
}
