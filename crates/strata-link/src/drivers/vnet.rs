//! The virtio-net header a packet socket with PACKET_VNET_HDR puts before
//! every frame, both ways (packet(7), `struct virtio_net_hdr` in
//! include/uapi/linux/virtio_net.h): how a user-space stack hands the kernel
//! work a NIC would do.
//!
//! Sending, a frame marked with a segment size ([`Message::segment_size`]) is
//! a TCP super-segment: the header asks the kernel to cut it into segments of
//! that size (`GSO_TCPV4`) and to finish each one's checksum from the
//! pseudo-header sum TCP left in the field (`NEEDS_CSUM`), what it does for
//! its own TCP (generic segmentation offload) when the device cannot. Every
//! other frame goes with an all-zero header: complete as it is.
//!
//! [`offload::segment`](crate::offload::segment) is the same cut in
//! software, for captures: a capture shows the frames the wire carries, as
//! tshark expects them.
//!
//! Receiving, a frame the kernel left with its transport checksum to finish
//! (`NEEDS_CSUM`: sent by the kernel on the other end of a veth with checksum
//! offload on) is finished here.

use strata_core::Message;
use strata_core::checksum;

use crate::offload::{HEADERS_MAX, Offsets};

/// The header's length (the legacy layout, without `num_buffers`).
pub const LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset`
/// is to be finished over `[csum_start, end)`.
const NEEDS_CSUM: u8 = 1;

/// `VIRTIO_NET_HDR_GSO_TCPV4`.
const GSO_TCPV4: u8 = 1;

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
    let mut h = [0u8; LEN];
    h[0] = NEEDS_CSUM;
    h[1] = GSO_TCPV4;
    // Legacy virtio headers are in the host's byte order.
    h[2..4].copy_from_slice(&(end as u16).to_ne_bytes());
    h[4..6].copy_from_slice(&size.to_ne_bytes());
    h[6..8].copy_from_slice(&(tcp as u16).to_ne_bytes());
    h[8..10].copy_from_slice(&TCP_CHECKSUM_OFFSET.to_ne_bytes());
    Some(h)
}

/// Takes the header off a received `frame` (header first) and finishes a
/// checksum it says is owed. Returns the frame; `None` when the header is
/// missing or points outside the frame (dropped and counted by the caller).
pub fn receive(frame: &mut [u8]) -> Option<&mut [u8]> {
    if frame.len() < LEN {
        return None;
    }
    let (h, data) = frame.split_at_mut(LEN);
    if h[0] & NEEDS_CSUM != 0 {
        let start = usize::from(u16::from_ne_bytes([h[6], h[7]]));
        let field = start + usize::from(u16::from_ne_bytes([h[8], h[9]]));
        if field + 2 > data.len() {
            return None;
        }
        // The field holds the pseudo-header's sum; the sum over the rest
        // with it in place, complemented, is the checksum.
        let c = checksum::checksum(&data[start..]);
        data[field..field + 2].copy_from_slice(&c.to_be_bytes());
    }
    Some(data)
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
        assert_eq!((h[0], h[1]), (NEEDS_CSUM, GSO_TCPV4));
        let word = |i: usize| u16::from_ne_bytes([h[i], h[i + 1]]);
        assert_eq!(word(2), 14 + 20 + 32, "headers end after TCP's options");
        assert_eq!(word(4), 1448);
        assert_eq!((word(6), word(8)), (34, 16));
    }

    #[test]
    fn a_super_segment_that_is_not_tcp_in_ipv4_is_refused() {
        for f in not_tcp_in_ipv4() {
            let mut m = Message::from(f);
            m.set_segment_size(1000);
            assert_eq!(header(&m), None);
        }
    }

    #[test]
    fn a_received_checksum_owed_is_finished() {
        let mut f = vec![0u8; LEN];
        f[0] = NEEDS_CSUM;
        f[6..8].copy_from_slice(&34u16.to_ne_bytes());
        f[8..10].copy_from_slice(&16u16.to_ne_bytes());
        let mut frame = tcp_frame(5);
        frame[34 + 20..].iter_mut().for_each(|b| *b = 0xab);
        // The pseudo-header's sum, as the kernel leaves it.
        frame[50..52].copy_from_slice(&0x1234u16.to_be_bytes());
        f.extend_from_slice(&frame);
        let data = receive(&mut f).expect("well formed");
        let mut whole = vec![0x12, 0x34];
        whole.extend_from_slice(&data[34..]);
        assert!(
            checksum::verifies(&whole),
            "pseudo sum + segment sums to ones"
        );
        assert_eq!(data.len(), frame.len());
    }

    #[test]
    fn a_header_pointing_outside_the_frame_is_refused() {
        let mut f = vec![0u8; LEN + 30];
        f[0] = NEEDS_CSUM;
        f[6..8].copy_from_slice(&20u16.to_ne_bytes());
        f[8..10].copy_from_slice(&16u16.to_ne_bytes());
        assert!(receive(&mut f).is_none());
        assert!(receive(&mut [0u8; 4]).is_none());
    }
}
