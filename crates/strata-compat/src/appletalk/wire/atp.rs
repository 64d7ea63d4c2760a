//! The ATP header (Inside AppleTalk, 2nd ed., §9 "ATP packet format"), the
//! first eight bytes of a DDP datagram of type 3:
//!
//! ```text
//!      0                1               2     3      4 … 7
//! +--+--+--+---+---+-------+----------+----------+------------+
//! |func |XO|EOM|STS|TRel ti| bitmap / | TID      | user bytes |
//! |(2 b)|  |   |   |(3 b)  | sequence |          |            |
//! +--+--+--+---+---+-------+----------+----------+------------+
//! ```
//!
//! A transaction is a request (TReq, whose bitmap says which of up to eight
//! response packets the requester still wants), its responses (TResp, each
//! carrying its sequence number 0–7, the last one flagged EOM), and for an
//! exactly-once (XO) transaction a release (TRel) that lets the responder
//! forget the responses it kept for retransmission. STS in a TResp asks the
//! requester to resend its TReq at once (send transaction status); the TRel
//! timeout indicator in an XO TReq says how long the responder keeps them.

use std::time::Duration;

use super::{WireError, be16, check_len, put16};

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// The most data one ATP packet carries (DDP's 586 less the header).
pub const MAX_DATA: usize = 578;

/// The most response packets in one transaction (eight bitmap bits).
pub const MAX_RESPONSES: usize = 8;

/// ATP's DDP type.
pub const DDP_TYPE: u8 = super::ddp::types::ATP;

const FUNC_SHIFT: u8 = 6;
const XO: u8 = 0x20;
const EOM: u8 = 0x10;
const STS: u8 = 0x08;
const TREL_MASK: u8 = 0x07;

/// The function code: which of the three ATP packets this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Function {
    /// Transaction request (code 01).
    Request,
    /// Transaction response (code 10).
    Response,
    /// Transaction release (code 11).
    Release,
}

impl Function {
    /// The two-bit code; 00 is no function and does not parse.
    pub fn from_code(code: u8) -> Option<Function> {
        match code {
            1 => Some(Function::Request),
            2 => Some(Function::Response),
            3 => Some(Function::Release),
            _ => None,
        }
    }

    /// The two-bit code.
    pub fn code(self) -> u8 {
        match self {
            Function::Request => 1,
            Function::Response => 2,
            Function::Release => 3,
        }
    }
}

/// How long a responder keeps an XO transaction's responses waiting for its
/// TRel (AppleTalk Phase 2's TRel timeout indicator, bits 2–0 of a TReq).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TRelTimeout {
    /// 30 seconds (0), the only value before Phase 2.
    #[default]
    Sec30,
    /// 1 minute (1).
    Min1,
    /// 2 minutes (2).
    Min2,
    /// 4 minutes (3).
    Min4,
    /// 8 minutes (4).
    Min8,
}

impl TRelTimeout {
    /// The indicator's value; 5–7 are reserved.
    pub fn from_bits(bits: u8) -> Option<TRelTimeout> {
        match bits {
            0 => Some(TRelTimeout::Sec30),
            1 => Some(TRelTimeout::Min1),
            2 => Some(TRelTimeout::Min2),
            3 => Some(TRelTimeout::Min4),
            4 => Some(TRelTimeout::Min8),
            _ => None,
        }
    }

    /// The indicator's three bits.
    pub fn bits(self) -> u8 {
        match self {
            TRelTimeout::Sec30 => 0,
            TRelTimeout::Min1 => 1,
            TRelTimeout::Min2 => 2,
            TRelTimeout::Min4 => 3,
            TRelTimeout::Min8 => 4,
        }
    }

    /// How long the responder keeps the transaction.
    pub fn duration(self) -> Duration {
        Duration::from_secs(30 << self.bits())
    }
}

