//! A learning Ethernet switch: puts three or more simulated hosts on one segment.
//!
//! It learns which port each source MAC address lives behind, forwards a frame to
//! the port its destination was learned on, and floods broadcast, multicast and
//! unknown destinations to every other port (IEEE 802.1D's relay, without spanning
//! tree: simulated segments have no loops). Forwarding takes no time; the wires to
//! and from the switch carry the delays.

use std::collections::HashMap;
use std::fmt;

use strata_core::{HwAddr, Message};

/// The most addresses a switch learns; beyond it, new addresses are flooded to.
pub const TABLE_LIMIT: usize = 4096;

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Forward {
    /// To this port only.
    Port(usize),
    /// To every port but the one it came in on.
    Flood,
    /// Nowhere (counted).
    Drop,
}

/// What a switch has done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Frames sent to the one port their destination was learned on.
    pub forwarded: u64,
    /// Frames flooded: broadcast, multicast or an unknown destination.
    pub flooded: u64,
    /// Frames dropped because their destination lives behind the port they came
    /// in on.
    pub filtered: u64,
    /// Frames too short to hold two MAC addresses, dropped.
    pub runts: u64,
    /// Source addresses learned (or moved to another port).
    pub learned: u64,
    /// Source addresses not learned because the table was full.
    pub table_full: u64,
}

impl fmt::Display for SwitchStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "forwarded {}, flooded {}, filtered {}, runts {}, learned {}, table full {}",
            self.forwarded, self.flooded, self.filtered, self.runts, self.learned, self.table_full
        )
    }
}

/// The switch's forwarding table and counts.
#[derive(Default)]
pub(crate) struct Switch {
    pub name: String,
    table: HashMap<HwAddr, usize>,
    pub stats: SwitchStats,
}

impl Switch {
    pub fn new(name: &str) -> Self {
        Switch {
            name: name.into(),
            ..Switch::default()
        }
    }

    /// Learns from a frame that came in on `ingress` and says where it goes.
    pub fn relay(&mut self, ingress: usize, frame: &Message) -> Forward {
        let mut macs = [0u8; 12];
        if frame.copy_to_slice(0, &mut macs) < macs.len() {
            self.stats.runts += 1;
            return Forward::Drop;
        }
        let mut dst = HwAddr::ZERO;
        let mut src = HwAddr::ZERO;
        dst.0.copy_from_slice(&macs[..6]);
        src.0.copy_from_slice(&macs[6..]);
        self.learn(src, ingress);
        if dst.is_multicast() {
            self.stats.flooded += 1;
            return Forward::Flood;
        }
        match self.table.get(&dst) {
            None => {
                self.stats.flooded += 1;
                Forward::Flood
            }
            Some(&port) if port == ingress => {
                self.stats.filtered += 1;
                Forward::Drop
            }
            Some(&port) => {
                self.stats.forwarded += 1;
                Forward::Port(port)
            }
        }
    }

    fn learn(&mut self, src: HwAddr, port: usize) {
        // A group address is never a source; learning it would misdirect traffic.
        if src.is_multicast() {
            return;
        }
        let full = self.table.len() >= TABLE_LIMIT;
        match self.table.get_mut(&src) {
            Some(known) if *known == port => {}
            Some(known) => {
                *known = port;
                self.stats.learned += 1;
            }
            None if full => self.stats.table_full += 1,
            None => {
                self.table.insert(src, port);
                self.stats.learned += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst: u16, src: u16) -> Message {
        let mut bytes = HwAddr::local(dst).0.to_vec();
        bytes.extend_from_slice(&HwAddr::local(src).0);
        bytes.extend_from_slice(&[0x88, 0xb5]);
        Message::from(bytes)
    }

    #[test]
    fn unknown_destinations_flood_until_learned() {
        let mut s = Switch::new("sw");
        assert_eq!(s.relay(0, &frame(2, 1)), Forward::Flood);
        assert_eq!(s.relay(1, &frame(1, 2)), Forward::Port(0));
        assert_eq!(s.relay(0, &frame(2, 1)), Forward::Port(1));
        assert_eq!(s.relay(0, &frame(1, 3)), Forward::Drop, "1 lives behind 0");
        assert_eq!(s.stats.filtered, 1);
    }

    #[test]
    fn broadcast_floods_even_when_known() {
        let mut s = Switch::new("sw");
        let mut b = frame(1, 2);
        b.for_each_chunk_mut(|c| c[..6].fill(0xff));
        assert_eq!(s.relay(1, &b), Forward::Flood);
        assert_eq!(s.relay(1, &b), Forward::Flood);
    }

    #[test]
    fn short_frames_are_counted_runts_not_panics() {
        let mut s = Switch::new("sw");
        for len in 0..12 {
            assert_eq!(s.relay(0, &Message::from(vec![0xff; len])), Forward::Drop);
        }
        assert_eq!(s.stats.runts, 12);
    }

    #[test]
    fn a_host_that_moves_is_followed_and_a_full_table_floods() {
        let mut s = Switch::new("sw");
        s.relay(0, &frame(9, 1));
        s.relay(2, &frame(9, 1));
        assert_eq!(s.relay(1, &frame(1, 5)), Forward::Port(2));
        for n in 100..100 + TABLE_LIMIT as u16 {
            s.relay(0, &frame(9, n));
        }
        assert!(s.stats.table_full > 0);
        assert_eq!(s.table.len(), TABLE_LIMIT);
    }
}
