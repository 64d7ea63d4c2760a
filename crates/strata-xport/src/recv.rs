//! The receiving half: data written straight into the application's
//! buffers at its final stream offset (§3.5.1 — out-of-order data lands
//! where it belongs), the receiver-driven window (§3.1) and the choice of
//! recovery per episode (§3.2).
//!
//! The application posts buffers ([`crate::Connection::post_recv`]); each
//! covers the next stretch of the stream and is given back, filled, once
//! every byte of it arrived in order (or partly filled at the end of the
//! stream). The posted buffers' end is the limit sent to the sender, so data
//! never arrives with nowhere to go.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::RecoveryPolicy;
use crate::held::Held;
use crate::queue::QueueEstimate;
use crate::slowstart;
use crate::stats::{DropReason, Stats};
use crate::window::Window;
use crate::wire::{
    ControlRepr, DataRepr, MAX_DATA_SOCKETS, MAX_GAPS, Recovery, flags, widen_offset,
};

struct Slot {
    buf: Vec<u8>,
    start: u64,
}

/// A filled application buffer given back.
pub(crate) struct Filled {
    pub offset: u64,
    pub buf: Vec<u8>,
    pub len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Transfer,
    Recovery(Recovery),
}

pub(crate) struct Receiver {
    isn: u32,
    next: u32,
    contiguous: u64,
    ooo: Held,
    slots: VecDeque<Slot>,
    posted_end: u64,
    fin_end: Option<u64>,
    /// The whole stream arrived.
    pub finished: bool,
    mode: Mode,
    policy: RecoveryPolicy,
    adaptive_threshold: u32,
    mss: u32,
    pub window: Window,
    ts_recent: u32,
    /// In-order packets not yet acknowledged.
    pub unacked: u32,
    /// A control packet should leave at once.
    pub urgent: bool,
    /// When a delayed acknowledgement is due.
    pub ack_at: Option<Instant>,
    serial: u16,
    gap_since: Option<Instant>,
    /// The sender's clock (`tsval`) on the first packet seen past the gap.
    gap_ts: u32,
    reorder_window: Duration,
    queue: QueueEstimate,
    discriminate: bool,
    /// The highest packet received (relative sequence).
    highest: u32,
    /// After a congestion cut, packets up to this one were sent before the
    /// sender heard of it: no second cut, no growth, until one arrives.
    cut_until: Option<u32>,
    /// The path's RTT if the connection knows it (slow start's exit).
    pub path_rtt: Option<Duration>,
    /// Per data socket, the packet expected next on it: one lap of the
    /// sockets past the newest it brought (the sender puts packet `rel` on
    /// socket `rel % sockets`). Where a driver receiving straight into the
    /// application's buffers expects that socket's next packets.
    lane_next: [u32; MAX_DATA_SOCKETS],
    /// `targets`' list of wanted `(offset, length)` stretches, kept between
    /// calls so a receive allocates no list of its own.
    want: Vec<(u64, u64)>,
    /// Where the next request of gaps goes on from (relative sequence).
    ask_from: u32,
}

/// Packets sent on the missing packet's own data socket that may arrive past
/// it before it counts as a loss even within the reorder window. Only that
/// socket's count: the driver reads a batch per socket (with GRO, hundreds
/// of packets), so the other sockets' packets pass a gap by whole batches
/// without anything being lost, while one socket's packets keep their order
/// on an orderly path.
const REORDER_PACKETS: u32 = 64;
/// With no later packet to show a gap lost, it is lost after this many
/// reorder windows on the receiver's clock.
const BACKSTOP: u32 = 8;

impl Receiver {
    pub(crate) fn new(
        isn: u32,
        policy: RecoveryPolicy,
        threshold: u32,
        mss: u32,
        window: Window,
        reorder_window: Duration,
        discriminate: bool,
    ) -> Self {
        Receiver {
            isn,
            next: 0,
            contiguous: 0,
            ooo: Held::default(),
            slots: VecDeque::new(),
            posted_end: 0,
            fin_end: None,
            finished: false,
            mode: Mode::Transfer,
            policy,
            adaptive_threshold: threshold,
            mss,
            window,
            ts_recent: 0,
            unacked: 0,
            urgent: false,
            ack_at: None,
            serial: 0,
            gap_since: None,
            gap_ts: 0,
            reorder_window,
            queue: QueueEstimate::default(),
            discriminate,
            highest: 0,
            cut_until: None,
            path_rtt: None,
            lane_next: std::array::from_fn(|i| i as u32),
            want: Vec::new(),
            ask_from: 0,
        }
    }

