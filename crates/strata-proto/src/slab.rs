//! A bounded session table with generational handles.
//!
//! A [`SessionId`] here is a slot index in its low 16 bits and the slot's
//! generation in its high 16 bits. Work queued for a session (a `push` waiting in
//! the engine's queue) may run after the session was closed and its slot reused;
//! the generation makes such a stale handle miss, so the message is dropped and
//! counted instead of going to the wrong peer.

use std::cell::Cell;

use strata_core::SessionId;

/// Most slots any table can have: the index must fit in 16 bits.
const MAX_SLOTS: usize = 1 << 16;

struct Slot<T> {
    generation: u16,
    value: Option<T>,
}

/// Sessions of one protocol, at most `limit` of them.
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u16>,
    len: usize,
    limit: usize,
}

fn id_of(index: usize, generation: u16) -> SessionId {
    SessionId((u32::from(generation) << 16) | index as u32)
}

fn split(id: SessionId) -> (usize, u16) {
    ((id.0 & 0xffff) as usize, (id.0 >> 16) as u16)
}

/// The session a table's last lookup found: the x-kernel map manager's
/// one-entry cache. A packet is most often for the same session as the one
/// before it, and checking that session's own key is cheaper than hashing or
/// searching the index. Nothing needs invalidating: a hit is taken only when
/// the session is live and its key is the one looked up, and keys are unique
/// in the index, so the index would have answered the same. A `Cell`, so that
/// pure demux (`&self`) can keep it; the memo changes no answer.
#[derive(Debug)]
pub(crate) struct LastHit(Cell<SessionId>);

impl Default for LastHit {
    fn default() -> Self {
        // No session has this id until a slab holds 65,536 slots, and even
        // then the key check decides.
        LastHit(Cell::new(SessionId(u32::MAX)))
    }
}

impl<T> Slab<T> {
    /// The session whose key `is` accepts: the last one found when it still
    /// matches, else the index's answer (`slow`), which is remembered.
    #[inline]
    pub fn find(
        &self,
        last: &LastHit,
        is: impl FnOnce(&T) -> bool,
        slow: impl FnOnce() -> Option<SessionId>,
    ) -> Option<SessionId> {
        let id = last.0.get();
        if self.get(id).is_some_and(is) {
            return Some(id);
        }
        let id = slow()?;
        last.0.set(id);
        Some(id)
    }

    /// An empty table holding at most `limit` sessions (capped at 65536).
    pub fn new(limit: usize) -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            limit: limit.min(MAX_SLOTS),
        }
    }

    /// Stores `value`; `None` when the table is full.
    pub fn insert(&mut self, value: T) -> Option<SessionId> {
        if self.len >= self.limit {
            return None;
        }
        let index = match self.free.pop() {
            Some(i) => usize::from(i),
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.value = Some(value);
        self.len += 1;
        Some(id_of(index, slot.generation))
    }

    /// The session `id` names, if it is still live.
    #[inline]
    pub fn get(&self, id: SessionId) -> Option<&T> {
        let (index, generation) = split(id);
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_ref()
    }

    /// The session `id` names, for changing it.
    pub fn get_mut(&mut self, id: SessionId) -> Option<&mut T> {
        let (index, generation) = split(id);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_mut()
    }

    /// Removes the session `id` names; its handle never matches again.
    pub fn remove(&mut self, id: SessionId) -> Option<T> {
        let (index, generation) = split(id);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.len -= 1;
        self.free.push(index as u16);
        Some(value)
    }

    /// Live sessions with their handles.
    pub fn iter(&self) -> impl Iterator<Item = (SessionId, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_ref().map(|v| (id_of(i, s.generation), v)))
    }

    /// How many sessions are live.
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_handle_misses_after_its_slot_is_reused() {
        let mut s = Slab::new(4);
        let a = s.insert("a").unwrap();
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b").unwrap();
        assert_eq!(split(a).0, split(b).0, "the slot is reused");
        assert_eq!(s.get(a), None, "but the old handle no longer matches");
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(b), Some(&"b"));
    }

    #[test]
    fn a_full_table_refuses_more_sessions() {
        let mut s = Slab::new(2);
        assert!(s.insert(1).is_some());
        assert!(s.insert(2).is_some());
        assert_eq!(s.insert(3), None);
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().count(), 2);
    }
}
