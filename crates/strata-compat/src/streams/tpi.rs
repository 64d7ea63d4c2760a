//! TPI, the Transport Provider Interface (`sys/tihdr.h`): the primitives a
//! transport user and provider exchange in `M_PROTO`/`M_PCPROTO` blocks.
//!
//! Each primitive is laid out as its C structure — 32-bit fields, the
//! primitive's number first, addresses and options as (length, offset)
//! pairs into the same block — so a module reads it from the block's bytes
//! like a STREAMS module does, and a malformed one is refused, not trusted.
//! DDP and ATP are connectionless, so the connection primitives
//! (`T_CONN_REQ` …) are not carried; a provider answers them with
//! `T_ERROR_ACK(TNOTSUPPORT)`.

use crate::errno::Errno;

use super::mblk::{DblkPool, Mblk, MsgType, mkmsg};

/// `T_CONN_REQ`.
pub const T_CONN_REQ: u32 = 0;
/// `T_BIND_REQ`.
pub const T_BIND_REQ: u32 = 6;
/// `T_UNBIND_REQ`.
pub const T_UNBIND_REQ: u32 = 7;
/// `T_UNITDATA_REQ`.
pub const T_UNITDATA_REQ: u32 = 8;
/// `T_BIND_ACK`.
pub const T_BIND_ACK: u32 = 17;
/// `T_ERROR_ACK`.
pub const T_ERROR_ACK: u32 = 18;
/// `T_OK_ACK`.
pub const T_OK_ACK: u32 = 19;
/// `T_UNITDATA_IND`.
pub const T_UNITDATA_IND: u32 = 20;
/// `T_UDERROR_IND`.
pub const T_UDERROR_IND: u32 = 21;

/// `TBADADDR`: a TLI error — the address was wrong.
pub const TBADADDR: u32 = 1;
/// `TOUTSTATE`: a TLI error — the primitive came in the wrong state.
pub const TOUTSTATE: u32 = 4;
/// `TBADDATA`: a TLI error — the data was wrong (too long).
pub const TBADDATA: u32 = 10;
/// `TNOTSUPPORT`: a TLI error — the primitive is not supported.
pub const TNOTSUPPORT: u32 = 18;
/// `TSYSERR`: a TLI error — see `UNIX_error`.
pub const TSYSERR: u32 = 8;
/// `TADDRBUSY`: a TLI error — the address is in use.
pub const TADDRBUSY: u32 = 23;

/// An AppleTalk transport address in TPI form: net (big-endian), node, socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TAddr {
    /// Network number.
    pub net: u16,
    /// Node.
    pub node: u8,
    /// DDP socket.
    pub socket: u8,
}

impl TAddr {
    /// An address.
    pub fn new(net: u16, node: u8, socket: u8) -> TAddr {
        TAddr { net, node, socket }
    }

    fn bytes(self) -> [u8; 4] {
        let n = self.net.to_be_bytes();
        [n[0], n[1], self.node, self.socket]
    }

    fn parse(b: &[u8]) -> Option<TAddr> {
        match b {
            [a, b2, node, socket] => Some(TAddr {
                net: u16::from_be_bytes([*a, *b2]),
                node: *node,
                socket: *socket,
            }),
            _ => None,
        }
    }
}

/// A TPI primitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tpi {
    /// `T_BIND_REQ`: bind this address (socket 0: any).
    BindReq {
        /// The address.
        addr: TAddr,
    },
    /// `T_BIND_ACK`: bound to this address.
    BindAck {
        /// The address.
        addr: TAddr,
    },
    /// `T_UNBIND_REQ`.
    UnbindReq,
    /// `T_OK_ACK` of a primitive.
    OkAck {
        /// The primitive acknowledged.
        correct_prim: u32,
    },
    /// `T_ERROR_ACK`: a primitive failed.
    ErrorAck {
        /// The primitive that failed.
        error_prim: u32,
        /// The TLI error.
        tli_error: u32,
        /// The UNIX error, when `tli_error` is `TSYSERR`.
        unix_error: u32,
    },
    /// `T_UNITDATA_REQ`: send the `M_DATA` that follows to `dest`.
    UnitdataReq {
        /// The destination.
        dest: TAddr,
        /// Options (ATP's transaction control).
        opt: Vec<u8>,
    },
    /// `T_UNITDATA_IND`: the `M_DATA` that follows came from `src`.
    UnitdataInd {
        /// The source.
        src: TAddr,
        /// Options (ATP's transaction control).
        opt: Vec<u8>,
    },
    /// `T_UDERROR_IND`: a datagram to `dest` could not be sent.
    UderrorInd {
        /// The destination.
        dest: TAddr,
        /// Options of the failed request.
        opt: Vec<u8>,
        /// The error (a UNIX errno).
        error: u32,
    },
    /// A primitive this provider does not carry (its number).
    Other(u32),
}

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn word(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i * 4..i * 4 + 4)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn field(b: &[u8], len: u32, off: u32) -> Option<&[u8]> {
    let (len, off) = (len as usize, off as usize);
    b.get(off..off.checked_add(len)?)
}

