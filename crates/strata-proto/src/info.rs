//! What each layer records about a received packet for the layers above it
//! ([`strata_core::Record`]s in the packet's `PacketMeta`): Ethernet its two
//! link addresses, IPv4 its header's fields, UDP and TCP their ports. Each
//! layer sets its record in demux (for upper demuxes under ILLM) and in pop
//! (under DAA no demux of the layer ran); the layers above read it with
//! `meta.get::<…>()`, applications too (who sent this datagram?).
//!
//! Records hold fields, not copies of headers: IPv4's is enough to rebuild its
//! header exactly for an ICMP error's quote (RFC 792), the rare place where
//! the header is needed after the layer stripped it; options, when a header
//! has any, are kept beside it in a record of their own.

use std::net::{Ipv4Addr, SocketAddrV4};

use strata_core::{HwAddr, PacketMeta, Record};

use crate::ipv4::wire::{Header as IpHeader, MAX_HEADER_LEN, MIN_HEADER_LEN};

/// Ethernet's record: the frame's link addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthInfo {
    /// The sender's hardware address.
    pub src: HwAddr,
    /// The receiver's (this host's, broadcast or a group).
    pub dst: HwAddr,
}

impl Record for EthInfo {
    const LEN: usize = 12;
    strata_core::record_kind!();
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        out[..6].copy_from_slice(&self.src.0);
        out[6..12].copy_from_slice(&self.dst.0);
    }
    #[inline]
    fn decode(b: &[u8]) -> Self {
        let mut src = [0; 6];
        let mut dst = [0; 6];
        src.copy_from_slice(&b[..6]);
        dst.copy_from_slice(&b[6..12]);
        EthInfo {
            src: HwAddr(src),
            dst: HwAddr(dst),
        }
    }
}

/// Whether the packet came in a link-layer broadcast or group frame (no
/// error reports and no TCP for those, RFC 1122 §3.2.2, §4.2.3.10).
pub fn link_broadcast(meta: &PacketMeta) -> bool {
    meta.get::<EthInfo>().is_some_and(|e| e.dst.is_multicast())
}

/// The sender's hardware address, when the packet came over Ethernet.
pub fn hw_source(meta: &PacketMeta) -> Option<HwAddr> {
    meta.get::<EthInfo>().map(|e| e.src)
}

/// IPv4's record: every field of the header but the checksum and the options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Info {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Time to live as received.
    pub ttl: u8,
    /// The payload's protocol number.
    pub protocol: u8,
    /// Type of service.
    pub tos: u8,
    /// Header length in bytes, options included.
    pub header_len: u8,
    /// Total length as received.
    pub total_len: u16,
    /// Identification.
    pub ident: u16,
    /// Flags and fragment offset, as the header's 16 bits.
    pub frag: u16,
}

impl Record for Ipv4Info {
    const LEN: usize = 18;
    strata_core::record_kind!();
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.src.octets());
        out[4..8].copy_from_slice(&self.dst.octets());
        out[8] = self.ttl;
        out[9] = self.protocol;
        out[10] = self.tos;
        out[11] = self.header_len;
        out[12..14].copy_from_slice(&self.total_len.to_be_bytes());
        out[14..16].copy_from_slice(&self.ident.to_be_bytes());
        out[16..18].copy_from_slice(&self.frag.to_be_bytes());
    }
    #[inline]
    fn decode(b: &[u8]) -> Self {
        Ipv4Info {
            src: Ipv4Addr::new(b[0], b[1], b[2], b[3]),
            dst: Ipv4Addr::new(b[4], b[5], b[6], b[7]),
            ttl: b[8],
            protocol: b[9],
            tos: b[10],
            header_len: b[11],
            total_len: u16::from_be_bytes([b[12], b[13]]),
            ident: u16::from_be_bytes([b[14], b[15]]),
            frag: u16::from_be_bytes([b[16], b[17]]),
        }
    }
}

