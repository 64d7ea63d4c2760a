//! The native STREAMS subsystem: a stream from its head through pushed
//! modules to a device end, with the service scheduler, flow control,
//! timeouts on a virtual clock, and the head's handling of `M_FLUSH`,
//! `M_ERROR` and `M_HANGUP`.
//!
//! Processing mixes vertical and horizontal (seed 004 §4.1.3): a put
//! procedure may pass a message straight on (`putnext`, a direct call) or
//! queue it (`putq`) for its service procedure, which the scheduler runs
//! later ([`Stream::run_queues`]). Errors travel as messages.
//!
//! Each module runs inside its own perimeter, as in Solaris's MT STREAMS: a
//! put into a module that is already running — a reply turned around
//! inside the stream — waits on the module's list and runs the moment the
//! module leaves its procedure.

use std::collections::VecDeque;
use std::time::Duration;

use crate::errno::Errno;

use super::kernel::{HZ, ModuleInfo, Side, StreamsKernel, StreamsModule};
use super::mblk::{DblkPool, FLUSHR, FLUSHW, Mblk, MsgType, allocb, mkmsg};
use super::queue::Queue;
use super::tpi::Tpi;

/// A module as the native subsystem holds it.
pub type NativeModule = Box<dyn StreamsModule<Stream>>;

/// The most puts held for one busy module.
pub const PENDING_MAX: usize = 1024;
/// The most pending timeouts on a stream.
pub const CALLOUT_MAX: usize = 4096;
/// The most service procedure runs one `run_queues` makes (a module that
/// keeps re-enabling itself cannot spin the scheduler for ever).
pub const RUNS_MAX: usize = 1 << 20;

/// The stream head's and device end's queue limits.
pub const HEAD_INFO: ModuleInfo = ModuleInfo {
    hiwat: 16384,
    lowat: 2048,
};

/// A stream's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Puts held on a busy module and run when it left.
    pub deferred_puts: u64,
    /// Puts dropped: the busy module's list was full.
    pub deferred_drops: u64,
    /// Service procedure runs.
    pub service_runs: u64,
    /// Frames from the device dropped: the bottom module could not take them.
    pub device_in_drops: u64,
    /// Messages the device end dropped (types a device does not send).
    pub device_drops: u64,
    /// `M_FLUSH` messages that reached the head.
    pub head_flushes: u64,
    /// Times the head's writers were back-enabled.
    pub head_wakeups: u64,
    /// Timeouts dropped: the callout table was full.
    pub callout_drops: u64,
}

struct Callout {
    due: u64,
    module: u32,
    id: u32,
}

/// A stream (the native STREAMS subsystem).
pub struct Stream {
    ids: Vec<u32>,
    mods: Vec<Option<NativeModule>>,
    has_srv: Vec<[bool; 2]>,
    queues: Vec<[Queue; 2]>,
    pending: Vec<VecDeque<(Side, Mblk)>>,
    cur: usize,
    next_id: u32,
    runq: VecDeque<(u32, Side)>,
    callouts: Vec<Callout>,
    now: Duration,
    dblks: DblkPool,
    error: Option<Errno>,
    hangup: bool,
    stopped: bool,
    /// `SO_WROFF`: headroom left in front of the data `putmsg` writes.
    wroff: usize,
    /// The stream's counters.
    pub stats: StreamStats,
}

const HEAD_ID: u32 = 0;
const DEVICE_ID: u32 = u32::MAX;

impl Stream {
    /// A stream with just a head and a device end (`open` of a clone
    /// device), allocating from `dblks`.
    pub fn open(dblks: DblkPool) -> Stream {
        Stream {
            ids: vec![HEAD_ID, DEVICE_ID],
            mods: vec![None, None],
            has_srv: vec![[false; 2], [false; 2]],
            queues: vec![
                [Queue::new(HEAD_INFO), Queue::new(HEAD_INFO)],
                [Queue::new(HEAD_INFO), Queue::new(HEAD_INFO)],
            ],
            pending: vec![VecDeque::new(), VecDeque::new()],
            cur: 0,
            next_id: 1,
            runq: VecDeque::new(),
            callouts: Vec::new(),
            now: Duration::ZERO,
            dblks,
            error: None,
            hangup: false,
            stopped: false,
            wroff: 0,
            stats: StreamStats::default(),
        }
    }

