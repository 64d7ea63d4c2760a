//! Per-packet metadata: what the engine and the lower layers learned about a
//! packet that upper layers need (seed 000's ILLM demux records it; DAA pops
//! along a path fill it in). The core's part is small and fixed; each layer's
//! part is a typed [`Record`] of that layer's own.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::ids::{LinkId, PathId, SessionRef};
use crate::time::Instant;

/// A 48-bit IEEE 802 hardware address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct HwAddr(pub [u8; 6]);

impl HwAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: HwAddr = HwAddr([0xff; 6]);
    /// The all-zero address.
    pub const ZERO: HwAddr = HwAddr([0; 6]);

    /// True for the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True when the group bit is set (multicast or broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// A locally administered unicast address derived from a small number, for
    /// simulated and generated hosts: 02:53:54:00:hi:lo ("ST" in the middle).
    pub fn local(n: u16) -> HwAddr {
        let [hi, lo] = n.to_be_bytes();
        HwAddr([0x02, 0x53, 0x54, 0x00, hi, lo])
    }
}

impl fmt::Display for HwAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for HwAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A hardware address that did not parse.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is not a hardware address (want six hex bytes like 02:00:00:00:00:01)")]
pub struct BadHwAddr(pub String);

impl FromStr for HwAddr {
    type Err = BadHwAddr;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let part = parts.next().ok_or_else(|| BadHwAddr(s.into()))?;
            if part.len() != 2 {
                return Err(BadHwAddr(s.into()));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| BadHwAddr(s.into()))?;
        }
        if parts.next().is_some() {
            return Err(BadHwAddr(s.into()));
        }
        Ok(HwAddr(out))
    }
}

/// Urgency of a packet: smaller is more urgent (a deadline or a priority class).
/// Everything without QoS carries [`Priority::BEST_EFFORT`], so that queues of
/// best-effort work stay first-in first-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(pub u32);

impl Priority {
    /// The least urgent class, used when nothing is said.
    pub const BEST_EFFORT: Priority = Priority(u32::MAX);
}

impl Default for Priority {
    fn default() -> Self {
        Priority::BEST_EFFORT
    }
}

/// Most distinct kinds of [`Record`] one packet's metadata holds.
pub const RECORDS: usize = 4;

/// Bytes of records one packet's metadata holds, all kinds together.
pub const RECORD_BYTES: usize = 96;

/// Most kinds of [`Record`] one process uses, all protocols together (each
/// kind takes a slot of every packet's metadata the first time it is used;
/// a kind beyond these is refused with [`RecordsFull`]).
pub const KINDS: usize = 64;

/// What one layer learned about a packet that the layers above it need — its
/// addresses, its ports, its header's fields — typed by the protocol that
/// defines it (`strata_proto::ipv4::Ipv4Info`, `strata_proto::Ports` …) and
/// kept in the packet's [`PacketMeta`] without allocation: the core knows no
/// layer's fields, so a new layer (IPv6) needs no change to it.
///
/// A record is encoded into `LEN` bytes of the metadata's inline space and
/// decoded when read; both are a few moves. Keep records small and leave out
/// what the layer's header gives only its own pop.
///
/// Each kind names its own [`RecordKind`], a static of its own, with
/// [`record_kind!`](crate::record_kind): the kind's slot in every packet's
/// metadata, so that finding a record is an index, not a search.
pub trait Record: Copy + 'static {
    /// Encoded length in bytes; at most [`RECORD_BYTES`].
    const LEN: usize;
    /// This kind's slot: a static of this type's own, never shared with
    /// another kind (write `strata_core::record_kind!();` in the impl).
    fn kind() -> &'static RecordKind;
    /// Writes the record into `out` (exactly `LEN` bytes).
    fn encode(&self, out: &mut [u8]);
    /// Reads a record from `bytes` (exactly `LEN` bytes, as `encode` wrote them).
    fn decode(bytes: &[u8]) -> Self;
}

