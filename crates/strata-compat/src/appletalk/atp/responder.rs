//! The responding end of ATP transactions (Inside AppleTalk §9 "Responder"):
//! a new request goes up to the application once; its reply is cut into
//! response packets, and for an XO request the packets are kept in the
//! transaction list until the requester's TRel or the release timer, so a
//! retried request is answered from them instead of reaching the application
//! again — which is what makes the transaction exactly-once.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use strata_core::{Message, TimerId};

use crate::appletalk::wire::atp::TRelTimeout;

/// A request delivered to the application and not yet answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// Its TID.
    pub tid: u16,
    /// The responses asked for.
    pub bitmap: u8,
    /// Exactly-once, and for how long to keep the responses.
    pub xo: Option<TRelTimeout>,
}

/// An answered XO transaction, kept for retried requests.
#[derive(Debug)]
pub struct Saved {
    /// Every response packet, ATP header included, by sequence number.
    pub packets: Vec<Message>,
    /// The release timer.
    pub timer: TimerId,
}

/// A responder session's transactions with one requester.
#[derive(Debug, Default)]
pub struct Responder {
    /// Requests the application has and has not answered, oldest first.
    pub waiting: VecDeque<Waiting>,
    /// The transaction list: answered XO transactions by TID.
    pub saved: FxHashMap<u16, Saved>,
}

/// What to do with a request that has arrived.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    /// New: up to the application.
    New,
    /// A retry of an answered XO request: send again the saved packets of
    /// the bitmap.
    Saved,
    /// A retry of a request the application has not answered yet: nothing
    /// to do, the answer will go out.
    Waiting,
    /// Too many unanswered requests.
    Full,
}

impl Responder {
    /// Classifies a request and, when new, queues it for the application.
    pub fn arrive(&mut self, w: Waiting, max: usize) -> Arrival {
        if self.saved.contains_key(&w.tid) {
            Arrival::Saved
        } else if self.waiting.iter().any(|x| x.tid == w.tid) {
            Arrival::Waiting
        } else if self.waiting.len() + self.saved.len() >= max {
            Arrival::Full
        } else {
            self.waiting.push_back(w);
            Arrival::New
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_new_once_then_a_retry() {
        let mut r = Responder::default();
        let w = Waiting {
            tid: 7,
            bitmap: 1,
            xo: Some(TRelTimeout::Sec30),
        };
        assert_eq!(r.arrive(w, 4), Arrival::New);
        assert_eq!(r.arrive(w, 4), Arrival::Waiting);
        assert_eq!(r.arrive(Waiting { tid: 8, ..w }, 1), Arrival::Full);
    }
}
