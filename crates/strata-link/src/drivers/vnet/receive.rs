//! A received frame behind its virtio-net header: what of the header to
//! believe, which checksum to finish, what goes up whole and what is cut.
//!
//! The kernel fills the header from its buffer's state
//! (`virtio_net_hdr_from_skb`): a frame whose transport checksum it left to
//! a device says `NEEDS_CSUM` (its own TCP and UDP on a veth or TAP with
//! checksum offload), one it or a device verified says `DATA_VALID`, and a
//! GSO buffer — a TCP super-segment its sender never cut, or a run that GRO
//! merged — says `GSO_TCPV4` (or `GSO_UDP_L4` for a sender using
//! `UDP_SEGMENT`) with the segment size. Nothing of it is taken on faith: a
//! checksum range must lie inside the frame, a GSO frame must be the
//! protocol its type names with an IPv4 length that fills it, and its
//! segments must fit the link. What fails is refused by reason
//! ([`Refused`]) and counted by the driver; `hdr_len` is never used (the
//! kernel puts its buffer's linear length there, not the headers').
//!
//! A plain frame's owed checksum is finished here. A TCP super-frame's is
//! not: it goes up marked verified and is never checked or sent whole, and
//! every segment cut from it gets a checksum computed from its own bytes.

use std::fmt;

use strata_core::checksum;

use super::super::{Arrival, ETH_HEADER};
use super::wire::{Csum, Gso, Header, LEN, Repr};
use crate::offload::{Offsets, UDP, datagram_offsets};

/// Where TCP's and UDP's checksum fields sit in their headers.
const TCP_CHECKSUM: u16 = 16;
const UDP_CHECKSUM: u16 = 6;

/// Why a received frame's header was not believed (each counted apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Fewer bytes than a header.
    Short,
    /// A flag bit the header layout does not define (RSC_INFO and later ones
    /// need features Strata never negotiates), or a checksum both owed and
    /// verified.
    Flags,
    /// A GSO type the layout does not define, or the ECN bit without a TCP
    /// type.
    GsoType,
    /// A GSO type with a segment size of zero, segments longer than the link
    /// carries, or a GSO frame with nothing to cut.
    GsoSize,
    /// A checksum range outside the frame or in its Ethernet header, one
    /// that is not the transport checksum a GSO type needs, or a GSO frame
    /// that says nothing of its checksum.
    Checksum,
    /// A GSO frame whose headers are not the protocol its type names (TCP
    /// or UDP in IPv4 in Ethernet II, not a fragment, its IPv4 length
    /// filling the frame).
    Headers,
    /// A GSO type Strata does not take: TCP in IPv6, UDP fragmentation.
    Unsupported,
}

impl Refused {
    /// Every reason, in report order.
    pub const ALL: [Refused; 7] = [
        Refused::Short,
        Refused::Flags,
        Refused::GsoType,
        Refused::GsoSize,
        Refused::Checksum,
        Refused::Headers,
        Refused::Unsupported,
    ];