impl Default for Ipv4Info {
    /// What a layer above IPv4 sees when no IPv4 record is there: unspecified
    /// addresses, which name no host.
    fn default() -> Self {
        Ipv4Info {
            src: Ipv4Addr::UNSPECIFIED,
            dst: Ipv4Addr::UNSPECIFIED,
            ttl: 0,
            protocol: 0,
            tos: 0,
            header_len: 0,
            total_len: 0,
            ident: 0,
            frag: 0,
        }
    }
}

impl Ipv4Info {
    /// The record of the packet `meta` describes, or the default when IPv4
    /// made none.
    #[inline]
    pub fn from_meta(meta: &PacketMeta) -> Ipv4Info {
        meta.get().unwrap_or_default()
    }

    /// The fields of a checked header.
    #[inline]
    pub fn of<T: AsRef<[u8]>>(h: &IpHeader<T>) -> Ipv4Info {
        Ipv4Info {
            src: h.src(),
            dst: h.dst(),
            ttl: h.ttl(),
            protocol: h.protocol(),
            tos: h.tos(),
            header_len: h.header_len() as u8,
            total_len: h.total_len() as u16,
            ident: h.ident(),
            frag: h.frag_field(),
        }
    }
}

/// The options of an IPv4 header that had some, recorded beside its
/// [`Ipv4Info`] (rare: hosts send none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Options {
    len: u8,
    bytes: [u8; MAX_HEADER_LEN - MIN_HEADER_LEN],
}

impl Ipv4Options {
    /// The options of `header`, if it has any.
    pub fn of(options: &[u8]) -> Option<Ipv4Options> {
        if options.is_empty() || options.len() > MAX_HEADER_LEN - MIN_HEADER_LEN {
            return None;
        }
        let mut bytes = [0; MAX_HEADER_LEN - MIN_HEADER_LEN];
        bytes[..options.len()].copy_from_slice(options);
        Some(Ipv4Options {
            len: options.len() as u8,
            bytes,
        })
    }

    /// The option bytes.
    pub fn get(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Record for Ipv4Options {
    const LEN: usize = 1 + MAX_HEADER_LEN - MIN_HEADER_LEN;
    strata_core::record_kind!();
    fn encode(&self, out: &mut [u8]) {
        out[0] = self.len;
        out[1..].copy_from_slice(&self.bytes);
    }
    fn decode(b: &[u8]) -> Self {
        let mut bytes = [0; MAX_HEADER_LEN - MIN_HEADER_LEN];
        bytes.copy_from_slice(&b[1..]);
        Ipv4Options {
            len: b[0].min(bytes.len() as u8),
            bytes,
        }
    }
}

/// A received IPv4 header, rebuilt from its records or copied, for an error
/// report to quote (RFC 792, RFC 1812 §4.3.2.3) and for reassembly to keep
/// the first fragment's.
#[derive(Clone, Copy)]
pub struct NetHeader {
    bytes: [u8; MAX_HEADER_LEN],
    len: u8,
}

impl NetHeader {
    /// A copy of `header` (at most 60 bytes, the longest IPv4 header, are kept).
    pub fn copy(header: &[u8]) -> NetHeader {
        let mut h = NetHeader::default();
        let n = header.len().min(MAX_HEADER_LEN);
        h.bytes[..n].copy_from_slice(&header[..n]);
        h.len = n as u8;
        h
    }

    /// The header of the datagram `meta` describes, as it was received: its
    /// fields, its options and a checksum computed anew (pop verified the
    /// received one, so they are equal). Empty when IPv4 recorded nothing.
    pub fn of(meta: &PacketMeta) -> NetHeader {
        let Some(ip) = meta.get::<Ipv4Info>() else {
            return NetHeader::default();
        };
        let options = meta.get::<Ipv4Options>();
        let opt = options.as_ref().map_or(&[][..], Ipv4Options::get);
        let len = (MIN_HEADER_LEN + opt.len()).min(usize::from(ip.header_len).max(MIN_HEADER_LEN));
        let mut h = NetHeader::default();
        let b = &mut h.bytes;
        b[0] = 0x40 | (len / 4) as u8;
        b[1] = ip.tos;
        b[2..4].copy_from_slice(&ip.total_len.to_be_bytes());
        b[4..6].copy_from_slice(&ip.ident.to_be_bytes());
        b[6..8].copy_from_slice(&ip.frag.to_be_bytes());
        b[8] = ip.ttl;
        b[9] = ip.protocol;
        b[12..16].copy_from_slice(&ip.src.octets());
        b[16..20].copy_from_slice(&ip.dst.octets());
        b[MIN_HEADER_LEN..len].copy_from_slice(&opt[..len - MIN_HEADER_LEN]);
        let sum = strata_core::checksum::checksum(&b[..len]);
        b[10..12].copy_from_slice(&sum.to_be_bytes());
        h.len = len as u8;
        h
    }

    /// The header bytes (empty when none was recorded).
    pub fn get(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Default for NetHeader {
    fn default() -> Self {
        NetHeader {
            bytes: [0; MAX_HEADER_LEN],
            len: 0,
        }
    }
}

impl std::fmt::Debug for NetHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NetHeader({} bytes)", self.len)
    }
}

/// The sender's address, when the packet came over IPv4.
pub fn ip_source(meta: &PacketMeta) -> Option<Ipv4Addr> {
    meta.get::<Ipv4Info>().map(|i| i.src)
}

/// A transport's record: the datagram's or segment's ports (UDP, TCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// The sender's port.
    pub src: u16,
    /// The receiver's.
    pub dst: u16,
}

impl Record for Ports {
    const LEN: usize = 4;
    strata_core::record_kind!();
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.src.to_be_bytes());
        out[2..4].copy_from_slice(&self.dst.to_be_bytes());
    }
    #[inline]
    fn decode(b: &[u8]) -> Self {
        Ports {
            src: u16::from_be_bytes([b[0], b[1]]),
            dst: u16::from_be_bytes([b[2], b[3]]),
        }
    }
}

