//! A STREAMS queue (`queue_t`): messages waiting for a service procedure,
//! counted against high and low water marks.

use std::collections::VecDeque;

use super::kernel::ModuleInfo;
use super::mblk::Mblk;

/// A queue and its flow-control state.
#[derive(Debug)]
pub struct Queue {
    msgs: VecDeque<Mblk>,
    /// `q_count`: bytes of normal-priority messages queued.
    pub q_count: usize,
    /// `q_hiwat`.
    pub q_hiwat: usize,
    /// `q_lowat`.
    pub q_lowat: usize,
    /// `QFULL`: `q_count` reached `q_hiwat`; cleared below `q_lowat`.
    pub full: bool,
    /// `QWANTW`: a writer found the queue full and waits to be back-enabled.
    pub wantw: bool,
    /// `QENAB`: the service procedure is scheduled.
    pub enabled: bool,
    /// The largest `q_count` this queue has held.
    pub peak: usize,
}

impl Queue {
    /// An empty queue with `info`'s water marks.
    pub fn new(info: ModuleInfo) -> Queue {
        Queue {
            msgs: VecDeque::new(),
            q_count: 0,
            q_hiwat: info.hiwat,
            q_lowat: info.lowat,
            full: false,
            wantw: false,
            enabled: false,
            peak: 0,
        }
    }

    fn charge(&mut self, mp: &Mblk) {
        if !mp.mtype.is_priority() {
            self.q_count += mp.msgsize();
            self.peak = self.peak.max(self.q_count);
            if self.q_count >= self.q_hiwat {
                self.full = true;
            }
        }
    }

    /// `putq`'s queueing: high-priority messages go after the other
    /// high-priority ones and ahead of all normal ones.
    pub fn put(&mut self, mp: Mblk) {
        self.charge(&mp);
        if mp.mtype.is_priority() {
            let at = self
                .msgs
                .iter()
                .position(|m| !m.mtype.is_priority())
                .unwrap_or(self.msgs.len());
            self.msgs.insert(at, mp);
        } else {
            self.msgs.push_back(mp);
        }
    }

    /// `putbq`'s queueing: back at the front.
    pub fn put_back(&mut self, mp: Mblk) {
        self.charge(&mp);
        self.msgs.push_front(mp);
    }

    /// `getq`'s dequeueing; `true` with the message when the queue just
    /// fell below its low water mark with a writer waiting (back-enable).
    pub fn get(&mut self) -> Option<(Mblk, bool)> {
        let mp = self.msgs.pop_front()?;
        if !mp.mtype.is_priority() {
            self.q_count -= mp.msgsize();
        }
        let mut backenable = false;
        if self.q_count < self.q_lowat || self.q_count == 0 {
            self.full = false;
            if self.wantw {
                self.wantw = false;
                backenable = true;
            }
        }
        Some((mp, backenable))
    }

    /// `flushq`: drop normal messages (all of them when `all`); `true` when
    /// a waiting writer should be back-enabled.
    pub fn flush(&mut self, all: bool) -> bool {
        self.msgs.retain(|m| !all && m.mtype.is_priority());
        self.q_count = 0;
        self.full = false;
        std::mem::take(&mut self.wantw)
    }

    /// Messages queued.
    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }
}
