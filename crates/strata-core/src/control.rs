//! Typed `control` operations (the x-kernel's `xControl`). Common operations have
//! their own variants; a protocol's private operations travel as `Private`.

use std::any::Any;
use std::fmt;
use std::net::Ipv4Addr;

use crate::message::Message;
use crate::meta::{HwAddr, Priority};
use crate::participant::Participants;
use crate::time::Instant;

/// An operation asked of a protocol or one of its sessions.
pub enum Control {
    /// The largest message an upper layer may push in one piece.
    GetMaxPayload,
    /// Segmentation offload (TSO/GSO): the largest super-segment, in bytes of
    /// this layer's payload, the layers below cut into MTU-sized packets when
    /// it is marked with [`Message::set_segment_size`]; 0 when the link
    /// cannot. Only TCP over IPv4 is cut.
    GetSegmentation,
    /// This protocol's link-layer address.
    GetHwAddr,
    /// This protocol's network-layer address.
    GetIpAddr,
    /// The session's two ends.
    GetParticipants,
    /// Switches computing and verifying checksums on or off (seed 000 §5.2 runs UDP
    /// without checksums).
    SetChecksum(bool),
    /// Sets the urgency a session's packets carry (DAA deadline/priority).
    SetPriority(Priority),
    /// A stream session's data path (TCP's send): queues as much of the
    /// message as the session's send buffer has room for and answers
    /// [`Reply::Size`] with how much that was; the caller offers the rest
    /// again after `AppEvent::Writable`. Typed, so the bytes of every write
    /// are not boxed as a private operation.
    Write(Message),
    /// Neighbour resolution: the link address of a next hop, if known.
    Resolve(Ipv4Addr),
    /// Neighbour resolution: hold a packet until the next hop resolves, then send it
    /// with the given protocol number (bounded queue; dropped and counted when full).
    Hold {
        /// The next hop being resolved.
        next_hop: Ipv4Addr,
        /// The packet waiting for it.
        msg: Message,
        /// The sender's protocol number in the link layer.
        number: u32,
    },
    /// An operation only one protocol understands.
    Private(Box<dyn Any + Send>),
}

impl Control {
    /// The operation's name, for errors and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Control::GetMaxPayload => "GetMaxPayload",
            Control::GetSegmentation => "GetSegmentation",
            Control::GetHwAddr => "GetHwAddr",
            Control::GetIpAddr => "GetIpAddr",
            Control::GetParticipants => "GetParticipants",
            Control::SetChecksum(_) => "SetChecksum",
            Control::SetPriority(_) => "SetPriority",
            Control::Write(_) => "Write",
            Control::Resolve(_) => "Resolve",
            Control::Hold { .. } => "Hold",
            Control::Private(_) => "Private",
        }
    }
}

impl fmt::Debug for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Control::SetChecksum(on) => write!(f, "SetChecksum({on})"),
            Control::SetPriority(p) => write!(f, "SetPriority({p:?})"),
            Control::Write(m) => write!(f, "Write({} bytes)", m.len()),
            Control::Resolve(a) => write!(f, "Resolve({a})"),
            Control::Hold { next_hop, .. } => write!(f, "Hold({next_hop})"),
            Control::Private(_) => f.write_str("Private(..)"),
            op => f.write_str(op.name()),
        }
    }
}

/// The answer to a [`Control`].
pub enum Reply {
    /// Done, nothing to report.
    Done,
    /// A size in bytes.
    Size(usize),
    /// A link-layer address.
    Hw(HwAddr),
    /// A network-layer address.
    Ip(Ipv4Addr),
    /// Both ends of a session.
    Participants(Participants),
    /// A resolved neighbour and how long the answer stays good.
    Resolved {
        /// The neighbour's link address.
        hw: HwAddr,
        /// When to ask again.
        valid_until: Instant,
    },
    /// Resolution is under way; hold the packet with [`Control::Hold`].
    Pending,
    /// A private answer.
    Private(Box<dyn Any + Send>),
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Done => f.write_str("Done"),
            Reply::Size(n) => write!(f, "Size({n})"),
            Reply::Hw(a) => write!(f, "Hw({a})"),
            Reply::Ip(a) => write!(f, "Ip({a})"),
            Reply::Participants(p) => write!(f, "Participants({p:?})"),
            Reply::Resolved { hw, valid_until } => write!(f, "Resolved({hw} until {valid_until})"),
            Reply::Pending => f.write_str("Pending"),
            Reply::Private(_) => f.write_str("Private(..)"),
        }
    }
}
