//! The IPv4 header (RFC 791 §3.1). Options are carried in the header length
//! and skipped, never interpreted: a host may ignore the options it does not
//! implement (RFC 1122 §3.2.1.8), and none of the ones it must act on applies
//! to a host that neither forwards nor source-routes.

use std::net::Ipv4Addr;

use crate::wire::{WireError, be16, check_len, ipv4_at, put16};

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// Length of a header with the most options (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

/// Largest datagram, header included: the total length field is 16 bits.
pub const MAX_PACKET_LEN: usize = 65535;

/// Fragment offsets count 8-byte units (RFC 791 §3.1, "Fragment Offset").
pub const FRAGMENT_UNIT: usize = 8;

const FLAG_DONT_FRAGMENT: u16 = 0x4000;
const FLAG_MORE_FRAGMENTS: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// The bits of the flags-and-offset field set in any fragment: MF and the
/// offset (RFC 791 §3.1).
pub const FRAGMENT_BITS: u16 = FLAG_MORE_FRAGMENTS | OFFSET_MASK;

/// A checked view of an IPv4 header: the buffer holds at least the header
/// length the IHL field gives, and that length is at least 20.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer` after checking the IHL field and that the whole header is
    /// present (the payload need not be).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        check_len(b, MIN_HEADER_LEN)?;
        let len = usize::from(b[0] & 0x0f) * 4;
        if len < MIN_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        check_len(b, len)?;
        Ok(Header { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The fixed 20 bytes, as an array: fields are read from it at constant
    /// offsets with no bounds check each (this is parsed twice per datagram).
    #[inline]
    fn fixed(&self) -> &[u8; MIN_HEADER_LEN] {
        // `new_checked` made sure they are there; the fallback is never taken.
        self.b().first_chunk().unwrap_or(&[0; MIN_HEADER_LEN])
    }

    /// The version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.fixed()[0] >> 4
    }

    /// The header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.fixed()[0] & 0x0f) * 4
    }

    /// Type of service (DSCP and ECN, RFC 2474 / RFC 3168).
    pub fn tos(&self) -> u8 {
        self.fixed()[1]
    }

    /// Total length of the datagram (fragment), header included.
    pub fn total_len(&self) -> usize {
        usize::from(be16(self.fixed(), 2))
    }

    /// Identification, shared by the fragments of one datagram.
    pub fn ident(&self) -> u16 {
        be16(self.fixed(), 4)
    }

    /// The DF flag.
    pub fn dont_frag(&self) -> bool {
        be16(self.fixed(), 6) & FLAG_DONT_FRAGMENT != 0
    }

    /// The MF flag.
    pub fn more_frags(&self) -> bool {
        be16(self.fixed(), 6) & FLAG_MORE_FRAGMENTS != 0
    }

    /// The flags and fragment offset as the header's 16 bits.
    pub fn frag_field(&self) -> u16 {
        be16(self.fixed(), 6)
    }

    /// The fragment offset in bytes.
    pub fn frag_offset(&self) -> usize {
        usize::from(be16(self.fixed(), 6) & OFFSET_MASK) * FRAGMENT_UNIT
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.fixed()[8]
    }

    /// The protocol number of the payload.
    pub fn protocol(&self) -> u8 {
        self.fixed()[9]
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.fixed(), 10)
    }

    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        ipv4_at(self.fixed(), 12)
    }

    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        ipv4_at(self.fixed(), 16)
    }

    /// The options, as raw bytes.
    pub fn options(&self) -> &[u8] {
        &self.b()[MIN_HEADER_LEN..self.header_len()]
    }

    /// The whole header, options included.
    pub fn header_bytes(&self) -> &[u8] {
        &self.b()[..self.header_len()]
    }

    /// Whether the header checksum verifies (RFC 791 §3.1, RFC 1071).
    pub fn verify_checksum(&self) -> bool {
        strata_core::checksum::verifies(self.header_bytes())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        put16(self.bm(), 10, 0);
        let sum = strata_core::checksum::checksum(self.header_bytes());
        put16(self.bm(), 10, sum);
    }
}

/// Whether a header without options sums to all ones (RFC 1071 §1): its five
/// 32-bit words added as native numbers, folded to 16 bits. Summing in either
/// byte order gives the byte-swapped sum (RFC 1071 §2(B)), and all ones
/// swapped is all ones; a fixed 20 bytes need no loop, no tail and no swaps,
/// which the general checksum cannot assume.
#[inline]
pub fn fixed_verifies(h: &[u8; MIN_HEADER_LEN]) -> bool {
    let (words, _) = h.as_chunks::<4>();
    let s: u64 = words
        .iter()
        .map(|w| u64::from(u32::from_ne_bytes(*w)))
        .sum();
    let s = (s & 0xffff_ffff) + (s >> 32);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s == 0xffff
}

