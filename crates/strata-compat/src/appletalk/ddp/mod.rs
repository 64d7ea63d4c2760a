//! DDP, the Datagram Delivery Protocol (Inside AppleTalk ch. 4), as a native
//! Strata protocol over EtherTalk (`ddp/eth`: Strata's `eth` frames it in
//! 802.2 LLC/SNAP under Apple's OUI).
//!
//! Participants, lowest layer first: remote `[AppleTalk{net, node},
//! Port(socket)]`, local `[Port(socket)]` (none, or 0, picks a dynamic socket
//! from 128–254). A session with a remote is *connected*; one without is a
//! *bound* socket that receives from anyone (the sender is in the packet's
//! [`DdpInfo`]) but cannot send. A session sends the DDP type of its opener's
//! number in DDP's space (`atp = 3` in the number table).
//!
//! Inbound, demux checks the long header, records [`DdpInfo`] and finds the
//! socket's session; a datagram for no session goes up by its DDP type to the
//! protocol (or application) bound to it — ATP finds its own sockets. Pop
//! trims Ethernet padding to the length field, verifies the checksum when the
//! field is not zero (drop `bad-checksum`), and gleans the sender's hardware
//! address into the address mapping table ([`amt`]). Nodes the table does not
//! know are resolved by AARP when the graph puts one beside Ethernet
//! ([`super::aarp`]), else sent to the AppleTalk broadcast. Routing (RTMP, hop
//! counts above zero) is not implemented: one network, a node number from the
//! config, AARP's probing or the Ethernet address.

pub mod amt;
mod config;
pub(crate) mod host;
pub(crate) mod sockets;

use std::any::Any;

use rustc_hash::FxHashMap;
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, HwAddr, Message, Next, Open, PacketMeta, Participant,
    Participants, ProtoId, Protocol, Reply, SessionId, SessionRef, Target, Up, UpiError, Upper,
};
use strata_proto::EthInfo;

use super::aarp::AarpOp;
use super::aarp::wire::NodeAddr;
use super::info::DdpInfo;
use super::wire::ddp::{self as wire, Checksum, HEADER_LEN, Header, MAX_DATA, Repr};
use amt::Amt;
use sockets::{Session, Table};

pub use config::{OPTIONS, SPEC};

/// The DDP protocol object.
pub struct Ddp {
    eth: ProtoId,
    net: u16,
    node: Option<u8>,
    checksum: bool,
    amt: Amt,
    /// AARP, when the graph gives DDP one: it resolves nodes the table does
    /// not know and chooses (probes for) this node's number.
    aarp: Option<ProtoId>,
    /// Whether AARP has confirmed `node` (until then DDP asks again).
    node_confirmed: bool,
    /// One Ethernet session per hardware address, shared by DDP's sessions.
    links: FxHashMap<HwAddr, SessionRef>,
    table: Table,
}

pub(crate) fn next_of(upper: Upper) -> Next {
    match upper {
        Upper::App(a) => Next::App(a),
        Upper::Proto(p) => Next::Proto(p),
    }
}

/// A node number from an Ethernet address's last byte, moved into 1–253.
pub(crate) fn node_from(mac: HwAddr) -> u8 {
    match mac.0[5] {
        n @ 1..=253 => n,
        n => 1 + n % 253,
    }
}

impl Ddp {
    /// DDP over `eth` on network `net`, as `node` (learnt from the Ethernet
    /// address when `None`), with a bounded address mapping table holding
    /// `fixed` and at most `max_sessions` sockets.
    pub fn new(
        eth: ProtoId,
        net: u16,
        node: Option<u8>,
        fixed: &[amt::Entry],
        max_amt: usize,
        max_sessions: usize,
    ) -> Ddp {
        Ddp {
            eth,
            net,
            node,
            checksum: true,
            amt: Amt::new(fixed, max_amt + fixed.len()),
            aarp: None,
            node_confirmed: false,
            links: FxHashMap::default(),
            table: Table::new(max_sessions),
        }
    }

    /// This node's network and node number, once known.
    pub fn address(&self) -> Option<(u16, u8)> {
        self.node.map(|n| (self.net, n))
    }

