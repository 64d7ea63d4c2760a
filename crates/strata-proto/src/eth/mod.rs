//! Ethernet II (RFC 894 framing for IPv4): the layer on a link.
//!
//! Inbound, demux accepts frames for our address, broadcast and multicast,
//! records the link addresses in the packet's meta ([`EthInfo`]) and names the upper protocol
//! by ethertype; pop does nothing else but strip the header, so ILLM skips it
//! (seed 000 §5.4). Outbound, a session is a (remote address, ethertype) pair
//! belonging to one opener: an upper protocol (IP per neighbour, ARP) or an
//! application bound to an ethertype (seed 000's raw ETH stack).
//!
//! EtherTalk (AppleTalk Phase 2) is framed differently — an IEEE 802.3 length
//! frame with 802.2 LLC and SNAP headers ([`snap`]). Inbound, such a frame
//! demuxes by its SNAP type; outbound, a session whose number [`snap::oui_for`]
//! names is sent that way. Every other number is Ethernet II, as before.
//!
//! Short frames are not padded to the 60-byte minimum (IEEE 802.3 §4.2.3.3):
//! the link below does it where it matters — NICs pad in hardware, and veth, TAP
//! and the simulator carry short frames as they are. Receivers must not rely on
//! the padding, and ours does not: IPv4 trims to its total length.

pub mod snap;
pub mod wire;

use std::any::Any;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, GraphError, HwAddr, LinkId, Message, Next, Open,
    PacketMeta, Participant, Participants, Priority, Protocol, Reply, SessionId, Target, Up,
    UpiError, Upper,
};

use crate::info::EthInfo;
use crate::slab::Slab;
use crate::{bad_option, unsupported};
use wire::{HEADER_LEN, Header, MIN_ETHERTYPE, Repr};

/// Most sessions the layer keeps open at once.
const MAX_SESSIONS: usize = 4096;

/// Smallest MTU IPv4 must be able to use (RFC 791: every module must forward a
/// 68-octet datagram without fragmenting it).
const MIN_MTU: usize = 68;

/// The options of `eth`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "mac",
        doc: "this host's hardware address, e.g. \"02:53:54:00:00:01\" (required)",
    },
    OptionDoc {
        name: "mtu",
        doc: "largest payload of one frame in bytes, 68 to 65535 (default 1500)",
    },
];

/// The registry entry of `eth`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "eth",
    doc: "Ethernet II framing on a link (RFC 894)",
    options: OPTIONS,
    demux_by_number: true,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Ok(Box::new(from_config(c, b)?))
}

/// An Ethernet from its config: the link below, `mac` and `mtu`.
pub(crate) fn from_config(c: &ProtocolConfig, b: &BuildInfo) -> Result<Eth, GraphError> {
    let link = b.link().ok_or_else(|| b.needs_below("a link"))?;
    let mac: HwAddr = c.options.require("mac")?;
    if mac.is_multicast() || mac == HwAddr::ZERO {
        return Err(bad_option(
            c,
            "mac",
            "must be an individual (unicast) address",
        ));
    }
    let mtu: usize = c.options.get("mtu")?.unwrap_or(1500);
    if !(MIN_MTU..=usize::from(u16::MAX)).contains(&mtu) {
        return Err(bad_option(c, "mtu", "must lie between 68 and 65535"));
    }
    Ok(Eth::new(link, mac, mtu))
}

/// One sending endpoint: frames to `remote` carrying `ethertype`.
#[derive(Debug)]
struct Session {
    remote: HwAddr,
    ethertype: u16,
    upper: Upper,
    priority: Priority,
    /// Opens of the same (remote, ethertype, upper) share the session; the last
    /// close removes it.
    refs: u32,
}

/// The Ethernet II protocol object.
pub struct Eth {
    link: LinkId,
    mac: HwAddr,
    mtu: usize,
    sessions: Slab<Session>,
}

impl Eth {
    /// Ethernet on `link` with address `mac` and payloads of at most `mtu` bytes.
    pub fn new(link: LinkId, mac: HwAddr, mtu: usize) -> Eth {
        Eth {
            link,
            mac,
            mtu,
            sessions: Slab::new(MAX_SESSIONS),
        }
    }

    /// This host's hardware address.
    pub fn mac(&self) -> HwAddr {
        self.mac
    }

