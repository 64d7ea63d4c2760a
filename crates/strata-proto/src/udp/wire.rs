//! The UDP header (RFC 768): source port, destination port, length (header
//! included) and a checksum over an IPv4 pseudo-header, the header and the data.

use std::net::Ipv4Addr;

use strata_core::checksum::{self, Checksum};

use crate::wire::{WireError, be16, check_len, put16};

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// UDP's number in the pseudo-header (RFC 768).
pub const PROTOCOL: u8 = 17;

/// A checked view of a UDP header.
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

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The length field: header and data.
    pub fn length(&self) -> usize {
        usize::from(be16(self.buffer.as_ref(), 4))
    }

    /// The checksum field; zero means the sender computed none (RFC 768).
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
}

/// A parsed UDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length of header and data.
    pub length: usize,
    /// The checksum field.
    pub checksum: u16,
}

impl Repr {
    /// Parses a header; a length shorter than the header is malformed.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Repr, WireError> {
        if h.length() < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        Ok(Repr {
            src_port: h.src_port(),
            dst_port: h.dst_port(),
            length: h.length(),
            checksum: h.checksum(),
        })
    }

    /// The header as bytes (a length beyond 65535 is cut to the field; callers
    /// check sizes first).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        put16(&mut b, 0, self.src_port);
        put16(&mut b, 2, self.dst_port);
        put16(&mut b, 4, self.length.min(usize::from(u16::MAX)) as u16);
        put16(&mut b, 6, self.checksum);
        b
    }
}

/// The ones'-complement sum of the pseudo-header (RFC 768) and `chunks` —
/// the UDP header and data, which may lie in several pieces.
pub fn sum<'a>(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    length: usize,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Checksum {
    checksum::transport(src, dst, PROTOCOL, length, chunks)
}

/// [`sum`] of the pseudo-header and the header alone, from the header's
/// fields as numbers (the four 16-bit words it is made of) rather than its
/// bytes: what a receiver starts the data's sum from.
#[inline]
pub fn header_sum(src: Ipv4Addr, dst: Ipv4Addr, r: &Repr) -> Checksum {
    let mut c = header_words(src, dst, r);
    c.add_u16(r.checksum);
    c
}

/// The pseudo-header, the ports and the length as numbers: the sum both
/// [`header_sum`] and [`checksum_of`] start from. The header's words come
/// first because they sit at even offsets; the data after them may end on
/// an odd byte.
#[inline]
fn header_words(src: Ipv4Addr, dst: Ipv4Addr, r: &Repr) -> Checksum {
    let length = r.length.min(usize::from(u16::MAX)) as u16;
    let mut c = Checksum::new();
    c.add_pseudo_header(src, dst, PROTOCOL, length);
    c.add_u16(r.src_port);
    c.add_u16(r.dst_port);
    c.add_u16(length);
    c
}

/// The checksum to send for a datagram with header `r` (its checksum field
/// taken as zero) and data `data`: the header's words are added as numbers,
/// without building the header in bytes first. RFC 768: a computed zero is
/// sent as all ones.
#[inline]
pub fn checksum_of<'a>(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    r: &Repr,
    data: impl IntoIterator<Item = &'a [u8]>,
) -> u16 {
    let mut c = header_words(src, dst, r);
    for chunk in data {
        c.add(chunk);
    }
    to_send(c)
}

/// [`checksum_of`] for data in one piece (the common case: a datagram's data
/// is one buffer): the data is summed in one pass, with no odd byte carried
/// between pieces, and its folded sum added as one more word. Adding a
/// ones'-complement sum as a word is the same as adding its words (RFC 1071
/// §2(C)); the data starts at an even offset, after the header, and an odd
/// last byte is padded with zero either way.
#[inline]
pub fn checksum_of_one(src: Ipv4Addr, dst: Ipv4Addr, r: &Repr, data: &[u8]) -> u16 {
    let mut c = header_words(src, dst, r);
    c.add_u16(!checksum::checksum(data));
    to_send(c)
}

/// The finished sum as sent: RFC 768 sends a computed zero as all ones
/// (zero means "no checksum").
#[inline]
fn to_send(c: Checksum) -> u16 {
    match c.finish() {
        0 => 0xffff,
        c => c,
    }
}

