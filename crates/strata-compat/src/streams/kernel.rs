//! The STREAMS kernel interface: what a module's put and service
//! procedures call, and the module itself (`struct streamtab`, `qinit`).
//!
//! A STREAMS module is generic over [`StreamsKernel`]; the native subsystem
//! ([`super::Stream`]) implements it, and so does every encapsulation module
//! that imports STREAMS modules into another subsystem — the same source
//! file runs in each (seed 004 §3). Calls name the queue by [`Side`]: the
//! module's own read or write queue, as `q` and `OTHERQ(q)` do in C.

use crate::errno::Errno;

use super::mblk::{DblkPool, Mblk, allocb};

/// The clock rate of `lbolt` (`HZ`).
pub const HZ: u64 = 100;

/// Which of a module's two queues: read (upstream) or write (downstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The read queue: messages travelling up, towards the stream head.
    Read,
    /// The write queue: messages travelling down, towards the driver.
    Write,
}

impl Side {
    /// `OTHERQ`: the other queue of the pair.
    pub fn other(self) -> Side {
        match self {
            Side::Read => Side::Write,
            Side::Write => Side::Read,
        }
    }

    /// The index of this side in a queue pair.
    pub fn index(self) -> usize {
        match self {
            Side::Read => 0,
            Side::Write => 1,
        }
    }
}

/// `module_info`: a module's queue limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleInfo {
    /// `mi_hiwat`: bytes queued at which the queue is full.
    pub hiwat: usize,
    /// `mi_lowat`: bytes below which a full queue back-enables its writer.
    pub lowat: usize,
}

impl Default for ModuleInfo {
    fn default() -> ModuleInfo {
        ModuleInfo {
            hiwat: 8192,
            lowat: 1024,
        }
    }
}

/// The services a module's procedures call.
pub trait StreamsKernel {
    /// The data block pool.
    fn dblks(&self) -> &DblkPool;

    /// `allocb`.
    fn allocb(&self, size: usize) -> Result<Mblk, Errno> {
        allocb(self.dblks(), size)
    }

    /// `lbolt`: clock ticks (at [`HZ`]) since boot.
    fn lbolt(&self) -> u64;

    /// `putnext(q, mp)`: call the next module's put procedure on `side`.
    fn putnext(&mut self, side: Side, mp: Mblk);

    /// `qreply(q, mp)`: send `mp` back the other way (`putnext(OTHERQ(q))`).
    fn qreply(&mut self, side: Side, mp: Mblk) {
        self.putnext(side.other(), mp);
    }

    /// `putq`: queue `mp` on this module's `side` queue for its service
    /// procedure (high-priority messages ahead of normal ones).
    fn putq(&mut self, side: Side, mp: Mblk);

    /// `putbq`: put `mp` back at the front of the queue.
    fn putbq(&mut self, side: Side, mp: Mblk);

    /// `getq`: the next queued message; back-enables the writer behind when
    /// the queue falls below its low water mark.
    fn getq(&mut self, side: Side) -> Option<Mblk>;

    /// `canputnext`: whether the next queue with a service procedure has
    /// room; when not, it will back-enable this one.
    fn canputnext(&mut self, side: Side) -> bool;

    /// `flushq`: drop the queued messages (`all`: high-priority ones too).
    fn flushq(&mut self, side: Side, all: bool);

    /// `qenable`: schedule this queue's service procedure.
    fn qenable(&mut self, side: Side);

    /// `q_count`: bytes queued.
    fn qcount(&self, side: Side) -> usize;

    /// `timeout`: call this module's [`StreamsModule::timeout`] with `id`
    /// after `ticks` clock ticks.
    fn timeout(&mut self, ticks: u64, id: u32);

    /// `untimeout`: cancel this module's pending timeouts with `id`.
    fn untimeout(&mut self, id: u32);
}

/// A STREAMS module (or driver): its put and service procedures for both
/// queues, for kernel interface `K`.
pub trait StreamsModule<K: ?Sized>: Send {
    /// `mi_idname`.
    fn name(&self) -> &'static str;

    /// `module_info`.
    fn info(&self) -> ModuleInfo {
        ModuleInfo::default()
    }

    /// Whether `side`'s `qinit` has a service procedure.
    fn has_srv(&self, side: Side) -> bool;

    /// The module's counters, by name.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// The open routine (`I_PUSH`).
    fn open(&mut self, _k: &mut K) -> Result<(), Errno> {
        Ok(())
    }

    /// The close routine (`I_POP`).
    fn close(&mut self, _k: &mut K) {}

    /// The put procedure of `side` (`rput`/`wput`).
    fn put(&mut self, k: &mut K, side: Side, mp: Mblk);

    /// The service procedure of `side` (`rsrv`/`wsrv`).
    fn srv(&mut self, _k: &mut K, _side: Side) {}

    /// A `timeout` set by this module fell due.
    fn timeout(&mut self, _k: &mut K, _id: u32) {}
}

/// The canonical service procedure: pass queued messages on while the next
/// queue has room, and put the first that does not fit back (the queue is
/// back-enabled when room appears). High-priority messages always pass.
pub fn forward<K: StreamsKernel + ?Sized>(k: &mut K, side: Side) {
    while let Some(mp) = k.getq(side) {
        if !mp.mtype.is_priority() && !k.canputnext(side) {
            k.putbq(side, mp);
            return;
        }
        k.putnext(side, mp);
    }
}
