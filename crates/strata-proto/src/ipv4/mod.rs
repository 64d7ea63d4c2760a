//! IPv4 (RFC 791) as a host implements it (RFC 1122 §3): no forwarding.
//!
//! Inbound, demux checks the header and the destination (ours, limited
//! broadcast or our subnet's broadcast), records the addresses in the meta and
//! sends the payload to the session for (source, protocol) when one exists, or
//! up by protocol number. A fragment makes demux *stateful*: only pop, through
//! [`reassembly`], can say when the datagram is whole. Pop
//! verifies the checksum, trims link padding and strips the header; the
//! header's fields stay in the packet's [`Ipv4Info`](crate::info::Ipv4Info)
//! record, from which an error report rebuilds the header to quote it.
//!
//! Outbound, a session is a (remote address, protocol) pair opened by an upper
//! protocol or by an application bound to a protocol number. Push builds the
//! header, fragments to the link's MTU, picks the next hop from the routing
//! table, and finds the neighbour's Ethernet session through ARP — holding the
//! packets with ARP while the neighbour resolves.
//!
//! `GetMaxPayload` answers 65515 bytes, the most one datagram can carry: since
//! push fragments, that is what an upper layer may really hand down in one piece
//! (UDP's largest datagram is 65507 bytes, as on Linux). The payload that avoids
//! fragmentation, what TCP wants for its segment size, is the private
//! [`GetOptPayload`] (the x-kernel's GETOPTPACKET beside GETMAXPACKET).
//!
//! Segmentation offload: `GetSegmentation` answers what the link cuts, less
//! IPv4's header. A payload marked with a segment size goes down as one
//! datagram longer than the MTU, never fragmented; the link cuts it, giving
//! each piece the next identification, as Linux's GSO does, so IPv4 moves its
//! counter past all of them.
//!
//! Reassembly ([`reassembly`]) tracks RFC 815 holes over zero-copy runs,
//! bounded in datagrams, bytes and runs; a timeout drops the partial datagram
//! (counted) and reports "fragment reassembly time exceeded" when fragment zero
//! had arrived (RFC 1122 §3.3.2). The files: `input` (checks, reassembly,
//! errors), `output` (next hop, fragmentation, ARP), `route`, `neighbour`.

mod config;
pub mod fragment;
mod input;
mod neighbour;
mod output;
pub mod reassembly;
pub mod route;
pub mod wire;

use rustc_hash::FxHashMap;
use std::any::Any;
use std::net::Ipv4Addr;

use strata_core::checksum;
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, Message, Open, PacketMeta, Participant, Participants,
    ProtoId, Protocol, Reply, SessionId, Target, Up, UpiError, Upper,
};

use crate::icmp::ErrorKind;
use crate::info::Ipv4Info;
use crate::slab::{LastHit, Slab};
use crate::{Ipv4Cidr, unsupported};
use input::{record_info, up_of};
use neighbour::Neighbours;
use reassembly::{Limits, Reassembly};
use route::RouteTable;
use wire::{MAX_PACKET_LEN, MIN_HEADER_LEN, Repr};

pub use config::{OPTIONS, SPEC};

/// The most payload one datagram carries (65535 − 20).
pub const MAX_PAYLOAD: usize = MAX_PACKET_LEN - MIN_HEADER_LEN;

/// Most sessions open at once.
const MAX_SESSIONS: usize = 4096;

/// Private control: the payload that fits one link frame, MTU − 20, answered
/// as `Reply::Size`.
#[derive(Clone, Copy, Debug)]
pub struct GetOptPayload;

/// Private control: who is registered above IP under this protocol number,
/// answered as `Reply::Private(Box<Option<Upper>>)`. ICMP asks it to hand an
/// error report to the protocol the quoted datagram was for.
#[derive(Clone, Copy, Debug)]
pub struct UpperFor(pub u8);

/// Datagrams to `remote` for the upper protocol `protocol`.
#[derive(Debug)]
struct Session {
    remote: Ipv4Addr,
    protocol: u8,
    upper: Upper,
    /// Opens of the same (remote, protocol) by the same upper share it.
    refs: u32,
    /// The way out, kept while ARP vouches for it.
    way: Option<output::Way>,
}

/// The IPv4 protocol object.
pub struct Ipv4 {
    link: ProtoId,
    arp: ProtoId,
    cidr: Ipv4Cidr,
    routes: RouteTable,
    ttl: u8,
    sessions: Slab<Session>,
    /// Hashed: demux looks every datagram up here, after `last`.
    by_key: FxHashMap<(Ipv4Addr, u8), SessionId>,
    last: LastHit,
    neighbours: Neighbours,
    reassembly: Reassembly,
    ident: Option<u16>,
    mtu: Option<usize>,
}

