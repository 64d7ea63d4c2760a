//! The sending half: application buffers in, packets out, buffers given back
//! as their last packet is acknowledged (§3.5.2), and both recovery
//! algorithms answered (§3.2).
//!
//! The sender never copies application data: a packet is a stream offset and
//! a length, and its payload is a [`Bytes`] slice of the application's
//! buffer, made when the packet leaves (a reference count, no copy).
//! Sequence numbers are kept relative to the initial one (`rel = seq − isn`),
//! so one connection carries up to 2³² − 1 packets (about 6 TB at 1400 B).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::stats::{DropReason, Stats};
use crate::wire::{ControlRepr, Recovery, flags};

/// Names an application buffer handed to [`crate::Connection::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u64);

struct AppBuf {
    id: BufId,
    data: Bytes,
    start: u64,
}

/// A packet cut from the stream, kept until acknowledged.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    pub offset: u64,
    pub len: u32,
    pub fin: bool,
    pub last_sent: Option<Instant>,
    queued: bool,
}

/// A packet chosen to leave now.
pub(crate) struct Outgoing {
    pub rel: u32,
    pub sent: Sent,
    pub retransmission: bool,
    pub payload: Bytes,
}

/// Retransmissions that may leave back to back with rate control off.
const RETX_BURST: usize = 64;

pub(crate) struct Sender {
    pub isn: u32,
    mss: u32,
    bufs: VecDeque<AppBuf>,
    next_id: u64,
    queued_end: u64,
    cut: u64,
    fin_queued: bool,
    fin_cut: bool,
    packets: VecDeque<Sent>,
    una: u32,
    nxt: u32,
    retx: VecDeque<u32>,
    /// The receiver's window, packets.
    pub peer_cwnd: u32,
    /// Stream bytes below this fit the receiver's buffers.
    pub limit: u64,
    /// The receiver's window is in slow start (its control packets say).
    pub peer_slow_start: bool,
    /// The receiver is recovering losses (its last control packet asked for
    /// retransmissions).
    pub peer_recovering: bool,
    /// The receiver's window when it last asked for no retransmission:
    /// while it recovers, the window it grants counts the packets it holds
    /// past the holes too, and is no rate to pace at.
    pub calm_cwnd: u32,
    last_serial: Option<u16>,
    rewound: Option<(u32, Instant)>,
    /// The end of stream was acknowledged.
    pub fin_acked: bool,
    /// When the oldest unacknowledged packet times out.
    pub rto_at: Option<Instant>,
    backoff: u32,
}

impl Sender {
    /// Packets are cut `mss` long from now on (the set-up's agreed size).
    pub(crate) fn set_mss(&mut self, mss: u32) {
        self.mss = mss.max(1);
    }

    pub(crate) fn new(isn: u32, mss: u32, initial_cwnd: u32) -> Self {
        Sender {
            isn,
            mss: mss.max(1),
            bufs: VecDeque::new(),
            next_id: 0,
            queued_end: 0,
            cut: 0,
            fin_queued: false,
            fin_cut: false,
            packets: VecDeque::new(),
            una: 0,
            nxt: 0,
            retx: VecDeque::new(),
            peer_cwnd: initial_cwnd.max(1),
            limit: 0,
            peer_slow_start: false,
            peer_recovering: false,
            calm_cwnd: initial_cwnd.max(1),
            last_serial: None,
            rewound: None,
            fin_acked: false,
            rto_at: None,
            backoff: 0,
        }
    }

    /// Queues an application buffer; `None` after [`Sender::finish`].
    pub(crate) fn queue(&mut self, data: Bytes) -> Option<BufId> {
        if self.fin_queued {
            return None;
        }
        let id = BufId(self.next_id);
        self.next_id += 1;
        let start = self.queued_end;
        self.queued_end += data.len() as u64;
        self.bufs.push_back(AppBuf { id, data, start });
        Some(id)
    }

    pub(crate) fn finish(&mut self) {
        self.fin_queued = true;
    }

    /// Bytes queued and not yet acknowledged.
    pub(crate) fn unacked_bytes(&self) -> u64 {
        self.bufs.iter().map(|b| b.data.len() as u64).sum()
    }

    /// Packets sent and not yet acknowledged.
    pub(crate) fn in_flight(&self) -> u32 {
        self.nxt.wrapping_sub(self.una)
    }