    /// How many sessions are open.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// A session's remote address, ethertype and priority (for a protocol that
    /// extends Ethernet and writes its own header, ETHDAA).
    pub fn session(&self, sess: SessionId) -> Option<(HwAddr, u16, Priority)> {
        self.sessions
            .get(sess)
            .map(|s| (s.remote, s.ethertype, s.priority))
    }

    /// The largest payload of one frame.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// The link this Ethernet sits on.
    pub fn link(&self) -> LinkId {
        self.link
    }

    /// Checks a received Ethernet II header and records its addresses; returns
    /// the ethertype.
    #[inline]
    pub fn accept(&self, hdr: &[u8], meta: &mut PacketMeta) -> Result<u16, DropReason> {
        self.parse(hdr, meta)
    }

    /// Whether a frame to `dst` is for this host: our address, broadcast, or a
    /// group address (upper layers decide which groups they want).
    fn accepts(&self, dst: HwAddr) -> bool {
        dst == self.mac || dst.is_multicast()
    }

    #[inline]
    fn parse(&self, hdr: &[u8], meta: &mut PacketMeta) -> Result<u16, DropReason> {
        let h = Header::new_checked(hdr)?;
        let r = Repr::parse(&h)?;
        if !self.accepts(r.dst) {
            return Err(DropReason::NotForUs);
        }
        meta.set(EthInfo {
            src: r.src,
            dst: r.dst,
        })
        .map_err(|_| DropReason::Other("meta-full"))?;
        Ok(r.ethertype)
    }

    /// Like [`Eth::parse`], but also takes 802.3 length frames carrying LLC and
    /// SNAP: returns the protocol number (ethertype or SNAP type) and the
    /// length of the headers to strip. `hdr` holds at least [`HEADER_LEN`]
    /// bytes, and [`snap_need`] bytes when it is a length frame.
    #[inline]
    fn parse_any(&self, hdr: &[u8], meta: &mut PacketMeta) -> Result<(u16, usize), DropReason> {
        let h = Header::new_checked(hdr)?;
        let length = h.ethertype();
        if length >= MIN_ETHERTYPE {
            return self.parse(hdr, meta).map(|t| (t, HEADER_LEN));
        }
        let llc = snap::Header::new_checked(&hdr[HEADER_LEN..])?;
        let snap_type = snap::parse(&llc)?;
        if usize::from(length) < snap::LEN {
            return Err(DropReason::Malformed);
        }
        let (src, dst) = (h.src(), h.dst());
        if src.is_multicast() {
            return Err(DropReason::Malformed);
        }
        if !self.accepts(dst) {
            return Err(DropReason::NotForUs);
        }
        meta.set(EthInfo { src, dst })
            .map_err(|_| DropReason::Other("meta-full"))?;
        Ok((snap_type, HEADER_LEN + snap::LEN))
    }
}

/// The bytes a frame's headers need: 14 for Ethernet II, 22 for a length
/// frame (whose LLC and SNAP follow).
fn snap_need(hdr: &[u8]) -> usize {
    match Header::new_checked(hdr) {
        Ok(h) if h.ethertype() < MIN_ETHERTYPE => HEADER_LEN + snap::LEN,
        _ => HEADER_LEN,
    }
}

impl Protocol for Eth {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        // The common case first: an Ethernet II frame, its header checked once.
        if let Ok(h) = Header::new_checked(hdr)
            && h.ethertype() >= MIN_ETHERTYPE
        {
            return match self.parse(hdr, meta) {
                Ok(number) => Demux::To {
                    target: Target::Protocol,
                    hdr_len: HEADER_LEN,
                    next: Next::Number(u32::from(number)),
                },
                Err(reason) => Demux::Drop(reason),
            };
        }
        let need = snap_need(hdr);
        if hdr.len() < need {
            return Demux::Short(need);
        }
        match self.parse_any(hdr, meta) {
            Ok((number, hdr_len)) => Demux::To {
                target: Target::Protocol,
                hdr_len,
                next: Next::Number(u32::from(number)),
            },
            Err(reason) => Demux::Drop(reason),
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, meta: &mut PacketMeta, _cx: &mut Cx) -> Up {
        // Unless demux has just checked this header and recorded its addresses
        // (`meta.demuxed`), as under DAA: check and record again.
        let Some(hdr) = msg.pullup(HEADER_LEN) else {
            return Up::Drop(DropReason::Truncated);
        };
        let hdr_len = snap_need(hdr);
        if !meta.demuxed {
            let Some(hdr) = msg.pullup(hdr_len) else {
                return Up::Drop(DropReason::Truncated);
            };
            if let Err(reason) = self.parse_any(hdr, meta) {
                return Up::Drop(reason);
            }
        }
        if msg.strip(hdr_len) {
            Up::Continue
        } else {
            Up::Drop(DropReason::Truncated)
        }
    }

