//! The address mapping table (Inside AppleTalk §2 "AARP"): which hardware
//! address answers for an AppleTalk node. Entries come from the `amt` option
//! and are gleaned from received datagrams (the sender's node and the frame's
//! source address), as AARP's gleaning does. AARP's requests and probes are
//! not implemented: a node the table does not know is sent to the AppleTalk
//! broadcast address, and its answer teaches the table.

use std::fmt;
use std::str::FromStr;

use std::time::Duration;

use rustc_hash::FxHashMap;
use strata_core::{Addr, Cx, HwAddr, Instant, Participants, ProtoId, Qos, SessionRef, UpiError};

use crate::appletalk::wire::ddp;

/// How long a gleaned entry lives without being refreshed, by default.
pub const AMT_TIMEOUT: Duration = Duration::from_secs(60);

/// AppleTalk Phase 2's broadcast on Ethernet (Inside AppleTalk appendix B).
pub const BROADCAST: HwAddr = HwAddr([0x09, 0x00, 0x07, 0xff, 0xff, 0xff]);

/// One configured entry, written `net.node=mac` ("65280.2=02:53:54:00:00:02").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Network number.
    pub net: u16,
    /// Node number.
    pub node: u8,
    /// Its hardware address.
    pub mac: HwAddr,
}

impl FromStr for Entry {
    type Err = String;
    fn from_str(s: &str) -> Result<Entry, String> {
        let bad = || format!("{s:?} is not net.node=mac");
        let (at, mac) = s.split_once('=').ok_or_else(bad)?;
        let (net, node) = at.split_once('.').ok_or_else(bad)?;
        Ok(Entry {
            net: net.trim().parse().map_err(|_| bad())?,
            node: node.trim().parse().map_err(|_| bad())?,
            mac: mac.trim().parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}={}", self.net, self.node, self.mac)
    }
}

/// The table, bounded: configured entries stay, gleaned ones fill what is
/// left and age out.
#[derive(Debug)]
pub struct Amt {
    /// Each node's address and, for a gleaned entry, when it was last
    /// refreshed (`None`: configured).
    map: FxHashMap<(u16, u8), (HwAddr, Option<Instant>)>,
    max: usize,
    timeout: Duration,
}

impl Amt {
    /// A table of at most `max` entries holding `fixed` (which may exceed it).
    pub fn new(fixed: &[Entry], max: usize) -> Amt {
        let map = fixed
            .iter()
            .map(|e| ((e.net, e.node), (e.mac, None)))
            .collect();
        Amt {
            map,
            max,
            timeout: AMT_TIMEOUT,
        }
    }

    /// Gleaned entries live `timeout` unrefreshed.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    fn live(&self, learned: Option<Instant>, now: Instant) -> bool {
        learned.is_none_or(|t| now.saturating_since(t) < self.timeout)
    }

    /// The hardware address for a node at `now`: known, or the AppleTalk
    /// broadcast.
    pub fn lookup(&self, net: u16, node: u8, now: Instant) -> (HwAddr, bool) {
        match (node, self.map.get(&(net, node))) {
            (255, _) | (_, None) => (BROADCAST, false),
            (_, Some(&(mac, learned))) if self.live(learned, now) => (mac, true),
            _ => (BROADCAST, false),
        }
    }

