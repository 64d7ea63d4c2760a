//! IEEE 802.3 length frames with an 802.2 LLC header and a SNAP header
//! (IEEE 802 §10.3; RFC 1042), the framing AppleTalk Phase 2 uses on Ethernet
//! (EtherTalk, Inside AppleTalk 2nd ed. §3 and appendix B):
//!
//! ```text
//! dst(6) src(6) length(2) | DSAP AA  SSAP AA  ctrl 03 | OUI(3) type(2) | payload
//! ```
//!
//! The length counts from the LLC header to the end of the payload (padding
//! excluded). DDP rides on OUI 08-00-07 (Apple) with type 0x809B; AARP on
//! OUI 00-00-00 with type 0x80F3. A protocol number in `numbers.toml` that
//! [`oui_for`] names is sent this way; every other number keeps Ethernet II.

use crate::wire::{WireError, be16, check_len, put16};

/// Length of the LLC and SNAP headers together.
pub const LEN: usize = 8;

/// LLC: the SNAP SAP as destination and source, unnumbered information.
pub const LLC: [u8; 3] = [0xaa, 0xaa, 0x03];

/// Apple's OUI, under which DDP's SNAP type is defined.
pub const APPLE_OUI: [u8; 3] = [0x08, 0x00, 0x07];

/// The zero OUI: the SNAP type is an ethertype (RFC 1042).
pub const ZERO_OUI: [u8; 3] = [0x00, 0x00, 0x00];

/// EtherTalk Phase 2's DDP.
pub const DDP_TYPE: u16 = 0x809b;

/// EtherTalk Phase 2's AARP.
pub const AARP_TYPE: u16 = 0x80f3;

/// The types sent in SNAP frames, each under its OUI. A type's protocol number
/// in the graph is the SNAP type itself.
pub const FRAMED: &[(u16, [u8; 3])] = &[(DDP_TYPE, APPLE_OUI), (AARP_TYPE, ZERO_OUI)];

/// The OUI a type is sent under, if it is sent in SNAP frames.
pub fn oui_for(snap_type: u16) -> Option<[u8; 3]> {
    FRAMED
        .iter()
        .find(|(t, _)| *t == snap_type)
        .map(|(_, oui)| *oui)
}

/// A checked view of the LLC and SNAP headers (what follows a length field).
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer` after checking it holds both headers.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        check_len(buffer.as_ref(), LEN)?;
        Ok(Header { buffer })
    }

    /// DSAP, SSAP and control.
    pub fn llc(&self) -> [u8; 3] {
        let b = self.buffer.as_ref();
        [b[0], b[1], b[2]]
    }

    /// The organisation the type belongs to.
    pub fn oui(&self) -> [u8; 3] {
        let b = self.buffer.as_ref();
        [b[3], b[4], b[5]]
    }

    /// The protocol type within the OUI.
    pub fn snap_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
}

/// Parses the LLC and SNAP headers and returns the SNAP type: an LLC other
/// than SNAP's, or an (OUI, type) pair not in [`FRAMED`], is unsupported.
pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<u16, WireError> {
    let t = h.snap_type();
    if h.llc() != LLC || oui_for(t) != Some(h.oui()) {
        return Err(WireError::Unsupported);
    }
    Ok(t)
}

/// The LLC and SNAP headers for `snap_type`, or `None` when the type is not
/// sent in SNAP frames.
pub fn to_bytes(snap_type: u16) -> Option<[u8; LEN]> {
    let oui = oui_for(snap_type)?;
    let mut b = [0u8; LEN];
    b[..3].copy_from_slice(&LLC);
    b[3..6].copy_from_slice(&oui);
    put16(&mut b, 6, snap_type);
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddp_is_framed_under_apples_oui_and_aarp_under_zero() {
        assert_eq!(
            to_bytes(DDP_TYPE).unwrap(),
            [0xaa, 0xaa, 0x03, 0x08, 0x00, 0x07, 0x80, 0x9b]
        );
        assert_eq!(
            to_bytes(AARP_TYPE).unwrap(),
            [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x80, 0xf3]
        );
        assert_eq!(to_bytes(0x0800), None);
    }

    #[test]
    fn known_headers_parse_and_strangers_are_unsupported() {
        let ddp = to_bytes(DDP_TYPE).unwrap();
        assert_eq!(parse(&Header::new_checked(&ddp[..]).unwrap()), Ok(DDP_TYPE));
        let mut wrong_oui = ddp;
        wrong_oui[5] = 0;
        assert_eq!(
            parse(&Header::new_checked(&wrong_oui[..]).unwrap()),
            Err(WireError::Unsupported)
        );
        let mut netbios = ddp;
        netbios[..2].copy_from_slice(&[0xf0, 0xf0]);
        assert_eq!(
            parse(&Header::new_checked(&netbios[..]).unwrap()),
            Err(WireError::Unsupported)
        );
        assert_eq!(
            Header::new_checked(&ddp[..7]).unwrap_err(),
            WireError::Short { need: LEN }
        );
    }
}
