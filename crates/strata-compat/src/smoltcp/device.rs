//! The device smoltcp's interface runs on: the lower edge of the module.
//!
//! smoltcp expects to sit on a network device that hands it whole packets
//! and takes whole packets from it. The module emulates one in "IP medium"
//! (no link layer): what goes in is the IPv4 datagram Strata's IP layer
//! passed up, rebuilt (a 20-byte header in front of the segment, see
//! [`Wire::load`]); what comes out is an IPv4 datagram whose header the module
//! strips before pushing the segment to Strata's IP session, which writes its
//! own. The emulated device has checksum offload both ways (the module
//! verifies and computes TCP checksums with Strata's code), and takes the
//! runs of segments a Strata link's receive offload merged (GRO) as one
//! large segment, as a Linux NIC with LRO hands its stack.
//!
//! Buffers: a received segment is copied once, into [`Wire::rx`], because
//! smoltcp reads a packet from one contiguous slice and a Strata message may
//! be a header and a body apart. Sent packets are written by smoltcp into
//! slices of one shared arena, frozen and handed on without a copy — all but
//! small ones ([`Sent::Small`]: an acknowledgment, a few bytes of data),
//! which are written into a buffer of their own and copied once into the
//! message's head, which costs less than cutting and freezing a slice of
//! the arena and carrying it as the message's body.

use std::net::Ipv4Addr;

use bytes::{Bytes, BytesMut};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::time::Instant as SmolInstant;
use strata_core::{Message, checksum};

/// An IPv4 header without options, the only kind smoltcp writes and the
/// kind the module writes.
pub(super) const IP_HEADER: usize = 20;

/// How much arena is reserved at once, so that an allocation serves many
/// packets (the arena is reclaimed when the packets cut from it are gone).
const ARENA_CHUNK: usize = 256 * 1024;

/// The largest IPv4 datagram.
const DATAGRAM_MAX: usize = 65_535;

/// The largest datagram sent as [`Sent::Small`]: with Strata's IPv4 and
/// Ethernet headers in front it still fits a message's pooled head buffer.
pub(super) const SMALL_SENT: usize = 128;

/// A datagram smoltcp sent.
pub(super) enum Sent {
    /// A slice of the arena, frozen.
    Shared(Bytes),
    /// A small datagram: its length and its own buffer.
    Small(u8, [u8; SMALL_SENT]),
}

impl Sent {
    /// The datagram's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Sent::Shared(b) => b,
            Sent::Small(len, buf) => &buf[..usize::from(*len)],
        }
    }
}

/// The addresses and hop count of a received datagram, as Strata's IP layer
/// recorded them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Addresses {
    /// Source.
    pub src: Ipv4Addr,
    /// Destination.
    pub dst: Ipv4Addr,
    /// Time to live.
    pub ttl: u8,
}

/// The emulated device.
pub(super) struct Wire {
    /// The datagram being received, header and segment contiguous.
    rx: Vec<u8>,
    /// Whether `rx` holds a datagram smoltcp has not read yet.
    rx_ready: bool,
    /// Datagrams smoltcp sent, oldest first.
    pub tx: Vec<Sent>,
    arena: BytesMut,
    caps: DeviceCapabilities,
}

impl Wire {
    /// A device whose IP MTU is `mtu`.
    pub fn new(mtu: usize) -> Wire {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = mtu;
        // Strata's IP layer checks and writes the IPv4 header; the module
        // does TCP's checksums (`input`, `output`): to smoltcp the device
        // offloads both.
        caps.checksum = ChecksumCapabilities::ignored();
        Wire {
            rx: Vec::with_capacity(IP_HEADER + 1500),
            rx_ready: false,
            tx: Vec::new(),
            arena: BytesMut::new(),
            caps,
        }
    }

    /// Puts a received segment in front of smoltcp as the IPv4 datagram it
    /// arrived in: an option-free header rebuilt from what Strata's IP layer
    /// recorded (options, identification and fragmentation were IP's
    /// business and are done), then the segment. False when the segment
    /// cannot travel in one datagram.
    pub fn load(&mut self, from: Addresses, segment: &Message) -> bool {
        let total = IP_HEADER + segment.len();
        if total > DATAGRAM_MAX {
            return false;
        }
        self.rx.clear();
        self.rx.extend_from_slice(&ip_header(from, total as u16));
        for chunk in segment.chunks() {
            self.rx.extend_from_slice(chunk);
        }
        self.rx_ready = true;
        true
    }

    /// The segment of the datagram last loaded (the bytes behind its header).
    pub fn loaded_segment(&self) -> &[u8] {
        &self.rx[IP_HEADER.min(self.rx.len())..]
    }

    /// Forgets a loaded datagram smoltcp did not read.
    pub fn unload(&mut self) {
        self.rx_ready = false;
    }
}

/// An IPv4 header (RFC 791) for a datagram of `total` bytes carrying TCP.
/// Its checksum is left zero: smoltcp is told the device verified it.
fn ip_header(a: Addresses, total: u16) -> [u8; IP_HEADER] {
    let mut h = [0u8; IP_HEADER];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[8] = a.ttl;
    h[9] = 6;
    h[12..16].copy_from_slice(&a.src.octets());
    h[16..20].copy_from_slice(&a.dst.octets());
    h
}

