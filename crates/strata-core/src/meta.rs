//! Per-packet metadata: what lower layers learned about a packet that upper layers
//! need (seed 000's ILLM demux records it; DAA pops along a path fill it in).

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use crate::ids::{LinkId, PathId, SessionRef};
use crate::time::Instant;

/// A 48-bit IEEE 802 hardware address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct HwAddr(pub [u8; 6]);

impl HwAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: HwAddr = HwAddr([0xff; 6]);
    /// The all-zero address.
    pub const ZERO: HwAddr = HwAddr([0; 6]);

    /// True for the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True when the group bit is set (multicast or broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// A locally administered unicast address derived from a small number, for
    /// simulated and generated hosts: 02:53:54:00:hi:lo ("ST" in the middle).
    pub fn local(n: u16) -> HwAddr {
        let [hi, lo] = n.to_be_bytes();
        HwAddr([0x02, 0x53, 0x54, 0x00, hi, lo])
    }
}

impl fmt::Display for HwAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for HwAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A hardware address that did not parse.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is not a hardware address (want six hex bytes like 02:00:00:00:00:01)")]
pub struct BadHwAddr(pub String);

impl FromStr for HwAddr {
    type Err = BadHwAddr;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let part = parts.next().ok_or_else(|| BadHwAddr(s.into()))?;
            if part.len() != 2 {
                return Err(BadHwAddr(s.into()));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| BadHwAddr(s.into()))?;
        }
        if parts.next().is_some() {
            return Err(BadHwAddr(s.into()));
        }
        Ok(HwAddr(out))
    }
}

/// Urgency of a packet: smaller is more urgent (a deadline or a priority class).
/// Everything without QoS carries [`Priority::BEST_EFFORT`], so that queues of
/// best-effort work stay first-in first-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(pub u32);

impl Priority {
    /// The least urgent class, used when nothing is said.
    pub const BEST_EFFORT: Priority = Priority(u32::MAX);
}

impl Default for Priority {
    fn default() -> Self {
        Priority::BEST_EFFORT
    }
}

/// A copy of a packet's network-layer header, kept so that an upper layer can
/// quote it in an error report (ICMP errors carry the original IP header,
/// RFC 792, RFC 1812 §4.3.2.3) after the network layer has stripped it.
#[derive(Clone, Copy)]
pub struct NetHeader {
    bytes: [u8; 60],
    len: u8,
}

impl NetHeader {
    /// Records `header` (at most 60 bytes, the longest IPv4 header, are kept).
    pub fn set(&mut self, header: &[u8]) {
        // An option-free header, the usual case, is a fixed-size copy.
        if let Ok(fixed) = <&[u8; 20]>::try_from(header) {
            self.bytes[..20].copy_from_slice(fixed);
            self.len = 20;
            return;
        }
        let n = header.len().min(self.bytes.len());
        self.bytes[..n].copy_from_slice(&header[..n]);
        self.len = n as u8;
    }

    /// The recorded header (empty when none was recorded).
    pub fn get(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Default for NetHeader {
    fn default() -> Self {
        NetHeader {
            bytes: [0; 60],
            len: 0,
        }
    }
}

impl fmt::Debug for NetHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NetHeader({} bytes)", self.len)
    }
}

/// What the layers below have learned about a packet travelling up.
#[derive(Clone, Debug)]
pub struct PacketMeta {
    /// The link the frame arrived on.
    pub link: LinkId,
    /// When the engine received the frame.
    pub received: Instant,
    /// Bytes present from the start of the header being demultiplexed to the end
    /// of the packet (the engine sets it before each demux, whose `hdr` slice may
    /// be shorter: only the contiguous part). Length fields are checked against it.
    pub present: usize,
    /// Link-layer source.
    pub hw_src: HwAddr,
    /// Link-layer destination.
    pub hw_dst: HwAddr,
    /// Network-layer source.
    pub ip_src: Ipv4Addr,
    /// Network-layer destination.
    pub ip_dst: Ipv4Addr,
    /// Network-layer time to live.
    pub ip_ttl: u8,
    /// The network-layer header as received, for error reports.
    pub net_header: NetHeader,
    /// Transport source port.
    pub src_port: u16,
    /// Transport destination port.
    pub dst_port: u16,
    /// DAA application identifier (seed 000 §4.2.1): the receiver's, the demux
    /// key; zero when absent.
    pub app_id: u32,
    /// DAA application identifier of the sender, so its peer can answer; zero when
    /// absent.
    pub peer_app_id: u32,
    /// DAA: the path the lowest demux found for the packet.
    pub path: Option<PathId>,
    /// The session of the layer below that passed the packet up, when it had one
    /// (the x-kernel's `xDemux(lls, msg)`): how a layer whose sessions sit one on
    /// one on the lower layer's finds its own. The engine sets it.
    pub lower: Option<SessionRef>,
    /// DAA deadline/priority, best effort when absent.
    pub priority: Priority,
    /// Set by the engine for each pop: true when this layer's own demux has
    /// just accepted this very header and recorded it in this meta, with no
    /// other layer's demux since (LLM's walk). Pop may then skip the checks
    /// demux made instead of parsing the header a second time. False under
    /// DAA (no demux of the layer ran, or the early one filled another meta)
    /// and in ILLM's state-change phase (upper demuxes ran in between).
    pub demuxed: bool,
}

impl PacketMeta {
    /// Fresh metadata for a frame received on `link` at `received`.
    pub fn new(link: LinkId, received: Instant) -> Self {
        Self {
            link,
            received,
            present: 0,
            hw_src: HwAddr::ZERO,
            hw_dst: HwAddr::ZERO,
            ip_src: Ipv4Addr::UNSPECIFIED,
            ip_dst: Ipv4Addr::UNSPECIFIED,
            ip_ttl: 0,
            net_header: NetHeader::default(),
            src_port: 0,
            dst_port: 0,
            app_id: 0,
            peer_app_id: 0,
            path: None,
            lower: None,
            priority: Priority::BEST_EFFORT,
            demuxed: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_addresses_round_trip_through_text() {
        let a: HwAddr = "02:53:54:00:00:2a".parse().unwrap();
        assert_eq!(a, HwAddr::local(42));
        assert_eq!(a.to_string(), "02:53:54:00:00:2a");
        assert!("02:53:54:00:00".parse::<HwAddr>().is_err());
        assert!("02:53:54:00:00:2a:ff".parse::<HwAddr>().is_err());
        assert!("zz:53:54:00:00:2a".parse::<HwAddr>().is_err());
    }
}