    fn device(&self) -> usize {
        self.ids.len() - 1
    }

    fn pos_of(&self, id: u32) -> Option<usize> {
        self.ids.iter().position(|&i| i == id)
    }

    /// `I_PUSH`: push `module` just below the head and run its open routine.
    pub fn push(&mut self, module: NativeModule) -> Result<(), Errno> {
        let info = module.info();
        let srv = [module.has_srv(Side::Read), module.has_srv(Side::Write)];
        let id = self.next_id;
        self.next_id += 1;
        self.ids.insert(1, id);
        self.mods.insert(1, Some(module));
        self.has_srv.insert(1, srv);
        self.queues.insert(1, [Queue::new(info), Queue::new(info)]);
        self.pending.insert(1, VecDeque::new());
        let r = self.run_at(1, |m, k| m.open(k)).unwrap_or(Err(Errno::Eio));
        if r.is_err() {
            self.remove(1);
        }
        r
    }

    /// `I_POP`: run the top module's close routine and remove it.
    pub fn pop(&mut self) -> Result<(), Errno> {
        if self.device() == 1 {
            return Err(Errno::Einval);
        }
        self.run_at(1, |m, k| m.close(k));
        self.remove(1);
        Ok(())
    }

    fn remove(&mut self, pos: usize) {
        let id = self.ids.remove(pos);
        self.mods.remove(pos);
        self.has_srv.remove(pos);
        self.queues.remove(pos);
        self.pending.remove(pos);
        self.callouts.retain(|c| c.module != id);
        self.runq.retain(|&(i, _)| i != id);
    }