/// Where TCP's checksum field lies in its header.
const CHECKSUM_AT: usize = 16;

/// Fills in the TCP checksum of a datagram smoltcp wrote: the emulated
/// device offloads it.
fn finish_checksum(datagram: &mut [u8]) {
    if datagram.len() < IP_HEADER + CHECKSUM_AT + 2 {
        return;
    }
    let ihl = usize::from(datagram[0] & 0x0f) * 4;
    let src = Ipv4Addr::new(datagram[12], datagram[13], datagram[14], datagram[15]);
    let dst = Ipv4Addr::new(datagram[16], datagram[17], datagram[18], datagram[19]);
    let Some(segment) = datagram
        .get_mut(ihl..)
        .filter(|s| s.len() >= CHECKSUM_AT + 2)
    else {
        return;
    };
    let len = segment.len();
    segment[CHECKSUM_AT..CHECKSUM_AT + 2].fill(0);
    let sum = checksum::transport(src, dst, 6, len, [&*segment]).finish();
    segment[CHECKSUM_AT..CHECKSUM_AT + 2].copy_from_slice(&sum.to_be_bytes());
}

/// smoltcp's read of the loaded datagram.
pub(super) struct RxToken<'a> {
    datagram: &'a [u8],
}

/// Room for one datagram smoltcp sends.
pub(super) struct TxToken<'a> {
    tx: &'a mut Vec<Sent>,
    arena: &'a mut BytesMut,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        f(self.datagram)
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        if len <= SMALL_SENT {
            let mut buf = [0u8; SMALL_SENT];
            let r = f(&mut buf[..len]);
            finish_checksum(&mut buf[..len]);
            self.tx.push(Sent::Small(len as u8, buf));
            return r;
        }
        if self.arena.capacity() < len {
            self.arena.reserve(len.max(ARENA_CHUNK));
        }
        self.arena.resize(len, 0);
        let r = f(&mut self.arena[..]);
        finish_checksum(&mut self.arena[..]);
        self.tx.push(Sent::Shared(self.arena.split().freeze()));
        r
    }
}

impl phy::Device for Wire {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: SmolInstant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        if !self.rx_ready {
            return None;
        }
        self.rx_ready = false;
        Some((
            RxToken { datagram: &self.rx },
            TxToken {
                tx: &mut self.tx,
                arena: &mut self.arena,
            },
        ))
    }

    fn transmit(&mut self, _: SmolInstant) -> Option<TxToken<'_>> {
        Some(TxToken {
            tx: &mut self.tx,
            arena: &mut self.arena,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.caps.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::phy::{Device, RxToken as _, TxToken as _};

    const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    #[test]
    fn a_loaded_segment_reads_as_one_datagram_with_its_addresses() {
        let mut w = Wire::new(1500);
        let mut seg = Message::from_slice(&[7; 30]);
        seg.push_slice(&[9; 20]);
        let from = Addresses {
            src: A,
            dst: B,
            ttl: 64,
        };
        assert!(w.load(from, &seg));
        let (rx, _) = w.receive(SmolInstant::ZERO).expect("one datagram");
        let d = rx.consume(|d| d.to_vec());
        assert_eq!(d.len(), 70);
        assert_eq!(&d[..4], &[0x45, 0, 0, 70]);
        assert_eq!((d[8], d[9]), (64, 6));
        assert_eq!(&d[12..20], &[198, 18, 0, 1, 198, 18, 0, 2]);
        assert_eq!(&d[20..40], &[9; 20], "the segment's header, then its data");
        assert!(w.receive(SmolInstant::ZERO).is_none(), "read once");
        let huge = Message::from_bytes(Bytes::from(vec![0; DATAGRAM_MAX]));
        assert!(!w.load(from, &huge), "no datagram holds it");
    }

    #[test]
    fn sent_datagrams_get_their_tcp_checksum_from_the_device() {
        let mut w = Wire::new(1500);
        // A small one, one at the limit, and two cut from the arena.
        for len in [60, SMALL_SENT, SMALL_SENT + 1, 1500] {
            let tx = w.transmit(SmolInstant::ZERO).unwrap();
            tx.consume(len, |b| {
                let i = len as u8;
                b.fill(i);
                b[0] = 0x45;
                b[12..16].copy_from_slice(&A.octets());
                b[16..20].copy_from_slice(&B.octets());
            });
        }
        assert_eq!(w.tx.len(), 4);
        assert!(matches!(w.tx[1], Sent::Small(..)) && matches!(w.tx[2], Sent::Shared(_)));
        for (d, len) in w.tx.iter().zip([60, SMALL_SENT, SMALL_SENT + 1, 1500]) {
            let d = d.bytes();
            assert_eq!(d.len(), len);
            assert_eq!(&d[12..20], &[198, 18, 0, 1, 198, 18, 0, 2]);
            let tcp = &d[20..];
            let sum = checksum::transport(A, B, 6, tcp.len(), [tcp]);
            assert_eq!(sum.sum(), 0xffff, "the checksum verifies");
        }
    }
}
