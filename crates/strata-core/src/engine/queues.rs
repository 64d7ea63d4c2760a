//! The engine's bounded packet queues: received frames waiting for processing and
//! frames waiting for their link. Both are ordered by urgency and then by arrival,
//! so best-effort traffic stays first-in first-out while DAA's deadlines and
//! priorities are honoured at both ends (seed 000 §5.5 notes the paper's driver
//! send queue ignored priority; Strata's does not).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::message::Message;
use crate::meta::{PacketMeta, Priority};
use crate::upi::Demux;

struct Entry<T> {
    priority: Priority,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.priority, self.seq) == (other.priority, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    // BinaryHeap is a max-heap: the most urgent (smallest priority, then the
    // earliest sequence) must compare greatest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.priority, other.seq).cmp(&(self.priority, self.seq))
    }
}

/// A bounded queue ordered by priority, then arrival.
///
/// Best-effort items — all traffic without QoS — go to a plain FIFO, since they
/// are the least urgent and equal among themselves; only prioritised items pay
/// for the heap. Popping drains the heap first, so the order is exactly
/// (priority, arrival) either way.
pub(crate) struct UrgencyQueue<T> {
    fifo: VecDeque<T>,
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
    limit: usize,
}

impl<T> UrgencyQueue<T> {
    pub fn new(limit: usize) -> Self {
        UrgencyQueue {
            fifo: VecDeque::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            limit,
        }
    }

    /// Queues `item`; gives it back when the queue is full.
    #[inline]
    pub fn push(&mut self, priority: Priority, item: T) -> Result<(), T> {
        if self.len() >= self.limit {
            return Err(item);
        }
        if priority == Priority::BEST_EFFORT {
            self.fifo.push_back(item);
        } else {
            self.seq += 1;
            self.heap.push(Entry {
                priority,
                seq: self.seq,
                item,
            });
        }
        Ok(())
    }

    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.heap.is_empty() {
            self.fifo.pop_front()
        } else {
            self.heap.pop().map(|e| e.item)
        }
    }

    pub fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty() && self.heap.is_empty()
    }
}

/// A received frame waiting for the engine: two pointers, the frame and
/// what the engine knows of it, so that queueing and taking it move two
/// registers. (A wider frame record is built on the stack and copied with
/// wide loads of fields just stored narrow, which the processor cannot
/// forward from its store buffer: such a copy stalls for tens of cycles, and
/// on this path it cost more than the work around it.)
pub(crate) struct RxFrame {
    pub msg: Message,
    pub arrival: Box<Arrival>,
}

/// A received frame's metadata (its link and arrival time; under DAA also
/// what the lowest layer's demux found) and, under DAA, that demux itself,
/// done when the frame arrived so that frames are processed in
/// deadline/priority order. The metadata it filled (the path, the sender's
/// identifier, the priority, the lowest layer's record) is the packet's own
/// from then on, so the lowest layer's pop need not read its header again.
pub(crate) struct Arrival {
    pub meta: PacketMeta,
    pub early: Option<Demux>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urgent_items_overtake_and_equals_stay_in_order() {
        let mut q = UrgencyQueue::new(8);
        q.push(Priority::BEST_EFFORT, "bulk-1").unwrap();
        q.push(Priority::BEST_EFFORT, "bulk-2").unwrap();
        q.push(Priority(5), "urgent").unwrap();
        q.push(Priority::BEST_EFFORT, "bulk-3").unwrap();
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["urgent", "bulk-1", "bulk-2", "bulk-3"]);
    }

    #[test]
    fn equal_priorities_in_the_heap_keep_their_arrival_order() {
        let mut q = UrgencyQueue::new(8);
        q.push(Priority(3), "a").unwrap();
        q.push(Priority(1), "urgent").unwrap();
        q.push(Priority(3), "b").unwrap();
        q.push(Priority::BEST_EFFORT, "bulk").unwrap();
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["urgent", "a", "b", "bulk"]);
    }

    #[test]
    fn a_full_queue_refuses_and_returns_the_item() {
        let mut q = UrgencyQueue::new(1);
        q.push(Priority::BEST_EFFORT, 1).unwrap();
        assert_eq!(q.push(Priority(0), 2), Err(2));
        assert_eq!(q.len(), 1);
    }
}
