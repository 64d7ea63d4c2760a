//! Per-protocol counters: packets and bytes in and out, drops by reason, and named
//! events (fallbacks, fast-path hits, retransmissions). A user reads these, not a
//! debugger, to learn why a packet died.

use std::fmt;

/// Why a packet was dropped. Every drop names one, and it is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its headers say.
    Truncated,
    /// A header field holds an impossible value.
    Malformed,
    /// A checksum did not verify.
    BadChecksum,
    /// An unsupported version or type.
    Unsupported,
    /// Addressed to another host.
    NotForUs,
    /// No session or passive open matches.
    NoSession,
    /// No protocol above is registered for the number in the header.
    NoProtocol,
    /// No route to the destination.
    NoRoute,
    /// Time to live ran out.
    TtlExceeded,
    /// A bounded queue or table was full.
    QueueFull,
    /// Reassembly gave up waiting for the rest.
    ReassemblyTimeout,
    /// The receiving application had no room (DAA's early resource check).
    NoRoom,
    /// The neighbour's link address never resolved.
    Unresolved,
    /// A rule refused it (a disabled feature, an out-of-window segment …).
    Refused,
    /// A reason particular to one protocol.
    Other(&'static str),
}

impl DropReason {
    /// A short stable name for counters and reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Malformed => "malformed",
            DropReason::BadChecksum => "bad-checksum",
            DropReason::Unsupported => "unsupported",
            DropReason::NotForUs => "not-for-us",
            DropReason::NoSession => "no-session",
            DropReason::NoProtocol => "no-protocol",
            DropReason::NoRoute => "no-route",
            DropReason::TtlExceeded => "ttl-exceeded",
            DropReason::QueueFull => "queue-full",
            DropReason::ReassemblyTimeout => "reassembly-timeout",
            DropReason::NoRoom => "no-room",
            DropReason::Unresolved => "unresolved",
            DropReason::Refused => "refused",
            DropReason::Other(name) => name,
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A small table of named counts; a handful of names per protocol, so a vector
/// searched front to back beats a map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally(Vec<(&'static str, u64)>);

impl Tally {
    /// Adds `n` to the count called `name`.
    pub fn add(&mut self, name: &'static str, n: u64) {
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some((_, v)) => *v += n,
            None => self.0.push((name, n)),
        }
    }

    /// The count called `name` (zero when never counted).
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map_or(0, |(_, v)| *v)
    }

    /// Sum of all counts.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, v)| v).sum()
    }

    /// All counts, in the order they were first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().copied()
    }
}

/// The engine event counted for every delivery to an application.
pub const DELIVERED: &str = "delivered";

/// The event counted when a packet ends at a layer without a drop: every
/// received frame is delivered, dropped with a reason, or consumed, and the
/// three add up.
pub const CONSUMED: &str = "consumed";

/// What one protocol has done (or, for [`Engine::engine_counters`]
/// (crate::Engine::engine_counters), the engine itself).
///
/// The events counted once per packet are plain fields, so counting them is
/// one addition; every other event and every drop is counted by name in a
/// small table. Read any of them by name through [`events`](Self::events)
/// and [`drops`](Self::drops).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets popped (inbound, accepted by demux).
    pub packets_in: u64,
    /// Bytes of those packets, headers included.
    pub bytes_in: u64,
    /// Packets pushed (outbound).
    pub packets_out: u64,
    /// Bytes of those packets, before this layer's header.
    pub bytes_out: u64,
    /// Packets that ended at this layer without a drop (event [`CONSUMED`]).
    pub consumed: u64,
    /// The engine's: deliveries to applications (event [`DELIVERED`]).
    pub delivered: u64,
    /// The engine's: DAA packets popped along their path (`daa-path`).
    pub daa_path: u64,
    /// The engine's: packets whose data-manipulation stages ran fused
    /// (`ilp-fused`).
    pub ilp_fused: u64,
    /// The engine's: ILLM state-change phases skipped because the layer's
    /// pop only strips (`illm-pop-skipped`).
    pub illm_pop_skipped: u64,
    drops: Tally,
    events: Tally,
}

/// A read-only view of a counter's events, the per-packet ones included.
pub struct Events<'a> {
    hot: [(&'static str, u64); 5],
    rest: &'a Tally,
}

impl Events<'_> {
    /// The count of the event called `name` (zero when never counted).
    pub fn get(&self, name: &str) -> u64 {
        match self.hot.iter().find(|(k, _)| *k == name) {
            Some((_, v)) => *v,
            None => self.rest.get(name),
        }
    }

    /// Every event counted at least once, the per-packet ones first.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.hot
            .iter()
            .copied()
            .filter(|(_, v)| *v > 0)
            .chain(self.rest.iter())
    }

    /// Sum of all events.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, v)| v).sum()
    }
}

impl Counters {
    /// Counts one drop.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        self.drops.add(reason.name(), 1);
    }

    /// Counts one named event.
    #[inline]
    pub fn event(&mut self, name: &'static str) {
        self.add_event(name, 1);
    }

    /// Counts `n` occurrences of a named event.
    pub fn add_event(&mut self, name: &'static str, n: u64) {
        match name {
            CONSUMED => self.consumed += n,
            DELIVERED => self.delivered += n,
            _ => self.events.add(name, n),
        }
    }

    /// The events counted, by name.
    pub fn events(&self) -> Events<'_> {
        Events {
            hot: [
                (CONSUMED, self.consumed),
                (DELIVERED, self.delivered),
                ("daa-path", self.daa_path),
                ("ilp-fused", self.ilp_fused),
                ("illm-pop-skipped", self.illm_pop_skipped),
            ],
            rest: &self.events,
        }
    }

    /// The drops counted, by reason.
    pub fn drops(&self) -> &Tally {
        &self.drops
    }

    /// Total drops over all reasons.
    pub fn dropped(&self) -> u64 {
        self.drops.total()
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in {} pkts/{} B, out {} pkts/{} B",
            self.packets_in, self.bytes_in, self.packets_out, self.bytes_out
        )?;
        if self.dropped() > 0 {
            write!(f, ", dropped")?;
            for (name, n) in self.drops.iter() {
                write!(f, " {name}={n}")?;
            }
        }
        for (name, n) in self.events().iter() {
            write!(f, ", {name}={n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_packet_events_are_fields_and_still_read_by_name() {
        let mut c = Counters::default();
        c.consumed += 2;
        c.event(DELIVERED);
        c.event("retransmit");
        c.add_event("retransmit", 2);
        c.drop(DropReason::Truncated);
        assert_eq!(c.delivered, 1);
        assert_eq!(c.events().get(CONSUMED), 2);
        assert_eq!(c.events().get(DELIVERED), 1);
        assert_eq!(c.events().get("retransmit"), 3);
        assert_eq!(c.events().get("daa-path"), 0);
        assert_eq!(c.events().total(), 6);
        assert_eq!(c.drops().get("truncated"), 1);
        assert_eq!(
            c.to_string(),
            "in 0 pkts/0 B, out 0 pkts/0 B, dropped truncated=1, consumed=2, delivered=1, retransmit=3"
        );
    }
}