impl Ipv4 {
    /// IPv4 at `cidr` over the link layer `link`, resolving through `arp`.
    pub fn new(
        link: ProtoId,
        arp: ProtoId,
        cidr: Ipv4Cidr,
        routes: RouteTable,
        ttl: u8,
        limits: Limits,
    ) -> Ipv4 {
        Ipv4 {
            link,
            arp,
            cidr,
            routes,
            ttl,
            sessions: Slab::new(MAX_SESSIONS),
            by_key: FxHashMap::default(),
            last: LastHit::default(),
            neighbours: Neighbours::new(),
            reassembly: Reassembly::new(limits),
            ident: None,
            mtu: None,
        }
    }

    /// This host's address and prefix.
    pub fn address(&self) -> Ipv4Cidr {
        self.cidr
    }

    /// The routing table.
    pub fn routes(&self) -> &RouteTable {
        &self.routes
    }

    /// Datagrams being reassembled.
    pub fn reassembling(&self) -> usize {
        self.reassembly.in_progress()
    }

    /// Bytes held for reassembly (with per-run overhead).
    pub fn reassembly_bytes(&self) -> usize {
        self.reassembly.held_bytes()
    }

    /// Open sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Next hops with a cached Ethernet session.
    pub fn neighbour_count(&self) -> usize {
        self.neighbours.len()
    }

    fn is_broadcast(&self, a: Ipv4Addr) -> bool {
        a.is_broadcast() || Some(a) == self.cidr.broadcast()
    }

    /// Whether `target` is the live session for datagrams from `src` of
    /// `protocol`.
    #[inline]
    fn is_session_for(&self, target: Target, src: Ipv4Addr, protocol: u8) -> bool {
        match target {
            Target::Session(id) => self
                .sessions
                .get(id)
                .is_some_and(|s| s.remote == src && s.protocol == protocol),
            _ => false,
        }
    }

    /// Pop of a whole datagram whose demux has just accepted its header and
    /// found its session: every check of the header holds but the checksum,
    /// so pop verifies that, trims the link's padding and strips the header,
    /// reading only the first byte, the fragment field and the total length.
    /// `None` for a header with options or a fragment, which take the full
    /// path (reassembly needs every field).
    #[inline]
    fn pop_demuxed(msg: &mut Message) -> Option<Up> {
        let hdr: &[u8; MIN_HEADER_LEN] = msg.pullup(MIN_HEADER_LEN)?.first_chunk()?;
        // Version 4, 20 bytes of header: no options.
        if hdr[0] != 0x45 || u16::from_be_bytes([hdr[6], hdr[7]]) & wire::FRAGMENT_BITS != 0 {
            return None;
        }
        if !wire::fixed_verifies(hdr) {
            return Some(Up::Drop(DropReason::BadChecksum));
        }
        let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
        // Ethernet pads short frames: the total length says where IP ends.
        msg.truncate(total);
        msg.strip(MIN_HEADER_LEN);
        Some(Up::Continue)
    }
}