impl Tpi {
    /// The primitive's number.
    pub fn prim(&self) -> u32 {
        match self {
            Tpi::BindReq { .. } => T_BIND_REQ,
            Tpi::BindAck { .. } => T_BIND_ACK,
            Tpi::UnbindReq => T_UNBIND_REQ,
            Tpi::OkAck { .. } => T_OK_ACK,
            Tpi::ErrorAck { .. } => T_ERROR_ACK,
            Tpi::UnitdataReq { .. } => T_UNITDATA_REQ,
            Tpi::UnitdataInd { .. } => T_UNITDATA_IND,
            Tpi::UderrorInd { .. } => T_UDERROR_IND,
            Tpi::Other(p) => *p,
        }
    }

    /// `T_ERROR_ACK` for primitive `prim` failing with `e`.
    pub fn error_ack(prim: u32, e: Errno) -> Tpi {
        let tli_error = match e {
            Errno::Eaddrinuse => TADDRBUSY,
            Errno::Eaddrnotavail => TBADADDR,
            Errno::Emsgsize => TBADDATA,
            Errno::Eopnotsupp => TNOTSUPPORT,
            Errno::Enotconn => TOUTSTATE,
            _ => TSYSERR,
        };
        Tpi::ErrorAck {
            error_prim: prim,
            tli_error,
            unix_error: e.number(),
        }
    }

    /// The primitive as its structure's bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Tpi::BindReq { addr } | Tpi::BindAck { addr } => {
                let mut v = words(&[self.prim(), 4, 16, 0]);
                v.extend_from_slice(&addr.bytes());
                v
            }
            Tpi::UnbindReq | Tpi::Other(_) => words(&[self.prim()]),
            Tpi::OkAck { correct_prim } => words(&[T_OK_ACK, *correct_prim]),
            Tpi::ErrorAck {
                error_prim,
                tli_error,
                unix_error,
            } => words(&[T_ERROR_ACK, *error_prim, *tli_error, *unix_error]),
            Tpi::UnitdataReq { dest: a, opt } | Tpi::UnitdataInd { src: a, opt } => {
                let mut v = words(&[self.prim(), 4, 20, opt.len() as u32, 24]);
                v.extend_from_slice(&a.bytes());
                v.extend_from_slice(opt);
                v
            }
            Tpi::UderrorInd { dest, opt, error } => {
                let mut v = words(&[T_UDERROR_IND, 4, 24, opt.len() as u32, 28, *error]);
                v.extend_from_slice(&dest.bytes());
                v.extend_from_slice(opt);
                v
            }
        }
    }

    /// Parse a primitive from its block's bytes; `None` when malformed.
    pub fn decode(b: &[u8]) -> Option<Tpi> {
        let prim = word(b, 0)?;
        let addr = |len_w: usize| -> Option<TAddr> {
            TAddr::parse(field(b, word(b, len_w)?, word(b, len_w + 1)?)?)
        };
        let opt = |len_w: usize| -> Option<Vec<u8>> {
            Some(field(b, word(b, len_w)?, word(b, len_w + 1)?)?.to_vec())
        };
        Some(match prim {
            T_BIND_REQ => Tpi::BindReq { addr: addr(1)? },
            T_BIND_ACK => Tpi::BindAck { addr: addr(1)? },
            T_UNBIND_REQ => Tpi::UnbindReq,
            T_OK_ACK => Tpi::OkAck {
                correct_prim: word(b, 1)?,
            },
            T_ERROR_ACK => Tpi::ErrorAck {
                error_prim: word(b, 1)?,
                tli_error: word(b, 2)?,
                unix_error: word(b, 3)?,
            },
            T_UNITDATA_REQ => Tpi::UnitdataReq {
                dest: addr(1)?,
                opt: opt(3)?,
            },
            T_UNITDATA_IND => Tpi::UnitdataInd {
                src: addr(1)?,
                opt: opt(3)?,
            },
            T_UDERROR_IND => Tpi::UderrorInd {
                dest: addr(1)?,
                opt: opt(3)?,
                error: word(b, 5)?,
            },
            p => Tpi::Other(p),
        })
    }

    /// Whether the primitive travels as `M_PCPROTO` (acknowledgements).
    pub fn is_priority(&self) -> bool {
        matches!(
            self,
            Tpi::BindAck { .. } | Tpi::OkAck { .. } | Tpi::ErrorAck { .. }
        )
    }

    /// The primitive as a one-block message (`M_PROTO` or `M_PCPROTO`).
    pub fn to_msg(&self, pool: &DblkPool) -> Result<Mblk, Errno> {
        let t = if self.is_priority() {
            MsgType::Pcproto
        } else {
            MsgType::Proto
        };
        mkmsg(pool, t, &self.encode())
    }

    /// The primitive a message's first block carries, if it is a
    /// well-formed `M_PROTO`/`M_PCPROTO`.
    pub fn of(mp: &Mblk) -> Option<Tpi> {
        match mp.mtype {
            MsgType::Proto | MsgType::Pcproto => Tpi::decode(mp.data()),
            _ => None,
        }
    }
}

