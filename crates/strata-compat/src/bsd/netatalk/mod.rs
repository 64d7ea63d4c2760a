//! AppleTalk written natively for BSD (after 4.4BSD's `sys/netatalk`): DDP
//! and ATP as protocol switch entries over mbufs and sockets.
//!
//! Each file is generic over [`BsdKernel`](super::BsdKernel) and nothing
//! else of the subsystem, so the very same file compiles inside the native
//! BSD subsystem ([`super::Bsd`]) and inside every module that imports BSD
//! protocols into another subsystem (seed 004 §3).

pub mod atp;
pub mod ddp;

/// DDP's protocol number in the AppleTalk domain (`ATPROTO_DDP`).
pub const ATPROTO_DDP: u8 = 0;
/// ATP's protocol number: its DDP type.
pub const ATPROTO_ATP: u8 = crate::appletalk::wire::atp::DDP_TYPE;

#[cfg(test)]
pub(crate) mod harness;
#[cfg(test)]
mod tests;
