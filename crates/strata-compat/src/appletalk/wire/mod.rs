//! AppleTalk's wire formats, in smoltcp's manner: for each header a view over
//! bytes (`Header<T: AsRef<[u8]>>`) that only `new_checked` makes, so no
//! accessor can panic, and a parsed `Repr` that is emitted back to bytes.
//!
//! - [`ddp`] — the Datagram Delivery Protocol's long (extended) header and its
//!   checksum (Inside AppleTalk ch. 4);
//! - [`atp`] — the AppleTalk Transaction Protocol's header: TReq, TResp, TRel,
//!   the XO, EOM and STS bits, the bitmap/sequence number, the TID and the
//!   TRel timeout indicator (Inside AppleTalk ch. 9).
//!
//! Errors are Strata's [`WireError`], so a failed parse becomes a counted drop
//! (`DropReason::from`) or a request for more bytes (`WireError::demux`).

pub mod atp;
pub mod ddp;

pub use strata_proto::wire::WireError;

/// Fails with [`WireError::Short`] unless `buf` holds at least `need` bytes.
fn check_len(buf: &[u8], need: usize) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::Short { need })
    } else {
        Ok(())
    }
}

/// The big-endian 16-bit field at `at`; callers have checked the length.
fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Writes a big-endian 16-bit field at `at`; callers have checked the length.
fn put16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