    /// Honest once demux ran: demux already checked the frame and filled the
    /// meta, so pop's only remaining effect is stripping the headers (14
    /// bytes, or 22 for an LLC/SNAP frame, as demux said).
    fn pop_is_strip(&self) -> bool {
        true
    }

    fn push(&mut self, sess: SessionId, mut msg: Message, cx: &mut Cx) {
        let Some(s) = self.sessions.get(sess) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        // A super-segment may exceed the MTU by as much as the link cuts.
        let max = if msg.segment_size() > 0 {
            cx.link_segmentation(self.link)
        } else {
            self.mtu
        };
        let snap = snap::to_bytes(s.ethertype);
        let framing = snap.map_or(0, |b| b.len());
        if msg.len() + framing > max {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        }
        let mut type_field = s.ethertype;
        if let Some(llc) = snap {
            msg.push_slice(&llc);
            // An 802.3 length field must stay below the ethertypes (IEEE
            // 802.3 §3.2.6): at most 1500 bytes after it.
            match u16::try_from(msg.len()) {
                Ok(len) if len < 1501 => type_field = len,
                _ => {
                    cx.count_drop(DropReason::Other("too-big"));
                    return;
                }
            }
        }
        let header = Repr {
            dst: s.remote,
            src: self.mac,
            ethertype: type_field,
        };
        msg.push_slice(&header.to_bytes());
        cx.transmit(self.link, msg, s.priority);
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let remote = req.parts.remote.pop_hw().ok_or(UpiError::BadParticipant(
            "eth needs a remote hardware address",
        ))?;
        if let Some(Addr::Hw(local)) = req.parts.local.top()
            && local != self.mac
        {
            return Err(UpiError::BadParticipant("not this host's hardware address"));
        }
        let number = req
            .number
            .ok_or_else(|| UpiError::NoNumber(cx.name().into()))?;
        let ethertype = u16::try_from(number)
            .ok()
            .filter(|t| *t >= MIN_ETHERTYPE)
            .ok_or(UpiError::BadParticipant("ethertype below 0x0600"))?;
        let existing = self
            .sessions
            .iter()
            .find(|(_, s)| s.remote == remote && s.ethertype == ethertype && s.upper == req.upper)
            .map(|(id, _)| id);
        if let Some(id) = existing
            && let Some(s) = self.sessions.get_mut(id)
        {
            s.refs += 1;
            return Ok(id);
        }
        self.sessions
            .insert(Session {
                remote,
                ethertype,
                upper: req.upper,
                priority: req.qos.priority,
                refs: 1,
            })
            .ok_or(UpiError::Exhausted("eth sessions"))
    }

    fn close(&mut self, sess: SessionId, _cx: &mut Cx) {
        if let Some(s) = self.sessions.get_mut(sess) {
            s.refs -= 1;
            if s.refs == 0 {
                self.sessions.remove(sess);
            }
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(self.mtu)),
            (Control::GetSegmentation, _) => Ok(Reply::Size(cx.link_segmentation(self.link))),
            (Control::GetHwAddr, _) => Ok(Reply::Hw(self.mac)),
            (Control::GetParticipants, Some(id)) => {
                let s = self.sessions.get(id).ok_or(UpiError::NoSuchSession)?;
                Ok(Reply::Participants(Participants {
                    remote: Participant::of([Addr::Hw(s.remote)]),
                    local: Participant::of([Addr::Hw(self.mac)]),
                }))
            }
            (Control::SetPriority(p), Some(id)) => {
                let s = self.sessions.get_mut(id).ok_or(UpiError::NoSuchSession)?;
                s.priority = p;
                Ok(Reply::Done)
            }
            (op, _) => Err(unsupported(&op)),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