/// A checked view of an ATP header.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer` after checking it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        Ok(Header { buffer })
    }

    /// The control byte, whole.
    pub fn control(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// The function code's two bits (0 is invalid).
    pub fn function_code(&self) -> u8 {
        self.control() >> FUNC_SHIFT
    }

    /// Exactly-once.
    pub fn xo(&self) -> bool {
        self.control() & XO != 0
    }

    /// End of message: the last response packet.
    pub fn eom(&self) -> bool {
        self.control() & EOM != 0
    }

    /// Send transaction status.
    pub fn sts(&self) -> bool {
        self.control() & STS != 0
    }

    /// The TRel timeout indicator's three bits.
    pub fn trel_bits(&self) -> u8 {
        self.control() & TREL_MASK
    }

    /// The bitmap (TReq, TRel) or sequence number (TResp).
    pub fn bitmap_seq(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Transaction identifier.
    pub fn tid(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The four user bytes.
    pub fn user_bytes(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[4], b[5], b[6], b[7]]
    }
}

/// A parsed ATP header. Every bit of the header is kept, so parse and emit
/// round-trip exactly, whatever a peer set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// TReq, TResp or TRel.
    pub function: Function,
    /// Exactly-once transaction.
    pub xo: bool,
    /// Last response packet (TResp).
    pub eom: bool,
    /// Send transaction status (TResp).
    pub sts: bool,
    /// The TRel timeout indicator's raw bits (0–7; see [`Repr::trel_timeout`]).
    pub trel_bits: u8,
    /// Bitmap (TReq: packets still wanted; TRel: echoed) or sequence number
    /// (TResp: 0–7).
    pub bitmap_seq: u8,
    /// Transaction identifier.
    pub tid: u16,
    /// User bytes, opaque to ATP.
    pub user_bytes: [u8; 4],
}

