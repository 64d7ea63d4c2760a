//! AARP packets (Inside AppleTalk, 2nd ed., ch. 2, Figure 2-6), as EtherTalk
//! Phase 2 sends them inside an 802.2 LLC/SNAP frame (OUI 00-00-00, type
//! 0x80F3, which Strata's `eth` writes):
//!
//! ```text
//! hardware type (2) = 1 | protocol type (2) = 0x809B | hw len (1) = 6 | proto len (1) = 4
//! function (2): 1 request, 2 response, 3 probe
//! source hardware address (6) | source AppleTalk address (4): 0, net (2), node (1)
//! destination hardware address (6; zero in requests and probes)
//! destination AppleTalk address (4)
//! ```

use strata_core::HwAddr;

/// Bytes of an AARP packet.
pub const PACKET_LEN: usize = 28;
/// Hardware type: Ethernet.
pub const HW_ETHERNET: u16 = 1;
/// Protocol type: AppleTalk (DDP's SNAP type).
pub const PROTO_APPLETALK: u16 = 0x809b;

/// What a packet asks or says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    /// Who has this AppleTalk address?
    Request = 1,
    /// I have it (to the asker, or to a prober: the address is taken).
    Response = 2,
    /// Does anyone have this address? (a node choosing its own).
    Probe = 3,
}

/// An AppleTalk node address as AARP carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct NodeAddr {
    /// Network number.
    pub net: u16,
    /// Node number.
    pub node: u8,
}

/// Why a packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Shorter than a packet.
    Truncated,
    /// Not Ethernet/AppleTalk with lengths 6 and 4.
    NotEthertalk,
    /// A function other than request, response or probe.
    BadFunction,
    /// The pad byte of an AppleTalk address is not zero, or the sender's
    /// hardware address is not an individual address.
    Malformed,
}

/// An AARP packet, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The function.
    pub function: Function,
    /// The sender's hardware address.
    pub src_hw: HwAddr,
    /// The sender's AppleTalk address (tentative in a probe).
    pub src: NodeAddr,
    /// The target's hardware address (zero in requests and probes).
    pub dst_hw: HwAddr,
    /// The AppleTalk address asked about or answered to.
    pub dst: NodeAddr,
}

fn at(b: &[u8]) -> Result<NodeAddr, Error> {
    if b[0] != 0 {
        return Err(Error::Malformed);
    }
    Ok(NodeAddr {
        net: u16::from_be_bytes([b[1], b[2]]),
        node: b[3],
    })
}

fn hw(b: &[u8]) -> HwAddr {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[..6]);
    HwAddr(a)
}

impl Repr {
    /// Parses a packet (extra bytes after it, Ethernet padding, are ignored).
    pub fn parse(b: &[u8]) -> Result<Repr, Error> {
        if b.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        let word = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        if word(0) != HW_ETHERNET || word(2) != PROTO_APPLETALK || b[4] != 6 || b[5] != 4 {
            return Err(Error::NotEthertalk);
        }
        let function = match word(6) {
            1 => Function::Request,
            2 => Function::Response,
            3 => Function::Probe,
            _ => return Err(Error::BadFunction),
        };
        let src_hw = hw(&b[8..14]);
        if src_hw.is_multicast() || src_hw == HwAddr::ZERO {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            function,
            src_hw,
            src: at(&b[14..18])?,
            dst_hw: hw(&b[18..24]),
            dst: at(&b[24..28])?,
        })
    }

    /// The packet's bytes.
    pub fn to_bytes(&self) -> [u8; PACKET_LEN] {
        let mut b = [0u8; PACKET_LEN];
        b[0..2].copy_from_slice(&HW_ETHERNET.to_be_bytes());
        b[2..4].copy_from_slice(&PROTO_APPLETALK.to_be_bytes());
        b[4] = 6;
        b[5] = 4;
        b[6..8].copy_from_slice(&(self.function as u16).to_be_bytes());
        b[8..14].copy_from_slice(&self.src_hw.0);
        b[15..17].copy_from_slice(&self.src.net.to_be_bytes());
        b[17] = self.src.node;
        b[18..24].copy_from_slice(&self.dst_hw.0);
        b[25..27].copy_from_slice(&self.dst.net.to_be_bytes());
        b[27] = self.dst.node;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_has_inside_appletalks_layout_byte_for_byte() {
        let r = Repr {
            function: Function::Request,
            src_hw: HwAddr([0x02, 0x53, 0x54, 0, 0, 1]),
            src: NodeAddr {
                net: 0xff00,
                node: 1,
            },
            dst_hw: HwAddr::ZERO,
            dst: NodeAddr {
                net: 0xff00,
                node: 2,
            },
        };
        let want: [u8; PACKET_LEN] = [
            0x00, 0x01, 0x80, 0x9b, 0x06, 0x04, 0x00, 0x01, // types, lengths, function
            0x02, 0x53, 0x54, 0x00, 0x00, 0x01, 0x00, 0xff, 0x00, 0x01, // source
            0, 0, 0, 0, 0, 0, 0x00, 0xff, 0x00, 0x02, // destination
        ];
        assert_eq!(r.to_bytes(), want);
        assert_eq!(Repr::parse(&want), Ok(r));
    }

    #[test]
    fn foreign_or_bad_packets_are_refused_by_reason() {
        let good = Repr {
            function: Function::Probe,
            src_hw: HwAddr([0x02, 0, 0, 0, 0, 7]),
            src: NodeAddr { net: 1, node: 7 },
            dst_hw: HwAddr::ZERO,
            dst: NodeAddr { net: 1, node: 7 },
        }
        .to_bytes();
        assert_eq!(Repr::parse(&good[..27]), Err(Error::Truncated));
        let mut b = good;
        b[3] = 0x00; // IPv4's protocol type: ARP, not AARP
        assert_eq!(Repr::parse(&b), Err(Error::NotEthertalk));
        let mut b = good;
        b[7] = 9;
        assert_eq!(Repr::parse(&b), Err(Error::BadFunction));
        let mut b = good;
        b[14] = 1;
        assert_eq!(Repr::parse(&b), Err(Error::Malformed));
        let mut b = good;
        b[8] = 0x09; // a group address as the sender
        assert_eq!(Repr::parse(&b), Err(Error::Malformed));
    }
}