impl Protocol for Ipv4 {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        let (h, header_len) = match self.check(hdr, meta.present) {
            Ok(c) => c,
            Err(d) => return d,
        };
        let info = Ipv4Info::of(&h);
        if record_info(meta, info, header_len, hdr).is_err() {
            return Demux::Drop(DropReason::Other("meta-full"));
        }
        if h.more_frags() || h.frag_offset() != 0 {
            return Demux::Stateful {
                target: Target::Protocol,
            };
        }
        let (target, next) = self.upward(info.src, info.protocol);
        Demux::To {
            target,
            hdr_len: header_len,
            next,
        }
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        if meta.demuxed
            && let Target::Session(_) = target
            && let Some(up) = Self::pop_demuxed(msg)
        {
            return up;
        }
        let present = msg.len();
        let need = match msg.pullup(MIN_HEADER_LEN) {
            Some(b) => (usize::from(b[0] & 0x0f) * 4).max(MIN_HEADER_LEN),
            None => return Up::Drop(DropReason::Truncated),
        };
        let Some(hdr) = msg.pullup(need) else {
            return Up::Drop(DropReason::Truncated);
        };
        // When demux has just accepted this very header (`meta.demuxed`), its
        // checks hold: only what makes reading it safe is checked again.
        let checked = if meta.demuxed {
            input::checked(hdr)
        } else {
            self.check(hdr, present)
        };
        let (h, header_len) = match checked {
            Ok(c) => c,
            Err(d) => return up_of(d),
        };
        let verifies = match hdr.first_chunk() {
            Some(fixed) if header_len == MIN_HEADER_LEN => wire::fixed_verifies(fixed),
            _ => checksum::verifies(&hdr[..header_len]),
        };
        if !verifies {
            return Up::Drop(DropReason::BadChecksum);
        }
        let info = Ipv4Info::of(&h);
        if !meta.demuxed && record_info(meta, info, header_len, hdr).is_err() {
            return Up::Drop(DropReason::Other("meta-full"));
        }
        // Only reassembly needs every field.
        let fragment = (h.more_frags() || h.frag_offset() != 0).then(|| Repr::parse(&h));
        // Ethernet pads short frames: the total length says where IP ends.
        msg.truncate(usize::from(info.total_len));
        msg.strip(header_len);
        match fragment {
            Some(Ok(repr)) => self.reassemble(repr, msg, meta, cx),
            Some(Err(e)) => up_of(e.demux()),
            // Demux has just found the datagram's session, so it has an upper.
            None if meta.demuxed && matches!(target, Target::Session(_)) => Up::Continue,
            // A path's target (DAA) that is the session for this source and
            // protocol: the lookup in `finish` would find it, so it has an upper.
            None if self.is_session_for(target, info.src, info.protocol) => Up::Continue,
            None => self.finish(info.src, info.protocol, msg, meta, cx, false),
        }
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        let Some(s) = self.sessions.get(sess) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let (dst, protocol, cached) = (s.remote, s.protocol, s.way);
        let way = self.send(dst, protocol, msg, cached, cx);
        if let Some(s) = self.sessions.get_mut(sess) {
            s.way = way;
        }
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let remote = req
            .parts
            .remote
            .pop_ip()
            .ok_or(UpiError::BadParticipant("ip needs a remote IPv4 address"))?;
        if let Some(Addr::Ip(local)) = req.parts.local.top()
            && local != self.cidr.address()
            && !local.is_unspecified()
        {
            return Err(UpiError::BadParticipant("not this host's IPv4 address"));
        }
        let number = req
            .number
            .ok_or_else(|| UpiError::NoNumber(cx.name().into()))?;
        let protocol = u8::try_from(number)
            .map_err(|_| UpiError::BadParticipant("IP protocol numbers stop at 255"))?;
        if self.hop(remote).is_none() {
            return Err(UpiError::Unreachable);
        }
        if let Some(&id) = self.by_key.get(&(remote, protocol))
            && let Some(s) = self.sessions.get_mut(id)
        {
            if s.upper != req.upper {
                return Err(UpiError::InUse);
            }
            s.refs += 1;
            return Ok(id);
        }
        let id = self
            .sessions
            .insert(Session {
                remote,
                protocol,
                upper: req.upper,
                refs: 1,
                way: None,
            })
            .ok_or(UpiError::Exhausted("ip sessions"))?;
        self.by_key.insert((remote, protocol), id);
        Ok(id)
    }

    fn close(&mut self, sess: SessionId, _cx: &mut Cx) {
        let Some(s) = self.sessions.get_mut(sess) else {
            return;
        };
        s.refs -= 1;
        if s.refs == 0 {
            let key = (s.remote, s.protocol);
            self.sessions.remove(sess);
            self.by_key.remove(&key);
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(MAX_PAYLOAD)),
            (Control::GetSegmentation, _) => Ok(Reply::Size(self.segmentation(cx))),
            (Control::GetIpAddr, _) => Ok(Reply::Ip(self.cidr.address())),
            (Control::GetParticipants, Some(id)) => {
                let s = self.sessions.get(id).ok_or(UpiError::NoSuchSession)?;
                Ok(Reply::Participants(Participants {
                    remote: Participant::of([Addr::Ip(s.remote)]),
                    local: Participant::of([Addr::Ip(self.cidr.address())]),
                }))
            }
            (Control::Private(op), _) if op.is::<GetOptPayload>() => {
                Ok(Reply::Size(self.mtu(cx).saturating_sub(MIN_HEADER_LEN)))
            }
            (Control::Private(op), _) => match op.downcast::<UpperFor>() {
                Ok(q) => Ok(Reply::Private(Box::new(cx.upper_for(u32::from(q.0))))),
                Err(_) => Err(UpiError::Unsupported("this private operation on ip")),
            },
            (op, _) => Err(unsupported(&op)),
        }
    }

    fn on_timer(&mut self, serial: u64, cx: &mut Cx) {
        let Some(gone) = self.reassembly.expire(serial) else {
            return;
        };
        tracing::debug!(serial, "ipv4: reassembly timed out");
        cx.count_drop(DropReason::ReassemblyTimeout);
        if let Some(header) = gone.header {
            self.report(
                ErrorKind::ReassemblyTimeExceeded,
                header.get(),
                &gone.first_bytes,
                gone.link_broadcast,
                cx,
            );
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
