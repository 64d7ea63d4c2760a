//! The preamble every PA message starts with (seed 003 §2.2, Figure 1).
//!
//! Eight bytes, always in network order so that it can be read before the
//! byte order is known: the connection-identification-present bit, the
//! byte-order bit (set: the headers after it are little-endian) and a 62-bit
//! connection cookie chosen at random.

use crate::field::ByteOrder;

/// The preamble's length in bytes.
pub const PREAMBLE_LEN: usize = 8;

/// The cookie's mask: 62 bits.
pub const COOKIE_MASK: u64 = (1 << 62) - 1;

const IDENT_BIT: u64 = 1 << 63;
const LITTLE_BIT: u64 = 1 << 62;

/// A parsed preamble.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preamble {
    /// The connection identification header follows the preamble.
    pub ident: bool,
    /// The byte order of the headers that follow.
    pub order: ByteOrder,
    /// The sender's connection cookie (62 bits).
    pub cookie: u64,
}

impl Preamble {
    /// Reads a preamble from the front of `b`; `None` when `b` is shorter.
    pub fn parse(b: &[u8]) -> Option<Preamble> {
        let raw = u64::from_be_bytes(b.get(..PREAMBLE_LEN)?.try_into().ok()?);
        Some(Preamble {
            ident: raw & IDENT_BIT != 0,
            order: if raw & LITTLE_BIT != 0 {
                ByteOrder::Little
            } else {
                ByteOrder::Big
            },
            cookie: raw & COOKIE_MASK,
        })
    }

    /// What the checksum covers of the preamble (seed 003 has it cover
    /// nothing): the byte order and the cookie, as a number. Not the
    /// identification bit, which the sender sets after the sum is made.
    pub fn covered(self) -> u64 {
        u64::from_be_bytes(self.to_bytes()) & !IDENT_BIT
    }

    /// The eight bytes on the wire.
    pub fn to_bytes(self) -> [u8; PREAMBLE_LEN] {
        let mut raw = self.cookie & COOKIE_MASK;
        if self.ident {
            raw |= IDENT_BIT;
        }
        if self.order == ByteOrder::Little {
            raw |= LITTLE_BIT;
        }
        raw.to_be_bytes()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn every_preamble_round_trips(ident in any::<bool>(), little in any::<bool>(), cookie in 0..=COOKIE_MASK) {
            let order = if little { ByteOrder::Little } else { ByteOrder::Big };
            let p = Preamble { ident, order, cookie };
            prop_assert_eq!(Preamble::parse(&p.to_bytes()), Some(p));
        }
    }

    #[test]
    fn the_flags_are_the_first_two_bits_on_the_wire() {
        let p = Preamble {
            ident: true,
            order: ByteOrder::Big,
            cookie: 1,
        };
        assert_eq!(p.to_bytes(), [0x80, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(Preamble::parse(&[0x40; 7]), None);
    }
}