    /// The names of the pushed modules, top first.
    pub fn modules(&self) -> Vec<&'static str> {
        self.mods.iter().flatten().map(|m| m.name()).collect()
    }

    /// The counters of the module named `name` (empty while it runs).
    pub fn counters(&self, name: &str) -> Vec<(&'static str, u64)> {
        self.mods
            .iter()
            .flatten()
            .find(|m| m.name() == name)
            .map(|m| m.counters())
            .unwrap_or_default()
    }

    /// The queue pair of the module named `name` (for tests and counters).
    pub fn queue_of(&self, name: &str, side: Side) -> Option<&Queue> {
        let pos = self
            .mods
            .iter()
            .position(|m| m.as_ref().is_some_and(|m| m.name() == name))?;
        Some(&self.queues[pos][side.index()])
    }

    /// The head's read queue (messages waiting for the user).
    pub fn head_queue(&self) -> &Queue {
        &self.queues[0][Side::Read.index()]
    }

    /// The device end's write queue (messages waiting for the wire).
    pub fn device_queue(&self) -> &Queue {
        &self.queues[self.device()][Side::Write.index()]
    }

    /// Run `f` on the module at `pos` inside its perimeter, then the puts
    /// that waited for it. `None`: it is busy (or not a module).
    fn run_at<R>(
        &mut self,
        pos: usize,
        f: impl FnOnce(&mut dyn StreamsModule<Stream>, &mut Stream) -> R,
    ) -> Option<R> {
        let mut m = self.mods.get_mut(pos)?.take()?;
        let saved = std::mem::replace(&mut self.cur, pos);
        let r = f(m.as_mut(), self);
        self.cur = saved;
        self.mods[pos] = Some(m);
        self.drain_pending(pos);
        Some(r)
    }

    fn drain_pending(&mut self, pos: usize) {
        while let Some((side, mp)) = self.pending[pos].pop_front() {
            let Some(mut m) = self.mods[pos].take() else {
                return;
            };
            let saved = std::mem::replace(&mut self.cur, pos);
            m.put(self, side, mp);
            self.cur = saved;
            self.mods[pos] = Some(m);
        }
    }

    /// Deliver `mp` to the put procedure of `side` at `pos`.
    fn put_at(&mut self, pos: usize, side: Side, mp: Mblk) {
        if pos == 0 {
            return self.head_put(mp);
        }
        if pos == self.device() {
            return self.device_put(side, mp);
        }
        if self.mods[pos].is_none() {
            if self.pending[pos].len() >= PENDING_MAX {
                self.stats.deferred_drops += 1;
                return;
            }
            self.stats.deferred_puts += 1;
            self.pending[pos].push_back((side, mp));
            return;
        }
        self.run_at(pos, |m, k| m.put(k, side, mp));
    }

    fn next_pos(&self, pos: usize, side: Side) -> Option<usize> {
        match side {
            Side::Write if pos < self.device() => Some(pos + 1),
            Side::Read if pos > 0 => Some(pos - 1),
            _ => None,
        }
    }

    /// Whether the queue at `pos` takes part in flow control: it has a
    /// service procedure, or it is the head's or the device's queue.
    fn flow_controlled(&self, pos: usize, side: Side) -> bool {
        pos == 0 || pos == self.device() || self.has_srv[pos][side.index()]
    }

    /// `canput` from `pos` onward in `side`'s direction.
    fn canput_from(&mut self, mut pos: usize, side: Side) -> bool {
        loop {
            if self.flow_controlled(pos, side) {
                let q = &mut self.queues[pos][side.index()];
                if q.full {
                    q.wantw = true;
                    return false;
                }
                return true;
            }
            match self.next_pos(pos, side) {
                Some(p) => pos = p,
                None => return true,
            }
        }
    }

    /// Back-enable the nearest flow-controlled queue behind `pos`.
    fn backenable(&mut self, pos: usize, side: Side) {
        let mut p = pos;
        loop {
            let behind = match side {
                Side::Write if p > 0 => p - 1,
                Side::Read if p < self.device() => p + 1,
                _ => return,
            };
            if behind == 0 {
                self.stats.head_wakeups += 1;
                return;
            }
            if behind == self.device() {
                return;
            }
            if self.has_srv[behind][side.index()] {
                return self.enable(behind, side);
            }
            p = behind;
        }
    }

    fn enable(&mut self, pos: usize, side: Side) {
        if pos == 0 || pos == self.device() || !self.has_srv[pos][side.index()] {
            return;
        }
        let q = &mut self.queues[pos][side.index()];
        if !q.enabled {
            q.enabled = true;
            self.runq.push_back((self.ids[pos], side));
        }
    }

    /// The service scheduler: run enabled service procedures until none is.
    pub fn run_queues(&mut self) {
        let mut runs = 0;
        while let Some((id, side)) = self.runq.pop_front() {
            let Some(pos) = self.pos_of(id) else { continue };
            self.queues[pos][side.index()].enabled = false;
            if self.mods[pos].is_none() {
                // Running: try again once it has left.
                self.enable(pos, side);
                continue;
            }
            self.stats.service_runs += 1;
            self.run_at(pos, |m, k| m.srv(k, side));
            runs += 1;
            if runs >= RUNS_MAX {
                return;
            }
        }
    }

    /// The virtual clock.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Advance the clock to `now`, firing due timeouts in time order and
    /// running the scheduler after each.
    pub fn advance_to(&mut self, now: Duration) {
        self.run_queues();
        let until = (now.as_millis() as u64) * HZ / 1000;
        while let Some(i) = (0..self.callouts.len())
            .filter(|&i| self.callouts[i].due <= until)
            .min_by_key(|&i| self.callouts[i].due)
        {
            let c = self.callouts.swap_remove(i);
            self.now = self.now.max(Duration::from_millis(c.due * 1000 / HZ));
            if let Some(pos) = self.pos_of(c.module) {
                self.run_at(pos, |m, k| m.timeout(k, c.id));
            }
            self.run_queues();
        }
        self.now = self.now.max(now);
    }

    fn head_put(&mut self, mp: Mblk) {
        match mp.mtype {
            MsgType::Flush => {
                self.stats.head_flushes += 1;
                let flag = mp.data().first().copied().unwrap_or(0);
                if flag & FLUSHR != 0 {
                    self.queues[0][0].flush(false);
                }
                if flag & FLUSHW != 0 {
                    // Turn it around down the write side, read bit cleared.
                    if let Ok(m) = mkmsg(&self.dblks, MsgType::Flush, &[FLUSHW]) {
                        self.put_at(1, Side::Write, m);
                    }
                }
            }
            MsgType::Error => {
                let n = mp.data().first().copied().unwrap_or(5);
                self.error = Some(Errno::from_number(u32::from(n)).unwrap_or(Errno::Eio));
            }
            MsgType::Hangup => self.hangup = true,
            MsgType::Start | MsgType::Stop => {}
            MsgType::Setopts => {
                if let [hi, lo, ..] = mp.data() {
                    self.wroff = usize::from(u16::from_be_bytes([*hi, *lo]));
                }
            }
            _ => self.queues[0][0].put(mp),
        }
    }

    fn device_put(&mut self, side: Side, mp: Mblk) {
        let dev = self.device();
        if side == Side::Read {
            // A module below nothing sent upward past the device: not possible.
            self.stats.device_drops += 1;
            return;
        }
        match mp.mtype {
            MsgType::Flush => {
                let flag = mp.data().first().copied().unwrap_or(0);
                if flag & FLUSHW != 0 && self.queues[dev][1].flush(false) {
                    self.backenable(dev, Side::Write);
                }
                let up = if flag & FLUSHR != 0 {
                    mkmsg(&self.dblks, MsgType::Flush, &[FLUSHR]).ok()
                } else {
                    None
                };
                if let Some(m) = up {
                    self.put_at(dev - 1, Side::Read, m);
                }
            }
            MsgType::Stop => self.stopped = true,
            MsgType::Start => self.stopped = false,
            MsgType::Data | MsgType::Proto => self.queues[dev][1].put(mp),
            _ => self.stats.device_drops += 1,
        }
    }

    /// The device takes the next message to send; `None` when nothing is
    /// queued or output was stopped by `M_STOP`.
    pub fn device_output(&mut self) -> Option<Mblk> {
        if self.stopped {
            return None;
        }
        let dev = self.device();
        let (mp, back) = self.queues[dev][1].get()?;
        if back {
            self.backenable(dev, Side::Write);
            self.run_queues();
        }
        Some(mp)
    }

    /// The device received `mp`: hand it to the bottom module's read put
    /// procedure, or drop it (counted) when that side is flow-controlled full.
    pub fn device_input(&mut self, mp: Mblk) {
        let dev = self.device();
        if !mp.mtype.is_priority() && !self.canput_from(dev - 1, Side::Read) {
            self.stats.device_in_drops += 1;
            return;
        }
        self.put_at(dev - 1, Side::Read, mp);
        self.run_queues();
    }

    /// `putmsg`: send a TPI primitive and/or data down the stream. Refused
    /// at once when the stream has an error or hung up, or (`EWOULDBLOCK`)
    /// when the write side is full.
    pub fn putmsg(&mut self, ctl: Option<&Tpi>, data: Option<&[u8]>) -> Result<(), Errno> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.hangup {
            return Err(Errno::Eio);
        }
        let mut mp = match (ctl, data) {
            (Some(t), _) => t.to_msg(&self.dblks)?,
            (None, Some(d)) => self.data_msg(d)?,
            (None, None) => return Err(Errno::Einval),
        };
        if let (Some(_), Some(d)) = (ctl, data) {
            mp.linkb(self.data_msg(d)?);
        }
        self.putmsg_mblk(mp)
    }

    /// The user's data as an `M_DATA` block, `SO_WROFF` bytes of headroom
    /// in front of it.
    fn data_msg(&self, d: &[u8]) -> Result<Mblk, Errno> {
        if self.wroff == 0 {
            return mkmsg(&self.dblks, MsgType::Data, d);
        }
        let mut mp = allocb(&self.dblks, self.wroff + d.len())?;
        mp.reserve_head(self.wroff);
        mp.put_bytes(d);
        Ok(mp)
    }

    /// `putmsg` of a message already built (a kernel caller's, whose data
    /// blocks may share storage with its own buffers).
    pub fn putmsg_mblk(&mut self, mp: Mblk) -> Result<(), Errno> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.hangup {
            return Err(Errno::Eio);
        }
        if !mp.mtype.is_priority() && !self.canput_from(1, Side::Write) {
            return Err(Errno::Ewouldblock);
        }
        self.put_at(1, Side::Write, mp);
        self.run_queues();
        Ok(())
    }

    /// The data block pool the stream allocates from.
    pub fn dblks(&self) -> &DblkPool {
        &self.dblks
    }

    /// `getmsg`: the next message at the head, or the latched error.
    pub fn getmsg(&mut self) -> Result<Option<Mblk>, Errno> {
        match self.queues[0][0].get() {
            Some((mp, back)) => {
                if back {
                    self.backenable(0, Side::Read);
                    self.run_queues();
                }
                Ok(Some(mp))
            }
            None => match self.error {
                Some(e) => Err(e),
                None if self.hangup => Err(Errno::Eio),
                None => Ok(None),
            },
        }
    }

    /// `I_FLUSH`: flush the head's queues as `flag` says and send `M_FLUSH`
    /// down so every module and the device flush theirs.
    pub fn flush(&mut self, flag: u8) -> Result<(), Errno> {
        if flag & FLUSHR != 0 {
            self.queues[0][0].flush(false);
        }
        let mp = mkmsg(&self.dblks, MsgType::Flush, &[flag])?;
        self.put_at(1, Side::Write, mp);
        self.run_queues();
        Ok(())
    }

    /// Whether output is stopped (`M_STOP` reached the device end).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The error latched by `M_ERROR`, if any.
    pub fn error(&self) -> Option<Errno> {
        self.error
    }

    /// Whether `M_HANGUP` reached the head.
    pub fn hung_up(&self) -> bool {
        self.hangup
    }
}

