//! TCP offloads in software: what a NIC's TSO and LRO (Linux's GSO and GRO)
//! do to frames, for links that have no NIC to do it.
//!
//! - [`segment`] cuts a TCP super-segment — a frame the engine marked with a
//!   segment size ([`Message::segment_size`]) because its link claims
//!   segmentation offload — into the MTU-sized frames the wire carries, each
//!   with its own IPv4 length, identification and checksum and TCP sequence
//!   number, flags and checksum. Payload bytes are shared, not copied.
//! - [`Coalescer`] merges runs of received in-order TCP segments, one run per
//!   connection, back into one frame each (each segment's checksum verified
//!   first, or known good from the link) so that the layers above run once
//!   per run instead of once per segment, as Linux's GRO does; the merged
//!   frame is marked with the segments' size, as a GRO packet carries its
//!   `gso_size`.
//! - [`datagrams`] cuts a UDP super-datagram the kernel handed over whole
//!   (`UDP_SEGMENT`) into its datagrams.
//!
//! The in-memory link ([`MemPair`](crate::MemPair)) and the simulator use the
//! cut and the merge when asked; the runtime merges what every real link
//! receives; captures and the WAN bridge use [`segment`] to show what a wire
//! of the MTU carries; the packet and TAP drivers have the kernel do the
//! cutting instead ([`vnet`](crate::drivers::vnet)), and cut here only when it
//! refuses.

mod coalesce;
mod datagrams;
mod segment;

pub use coalesce::{Coalescer, FLOWS};
pub use datagrams::datagrams;
pub use segment::{Segments, segment};

use strata_core::Message;
use strata_core::checksum::{self, Checksum};

use crate::drivers::ETH_HEADER;

/// The largest IPv4 datagram: what a super-segment may carry above Ethernet.
pub const SEGMENTED_MAX: usize = 65535;

/// The most header bytes looked at: Ethernet, the longest IPv4 and TCP headers.
pub(crate) const HEADERS_MAX: usize = ETH_HEADER + 60 + 60;

/// TCP's flags, as in the header's flags byte.
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;
pub(crate) const CWR: u8 = 0x80;

/// IPv4's protocol numbers of TCP and UDP.
const TCP: u8 = 6;
pub(crate) const UDP: u8 = 17;

/// Where the IPv4 header and the transport header start in a frame of
/// protocol `proto` in IPv4 in Ethernet II that starts with `head`; `None`
/// unless `head` is such a frame and holds its IPv4 header and the first
/// eight bytes of its transport header (all of UDP's).
pub(crate) fn datagram_offsets(head: &[u8], proto: u8) -> Option<(usize, usize)> {
    let ip = ETH_HEADER;
    if head.len() < ip + 20 || head[12..14] != [0x08, 0x00] || head[ip] >> 4 != 4 {
        return None;
    }
    let l4 = ip + usize::from(head[ip] & 0x0f) * 4;
    if l4 < ip + 20 || head[ip + 9] != proto || head.len() < l4 + 8 {
        return None;
    }
    Some((ip, l4))
}

/// Where the headers of a TCP-in-IPv4-in-Ethernet-II frame lie: (IPv4
/// start, TCP start, headers' end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Offsets {
    pub ip: usize,
    pub tcp: usize,
    pub end: usize,
}

impl Offsets {
    /// The offsets of a frame that starts with `head`; `None` unless it is TCP
    /// in IPv4 in Ethernet II with whole headers in `head`.
    pub(crate) fn of(head: &[u8]) -> Option<Offsets> {
        let (ip, tcp) = datagram_offsets(head, TCP)?;
        if head.len() < tcp + 20 {
            return None;
        }
        let end = tcp + usize::from(head[tcp + 12] >> 4) * 4;
        if end < tcp + 20 || end > head.len() {
            return None;
        }
        Some(Offsets { ip, tcp, end })
    }
}

/// A TCP-in-IPv4 frame's headers: borrowed from the frame to be read
/// (`Headers<&[u8]>`), or copied out to be rewritten (`Headers<Owned>`).
#[derive(Clone, Copy)]
struct Headers<B> {
    bytes: B,
    o: Offsets,
}

/// Headers copied out of a frame.
type Owned = [u8; HEADERS_MAX];

impl Headers<Owned> {
    /// The headers of `frame`, copied; `None` unless it is TCP in IPv4 in
    /// Ethernet II.
    fn of(frame: &Message) -> Option<Headers<Owned>> {
        let mut bytes = [0u8; HEADERS_MAX];
        let n = frame.copy_to_slice(0, &mut bytes);
        let o = Offsets::of(&bytes[..n])?;
        Some(Headers { bytes, o })
    }