    /// How many sockets are open.
    pub fn session_count(&self) -> usize {
        self.table.len()
    }

    /// The local socket of session `sess`.
    pub fn socket(&self, sess: SessionId) -> Option<u8> {
        self.table.get(sess).map(|s| s.socket)
    }

    fn learn_node(&mut self, cx: &mut Cx) -> Option<u8> {
        if let Some(aarp) = self.aarp
            && !self.node_confirmed
        {
            // AARP probes for the node number and may move it on a conflict.
            let op = Control::Private(Box::new(AarpOp::Address));
            if let Ok(Reply::Private(r)) = cx.control(aarp, None, op)
                && let Ok(r) = r.downcast::<(NodeAddr, bool)>()
            {
                let (a, confirmed) = *r;
                (self.net, self.node, self.node_confirmed) = (a.net, Some(a.node), confirmed);
            }
        }
        learn_node(self.eth, &mut self.node, cx)
    }

    /// Sends a datagram (header on) to `remote`: through the table's
    /// address, or AARP's when the table does not know the node, or the
    /// AppleTalk broadcast without AARP.
    fn send(&mut self, remote: wire::Addr, msg: Message, cx: &mut Cx) {
        let aarp = self.aarp.filter(|_| {
            remote.node != 255 && !self.amt.lookup(remote.net, remote.node, cx.now()).1
        });
        let Some(aarp) = aarp else {
            match amt::link_to(&self.amt, &mut self.links, self.eth, remote, cx) {
                Ok(link) => cx.push(link, msg),
                Err(_) => cx.count_drop(DropReason::Unresolved),
            }
            return;
        };
        let to = NodeAddr {
            net: remote.net,
            node: remote.node,
        };
        let op = Control::Private(Box::new(AarpOp::Resolve(to)));
        match cx.control(aarp, None, op) {
            Ok(Reply::Resolved { hw, .. }) => {
                match amt::link_for(&mut self.links, self.eth, hw, cx) {
                    Ok(link) => cx.push(link, msg),
                    Err(_) => cx.count_drop(DropReason::Unresolved),
                }
            }
            Ok(_) => {
                let Some(number) = cx.number_in(self.eth) else {
                    cx.count_drop(DropReason::Unresolved);
                    return;
                };
                // AARP keeps it and counts it if it never resolves.
                let hold = AarpOp::Hold { to, msg, number };
                if cx
                    .control(aarp, None, Control::Private(Box::new(hold)))
                    .is_err()
                {
                    cx.count_drop(DropReason::Unresolved);
                }
            }
            Err(_) => cx.count_drop(DropReason::Unresolved),
        }
    }

    fn for_us(&self, dst: wire::Addr) -> bool {
        for_us(self.net, self.node, dst)
    }
}

/// The node number, asking Ethernet `eth` for its address the first time.
pub(crate) fn learn_node(eth: ProtoId, node: &mut Option<u8>, cx: &mut Cx) -> Option<u8> {
    if node.is_none()
        && let Ok(Reply::Hw(mac)) = cx.control(eth, None, Control::GetHwAddr)
    {
        *node = Some(node_from(mac));
    }
    *node
}

/// Whether a datagram to `dst` is for node `node` of `net`: this network (or
/// 0, "this network") and this node or the broadcast node 255.
pub(crate) fn for_us(net: u16, node: Option<u8>, dst: wire::Addr) -> bool {
    (dst.net == 0 || dst.net == net) && (dst.node == 255 || node.is_none_or(|n| n == dst.node))
}

/// A session's two ends, this node being `net.node`.
pub(crate) fn participants(net: u16, node: u8, s: &Session) -> Participants {
    let remote = match s.remote {
        Some(r) => Participant::of([
            Addr::AppleTalk {
                net: r.net,
                node: r.node,
            },
            Addr::Port(u16::from(r.socket)),
        ]),
        None => Participant::new(),
    };
    Participants {
        remote,
        local: Participant::of([
            Addr::AppleTalk { net, node },
            Addr::Port(u16::from(s.socket)),
        ]),
    }
}

