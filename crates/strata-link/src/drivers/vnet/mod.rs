//! The virtio-net header a packet socket with PACKET_VNET_HDR and a TAP with
//! IFF_VNET_HDR put before every frame, both ways (packet(7), `struct
//! virtio_net_hdr` in include/uapi/linux/virtio_net.h): how the kernel and a
//! user-space stack hand each other the work a NIC would do.
//!
//! - [`wire`] — the header's bytes ([`Header`]) and meaning ([`Repr`]).
//! - Sending, [`header`]: a frame marked with a segment size
//!   ([`Message::segment_size`]) is a TCP super-segment, and its header asks
//!   the kernel to cut it into segments of that size (`GSO_TCPV4`) and to
//!   finish each one's checksum from the pseudo-header sum TCP left in the
//!   field (`NEEDS_CSUM`), what the kernel does for its own TCP (generic
//!   segmentation offload) when the device cannot. Every other frame goes
//!   with an all-zero header: complete as it is.
//! - Receiving, [`receive`]: the kernel's own super-segments and unfinished
//!   checksums, checked before anything of them is believed.
//!
//! [`offload::segment`](crate::offload::segment) is the same cut in
//! software, for captures and for a kernel that refuses to cut.

mod receive;
pub mod wire;

pub use receive::{Refused, Taken, receive};
pub use wire::{Csum, Gso, Header, LEN, Repr};

use strata_core::Message;

use crate::offload::{CWR, HEADERS_MAX, Offsets};

/// Where TCP's checksum field sits in its header.
const TCP_CHECKSUM_OFFSET: u16 = 16;

/// The header to send `frame` with; `None` for a super-segment that is not
/// TCP in IPv4 in Ethernet II, which the kernel could not cut.
pub fn header(frame: &Message) -> Option<[u8; LEN]> {
    let size = frame.segment_size();
    if size == 0 {
        return Some([0; LEN]);
    }
    let mut head = [0u8; HEADERS_MAX];
    let n = frame.copy_to_slice(0, &mut head);
    let Offsets { tcp, end, .. } = Offsets::of(&head[..n])?;
    let repr = Repr {
        csum: Csum::Partial {
            start: tcp as u16,
            offset: TCP_CHECKSUM_OFFSET,
        },
        // As the kernel marks its own (SKB_GSO_TCP_ECN): CWR rides on the
        // first segment only.
        gso: Gso::Tcp4 {
            size,
            ecn: head[tcp + 13] & CWR != 0,
        },
        hdr_len: end as u16,
    };
    Some(repr.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::tests::{not_tcp_in_ipv4, tcp_frame};

    #[test]
    fn plain_frames_go_with_an_empty_header() {
        let m = Message::from(tcp_frame(100));
        assert_eq!(header(&m), Some([0; LEN]));
    }

    #[test]
    fn a_tcp_super_segment_is_described_for_the_kernel_to_cut() {
        let mut m = Message::from(tcp_frame(10 * 1448));
        m.set_segment_size(1448);
        let h = header(&m).expect("described");
        let repr = Repr::parse(&Header::new_checked(&h[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            Repr {
                csum: Csum::Partial {
                    start: 34,
                    offset: 16
                },
                gso: Gso::Tcp4 {
                    size: 1448,
                    ecn: false
                },
                hdr_len: 14 + 20 + 32,
            }
        );
    }

    #[test]
    fn a_super_segment_with_cwr_says_ecn() {
        let mut f = tcp_frame(3 * 1448);
        f[34 + 13] |= CWR;
        let mut m = Message::from(f);
        m.set_segment_size(1448);
        let h = header(&m).expect("described");
        let repr = Repr::parse(&Header::new_checked(&h[..]).unwrap()).unwrap();
        assert_eq!(
            repr.gso,
            Gso::Tcp4 {
                size: 1448,
                ecn: true
            }
        );
    }

    #[test]
    fn a_super_segment_that_is_not_tcp_in_ipv4_is_refused() {
        for f in not_tcp_in_ipv4() {
            let mut m = Message::from(f);
            m.set_segment_size(1000);
            assert_eq!(header(&m), None);
        }
    }
}
