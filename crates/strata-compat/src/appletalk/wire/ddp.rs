//! The DDP long (extended) header (Inside AppleTalk, 2nd ed., §4 "DDP packet
//! format"), the only form EtherTalk carries:
//!
//! ```text
//!  0      1      2      3      4      5      6      7      8     9     10    11    12
//! +--+----+------+------+------+------+------+------+------+-----+-----+-----+-----+-----+
//! |00|hops|length (10 b)| checksum    | dst network | src network |dnode|snode|dsock|ssock|type|
//! +--+----+------+------+------+------+------+------+------+-----+-----+-----+-----+-----+
//! ```
//!
//! The length counts the header; the checksum covers every byte from the
//! destination network to the end of the datagram, and zero means "none".

use std::fmt;

use super::{WireError, be16, check_len, put16};

/// Length of the long header.
pub const HEADER_LEN: usize = 13;

/// The most data a datagram carries (Inside AppleTalk §4).
pub const MAX_DATA: usize = 586;

/// The longest datagram, header included.
pub const MAX_LEN: usize = HEADER_LEN + MAX_DATA;

/// The hop count is four bits; a router drops a datagram that would exceed it.
pub const MAX_HOPS: u8 = 15;

/// Where the checksummed bytes start: the destination network.
pub const SUMMED_FROM: usize = 4;

/// DDP types (Inside AppleTalk appendix C) for the protocols Strata knows.
pub mod types {
    /// RTMP response or data.
    pub const RTMP: u8 = 1;
    /// Name Binding Protocol.
    pub const NBP: u8 = 2;
    /// AppleTalk Transaction Protocol.
    pub const ATP: u8 = 3;
    /// AppleTalk Echo Protocol.
    pub const AEP: u8 = 4;
    /// RTMP request.
    pub const RTMP_REQUEST: u8 = 5;
    /// Zone Information Protocol.
    pub const ZIP: u8 = 6;
    /// AppleTalk Data Stream Protocol.
    pub const ADSP: u8 = 7;
}

/// An AppleTalk socket address: network, node and socket number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Addr {
    /// Network number (0 means "this network").
    pub net: u16,
    /// Node on that network (255 is broadcast, 0 and 254 are reserved).
    pub node: u8,
    /// Socket on that node (1–127 statically assigned, 128–254 dynamic).
    pub socket: u8,
}

impl Addr {
    /// The address `net.node:socket`.
    pub const fn new(net: u16, node: u8, socket: u8) -> Addr {
        Addr { net, node, socket }
    }
}

impl fmt::Display for Addr {
    /// As tshark writes it: `net.node:socket`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}:{}", self.net, self.node, self.socket)
    }
}