/// The sender's address and port, when the packet came over a transport on
/// IPv4: whom to answer (0.0.0.0:0 when the records are not there).
pub fn source(meta: &PacketMeta) -> SocketAddrV4 {
    let port = meta.get::<Ports>().map_or(0, |p| p.src);
    SocketAddrV4::new(Ipv4Info::from_meta(meta).src, port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_core::{Instant, LinkId};

    #[test]
    fn records_round_trip_through_the_metadata() {
        let mut m = PacketMeta::new(LinkId(0), Instant::ZERO);
        let eth = EthInfo {
            src: HwAddr::local(1),
            dst: HwAddr::BROADCAST,
        };
        let ports = Ports { src: 7, dst: 40000 };
        m.set(eth).unwrap();
        m.set(ports).unwrap();
        assert_eq!(m.get::<EthInfo>(), Some(eth));
        assert_eq!(m.get::<Ports>(), Some(ports));
        assert!(link_broadcast(&m));
        assert_eq!(source(&m).ip(), &Ipv4Addr::UNSPECIFIED, "no IPv4 record");
        assert_eq!(source(&m).port(), 7);
    }

    #[test]
    fn an_ipv4_header_is_rebuilt_exactly_from_its_records() {
        // A header with options, as pop records it.
        let mut header = vec![
            0x46, 0x10, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x3f, 0x11, 0, 0, 198, 18, 0, 1, 198,
            18, 0, 2, 0x01, 0x01, 0x01, 0x00,
        ];
        let sum = strata_core::checksum::checksum(&header);
        header[10..12].copy_from_slice(&sum.to_be_bytes());
        let h = IpHeader::new_checked(&header[..]).unwrap();
        let mut m = PacketMeta::new(LinkId(0), Instant::ZERO);
        m.set(Ipv4Info::of(&h)).unwrap();
        m.set(Ipv4Options::of(h.options()).unwrap()).unwrap();
        assert_eq!(NetHeader::of(&m).get(), &header[..]);
        let plain = PacketMeta::new(LinkId(0), Instant::ZERO);
        assert!(NetHeader::of(&plain).get().is_empty());
    }
}