    /// Learns (or refreshes) a node's address from a datagram it sent at
    /// `now`; false when the table is full of live entries.
    pub fn glean(&mut self, net: u16, node: u8, mac: HwAddr, now: Instant) -> bool {
        if node == 0 || node >= 254 || mac.is_multicast() {
            return true;
        }
        match self.map.get_mut(&(net, node)) {
            // A configured entry is not overwritten.
            Some((_, None)) => return true,
            Some(e) => {
                *e = (mac, Some(now));
                return true;
            }
            None => {}
        }
        if self.map.len() >= self.max {
            let timeout = self.timeout;
            self.map
                .retain(|_, (_, t)| t.is_none_or(|t| now.saturating_since(t) < timeout));
            if self.map.len() >= self.max {
                return false;
            }
        }
        self.map.insert((net, node), (mac, Some(now)));
        true
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The Ethernet session (in `links`, one per hardware address, opened on
/// `eth` when first needed) that reaches `dst`: its known address, or the
/// AppleTalk broadcast while the table does not know it.
pub fn link_to(
    amt: &Amt,
    links: &mut FxHashMap<HwAddr, SessionRef>,
    eth: ProtoId,
    dst: ddp::Addr,
    cx: &mut Cx,
) -> Result<SessionRef, UpiError> {
    let (mac, known) = amt.lookup(dst.net, dst.node, cx.now());
    if !known && dst.node != 255 {
        cx.count("sent-unmapped");
    }
    link_for(links, eth, mac, cx)
}

/// The Ethernet session (in `links`, opened on `eth` when first needed) to `mac`.
pub fn link_for(
    links: &mut FxHashMap<HwAddr, SessionRef>,
    eth: ProtoId,
    mac: HwAddr,
    cx: &mut Cx,
) -> Result<SessionRef, UpiError> {
    if let Some(l) = links.get(&mac) {
        return Ok(*l);
    }
    let l = cx.open(eth, Participants::remote([Addr::Hw(mac)]), Qos::default())?;
    links.insert(mac, l);
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_from_net_dot_node_equals_mac() {
        let e: Entry = "65280.2=02:53:54:00:00:02".parse().unwrap();
        assert_eq!((e.net, e.node, e.mac), (65280, 2, HwAddr::local(2)));
        assert_eq!(e.to_string().parse::<Entry>().unwrap(), e);
        assert!("65280=02:53:54:00:00:02".parse::<Entry>().is_err());
        assert!("1.300=02:53:54:00:00:02".parse::<Entry>().is_err());
    }

    #[test]
    fn unknown_nodes_go_to_the_appletalk_broadcast_until_gleaned() {
        let now = Instant::ZERO;
        let mut t = Amt::new(&[], 1);
        assert_eq!(t.lookup(1, 2, now), (BROADCAST, false));
        assert!(t.glean(1, 2, HwAddr::local(2), now));
        assert_eq!(t.lookup(1, 2, now), (HwAddr::local(2), true));
        assert!(!t.glean(1, 3, HwAddr::local(3), now), "full");
        assert!(
            t.glean(1, 2, HwAddr::local(9), now),
            "a known node refreshes"
        );
        assert_eq!(t.lookup(1, 255, now), (BROADCAST, false));
    }

    #[test]
    fn gleaned_entries_age_out_and_configured_ones_stay() {
        let fixed: Entry = "1.5=02:53:54:00:00:05".parse().unwrap();
        let mut t = Amt::new(&[fixed], 2);
        t.set_timeout(Duration::from_secs(10));
        let at = |s: u64| Instant::ZERO + Duration::from_secs(s);
        assert!(t.glean(1, 2, HwAddr::local(2), at(0)));
        assert!(t.glean(1, 2, HwAddr::local(2), at(8)), "refreshed at 8 s");
        assert_eq!(t.lookup(1, 2, at(17)), (HwAddr::local(2), true));
        assert_eq!(t.lookup(1, 2, at(18)), (BROADCAST, false), "aged out");
        assert!(t.glean(1, 5, HwAddr::local(9), at(0)));
        assert_eq!(
            t.lookup(1, 5, at(1_000)),
            (HwAddr::local(5), true),
            "configured: not overwritten, never aged"
        );
        // Full of live entries: refused; once one is stale, it makes room.
        assert!(!t.glean(1, 3, HwAddr::local(3), at(9)), "full");
        assert!(
            t.glean(1, 3, HwAddr::local(3), at(30)),
            "the stale one went"
        );
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(1, 3, at(30)), (HwAddr::local(3), true));
    }
}
