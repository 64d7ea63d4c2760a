//! Reassembly (RFC 791 §3.2 "reassembly procedure", with RFC 815's hole
//! bookkeeping): the fragments of a datagram, keyed by (source, destination,
//! identification, protocol), are kept as sorted, disjoint runs of bytes. A new
//! fragment fills only the holes it overlaps — bytes already held win, so
//! duplicates and overlaps can neither grow memory nor rewrite data already
//! received — and runs that touch are joined. Nothing is copied: a run is a
//! `Message` whose segments are the received frames' bytes, and the complete
//! datagram is one such message.
//!
//! Everything is bounded: datagrams in progress, bytes held (each run is
//! charged a fixed overhead on top of its length, so tiny fragments cannot hold
//! much memory cheaply), and runs per datagram. Like Linux, a fragment that
//! would pass a bound is refused rather than an older datagram evicted, so
//! every arriving fragment has exactly one outcome. A datagram not complete within the
//! timeout is dropped by its owner's timer.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::info::NetHeader;
use smallvec::SmallVec;
use strata_core::{DropReason, Instant, Message, TimerId};

use super::wire::{FRAGMENT_UNIT, MAX_PACKET_LEN};

/// Bytes charged for each run on top of its length.
pub const RUN_OVERHEAD: usize = 64;

/// Most disjoint runs one datagram may be in (a 64 KiB datagram in 576-byte
/// fragments arriving in the worst order needs about 60).
pub const MAX_RUNS: usize = 128;

/// What identifies the fragments of one datagram (RFC 791 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Identification.
    pub ident: u16,
    /// Protocol number.
    pub protocol: u8,
}

/// The bounds and the timeout.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a datagram may take to complete.
    pub timeout: Duration,
    /// Most datagrams in progress.
    pub datagrams: usize,
    /// Most bytes held, overhead included.
    pub bytes: usize,
}

/// One received fragment, header already stripped.
#[derive(Debug)]
pub struct Fragment {
    /// Its datagram.
    pub key: Key,
    /// Offset of its payload in the datagram's payload, in bytes.
    pub offset: usize,
    /// The MF flag.
    pub more: bool,
    /// Its IP header as received (quoted by ICMP errors about the datagram).
    pub header: NetHeader,
    /// Whether it came as a link-layer broadcast (ICMP must not answer those).
    pub link_broadcast: bool,
    /// Its payload.
    pub payload: Message,
}

/// What became of a fragment.
#[derive(Debug)]
pub enum Outcome {
    /// Kept, the datagram is not complete yet. `started` is set when this
    /// fragment began a datagram: its serial and deadline, for the owner's timer.
    Held {
        /// A new datagram's serial and deadline.
        started: Option<(u64, Instant)>,
    },
    /// The datagram is complete.
    Complete {
        /// Its whole payload.
        payload: Message,
        /// The first fragment's header.
        header: NetHeader,
        /// The datagram's timer, to cancel.
        timer: Option<TimerId>,
    },
    /// The fragment was refused, for this reason.
    Refused(DropReason),
}

/// A datagram given up at its timeout.
#[derive(Debug)]
pub struct Expired {
    /// The first fragment's header, when fragment zero arrived.
    pub header: Option<NetHeader>,
    /// The first bytes of the payload (up to 8) when fragment zero arrived.
    pub first_bytes: Vec<u8>,
    /// Whether any fragment came as a link-layer broadcast.
    pub link_broadcast: bool,
}

struct Datagram {
    key: Key,
    serial: u64,
    first: Option<NetHeader>,
    total: Option<usize>,
    /// Sorted by offset, disjoint, never touching.
    runs: Vec<(usize, Message)>,
    charged: usize,
    timer: Option<TimerId>,
    link_broadcast: bool,
}

/// The datagrams being reassembled.
pub struct Reassembly {
    limits: Limits,
    datagrams: Vec<Datagram>,
    charged: usize,
    serial: u64,
}