/// A parsed IPv4 header (options are not represented; emitted headers have none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number of the payload.
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// Type of service.
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// DF flag.
    pub dont_frag: bool,
    /// MF flag.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: usize,
    /// Bytes after the header, as the total length field says.
    pub payload_len: usize,
}

impl Repr {
    /// Parses a checked header. The total length must cover the header; whether
    /// the bytes it announces are present is for the caller to check.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Repr, WireError> {
        if h.version() != 4 {
            return Err(WireError::Unsupported);
        }
        let payload_len = h
            .total_len()
            .checked_sub(h.header_len())
            .ok_or(WireError::Malformed)?;
        Ok(Repr {
            src: h.src(),
            dst: h.dst(),
            protocol: h.protocol(),
            ttl: h.ttl(),
            tos: h.tos(),
            ident: h.ident(),
            dont_frag: h.dont_frag(),
            more_frags: h.more_frags(),
            frag_offset: h.frag_offset(),
            payload_len,
        })
    }

    /// True for a fragment: more follow, or this one is not the first.
    pub fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// The header as bytes: 20 bytes, no options, checksum filled in. Offsets
    /// that are not a multiple of 8 or too large are cut to the field (callers
    /// never make them; the fragmenter aligns them).
    #[inline]
    pub fn to_bytes(&self) -> [u8; MIN_HEADER_LEN] {
        let mut b = [0u8; MIN_HEADER_LEN];
        self.write(&mut b);
        b
    }

    /// Writes the header into `b` (the room a message's `push` made), as
    /// [`to_bytes`](Self::to_bytes) makes it. The checksum is summed from the
    /// fields as numbers (RFC 1071 §2: order and grouping do not matter),
    /// not from the bytes written. Forced inline: it is on every datagram's
    /// way out, and a call costs as much as the writing.
    #[inline(always)]
    pub fn write(&self, b: &mut [u8; MIN_HEADER_LEN]) {
        let total = (MIN_HEADER_LEN + self.payload_len).min(MAX_PACKET_LEN) as u16;
        let mut flags = ((self.frag_offset / FRAGMENT_UNIT) as u16) & OFFSET_MASK;
        if self.dont_frag {
            flags |= FLAG_DONT_FRAGMENT;
        }
        if self.more_frags {
            flags |= FLAG_MORE_FRAGMENTS;
        }
        let first = 0x4500 | u16::from(self.tos);
        let ttl_proto = u16::from_be_bytes([self.ttl, self.protocol]);
        let (src, dst) = (u32::from(self.src), u32::from(self.dst));
        let sum = u32::from(first)
            + u32::from(total)
            + u32::from(self.ident)
            + u32::from(flags)
            + u32::from(ttl_proto)
            + (src >> 16)
            + (src & 0xffff)
            + (dst >> 16)
            + (dst & 0xffff);
        let sum = (sum & 0xffff) + (sum >> 16);
        let sum = (sum & 0xffff) + (sum >> 16);
        put16(b, 0, first);
        put16(b, 2, total);
        put16(b, 4, self.ident);
        put16(b, 6, flags);
        put16(b, 8, ttl_proto);
        put16(b, 10, !(sum as u16));
        b[12..16].copy_from_slice(&self.src.octets());
        b[16..20].copy_from_slice(&self.dst.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ICMP echo request header from 198.18.0.2 to 198.18.0.1, as Linux's
    /// ping sends it (DF set, TTL 64, total length 84).
    const PING: [u8; 20] = [
        0x45, 0x00, 0x00, 0x54, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 198, 18, 0, 2, 198,
        18, 0, 1,
    ];

    fn ping() -> [u8; 20] {
        let mut h = PING;
        Header { buffer: &mut h[..] }.fill_checksum();
        h
    }

    #[test]
    fn a_linux_ping_header_parses_field_by_field() {
        let bytes = ping();
        let h = Header::new_checked(&bytes[..]).unwrap();
        assert!(h.verify_checksum());
        let r = Repr::parse(&h).unwrap();
        assert_eq!(
            (r.src, r.dst),
            ("198.18.0.2".parse().unwrap(), "198.18.0.1".parse().unwrap())
        );
        assert_eq!((r.protocol, r.ttl, r.ident), (1, 64, 0x1c46));
        assert!(r.dont_frag && !r.more_frags && !r.is_fragment());
        assert_eq!(r.payload_len, 64);
        assert_eq!(r.to_bytes(), bytes, "emitting gives the same bytes");
    }

    #[test]
    fn the_fixed_header_check_agrees_with_the_general_checksum() {
        let mut h = ping();
        assert!(fixed_verifies(&h));
        // Every single-bit error, and headers that sum to either zero.
        for bit in 0..160 {
            h[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                fixed_verifies(&h),
                strata_core::checksum::verifies(&h),
                "bit {bit}"
            );
            assert!(!fixed_verifies(&h), "bit {bit}");
            h[bit / 8] ^= 1 << (bit % 8);
        }
        for h in [[0u8; 20], [0xff; 20]] {
            assert_eq!(fixed_verifies(&h), strata_core::checksum::verifies(&h));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_twenty_bytes_verify_alike(h in proptest::array::uniform20(proptest::num::u8::ANY)) {
            proptest::prop_assert_eq!(fixed_verifies(&h), strata_core::checksum::verifies(&h));
        }

        #[test]
        fn any_filled_header_verifies(h in proptest::array::uniform20(proptest::num::u8::ANY)) {
            let mut h = h;
            h[0] = 0x45;
            Header { buffer: &mut h[..] }.fill_checksum();
            proptest::prop_assert!(fixed_verifies(&h));
        }
    }

    #[test]
    fn header_lengths_are_checked_before_any_field_is_read() {
        assert_eq!(
            Header::new_checked(&PING[..19]).unwrap_err(),
            WireError::Short { need: 20 }
        );
        let mut h = PING;
        h[0] = 0x44;
        assert_eq!(
            Header::new_checked(&h[..]).unwrap_err(),
            WireError::Malformed,
            "IHL 4"
        );
        h[0] = 0x46;
        assert_eq!(
            Header::new_checked(&h[..]).unwrap_err(),
            WireError::Short { need: 24 }
        );
        let mut with_options = [0u8; 24];
        with_options[..20].copy_from_slice(&PING);
        with_options[0] = 0x46;
        with_options[20] = 1; // NOP options
        let v = Header::new_checked(&with_options[..]).unwrap();
        assert_eq!(v.header_len(), 24);
        assert_eq!(v.options(), &[1, 0, 0, 0]);
    }

    #[test]
    fn wrong_versions_and_lengths_shorter_than_the_header_are_refused() {
        let mut h = ping();
        h[0] = 0x65;
        assert_eq!(
            Repr::parse(&Header::new_checked(&h[..]).unwrap()),
            Err(WireError::Unsupported)
        );
        let mut h = ping();
        h[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(
            Repr::parse(&Header::new_checked(&h[..]).unwrap()),
            Err(WireError::Malformed)
        );
    }

    #[test]
    fn fragment_fields_round_trip_in_eight_byte_units() {
        let r = Repr {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            protocol: 17,
            ttl: 64,
            tos: 0,
            ident: 7,
            dont_frag: false,
            more_frags: true,
            frag_offset: 1480,
            payload_len: 1480,
        };
        let bytes = r.to_bytes();
        assert_eq!(&bytes[6..8], &[0x20, 185], "MF and 1480 / 8 = 185");
        let parsed = Repr::parse(&Header::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(parsed, r);
        assert!(parsed.is_fragment());
    }

    #[test]
    fn the_checksum_summed_from_fields_is_the_one_summed_from_bytes() {
        for (a, b, tos, ttl, ident, len) in [
            (
                [255, 255, 255, 254],
                [255, 255, 255, 255],
                0xff,
                0xff,
                0xffff,
                65515,
            ),
            ([0, 0, 0, 0], [198, 18, 0, 1], 0, 1, 0, 0),
            ([198, 18, 0, 2], [198, 18, 0, 1], 0x10, 64, 0x8000, 1480),
        ] {
            let r = Repr {
                src: Ipv4Addr::from(a),
                dst: Ipv4Addr::from(b),
                protocol: 17,
                ttl,
                tos,
                ident,
                dont_frag: true,
                more_frags: false,
                frag_offset: 0,
                payload_len: len,
            };
            let written = r.to_bytes();
            let mut summed = written;
            Header {
                buffer: &mut summed[..],
            }
            .fill_checksum();
            assert_eq!(written, summed, "{r:?}");
        }
    }
}
