//! The TCP header (RFC 9293 §3.1): a checked view over bytes, the parsed
//! [`Repr`] with its [options](super::options), and the checksum over the IPv4
//! pseudo-header.

use std::fmt;
use std::net::Ipv4Addr;

use strata_core::checksum::{self, Checksum};

use super::options::MAX_OPTIONS_LEN;
pub use super::options::{SackBlocks, TcpOptions, Timestamp};
use super::seq::Seq;
use crate::wire::{WireError, be16, check_len, put16};

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// Length of a header with the most options.
pub const MAX_HEADER_LEN: usize = HEADER_LEN + MAX_OPTIONS_LEN;

/// TCP's number in the pseudo-header and in IP (RFC 9293 §3.1).
pub const PROTOCOL: u8 = 6;

/// The control bits.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags(pub u8);

impl Flags {
    /// No more data from sender.
    pub const FIN: Flags = Flags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: Flags = Flags(0x02);
    /// Reset the connection.
    pub const RST: Flags = Flags(0x04);
    /// Push function.
    pub const PSH: Flags = Flags(0x08);
    /// The acknowledgment field is significant.
    pub const ACK: Flags = Flags(0x10);
    /// The urgent pointer is significant.
    pub const URG: Flags = Flags(0x20);

    /// True when every bit of `other` is set.
    pub fn has(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        let set: Vec<&str> = (0..8)
            .filter(|i| self.0 & (1 << i) != 0)
            .map(|i| names[i])
            .collect();
        write!(f, "[{}]", set.join(","))
    }
}

/// A checked view of a TCP header, options included.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer` after checking that it holds the whole header its data
    /// offset announces, and that the offset is at least five words.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        check_len(b, HEADER_LEN)?;
        let len = usize::from(b[12] >> 4) * 4;
        if len < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        check_len(b, len)?;
        Ok(Header { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The fixed 20 bytes, as an array: fields are read from it at constant
    /// offsets with no bounds check each (every segment is parsed).
    #[inline]
    fn fixed(&self) -> &[u8; HEADER_LEN] {
        // `new_checked` made sure they are there; the fallback is never taken.
        self.b().first_chunk().unwrap_or(&[0; HEADER_LEN])
    }

    #[inline]
    fn be32(&self, at: usize) -> u32 {
        let b = self.fixed();
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.fixed(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.fixed(), 2)
    }

    /// Sequence number.
    pub fn seq(&self) -> Seq {
        Seq(self.be32(4))
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> Seq {
        Seq(self.be32(8))
    }

    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.fixed()[12] >> 4) * 4
    }

    /// Control bits.
    pub fn flags(&self) -> Flags {
        Flags(self.fixed()[13])
    }

    /// Window field (unscaled).
    pub fn window(&self) -> u16 {
        be16(self.fixed(), 14)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.fixed(), 16)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.fixed(), 18)
    }

    /// The options area.
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }
}

/// A parsed TCP header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: Seq,
    /// Acknowledgment number (meaningful with ACK).
    pub ack: Seq,
    /// Control bits.
    pub flags: Flags,
    /// Window field, unscaled.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
}

