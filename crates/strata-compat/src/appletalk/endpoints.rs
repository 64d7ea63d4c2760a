//! The endpoints of imported code — a BSD socket, a stream — that every
//! Strata session on one DDP socket number shares. BSD and STREAMS
//! demultiplex by socket number alone, so the first session on a number
//! makes its endpoint and the last one to go takes it away; the four
//! imported modules (`ddp@bsd`, `ddp@streams`, `atp@bsd`, `atp@streams`)
//! keep them the same way, here.

use rustc_hash::FxHashMap;
use strata_core::{DropReason, Message};

struct Held<T> {
    endpoint: T,
    holders: u32,
}

/// Endpoints by DDP socket number, each with a count of its holders.
pub struct Endpoints<T> {
    by_socket: FxHashMap<u8, Held<T>>,
}

impl<T> Default for Endpoints<T> {
    fn default() -> Endpoints<T> {
        Endpoints {
            by_socket: FxHashMap::default(),
        }
    }
}

impl<T> Endpoints<T> {
    /// One more holder of socket `socket`'s endpoint; false when it has
    /// none yet (the caller makes it and [`insert`](Self::insert)s it).
    pub fn hold(&mut self, socket: u8) -> bool {
        match self.by_socket.get_mut(&socket) {
            Some(h) => {
                h.holders += 1;
                true
            }
            None => false,
        }
    }

    /// A new endpoint for `socket`, with its first holder.
    pub fn insert(&mut self, socket: u8, endpoint: T) {
        self.by_socket.insert(
            socket,
            Held {
                endpoint,
                holders: 1,
            },
        );
    }

    /// One holder fewer; the endpoint, when that was the last.
    pub fn release(&mut self, socket: u8) -> Option<T> {
        let h = self.by_socket.get_mut(&socket)?;
        h.holders -= 1;
        if h.holders > 0 {
            return None;
        }
        self.by_socket.remove(&socket).map(|h| h.endpoint)
    }

    /// Socket `socket`'s endpoint.
    pub fn get(&self, socket: u8) -> Option<&T> {
        self.by_socket.get(&socket).map(|h| &h.endpoint)
    }

    /// Socket `socket`'s endpoint, to change.
    pub fn get_mut(&mut self, socket: u8) -> Option<&mut T> {
        self.by_socket.get_mut(&socket).map(|h| &mut h.endpoint)
    }

    /// Every endpoint with its socket number.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &T)> {
        self.by_socket.iter().map(|(s, h)| (*s, &h.endpoint))
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.by_socket.is_empty()
    }
}

/// What the imported code's counters say it dropped a packet for: the first
/// drop counter (by name, the same names in BSD's and STREAMS' DDP and ATP)
/// that grew from `before` to `after`, as Strata's drop reason; `None` when
/// none grew (the packet was kept or answered).
pub fn dropped(before: &[(&str, u64)], after: &[(&str, u64)]) -> Option<DropReason> {
    const REASONS: [(&str, DropReason); 10] = [
        ("short", DropReason::Truncated),
        ("malformed", DropReason::Malformed),
        ("bad_checksum", DropReason::BadChecksum),
        ("not_for_us", DropReason::NotForUs),
        ("no_socket", DropReason::NoSession),
        ("no_transaction", DropReason::Other("no-transaction")),
        ("sb_full", DropReason::QueueFull),
        ("flow_drops", DropReason::QueueFull),
        ("table_full", DropReason::QueueFull),
        ("nobufs", DropReason::NoRoom),
    ];
    let grew = |name: &str| {
        let of = |c: &[(&str, u64)]| c.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v);
        of(after) > of(before)
    };
    REASONS
        .iter()
        .find(|(name, _)| grew(name))
        .map(|(_, reason)| *reason)
}

/// Runs `f` on `msg`'s bytes: in place when they are one segment (the
/// common case: what DDP passes up), else on a copy.
pub fn with_bytes<R>(msg: &Message, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut chunks = msg.chunks();
    match (chunks.next(), chunks.next()) {
        (Some(one), None) if one.len() == msg.len() => f(one),
        (None, _) => f(&[]),
        _ => f(&msg.to_vec()),
    }
}
