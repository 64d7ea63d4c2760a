//! The Strata side every imported DDP shares (`ddp@bsd`, `ddp@streams`):
//! what makes a module look like a DDP to the graph — this node's address,
//! the address mapping table and Ethernet sessions, the sessions of the
//! layers above and their participants, the pure demux, and the delivery of
//! what the imported code passed up. The imported code behind it differs;
//! this part is the same, so it is written once.

use rustc_hash::FxHashMap;
use strata_core::graph::ProtocolConfig;
use strata_core::{
    Control, Cx, Demux, DropReason, GraphError, HwAddr, Open, PacketMeta, Participants, ProtoId,
    Reply, SessionId, SessionRef, Target, Up, UpiError,
};
use strata_proto::EthInfo;

use super::amt::{self, Amt, Entry};
use super::sockets::Table;
use super::{demux_datagram, for_us, learn_node, new_session, next_of, participants, record};
use crate::appletalk::wire::ddp::{self as wire, MAX_DATA, Repr};

/// An imported DDP's Strata side.
pub struct Host {
    /// The Ethernet below.
    pub eth: ProtoId,
    /// This node's network.
    pub net: u16,
    /// This node's number, once known.
    pub node: Option<u8>,
    amt: Amt,
    links: FxHashMap<HwAddr, SessionRef>,
    /// The sessions of the layers above.
    pub table: Table,
}

/// What a push needs from a session: its socket, the peer, the DDP type.
pub struct Outgoing {
    /// This node's socket.
    pub socket: u8,
    /// The peer's socket address.
    pub remote: wire::Addr,
    /// The DDP type to send.
    pub ddp_type: u8,
}

impl Host {
    /// From the options every imported DDP takes: `net`, `node`, `amt`,
    /// `max_sessions`.
    pub fn from_config(c: &ProtocolConfig, eth: ProtoId) -> Result<Host, GraphError> {
        let net: u16 = c.options.get("net")?.unwrap_or(0xff00);
        let node: Option<u8> = c.options.get("node")?;
        let fixed: Vec<Entry> = c.options.list("amt")?;
        let max_sessions: usize = c.options.get("max_sessions")?.unwrap_or(1024);
        Ok(Host::new(eth, net, node, &fixed, max_sessions))
    }

    /// Node `node` (from the Ethernet address when `None`) of `net` over `eth`.
    pub fn new(
        eth: ProtoId,
        net: u16,
        node: Option<u8>,
        fixed: &[Entry],
        max_sessions: usize,
    ) -> Host {
        Host {
            eth,
            net,
            node,
            amt: Amt::new(fixed, 256 + fixed.len()),
            links: FxHashMap::default(),
            table: Table::new(max_sessions),
        }
    }

    /// This node's address, socket `port`.
    pub fn me(&self, port: u8) -> wire::Addr {
        wire::Addr::new(self.net, self.node.unwrap_or(0), port)
    }

    /// The node number, asking Ethernet for its address the first time.
    pub fn learn_node(&mut self, cx: &mut Cx) -> Option<u8> {
        learn_node(self.eth, &mut self.node, cx)
    }

    /// DDP's demux.
    pub fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        demux_datagram(
            &self.table,
            |dst| for_us(self.net, self.node, dst),
            hdr,
            meta,
        )
    }

    /// Learns the sender's hardware address, as a driver's table would,
    /// before the datagram goes in.
    pub fn glean(&mut self, src: wire::Addr, meta: &PacketMeta, cx: &mut Cx) {
        if let Some(eth) = meta.get::<EthInfo>()
            && !self.amt.glean(src.net, src.node, eth.src, cx.now())
        {
            cx.count("amt-full");
        }
    }

    /// The Ethernet session that reaches `dst`.
    pub fn link_to(&mut self, dst: wire::Addr, cx: &mut Cx) -> Result<SessionRef, UpiError> {
        amt::link_to(&self.amt, &mut self.links, self.eth, dst, cx)
    }

    /// Where a datagram the imported code delivered on socket `port` goes:
    /// its record is left in `meta`, and the session demux found (or, when
    /// no demux ran, the one this looks up) takes it.
    pub fn up(&self, target: Target, port: u8, r: &Repr, meta: &mut PacketMeta) -> Up {
        if let Err(reason) = record(r, meta) {
            return Up::Drop(reason);
        }
        match (target, self.table.lookup(port, r.src)) {
            (Target::Session(id), _) if meta.demuxed && self.table.get(id).is_some() => {
                Up::Continue
            }
            (_, Some(id)) => match self.table.get(id) {
                Some(s) => Up::Redirect(next_of(s.upper)),
                None => Up::Drop(DropReason::NoSession),
            },
            (_, None) => Up::Drop(DropReason::NoSession),
        }
    }

    /// What a push on `sess` sends, or the drop counted.
    pub fn outgoing(&mut self, sess: SessionId, cx: &mut Cx) -> Option<Outgoing> {
        if self.learn_node(cx).is_none() {
            cx.count_drop(DropReason::NoRoute);
            return None;
        }
        let Some(s) = self.table.get(sess) else {
            cx.count_drop(DropReason::NoSession);
            return None;
        };
        let Some(remote) = s.remote else {
            cx.count_drop(DropReason::Other("unconnected"));
            return None;
        };
        Some(Outgoing {
            socket: s.socket,
            remote,
            ddp_type: s.ddp_type,
        })
    }

    /// The session an open asks for: checked, not yet in the table.
    pub fn session(
        &mut self,
        req: &mut Open,
        cx: &mut Cx,
    ) -> Result<super::sockets::Session, UpiError> {
        if self.learn_node(cx).is_none() {
            return Err(UpiError::Unreachable);
        }
        new_session(req, &self.table, true, cx)
    }

    /// The control operations every DDP answers the same way.
    pub fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(MAX_DATA)),
            (Control::GetParticipants, Some(id)) => {
                self.learn_node(cx);
                let s = self.table.get(id).ok_or(UpiError::NoSuchSession)?;
                let p: Participants = participants(self.net, self.node.unwrap_or(0), s);
                Ok(Reply::Participants(p))
            }
            (op, _) => Err(UpiError::Unsupported(op.name())),
        }
    }
}