impl Repr {
    /// Parses a header: function code 00 and a response sequence number above
    /// 7 are malformed.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Repr, WireError> {
        let function = Function::from_code(h.function_code()).ok_or(WireError::Malformed)?;
        if function == Function::Response && usize::from(h.bitmap_seq()) >= MAX_RESPONSES {
            return Err(WireError::Malformed);
        }
        Ok(Repr {
            function,
            xo: h.xo(),
            eom: h.eom(),
            sts: h.sts(),
            trel_bits: h.trel_bits(),
            bitmap_seq: h.bitmap_seq(),
            tid: h.tid(),
            user_bytes: h.user_bytes(),
        })
    }

    /// A TReq asking for the responses whose bits are set in `bitmap`.
    pub fn request(tid: u16, bitmap: u8, xo: Option<TRelTimeout>, user_bytes: [u8; 4]) -> Repr {
        Repr {
            function: Function::Request,
            xo: xo.is_some(),
            eom: false,
            sts: false,
            trel_bits: xo.map_or(0, TRelTimeout::bits),
            bitmap_seq: bitmap,
            tid,
            user_bytes,
        }
    }

    /// Response packet `seq` (0–7) of transaction `tid`.
    pub fn response(tid: u16, seq: u8, eom: bool, user_bytes: [u8; 4]) -> Repr {
        Repr {
            function: Function::Response,
            xo: false,
            eom,
            sts: false,
            trel_bits: 0,
            bitmap_seq: seq & 0x07,
            tid,
            user_bytes,
        }
    }

    /// The release of XO transaction `tid`.
    pub fn release(tid: u16) -> Repr {
        Repr {
            function: Function::Release,
            xo: false,
            eom: false,
            sts: false,
            trel_bits: 0,
            bitmap_seq: 0,
            tid,
            user_bytes: [0; 4],
        }
    }

    /// The TRel timeout of an XO request; a reserved indicator (5–7) reads as
    /// the 30 s default, as Inside AppleTalk has responders treat it.
    pub fn trel_timeout(&self) -> TRelTimeout {
        TRelTimeout::from_bits(self.trel_bits).unwrap_or_default()
    }

    /// The header as bytes (the TRel bits are masked to three).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = (self.function.code() << FUNC_SHIFT)
            | if self.xo { XO } else { 0 }
            | if self.eom { EOM } else { 0 }
            | if self.sts { STS } else { 0 }
            | (self.trel_bits & TREL_MASK);
        b[1] = self.bitmap_seq;
        put16(&mut b, 2, self.tid);
        b[4..].copy_from_slice(&self.user_bytes);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_known_xo_request_parses_field_by_field() {
        // TReq (01), XO, TRel timeout 2 min, bitmap 0x0f, TID 0x1234.
        let b = [0x62, 0x0f, 0x12, 0x34, 1, 2, 3, 4];
        let r = Repr::parse(&Header::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.function, Function::Request);
        assert!(r.xo && !r.eom && !r.sts);
        assert_eq!(r.trel_timeout(), TRelTimeout::Min2);
        assert_eq!(r.trel_timeout().duration(), Duration::from_secs(120));
        assert_eq!(
            (r.bitmap_seq, r.tid, r.user_bytes),
            (0x0f, 0x1234, [1, 2, 3, 4])
        );
        assert_eq!(
            Repr::request(0x1234, 0x0f, Some(TRelTimeout::Min2), [1, 2, 3, 4]).to_bytes(),
            b
        );
    }

    #[test]
    fn a_known_last_response_and_release_emit_their_bytes() {
        assert_eq!(
            Repr::response(7, 3, true, [0; 4]).to_bytes(),
            [0x90, 0x03, 0x00, 0x07, 0, 0, 0, 0]
        );
        assert_eq!(
            Repr::release(0xbeef).to_bytes(),
            [0xc0, 0x00, 0xbe, 0xef, 0, 0, 0, 0]
        );
    }

    #[test]
    fn the_trel_timeouts_double_from_thirty_seconds() {
        let secs: Vec<u64> = (0..=4)
            .map(|b| TRelTimeout::from_bits(b).unwrap().duration().as_secs())
            .collect();
        assert_eq!(secs, [30, 60, 120, 240, 480]);
        assert_eq!(TRelTimeout::from_bits(5), None);
        let mut r = Repr::request(1, 1, Some(TRelTimeout::Min8), [0; 4]);
        r.trel_bits = 7;
        assert_eq!(r.trel_timeout(), TRelTimeout::Sec30);
    }

    #[test]
    fn no_function_and_high_sequence_numbers_are_malformed() {
        let none = [0x00, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(
            Repr::parse(&Header::new_checked(&none[..]).unwrap()),
            Err(WireError::Malformed)
        );
        let seq8 = [0x80, 8, 0, 1, 0, 0, 0, 0];
        assert_eq!(
            Repr::parse(&Header::new_checked(&seq8[..]).unwrap()),
            Err(WireError::Malformed)
        );
        assert_eq!(
            Header::new_checked(&none[..7]).unwrap_err(),
            WireError::Short { need: 8 }
        );
    }

    fn repr() -> impl Strategy<Value = Repr> {
        (
            1u8..=3,
            any::<[bool; 3]>(),
            0u8..8,
            any::<u8>(),
            any::<u16>(),
            any::<[u8; 4]>(),
        )
            .prop_map(|(f, [xo, eom, sts], trel_bits, bs, tid, user_bytes)| {
                let function = Function::from_code(f).unwrap();
                let bitmap_seq = if function == Function::Response {
                    bs & 7
                } else {
                    bs
                };
                Repr {
                    function,
                    xo,
                    eom,
                    sts,
                    trel_bits,
                    bitmap_seq,
                    tid,
                    user_bytes,
                }
            })
    }

    proptest! {
        #[test]
        fn any_repr_round_trips(r in repr()) {
            let b = r.to_bytes();
            prop_assert_eq!(Repr::parse(&Header::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn any_bytes_parse_and_re_emit_exactly_or_fail(b in proptest::collection::vec(any::<u8>(), 0..12)) {
            match Header::new_checked(&b[..]) {
                Ok(h) => {
                    if let Ok(r) = Repr::parse(&h) {
                        prop_assert_eq!(&r.to_bytes()[..], &b[..HEADER_LEN]);
                    }
                }
                Err(e) => prop_assert_eq!(e, WireError::Short { need: HEADER_LEN }),
            }
        }
    }
}