/// The parts of `[start, end)` no run covers.
fn holes(runs: &[(usize, Message)], start: usize, end: usize) -> SmallVec<[(usize, usize); 4]> {
    let mut out = SmallVec::new();
    let mut cursor = start;
    for (at, run) in runs {
        let (at, run_end) = (*at, at + run.len());
        if run_end <= cursor {
            continue;
        }
        if at >= end {
            break;
        }
        if at > cursor {
            out.push((cursor, at));
        }
        cursor = run_end;
        if cursor >= end {
            break;
        }
    }
    if cursor < end {
        out.push((cursor, end));
    }
    out
}

/// Puts a run in place, joining it with neighbours it touches.
fn insert_run(runs: &mut Vec<(usize, Message)>, start: usize, bytes: Message) {
    let at = runs.partition_point(|(o, _)| *o < start);
    let end = start + bytes.len();
    runs.insert(at, (start, bytes));
    if at + 1 < runs.len() && runs[at + 1].0 == end {
        let (_, next) = runs.remove(at + 1);
        runs[at].1.join(next);
    }
    if at > 0 && runs[at - 1].0 + runs[at - 1].1.len() == start {
        let (_, this) = runs.remove(at);
        runs[at - 1].1.join(this);
    }
}

impl Reassembly {
    /// No datagrams yet.
    pub fn new(limits: Limits) -> Reassembly {
        Reassembly {
            limits,
            datagrams: Vec::new(),
            charged: 0,
            serial: 0,
        }
    }

    /// Datagrams in progress.
    pub fn in_progress(&self) -> usize {
        self.datagrams.len()
    }

    /// Bytes charged against the limit.
    pub fn held_bytes(&self) -> usize {
        self.charged
    }

    /// Takes one fragment.
    pub fn insert(&mut self, f: Fragment, now: Instant) -> Outcome {
        let len = f.payload.len();
        let end = f.offset + len;
        let header_len = f.header.get().len();
        // RFC 791: every fragment but the last carries a multiple of 8 bytes, and
        // no datagram exceeds 65535 bytes (the "ping of death" overflows it).
        if len == 0
            || (f.more && !len.is_multiple_of(FRAGMENT_UNIT))
            || header_len + end > MAX_PACKET_LEN
        {
            return Outcome::Refused(DropReason::Malformed);
        }
        let found = self.datagrams.iter().position(|d| d.key == f.key);
        let (holes, runs_now) = match found.map(|i| &self.datagrams[i]) {
            Some(d) => {
                let past_end = match d.total {
                    Some(total) => end > total || (!f.more && end != total),
                    None => !f.more && d.runs.last().is_some_and(|(o, r)| o + r.len() > end),
                };
                if past_end {
                    return Outcome::Refused(DropReason::Malformed);
                }
                (holes(&d.runs, f.offset, end), d.runs.len())
            }
            None if self.datagrams.len() >= self.limits.datagrams => {
                return Outcome::Refused(DropReason::QueueFull);
            }
            None => (SmallVec::from_slice(&[(f.offset, end)]), 0),
        };
        let charge: usize = holes.iter().map(|(s, e)| e - s + RUN_OVERHEAD).sum();
        if self.charged + charge > self.limits.bytes || runs_now + holes.len() > MAX_RUNS {
            return Outcome::Refused(DropReason::QueueFull);
        }
        let (i, started) = match found {
            Some(i) => (i, None),
            None => {
                self.serial += 1;
                self.datagrams.push(Datagram {
                    key: f.key,
                    serial: self.serial,
                    first: None,
                    total: None,
                    runs: Vec::new(),
                    charged: 0,
                    timer: None,
                    link_broadcast: false,
                });
                (
                    self.datagrams.len() - 1,
                    Some((self.serial, now + self.limits.timeout)),
                )
            }
        };
        let d = &mut self.datagrams[i];
        if !f.more {
            d.total = Some(end);
        }
        if f.offset == 0 && d.first.is_none() {
            d.first = Some(f.header);
        }
        d.link_broadcast |= f.link_broadcast;
        for &(s, e) in &holes {
            let mut run = f.payload.clone();
            run.strip(s - f.offset);
            run.truncate(e - s);
            insert_run(&mut d.runs, s, run);
        }
        d.charged += charge;
        self.charged += charge;

        let complete =
            matches!((d.total, d.runs.as_slice()), (Some(total), [(0, run)]) if run.len() == total);
        if complete {
            let d = self.datagrams.swap_remove(i);
            self.charged -= d.charged;
            let payload = d
                .runs
                .into_iter()
                .next()
                .map(|(_, r)| r)
                .unwrap_or_default();
            return Outcome::Complete {
                payload,
                header: d.first.unwrap_or_default(),
                timer: d.timer,
            };
        }
        if holes.is_empty() {
            return Outcome::Refused(DropReason::Other("duplicate-fragment"));
        }
        Outcome::Held { started }
    }

