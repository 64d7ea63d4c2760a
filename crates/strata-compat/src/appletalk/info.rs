//! What DDP records in a packet's metadata for the layers above it: the
//! datagram's two socket addresses and its type (the x-kernel's participant
//! information, as Strata's `Ipv4Info` and `Ports` are for the Internet).

use strata_core::{PacketMeta, Record};

use super::wire::ddp::Addr;

/// A received datagram's addresses and DDP type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DdpInfo {
    /// The sender's socket address.
    pub src: Addr,
    /// The socket address it was sent to.
    pub dst: Addr,
    /// Its DDP type.
    pub ddp_type: u8,
}

fn put(out: &mut [u8], a: Addr) {
    out[..2].copy_from_slice(&a.net.to_be_bytes());
    out[2] = a.node;
    out[3] = a.socket;
}

fn get(b: &[u8]) -> Addr {
    Addr::new(u16::from_be_bytes([b[0], b[1]]), b[2], b[3])
}

impl Record for DdpInfo {
    const LEN: usize = 9;
    strata_core::record_kind!();
    fn encode(&self, out: &mut [u8]) {
        put(&mut out[..4], self.src);
        put(&mut out[4..8], self.dst);
        out[8] = self.ddp_type;
    }
    fn decode(b: &[u8]) -> Self {
        DdpInfo {
            src: get(&b[..4]),
            dst: get(&b[4..8]),
            ddp_type: b[8],
        }
    }
}

impl DdpInfo {
    /// The record DDP left in `meta`, if a DDP carried this packet.
    pub fn of(meta: &PacketMeta) -> Option<DdpInfo> {
        meta.get::<DdpInfo>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips() {
        let i = DdpInfo {
            src: Addr::new(0xff00, 1, 129),
            dst: Addr::new(7, 255, 4),
            ddp_type: 3,
        };
        let mut b = [0u8; DdpInfo::LEN];
        i.encode(&mut b);
        assert_eq!(DdpInfo::decode(&b), i);
    }
}