/// Records a datagram's addresses and type for the layers above.
pub(crate) fn record(r: &Repr, meta: &mut PacketMeta) -> Result<(), DropReason> {
    meta.set(DdpInfo {
        src: r.src,
        dst: r.dst,
        ddp_type: r.ddp_type,
    })
    .map_err(|_| DropReason::Other("meta-full"))
}

/// DDP's demux, shared with the modules that import DDP: check the long
/// header, record [`DdpInfo`], and find the socket's session in `table`; a
/// datagram for no session goes up by its DDP type.
pub(crate) fn demux_datagram(
    table: &Table,
    for_us: impl Fn(wire::Addr) -> bool,
    hdr: &[u8],
    meta: &mut PacketMeta,
) -> Demux {
    let h = match Header::new_checked(hdr) {
        Ok(h) => h,
        Err(e) => return e.demux(),
    };
    let r = match Repr::parse(&h) {
        Ok(r) => r,
        Err(e) => return Demux::Drop(e.into()),
    };
    if meta.present < r.length {
        return Demux::Drop(DropReason::Truncated);
    }
    if !for_us(r.dst) {
        return Demux::Drop(DropReason::NotForUs);
    }
    if let Err(reason) = record(&r, meta) {
        return Demux::Drop(reason);
    }
    let (target, next) = match table.lookup(r.dst.socket, r.src) {
        Some(id) => match table.get(id) {
            Some(s) => (Target::Session(id), next_of(s.upper)),
            None => (Target::Protocol, Next::Here),
        },
        None => (Target::Protocol, Next::Number(u32::from(r.ddp_type))),
    };
    Demux::To {
        target,
        hdr_len: HEADER_LEN,
        next,
    }
}

/// The session an `open` asks for (not yet in `table`): the opener's number
/// is the DDP type; local `[Port(socket)]` (none or 0: a dynamic socket);
/// remote `[AppleTalk{net, node}, Port(socket)]` or nothing (a bound socket).
pub(crate) fn new_session(
    req: &mut Open,
    table: &Table,
    checksum: bool,
    cx: &mut Cx,
) -> Result<Session, UpiError> {
    let number = req
        .number
        .ok_or_else(|| UpiError::NoNumber(cx.name().into()))?;
    let ddp_type =
        u8::try_from(number).map_err(|_| UpiError::BadParticipant("a DDP type is one byte"))?;
    let asked = match req.parts.local.pop_port() {
        None | Some(0) => None,
        Some(p) => Some(
            u8::try_from(p)
                .ok()
                .filter(|s| *s != 255)
                .ok_or(UpiError::BadParticipant("a DDP socket is 1 to 254"))?,
        ),
    };
    let remote = match req.parts.remote.pop_port() {
        None if req.parts.remote.is_empty() => None,
        None => {
            return Err(UpiError::BadParticipant(
                "ddp needs the remote socket on top of the remote node",
            ));
        }
        Some(sock) => {
            let socket = u8::try_from(sock)
                .map_err(|_| UpiError::BadParticipant("a DDP socket is one byte"))?;
            let (net, node) = req
                .parts
                .remote
                .pop_appletalk()
                .ok_or(UpiError::BadParticipant(
                    "ddp needs an AppleTalk node below the socket",
                ))?;
            Some(wire::Addr::new(net, node, socket))
        }
    };
    if remote.is_none() && asked.is_none() {
        return Err(UpiError::BadParticipant(
            "a bound DDP socket needs a local socket number",
        ));
    }
    let socket = match asked {
        Some(s) => s,
        None => table
            .dynamic(cx.random_u32())
            .ok_or(UpiError::Exhausted("ddp dynamic sockets"))?,
    };
    if table.taken(socket, remote) {
        return Err(UpiError::InUse);
    }
    Ok(Session {
        upper: req.upper,
        socket,
        remote,
        ddp_type,
        checksum,
    })
}