    fn set_u16(&mut self, at: usize, v: u16) {
        self.bytes[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Writes the IPv4 total length for `payload` bytes of TCP data behind the
    /// headers, and the header checksum over it.
    fn finish_ip(&mut self, payload: usize) {
        let o = self.o;
        self.set_u16(o.ip + 2, (o.end - o.ip + payload) as u16);
        self.set_u16(o.ip + 10, 0);
        let c = checksum::checksum(&self.bytes[o.ip..o.tcp]);
        self.set_u16(o.ip + 10, c);
    }

    /// Writes the TCP checksum of a segment with these headers and data whose
    /// ones'-complement sum is `data` (`payload` bytes).
    fn finish_tcp(&mut self, payload: usize, data: u16) {
        let at = self.o.tcp + 16;
        self.set_u16(at, 0);
        let mut c = self.tcp_header_sum(payload);
        c.add_u16(data);
        self.set_u16(at, c.finish());
    }
}

impl<'a> Headers<&'a [u8]> {
    /// The headers of `frame` where they lie whole in its first chunk (pushed
    /// by the sender, or a received frame), read in place.
    fn within(frame: &'a Message) -> Option<Headers<&'a [u8]>> {
        let first = frame.contiguous_at(0);
        Offsets::of(first).map(|o| Headers {
            bytes: &first[..o.end],
            o,
        })
    }

    /// A copy to rewrite.
    fn to_owned(self) -> Headers<Owned> {
        let mut bytes = [0u8; HEADERS_MAX];
        bytes[..self.o.end].copy_from_slice(self.bytes);
        Headers { bytes, o: self.o }
    }
}

impl<B: AsRef<[u8]>> Headers<B> {
    fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The IPv4 source and destination.
    fn addresses(&self) -> ([u8; 4], [u8; 4]) {
        let at = |i: usize| {
            let b = &self.bytes()[i..i + 4];
            [b[0], b[1], b[2], b[3]]
        };
        (at(self.o.ip + 12), at(self.o.ip + 16))
    }

    fn seq(&self) -> u32 {
        let b = &self.bytes()[self.o.tcp + 4..self.o.tcp + 8];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    fn flags(&self) -> u8 {
        self.bytes()[self.o.tcp + 13]
    }

    /// The sum of the TCP pseudo-header and header for `payload` bytes of
    /// data, checksum field as it is.
    fn tcp_header_sum(&self, payload: usize) -> Checksum {
        let o = self.o;
        let (src, dst) = self.addresses();
        let mut c = Checksum::new();
        c.add_pseudo_header(src.into(), dst.into(), 6, (o.end - o.tcp + payload) as u16);
        c.add(&self.bytes()[o.tcp..o.end]);
        c
    }
}

/// The sums of what all segments of a super-segment or run share in their
/// headers, so that a segment's checksums are computed or verified with only
/// its own fields added (RFC 1624's incremental update): the IPv4 header but
/// its total length, identification and checksum; the TCP pseudo-header but
/// its data's length; the TCP header but its sequence number, offset-and-flags
/// word and checksum.
#[derive(Clone, Copy)]
struct SharedSums {
    ip: Checksum,
    tcp: Checksum,
}

impl SharedSums {
    fn of<B: AsRef<[u8]>>(h: &Headers<B>) -> SharedSums {
        let o = h.o;
        let mut b = [0u8; HEADERS_MAX];
        b[..o.end].copy_from_slice(&h.bytes()[..o.end]);
        for at in [
            o.ip + 2,
            o.ip + 4,
            o.ip + 10,
            o.tcp + 4,
            o.tcp + 6,
            o.tcp + 12,
            o.tcp + 16,
        ] {
            b[at..at + 2].fill(0);
        }
        let zeroed = Headers { bytes: b, o };
        let mut ip = Checksum::new();
        ip.add(&b[o.ip..o.tcp]);
        // The pseudo-header's length field is the header's length here; each
        // segment adds its data's (ones'-complement addition is addition).
        SharedSums {
            ip,
            tcp: zeroed.tcp_header_sum(0),
        }
    }

    /// The folded sum of an IPv4 header with these own fields.
    fn ip(&self, total: u16, ident: u16, check: u16) -> u16 {
        let mut c = self.ip;
        for w in [total, ident, check] {
            c.add_u16(w);
        }
        c.sum()
    }

    /// The folded sum of a TCP segment with these own fields and `payload`
    /// bytes of data summing to `data`.
    fn tcp(&self, seq: u32, offset_flags: u16, check: u16, payload: usize, data: u16) -> u16 {
        let mut c = self.tcp;
        for w in [
            (seq >> 16) as u16,
            seq as u16,
            offset_flags,
            check,
            payload as u16,
            data,
        ] {
            c.add_u16(w);
        }
        c.sum()
    }

    /// True when a segment with headers `h` (sharing what these sums cover)
    /// and `payload` bytes of data summing to `data` verifies.
    fn verify(&self, h: &Headers<&[u8]>, payload: usize, data: u16) -> bool {
        let (o, b) = (h.o, h.bytes);
        let word = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
        self.ip(word(o.ip + 2), word(o.ip + 4), word(o.ip + 10)) == 0xffff
            && self.tcp(h.seq(), word(o.tcp + 12), word(o.tcp + 16), payload, data) == 0xffff
    }
}

/// The ones'-complement sum of `msg`'s bytes from `from` on, as if they
/// started at an even position.
fn data_sum(msg: &Message, from: usize) -> u16 {
    let mut c = Checksum::new();
    let mut skip = from;
    for chunk in msg.chunks() {
        if skip >= chunk.len() {
            skip -= chunk.len();
            continue;
        }
        c.add(&chunk[skip..]);
        skip = 0;
    }
    c.sum()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet + IPv4 (198.18.0.1 → 198.18.0.2) + TCP (ACK, 12 bytes of
    /// options) frame with `payload` zero bytes of data; checksums not set.
    pub(crate) fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; ETH_HEADER + 20 + 32 + payload];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[14 + 12..14 + 16].copy_from_slice(&[198, 18, 0, 1]);
        f[14 + 16..14 + 20].copy_from_slice(&[198, 18, 0, 2]);
        f[34 + 12] = 8 << 4;
        f[34 + 13] = ACK;
        f
    }

    /// Frames that are not TCP in IPv4 in Ethernet II: UDP, ARP, a runt.
    pub(crate) fn not_tcp_in_ipv4() -> [Vec<u8>; 3] {
        let mut udp = tcp_frame(3000);
        udp[14 + 9] = 17;
        let mut arp = tcp_frame(3000);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        [udp, arp, vec![0u8; 20]]
    }

    /// The IPv4 source and destination of a frame.
    pub(crate) fn addresses_of(frame: &[u8]) -> ([u8; 4], [u8; 4]) {
        Headers::of(&Message::from(frame))
            .expect("TCP in IPv4")
            .addresses()
    }

    /// True when a frame's IPv4 length fills it and its IPv4 and TCP
    /// checksums verify.
    pub(crate) fn verifies(frame: &[u8]) -> bool {
        let (src, dst) = addresses_of(frame);
        let ip_len = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
        let tcp = &frame[34..];
        let sum = checksum::transport(src.into(), dst.into(), 6, tcp.len(), [tcp]);
        ip_len == frame.len() - ETH_HEADER
            && checksum::verifies(&frame[14..34])
            && sum.sum() == 0xffff
    }

    /// An Ethernet + IPv4 (198.18.0.1 → 198.18.0.2) + UDP (4000 → 7) frame
    /// with `payload` zero bytes of data; lengths and checksums not set.
    pub(crate) fn udp_frame(payload: usize) -> Vec<u8> {
        let mut f = tcp_frame(0);
        f.truncate(ETH_HEADER + 20 + 8);
        f[14 + 9] = UDP;
        f[34..36].copy_from_slice(&4000u16.to_be_bytes());
        f[36..38].copy_from_slice(&7u16.to_be_bytes());
        f.resize(f.len() + payload, 0);
        f
    }

    /// True when a UDP frame's IPv4 and UDP lengths fill it and its IPv4
    /// and UDP checksums verify.
    pub(crate) fn verifies_udp(frame: &[u8]) -> bool {
        let (src, dst) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let ip_len = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
        let udp_len = usize::from(u16::from_be_bytes([frame[38], frame[39]]));
        let udp = &frame[34..];
        let sum = checksum::transport(src.into(), dst.into(), UDP, udp.len(), [udp]);
        ip_len == frame.len() - ETH_HEADER
            && udp_len == udp.len()
            && checksum::verifies(&frame[14..34])
            && sum.sum() == 0xffff
    }

    /// A frame whose fields say what the kernel's do before it is cut: the
    /// IPv4 length and checksum of the whole, and in the transport checksum
    /// field the pseudo-header's sum.
    pub(crate) fn as_the_kernel_sends(mut f: Vec<u8>, proto: u8) -> Vec<u8> {
        let total = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[14 + 9] = proto;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let (at, len) = if proto == 6 {
            (34 + 16, f.len() - 34)
        } else {
            let len = (f.len() - 34) as u16;
            f[38..40].copy_from_slice(&len.to_be_bytes());
            (34 + 6, f.len() - 34)
        };
        let mut pseudo = Checksum::new();
        pseudo.add_pseudo_header(
            [198, 18, 0, 1].into(),
            [198, 18, 0, 2].into(),
            proto,
            len as u16,
        );
        f[at..at + 2].copy_from_slice(&pseudo.sum().to_be_bytes());
        f
    }

    #[test]
    fn offsets_find_the_headers_of_tcp_in_ipv4_only() {
        let f = tcp_frame(0);
        let o = Offsets::of(&f).expect("TCP in IPv4");
        assert_eq!((o.ip, o.tcp, o.end), (14, 34, 66));
        let mut udp = f.clone();
        udp[14 + 9] = 17;
        let mut short_tcp_header = f.clone();
        short_tcp_header[34 + 12] = 4 << 4;
        for bad in [udp, short_tcp_header, f[..60].to_vec()] {
            assert_eq!(Offsets::of(&bad), None);
        }
    }
}