/// A `T_UNITDATA_REQ` or `T_UNITDATA_IND` (`prim`) for `addr` with options
/// `opt`, built in its block in place — the data path's way, without the
/// intermediate buffers of [`Tpi::encode`].
pub fn unitdata_msg(pool: &DblkPool, prim: u32, addr: TAddr, opt: &[u8]) -> Result<Mblk, Errno> {
    let mut mp = super::mblk::allocb(pool, UNITDATA_HDR + opt.len())?;
    mp.mtype = MsgType::Proto;
    mp.put_bytes(&unitdata_header(prim, addr, opt.len()));
    mp.put_bytes(opt);
    Ok(mp)
}

/// Bytes of a `T_UNITDATA_REQ`/`T_UNITDATA_IND` before its options.
pub const UNITDATA_HDR: usize = 24;

/// The fixed part of a `T_UNITDATA_REQ`/`T_UNITDATA_IND` whose `opt_len`
/// bytes of options follow it: what an encapsulation module writes in
/// front of options it already holds, to make the primitive in place.
pub fn unitdata_header(prim: u32, addr: TAddr, opt_len: usize) -> [u8; UNITDATA_HDR] {
    let mut hdr = [0u8; UNITDATA_HDR];
    for (i, w) in [prim, 4, 20, opt_len as u32, UNITDATA_HDR as u32]
        .into_iter()
        .enumerate()
    {
        hdr[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    hdr[20..].copy_from_slice(&addr.bytes());
    hdr
}

/// Where a `T_UNITDATA_REQ`/`T_UNITDATA_IND`'s options lie in its block's
/// bytes (an encapsulation module wraps them without copying).
pub fn unitdata_opt_range(mp: &Mblk) -> Option<std::ops::Range<usize>> {
    unitdata(mp)?;
    let b = mp.data();
    let (len, off) = (word(b, 3)? as usize, word(b, 4)? as usize);
    Some(off..off + len)
}

/// A `T_UNITDATA_REQ`/`T_UNITDATA_IND` read in place: the primitive, the
/// address and the options, borrowed from the block; `None` for any other
/// message or a malformed one.
pub fn unitdata(mp: &Mblk) -> Option<(u32, TAddr, &[u8])> {
    if mp.mtype != MsgType::Proto {
        return None;
    }
    let b = mp.data();
    let prim = word(b, 0)?;
    if prim != T_UNITDATA_REQ && prim != T_UNITDATA_IND {
        return None;
    }
    let addr = TAddr::parse(field(b, word(b, 1)?, word(b, 2)?)?)?;
    Some((prim, addr, field(b, word(b, 3)?, word(b, 4)?)?))
}
