//! The ARP packet for IPv4 over Ethernet (RFC 826): hardware type 1, protocol
//! type 0x0800, 6-byte hardware and 4-byte protocol addresses — 28 bytes.

use std::net::Ipv4Addr;

use strata_core::HwAddr;

use crate::eth::wire::ethertype;
use crate::wire::{WireError, be16, check_len, hw_at, ipv4_at, put16};

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// `ar$hrd` for Ethernet (RFC 826; IANA "Hardware Types").
pub const HARDWARE_ETHERNET: u16 = 1;

/// What an ARP packet asks or answers (`ar$op`, RFC 826).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// "Who has the target protocol address?" (1)
    Request,
    /// "The sender has it." (2)
    Reply,
}

impl Operation {
    /// The value on the wire.
    pub fn code(self) -> u16 {
        match self {
            Operation::Request => 1,
            Operation::Reply => 2,
        }
    }
}

/// A checked view of an ARP packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` after checking it holds a whole Ethernet/IPv4 packet.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        check_len(buffer.as_ref(), PACKET_LEN)?;
        Ok(Packet { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// `ar$hrd`, the hardware address space.
    pub fn hardware_type(&self) -> u16 {
        be16(self.b(), 0)
    }

    /// `ar$pro`, the protocol address space (an ethertype).
    pub fn protocol_type(&self) -> u16 {
        be16(self.b(), 2)
    }

    /// `ar$hln`, bytes per hardware address.
    pub fn hardware_len(&self) -> u8 {
        self.b()[4]
    }

    /// `ar$pln`, bytes per protocol address.
    pub fn protocol_len(&self) -> u8 {
        self.b()[5]
    }

    /// `ar$op` as on the wire.
    pub fn operation(&self) -> u16 {
        be16(self.b(), 6)
    }

    /// `ar$sha`.
    pub fn sender_hw(&self) -> HwAddr {
        hw_at(self.b(), 8)
    }

    /// `ar$spa`.
    pub fn sender_ip(&self) -> Ipv4Addr {
        ipv4_at(self.b(), 14)
    }

    /// `ar$tha`.
    pub fn target_hw(&self) -> HwAddr {
        hw_at(self.b(), 18)
    }

    /// `ar$tpa`.
    pub fn target_ip(&self) -> Ipv4Addr {
        ipv4_at(self.b(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the hardware/protocol types and lengths for Ethernet and IPv4.
    pub fn set_ethernet_ipv4(&mut self) {
        put16(self.bm(), 0, HARDWARE_ETHERNET);
        put16(self.bm(), 2, ethertype::IPV4);
        self.bm()[4] = 6;
        self.bm()[5] = 4;
    }

    /// Sets `ar$op`.
    pub fn set_operation(&mut self, op: u16) {
        put16(self.bm(), 6, op);
    }

    /// Sets `ar$sha`.
    pub fn set_sender_hw(&mut self, a: HwAddr) {
        self.bm()[8..14].copy_from_slice(&a.0);
    }

    /// Sets `ar$spa`.
    pub fn set_sender_ip(&mut self, a: Ipv4Addr) {
        self.bm()[14..18].copy_from_slice(&a.octets());
    }

    /// Sets `ar$tha`.
    pub fn set_target_hw(&mut self, a: HwAddr) {
        self.bm()[18..24].copy_from_slice(&a.0);
    }

    /// Sets `ar$tpa`.
    pub fn set_target_ip(&mut self, a: Ipv4Addr) {
        self.bm()[24..28].copy_from_slice(&a.octets());
    }
}

/// A parsed Ethernet/IPv4 ARP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Request or reply.
    pub operation: Operation,
    /// The sender's hardware address.
    pub sender_hw: HwAddr,
    /// The sender's IPv4 address.
    pub sender_ip: Ipv4Addr,
    /// The target's hardware address (ignored in requests).
    pub target_hw: HwAddr,
    /// The target's IPv4 address.
    pub target_ip: Ipv4Addr,
}

impl Repr {
    /// Parses a packet; other address spaces and operations (RARP, InARP) are
    /// unsupported.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, WireError> {
        if p.hardware_type() != HARDWARE_ETHERNET
            || p.protocol_type() != ethertype::IPV4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(WireError::Unsupported);
        }
        let operation = match p.operation() {
            1 => Operation::Request,
            2 => Operation::Reply,
            _ => return Err(WireError::Unsupported),
        };
        Ok(Repr {
            operation,
            sender_hw: p.sender_hw(),
            sender_ip: p.sender_ip(),
            target_hw: p.target_hw(),
            target_ip: p.target_ip(),
        })
    }

    /// Writes this packet into `p`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_ethernet_ipv4();
        p.set_operation(self.operation.code());
        p.set_sender_hw(self.sender_hw);
        p.set_sender_ip(self.sender_ip);
        p.set_target_hw(self.target_hw);
        p.set_target_ip(self.target_ip);
    }

    /// This packet as bytes.
    pub fn to_bytes(&self) -> [u8; PACKET_LEN] {
        let mut buf = [0u8; PACKET_LEN];
        self.emit(&mut Packet {
            buffer: &mut buf[..],
        });
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request from 198.18.0.2 for 198.18.0.1, as Linux sends it.
    const REQUEST: [u8; PACKET_LEN] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // Ethernet, IPv4, request
        0x02, 0x53, 0x54, 0x00, 0x00, 0x02, 198, 18, 0, 2, // sender
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 198, 18, 0, 1, // target
    ];

    #[test]
    fn a_linux_request_parses_and_emits_byte_for_byte() {
        let r = Repr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        assert_eq!(r.operation, Operation::Request);
        assert_eq!(r.sender_hw, HwAddr::local(2));
        assert_eq!(r.sender_ip, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(r.target_hw, HwAddr::ZERO);
        assert_eq!(r.target_ip, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(r.to_bytes(), REQUEST);
    }

    #[test]
    fn other_address_spaces_and_operations_are_unsupported() {
        for (at, value) in [(1, 6u8), (3, 0xdd), (4, 8), (5, 16), (7, 3)] {
            let mut p = REQUEST;
            p[at] = value;
            let parsed = Repr::parse(&Packet::new_checked(&p[..]).unwrap());
            assert_eq!(parsed, Err(WireError::Unsupported), "byte {at} = {value}");
        }
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            WireError::Short { need: 28 }
        );
    }
}
