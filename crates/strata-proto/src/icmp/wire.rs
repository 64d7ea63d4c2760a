//! The ICMP header (RFC 792): type, code, checksum and four bytes whose meaning
//! depends on the type — identifier and sequence number for echo messages,
//! unused (zero) for destination unreachable and time exceeded. The checksum
//! covers the whole message, so it is computed over the payload by the caller.

use strata_core::checksum::Checksum;

use crate::wire::{WireError, be16, check_len, put16};

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// ICMP types this implementation speaks (RFC 792).
pub mod kind {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// True for the types RFC 1122 §3.2.2 calls error messages (destination
/// unreachable, source quench, redirect, time exceeded, parameter problem):
/// no ICMP error is ever sent about one of these.
pub fn is_error_type(t: u8) -> bool {
    matches!(t, 3 | 4 | 5 | 11 | 12)
}

/// A checked view of an ICMP header.
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

    /// The type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// The code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The identifier of an echo message.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// The sequence number of an echo message.
    pub fn seq(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
}

/// A parsed ICMP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr {
    /// Echo request (type 8).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
    },
    /// Echo reply (type 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
    },
    /// Destination unreachable (type 3); the payload quotes the datagram.
    DstUnreachable {
        /// Why (RFC 792, RFC 1122 §3.2.2.1): 2 protocol, 3 port …
        code: u8,
    },
    /// Time exceeded (type 11); the payload quotes the datagram.
    TimeExceeded {
        /// 0 TTL exceeded in transit, 1 fragment reassembly time exceeded.
        code: u8,
    },
}

impl Repr {
    /// Parses a header; other types are unsupported.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Repr, WireError> {
        match h.msg_type() {
            kind::ECHO_REQUEST => Ok(Repr::EchoRequest {
                ident: h.ident(),
                seq: h.seq(),
            }),
            kind::ECHO_REPLY => Ok(Repr::EchoReply {
                ident: h.ident(),
                seq: h.seq(),
            }),
            kind::DST_UNREACHABLE => Ok(Repr::DstUnreachable { code: h.code() }),
            kind::TIME_EXCEEDED => Ok(Repr::TimeExceeded { code: h.code() }),
            _ => Err(WireError::Unsupported),
        }
    }

    /// The header as bytes with the checksum field set to `checksum`.
    pub fn to_bytes(&self, checksum: u16) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let (t, code, rest) = match *self {
            Repr::EchoRequest { ident, seq } => (kind::ECHO_REQUEST, 0, (ident, seq)),
            Repr::EchoReply { ident, seq } => (kind::ECHO_REPLY, 0, (ident, seq)),
            Repr::DstUnreachable { code } => (kind::DST_UNREACHABLE, code, (0, 0)),
            Repr::TimeExceeded { code } => (kind::TIME_EXCEEDED, code, (0, 0)),
        };
        b[0] = t;
        b[1] = code;
        put16(&mut b, 2, checksum);
        put16(&mut b, 4, rest.0);
        put16(&mut b, 6, rest.1);
        b
    }

    /// The header as bytes with the checksum over it and `payload`'s chunks
    /// (RFC 792: the ones' complement sum of the whole ICMP message).
    pub fn to_bytes_over<'a>(
        &self,
        payload: impl IntoIterator<Item = &'a [u8]>,
    ) -> [u8; HEADER_LEN] {
        let mut c = Checksum::new();
        c.add(&self.to_bytes(0));
        for chunk in payload {
            c.add(chunk);
        }
        self.to_bytes(c.finish())
    }
}

/// A checksum updated for one 16-bit word changing from `old` to `new`,
/// without reading the rest of the message (RFC 1624 eqn. 3:
/// HC' = ~(~HC + ~m + m')).
pub fn adjust_checksum(checksum: u16, old: u16, new: u16) -> u16 {
    let mut c = Checksum::new();
    c.add_u16(!checksum);
    c.add_u16(!old);
    c.add_u16(new);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_core::checksum::verifies;

    /// Linux ping's first request: identifier 0x1c46, sequence 1, 8 bytes of data.
    fn ping() -> Vec<u8> {
        let data = *b"strata!!";
        let h = Repr::EchoRequest {
            ident: 0x1c46,
            seq: 1,
        }
        .to_bytes_over([&data[..]]);
        [&h[..], &data[..]].concat()
    }

    #[test]
    fn an_echo_request_parses_and_its_checksum_covers_the_data() {
        let bytes = ping();
        assert!(verifies(&bytes));
        let h = Header::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(&h),
            Ok(Repr::EchoRequest {
                ident: 0x1c46,
                seq: 1
            })
        );
        let mut broken = bytes.clone();
        broken[12] ^= 0x40;
        assert!(!verifies(&broken), "a flipped data bit is caught");
    }

    #[test]
    fn turning_a_request_into_a_reply_adjusts_the_checksum_like_a_full_recompute() {
        let bytes = ping();
        let h = Header::new_checked(&bytes[..]).unwrap();
        let adjusted = adjust_checksum(h.checksum(), 0x0800, 0x0000);
        let full = Repr::EchoReply {
            ident: 0x1c46,
            seq: 1,
        }
        .to_bytes_over([&bytes[8..]]);
        assert_eq!(adjusted.to_be_bytes(), [full[2], full[3]]);
    }

    #[test]
    fn unknown_types_are_unsupported_and_short_headers_short() {
        let mut b = ping();
        b[0] = 13; // timestamp
        assert_eq!(
            Repr::parse(&Header::new_checked(&b[..]).unwrap()),
            Err(WireError::Unsupported)
        );
        assert_eq!(
            Header::new_checked(&b[..7]).unwrap_err(),
            WireError::Short { need: 8 }
        );
        assert!(is_error_type(3) && is_error_type(11) && !is_error_type(8) && !is_error_type(0));
    }
}
