//! The engine's timer queue: one queue for every protocol and application timer.
//! A binary heap ordered by deadline with lazy cancellation: a cancelled timer's
//! slot changes generation, and its stale heap entry is skipped when it surfaces.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ids::{AppId, ProtoId, TimerId};
use crate::time::Instant;

/// Who a timer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    Proto(ProtoId),
    App(AppId),
}

struct Slot {
    generation: u32,
    armed: Option<(Owner, u64)>,
}

#[derive(Default)]
pub(crate) struct Timers {
    /// (deadline, sequence for FIFO among equal deadlines, slot, generation)
    heap: BinaryHeap<Reverse<(Instant, u64, u32, u32)>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    seq: u64,
}

impl Timers {
    pub fn set(&mut self, at: Instant, owner: Owner, token: u64) -> TimerId {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    armed: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        // Cancelled timers stay in the heap until they surface. A connection
        // re-arms its timers for every segment, so prune them once they
        // outnumber the armed ones: in place, and the heap then stops growing.
        if self.heap.len() >= 2 * self.len() + 64 {
            let slots = &self.slots;
            self.heap.retain(|&Reverse((_, _, slot, generation))| {
                let s = &slots[slot as usize];
                s.generation == generation && s.armed.is_some()
            });
        }
        let s = &mut self.slots[slot as usize];
        s.armed = Some((owner, token));
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, slot, s.generation)));
        TimerId {
            slot,
            generation: s.generation,
        }
    }

    pub fn cancel(&mut self, id: TimerId) {
        if let Some(s) = self.slots.get_mut(id.slot as usize)
            && s.generation == id.generation
            && s.armed.is_some()
        {
            self.release(id.slot);
        }
    }

    fn release(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.armed = None;
        s.generation = s.generation.wrapping_add(1);
        self.free.push(slot);
    }

    fn is_live(&self, slot: u32, generation: u32) -> bool {
        let s = &self.slots[slot as usize];
        s.generation == generation && s.armed.is_some()
    }

    /// Drops cancelled entries from the top of the heap.
    fn skip_stale(&mut self) {
        while let Some(&Reverse((_, _, slot, generation))) = self.heap.peek() {
            if self.is_live(slot, generation) {
                break;
            }
            self.heap.pop();
        }
    }

    /// The earliest live deadline.
    /// True when no entry of the heap, live or stale, is due at `now`: then
    /// [`pop_due`](Self::pop_due) would find nothing (a stale entry's
    /// deadline is no later than the live ones beneath it).
    #[inline]
    pub fn none_due(&self, now: Instant) -> bool {
        self.heap.peek().is_none_or(|Reverse((at, ..))| *at > now)
    }

    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.skip_stale();
        self.heap.peek().map(|Reverse((at, ..))| *at)
    }

    /// Takes the next timer due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Owner, u64)> {
        self.skip_stale();
        let &Reverse((at, _, slot, _)) = self.heap.peek()?;
        if at > now {
            return None;
        }
        self.heap.pop();
        let fired = self.slots[slot as usize].armed;
        self.release(slot);
        fired
    }

    /// How many timers are armed.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_deadline_order_and_cancelled_ones_never_fire() {
        let mut t = Timers::default();
        let owner = Owner::Proto(ProtoId(0));
        t.set(Instant::from_nanos(30), owner, 3);
        let cancelled = t.set(Instant::from_nanos(10), owner, 1);
        t.set(Instant::from_nanos(20), owner, 2);
        t.cancel(cancelled);
        assert_eq!(t.next_deadline(), Some(Instant::from_nanos(20)));
        assert_eq!(t.pop_due(Instant::from_nanos(25)), Some((owner, 2)));
        assert_eq!(t.pop_due(Instant::from_nanos(25)), None);
        assert_eq!(t.pop_due(Instant::from_nanos(30)), Some((owner, 3)));
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn re_arming_again_and_again_keeps_the_heap_small() {
        let mut t = Timers::default();
        let owner = Owner::Proto(ProtoId(0));
        let mut id = t.set(Instant::from_nanos(1_000), owner, 0);
        for i in 1..10_000u64 {
            t.cancel(id);
            id = t.set(Instant::from_nanos(1_000 + i), owner, i);
        }
        assert_eq!(t.len(), 1);
        assert!(t.heap.len() <= 66, "{} entries", t.heap.len());
        assert_eq!(t.pop_due(Instant::from_nanos(20_000)), Some((owner, 9_999)));
    }

    #[test]
    fn cancelling_a_reused_slot_with_an_old_handle_does_nothing() {
        let mut t = Timers::default();
        let owner = Owner::App(AppId(1));
        let old = t.set(Instant::from_nanos(5), owner, 1);
        assert!(t.pop_due(Instant::from_nanos(5)).is_some());
        t.set(Instant::from_nanos(6), owner, 2);
        t.cancel(old);
        assert_eq!(t.pop_due(Instant::from_nanos(6)), Some((owner, 2)));
    }
}