    /// Whether more retransmissions are due than leave in one burst (one
    /// UDP GSO batch): thousands of them, a slow start's or a large
    /// window's overflow at 1 Gbit/s, sent back to back overflowed the
    /// queue again. A few — a small window's, Table 2's — leave as they
    /// come, so that rate control off stays off.
    pub(crate) fn recovering(&self) -> bool {
        self.retx.len() > RETX_BURST
    }

    /// Whether the window lets out more packets at once than one burst (one
    /// UDP GSO batch): a recovery holds the oldest application buffer back,
    /// the sender runs out of data, and the buffer given back — or the
    /// holes filled, moving the window on by thousands — let 2,000–5,000
    /// packets out at once into a 1,071-packet queue (1 Gbit/s, 200 ms).
    pub(crate) fn released(&self) -> bool {
        self.peer_cwnd.saturating_sub(self.in_flight()) as usize > RETX_BURST
    }

    /// Whether a data packet could leave now, pacing aside.
    pub(crate) fn ready(&self) -> bool {
        if !self.retx.is_empty() {
            return true;
        }
        if self.in_flight() >= self.peer_cwnd {
            return false;
        }
        if (self.nxt.wrapping_sub(self.una) as usize) < self.packets.len() {
            return true;
        }
        if self.cut < self.queued_end {
            return self.cut_len() > 0;
        }
        self.fin_queued && !self.fin_cut
    }

    /// The length of the next new packet: to the end of its application
    /// buffer, the MSS, or the receiver's limit, whichever is nearest (0:
    /// the receiver has no room). A packet cut short at the limit fills the
    /// receiver's last posted buffer exactly; one held back until it fits
    /// whole would wait for a buffer that is given back only when full.
    fn cut_len(&self) -> u32 {
        let end = self
            .bufs
            .iter()
            .find(|b| b.start + b.data.len() as u64 > self.cut)
            .map_or(self.queued_end, |b| b.start + b.data.len() as u64);
        (end.min(self.limit).saturating_sub(self.cut)).min(u64::from(self.mss)) as u32
    }

    fn payload(&self, s: &Sent) -> Bytes {
        if s.len == 0 {
            return Bytes::new();
        }
        self.bufs
            .iter()
            .find(|b| b.start <= s.offset && s.offset < b.start + b.data.len() as u64)
            .map(|b| {
                let at = (s.offset - b.start) as usize;
                b.data.slice(at..at + s.len as usize)
            })
            .unwrap_or_default()
    }

    /// The next packet to send: selective retransmissions first, then
    /// packets again after a go-back-N, then new ones — within the window.
    pub(crate) fn next(&mut self, now: Instant, rto: Duration) -> Option<Outgoing> {
        while let Some(rel) = self.retx.pop_front() {
            let Some(i) = self.index(rel) else { continue };
            self.packets[i].queued = false;
            // The receiver is asking and we are answering: no time-out
            // while a selective recovery goes on. A lost retransmission is
            // asked for again a round trip later, and the time-out, armed
            // at the last cumulative progress, fired first: going back to
            // the oldest unacknowledged packet resent a window the
            // receiver held (Figure 7 at 1e-6 through wanem: 612 of 860
            // retransmissions duplicates, three time-outs).
            self.rto_at = Some(now + rto * (1 << self.backoff.min(6)));
            return Some(self.take(now, rel, i, true, rto));
        }
        if self.in_flight() >= self.peer_cwnd {
            return None;
        }
        let i = self.nxt.wrapping_sub(self.una) as usize;
        if i < self.packets.len() {
            let rel = self.nxt;
            self.nxt = self.nxt.wrapping_add(1);
            return Some(self.take(now, rel, i, true, rto));
        }
        let sent = if self.cut < self.queued_end {
            let len = self.cut_len();
            if len == 0 {
                return None;
            }
            let s = Sent {
                offset: self.cut,
                len,
                fin: false,
                last_sent: None,
                queued: false,
            };
            self.cut += u64::from(len);
            s
        } else if self.fin_queued && !self.fin_cut {
            self.fin_cut = true;
            Sent {
                offset: self.cut,
                len: 0,
                fin: true,
                last_sent: None,
                queued: false,
            }
        } else {
            return None;
        };
        self.packets.push_back(sent);
        let rel = self.nxt;
        self.nxt = self.nxt.wrapping_add(1);
        Some(self.take(now, rel, self.packets.len() - 1, false, rto))
    }

    fn take(&mut self, now: Instant, rel: u32, i: usize, again: bool, rto: Duration) -> Outgoing {
        let retransmission = again && self.packets[i].last_sent.is_some();
        self.packets[i].last_sent = Some(now);
        if self.rto_at.is_none() {
            self.rto_at = Some(now + rto * (1 << self.backoff.min(6)));
        }
        let sent = self.packets[i];
        Outgoing {
            rel,
            sent,
            retransmission,
            payload: self.payload(&sent),
        }
    }

