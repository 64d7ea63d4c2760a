//! Fragmentation (RFC 791 §2.3 "Fragmentation", §3.2 the fragmentation
//! procedure): a payload too large for the link is cut into pieces whose
//! offsets are multiples of 8 bytes, every piece but the last flagged MF. The
//! pieces share the payload's bytes (`Message::split_off`); nothing is copied.

use strata_core::Message;

use super::wire::{FRAGMENT_UNIT, MIN_HEADER_LEN};

/// One fragment's payload and where it goes in the datagram.
#[derive(Debug)]
pub struct Piece {
    /// Offset of the piece in the datagram's payload, in bytes.
    pub offset: usize,
    /// Whether more fragments follow (the MF flag).
    pub more: bool,
    /// The piece.
    pub payload: Message,
}

/// The pieces of one datagram's payload, front to back.
#[derive(Debug)]
pub struct Fragments {
    rest: Option<Message>,
    offset: usize,
    step: usize,
}

/// Cuts `payload` for a link carrying at most `mtu` bytes of IP datagram (20
/// bytes of which are our option-free header). A payload that fits is one
/// unfragmented piece. `mtu` is at least 68 (RFC 791), so every piece but the
/// last carries at least 48 bytes.
pub fn fragments(payload: Message, mtu: usize) -> Fragments {
    let room = mtu.saturating_sub(MIN_HEADER_LEN);
    let step = if payload.len() <= room {
        payload.len().max(1)
    } else {
        (room / FRAGMENT_UNIT * FRAGMENT_UNIT).max(FRAGMENT_UNIT)
    };
    Fragments {
        rest: Some(payload),
        offset: 0,
        step,
    }
}

impl Iterator for Fragments {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        let mut payload = self.rest.take()?;
        let offset = self.offset;
        if payload.len() > self.step {
            self.rest = Some(payload.split_off(self.step));
            self.offset += self.step;
        }
        Some(Piece {
            offset,
            more: self.rest.is_some(),
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn cut(len: usize, mtu: usize) -> Vec<(usize, bool, usize)> {
        let payload = Message::from_bytes(Bytes::from(vec![0u8; len]));
        fragments(payload, mtu)
            .map(|p| (p.offset, p.more, p.payload.len()))
            .collect()
    }

    #[test]
    fn a_payload_that_fits_is_one_unflagged_piece() {
        assert_eq!(cut(1480, 1500), vec![(0, false, 1480)]);
        assert_eq!(cut(0, 1500), vec![(0, false, 0)]);
    }

    #[test]
    fn a_4000_byte_payload_on_ethernet_makes_three_fragments() {
        // 1480 is already a multiple of 8: offsets 0, 1480, 2960 (185, 370 units).
        assert_eq!(
            cut(4000, 1500),
            vec![(0, true, 1480), (1480, true, 1480), (2960, false, 1040)]
        );
    }

    #[test]
    fn offsets_stay_multiples_of_eight_when_the_mtu_is_odd() {
        // 1001 - 20 = 981 bytes of room, cut down to 976.
        let pieces = cut(3000, 1001);
        assert!(pieces.iter().all(|(off, _, _)| off % 8 == 0));
        assert_eq!(pieces[0], (0, true, 976));
        assert_eq!(pieces.iter().map(|p| p.2).sum::<usize>(), 3000);
        assert!(!pieces.last().unwrap().1, "the last piece has MF clear");
    }

    #[test]
    fn the_minimum_mtu_still_makes_progress() {
        let pieces = cut(100, 68);
        assert_eq!(pieces, vec![(0, true, 48), (48, true, 48), (96, false, 4)]);
    }

    #[test]
    fn fragments_share_the_payload_instead_of_copying_it() {
        let data = Bytes::from((0..=255u8).cycle().take(3000).collect::<Vec<u8>>());
        let pieces: Vec<Piece> = fragments(Message::from_bytes(data.clone()), 1500).collect();
        let second = pieces[1].payload.clone().into_bytes();
        assert_eq!(second.as_ptr(), data[1480..].as_ptr(), "same memory");
    }
}
