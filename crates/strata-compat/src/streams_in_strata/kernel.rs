//! The STREAMS kernel a module imported into Strata sees, shared by every
//! STREAMS-in-Strata node: one stream's queue pair and Strata's context for
//! the length of one Strata call. `putq` queues and enables; the enabled
//! service procedures run before the call returns (a Strata call is the
//! module's only chance to run); `timeout` is a Strata timer; what the
//! module passes upstream is collected for the node, and what it passes
//! downstream goes to the node's [`Device`].

use std::collections::VecDeque;
use std::time::Duration;

use rustc_hash::FxHashMap;
use strata_core::{Cx, Message, TimerId};

use crate::errno::Errno;
use crate::kmem::Block;
use crate::streams::kernel::{HZ, Side, StreamsKernel, StreamsModule};
use crate::streams::mblk::{DblkPool, Mblk, esballoc};

/// Service procedure rounds one call may run: a module that keeps
/// re-enabling itself cannot hold the engine.
const MAX_ROUNDS: usize = 64;

/// What lies below the hosted module: where its downstream messages go.
pub trait Device {
    /// The module's `putnext` on its write side, from stream `socket`.
    fn down(&mut self, socket: u8, mp: Mblk, cx: &mut Cx);
}

/// One stream's queues.
#[derive(Default)]
pub struct Queues([VecDeque<Mblk>; 2]);

/// The modules' pending `timeout`s as Strata timers, by stream and id.
#[derive(Default)]
pub struct Timeouts(FxHashMap<(u8, u32), TimerId>);

impl Timeouts {
    /// The stream and id of a Strata timer token; forgets the timeout.
    pub fn fired(&mut self, token: u64) -> (u8, u32) {
        let key = ((token >> 32) as u8, token as u32);
        self.0.remove(&key);
        key
    }

    /// Cancels every timeout of stream `socket` (it is closing).
    pub fn cancel_all(&mut self, socket: u8, cx: &mut Cx) {
        self.0.retain(|(s, _), t| {
            if *s == socket {
                cx.cancel_timer(*t);
            }
            *s != socket
        });
    }
}

/// The kernel: one stream of a node, for one call.
pub struct Kernel<'k, 'c, D: ?Sized> {
    cx: &'k mut Cx<'c>,
    dblks: &'k DblkPool,
    device: &'k mut D,
    socket: u8,
    queues: &'k mut Queues,
    timeouts: &'k mut Timeouts,
    enabled: [bool; 2],
    /// What the module sent upstream.
    up: Vec<Mblk>,
}

/// Runs `call` on `module` of stream `socket`, then the service procedures
/// it enabled; returns what came out upstream.
#[allow(clippy::too_many_arguments)]
pub fn run<D: Device + ?Sized, M>(
    cx: &mut Cx,
    dblks: &DblkPool,
    device: &mut D,
    socket: u8,
    queues: &mut Queues,
    timeouts: &mut Timeouts,
    module: &mut M,
    call: impl FnOnce(&mut M, &mut Kernel<'_, '_, D>),
) -> Vec<Mblk>
where
    M: for<'k, 'c> StreamsModule<Kernel<'k, 'c, D>>,
{
    let mut k = Kernel {
        cx,
        dblks,
        device,
        socket,
        queues,
        timeouts,
        enabled: [false; 2],
        up: Vec::new(),
    };
    call(module, &mut k);
    for _ in 0..MAX_ROUNDS {
        let Some(i) = k.enabled.iter().position(|e| *e) else {
            break;
        };
        k.enabled[i] = false;
        let side = if i == 0 { Side::Read } else { Side::Write };
        module.srv(&mut k, side);
    }
    k.up
}

impl<D: Device + ?Sized> StreamsKernel for Kernel<'_, '_, D> {
    fn dblks(&self) -> &DblkPool {
        self.dblks
    }

    fn lbolt(&self) -> u64 {
        self.cx.now().as_nanos() / (1_000_000_000 / HZ)
    }