    fn index(&self, rel: u32) -> Option<usize> {
        let i = rel.wrapping_sub(self.una) as usize;
        (i < self.packets.len()).then_some(i)
    }

    /// Applies a control packet; returns the buffers now fully acknowledged.
    /// `srtt` spaces repeated answers to the same request.
    pub(crate) fn on_control(
        &mut self,
        now: Instant,
        c: &ControlRepr,
        srtt: Duration,
        rto: Duration,
        stats: &mut Stats,
    ) -> Result<(Vec<(BufId, Bytes)>, bool), DropReason> {
        if let Some(last) = self.last_serial
            && c.serial.wrapping_sub(last).wrapping_sub(1) >= 0x8000
        {
            return Err(DropReason::Stale);
        }
        let ne = c.next_expected.wrapping_sub(self.isn);
        let newly = ne.wrapping_sub(self.una);
        if newly as usize > self.packets.len() {
            return Err(DropReason::Inconsistent);
        }
        self.last_serial = Some(c.serial);
        self.peer_cwnd = c.cwnd.max(1);
        self.peer_slow_start = c.flags & flags::SLOW_START != 0;
        self.peer_recovering = c.recovery != Recovery::None;
        if !self.peer_recovering {
            self.calm_cwnd = self.peer_cwnd;
        }
        self.limit = self.limit.max(c.limit);
        let mut done = Vec::new();
        let progressed = newly > 0;
        if progressed {
            let mut acked_end = 0;
            for _ in 0..newly {
                if let Some(p) = self.packets.pop_front() {
                    acked_end = p.offset + u64::from(p.len);
                    self.fin_acked |= p.fin;
                }
            }
            self.una = ne;
            if self.nxt.wrapping_sub(self.una) > self.packets.len() as u32 {
                self.nxt = self.una;
            }
            while let Some(b) = self.bufs.front() {
                if b.start + b.data.len() as u64 > acked_end {
                    break;
                }
                let b = self.bufs.pop_front().expect("front checked");
                done.push((b.id, b.data));
            }
            let (una, len) = (self.una, self.packets.len());
            self.retx.retain(|&r| (r.wrapping_sub(una) as usize) < len);
            self.backoff = 0;
            self.rto_at = (!self.packets.is_empty()).then_some(now + rto);
        }
        match c.recovery {
            Recovery::None => {}
            Recovery::GoBackN => {
                // §3.2: send again from the next expected packet — once per
                // round trip for the same request, since the receiver repeats it.
                let repeat = matches!(self.rewound, Some((at, t)) if at == ne && now < t + srtt);
                if !repeat && !self.packets.is_empty() {
                    self.nxt = ne;
                    self.retx.clear();
                    self.rewound = Some((ne, now));
                    stats.go_back_n_obeyed += 1;
                }
            }
            Recovery::Selective => {
                for &(first, end) in &c.gaps {
                    let (first, end) = (first.wrapping_sub(self.isn), end.wrapping_sub(self.isn));
                    let n = end.wrapping_sub(first).min(self.packets.len() as u32);
                    for k in 0..n {
                        let rel = first.wrapping_add(k);
                        let Some(i) = self.index(rel) else { continue };
                        // Only what was sent, not already queued, and not sent
                        // again within the last round trip.
                        let p = &mut self.packets[i];
                        let due = p.last_sent.is_some_and(|t| now >= t + srtt);
                        let sent_once =
                            rel.wrapping_sub(self.una) < self.nxt.wrapping_sub(self.una);
                        if due && sent_once && !p.queued {
                            p.queued = true;
                            self.retx.push_back(rel);
                        }
                    }
                }
            }
        }
        Ok((done, progressed))
    }

    /// The retransmission timer fired: go back to the oldest unacknowledged
    /// packet (the receiver may have lost every later one) and back off.
    pub(crate) fn on_timeout(&mut self, now: Instant, rto: Duration, stats: &mut Stats) {
        self.rto_at = None;
        if self.packets.is_empty() {
            return;
        }
        stats.timeouts += 1;
        self.backoff = (self.backoff + 1).min(6);
        self.nxt = self.una;
        self.retx.clear();
        for p in &mut self.packets {
            p.queued = false;
        }
        self.rto_at = Some(now + rto * (1 << self.backoff));
    }
}
