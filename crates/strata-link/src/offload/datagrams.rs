//! UDP segmentation offload undone in software: a super-datagram that a Linux
//! sender made with `UDP_SEGMENT` (`GSO_UDP_L4`, udp(7)) cut into the
//! datagrams the wire would carry, as Linux's `__udp_gso_segment` cuts it.
//! TCP's super-segments go up whole, since Strata's TCP takes them (see
//! [`Coalescer`](super::Coalescer)); UDP has no such thing, so each datagram
//! goes up on its own.

use strata_core::checksum::{self, Checksum};

use super::{UDP, datagram_offsets};

/// Cuts `frame`, UDP in IPv4 in Ethernet II, into datagrams of `size`
/// payload bytes (the last one shorter), each with the frame's Ethernet and
/// IPv4 headers but its own IPv4 total length, identification (counting up
/// from the frame's, RFC 6864 §4.1: atomic datagrams may reuse it, but
/// Linux counts) and header checksum, and a UDP header with its own length
/// and checksum. Each is built in `scratch` and handed to `out`. Returns how
/// many were made: none when `frame` is not UDP in IPv4 or `size` is zero.
pub fn datagrams(
    frame: &[u8],
    size: usize,
    scratch: &mut Vec<u8>,
    out: &mut dyn FnMut(&[u8]),
) -> usize {
    let Some((ip, udp)) = datagram_offsets(frame, UDP) else {
        return 0;
    };
    if size == 0 {
        return 0;
    }
    let b = &frame[ip..];
    let (src, dst) = ([b[12], b[13], b[14], b[15]], [b[16], b[17], b[18], b[19]]);
    let ident = u16::from_be_bytes([b[4], b[5]]);
    let headers = udp + 8;
    let mut made = 0;
    for (i, piece) in frame[headers..].chunks(size).enumerate() {
        scratch.clear();
        scratch.extend_from_slice(&frame[..headers]);
        scratch.extend_from_slice(piece);
        let put =
            |s: &mut Vec<u8>, at: usize, v: u16| s[at..at + 2].copy_from_slice(&v.to_be_bytes());
        put(scratch, ip + 2, (scratch.len() - ip) as u16);
        put(scratch, ip + 4, ident.wrapping_add(i as u16));
        put(scratch, ip + 10, 0);
        let c = checksum::checksum(&scratch[ip..udp]);
        put(scratch, ip + 10, c);
        let len = (scratch.len() - udp) as u16;
        put(scratch, udp + 4, len);
        put(scratch, udp + 6, 0);
        let mut sum = Checksum::new();
        sum.add_pseudo_header(src.into(), dst.into(), UDP, len);
        sum.add(&scratch[udp..]);
        // A computed zero is sent as all ones: zero means "no checksum"
        // (RFC 768).
        let c = match sum.finish() {
            0 => 0xffff,
            c => c,
        };
        put(scratch, udp + 6, c);
        out(scratch);
        made += 1;
    }
    made
}

#[cfg(test)]
mod tests {
    use super::super::tests::{tcp_frame, udp_frame, verifies_udp};
    use super::*;

    #[test]
    fn a_super_datagram_becomes_datagrams_that_verify_and_carry_its_bytes_in_order() {
        let data: Vec<u8> = (0..2500u32).map(|i| (i * 13 + 1) as u8).collect();
        let mut f = udp_frame(0);
        f[14 + 4..14 + 6].copy_from_slice(&0xfffeu16.to_be_bytes());
        f[14 + 6] = 0x40; // DF, as Linux sends UDP_SEGMENT datagrams
        f.extend_from_slice(&data);
        let mut got = Vec::new();
        let n = datagrams(&f, 1000, &mut Vec::new(), &mut |d| got.push(d.to_vec()));
        assert_eq!((n, got.len()), (3, 3));
        let mut joined = Vec::new();
        for (i, d) in got.iter().enumerate() {
            assert!(verifies_udp(d), "datagram {i}");
            assert_eq!(
                u16::from_be_bytes([d[18], d[19]]),
                0xfffeu16.wrapping_add(i as u16),
                "identification of {i}"
            );
            assert_eq!(d[14 + 6], 0x40, "DF kept");
            assert_eq!(&d[34..38], &f[34..38], "ports kept");
            joined.extend_from_slice(&d[42..]);
        }
        assert_eq!(joined, data);
        assert_eq!(got[2].len(), 42 + 500);
    }

    #[test]
    fn a_datagram_summing_to_zero_says_all_ones() {
        // Two bytes of data that make the rest's sum all ones.
        let mut rest = Checksum::new();
        rest.add_pseudo_header([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), UDP, 10);
        rest.add(&[0x0f, 0xa0, 0, 7, 0, 10, 0, 0]);
        let mut f = udp_frame(0);
        f.extend_from_slice(&(!rest.sum()).to_be_bytes());
        let mut got = Vec::new();
        datagrams(&f, 2, &mut Vec::new(), &mut |d| got.push(d.to_vec()));
        assert_eq!(&got[0][40..42], &[0xff, 0xff]);
        assert!(verifies_udp(&got[0]));
    }

    #[test]
    fn what_is_not_udp_in_ipv4_or_has_no_size_is_not_cut() {
        let none = |f: &[u8], size| datagrams(f, size, &mut Vec::new(), &mut |_| {});
        assert_eq!(none(&tcp_frame(3000), 1000), 0);
        assert_eq!(none(&udp_frame(3000), 0), 0);
        assert_eq!(none(&udp_frame(3000)[..30], 1000), 0);
    }
}