/// Implements [`Record::kind`] with a static of the implementing type's own.
#[macro_export]
macro_rules! record_kind {
    () => {
        #[inline(always)]
        fn kind() -> &'static $crate::meta::RecordKind {
            static KIND: $crate::meta::RecordKind = $crate::meta::RecordKind::new();
            &KIND
        }
    };
}

/// A kind of [`Record`]'s slot in the metadata: numbered the first time the
/// kind is used, process-wide, so that every later access is an index (the
/// kinds used to be told apart by comparing `TypeId`s, 20–30 instructions a
/// look-up, four or five look-ups a packet).
#[derive(Debug)]
pub struct RecordKind(AtomicU8);

/// Kinds numbered so far, process-wide.
static NUMBERED: AtomicUsize = AtomicUsize::new(0);

/// A [`RecordKind`]'s value before it is numbered.
const UNNUMBERED: u8 = u8::MAX;

impl RecordKind {
    /// A kind not numbered yet.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> RecordKind {
        RecordKind(AtomicU8::new(UNNUMBERED))
    }

    /// The kind's slot when it has been numbered: below [`KINDS`], which the
    /// compiler then knows (no bounds checks on the slot tables).
    #[inline(always)]
    fn numbered(&self) -> Option<usize> {
        let n = usize::from(self.0.load(Ordering::Relaxed));
        (n < KINDS).then_some(n)
    }

    /// Numbers the kind on its first use; `None` when the process has used
    /// more kinds than [`KINDS`].
    #[cold]
    fn number(&self) -> Option<usize> {
        if let Some(n) = self.numbered() {
            return Some(n);
        }
        let fresh = NUMBERED
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < KINDS).then_some(n + 1)
            })
            .ok()?;
        // Two threads may number the same kind at once: the first to store
        // wins, and the other's number is never used.
        let n = match self.0.compare_exchange(
            UNNUMBERED,
            fresh as u8,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => fresh as u8,
            Err(theirs) => theirs,
        };
        Some(usize::from(n))
    }
}

/// A packet's metadata had no room for another kind of record (more than
/// [`RECORDS`] kinds, or [`RECORD_BYTES`] bytes): the layer drops the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no room for another record in the packet's metadata")]
pub struct RecordsFull;

/// The inline store of a packet's records: one per kind, the newest of a kind
/// replacing the older (an inner IP header's record hides the outer's). Each
/// kind has its slot in `at`, valid when its bit of `present` is set.
#[derive(Clone)]
struct Records {
    present: u64,
    at: [u8; KINDS],
    count: u8,
    used: u8,
    bytes: [u8; RECORD_BYTES],
}

impl Records {
    fn new() -> Records {
        Records {
            present: 0,
            at: [0; KINDS],
            count: 0,
            used: 0,
            bytes: [0; RECORD_BYTES],
        }
    }

    #[inline(always)]
    fn set<R: Record>(&mut self, r: &R) -> Result<(), RecordsFull> {
        let Some(i) = R::kind().numbered() else {
            return self.set_first(r);
        };
        let at = if self.present & (1u64 << i) != 0 {
            usize::from(self.at[i])
        } else {
            let at = usize::from(self.used);
            if usize::from(self.count) == RECORDS || at + R::LEN > RECORD_BYTES {
                return Err(RecordsFull);
            }
            self.present |= 1u64 << i;
            self.at[i] = at as u8;
            self.count += 1;
            self.used += R::LEN as u8;
            at
        };
        r.encode(&mut self.bytes[at..at + R::LEN]);
        Ok(())
    }

    /// `set` of a kind the process has not used yet: numbers it first (kept
    /// out of line, so the slot stays known to be in range on the hot path).
    #[cold]
    #[inline(never)]
    fn set_first<R: Record>(&mut self, r: &R) -> Result<(), RecordsFull> {
        R::kind().number().ok_or(RecordsFull)?;
        self.set(r)
    }