impl StreamsKernel for Stream {
    fn dblks(&self) -> &DblkPool {
        &self.dblks
    }

    fn lbolt(&self) -> u64 {
        (self.now.as_millis() as u64) * HZ / 1000
    }

    fn putnext(&mut self, side: Side, mp: Mblk) {
        if let Some(p) = self.next_pos(self.cur, side) {
            self.put_at(p, side, mp);
        }
    }

    fn putq(&mut self, side: Side, mp: Mblk) {
        let pos = self.cur;
        self.queues[pos][side.index()].put(mp);
        self.enable(pos, side);
    }

    fn putbq(&mut self, side: Side, mp: Mblk) {
        let pos = self.cur;
        self.queues[pos][side.index()].put_back(mp);
    }

    fn getq(&mut self, side: Side) -> Option<Mblk> {
        let pos = self.cur;
        let (mp, back) = self.queues[pos][side.index()].get()?;
        if back {
            self.backenable(pos, side);
        }
        Some(mp)
    }

    fn canputnext(&mut self, side: Side) -> bool {
        match self.next_pos(self.cur, side) {
            Some(p) => self.canput_from(p, side),
            None => true,
        }
    }

    fn flushq(&mut self, side: Side, all: bool) {
        let pos = self.cur;
        if self.queues[pos][side.index()].flush(all) {
            self.backenable(pos, side);
        }
    }

    fn qenable(&mut self, side: Side) {
        self.enable(self.cur, side);
    }

    fn qcount(&self, side: Side) -> usize {
        self.queues[self.cur][side.index()].q_count
    }

    fn timeout(&mut self, ticks: u64, id: u32) {
        if self.callouts.len() >= CALLOUT_MAX {
            self.stats.callout_drops += 1;
            return;
        }
        let due = self.lbolt() + ticks.max(1);
        self.callouts.push(Callout {
            due,
            module: self.ids[self.cur],
            id,
        });
    }

    fn untimeout(&mut self, id: u32) {
        let module = self.ids[self.cur];
        self.callouts
            .retain(|c| !(c.module == module && c.id == id));
    }
}