    /// Posts an application buffer covering the next `buf.len()` bytes of
    /// the stream.
    pub(crate) fn post(&mut self, buf: Vec<u8>) {
        if buf.is_empty() {
            return;
        }
        let start = self.posted_end;
        self.posted_end += buf.len() as u64;
        self.slots.push_back(Slot { buf, start });
        // A window that opens is worth telling at once: the sender may be
        // waiting on it.
        self.urgent = true;
    }

    /// Bytes of posted buffers not yet filled in order.
    pub(crate) fn posted_space(&self) -> u64 {
        self.posted_end - self.contiguous
    }

    /// Stream bytes received in order.
    pub(crate) fn delivered(&self) -> u64 {
        self.contiguous
    }

    /// Where the next packets on data socket `lane` of `lanes` are expected,
    /// for a driver that receives straight into the application's buffers
    /// (§3.5.1): up to `max` stretches `(stream offset, room)` of the posted
    /// buffers, in the order that socket should bring them. Each stretch
    /// lies where no data was received yet — a hole between packets held
    /// past a gap, or the space past the farthest one — so a packet that
    /// lands in a stretch not its own overwrites nothing received (the
    /// driver checks each header and copies such a packet to its place).
    /// The stretches are `mss` long, cut `lanes × mss` apart from the packet
    /// the socket brings next, and all but the last are whole: a shorter one
    /// (a buffer's or a hole's end) ends the list.
    pub(crate) fn targets(&mut self, lane: u32, lanes: u32, max: usize) -> Vec<(u64, &mut [u8])> {
        let n = lanes.clamp(1, MAX_DATA_SOCKETS as u32);
        let lane = lane % n;
        let p = u64::from(self.mss.max(1));
        // The lane's packets older than its next one are losses or late:
        // they come back out of order and are copied.
        let from = self.lane_next[lane as usize].wrapping_sub(self.next);
        let from = if from >= 0x8000_0000 { 0 } else { from };
        let mut want = std::mem::take(&mut self.want);
        want.clear();
        let span = self.ooo.span();
        // Start at the run of holes `from` lies in: after the nearest packet
        // held before it (the other sockets' packets are usually right there).
        let (mut prev_end, mut first) = (self.contiguous, 0u32);
        let mut b = from.min(span);
        while b > 0 {
            b -= 1;
            if let Some((o, l, _)) = self.ooo.get(b) {
                (prev_end, first) = (o + u64::from(l), b + 1);
                break;
            }
        }
        let mut a = from.min(span).max(first);
        'walk: while a <= span && want.len() < max {
            // A run of holes [first, a) ends at a held packet or at the span.
            let (stop, last) = match self.ooo.get(a) {
                Some((o, _, _)) if a < span => (o, false),
                _ if a < span => {
                    a += 1;
                    continue;
                }
                _ => (self.posted_end, true),
            };
            let lo = first.max(from);
            let skew = (lane + n - self.next.wrapping_add(lo) % n) % n;
            let mut c = lo.saturating_add(skew);
            while (last || c < a) && want.len() < max {
                let o = prev_end + u64::from(c - first) * p;
                if o >= stop {
                    break;
                }
                let len = p.min(stop - o);
                want.push((o, len));
                if len < p {
                    break 'walk;
                }
                c += n;
            }
            if last {
                break;
            }
            let (o, l, _) = self.ooo.get(a).expect("held: matched above");
            prev_end = o + u64::from(l);
            first = a + 1;
            a += 1;
        }
        // Cut the stretches out of the posted buffers, in order.
        let mut out = Vec::with_capacity(want.len());
        let mut wanted = want.drain(..).peekable();
        'slots: for s in self.slots.iter_mut() {
            let end = s.start + s.buf.len() as u64;
            let (mut rest, mut rest_at): (&mut [u8], u64) = (&mut s.buf[..], s.start);
            while let Some(&(o, len)) = wanted.peek() {
                if o >= end {
                    continue 'slots;
                }
                wanted.next();
                if o < rest_at {
                    continue;
                }
                let to = (o + len).min(end);
                let (_, tail) = std::mem::take(&mut rest).split_at_mut((o - rest_at) as usize);
                let (piece, after) = tail.split_at_mut((to - o) as usize);
                out.push((o, piece));
                if to - o < p {
                    break 'slots;
                }
                (rest, rest_at) = (after, to);
            }
            break;
        }
        drop(wanted);
        self.want = want;
        out
    }

    /// The stream offset a data packet names modulo 2^32 (wire.rs): the one
    /// nearest the next byte expected.
    pub(crate) fn widen(&self, low: u32) -> u64 {
        widen_offset(low, self.contiguous)
    }

    /// The receive limit sent to the sender: the posted buffers' end, but
    /// less than 2^31 bytes past the next byte expected, so that every data
    /// packet's offset modulo 2^32 names one offset ([`Receiver::widen`]).
    fn limit(&self) -> u64 {
        self.posted_end.min(self.contiguous + (1 << 31) - 1)
    }

    /// The `len` bytes at stream offset `offset` when they lie in one posted
    /// buffer not yet given back (a payload the driver placed there).
    pub(crate) fn posted(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let s = self
            .slots
            .iter()
            .find(|s| s.start <= offset && offset < s.start + s.buf.len() as u64)?;
        let from = (offset - s.start) as usize;
        s.buf.get(from..from.checked_add(len)?)
    }

    fn place(&mut self, offset: u64, payload: &[u8]) {
        let mut at = offset;
        let mut rest = payload;
        for s in self.slots.iter_mut() {
            if rest.is_empty() {
                break;
            }
            let end = s.start + s.buf.len() as u64;
            if at >= end || at < s.start {
                continue;
            }
            let from = (at - s.start) as usize;
            let n = rest.len().min(s.buf.len() - from);
            s.buf[from..from + n].copy_from_slice(&rest[..n]);
            at += n as u64;
            rest = &rest[n..];
        }
    }

    /// Accepts a data packet whose payload is `payload` — `None` when the
    /// driver received it straight into the posted buffer at its offset
    /// (see [`Receiver::targets`]); returns the application buffers
    /// completed by it.
    pub(crate) fn on_data(
        &mut self,
        now: Instant,
        d: &DataRepr,
        payload: Option<&[u8]>,
        sockets: u32,
        ack_delay: std::time::Duration,
        stats: &mut Stats,
    ) -> Result<Vec<Filled>, DropReason> {
        let rel = d.seq.wrapping_sub(self.isn);
        let offset = self.widen(d.offset);
        let end = offset
            .checked_add(u64::from(d.len))
            .ok_or(DropReason::Malformed)?;
        let fin = d.flags & flags::FIN != 0;
        if d.len > self.mss || (fin && self.fin_end.is_some_and(|f| f != end)) {
            return Err(DropReason::Inconsistent);
        }
        let ahead = rel.wrapping_sub(self.next);
        if ahead >= 0x8000_0000 || self.ooo.contains(ahead) {
            // Already held: the sender missed our acknowledgement.
            self.urgent = true;
            return Err(DropReason::Duplicate);
        }
        // Nothing honest is further ahead than the largest window we could
        // have advertised: bounds what a forger holding the id can make us keep.
        if end > self.posted_end || ahead > self.window.max() {
            return Err(DropReason::OutOfWindow);
        }
        self.queue.round = self.path_rtt.unwrap_or_default();
        self.queue
            .on_packet(now, d.tsval, d.flags & flags::RETRANSMISSION != 0);
        self.window.on_delay(rel, &self.queue, self.path_rtt);
        // A packet past one never seen: a new loss (or reordering).
        let beyond = rel.wrapping_sub(self.highest);
        let new_hole = beyond > 1 && beyond < 0x8000_0000;
        if beyond < 0x8000_0000 {
            self.highest = rel;
        }
        let n = sockets.clamp(1, MAX_DATA_SOCKETS as u32);
        let lane = &mut self.lane_next[(rel % n) as usize];
        if rel.wrapping_sub(*lane) < 0x8000_0000 {
            *lane = rel.wrapping_add(n);
        }
        // Losses go on during a recovery: a new one behind a standing queue
        // is congestion (a recovery taken for random loss, or a window
        // after a cut). Only a new loss: the retransmissions of those cut
        // for already are more than a tenth of the packets (the share that
        // says congestion on a shallow queue) for a while, and at 1 Gbit/s
        // and 100 ms each of them cut again, to a quarter of the path.
        if self.discriminate && self.mode != Mode::Transfer && new_hole && self.congested() {
            self.cut(stats);
        }
        if ahead == 0 {
            if offset != self.contiguous {
                return Err(DropReason::Inconsistent);
            }
            if let Some(payload) = payload {
                self.place(offset, payload);
            }
            stats.bytes_received += u64::from(d.len);
            self.advance(end, fin);
            self.ts_recent = d.tsval;
            while let Some((o, l, f)) = self.ooo.next() {
                self.advance(o + u64::from(l), f);
            }
            // The gap closed; one left behind is timed from now.
            self.gap_since = (!self.ooo.is_empty()).then_some(now);
            self.gap_ts = d.tsval;
            if let Mode::Recovery(kind) = self.mode {
                // The awaited packet arrived: back to data transfer (§3.2).
                // Gaps left behind by a selective episode are requested by the
                // very next control packet.
                self.mode = Mode::Transfer;
                if kind == Recovery::Selective && !self.ooo.is_empty() {
                    self.mode = Mode::Recovery(Recovery::Selective);
                }
                self.urgent = true;
            }
            let ack_every = (self.window.cwnd() / 4).clamp(2, 16);
            if self.unacked >= ack_every || self.finished {
                self.urgent = true;
            } else if self.ack_at.is_none() {
                self.ack_at = Some(now + ack_delay);
            }
            return Ok(self.completed());
        }
        // A gap: a packet before this one is missing — or only late: packets
        // spread over several data sockets are read a batch per socket, so a
        // gap counts as a loss only once it outlives the reorder window or
        // too many packets passed it.
        if self.mode == Mode::Transfer {
            let since = match self.gap_since {
                Some(t) => t,
                None => {
                    self.gap_ts = d.tsval;
                    *self.gap_since.insert(now)
                }
            };
            // The sender puts packet `rel` on data socket `rel % sockets`.
            let n = sockets.max(1);
            let passed = if rel % n == self.next % n {
                ahead / n
            } else {
                0
            };
            // Timed on both clocks: the receiver's (the gap is this old) and
            // the sender's (this packet left so long after the first one past
            // the gap, which left after the missing one). The receiver's
            // alone counts its own scheduling delays — on a loaded host a
            // wake-up late by a millisecond between two sockets' batches was
            // taken for loss; the sender's alone counts a bottleneck queue
            // that emptied. A gap no later packet shows lost is lost at the
            // backstop (the receiver's clock alone, `check_gap`).
            let late = d.tsval.wrapping_sub(self.gap_ts) as i32;
            let late = Duration::from_micros(late.max(0) as u64);
            let due = since + self.reorder_window;
            let waiting = late < self.reorder_window || now < due;
            if passed < REORDER_PACKETS && waiting && now < since + self.reorder_window * BACKSTOP {
                self.ack_at = Some(self.ack_at.map_or(due, |t| t.min(due)));
            } else {
                self.enter_recovery(stats);
            }
        } else if self.ack_at.is_none() {
            self.ack_at = Some(now + ack_delay);
        }
        match self.mode {
            Mode::Recovery(Recovery::GoBackN) => Err(DropReason::GoBackNDiscard),
            _ => {
                if offset < self.contiguous {
                    return Err(DropReason::Inconsistent);
                }
                if let Some(payload) = payload {
                    self.place(offset, payload);
                }
                stats.bytes_received += u64::from(d.len);
                self.ooo.insert(ahead, (offset, d.len, fin));
                Ok(Vec::new())
            }
        }
    }

    fn enter_recovery(&mut self, stats: &mut Stats) {
        let kind = match self.policy {
            RecoveryPolicy::GoBackN => Recovery::GoBackN,
            RecoveryPolicy::Selective => Recovery::Selective,
            RecoveryPolicy::Adaptive if self.window.cwnd() > self.adaptive_threshold => {
                Recovery::Selective
            }
            RecoveryPolicy::Adaptive => Recovery::GoBackN,
        };
        self.mode = Mode::Recovery(kind);
        self.gap_since = None;
        if !self.discriminate {
            self.window.on_loss();
        } else if self.congested() {
            self.cut(stats);
        } else {
            stats.random_loss_episodes += 1;
        }
        stats.recovery_episodes += 1;
        self.urgent = true;
    }

    /// Whether a loss now is congestion: behind a standing queue
    /// (`queue.rs`), or in slow start behind a train's queue as deep as
    /// the rise that ends slow start (`slowstart.rs`; a shallower one is a
    /// train's own, and a random loss within it no congestion). Slow start's
    /// paced trains (`slowstart.rs`) fill the queue in a quarter of each
    /// round trip and leave it empty for the rest, so no queue *stands*
    /// through half a round trip even while the trains overflow it: at
    /// 1 Gbit/s and 200 ms the 4,900 packets slow start lost were taken
    /// for random loss, and the window went on growing into the queue.
    fn congested(&self) -> bool {
        self.queue.congested()
            || (self.window.before_avoidance()
                && self
                    .queue
                    .delay()
                    .is_some_and(|d| d >= slowstart::threshold(self.path_rtt)))
    }

    /// Congestion: halve the window, at most once per window of packets
    /// (those already in flight were sent before the sender heard of it).
    fn cut(&mut self, stats: &mut Stats) {
        if self.cutting() {
            return;
        }
        // Packets up to a window past the newest left before the sender
        // heard: the window before the cut, not after (half as far, a
        // second cut for the same overflow).
        self.cut_until = Some(self.highest.wrapping_add(self.window.cwnd()));
        let pipe = self.path_rtt.and_then(|r| self.queue.pipe(r));
        // The rate was the bottleneck's if a queue stood — or, past slow
        // start, if the loss came behind a queue as deep as slow start's
        // exit. A queue a sixteenth of the path (strata wanem's 12 ms at
        // 1 Gbit/s and 200 ms) fills and drains within each round trip of a
        // window sent by bursts, so it never stands through half of one;
        // the pipe was then taken for no measure of the path, the window
        // grew by an eighth per round trip past it and overflowed the
        // queue every second or two. (In slow start the rate is still
        // growing: its pipe measures the flow, not the path.)
        let deep = !self.window.before_avoidance()
            && self
                .queue
                .delay()
                .is_some_and(|d| d >= slowstart::threshold(self.path_rtt));
        self.window
            .on_congestion(pipe, self.queue.standing() || deep);
        stats.congestion_cuts += 1;
        self.urgent = true;
    }

    /// Within a window after a congestion cut.
    fn cutting(&self) -> bool {
        self.cut_until
            .is_some_and(|u| (self.highest.wrapping_sub(u) as i32) < 0)
    }

    /// A gap no later packet showed lost (the tail of a burst) is a loss
    /// once it outlived the backstop: recovery begins.
    pub(crate) fn check_gap(&mut self, now: Instant, stats: &mut Stats) {
        if self.mode == Mode::Transfer
            && self
                .gap_since
                .is_some_and(|t| now >= t + self.reorder_window * BACKSTOP)
        {
            self.enter_recovery(stats);
        }
    }

    fn advance(&mut self, end: u64, fin: bool) {
        self.next = self.next.wrapping_add(1);
        self.ooo.shift();
        self.contiguous = self.contiguous.max(end);
        self.unacked += 1;
        // No growth while recovering (Reno), or, discriminating, for a
        // window after a congestion cut: random loss does not stop it (at 1%
        // loss a window of a few hundred packets is in recovery nearly all
        // the time).
        let grow = if self.discriminate {
            !self.cutting()
        } else {
            self.mode == Mode::Transfer
        };
        if grow {
            let roomy = self.discriminate && self.queue.roomy(self.window.cwnd());
            let empty = roomy && !self.queue.standing();
            self.window.on_in_order(roomy, empty);
        }
        if fin {
            self.fin_end = Some(end);
            self.finished = true;
        }
    }

    /// Buffers filled in order, and the last one at the end of the stream.
    fn completed(&mut self) -> Vec<Filled> {
        let mut out = Vec::new();
        while let Some(s) = self.slots.front() {
            let end = s.start + s.buf.len() as u64;
            let full = end <= self.contiguous;
            let last = self.finished && s.start <= self.contiguous;
            if !full && !last {
                break;
            }
            let s = self.slots.pop_front().expect("front checked");
            let len = (self.contiguous.min(end) - s.start) as usize;
            out.push(Filled {
                offset: s.start,
                buf: s.buf,
                len,
            });
            if !full {
                break;
            }
        }
        out
    }

    /// The window granted to the sender, which counts every packet past the
    /// next expected one as in flight: the congestion window plus the
    /// packets held out of order past a hole (they have left the network).
    /// Without them, one lost packet stalls the sender for the round trip
    /// its retransmission takes — at 1% loss, most of the time.
    fn granted(&self) -> u32 {
        let held = if self.discriminate {
            self.ooo.len() as u32
        } else {
            0
        };
        self.window
            .cwnd()
            .saturating_add(held)
            .min(self.window.max())
    }

    /// The gaps to request, as distances from the next expected packet
    /// `[first, end)`: the first hole (it holds the stream back), then up to
    /// [`MAX_GAPS`] − 1 more from where the last request stopped, going
    /// round to the start past the last. A request of the first
    /// [`MAX_GAPS`] holes every time asked for 63 packets per round trip
    /// whatever was lost (the sender answers a request once per round
    /// trip): a slow start overflowing a 1.5 MB queue at 1 Gbit/s and
    /// 100 ms lost 3,113 packets, recovered over 1.4 s, while the window
    /// held open by the packets past the holes overflowed the queue again.
    fn gaps(&mut self) -> Vec<(u32, u32)> {
        let mut all = Vec::new();
        let mut expect = 0u32;
        for a in self.ooo.aheads() {
            if a != expect {
                all.push((expect, a));
            }
            expect = a + 1;
        }
        let Some(&first) = all.first() else {
            return all;
        };
        let from = self.ask_from.wrapping_sub(self.next);
        let from = if from >= 0x8000_0000 { 0 } else { from };
        // The sweep: holes ending past the cursor, then from the start.
        let at = all.partition_point(|&(_, e)| e <= from).max(1);
        let mut out = vec![first];
        let rest = all.len() - 1;
        for k in 0..rest.min(MAX_GAPS - 1) {
            out.push(all[1 + (at - 1 + k) % rest]);
        }
        let last = out.last().map_or(0, |&(_, e)| e);
        self.ask_from = self.next.wrapping_add(last);
        out
    }

    /// Whether a control packet is owed now.
    pub(crate) fn ack_due(&self, now: Instant) -> bool {
        self.urgent || self.ack_at.is_some_and(|t| now >= t)
    }

    /// The control packet describing this receiver's state, addressed to
    /// the peer's connection id `to`; counts it as an ACK or a NAK.
    pub(crate) fn control(&mut self, to: u64, stats: &mut Stats) -> ControlRepr {
        self.urgent = false;
        self.ack_at = None;
        self.unacked = 0;
        self.serial = self.serial.wrapping_add(1);
        let recovery = match self.mode {
            Mode::Transfer => Recovery::None,
            Mode::Recovery(k) => k,
        };
        let gaps = if recovery == Recovery::Selective {
            self.gaps()
                .into_iter()
                .map(|(a, b)| {
                    let base = self.next.wrapping_add(self.isn);
                    (base.wrapping_add(a), base.wrapping_add(b))
                })
                .collect()
        } else {
            Vec::new()
        };
        match recovery {
            Recovery::None => stats.acks_sent += 1,
            Recovery::GoBackN => stats.go_back_n_sent += 1,
            Recovery::Selective => stats.selective_sent += 1,
        }
        ControlRepr {
            to,
            flags: if self.finished { flags::FIN_SEEN } else { 0 }
                | if self.window.in_slow_start() {
                    flags::SLOW_START
                } else {
                    0
                },
            next_expected: self.next.wrapping_add(self.isn),
            ts_echo: self.ts_recent,
            cwnd: self.granted(),
            recovery,
            serial: self.serial,
            limit: self.limit(),
            gaps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn receiver() -> Receiver {
        Receiver::new(
            100,
            RecoveryPolicy::Selective,
            8,
            MSS,
            Window::new(64, 1024, false),
            Duration::from_millis(1),
            true,
        )
    }

    fn data(rel: u32, offset: u64, len: u32) -> DataRepr {
        DataRepr {
            to: 1,
            flags: 0,
            seq: 100 + rel,
            tsval: 0,
            offset: offset as u32,
            len,
        }
    }

    fn offsets(r: &mut Receiver, lane: u32, lanes: u32) -> Vec<(u64, usize)> {
        r.targets(lane, lanes, 16)
            .into_iter()
            .map(|(o, b)| (o, b.len()))
            .collect()
    }

    #[test]
    fn successive_requests_cover_every_gap_and_always_the_first() {
        let mut r = receiver();
        r.post(vec![0; 1000 * 1000]);
        let now = Instant::now();
        let mut stats = Stats::default();
        // Every other packet of 400 lost: 200 holes, more than three
        // control packets' worth.
        for rel in (1..400).step_by(2) {
            let d = data(rel, u64::from(rel) * 1000, MSS);
            let _ = r.on_data(now, &d, Some(&[1; 1000]), 1, Duration::ZERO, &mut stats);
        }
        r.check_gap(now + Duration::from_secs(1), &mut stats);
        let mut asked = std::collections::BTreeSet::new();
        for _ in 0..4 {
            let c = r.control(1, &mut stats);
            assert_eq!(c.recovery, Recovery::Selective);
            assert_eq!(c.gaps.len(), MAX_GAPS);
            assert_eq!(c.gaps[0], (100, 101), "the first hole every time");
            asked.extend(c.gaps.iter().map(|&(a, _)| a - 100));
        }
        assert_eq!(asked.len(), 200, "every hole asked within four packets");
        assert!(asked.iter().all(|a| a % 2 == 0));
    }

    #[test]
    fn each_socket_is_expected_its_own_packets_in_free_space() {
        let mut r = receiver();
        r.post(vec![0; 8000]);
        let whole = MSS as usize;
        assert_eq!(
            offsets(&mut r, 0, 2),
            vec![(0, whole), (2000, whole), (4000, whole), (6000, whole)]
        );
        assert_eq!(offsets(&mut r, 1, 2)[..2], [(1000, whole), (3000, whole)]);
        // Socket 1's packet 1 arrives first: held past the hole at 0.
        let now = Instant::now();
        let mut stats = Stats::default();
        let d = data(1, 1000, MSS);
        r.on_data(now, &d, Some(&[7; 1000]), 2, Duration::ZERO, &mut stats)
            .unwrap();
        // Socket 0 still expects the hole, then the space past packet 1;
        // socket 1 expects packet 3 next, never the bytes held.
        assert_eq!(offsets(&mut r, 0, 2)[..2], [(0, whole), (2000, whole)]);
        assert_eq!(offsets(&mut r, 1, 2)[0], (3000, whole));
    }

    #[test]
    fn a_placed_packet_is_taken_without_a_copy_and_stretches_stop_at_a_buffer_end() {
        let mut r = receiver();
        r.post(vec![0; 2500]);
        assert_eq!(
            offsets(&mut r, 0, 1),
            vec![(0, 1000), (1000, 1000), (2000, 500)]
        );
        // The driver receives the first packet into its place.
        let mut places = r.targets(0, 1, 16);
        places[0].1.fill(9);
        places[1].1.fill(5); // landed there, but its header is another's
        drop(places);
        let now = Instant::now();
        let mut stats = Stats::default();
        let d = data(0, 0, MSS);
        r.on_data(now, &d, None, 1, Duration::ZERO, &mut stats)
            .unwrap();
        assert_eq!(r.delivered(), 1000);
        assert_eq!(r.posted(0, 1000), Some(&[9u8; 1000][..]));
        // The packet that landed wrongly is copied to its place by the driver.
        let d = data(1, 1000, MSS);
        r.on_data(now, &d, Some(&[3; 1000]), 1, Duration::ZERO, &mut stats)
            .unwrap();
        let d = data(2, 2000, 500);
        let mut fin = d;
        fin.flags = flags::FIN;
        let filled = r
            .on_data(now, &fin, Some(&[4; 500]), 1, Duration::ZERO, &mut stats)
            .unwrap();
        assert_eq!(filled.len(), 1);
        let buf = &filled[0].buf;
        assert!(buf[..1000].iter().all(|&b| b == 9));
        assert!(buf[1000..2000].iter().all(|&b| b == 3));
        assert!(buf[2000..].iter().all(|&b| b == 4));
        assert!(r.targets(0, 1, 16).is_empty());
    }
}