    /// The short name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Refused::Short => "short",
            Refused::Flags => "flags",
            Refused::GsoType => "gso-type",
            Refused::GsoSize => "gso-size",
            Refused::Checksum => "csum",
            Refused::Headers => "headers",
            Refused::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A frame taken from behind its header, checksums finished.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken<'a> {
    /// One frame to hand up as it is: a plain frame, or a TCP super-frame
    /// whose [`Arrival`] carries its segment size.
    Frame(&'a [u8], Arrival),
    /// A UDP super-frame of datagrams of `size` payload bytes, for the
    /// caller to cut ([`offload::datagrams`](crate::offload::datagrams)):
    /// no UDP takes a datagram that is really several.
    Datagrams(&'a [u8], usize),
}

/// Takes the header off `frame` (header first), checks what it claims of
/// the frame behind it, and finishes a transport checksum it says is owed.
/// `max` is the link's largest plain frame: GSO segments must fit it.
pub fn receive(frame: &mut [u8], max: usize) -> Result<Taken<'_>, Refused> {
    let repr = Repr::parse(&Header::new_checked(&*frame)?)?;
    let data = &mut frame[LEN..];
    match repr.gso {
        Gso::None => {
            let verified = match repr.csum {
                Csum::None => false,
                Csum::Valid => true,
                Csum::Partial { start, offset } => {
                    let (start, field) = (usize::from(start), usize::from(offset));
                    let field = start + field;
                    if start < ETH_HEADER || field + 2 > data.len() {
                        return Err(Refused::Checksum);
                    }
                    finish(data, start, field);
                    true
                }
            };
            Ok(Taken::Frame(
                data,
                Arrival {
                    segment_size: 0,
                    verified,
                },
            ))
        }
        Gso::Tcp4 { size, .. } => {
            let o = Offsets::of(data).ok_or(Refused::Headers)?;
            if !fills(data, o.ip) {
                return Err(Refused::Headers);
            }
            // Its checksum is left as it came (owed, or the first
            // segment's): a super-frame is never verified whole (it is
            // marked verified, as the kernel trusts its own `NEEDS_CSUM`
            // buffers) and never leaves whole — wherever it is cut (a
            // capture, the WAN bridge, a link's software segmentation) each
            // segment's checksum is computed from its own bytes. Summing
            // 64 KiB to fill a field nobody reads was a tenth of the
            // receiver's time.
            check_range(repr.csum, o.tcp, TCP_CHECKSUM)?;
            fits(data.len(), o.end, size, max)?;
            Ok(Taken::Frame(
                data,
                Arrival {
                    segment_size: size,
                    verified: true,
                },
            ))
        }
        Gso::UdpL4 { size } => {
            let (ip, udp) = datagram_offsets(data, UDP).ok_or(Refused::Headers)?;
            if !fills(data, ip) {
                return Err(Refused::Headers);
            }
            // Each datagram gets a checksum of its own when it is cut; the
            // super-frame's is left as it came.
            check_range(repr.csum, udp, UDP_CHECKSUM)?;
            fits(data.len(), udp + 8, size, max)?;
            Ok(Taken::Datagrams(data, usize::from(size)))
        }
        Gso::Tcp6 { .. } | Gso::Ufo { .. } => Err(Refused::Unsupported),
    }
}

/// True when the IPv4 header at `ip` is not a fragment's and its total
/// length is the frame's rest: a GSO frame is one whole datagram.
fn fills(data: &[u8], ip: usize) -> bool {
    let total = usize::from(u16::from_be_bytes([data[ip + 2], data[ip + 3]]));
    let fragment = u16::from_be_bytes([data[ip + 6], data[ip + 7]]) & 0x3fff != 0;
    !fragment && ip + total == data.len()
}

/// Checks that a GSO frame's segments of `size` payload bytes behind
/// `headers` bytes of headers fit a frame of `max` bytes, and that there is
/// something to cut.
fn fits(len: usize, headers: usize, size: u16, max: usize) -> Result<(), Refused> {
    if len > headers && headers + usize::from(size) <= max {
        Ok(())
    } else {
        Err(Refused::GsoSize)
    }
}

/// Checks that a GSO frame's checksum state is one the kernel could have
/// sent for a transport header at `l4` whose checksum field is at `field`
/// in it: owed exactly there, or verified.
fn check_range(csum: Csum, l4: usize, field: u16) -> Result<(), Refused> {
    match csum {
        Csum::Partial { start, offset } if usize::from(start) == l4 && offset == field => Ok(()),
        Csum::Valid => Ok(()),
        _ => Err(Refused::Checksum),
    }
}

/// Writes the checksum over `data[start..]` into the field at `field`, which
/// holds the pseudo-header's sum: the sum with it in place, complemented.
fn finish(data: &mut [u8], start: usize, field: usize) {
    let c = checksum::checksum(&data[start..]);
    data[field..field + 2].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use strata_core::Message;

    use super::*;
    use crate::offload::tests::{
        as_the_kernel_sends, tcp_frame, udp_frame, verifies, verifies_udp,
    };

    /// The MTU-1500 link's largest plain frame.
    const MAX: usize = 1518;

    fn behind(repr: Repr, frame: &[u8]) -> Vec<u8> {
        let mut f = repr.to_bytes().to_vec();
        f.extend_from_slice(frame);
        f
    }

    fn partial(start: u16, offset: u16) -> Csum {
        Csum::Partial { start, offset }
    }

    fn tcp_gso(size: u16, csum: Csum) -> Repr {
        Repr {
            csum,
            gso: Gso::Tcp4 { size, ecn: false },
            hdr_len: 0,
        }
    }

    #[test]
    fn a_plain_frame_goes_up_as_it_came_unverified() {
        let frame = tcp_frame(100);
        let mut f = behind(Repr::default(), &frame);
        let taken = receive(&mut f, MAX).expect("believed");
        assert_eq!(taken, Taken::Frame(&frame[..], Arrival::default()));
    }

    #[test]
    fn a_checksum_the_kernel_verified_is_not_verified_again() {
        let frame = tcp_frame(100);
        let valid = Repr {
            csum: Csum::Valid,
            ..Repr::default()
        };
        let mut f = behind(valid, &frame);
        let Ok(Taken::Frame(data, arrival)) = receive(&mut f, MAX) else {
            panic!("believed");
        };
        assert_eq!(data, &frame[..], "nothing touched");
        assert!(arrival.verified);
    }

    #[test]
    fn a_checksum_owed_is_finished_and_counts_as_verified() {
        let frame = as_the_kernel_sends(tcp_frame(333), 6);
        let owed = Repr {
            csum: partial(34, 16),
            ..Repr::default()
        };
        let mut f = behind(owed, &frame);
        let Ok(Taken::Frame(data, arrival)) = receive(&mut f, MAX) else {
            panic!("believed");
        };
        assert!(verifies(data), "IPv4 and TCP checksums now hold");
        assert_eq!(
            arrival,
            Arrival {
                segment_size: 0,
                verified: true
            }
        );
    }

    #[test]
    fn a_tcp_super_frame_goes_up_whole_marked_with_its_segment_size() {
        let frame = as_the_kernel_sends(tcp_frame(40 * 1448 + 17), 6);
        for csum in [partial(34, 16), Csum::Valid] {
            let mut f = behind(tcp_gso(1448, csum), &frame);
            let Ok(Taken::Frame(data, arrival)) = receive(&mut f, MAX) else {
                panic!("believed with {csum:?}");
            };
            assert_eq!(data.len(), frame.len());
            let mut m = Message::from_slice(data);
            m.set_segment_size(arrival.segment_size);
            let segments: Vec<Message> = crate::offload::segment(m).expect("cut").collect();
            assert_eq!(segments.len(), 41);
            for s in &segments {
                assert!(verifies(&s.to_vec()), "each segment true, with {csum:?}");
            }
            assert_eq!(
                arrival,
                Arrival {
                    segment_size: 1448,
                    verified: true
                }
            );
        }
    }

    #[test]
    fn a_udp_super_frame_is_handed_back_for_cutting() {
        let frame = as_the_kernel_sends(udp_frame(10 * 1000), 17);
        let repr = Repr {
            csum: partial(34, 6),
            gso: Gso::UdpL4 { size: 1000 },
            hdr_len: 0,
        };
        let mut f = behind(repr, &frame);
        assert_eq!(receive(&mut f, MAX), Ok(Taken::Datagrams(&frame[..], 1000)));
        assert!(
            !verifies_udp(&frame),
            "the super-frame's own checksum is left"
        );
    }

    #[test]
    fn lying_headers_are_refused_by_reason() {
        let tcp = as_the_kernel_sends(tcp_frame(10 * 1448), 6);
        let udp = as_the_kernel_sends(udp_frame(10 * 1000), 17);
        let udp_gso = |csum| Repr {
            csum,
            gso: Gso::UdpL4 { size: 1000 },
            hdr_len: 0,
        };
        let plain_owing = |start, offset| Repr {
            csum: partial(start, offset),
            ..Repr::default()
        };
        let mut fragment = tcp.clone();
        fragment[14 + 6] |= 0x20;
        let mut long_ip = tcp.clone();
        long_ip[16..18].copy_from_slice(&((tcp.len() - 13) as u16).to_be_bytes());
        let v6 = Repr {
            csum: partial(54, 16),
            gso: Gso::Tcp6 {
                size: 1428,
                ecn: false,
            },
            hdr_len: 0,
        };
        let ufo = Repr {
            csum: Csum::None,
            gso: Gso::Ufo { size: 1480 },
            hdr_len: 0,
        };
        let cases: Vec<(&str, Vec<u8>, Refused)> = vec![
            ("a cut header", vec![0u8; LEN - 1], Refused::Short),
            (
                "an undefined flag",
                {
                    let mut f = behind(Repr::default(), &tcp);
                    f[0] = 4;
                    f
                },
                Refused::Flags,
            ),
            (
                "an undefined GSO type",
                {
                    let mut f = behind(Repr::default(), &tcp);
                    f[1] = 2;
                    f
                },
                Refused::GsoType,
            ),
            (
                "a checksum field past the end",
                behind(plain_owing(34, 20 * 1448), &tcp),
                Refused::Checksum,
            ),
            (
                "a range in the Ethernet header",
                behind(plain_owing(4, 2), &tcp),
                Refused::Checksum,
            ),
            (
                "TSO owing UDP's field",
                behind(tcp_gso(1448, partial(34, 6)), &tcp),
                Refused::Checksum,
            ),
            (
                "TSO saying nothing of its checksum",
                behind(tcp_gso(1448, Csum::None), &tcp),
                Refused::Checksum,
            ),
            (
                "TSO of a UDP frame",
                behind(tcp_gso(1000, partial(34, 16)), &udp),
                Refused::Headers,
            ),
            (
                "TSO of a fragment",
                behind(tcp_gso(1448, partial(34, 16)), &fragment),
                Refused::Headers,
            ),
            (
                "TSO with an IPv4 length past the frame",
                behind(tcp_gso(1448, partial(34, 16)), &long_ip),
                Refused::Headers,
            ),
            (
                "segments longer than the MTU",
                behind(tcp_gso(1500, partial(34, 16)), &tcp),
                Refused::GsoSize,
            ),
            (
                "TSO of a bare header",
                behind(
                    tcp_gso(1448, partial(34, 16)),
                    &as_the_kernel_sends(tcp_frame(0), 6),
                ),
                Refused::GsoSize,
            ),
            (
                "USO of a TCP frame",
                behind(udp_gso(partial(34, 6)), &tcp),
                Refused::Headers,
            ),
            (
                "USO owing TCP's field",
                behind(udp_gso(partial(34, 16)), &udp),
                Refused::Checksum,
            ),
            ("TCP in IPv6", behind(v6, &tcp), Refused::Unsupported),
            ("UDP fragmentation", behind(ufo, &udp), Refused::Unsupported),
        ];
        for (what, mut f, why) in cases {
            assert_eq!(receive(&mut f, MAX).err(), Some(why), "{what}");
        }
    }

    use proptest::prelude::*;

    /// A header byte: one of the values that mean something, or any.
    fn one_of(meaningful: &'static [u8]) -> impl Strategy<Value = u8> {
        prop_oneof![4 => proptest::sample::select(meaningful), 1 => any::<u8>()]
    }

    /// A 16-bit field: one of the values that fit the frames below, or any.
    fn near(fitting: &'static [u16]) -> impl Strategy<Value = u16> {
        prop_oneof![
            4 => proptest::sample::select(fitting),
            1 => 0u16..200,
            1 => any::<u16>()
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever a header says of whatever frame, nothing panics, and
        /// what is handed on lies inside the frame: a TCP super-frame is
        /// marked with a size that fits the link and cuts into segments
        /// whose checksums hold.
        #[test]
        fn no_header_makes_the_driver_panic_or_reach_outside_its_frame(
            flags in one_of(&[0, 1, 2]),
            gso in one_of(&[0, 1, 3, 4, 5, 0x81]),
            size in near(&[0, 1000, 1448, 1500]),
            start in near(&[34, 14]),
            offset in near(&[16, 6]),
            udp in any::<bool>(),
            payload in 0usize..5000,
            cut in prop_oneof![3 => Just(0usize), 1 => any::<usize>()],
        ) {
            let frame = if udp {
                as_the_kernel_sends(udp_frame(payload), 17)
            } else {
                as_the_kernel_sends(tcp_frame(payload), 6)
            };
            let mut f = vec![flags, gso];
            for w in [0u16, size, start, offset] {
                f.extend_from_slice(&w.to_ne_bytes());
            }
            f.extend_from_slice(&frame[..frame.len() - cut % (frame.len() + 1)]);
            let len = f.len();
            match receive(&mut f, MAX) {
                Ok(Taken::Frame(data, arrival)) => {
                    prop_assert_eq!(data.len(), len - LEN);
                    if arrival.segment_size > 0 {
                        prop_assert!(66 + usize::from(arrival.segment_size) <= MAX);
                        let mut m = Message::from_slice(data);
                        m.set_segment_size(arrival.segment_size);
                        for s in crate::offload::segment(m).expect("cut") {
                            prop_assert!(verifies(&s.to_vec()));
                        }
                    }
                }
                Ok(Taken::Datagrams(data, size)) => {
                    prop_assert_eq!(data.len(), len - LEN);
                    prop_assert!(size > 0 && 42 + size <= MAX);
                }
                Err(_) => {}
            }
        }
    }
}
