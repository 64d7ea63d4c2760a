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
//! [`segments`] is the same cut in software, for captures: a capture shows
//! the frames the wire carries, as tshark expects them.
//!
//! Receiving, a frame the kernel left with its transport checksum to finish
//! (`NEEDS_CSUM`: sent by the kernel on the other end of a veth with checksum
//! offload on) is finished here.

use strata_core::Message;
use strata_core::checksum;

use super::ETH_HEADER;

/// The largest IPv4 datagram: what a super-segment may carry above Ethernet.
pub const SEGMENTED_MAX: usize = 65535;

/// The header's length (the legacy layout, without `num_buffers`).
pub const LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset`
/// is to be finished over `[csum_start, end)`.
const NEEDS_CSUM: u8 = 1;

/// `VIRTIO_NET_HDR_GSO_TCPV4`.
const GSO_TCPV4: u8 = 1;

/// TCP's flags that only the last (FIN, PSH) or first (CWR) segment keeps.
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// Where TCP's checksum field sits in its header.
const TCP_CHECKSUM_OFFSET: u16 = 16;

/// The most header bytes looked at: Ethernet, the longest IPv4 and TCP headers.
const HEADERS_MAX: usize = ETH_HEADER + 60 + 60;

/// Where the headers of a TCP-in-IPv4-in-Ethernet-II frame starting with
/// `head` lie: (IPv4 start, TCP start, headers' end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Offsets {
    ip: usize,
    tcp: usize,
    end: usize,
}

fn offsets(head: &[u8]) -> Option<Offsets> {
    let ip = ETH_HEADER;
    if head.len() < ip + 20 || head[12..14] != [0x08, 0x00] || head[ip] >> 4 != 4 {
        return None;
    }
    let tcp = ip + usize::from(head[ip] & 0x0f) * 4;
    if tcp < ip + 20 || head[ip + 9] != 6 || head.len() < tcp + 20 {
        return None;
    }
    let end = tcp + usize::from(head[tcp + 12] >> 4) * 4;
    if end < tcp + 20 || end > head.len() {
        return None;
    }
    Some(Offsets { ip, tcp, end })
}

/// The header to send `frame` with; `None` for a super-segment that is not
/// TCP in IPv4 in Ethernet II, which the kernel could not cut.
pub fn header(frame: &Message) -> Option<[u8; LEN]> {
    let size = frame.segment_size();
    if size == 0 {
        return Some([0; LEN]);
    }
    let mut head = [0u8; HEADERS_MAX];
    let n = frame.copy_to_slice(0, &mut head);
    let Offsets { tcp, end, .. } = offsets(&head[..n])?;
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

/// The frames the kernel makes of `frame` on the way out: a super-segment cut
/// into segments with IPv4 lengths, identifications and checksums and TCP
/// sequence numbers, flags and checksums of their own (as Linux's
/// `tcp_gso_segment`: FIN and PSH on the last only, CWR on the first only);
/// any other frame as it is. `None` for a super-segment [`header`] refuses.
pub fn segments(frame: &Message) -> Option<Vec<Vec<u8>>> {
    let whole = frame.to_vec();
    let size = usize::from(frame.segment_size());
    if size == 0 {
        return Some(vec![whole]);
    }
    let Offsets { ip, tcp, end } = offsets(&whole[..whole.len().min(HEADERS_MAX)])?;
    let payload = &whole[end..];
    let count = payload.len().div_ceil(size).max(1);
    let ident = u16::from_be_bytes([whole[ip + 4], whole[ip + 5]]);
    let seq = u32::from_be_bytes([
        whole[tcp + 4],
        whole[tcp + 5],
        whole[tcp + 6],
        whole[tcp + 7],
    ]);
    let src: [u8; 4] = whole[ip + 12..ip + 16].try_into().ok()?;
    let dst: [u8; 4] = whole[ip + 16..ip + 20].try_into().ok()?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let piece = &payload[(i * size).min(payload.len())..((i + 1) * size).min(payload.len())];
        let mut f = Vec::with_capacity(end + piece.len());
        f.extend_from_slice(&whole[..end]);
        f.extend_from_slice(piece);
        let total = (f.len() - ip) as u16;
        f[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
        f[ip + 4..ip + 6].copy_from_slice(&ident.wrapping_add(i as u16).to_be_bytes());
        f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&f[ip..tcp]);
        f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        let offset = (i * size) as u32;
        f[tcp + 4..tcp + 8].copy_from_slice(&seq.wrapping_add(offset).to_be_bytes());
        if i + 1 < count {
            f[tcp + 13] &= !(FIN | PSH);
        }
        if i > 0 {
            f[tcp + 13] &= !CWR;
        }
        f[tcp + 16..tcp + 18].copy_from_slice(&[0, 0]);
        let len = f.len() - tcp;
        let c = checksum::transport(src.into(), dst.into(), 6, len, [&f[tcp..]]).finish();
        f[tcp + 16..tcp + 18].copy_from_slice(&c.to_be_bytes());
        out.push(f);
    }
    Some(out)
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

    /// An Ethernet + IPv4 + TCP (with 12 bytes of options) frame of `payload`
    /// bytes.
    fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; ETH_HEADER + 20 + 32 + payload];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[34 + 12] = 8 << 4;
        f
    }

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
        let mut udp = tcp_frame(3000);
        udp[14 + 9] = 17;
        let mut arp = tcp_frame(3000);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        for f in [udp, arp, vec![0u8; 20]] {
            let mut m = Message::from(f);
            m.set_segment_size(1000);
            assert_eq!(header(&m), None);
        }
    }

    #[test]
    fn software_segmentation_makes_the_wire_frames_the_kernel_would() {
        let data: Vec<u8> = (0..3500u32).map(|i| (i * 7) as u8).collect();
        let mut f = tcp_frame(0);
        f[14 + 4..14 + 6].copy_from_slice(&0xfffeu16.to_be_bytes());
        f[14 + 12..14 + 16].copy_from_slice(&[198, 18, 0, 1]);
        f[14 + 16..14 + 20].copy_from_slice(&[198, 18, 0, 2]);
        f[34 + 4..34 + 8].copy_from_slice(&0xffff_f000u32.to_be_bytes());
        f[34 + 13] = CWR | PSH | FIN | 0x10;
        f.extend_from_slice(&data);
        let mut m = Message::from(f);
        m.set_segment_size(1448);
        let frames = segments(&m).expect("a TCP super-segment");
        assert_eq!(frames.len(), 3);
        let mut joined = Vec::new();
        for (i, s) in frames.iter().enumerate() {
            let ip = &s[14..34];
            assert!(checksum::verifies(ip), "IPv4 header checksum of {i}");
            assert_eq!(
                usize::from(u16::from_be_bytes([ip[2], ip[3]])),
                s.len() - 14
            );
            assert_eq!(
                u16::from_be_bytes([ip[4], ip[5]]),
                0xfffeu16.wrapping_add(i as u16)
            );
            let tcp = &s[34..];
            let sum = checksum::transport(
                [198, 18, 0, 1].into(),
                [198, 18, 0, 2].into(),
                6,
                tcp.len(),
                [tcp],
            );
            assert_eq!(sum.sum(), 0xffff, "TCP checksum of {i}");
            let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
            assert_eq!(seq, 0xffff_f000u32.wrapping_add(i as u32 * 1448));
            let flags = tcp[13];
            assert_eq!(flags & CWR != 0, i == 0, "CWR on the first only");
            assert_eq!(
                flags & (PSH | FIN) != 0,
                i == 2,
                "PSH, FIN on the last only"
            );
            joined.extend_from_slice(&tcp[32..]);
        }
        assert_eq!(joined, data);
        assert_eq!(frames[2].len(), 14 + 20 + 32 + 3500 - 2 * 1448);
        let plain = Message::from(tcp_frame(10));
        assert_eq!(segments(&plain), Some(vec![tcp_frame(10)]));
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
