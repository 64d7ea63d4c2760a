//! The receiving end of a measured transfer: checks every datagram of one run
//! byte for byte ([`transfer::check`]), counts intact, corrupt, duplicate and
//! foreign ones, and keeps the order-independent digest of the intact ones.

use strata_core::{
    Addr, App, AppCx, AppId, Engine, Instant, Message, PacketMeta, Participants, Qos, SessionRef,
    UpiError,
};

use super::transfer::{self, Check};
use super::{any_app, proto_of_kind};

/// The most sequence numbers tracked for duplicates (a bit each, 2 MiB): a
/// transfer of more datagrams counts the later ones without duplicate checks.
pub const MAX_TRACKED: u64 = 1 << 24;

/// What a sink has received.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkCounts {
    /// Datagrams of the run, every byte as sent, counted once each.
    pub intact: u64,
    /// Their bytes.
    pub intact_bytes: u64,
    /// Datagrams of the run with bytes changed.
    pub corrupt: u64,
    /// Intact datagrams whose sequence number had arrived before.
    pub duplicates: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// Datagrams not of the run.
    pub foreign: u64,
    /// The highest sequence number seen, plus one.
    pub next_expected: u64,
    /// Sum of the intact datagrams' hashes.
    pub digest: u64,
}

/// The receiver.
pub struct UdpSink {
    run: u32,
    seen: Vec<u64>,
    /// What it has counted.
    pub counts: SinkCounts,
    /// When the first and the last intact datagram arrived.
    pub first: Option<Instant>,
    /// See `first`.
    pub last: Option<Instant>,
}

impl UdpSink {
    /// Adds a sink for run `run` on UDP port `port` (a bound session, which
    /// takes datagrams from anyone).
    pub fn install(engine: &mut Engine, port: u16, run: u32) -> Result<AppId, UpiError> {
        let udp = proto_of_kind(engine, "udp")?;
        let id = engine.add_app(Box::new(UdpSink {
            run,
            seen: Vec::new(),
            counts: SinkCounts::default(),
            first: None,
            last: None,
        }));
        engine.with_app(id, |_, cx| {
            cx.open(udp, Participants::local([Addr::Port(port)]), Qos::default())
        })??;
        Ok(id)
    }

    /// Marks `seq` seen; false when it had been.
    fn first_sighting(&mut self, seq: u64) -> bool {
        if seq >= MAX_TRACKED {
            return true;
        }
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        let fresh = self.seen[word] & (1 << bit) == 0;
        self.seen[word] |= 1 << bit;
        fresh
    }
}

impl App for UdpSink {
    fn receive(
        &mut self,
        _s: Option<SessionRef>,
        msg: Message,
        _meta: &PacketMeta,
        cx: &mut AppCx,
    ) {
        match transfer::check(self.run, msg.chunks()) {
            Check::Foreign => self.counts.foreign += 1,
            Check::Corrupt(_) => self.counts.corrupt += 1,
            Check::Intact(seq) => {
                if !self.first_sighting(seq) {
                    self.counts.duplicates += 1;
                    return;
                }
                let c = &mut self.counts;
                c.intact += 1;
                c.intact_bytes += msg.len() as u64;
                c.digest = c.digest.wrapping_add(transfer::hash(msg.chunks()));
                if seq < c.next_expected {
                    c.reordered += 1;
                }
                c.next_expected = c.next_expected.max(seq + 1);
                let now = cx.now();
                self.first.get_or_insert(now);
                self.last = Some(now);
            }
        }
    }

    any_app!();
}