    fn putnext(&mut self, side: Side, mp: Mblk) {
        match side {
            Side::Read => self.up.push(mp),
            Side::Write => self.device.down(self.socket, mp, self.cx),
        }
    }

    fn putq(&mut self, side: Side, mp: Mblk) {
        let q = &mut self.queues.0[side.index()];
        if mp.mtype.is_priority() {
            q.push_front(mp);
        } else {
            q.push_back(mp);
        }
        self.enabled[side.index()] = true;
    }

    fn putbq(&mut self, side: Side, mp: Mblk) {
        self.queues.0[side.index()].push_front(mp);
    }

    fn getq(&mut self, side: Side) -> Option<Mblk> {
        self.queues.0[side.index()].pop_front()
    }

    fn canputnext(&mut self, _side: Side) -> bool {
        // Strata takes what the module passes on, both ways.
        true
    }

    fn flushq(&mut self, side: Side, all: bool) {
        self.queues.0[side.index()].retain(|m| !all && m.mtype.is_priority());
    }

    fn qenable(&mut self, side: Side) {
        self.enabled[side.index()] = true;
    }

    fn qcount(&self, side: Side) -> usize {
        self.queues.0[side.index()].iter().map(Mblk::msgsize).sum()
    }

    fn timeout(&mut self, ticks: u64, id: u32) {
        let at = self.cx.now() + Duration::from_nanos(ticks * (1_000_000_000 / HZ));
        let token = (u64::from(self.socket) << 32) | u64::from(id);
        let t = self.cx.set_timer(at, token);
        if let Some(old) = self.timeouts.0.insert((self.socket, id), t) {
            self.cx.cancel_timer(old);
        }
    }

    fn untimeout(&mut self, id: u32) {
        if let Some(t) = self.timeouts.0.remove(&(self.socket, id)) {
            self.cx.cancel_timer(t);
        }
    }
}

/// A Strata message of message `mp`'s data: one block over a buffer the
/// host handed over goes back up as that buffer's own bytes (no copy);
/// anything else is copied once.
pub fn message_of(mp: &Mblk) -> Message {
    match mp.cont() {
        None => {
            let (block, r, w) = mp.storage();
            Message::from_bytes(block.to_bytes(r, w - r))
        }
        Some(_) => Message::from(mp.to_vec()),
    }
}

/// A received Strata message handed over to STREAMS as an `M_DATA` block
/// without a copy (`esballoc` over the message's own bytes, read-only,
/// charged to `dblks` so the pool still bounds what the stream holds);
/// `msg` is left empty.
pub fn mblk_of(dblks: &DblkPool, msg: &mut Message) -> Result<Mblk, Errno> {
    let bytes = std::mem::take(msg).into_bytes();
    let len = bytes.len();
    esballoc(dblks, Block::from_bytes(bytes), 0, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::mblk::Dblks;
    use bytes::Bytes;

    #[test]
    fn a_received_message_becomes_a_block_and_goes_back_up_without_a_copy() {
        let dblks = Dblks::pool(1);
        let frame = Bytes::from(vec![9u8; 50]);
        let mut msg = Message::from_bytes(frame.clone());
        let mut mp = mblk_of(&dblks, &mut msg).unwrap();
        assert!(msg.is_empty());
        assert_eq!(mp.data().as_ptr(), frame.as_ptr(), "no copy");
        assert_eq!(dblks.stats().in_use, 1, "charged to the pool");
        assert_eq!(mp.headroom(), 0, "the host's buffer is not written");
        assert!(mp.adjmsg(13));
        let up = message_of(&mp);
        assert_eq!(up.chunks().next().unwrap().as_ptr(), frame[13..].as_ptr());
        let mut more = Message::from_bytes(frame.clone());
        assert!(mblk_of(&dblks, &mut more).is_err(), "the pool bounds it");
        // Written, it is copied first: the host's bytes stay as they were.
        mp.data_mut()[0] = 1;
        assert_eq!(frame[13], 9);
        drop(mp);
        assert_eq!(dblks.stats().in_use, 0);
    }
}
