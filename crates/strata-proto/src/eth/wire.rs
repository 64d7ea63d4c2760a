//! The Ethernet II header (IEEE 802.3 §3.1.1 with the DIX type field; RFC 894
//! for IPv4 over Ethernet): destination, source, ethertype. No FCS: drivers and
//! NICs add and strip it.

use strata_core::HwAddr;

use crate::wire::{WireError, be16, check_len, hw_at, put16};

/// Length of the header.
pub const HEADER_LEN: usize = 14;

/// The smallest type value that is an ethertype rather than an IEEE 802.3
/// length (IEEE 802.3 §3.2.6): 1536.
pub const MIN_ETHERTYPE: u16 = 0x0600;

/// Ethertypes this crate's wire code itself refers to (protocol numbers for the
/// graph come from `numbers.toml`).
pub mod ethertype {
    /// IPv4 (RFC 894).
    pub const IPV4: u16 = 0x0800;
    /// ARP (RFC 826).
    pub const ARP: u16 = 0x0806;
}

/// A checked view of an Ethernet II header.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer` after checking it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        Ok(Header { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    pub fn dst(&self) -> HwAddr {
        hw_at(self.buffer.as_ref(), 0)
    }

    /// Source address.
    pub fn src(&self) -> HwAddr {
        hw_at(self.buffer.as_ref(), 6)
    }

    /// The type field.
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), 12)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the destination address.
    pub fn set_dst(&mut self, a: HwAddr) {
        self.buffer.as_mut()[0..6].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: HwAddr) {
        self.buffer.as_mut()[6..12].copy_from_slice(&a.0);
    }

    /// Sets the type field.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), 12, t);
    }
}

/// A parsed Ethernet II header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Destination address.
    pub dst: HwAddr,
    /// Source address.
    pub src: HwAddr,
    /// Type of the payload.
    pub ethertype: u16,
}

impl Repr {
    /// Parses a header. A type field below 0x0600 is an IEEE 802.3 length (LLC
    /// framing), which this Ethernet II layer does not speak; a group source
    /// address is impossible (IEEE 802.3 §3.2.3: sources are individual).
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Repr, WireError> {
        if h.ethertype() < MIN_ETHERTYPE {
            return Err(WireError::Unsupported);
        }
        if h.src().is_multicast() {
            return Err(WireError::Malformed);
        }
        Ok(Repr {
            dst: h.dst(),
            src: h.src(),
            ethertype: h.ethertype(),
        })
    }

    /// Writes this header into `h`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        h.set_dst(self.dst);
        h.set_src(self.src);
        h.set_ethertype(self.ethertype);
    }

    /// This header as bytes, ready to push in front of a payload.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut buf = [0u8; HEADER_LEN];
        self.emit(&mut Header {
            buffer: &mut buf[..],
        });
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // broadcast
        0x02, 0x53, 0x54, 0x00, 0x00, 0x01, // 02:53:54:00:00:01
        0x08, 0x06, // ARP
        0xaa, 0xbb, // payload
    ];

    #[test]
    fn a_broadcast_arp_frame_parses_field_by_field() {
        let h = Header::new_checked(&FRAME[..]).unwrap();
        let r = Repr::parse(&h).unwrap();
        assert_eq!(r.dst, HwAddr::BROADCAST);
        assert_eq!(r.src, HwAddr::local(1));
        assert_eq!(r.ethertype, ethertype::ARP);
        assert_eq!(r.to_bytes(), FRAME[..14]);
    }

    #[test]
    fn thirteen_bytes_are_short_by_one_header() {
        assert_eq!(
            Header::new_checked(&FRAME[..13]).unwrap_err(),
            WireError::Short { need: 14 }
        );
    }

    #[test]
    fn length_fields_and_group_sources_are_refused() {
        let mut f = FRAME;
        f[12..14].copy_from_slice(&0x05dcu16.to_be_bytes());
        let h = Header::new_checked(&f[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(WireError::Unsupported));
        let mut f = FRAME;
        f[6] |= 1;
        let h = Header::new_checked(&f[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(WireError::Malformed));
    }
}