/// The checksum to send for a datagram whose header (checksum field zero) and
/// data are `chunks`. RFC 768: a computed zero is sent as all ones, since zero
/// means "no checksum".
pub fn checksum<'a>(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    length: usize,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> u16 {
    match sum(src, dst, length, chunks).finish() {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

    fn datagram(data: &[u8]) -> Vec<u8> {
        let mut r = Repr {
            src_port: 40000,
            dst_port: 7,
            length: HEADER_LEN + data.len(),
            checksum: 0,
        };
        r.checksum = checksum(SRC, DST, r.length, [&r.to_bytes()[..], data]);
        [&r.to_bytes()[..], data].concat()
    }

    #[test]
    fn a_datagram_with_its_checksum_sums_to_all_ones() {
        let d = datagram(b"hello, strata");
        assert_eq!(sum(SRC, DST, d.len(), [&d[..]]).sum(), 0xffff);
        let r = Repr::parse(&Header::new_checked(&d[..]).unwrap()).unwrap();
        assert_eq!((r.src_port, r.dst_port, r.length), (40000, 7, 21));
    }

    #[test]
    fn the_checksum_is_the_same_over_any_split_of_the_data() {
        let d = datagram(b"an odd number of bytes!");
        let whole = sum(SRC, DST, d.len(), [&d[..]]).sum();
        for cut in [1, 7, 8, 9, 20] {
            assert_eq!(
                sum(SRC, DST, d.len(), [&d[..cut], &d[cut..]]).sum(),
                whole,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn the_checksum_from_header_fields_equals_the_one_over_header_bytes() {
        for data in [&b""[..], b"x", b"an odd number of bytes!", &[0xff; 1400]] {
            let r = Repr {
                src_port: 40000,
                dst_port: 7,
                length: HEADER_LEN + data.len(),
                checksum: 0,
            };
            let split = data.len() / 3;
            assert_eq!(
                checksum_of(SRC, DST, &r, [&data[..split], &data[split..]]),
                checksum(SRC, DST, r.length, [&r.to_bytes()[..], data]),
                "{} bytes",
                data.len()
            );
        }
    }

    #[test]
    fn the_checksum_of_one_piece_equals_the_one_over_pieces() {
        let mut data = vec![0u8; 1500];
        for len in [0, 1, 2, 3, 7, 8, 63, 64, 65, 1400, 1471, 1472] {
            for fill in [0x00, 0x5a, 0xff] {
                data.iter_mut().for_each(|b| *b = fill);
                if len > 0 {
                    data[len - 1] = 0x81;
                }
                for ports in [(40000, 7), (0, 0), (0xffff, 0xffff)] {
                    let r = Repr {
                        src_port: ports.0,
                        dst_port: ports.1,
                        length: HEADER_LEN + len,
                        checksum: 0,
                    };
                    let d = &data[..len];
                    assert_eq!(
                        checksum_of_one(SRC, DST, &r, d),
                        checksum_of(SRC, DST, &r, [&d[..len / 2], &d[len / 2..]]),
                        "{len} bytes of {fill:#x}, ports {ports:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_header_sum_from_fields_equals_the_one_over_header_bytes() {
        for (ports, length, checksum) in [
            ((40000, 7), 9, 0),
            ((0, 0), 8, 0xffff),
            ((0xffff, 0xffff), 0xffff, 0x1234),
            ((53, 33333), 1408, 0x8001),
        ] {
            let r = Repr {
                src_port: ports.0,
                dst_port: ports.1,
                length,
                checksum,
            };
            assert_eq!(
                header_sum(SRC, DST, &r).sum(),
                sum(SRC, DST, length, [&r.to_bytes()[..]]).sum(),
                "{r:?}"
            );
        }
    }

    #[test]
    fn a_computed_zero_goes_out_as_all_ones() {
        // Choose two data bytes that make the sum of everything else 0xffff.
        let mut r = Repr {
            src_port: 1,
            dst_port: 2,
            length: 10,
            checksum: 0,
        };
        let partial = sum(SRC, DST, 10, [&r.to_bytes()[..]]).sum();
        let filler = (!partial).to_be_bytes();
        r.checksum = checksum(SRC, DST, 10, [&r.to_bytes()[..], &filler[..]]);
        assert_eq!(r.checksum, 0xffff);
    }

    #[test]
    fn lengths_below_the_header_are_malformed() {
        let mut d = datagram(b"x");
        d[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            Repr::parse(&Header::new_checked(&d[..]).unwrap()),
            Err(WireError::Malformed)
        );
        assert_eq!(
            Header::new_checked(&d[..7]).unwrap_err(),
            WireError::Short { need: 8 }
        );
    }
}