/// A checked view of a DDP long header (the first 13 bytes of a datagram).
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

    /// The hop count (four bits).
    pub fn hop_count(&self) -> u8 {
        (self.buffer.as_ref()[0] >> 2) & 0x0f
    }

    /// The length field (ten bits): header and data.
    pub fn length(&self) -> usize {
        usize::from(be16(self.buffer.as_ref(), 0) & 0x03ff)
    }

    /// The checksum field; zero means the sender computed none.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Destination address.
    pub fn dst(&self) -> Addr {
        let b = self.buffer.as_ref();
        Addr::new(be16(b, 4), b[8], b[10])
    }

    /// Source address.
    pub fn src(&self) -> Addr {
        let b = self.buffer.as_ref();
        Addr::new(be16(b, 6), b[9], b[11])
    }

    /// The DDP type: which protocol the data is for.
    pub fn ddp_type(&self) -> u8 {
        self.buffer.as_ref()[12]
    }

    /// The header's checksummed part (destination network to type).
    pub fn summed_part(&self) -> &[u8] {
        &self.buffer.as_ref()[SUMMED_FROM..HEADER_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Rewrites the hop count (a router's only change to a header) and keeps
    /// the length and the reserved bits.
    pub fn set_hop_count(&mut self, hops: u8) {
        let b = self.buffer.as_mut();
        b[0] = (b[0] & 0xc3) | ((hops & 0x0f) << 2);
    }

    /// Rewrites the checksum field.
    pub fn set_checksum(&mut self, sum: u16) {
        put16(self.buffer.as_mut(), 2, sum);
    }
}

/// A parsed DDP long header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Destination socket address.
    pub dst: Addr,
    /// Source socket address.
    pub src: Addr,
    /// Routers this datagram has crossed (0–15).
    pub hop_count: u8,
    /// The protocol the data is for ([`types`]).
    pub ddp_type: u8,
    /// Length of header and data.
    pub length: usize,
    /// The checksum field (zero: none).
    pub checksum: u16,
}

impl Repr {
    /// Parses a header; a length shorter than the header or longer than the
    /// largest datagram is malformed. Whether the bytes that follow hold the
    /// whole datagram is the caller's check ([`Repr::check_datagram`]).
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Repr, WireError> {
        let length = h.length();
        if !(HEADER_LEN..=MAX_LEN).contains(&length) {
            return Err(WireError::Malformed);
        }
        Ok(Repr {
            dst: h.dst(),
            src: h.src(),
            hop_count: h.hop_count(),
            ddp_type: h.ddp_type(),
            length,
            checksum: h.checksum(),
        })
    }

    /// A datagram of `data_len` bytes of data, checksum not yet computed.
    pub fn new(src: Addr, dst: Addr, ddp_type: u8, data_len: usize) -> Result<Repr, WireError> {
        if data_len > MAX_DATA {
            return Err(WireError::Malformed);
        }
        Ok(Repr {
            dst,
            src,
            hop_count: 0,
            ddp_type,
            length: HEADER_LEN + data_len,
            checksum: 0,
        })
    }

    /// Bytes of data after the header.
    pub fn data_len(&self) -> usize {
        self.length.saturating_sub(HEADER_LEN)
    }

    /// Checks that `available` bytes (header included) hold the datagram:
    /// fewer is a truncated datagram; more is link-layer padding (Ethernet
    /// pads short frames), which the caller trims to [`Repr::length`].
    pub fn check_datagram(&self, available: usize) -> Result<(), WireError> {
        if available < self.length {
            Err(WireError::Short { need: self.length })
        } else {
            Ok(())
        }
    }

    /// The header as bytes, with the checksum field as it stands in `self`.
    /// Out-of-range fields (a length outside 13–599, a hop count above 15)
    /// are malformed rather than silently cut.
    pub fn to_bytes(&self) -> Result<[u8; HEADER_LEN], WireError> {
        if !(HEADER_LEN..=MAX_LEN).contains(&self.length) || self.hop_count > MAX_HOPS {
            return Err(WireError::Malformed);
        }
        let mut b = [0u8; HEADER_LEN];
        put16(
            &mut b,
            0,
            (u16::from(self.hop_count) << 10) | self.length as u16,
        );
        put16(&mut b, 2, self.checksum);
        put16(&mut b, 4, self.dst.net);
        put16(&mut b, 6, self.src.net);
        b[8] = self.dst.node;
        b[9] = self.src.node;
        b[10] = self.dst.socket;
        b[11] = self.src.socket;
        b[12] = self.ddp_type;
        Ok(b)
    }

    /// The header as bytes with its checksum computed over the header and
    /// `data` (which may lie in several pieces); `self.checksum` is ignored.
    pub fn to_bytes_checksummed<'a>(
        &self,
        data: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<[u8; HEADER_LEN], WireError> {
        let mut b = Repr {
            checksum: 0,
            ..*self
        }
        .to_bytes()?;
        let mut sum = Checksum::new();
        sum.add(&b[SUMMED_FROM..]);
        for chunk in data {
            sum.add(chunk);
        }
        put16(&mut b, 2, sum.finish());
        Ok(b)
    }
}

/// DDP's checksum (Inside AppleTalk §4 "DDP checksum"): for each byte from the
/// destination network on, add it to a 16-bit sum and rotate the sum left one
/// bit. Unlike the Internet checksum the order of bytes matters, so chunks are
/// added in datagram order; any split of the bytes gives the same sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checksum(u16);

impl Checksum {
    /// An empty sum.
    pub fn new() -> Checksum {
        Checksum(0)
    }

    /// Adds `bytes`, in order.
    pub fn add(&mut self, bytes: &[u8]) {
        let mut s = self.0;
        for &b in bytes {
            s = s.wrapping_add(u16::from(b)).rotate_left(1);
        }
        self.0 = s;
    }

    /// The running sum, before the zero rule.
    pub fn raw(&self) -> u16 {
        self.0
    }

    /// The value to send: a computed zero is sent as 0xFFFF, because a zero
    /// field means the sender computed no checksum.
    pub fn finish(&self) -> u16 {
        match self.0 {
            0 => 0xffff,
            s => s,
        }
    }
}

/// Whether a datagram's checksum holds. `header` is the 13-byte header and
/// `data` the datagram's data in order (padding trimmed). A zero field means
/// no checksum and always holds.
pub fn verify<'a, T: AsRef<[u8]>>(
    header: &Header<T>,
    data: impl IntoIterator<Item = &'a [u8]>,
) -> bool {
    let field = header.checksum();
    if field == 0 {
        return true;
    }
    let mut sum = Checksum::new();
    sum.add(header.summed_part());
    for chunk in data {
        sum.add(chunk);
    }
    sum.finish() == field
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An ATP TReq from 65280.10:129 to 65280.20:200 (the TReq's 8 bytes are
    /// data to DDP). Checksum worked by hand with the rule of Inside AppleTalk
    /// §4 and cross-checked with a separate Python implementation of it.
    const TREQ: [u8; 21] = [
        0x00, 0x15, 0x00, 0x00, 0xff, 0x00, 0xff, 0x00, 0x14, 0x0a, 0xc8, 0x81, 0x03, // DDP
        0x60, 0x01, 0x12, 0x34, 0x00, 0x00, 0x00, 0x00, // ATP TReq, XO, bitmap 1, TID 0x1234
    ];

    /// TREQ's checksum, from a Python transcription of the rule.
    const TREQ_SUM: u16 = 0x5809;

    #[test]
    fn the_checksum_of_a_known_datagram_is_the_reference() {
        let mut s = Checksum::new();
        s.add(&TREQ[SUMMED_FROM..]);
        assert_eq!(s.finish(), TREQ_SUM);
    }

    #[test]
    fn the_rotate_rule_on_two_bytes() {
        // 0 + 1 = 1, rotl → 2; 2 + 2 = 4, rotl → 8.
        let mut s = Checksum::new();
        s.add(&[1, 2]);
        assert_eq!(s.raw(), 8);
        // The high bit rotates round to the low bit.
        let mut s = Checksum(0x8000);
        s.add(&[0]);
        assert_eq!(s.raw(), 0x0001);
    }

    #[test]
    fn a_computed_zero_is_sent_as_all_ones() {
        assert_eq!(Checksum::new().finish(), 0xffff);
        assert_eq!(Checksum(0x1234).finish(), 0x1234);
    }

    #[test]
    fn a_known_header_parses_field_by_field() {
        let h = Header::new_checked(&TREQ[..]).unwrap();
        let r = Repr::parse(&h).unwrap();
        assert_eq!(r.length, 21);
        assert_eq!(r.data_len(), 8);
        assert_eq!(r.hop_count, 0);
        assert_eq!(r.dst, Addr::new(0xff00, 20, 200));
        assert_eq!(r.src, Addr::new(0xff00, 10, 129));
        assert_eq!(r.ddp_type, types::ATP);
        assert_eq!(r.dst.to_string(), "65280.20:200");
    }

    #[test]
    fn emitting_the_known_header_gives_the_known_bytes() {
        let r = Repr::new(
            Addr::new(0xff00, 10, 129),
            Addr::new(0xff00, 20, 200),
            types::ATP,
            8,
        )
        .unwrap();
        let mut want = TREQ;
        want[2..4].copy_from_slice(&TREQ_SUM.to_be_bytes());
        let b = r.to_bytes_checksummed([&TREQ[HEADER_LEN..]]).unwrap();
        assert_eq!(b[..], want[..HEADER_LEN]);
        let h = Header::new_checked(&want[..]).unwrap();
        assert!(verify(&h, [&want[HEADER_LEN..]]));
    }

    #[test]
    fn a_zero_checksum_means_none_and_always_verifies() {
        let h = Header::new_checked(&TREQ[..]).unwrap();
        assert_eq!(h.checksum(), 0);
        assert!(verify(&h, [&b"anything"[..]]));
    }

    #[test]
    fn hops_and_length_share_the_first_word() {
        let mut b = TREQ;
        let mut h = Header::new_checked(&mut b[..]).unwrap();
        h.set_hop_count(15);
        assert_eq!((h.hop_count(), h.length()), (15, 21));
        assert_eq!(b[0], 0x3c);
    }

    #[test]
    fn short_and_malformed_headers_are_refused() {
        assert_eq!(
            Header::new_checked(&TREQ[..12]).unwrap_err(),
            WireError::Short { need: 13 }
        );
        let mut b = TREQ;
        b[1] = 12; // length shorter than the header
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(WireError::Malformed));
        b[0] = 0x03;
        b[1] = 0xff; // 1023 > 599
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(WireError::Malformed));
        let r = Repr::parse(&Header::new_checked(&TREQ[..]).unwrap()).unwrap();
        assert_eq!(r.check_datagram(20), Err(WireError::Short { need: 21 }));
        assert_eq!(r.check_datagram(60), Ok(()));
    }

    #[test]
    fn out_of_range_fields_are_not_emitted() {
        let a = Addr::default();
        assert!(Repr::new(a, a, 3, MAX_DATA + 1).is_err());
        let mut r = Repr::new(a, a, 3, 0).unwrap();
        r.hop_count = 16;
        assert_eq!(r.to_bytes(), Err(WireError::Malformed));
    }

    fn addr() -> impl Strategy<Value = Addr> {
        (any::<u16>(), any::<u8>(), any::<u8>()).prop_map(|(n, d, s)| Addr::new(n, d, s))
    }

    proptest! {
        #[test]
        fn any_repr_round_trips(src in addr(), dst in addr(), t in any::<u8>(),
                                hops in 0u8..=15, len in 0usize..=MAX_DATA, sum in any::<u16>()) {
            let r = Repr { hop_count: hops, checksum: sum, ..Repr::new(src, dst, t, len).unwrap() };
            let b = r.to_bytes().unwrap();
            prop_assert_eq!(Repr::parse(&Header::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn any_bytes_parse_or_fail_without_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(h) = Header::new_checked(&b[..]) {
                let _ = verify(&h, [&b[HEADER_LEN..]]);
                if let Ok(r) = Repr::parse(&h) {
                    prop_assert!((HEADER_LEN..=MAX_LEN).contains(&r.length));
                    let _ = r.check_datagram(b.len());
                }
            } else {
                prop_assert!(b.len() < HEADER_LEN);
            }
        }

        #[test]
        fn the_checksum_is_the_same_over_any_split(data in proptest::collection::vec(any::<u8>(), 0..600),
                                                    cut in any::<prop::sample::Index>()) {
            let c = cut.index(data.len() + 1);
            let mut whole = Checksum::new();
            whole.add(&data);
            let mut split = Checksum::new();
            split.add(&data[..c]);
            split.add(&data[c..]);
            prop_assert_eq!(whole, split);
        }

        #[test]
        fn a_checksummed_datagram_verifies_and_any_changed_byte_is_caught(
            src in addr(), dst in addr(), data in proptest::collection::vec(any::<u8>(), 1..100),
            at in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let r = Repr::new(src, dst, types::ATP, data.len()).unwrap();
            let head = r.to_bytes_checksummed([&data[..]]).unwrap();
            let h = Header::new_checked(&head[..]).unwrap();
            prop_assert!(verify(&h, [&data[..]]));
            // Each step (add a byte, rotate) is a bijection on the sum, so a
            // changed byte always changes the raw sum.
            let mut bad = data.clone();
            let i = at.index(bad.len());
            bad[i] ^= flip;
            let mut a = Checksum::new();
            a.add(&head[SUMMED_FROM..]);
            let mut b = a;
            a.add(&data);
            b.add(&bad);
            prop_assert_ne!(a.raw(), b.raw());
        }
    }
}
