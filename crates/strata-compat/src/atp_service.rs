//! ATP's service interface (Inside AppleTalk, 2nd ed., ch. 9: SendRequest,
//! GetRequest, SendResponse) as the records a user and ATP exchange.
//!
//! Each subsystem carries them its own way — BSD as an `MT_CONTROL` mbuf
//! beside the data, STREAMS as the options of `T_UNITDATA_REQ/IND` — but the
//! bytes are the same, so an encapsulation module passes them through
//! untouched and a user cannot tell which ATP served it.

use std::time::Duration;

use crate::appletalk::wire::atp::TRelTimeout;

/// Bytes in every record.
pub const RECORD_LEN: usize = 10;
/// A retry count meaning "retry for ever".
pub const RETRY_FOREVER: u8 = 0xff;

/// A record between an ATP user and ATP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtpService {
    /// User → ATP: send the data as a transaction request.
    SendRequest {
        /// Exactly-once, with this release timer; `None`: at-least-once.
        xo: Option<TRelTimeout>,
        /// Which responses to ask for (bit n: sequence number n).
        bitmap: u8,
        /// Retransmissions before giving up ([`RETRY_FOREVER`]: never).
        retries: u8,
        /// The retry interval, in units of 100 ms.
        interval: u8,
        /// The request's user bytes.
        user: [u8; 4],
    },
    /// ATP → user: a request arrived (the data follows).
    RequestInd {
        /// Its transaction's mode.
        xo: Option<TRelTimeout>,
        /// The responses asked for.
        bitmap: u8,
        /// Its transaction identifier.
        tid: u16,
        /// Its user bytes.
        user: [u8; 4],
    },
    /// User → ATP: answer request `tid` from the address given with it;
    /// the data is split into as many responses as it needs (up to 8).
    SendResponse {
        /// The transaction answered.
        tid: u16,
        /// The responses' user bytes.
        user: [u8; 4],
    },
    /// ATP → user: a transaction this user started completed; the data
    /// is its responses' data, in sequence order.
    ResponseInd {
        /// Its transaction identifier.
        tid: u16,
        /// How many responses made it.
        segments: u8,
        /// The *request's* user bytes (so the user can match it).
        user: [u8; 4],
    },
    /// ATP → user: a transaction this user started ran out of retries.
    RequestFailed {
        /// Its transaction identifier.
        tid: u16,
        /// The request's user bytes.
        user: [u8; 4],
    },
}

fn xo_byte(xo: Option<TRelTimeout>) -> u8 {
    xo.map_or(0, |t| 0x80 | t.bits())
}

fn xo_of(b: u8) -> Option<Option<TRelTimeout>> {
    if b & 0x80 == 0 {
        Some(None)
    } else {
        TRelTimeout::from_bits(b & 0x07).map(Some)
    }
}

impl AtpService {
    /// The record's bytes.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let (kind, a, b, c, tid, user) = match *self {
            AtpService::SendRequest {
                xo,
                bitmap,
                retries,
                interval,
                user,
            } => (1, xo_byte(xo), bitmap, retries, u16::from(interval), user),
            AtpService::RequestInd {
                xo,
                bitmap,
                tid,
                user,
            } => (2, xo_byte(xo), bitmap, 0, tid, user),
            AtpService::SendResponse { tid, user } => (3, 0, 0, 0, tid, user),
            AtpService::ResponseInd {
                tid,
                segments,
                user,
            } => (4, 0, 0, segments, tid, user),
            AtpService::RequestFailed { tid, user } => (5, 0, 0, 0, tid, user),
        };
        let t = tid.to_be_bytes();
        [
            kind, a, b, c, t[0], t[1], user[0], user[1], user[2], user[3],
        ]
    }

    /// Parse a record; `None` when it is not one.
    pub fn decode(b: &[u8]) -> Option<AtpService> {
        let b: &[u8; RECORD_LEN] = b.try_into().ok()?;
        let tid = u16::from_be_bytes([b[4], b[5]]);
        let user = [b[6], b[7], b[8], b[9]];
        Some(match b[0] {
            1 => AtpService::SendRequest {
                xo: xo_of(b[1])?,
                bitmap: b[2],
                retries: b[3],
                interval: u8::try_from(tid).ok()?,
                user,
            },
            2 => AtpService::RequestInd {
                xo: xo_of(b[1])?,
                bitmap: b[2],
                tid,
                user,
            },
            3 => AtpService::SendResponse { tid, user },
            4 => AtpService::ResponseInd {
                tid,
                segments: b[3],
                user,
            },
            5 => AtpService::RequestFailed { tid, user },
            _ => return None,
        })
    }

    /// The retry interval of a `SendRequest` (at least 100 ms).
    pub fn interval(interval: u8) -> Duration {
        Duration::from_millis(100 * u64::from(interval.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_round_trips_and_junk_is_refused() {
        let recs = [
            AtpService::SendRequest {
                xo: Some(TRelTimeout::Min1),
                bitmap: 0xff,
                retries: 3,
                interval: 20,
                user: [1, 2, 3, 4],
            },
            AtpService::SendRequest {
                xo: None,
                bitmap: 1,
                retries: RETRY_FOREVER,
                interval: 1,
                user: [0; 4],
            },
            AtpService::RequestInd {
                xo: Some(TRelTimeout::Sec30),
                bitmap: 7,
                tid: 513,
                user: [9; 4],
            },
            AtpService::SendResponse {
                tid: 65535,
                user: [5; 4],
            },
            AtpService::ResponseInd {
                tid: 1,
                segments: 8,
                user: [6; 4],
            },
            AtpService::RequestFailed {
                tid: 2,
                user: [7; 4],
            },
        ];
        for r in recs {
            assert_eq!(AtpService::decode(&r.encode()), Some(r));
        }
        assert_eq!(AtpService::decode(&[0; RECORD_LEN]), None);
        assert_eq!(AtpService::decode(&[1; 3]), None);
    }
}