impl Repr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Repr {
        Repr {
            src_port: h.src_port(),
            dst_port: h.dst_port(),
            seq: h.seq(),
            ack: h.ack(),
            flags: h.flags(),
            window: h.window(),
            urgent: h.urgent(),
            options: TcpOptions::parse(h.options()),
        }
    }

    /// Length of the header this writes.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len().min(MAX_OPTIONS_LEN)
    }

    /// Writes the header, checksum field zero, into `out` and returns its
    /// length. SACK blocks that do not fit in 40 option bytes are left out.
    pub fn emit(&self, out: &mut [u8; MAX_HEADER_LEN]) -> usize {
        let mut options = self.options;
        while options.len() > MAX_OPTIONS_LEN {
            let keep = options.sack.as_slice().len().saturating_sub(1);
            options.sack.truncate(keep);
        }
        let len = HEADER_LEN + options.len();
        put16(out, 0, self.src_port);
        put16(out, 2, self.dst_port);
        out[4..8].copy_from_slice(&self.seq.0.to_be_bytes());
        out[8..12].copy_from_slice(&self.ack.0.to_be_bytes());
        out[12] = ((len / 4) as u8) << 4;
        out[13] = self.flags.0;
        put16(out, 14, self.window);
        put16(out, 16, 0);
        put16(out, 18, self.urgent);
        options.write(&mut out[HEADER_LEN..len]);
        len
    }

    /// The header as bytes with its checksum over `payload`, from `src` to
    /// `dst`.
    pub fn to_bytes<'a>(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload: impl IntoIterator<Item = &'a [u8]> + Clone,
    ) -> Vec<u8> {
        let mut b = [0u8; MAX_HEADER_LEN];
        let n = self.emit(&mut b);
        let len = n + payload.clone().into_iter().map(<[u8]>::len).sum::<usize>();
        let mut c = sum(src, dst, len, [&b[..n]]);
        for chunk in payload {
            c.add(chunk);
        }
        put16(&mut b, 16, c.finish());
        b[..n].to_vec()
    }
}

/// The ones'-complement sum of the pseudo-header (RFC 9293 §3.1) and `chunks`,
/// the segment (header and data) in any number of pieces.
pub fn sum<'a>(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    length: usize,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Checksum {
    checksum::transport(src, dst, PROTOCOL, length, chunks)
}

/// The checksum field for a segment whose header (checksum zero) and data are
/// `chunks`.
pub fn checksum<'a>(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    length: usize,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> u16 {
    sum(src, dst, length, chunks).finish()
}

/// True when a received segment, checksum field included, verifies.
pub fn verifies<'a>(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    length: usize,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> bool {
    sum(src, dst, length, chunks).sum() == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    fn repr() -> Repr {
        Repr {
            src_port: 49152,
            dst_port: 80,
            seq: Seq(0x0102_0304),
            ack: Seq(0xa0b0_c0d0),
            flags: Flags::ACK | Flags::PSH,
            window: 502,
            urgent: 0,
            options: TcpOptions {
                timestamp: Some(Timestamp { val: 10, ecr: 20 }),
                ..TcpOptions::default()
            },
        }
    }

    #[test]
    fn a_header_round_trips_and_its_checksum_verifies() {
        let r = repr();
        let bytes = r.to_bytes(A, B, [&b"hello"[..]]);
        assert_eq!(bytes.len(), 32);
        let h = Header::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&h), r);
        assert!(verifies(A, B, 37, [&bytes[..], b"hello"]));
        assert!(!verifies(A, B, 37, [&bytes[..], b"hellp"]));
        let c = Ipv4Addr::new(198, 18, 0, 3);
        assert!(
            !verifies(A, c, 37, [&bytes[..], b"hello"]),
            "the pseudo-header counts"
        );
    }

    #[test]
    fn a_data_offset_below_five_words_is_malformed_and_a_short_one_asks_for_more() {
        let mut b = repr().to_bytes(A, B, [&b""[..]]);
        b[12] = 4 << 4;
        assert_eq!(
            Header::new_checked(&b[..]).unwrap_err(),
            WireError::Malformed
        );
        b[12] = 15 << 4;
        assert_eq!(
            Header::new_checked(&b[..]).unwrap_err(),
            WireError::Short { need: 60 }
        );
        assert_eq!(
            Header::new_checked(&b[..19]).unwrap_err(),
            WireError::Short { need: 20 }
        );
    }

    #[test]
    fn sack_blocks_beyond_forty_option_bytes_are_left_out() {
        let mut r = repr();
        for i in 0..4 {
            r.options.sack.push(Seq(i), Seq(i + 1));
        }
        let mut b = [0u8; MAX_HEADER_LEN];
        let n = r.emit(&mut b);
        assert_eq!(n, MAX_HEADER_LEN);
        let back = Repr::parse(&Header::new_checked(&b[..n]).unwrap());
        assert_eq!(back.options.sack.as_slice().len(), 3);
    }

    #[test]
    fn flags_print_by_name() {
        assert_eq!(format!("{:?}", Flags::SYN | Flags::ACK), "[SYN,ACK]");
    }
}