    #[inline(always)]
    fn get<R: Record>(&self) -> Option<R> {
        // A kind never numbered has never been set.
        let i = R::kind().numbered()?;
        if self.present & (1u64 << i) == 0 {
            return None;
        }
        let at = usize::from(self.at[i]);
        Some(R::decode(&self.bytes[at..at + R::LEN]))
    }
}

impl fmt::Debug for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} records, {} bytes", self.count, self.used)
    }
}

/// What the engine and the layers below know about a packet travelling up.
///
/// The core keeps what every layer needs — the link, the time, how many bytes
/// are present, the DAA path and priority, the session below — and each layer
/// keeps what it learned for the layers above as a typed [`Record`] of its
/// own ([`set`](Self::set), [`get`](Self::get)).
#[derive(Clone, Debug)]
pub struct PacketMeta {
    /// The link the frame arrived on.
    pub link: LinkId,
    /// When the engine received the frame.
    pub received: Instant,
    /// Bytes present from the start of the header being demultiplexed to the end
    /// of the packet (the engine sets it before each demux, whose `hdr` slice may
    /// be shorter: only the contiguous part). Length fields are checked against it.
    pub present: usize,
    /// DAA: the path the lowest demux found for the packet.
    pub path: Option<PathId>,
    /// DAA: the sender's application identifier (seed 000 §4.2.1), so that what
    /// answers the packet is addressed to it; zero when the frame names none.
    pub peer: u32,
    /// DAA deadline/priority, best effort when absent.
    pub priority: Priority,
    /// The session of the layer below that passed the packet up, when it had one
    /// (the x-kernel's `xDemux(lls, msg)`): how a layer whose sessions sit one on
    /// one on the lower layer's finds its own. The engine sets it.
    pub lower: Option<SessionRef>,
    /// Set by the engine for each pop: true when this layer's own demux has
    /// accepted this very header for this packet (LLM's walk, ILLM's
    /// demultiplexing phase) and recorded what it learned, so that pop may use
    /// the target demux found and skip the checks demux made instead of
    /// parsing and looking up a second time. Under DAA true for the lowest
    /// layer (its early demux filled this metadata) and false above it (no
    /// demux of the layer ran); false after an architecture fell back.
    pub demuxed: bool,
    records: Records,
}

impl PacketMeta {
    /// Fresh metadata for a frame received on `link` at `received`.
    pub fn new(link: LinkId, received: Instant) -> Self {
        Self {
            link,
            received,
            present: 0,
            path: None,
            peer: 0,
            priority: Priority::BEST_EFFORT,
            lower: None,
            demuxed: false,
            records: Records::new(),
        }
    }

    /// Makes this metadata fresh for a frame received on `link` at
    /// `received`, as [`new`](Self::new) would, without rewriting the record
    /// space (a record is read only after it is written).
    #[inline]
    pub(crate) fn reset(&mut self, link: LinkId, received: Instant) {
        self.link = link;
        self.received = received;
        self.present = 0;
        self.path = None;
        self.peer = 0;
        self.priority = Priority::BEST_EFFORT;
        self.lower = None;
        self.demuxed = false;
        self.records.present = 0;
        self.records.count = 0;
        self.records.used = 0;
    }

    /// Records what this layer learned, replacing an earlier record of the same
    /// kind. Fails when the packet already holds [`RECORDS`] other kinds: the
    /// caller drops the packet.
    #[inline(always)]
    pub fn set<R: Record>(&mut self, record: R) -> Result<(), RecordsFull> {
        self.records.set(&record)
    }

