//! The requesting end of ATP transactions (Inside AppleTalk §9 "Requester"):
//! each request gets a TID, is sent as a TReq whose bitmap names the response
//! packets still wanted, and is sent again every retry interval until every
//! wanted response has come (EOM cuts the bitmap at its sequence number). A
//! complete XO transaction is released with a TRel.

use std::collections::BTreeMap;

use strata_core::{Message, TimerId};

use crate::appletalk::wire::atp::MAX_RESPONSES;

/// One outstanding request.
#[derive(Debug)]
pub struct Transaction {
    /// The request's data, kept to send again.
    pub data: Message,
    /// Response packets still wanted.
    pub bitmap: u8,
    /// The bitmap first asked for (echoed in the TRel).
    pub asked: u8,
    /// Responses received, by sequence number.
    pub responses: [Option<Message>; MAX_RESPONSES],
    /// Sends so far, the first included.
    pub sends: u32,
    /// The retry timer.
    pub timer: Option<TimerId>,
}

impl Transaction {
    /// A request for up to eight responses.
    pub fn new(data: Message, bitmap: u8) -> Transaction {
        Transaction {
            data,
            bitmap,
            asked: bitmap,
            responses: Default::default(),
            sends: 0,
            timer: None,
        }
    }

    /// Takes response `seq`; false when it was not wanted (a duplicate, or
    /// beyond an EOM already seen).
    pub fn take(&mut self, seq: u8, eom: bool, data: Message) -> bool {
        let bit = 1u8 << (seq & 7);
        if self.bitmap & bit == 0 {
            return false;
        }
        self.bitmap &= !bit;
        if eom {
            // Responses after the last are not coming (§9 "EOM").
            self.bitmap &= bit.wrapping_sub(1);
        }
        self.responses[usize::from(seq & 7)] = Some(data);
        true
    }

    /// True when every wanted response is in.
    pub fn complete(&self) -> bool {
        self.bitmap == 0
    }

    /// The responses in sequence order, as one message.
    pub fn reply(&mut self) -> Message {
        let mut out = Message::new();
        for r in self.responses.iter_mut().filter_map(Option::take) {
            out.join(r);
        }
        out
    }
}

/// A requester session's transactions.
#[derive(Debug, Default)]
pub struct Requester {
    /// Outstanding transactions by TID.
    pub pending: BTreeMap<u16, Transaction>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eom_cuts_the_bitmap_and_duplicates_are_refused() {
        let mut t = Transaction::new(Message::new(), 0xff);
        assert!(t.take(1, false, Message::from_slice(b"b")));
        assert!(!t.take(1, false, Message::from_slice(b"b")), "duplicate");
        assert!(t.take(2, true, Message::from_slice(b"c")));
        assert_eq!(t.bitmap, 0b0000_0001, "only seq 0 still wanted");
        assert!(!t.take(5, false, Message::from_slice(b"x")), "after EOM");
        assert!(t.take(0, false, Message::from_slice(b"a")));
        assert!(t.complete());
        assert_eq!(t.reply().to_vec(), b"abc");
    }
}
