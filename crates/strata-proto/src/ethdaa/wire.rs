//! The ETHDAA header (seed 000 §4.2): an Ethernet II header with its own
//! ethertype, then the DAA fields.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   destination, source (12 bytes), ethertype 0x88B6            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    application identifier                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       deadline/priority                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 sender's application identifier               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      inner ethertype          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The paper's two 4-byte fields are the application identifier (the
//! receiver's: the network-wide demux key with the machine address and the
//! ethertype, §4.2.1) and the deadline/priority. Strata adds the sender's
//! identifier, so a server learns whom to answer without being configured with
//! every client, and the inner ethertype, so a frame whose path is not (yet)
//! known can still be demultiplexed layer by layer.

use crate::wire::{WireError, be16, be32};

/// ETHDAA's ethertype: IEEE 802 "local experimental ethertype 2".
pub const ETHERTYPE: u16 = 0x88B6;

/// Bytes of DAA fields after the Ethernet header.
pub const EXTENSION_LEN: usize = 14;

/// The DAA fields of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extension {
    /// The receiver's application identifier (the demux key).
    pub app_id: u32,
    /// Deadline or priority: smaller is more urgent.
    pub priority: u32,
    /// The sender's application identifier.
    pub sender: u32,
    /// The ethertype of what follows.
    pub ethertype: u16,
}

impl Extension {
    /// Reads the fields from the bytes after the Ethernet header.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<Extension, WireError> {
        if b.len() < EXTENSION_LEN {
            return Err(WireError::Short {
                need: EXTENSION_LEN,
            });
        }
        Ok(Extension {
            app_id: be32(b, 0),
            priority: be32(b, 4),
            sender: be32(b, 8),
            ethertype: be16(b, 12),
        })
    }

    /// The fields as bytes.
    pub fn to_bytes(&self) -> [u8; EXTENSION_LEN] {
        let mut b = [0u8; EXTENSION_LEN];
        b[0..4].copy_from_slice(&self.app_id.to_be_bytes());
        b[4..8].copy_from_slice(&self.priority.to_be_bytes());
        b[8..12].copy_from_slice(&self.sender.to_be_bytes());
        b[12..14].copy_from_slice(&self.ethertype.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_round_trips_and_refuses_short_input() {
        let e = Extension {
            app_id: 0x0001_0002,
            priority: 7,
            sender: 42,
            ethertype: 0x0800,
        };
        assert_eq!(Extension::parse(&e.to_bytes()), Ok(e));
        assert!(Extension::parse(&e.to_bytes()[..13]).is_err());
    }
}