    /// The newest record of kind `R`, if a layer below made one.
    #[inline]
    pub fn get<R: Record>(&self) -> Option<R> {
        self.records.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_addresses_round_trip_through_text() {
        let a: HwAddr = "02:53:54:00:00:2a".parse().unwrap();
        assert_eq!(a, HwAddr::local(42));
        assert_eq!(a.to_string(), "02:53:54:00:00:2a");
        assert!("02:53:54:00:00".parse::<HwAddr>().is_err());
        assert!("02:53:54:00:00:2a:ff".parse::<HwAddr>().is_err());
        assert!("zz:53:54:00:00:2a".parse::<HwAddr>().is_err());
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Ports(u16, u16);

    impl Record for Ports {
        const LEN: usize = 4;
        crate::record_kind!();
        fn encode(&self, out: &mut [u8]) {
            out[..2].copy_from_slice(&self.0.to_be_bytes());
            out[2..].copy_from_slice(&self.1.to_be_bytes());
        }
        fn decode(b: &[u8]) -> Self {
            Ports(
                u16::from_be_bytes([b[0], b[1]]),
                u16::from_be_bytes([b[2], b[3]]),
            )
        }
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Big([u8; 40]);

    impl Record for Big {
        const LEN: usize = 40;
        crate::record_kind!();
        fn encode(&self, out: &mut [u8]) {
            out.copy_from_slice(&self.0);
        }
        fn decode(b: &[u8]) -> Self {
            Big(b.try_into().unwrap_or([0; 40]))
        }
    }

    #[test]
    fn a_layer_reads_back_the_newest_record_of_each_kind() {
        let mut m = PacketMeta::new(LinkId(0), Instant::ZERO);
        assert_eq!(m.get::<Ports>(), None);
        m.set(Ports(1, 2)).unwrap();
        m.set(Big([7; 40])).unwrap();
        m.set(Ports(3, 4)).unwrap();
        assert_eq!(
            m.get::<Ports>(),
            Some(Ports(3, 4)),
            "the inner record hides the outer"
        );
        assert_eq!(m.get::<Big>(), Some(Big([7; 40])));
    }

    #[test]
    fn each_kind_keeps_one_slot_of_its_own() {
        let mut m = PacketMeta::new(LinkId(0), Instant::ZERO);
        m.set(Ports(1, 2)).unwrap();
        m.set(Big([3; 40])).unwrap();
        let (p, b) = (Ports::kind().numbered(), Big::kind().numbered());
        assert!(p.is_some() && b.is_some());
        assert_ne!(p, b, "two kinds, two slots");
        assert_eq!(Ports::kind().number(), p, "numbered once");
        let mut m = PacketMeta::new(LinkId(0), Instant::ZERO);
        m.set(Big([3; 40])).unwrap();
        assert_eq!(
            m.get::<Ports>(),
            None,
            "another kind's record is not this one"
        );
        m.reset(LinkId(1), Instant::ZERO);
        assert_eq!(m.get::<Big>(), None, "a fresh packet holds no records");
    }

    #[test]
    fn a_record_that_does_not_fit_is_refused_not_half_written() {
        #[derive(Clone, Copy)]
        struct Other;
        impl Record for Other {
            const LEN: usize = 40;
            crate::record_kind!();
            fn encode(&self, _: &mut [u8]) {}
            fn decode(_: &[u8]) -> Self {
                Other
            }
        }
        let mut m = PacketMeta::new(LinkId(0), Instant::ZERO);
        m.set(Big([1; 40])).unwrap();
        m.set(Other).unwrap();
        assert_eq!(m.set(Ports(1, 2)), Ok(()), "4 more bytes fit");
        let mut n = m.clone();
        assert_eq!(
            n.set(Big([2; 40])),
            Ok(()),
            "a kind it holds is replaced in place"
        );
        #[derive(Clone, Copy)]
        struct More;
        impl Record for More {
            const LEN: usize = 16;
            crate::record_kind!();
            fn encode(&self, _: &mut [u8]) {}
            fn decode(_: &[u8]) -> Self {
                More
            }
        }
        assert_eq!(m.set(More), Err(RecordsFull), "96 bytes are full");
        assert_eq!(m.get::<Ports>(), Some(Ports(1, 2)));
    }
}
