//! The virtio-net header on the wire: a typed view over its ten bytes
//! ([`Header`]) and what they say ([`Repr`]), both ways.
//!
//! The layout is `struct virtio_net_hdr` of include/uapi/linux/virtio_net.h
//! (the legacy header, without `num_buffers`), which packet(7) sockets with
//! PACKET_VNET_HDR and TAP devices with IFF_VNET_HDR put before every frame.
//! Legacy headers are in the host's byte order (virtio 1.x §5.1.6: "legacy
//! interface … native endian"), which is what the kernel uses for both.
//!
//! Parsing checks only what the header says of itself (its flags, its GSO
//! type and size: [`Refused::Short`], `Flags`, `GsoType`, `GsoSize`);
//! whether it tells the truth about the frame behind it is
//! [`receive`](super::receive)'s business.

use super::Refused;

/// The header's length.
pub const LEN: usize = 10;

/// Byte offsets of the fields.
mod field {
    pub const FLAGS: usize = 0;
    pub const GSO_TYPE: usize = 1;
    pub const HDR_LEN: usize = 2;
    pub const GSO_SIZE: usize = 4;
    pub const CSUM_START: usize = 6;
    pub const CSUM_OFFSET: usize = 8;
}

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset`
/// is to be finished over `[csum_start, end)`; the field holds the
/// pseudo-header's sum.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the transport checksum was verified.
const F_DATA_VALID: u8 = 2;

/// `VIRTIO_NET_HDR_GSO_*` and the ECN bit that may be or'ed into the TCP ones.
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP: u8 = 3;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

/// A virtio-net header read (and written) in place.
#[derive(Clone, Copy, Debug)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// A view of the header at the start of `buffer`, which must hold one.
    pub fn new_checked(buffer: T) -> Result<Header<T>, Refused> {
        if buffer.as_ref().len() < LEN {
            return Err(Refused::Short);
        }
        Ok(Header { buffer })
    }

    fn word(&self, at: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_ne_bytes([b[at], b[at + 1]])
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The GSO type byte (with the ECN bit).
    pub fn gso_type(&self) -> u8 {
        self.buffer.as_ref()[field::GSO_TYPE]
    }

    /// The length of the headers before the payload, a hint only (the
    /// kernel puts its buffer's linear length there).
    pub fn hdr_len(&self) -> u16 {
        self.word(field::HDR_LEN)
    }

    /// The payload bytes per segment of a GSO frame.
    pub fn gso_size(&self) -> u16 {
        self.word(field::GSO_SIZE)
    }

    /// Where the checksummed range starts, from the frame's first byte.
    pub fn csum_start(&self) -> u16 {
        self.word(field::CSUM_START)
    }

    /// Where the checksum field lies, from `csum_start`.
    pub fn csum_offset(&self) -> u16 {
        self.word(field::CSUM_OFFSET)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn set_word(&mut self, at: usize, v: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&v.to_ne_bytes());
    }

    /// Sets the flags byte.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    /// Sets the GSO type byte.
    pub fn set_gso_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::GSO_TYPE] = v;
    }

    /// Sets the headers' length.
    pub fn set_hdr_len(&mut self, v: u16) {
        self.set_word(field::HDR_LEN, v);
    }

    /// Sets the segment size.
    pub fn set_gso_size(&mut self, v: u16) {
        self.set_word(field::GSO_SIZE, v);
    }

    /// Sets the checksummed range's start.
    pub fn set_csum_start(&mut self, v: u16) {
        self.set_word(field::CSUM_START, v);
    }

    /// Sets the checksum field's offset.
    pub fn set_csum_offset(&mut self, v: u16) {
        self.set_word(field::CSUM_OFFSET, v);
    }
}

/// What a header says of the frame's transport checksum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Csum {
    /// Nothing: the frame is as it is, checksums unverified.
    #[default]
    None,
    /// `NEEDS_CSUM`: the sum over `[start, end)`, complemented, belongs in
    /// the 16-bit field at `start + offset`, which holds the pseudo-header's
    /// sum.
    Partial {
        /// Where the summed range starts in the frame.
        start: u16,
        /// Where the field lies from `start`.
        offset: u16,
    },
    /// `DATA_VALID`: the kernel (or the device before it) verified it.
    Valid,
}

/// What a header says of segmentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Gso {
    /// One packet.
    #[default]
    None,
    /// TCP in IPv4 to be cut into segments of `size` payload bytes; `ecn`:
    /// the first carries CWR.
    Tcp4 {
        /// Payload bytes per segment.
        size: u16,
        /// The ECN bit.
        ecn: bool,
    },
    /// TCP in IPv6, likewise.
    Tcp6 {
        /// Payload bytes per segment.
        size: u16,
        /// The ECN bit.
        ecn: bool,
    },
    /// UDP fragmentation offload (UFO): one datagram cut into IPv4
    /// fragments. Linux stopped making these in 4.14.
    Ufo {
        /// Payload bytes per fragment.
        size: u16,
    },
    /// UDP segmentation (`UDP_SEGMENT`, Linux 4.18): datagrams of `size`
    /// payload bytes, each with its own UDP header.
    UdpL4 {
        /// Payload bytes per datagram.
        size: u16,
    },
}

/// A virtio-net header's meaning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repr {
    /// The transport checksum's state.
    pub csum: Csum,
    /// Segmentation.
    pub gso: Gso,
    /// The headers' length: written as a hint, never trusted when read.
    pub hdr_len: u16,
}

impl Repr {
    /// What `h` says, when it says something defined.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Repr, Refused> {
        let csum = match h.flags() {
            0 => Csum::None,
            F_NEEDS_CSUM => Csum::Partial {
                start: h.csum_start(),
                offset: h.csum_offset(),
            },
            F_DATA_VALID => Csum::Valid,
            _ => return Err(Refused::Flags),
        };
        let size = h.gso_size();
        let ecn = h.gso_type() & GSO_ECN != 0;
        let gso = match (h.gso_type() & !GSO_ECN, ecn) {
            (GSO_NONE, false) => Gso::None,
            (GSO_TCPV4, _) => Gso::Tcp4 { size, ecn },
            (GSO_TCPV6, _) => Gso::Tcp6 { size, ecn },
            (GSO_UDP, false) => Gso::Ufo { size },
            (GSO_UDP_L4, false) => Gso::UdpL4 { size },
            _ => return Err(Refused::GsoType),
        };
        if gso != Gso::None && size == 0 {
            return Err(Refused::GsoSize);
        }
        Ok(Repr {
            csum,
            gso,
            hdr_len: h.hdr_len(),
        })
    }

    /// Writes the header into `h`; fields this meaning leaves unused are
    /// zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) {
        let (flags, start, offset) = match self.csum {
            Csum::None => (0, 0, 0),
            Csum::Partial { start, offset } => (F_NEEDS_CSUM, start, offset),
            Csum::Valid => (F_DATA_VALID, 0, 0),
        };
        let ecn_bit = |ecn: bool| if ecn { GSO_ECN } else { 0 };
        let (gso_type, size) = match self.gso {
            Gso::None => (GSO_NONE, 0),
            Gso::Tcp4 { size, ecn } => (GSO_TCPV4 | ecn_bit(ecn), size),
            Gso::Tcp6 { size, ecn } => (GSO_TCPV6 | ecn_bit(ecn), size),
            Gso::Ufo { size } => (GSO_UDP, size),
            Gso::UdpL4 { size } => (GSO_UDP_L4, size),
        };
        h.set_flags(flags);
        h.set_gso_type(gso_type);
        h.set_hdr_len(self.hdr_len);
        h.set_gso_size(size);
        h.set_csum_start(start);
        h.set_csum_offset(offset);
    }

    /// The header's ten bytes.
    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        self.emit(&mut Header { buffer: &mut b[..] });
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every meaning a header can carry: each checksum state with each GSO
    /// type, ECN on and off where it exists.
    fn every_repr() -> Vec<Repr> {
        let csums = [
            Csum::None,
            Csum::Partial {
                start: 34,
                offset: 16,
            },
            Csum::Valid,
        ];
        let gsos = [
            Gso::None,
            Gso::Tcp4 {
                size: 1448,
                ecn: false,
            },
            Gso::Tcp4 {
                size: 1448,
                ecn: true,
            },
            Gso::Tcp6 {
                size: 1428,
                ecn: false,
            },
            Gso::Tcp6 {
                size: 1428,
                ecn: true,
            },
            Gso::Ufo { size: 1480 },
            Gso::UdpL4 { size: 1472 },
        ];
        let mut all = Vec::new();
        for csum in csums {
            for gso in gsos {
                all.push(Repr {
                    csum,
                    gso,
                    hdr_len: 66,
                });
            }
        }
        all
    }

    fn parse(bytes: &[u8]) -> Result<Repr, Refused> {
        Repr::parse(&Header::new_checked(bytes)?)
    }

    #[test]
    fn every_flag_and_gso_type_reads_back_as_written() {
        for r in every_repr() {
            assert_eq!(parse(&r.to_bytes()), Ok(r), "{r:?}");
        }
    }

    #[test]
    fn the_bytes_are_linuxs_layout_in_host_order() {
        let r = Repr {
            csum: Csum::Partial {
                start: 34,
                offset: 16,
            },
            gso: Gso::Tcp4 {
                size: 1448,
                ecn: true,
            },
            hdr_len: 66,
        };
        let mut want = vec![1u8, 0x81];
        for w in [66u16, 1448, 34, 16] {
            want.extend_from_slice(&w.to_ne_bytes());
        }
        assert_eq!(r.to_bytes().to_vec(), want);
        let b = r.to_bytes();
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(
            (
                h.flags(),
                h.gso_type(),
                h.hdr_len(),
                h.gso_size(),
                h.csum_start(),
                h.csum_offset()
            ),
            (1, 0x81, 66, 1448, 34, 16)
        );
        let valid_udp = Repr {
            csum: Csum::Valid,
            gso: Gso::UdpL4 { size: 1000 },
            hdr_len: 0,
        }
        .to_bytes();
        assert_eq!((valid_udp[0], valid_udp[1]), (2, 5));
    }

    #[test]
    fn unused_fields_are_written_as_zero_and_ignored_when_read() {
        let plain = Repr::default().to_bytes();
        assert_eq!(plain, [0; LEN]);
        // A checksum range and a segment size that mean nothing here.
        let mut b = [0u8; LEN];
        b[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        b[6..8].copy_from_slice(&34u16.to_ne_bytes());
        b[0] = F_DATA_VALID;
        assert_eq!(
            parse(&b),
            Ok(Repr {
                csum: Csum::Valid,
                ..Repr::default()
            })
        );
    }

    #[test]
    fn headers_that_say_nothing_defined_are_malformed() {
        assert_eq!(parse(&[0u8; LEN - 1]), Err(Refused::Short));
        let with = |flags: u8, gso: u8, size: u16| {
            let mut b = [0u8; LEN];
            b[0] = flags;
            b[1] = gso;
            b[4..6].copy_from_slice(&size.to_ne_bytes());
            parse(&b)
        };
        for flags in [4u8, 8, 0x80, F_NEEDS_CSUM | F_DATA_VALID] {
            assert_eq!(with(flags, 0, 0), Err(Refused::Flags), "flags {flags:#x}");
        }
        for gso in [
            2u8,
            6,
            0x7f,
            GSO_ECN,
            GSO_UDP | GSO_ECN,
            GSO_UDP_L4 | GSO_ECN,
        ] {
            assert_eq!(with(0, gso, 1000), Err(Refused::GsoType), "type {gso:#x}");
        }
        for gso in [GSO_TCPV4, GSO_TCPV6, GSO_UDP, GSO_UDP_L4] {
            assert_eq!(with(1, gso, 0), Err(Refused::GsoSize), "type {gso}");
        }
    }
}