    /// Records the timer armed for datagram `serial`.
    pub fn attach_timer(&mut self, serial: u64, timer: TimerId) {
        if let Some(d) = self.datagrams.iter_mut().find(|d| d.serial == serial) {
            d.timer = Some(timer);
        }
    }

    /// Gives up datagram `serial` (its timer fired); `None` when it completed.
    pub fn expire(&mut self, serial: u64) -> Option<Expired> {
        let i = self.datagrams.iter().position(|d| d.serial == serial)?;
        let d = self.datagrams.swap_remove(i);
        self.charged -= d.charged;
        let first_bytes = match d.runs.first() {
            Some((0, run)) => {
                let mut b = vec![0u8; run.len().min(8)];
                run.copy_to_slice(0, &mut b);
                b
            }
            _ => Vec::new(),
        };
        Some(Expired {
            header: d.first.filter(|_| !first_bytes.is_empty()),
            first_bytes,
            link_broadcast: d.link_broadcast,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    const DATA_LEN: usize = 4000;

    fn data() -> Vec<u8> {
        (0..DATA_LEN).map(|i| (i * 7 % 251) as u8).collect()
    }

    fn key(ident: u16) -> Key {
        Key {
            src: Ipv4Addr::new(198, 18, 0, 2),
            dst: Ipv4Addr::new(198, 18, 0, 1),
            ident,
            protocol: 17,
        }
    }

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_secs(30),
            datagrams: 4,
            bytes: 1_000_000,
        }
    }

    fn header() -> NetHeader {
        NetHeader::copy(&[0x45; 20])
    }

    fn frag(ident: u16, start: usize, end: usize) -> Fragment {
        Fragment {
            key: key(ident),
            offset: start,
            more: end < DATA_LEN,
            header: header(),
            link_broadcast: false,
            payload: Message::from_bytes(Bytes::from(data()[start..end].to_vec())),
        }
    }

    /// Feeds fragments; returns the datagram when one completes.
    fn feed(r: &mut Reassembly, frags: &[(usize, usize)]) -> Option<Vec<u8>> {
        let mut done = None;
        for &(s, e) in frags {
            if let Outcome::Complete { payload, .. } = r.insert(frag(1, s, e), Instant::ZERO) {
                assert!(done.is_none(), "completed twice");
                done = Some(payload.to_vec());
            }
        }
        done
    }

    #[test]
    fn fragments_in_order_make_the_datagram() {
        let mut r = Reassembly::new(limits());
        let out = feed(&mut r, &[(0, 1480), (1480, 2960), (2960, 4000)]);
        assert_eq!(out, Some(data()));
        assert_eq!(
            (r.in_progress(), r.held_bytes()),
            (0, 0),
            "nothing left behind"
        );
    }

    #[test]
    fn fragments_in_reverse_make_the_same_datagram() {
        let mut r = Reassembly::new(limits());
        assert_eq!(
            feed(&mut r, &[(2960, 4000), (1480, 2960), (0, 1480)]),
            Some(data())
        );
    }

    #[test]
    fn a_duplicate_fragment_is_refused_and_changes_nothing() {
        let mut r = Reassembly::new(limits());
        assert!(matches!(
            r.insert(frag(1, 0, 1480), Instant::ZERO),
            Outcome::Held { started: Some(_) }
        ));
        let held = r.held_bytes();
        assert!(matches!(
            r.insert(frag(1, 0, 1480), Instant::ZERO),
            Outcome::Refused(DropReason::Other("duplicate-fragment"))
        ));
        assert_eq!(r.held_bytes(), held);
        assert_eq!(feed(&mut r, &[(1480, 2960), (2960, 4000)]), Some(data()));
    }

    #[test]
    fn overlapping_fragments_fill_only_the_holes() {
        let mut r = Reassembly::new(limits());
        let out = feed(
            &mut r,
            &[
                (0, 1000),
                (800, 2400),
                (2000, 3200),
                (400, 1600),
                (3200, 4000),
            ],
        );
        assert_eq!(out, Some(data()));
    }

    #[test]
    fn bytes_already_held_win_over_a_conflicting_overlap() {
        let mut r = Reassembly::new(limits());
        r.insert(frag(1, 0, 1600), Instant::ZERO);
        let mut liar = frag(1, 800, 4000);
        liar.payload = Message::from_bytes(Bytes::from(vec![0xee; 3200]));
        let Outcome::Complete { payload, .. } = r.insert(liar, Instant::ZERO) else {
            panic!("should complete");
        };
        let out = payload.to_vec();
        assert_eq!(out[..1600], data()[..1600], "first arrival kept");
        assert!(out[1600..].iter().all(|&b| b == 0xee));
    }

    #[test]
    fn impossible_fragments_are_refused_as_malformed() {
        let mut r = Reassembly::new(limits());
        let mut odd = frag(1, 0, 1001);
        odd.more = true;
        assert!(
            matches!(
                r.insert(odd, Instant::ZERO),
                Outcome::Refused(DropReason::Malformed)
            ),
            "not a multiple of 8"
        );
        let mut huge = frag(1, 0, 8);
        huge.offset = 65528;
        assert!(
            matches!(
                r.insert(huge, Instant::ZERO),
                Outcome::Refused(DropReason::Malformed)
            ),
            "past 65535"
        );
        r.insert(frag(1, 2960, 4000), Instant::ZERO);
        let mut beyond = frag(1, 0, 8);
        beyond.offset = 4000;
        assert!(
            matches!(
                r.insert(beyond, Instant::ZERO),
                Outcome::Refused(DropReason::Malformed)
            ),
            "past the last fragment"
        );
    }

    #[test]
    fn the_number_of_datagrams_in_progress_is_bounded() {
        let mut r = Reassembly::new(limits());
        for ident in 0..4 {
            assert!(matches!(
                r.insert(frag(ident, 0, 1480), Instant::ZERO),
                Outcome::Held { .. }
            ));
        }
        assert!(matches!(
            r.insert(frag(9, 0, 1480), Instant::ZERO),
            Outcome::Refused(DropReason::QueueFull)
        ));
        assert!(
            matches!(
                r.insert(frag(0, 1480, 2960), Instant::ZERO),
                Outcome::Held { started: None }
            ),
            "old ones go on"
        );
    }

    #[test]
    fn the_bytes_held_are_bounded_overhead_included() {
        let mut r = Reassembly::new(Limits {
            bytes: 1480 + RUN_OVERHEAD,
            ..limits()
        });
        assert!(matches!(
            r.insert(frag(1, 0, 1480), Instant::ZERO),
            Outcome::Held { .. }
        ));
        assert!(matches!(
            r.insert(frag(2, 0, 8), Instant::ZERO),
            Outcome::Refused(DropReason::QueueFull)
        ));
    }

    #[test]
    fn an_expired_datagram_is_gone_and_gives_what_icmp_quotes() {
        let mut r = Reassembly::new(limits());
        let Outcome::Held {
            started: Some((serial, deadline)),
        } = r.insert(frag(1, 0, 1480), Instant::ZERO)
        else {
            panic!("should start a datagram");
        };
        assert_eq!(deadline, Instant::ZERO + Duration::from_secs(30));
        let e = r.expire(serial).unwrap();
        assert_eq!(e.first_bytes, data()[..8]);
        assert!(e.header.is_some());
        assert_eq!((r.in_progress(), r.held_bytes()), (0, 0));
        assert!(r.expire(serial).is_none(), "expires once");
    }

    #[test]
    fn without_fragment_zero_an_expired_datagram_quotes_nothing() {
        let mut r = Reassembly::new(limits());
        let Outcome::Held {
            started: Some((serial, _)),
        } = r.insert(frag(1, 1480, 2960), Instant::ZERO)
        else {
            panic!("should start a datagram");
        };
        let e = r.expire(serial).unwrap();
        assert!(e.header.is_none() && e.first_bytes.is_empty());
    }
}
