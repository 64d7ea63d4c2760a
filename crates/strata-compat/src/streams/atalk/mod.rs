//! AppleTalk written natively for STREAMS: DDP and ATP as modules with put
//! and service procedures, speaking TPI to the modules above them.
//!
//! Each file is generic over [`StreamsKernel`] and
//! nothing else of the subsystem, so the very same file compiles inside the
//! native STREAMS subsystem ([`super::Stream`]) and inside every module that
//! imports STREAMS modules into another subsystem (seed 004 §3).
//!
//! A stream carries one transport endpoint: the user at the head, then ATP
//! (optional), then DDP, then the device, which sends and receives DDP
//! datagrams as `M_DATA`.

pub mod atp;
pub mod ddp;

use crate::errno::Errno;

use super::kernel::{Side, StreamsKernel};
use super::mblk::Mblk;
use super::tpi::Tpi;

/// A TPI primitive, with `data` linked after it as `b_cont`.
pub fn tpi_msg<K: StreamsKernel + ?Sized>(
    k: &K,
    prim: &Tpi,
    data: Option<Mblk>,
) -> Result<Mblk, Errno> {
    let mut mp = prim.to_msg(k.dblks())?;
    if let Some(d) = data {
        mp.linkb(d);
    }
    Ok(mp)
}

/// Answer a primitive with `reply` on the other side (dropped if no block
/// can be had: the caller counts it).
pub fn reply<K: StreamsKernel + ?Sized>(k: &mut K, side: Side, reply: &Tpi) -> bool {
    match reply.to_msg(k.dblks()) {
        Ok(mp) => {
            k.qreply(side, mp);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
pub(crate) mod harness;
#[cfg(test)]
mod tests;