impl Protocol for Ddp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        demux_datagram(&self.table, |dst| self.for_us(dst), hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        // A copy of the header, kept for the checksum once it is stripped.
        let Some(&header) = msg
            .pullup(HEADER_LEN)
            .and_then(|h| h.first_chunk::<HEADER_LEN>())
        else {
            return Up::Drop(DropReason::Truncated);
        };
        let Ok(h) = Header::new_checked(&header[..]) else {
            return Up::Drop(DropReason::Truncated);
        };
        let r = match Repr::parse(&h) {
            Ok(r) => r,
            Err(e) => return Up::Drop(e.into()),
        };
        if r.length > msg.len() {
            return Up::Drop(DropReason::Truncated);
        }
        // Ethernet pads short frames; the length field says where DDP ends.
        msg.truncate(r.length);
        self.learn_node(cx);
        if !meta.demuxed {
            if !self.for_us(r.dst) {
                return Up::Drop(DropReason::NotForUs);
            }
            if let Err(reason) = record(&r, meta) {
                return Up::Drop(reason);
            }
        }
        let verify = match target {
            Target::Session(id) => self.table.get(id).is_none_or(|s| s.checksum),
            _ => self.checksum,
        };
        msg.strip(HEADER_LEN);
        if verify && r.checksum != 0 {
            let mut sum = Checksum::new();
            sum.add(h.summed_part());
            for chunk in msg.chunks() {
                sum.add(chunk);
            }
            if sum.finish() != r.checksum {
                return Up::Drop(DropReason::BadChecksum);
            }
        }
        if let Some(eth) = meta.get::<EthInfo>()
            && !self.amt.glean(r.src.net, r.src.node, eth.src, cx.now())
        {
            cx.count("amt-full");
        }
        match target {
            Target::Session(id) if self.table.get(id).is_some() => Up::Continue,
            Target::Session(_) | Target::Enable(_) => Up::Drop(DropReason::NoSession),
            Target::Protocol => match self.table.lookup(r.dst.socket, r.src) {
                // Under DAA no demux ran: the socket's session, if any.
                Some(id) if !meta.demuxed => match self.table.get(id) {
                    Some(s) => Up::Redirect(next_of(s.upper)),
                    None => Up::Continue,
                },
                _ => Up::Continue,
            },
        }
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let Some(node) = self.learn_node(cx) else {
            cx.count_drop(DropReason::NoRoute);
            return;
        };
        let Some(s) = self.table.get(sess) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let Some(remote) = s.remote else {
            cx.count_drop(DropReason::Other("unconnected"));
            return;
        };
        let src = wire::Addr::new(self.net, node, s.socket);
        let (ddp_type, checksum) = (s.ddp_type, s.checksum);
        let Ok(repr) = Repr::new(src, remote, ddp_type, msg.len()) else {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        };
        let header = if checksum {
            repr.to_bytes_checksummed(msg.chunks())
        } else {
            repr.to_bytes()
        };
        let Ok(header) = header else {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        };
        msg.push_slice(&header);
        self.send(remote, msg, cx);
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        self.learn_node(cx);
        let s = new_session(&mut req, &self.table, self.checksum, cx)?;
        self.table
            .insert(s)
            .ok_or(UpiError::Exhausted("ddp sessions"))
    }

    fn close(&mut self, sess: SessionId, _cx: &mut Cx) {
        // Ethernet sessions stay: they are shared, one per hardware address.
        self.table.remove(sess);
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(MAX_DATA)),
            (Control::SetChecksum(on), None) => {
                self.checksum = on;
                Ok(Reply::Done)
            }
            (Control::SetChecksum(on), Some(id)) => {
                self.table
                    .get_mut(id)
                    .ok_or(UpiError::NoSuchSession)?
                    .checksum = on;
                Ok(Reply::Done)
            }
            (Control::GetParticipants, Some(id)) => {
                self.learn_node(cx);
                let s = self.table.get(id).ok_or(UpiError::NoSuchSession)?;
                Ok(Reply::Participants(participants(
                    self.net,
                    self.node.unwrap_or(0),
                    s,
                )))
            }
            (op, _) => Err(UpiError::Unsupported(op.name())),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_numbers_come_from_the_last_byte_of_the_ethernet_address() {
        assert_eq!(node_from(HwAddr::local(7)), 7);
        assert_eq!(node_from(HwAddr([2, 0, 0, 0, 0, 0])), 1);
        assert_eq!(node_from(HwAddr([2, 0, 0, 0, 0, 254])), 2);
        assert_eq!(node_from(HwAddr([2, 0, 0, 0, 0, 255])), 3);
    }
}
