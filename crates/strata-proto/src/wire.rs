//! What every protocol's `wire` module shares: the error a typed header view
//! reports, and how it becomes a counted drop or a request for more bytes.
//!
//! Each protocol folder has its own `wire.rs` in smoltcp's manner: a view over
//! bytes (`Header<T: AsRef<[u8]>>`) that can only be made by `new_checked`, so
//! that every accessor reads bytes whose presence was checked and cannot panic,
//! and a parsed `Repr` that is emitted back to bytes.

use strata_core::{Demux, DropReason};

/// Why bytes did not parse as a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The header needs `need` contiguous bytes and fewer were given.
    #[error("header needs {need} bytes")]
    Short {
        /// Bytes needed from the header's first byte on.
        need: usize,
    },
    /// A field holds an impossible value (a length shorter than the header …).
    #[error("malformed header")]
    Malformed,
    /// A version, type or address family this implementation does not speak.
    #[error("unsupported version or type")]
    Unsupported,
}

impl From<WireError> for DropReason {
    fn from(e: WireError) -> DropReason {
        match e {
            WireError::Short { .. } => DropReason::Truncated,
            WireError::Malformed => DropReason::Malformed,
            WireError::Unsupported => DropReason::Unsupported,
        }
    }
}

impl WireError {
    /// The demux result for this error: a short header asks the engine to gather
    /// more bytes (it drops the packet as truncated when there are none), any
    /// other error is a counted drop.
    pub fn demux(self) -> Demux {
        match self {
            WireError::Short { need } => Demux::Short(need),
            other => Demux::Drop(other.into()),
        }
    }
}

/// Fails with [`WireError::Short`] unless `buf` holds at least `need` bytes.
#[inline]
pub(crate) fn check_len(buf: &[u8], need: usize) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::Short { need })
    } else {
        Ok(())
    }
}

/// The big-endian 16-bit field at `at`; callers have checked the length.
#[inline]
pub(crate) fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// The big-endian 32-bit field at `at`; callers have checked the length.
#[inline]
pub(crate) fn be32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// Writes a big-endian 16-bit field at `at`; callers have checked the length.
#[inline]
pub(crate) fn put16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// The IPv4 address at `at`; callers have checked the length.
#[inline]
pub(crate) fn ipv4_at(buf: &[u8], at: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(buf[at], buf[at + 1], buf[at + 2], buf[at + 3])
}

/// The hardware address at `at`; callers have checked the length.
#[inline]
pub(crate) fn hw_at(buf: &[u8], at: usize) -> strata_core::HwAddr {
    let mut a = [0u8; 6];
    a.copy_from_slice(&buf[at..at + 6]);
    strata_core::HwAddr(a)
}
