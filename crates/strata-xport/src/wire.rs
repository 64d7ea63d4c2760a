//! The transport's packets on the wire (seed 001 §2.1, §3.2, §3.3).
//!
//! Every packet is one UDP datagram. Control packets travel between the two
//! control sockets, data packets between data sockets (§2.1: the two flows use
//! different UDP sockets so that control can be read first, §3.6). All fields
//! are big-endian.
//!
//! # Common header (16 bytes, every packet)
//!
//! ```text
//!  0      1      2             4                            8
//! +------+------+-------------+----------------------------+
//! | ver  | type |   flags     |  header checksum (XTP, 32) |
//! +------+------+-------------+----------------------------+
//! |            connection id of the receiver (64)          |  8..16
//! +---------------------------------------------------------+
//! ```
//!
//! * `ver` is [`VERSION`] (2; version 1 had a 40-byte data header and no
//!   payload size in the set-up); `type` is a [`Kind`].
//! * The header checksum is mandatory (§2.1). It is XTP's algorithm
//!   ([`xtp_checksum`]) over the whole header — for every kind but `DATA`
//!   the header is the whole packet — computed with the checksum field zero
//!   (and, for `DATA`, the payload's length summed after it).
//! * The connection id is the one the *receiving* side chose (random, 64
//!   bits): an off-path sender that cannot see it cannot inject into or tear
//!   down a connection. A first `CONNECT` carries zero.
//!
//! # CONNECT (type 1, client → server control port), 56 + 2n bytes
//!
//! ```text
//! 16 u64 client connection id      24 u32 client initial sequence number
//! 28 u32 application buffer size   32 u32 socket buffer size (read back)
//! 36 u8  data sockets n (1..=16)   37 u8 options   38 u16 largest payload
//! 40 [16] cookie (zero on a first try)
//! 56 n × u16 the client's data ports
//! ```
//!
//! * `largest payload` (at least 1) is the most payload bytes a data packet
//!   of either direction may carry as this end sees its path (its MTU less
//!   the IP, UDP and data headers): each end sends packets of the smaller of
//!   its own and the peer's (§2.1's negotiation, extended by the MSS).
//! * `options` bit 0 ([`OPTION_DATA_CHECKSUM`]): this end's data packets
//!   carry the data checksum, so their header is 4 bytes longer (a receiver
//!   that scatters headers and payloads into separate buffers needs to know).
//!   Other bits are sent zero and ignored.
//!
//! # RETRY (type 2, server → client), 32 bytes
//!
//! The server's stateless answer to a `CONNECT` without a valid cookie. It is
//! smaller than any `CONNECT`, so the set-up never amplifies (a reply is at
//! most three times the size of a first packet until the peer has shown, by
//! echoing the cookie, that it receives at its address). Connection id field:
//! the client's.
//!
//! ```text
//! 16 [16] cookie
//! ```
//!
//! # ACCEPT (type 3, server → client), 40 + 2n bytes
//!
//! ```text
//! 16 u64 server connection id      24 u32 server initial sequence number
//! 28 u32 application buffer size   32 u32 socket buffer size
//! 36 u8  data sockets n (agreed)   37 u8 options   38 u16 largest payload
//! 40 n × u16 the server's data ports
//! ```
//!
//! `options` and `largest payload` as in `CONNECT`.
//!
//! # CONTROL (type 4), 40 + 8g bytes
//!
//! Sent by a data receiver to the data sender: the receiver-driven window and
//! the error-recovery requests of §3.1–3.2.
//!
//! ```text
//! 16 u32 next expected sequence number (every packet before it arrived)
//! 20 u32 timestamp echo (the `tsval` of the newest in-order data packet)
//! 24 u32 congestion window, in packets (receiver-driven, §3.1)
//! 28 u8  recovery request: 0 none, 1 go-back-N, 2 selective (§3.2)
//! 29 u8  gap count g (0..=64)
//! 30 u16 control serial (wraps; a receiver of control ignores older ones)
//! 32 u64 receive limit: the sender may send stream bytes below this offset
//! 40 g × (u32 first missing, u32 end) missing sequence ranges, end exclusive
//! ```
//!
//! Flags: [`flags::FIN_SEEN`] (the sender's end of stream arrived).
//!
//! # DATA (type 5), 28-byte header (32 with the data checksum) + payload
//!
//! ```text
//! 16 u32 sequence number (per packet; random initial value)
//! 20 u32 tsval (sender's clock in microseconds, echoed for the RTT)
//! 24 u32 stream offset of the payload's first byte, modulo 2^32
//! 28 u32 data checksum (XTP over the payload), only with flag DATA_CHECKSUM
//! ```
//!
//! The header is short because it rides on every data packet: at 1,444
//! bytes of payload a 1500-byte MTU is full and the payload is 95.4% of
//! each Ethernet frame (the 40-byte header of version 1 left 94.5%).
//!
//! * The payload's length is not sent: it is the datagram's remainder. The
//!   header checksum covers it all the same, as a 32-bit word summed after
//!   the header (a pseudo-header field, like UDP's), so a truncated or
//!   padded datagram fails the check.
//! * The stream offset is sent modulo 2^32, as TCP sends its sequence
//!   numbers: the receiver takes the offset nearest the next byte it expects
//!   ([`widen_offset`]), which is exact because it never lets the sender
//!   run 2^31 bytes or more ahead of that byte (the receive limit of its
//!   control packets).
//! * The data checksum is there only when the flag says so.
//!
//! Flags: [`flags::DATA_CHECKSUM`] (the data checksum is present, §3.3: used
//! only when UDP's own is off), [`flags::FIN`] (the stream ends with this
//! packet's last byte), [`flags::RETRANSMISSION`].
//!
//! # RESET (type 6), 20 bytes
//!
//! ```text
//! 16 u32 reason (0 closed by the application, 1 protocol violation)
//! ```
//!
//! A packet whose length, version, type, checksum or counts do not match the
//! above fails to parse with a [`WireError`]; nothing here panics on any input.

/// The protocol version this module speaks.
pub const VERSION: u8 = 2;
/// Length of the header every packet starts with.
pub const COMMON_LEN: usize = 16;
/// Length of a data packet's header without the data checksum.
pub const DATA_HEADER_LEN: usize = 28;
/// Length of a data packet's header with the data checksum.
pub const DATA_HEADER_MAX: usize = DATA_HEADER_LEN + 4;
/// `CONNECT`/`ACCEPT` option: this end's data packets carry the data checksum.
pub const OPTION_DATA_CHECKSUM: u8 = 0x01;
/// IPv4's and UDP's headers in front of every packet, bytes.
pub const IPV4_UDP_LEN: usize = 20 + 8;
/// IPv6's and UDP's headers in front of every packet, bytes.
pub const IPV6_UDP_LEN: usize = 40 + 8;

/// The data header's length for a packet with `flags`.
pub fn data_header_len(flags: u16) -> usize {
    if flags & flags::DATA_CHECKSUM != 0 {
        DATA_HEADER_MAX
    } else {
        DATA_HEADER_LEN
    }
}

/// The payload that fills a datagram of `mtu` bytes behind `below` bytes of
/// lower headers ([`IPV4_UDP_LEN`], [`IPV6_UDP_LEN`]) and a data header
/// without the data checksum (an end that adds it carries 4 bytes less
/// payload); at least 1, at most what the set-up's 16-bit field carries.
pub fn payload_for_mtu(mtu: usize, below: usize) -> u32 {
    mtu.saturating_sub(below + DATA_HEADER_LEN)
        .clamp(1, usize::from(u16::MAX)) as u32
}

/// The stream offset whose low 32 bits are `low` nearest `near` (the next
/// byte a receiver expects): a data packet carries its offset modulo 2^32,
/// and an honest one lies less than 2^31 bytes either side of `near`.
pub fn widen_offset(low: u32, near: u64) -> u64 {
    let d = low.wrapping_sub(near as u32) as i32;
    near.saturating_add_signed(i64::from(d))
}
/// Length of a control packet without gaps.
pub const CONTROL_FIXED_LEN: usize = 40;
/// The most missing ranges one control packet carries.
pub const MAX_GAPS: usize = 64;
/// Length of a `CONNECT` without ports.
pub const CONNECT_FIXED_LEN: usize = 56;
/// Length of an `ACCEPT` without ports.
pub const ACCEPT_FIXED_LEN: usize = 40;
/// Length of a `RETRY`.
pub const RETRY_LEN: usize = 32;
/// Length of a `RESET`.
pub const RESET_LEN: usize = 20;
/// Length of a set-up cookie.
pub const COOKIE_LEN: usize = 16;
/// The most data sockets a connection may use.
pub const MAX_DATA_SOCKETS: usize = 16;

/// Flag bits of the common header.
pub mod flags {
    /// DATA: the data checksum field is valid (§3.3).
    pub const DATA_CHECKSUM: u16 = 0x0001;
    /// DATA: the stream ends with this packet.
    pub const FIN: u16 = 0x0002;
    /// DATA: this packet was sent before.
    pub const RETRANSMISSION: u16 = 0x0004;
    /// CONTROL: the receiver holds the whole stream up to its end.
    pub const FIN_SEEN: u16 = 0x0010;
    /// CONTROL: the receiver's window is in slow start (a sender that
    /// leaves it on the delay signal paces it).
    pub const SLOW_START: u16 = 0x0020;
}

/// Why bytes did not parse as a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The packet needs `need` bytes and fewer were given.
    #[error("packet needs {need} bytes")]
    Short {
        /// Bytes needed from the packet's first byte on.
        need: usize,
    },
    /// A field holds an impossible value (a count out of range, a length that
    /// disagrees with the datagram …).
    #[error("malformed packet")]
    Malformed,
    /// A version or type this implementation does not speak.
    #[error("unsupported version or type")]
    Unsupported,
    /// The mandatory header checksum does not match.
    #[error("bad header checksum")]
    HeaderChecksum,
    /// The optional data checksum is present and does not match.
    #[error("bad data checksum")]
    DataChecksum,
}

/// The packet types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A client asks for a connection.
    Connect = 1,
    /// The server asks the client to echo a cookie.
    Retry = 2,
    /// The server accepts a connection.
    Accept = 3,
    /// Acknowledgement, window and recovery requests.
    Control = 4,
    /// Stream data.
    Data = 5,
    /// The connection is aborted.
    Reset = 6,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Connect,
            2 => Kind::Retry,
            3 => Kind::Accept,
            4 => Kind::Control,
            5 => Kind::Data,
            6 => Kind::Reset,
            _ => return None,
        })
    }

    /// Whether this kind travels between control sockets (all but DATA).
    pub fn is_control(self) -> bool {
        self != Kind::Data
    }
}

/// XTP's 32-bit checksum (seed 001 §2.1, §3.3): the XOR of the 16-bit words
/// (column parity) in the high half and their rotated XOR (the accumulator
/// rotated left one bit before each word, a diagonal parity) in the low half.
/// An odd final byte is padded with zero. `chunks` may split the data
/// anywhere; the result is that of their concatenation.
pub fn xtp_checksum<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> u32 {
    let mut xor = 0u16;
    let mut rxor = 0u16;
    let mut pending: Option<u8> = None;
    let mut word = |w: u16| {
        xor ^= w;
        rxor = rxor.rotate_left(1) ^ w;
    };
    for chunk in chunks {
        let mut c = chunk;
        if let Some(hi) = pending.take() {
            match c.split_first() {
                Some((&lo, rest)) => {
                    word(u16::from_be_bytes([hi, lo]));
                    c = rest;
                }
                None => {
                    pending = Some(hi);
                    continue;
                }
            }
        }
        let mut pairs = c.chunks_exact(2);
        for p in &mut pairs {
            word(u16::from_be_bytes([p[0], p[1]]));
        }
        if let [last] = pairs.remainder() {
            pending = Some(*last);
        }
    }
    if let Some(hi) = pending {
        word(u16::from_be_bytes([hi, 0]));
    }
    (u32::from(xor) << 16) | u32::from(rxor)
}

/// The header checksum of `header` read with its checksum field zero; a
/// DATA header's payload length `len` is summed after it (not sent, but
/// covered). A length beyond 32 bits cannot match an honest packet.
fn header_sum(header: &[u8], len: Option<usize>) -> u32 {
    let len = len.map(|l| u32::try_from(l).unwrap_or(u32::MAX).to_be_bytes());
    xtp_checksum([
        &header[..4],
        &[0u8; 4][..],
        &header[8..],
        len.as_ref().map_or(&[][..], |l| &l[..]),
    ])
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// A checked view of a packet: made only by [`Packet::new_checked`], which
/// checks the whole header of the packet's kind is present, so no accessor
/// can read past the buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    kind: Kind,
    header_len: usize,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` after checking its version, type and that it holds the
    /// kind's whole header (with its gaps or ports).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < COMMON_LEN {
            return Err(WireError::Short { need: COMMON_LEN });
        }
        if b[0] != VERSION {
            return Err(WireError::Unsupported);
        }
        let kind = Kind::from_u8(b[1]).ok_or(WireError::Unsupported)?;
        let fixed = match kind {
            Kind::Connect => CONNECT_FIXED_LEN,
            Kind::Retry => RETRY_LEN,
            Kind::Accept => ACCEPT_FIXED_LEN,
            Kind::Control => CONTROL_FIXED_LEN,
            Kind::Data => data_header_len(be16(b, 2)),
            Kind::Reset => RESET_LEN,
        };
        if b.len() < fixed {
            return Err(WireError::Short { need: fixed });
        }
        let header_len = match kind {
            Kind::Connect | Kind::Accept => {
                let n = usize::from(b[36]);
                if n == 0 || n > MAX_DATA_SOCKETS {
                    return Err(WireError::Malformed);
                }
                fixed + 2 * n
            }
            Kind::Control => {
                let g = usize::from(b[29]);
                if g > MAX_GAPS {
                    return Err(WireError::Malformed);
                }
                fixed + 8 * g
            }
            _ => fixed,
        };
        if b.len() < header_len {
            return Err(WireError::Short { need: header_len });
        }
        // Every kind but DATA is all header: trailing bytes are a forgery or
        // a corruption (DATA's length is checked by its header checksum).
        if kind != Kind::Data && b.len() != header_len {
            return Err(WireError::Malformed);
        }
        Ok(Packet {
            buffer,
            kind,
            header_len,
        })
    }

    /// The packet's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The flags field.
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The header checksum field.
    pub fn header_checksum(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// The receiver's connection id.
    pub fn connection_id(&self) -> u64 {
        be64(self.buffer.as_ref(), 8)
    }

    /// Length of the header (the whole packet for all kinds but DATA).
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The bytes after the header: a DATA packet's payload, empty otherwise.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len..]
    }

    /// Whether the header checksum matches the header (and, for DATA, the
    /// payload's length).
    pub fn header_checksum_ok(&self) -> bool {
        let b = &self.buffer.as_ref()[..self.header_len];
        let len = (self.kind == Kind::Data).then(|| self.payload().len());
        header_sum(b, len) == self.header_checksum()
    }

    fn bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A parsed `CONNECT` or `ACCEPT`: the parameters of §2.1's set-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupRepr {
    /// The sender's own connection id (the one the peer must put in packets).
    pub own_id: u64,
    /// The sender's initial sequence number for the data it will send.
    pub isn: u32,
    /// Application buffer size, bytes.
    pub app_buffer: u32,
    /// Socket buffer size the sender obtained (read back), bytes.
    pub socket_buffer: u32,
    /// The most payload bytes a data packet may carry as the sender sees the
    /// path (at least 1): both ends send the smaller of theirs.
    pub max_payload: u16,
    /// The sender's data packets carry the data checksum.
    pub data_checksum: bool,
    /// The sender's data ports; their count is the number of data sockets.
    pub data_ports: Vec<u16>,
}

/// A parsed packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Repr {
    /// A connection request with its cookie (zeros on a first try).
    Connect {
        /// The client's parameters.
        setup: SetupRepr,
        /// The echoed cookie.
        cookie: [u8; COOKIE_LEN],
    },
    /// The server's cookie challenge, sent to connection id `to`.
    Retry {
        /// The client's connection id.
        to: u64,
        /// The cookie to echo.
        cookie: [u8; COOKIE_LEN],
    },
    /// The server's acceptance, sent to the client's connection id `to`.
    Accept {
        /// The client's connection id.
        to: u64,
        /// The server's parameters.
        setup: SetupRepr,
    },
    /// Acknowledgement, window and recovery requests.
    Control(ControlRepr),
    /// A data packet's header (the payload stays where it is).
    Data(DataRepr),
    /// The connection `to` is aborted.
    Reset {
        /// The receiver's connection id.
        to: u64,
        /// Why.
        reason: u32,
    },
}

/// Recovery requests a control packet carries (§3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recovery {
    /// No request: an acknowledgement.
    None,
    /// Send again everything from the next expected sequence number.
    GoBackN,
    /// Send again the missing ranges listed.
    Selective,
}

/// A parsed control packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlRepr {
    /// The data sender's connection id.
    pub to: u64,
    /// Flags ([`flags::FIN_SEEN`]).
    pub flags: u16,
    /// The next in-sequence data packet the receiver expects.
    pub next_expected: u32,
    /// The `tsval` echoed.
    pub ts_echo: u32,
    /// The receiver-driven congestion window, packets.
    pub cwnd: u32,
    /// The recovery request.
    pub recovery: Recovery,
    /// The control serial (wrapping).
    pub serial: u16,
    /// Stream bytes below this offset fit the receiver's buffers.
    pub limit: u64,
    /// Missing sequence ranges `[first, end)`.
    pub gaps: Vec<(u32, u32)>,
}

/// Where a DATA packet's payload belongs, read from its header without any
/// check: `(connection id, stream offset modulo 2^32)`, or `None` when the
/// bytes are no DATA header of exactly their length. A driver that received
/// the payload straight into an application buffer compares this with where
/// it put it; the header is checked afterwards by [`parse_data_header`].
pub fn data_place(header: &[u8]) -> Option<(u64, u32)> {
    if header.len() < DATA_HEADER_LEN
        || header[0] != VERSION
        || header[1] != Kind::Data as u8
        || header.len() != data_header_len(be16(header, 2))
    {
        return None;
    }
    Some((be64(header, 8), be32(header, 24)))
}

/// True when `b` has the shape of a whole data header on its own (version,
/// kind and the length its flags call for), without checking its sum: a
/// receiver that got header and payload as separate pieces tells so that
/// the header came apart whole; [`parse_data_header`] then checks it.
pub fn is_data_header(b: &[u8]) -> bool {
    b.len() >= COMMON_LEN
        && b[0] == VERSION
        && b[1] == Kind::Data as u8
        && b.len() == data_header_len(be16(b, 2))
}

/// Parses a DATA packet's header alone, its payload of `len` bytes lying
/// elsewhere (received straight into an application buffer): every check of
/// [`Packet::new_checked`] and [`Repr::parse`] but the data checksum, which
/// the caller makes where the payload lies ([`data_checksum_ok`]).
pub fn parse_data_header(header: &[u8], len: usize) -> Result<DataRepr, WireError> {
    if header.len() < DATA_HEADER_LEN {
        return Err(WireError::Short {
            need: DATA_HEADER_LEN,
        });
    }
    if header[0] != VERSION || header[1] != Kind::Data as u8 {
        return Err(WireError::Unsupported);
    }
    let flags = be16(header, 2);
    if header.len() != data_header_len(flags) {
        return Err(WireError::Malformed);
    }
    if header_sum(header, Some(len)) != be32(header, 4) {
        return Err(WireError::HeaderChecksum);
    }
    Ok(data_repr(header, len))
}

fn data_repr(b: &[u8], len: usize) -> DataRepr {
    DataRepr {
        to: be64(b, 8),
        flags: be16(b, 2),
        seq: be32(b, 16),
        tsval: be32(b, 20),
        offset: be32(b, 24),
        // The header checksum covered the length: an honest one fits.
        len: u32::try_from(len).unwrap_or(u32::MAX),
    }
}

/// Whether a DATA packet's data checksum (when its flag is set) matches
/// `payload`.
pub fn data_checksum_ok(header: &[u8], payload: &[u8]) -> bool {
    if header.len() < DATA_HEADER_LEN {
        return false;
    }
    be16(header, 2) & flags::DATA_CHECKSUM == 0
        || (header.len() >= DATA_HEADER_MAX && xtp_checksum([payload]) == be32(header, 28))
}

/// A parsed data header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRepr {
    /// The receiver's connection id.
    pub to: u64,
    /// Flags ([`flags::FIN`], [`flags::RETRANSMISSION`], [`flags::DATA_CHECKSUM`]).
    pub flags: u16,
    /// Packet sequence number.
    pub seq: u32,
    /// Sender's clock, microseconds.
    pub tsval: u32,
    /// Stream offset of the payload, modulo 2^32 ([`widen_offset`] gives
    /// the whole offset at the receiver).
    pub offset: u32,
    /// Payload length: not sent (the datagram's remainder), but covered by
    /// the header checksum; [`Repr::emit`] sums it, so it must be the
    /// payload's.
    pub len: u32,
}

impl Repr {
    /// Parses a checked packet; the header checksum must match, and a DATA
    /// packet carrying a data checksum must match it too.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, WireError> {
        if !p.header_checksum_ok() {
            return Err(WireError::HeaderChecksum);
        }
        let b = p.bytes();
        let to = p.connection_id();
        Ok(match p.kind() {
            Kind::Connect => {
                let mut cookie = [0u8; COOKIE_LEN];
                cookie.copy_from_slice(&b[40..56]);
                Repr::Connect {
                    setup: parse_setup(b, CONNECT_FIXED_LEN)?,
                    cookie,
                }
            }
            Kind::Accept => Repr::Accept {
                to,
                setup: parse_setup(b, ACCEPT_FIXED_LEN)?,
            },
            Kind::Retry => {
                let mut cookie = [0u8; COOKIE_LEN];
                cookie.copy_from_slice(&b[16..32]);
                Repr::Retry { to, cookie }
            }
            Kind::Control => {
                let recovery = match b[28] {
                    0 => Recovery::None,
                    1 => Recovery::GoBackN,
                    2 => Recovery::Selective,
                    _ => return Err(WireError::Malformed),
                };
                let gaps = (0..usize::from(b[29]))
                    .map(|i| {
                        let at = CONTROL_FIXED_LEN + 8 * i;
                        (be32(b, at), be32(b, at + 4))
                    })
                    .collect();
                Repr::Control(ControlRepr {
                    to,
                    flags: p.flags(),
                    next_expected: be32(b, 16),
                    ts_echo: be32(b, 20),
                    cwnd: be32(b, 24),
                    recovery,
                    serial: be16(b, 30),
                    limit: be64(b, 32),
                    gaps,
                })
            }
            Kind::Data => {
                if !data_checksum_ok(&b[..p.header_len()], p.payload()) {
                    return Err(WireError::DataChecksum);
                }
                Repr::Data(data_repr(b, p.payload().len()))
            }
            Kind::Reset => Repr::Reset {
                to,
                reason: be32(b, 16),
            },
        })
    }

    /// Appends the packet to `out`: for DATA, only its header, whose data
    /// checksum (when flagged) is computed over `payload`; other kinds ignore
    /// `payload`.
    pub fn emit<'a>(&self, out: &mut Vec<u8>, payload: impl IntoIterator<Item = &'a [u8]>) {
        let start = out.len();
        let (kind, flags, to) = match self {
            Repr::Connect { .. } => (Kind::Connect, 0, 0),
            Repr::Retry { to, .. } => (Kind::Retry, 0, *to),
            Repr::Accept { to, .. } => (Kind::Accept, 0, *to),
            Repr::Control(c) => (Kind::Control, c.flags, c.to),
            Repr::Data(d) => (Kind::Data, d.flags, d.to),
            Repr::Reset { to, .. } => (Kind::Reset, 0, *to),
        };
        out.push(VERSION);
        out.push(kind as u8);
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&[0u8; 4]);
        out.extend_from_slice(&to.to_be_bytes());
        match self {
            Repr::Connect { setup, cookie } => {
                emit_setup(out, setup, Some(cookie));
            }
            Repr::Accept { setup, .. } => emit_setup(out, setup, None),
            Repr::Retry { cookie, .. } => out.extend_from_slice(cookie),
            Repr::Control(c) => {
                let gaps = &c.gaps[..c.gaps.len().min(MAX_GAPS)];
                out.extend_from_slice(&c.next_expected.to_be_bytes());
                out.extend_from_slice(&c.ts_echo.to_be_bytes());
                out.extend_from_slice(&c.cwnd.to_be_bytes());
                out.push(match c.recovery {
                    Recovery::None => 0,
                    Recovery::GoBackN => 1,
                    Recovery::Selective => 2,
                });
                out.push(gaps.len() as u8);
                out.extend_from_slice(&c.serial.to_be_bytes());
                out.extend_from_slice(&c.limit.to_be_bytes());
                for (first, end) in gaps {
                    out.extend_from_slice(&first.to_be_bytes());
                    out.extend_from_slice(&end.to_be_bytes());
                }
            }
            Repr::Data(d) => {
                out.extend_from_slice(&d.seq.to_be_bytes());
                out.extend_from_slice(&d.tsval.to_be_bytes());
                out.extend_from_slice(&d.offset.to_be_bytes());
                if d.flags & flags::DATA_CHECKSUM != 0 {
                    out.extend_from_slice(&xtp_checksum(payload).to_be_bytes());
                }
            }
            Repr::Reset { reason, .. } => out.extend_from_slice(&reason.to_be_bytes()),
        }
        let len = match self {
            Repr::Data(d) => Some(d.len as usize),
            _ => None,
        };
        let sum = header_sum(&out[start..], len);
        out[start + 4..start + 8].copy_from_slice(&sum.to_be_bytes());
    }
}

fn parse_setup(b: &[u8], ports_at: usize) -> Result<SetupRepr, WireError> {
    let n = usize::from(b[36]);
    let max_payload = be16(b, 38);
    if max_payload == 0 {
        return Err(WireError::Malformed);
    }
    Ok(SetupRepr {
        own_id: be64(b, 16),
        isn: be32(b, 24),
        app_buffer: be32(b, 28),
        socket_buffer: be32(b, 32),
        max_payload,
        data_checksum: b[37] & OPTION_DATA_CHECKSUM != 0,
        data_ports: (0..n).map(|i| be16(b, ports_at + 2 * i)).collect(),
    })
}

fn emit_setup(out: &mut Vec<u8>, s: &SetupRepr, cookie: Option<&[u8; COOKIE_LEN]>) {
    let ports = &s.data_ports[..s.data_ports.len().min(MAX_DATA_SOCKETS)];
    out.extend_from_slice(&s.own_id.to_be_bytes());
    out.extend_from_slice(&s.isn.to_be_bytes());
    out.extend_from_slice(&s.app_buffer.to_be_bytes());
    out.extend_from_slice(&s.socket_buffer.to_be_bytes());
    out.push(ports.len() as u8);
    out.push(if s.data_checksum {
        OPTION_DATA_CHECKSUM
    } else {
        0
    });
    out.extend_from_slice(&s.max_payload.max(1).to_be_bytes());
    if let Some(c) = cookie {
        out.extend_from_slice(c);
    }
    for p in ports {
        out.extend_from_slice(&p.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(b: &[u8]) -> Result<Repr, WireError> {
        Repr::parse(&Packet::new_checked(b)?)
    }

    fn bytes(r: &Repr, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        r.emit(&mut v, [payload]);
        v.extend_from_slice(payload);
        v
    }

    fn samples() -> Vec<(Repr, Vec<u8>)> {
        let setup = SetupRepr {
            own_id: 0x0123_4567_89ab_cdef,
            isn: 77,
            app_buffer: 1 << 20,
            socket_buffer: 212_992,
            max_payload: 1444,
            data_checksum: true,
            data_ports: vec![4001, 4002],
        };
        vec![
            (
                Repr::Connect {
                    setup: setup.clone(),
                    cookie: [7; 16],
                },
                vec![],
            ),
            (
                Repr::Retry {
                    to: 5,
                    cookie: [9; 16],
                },
                vec![],
            ),
            (Repr::Accept { to: 5, setup }, vec![]),
            (
                Repr::Control(ControlRepr {
                    to: 9,
                    flags: flags::FIN_SEEN,
                    next_expected: u32::MAX,
                    ts_echo: 3,
                    cwnd: 64,
                    recovery: Recovery::Selective,
                    serial: 2,
                    limit: 1 << 40,
                    gaps: vec![(1, 3), (5, 6)],
                }),
                vec![],
            ),
            (
                Repr::Data(DataRepr {
                    to: 9,
                    flags: flags::DATA_CHECKSUM | flags::FIN,
                    seq: 10,
                    tsval: 11,
                    offset: 12,
                    len: 5,
                }),
                b"hello".to_vec(),
            ),
            (
                Repr::Data(DataRepr {
                    to: 9,
                    flags: flags::RETRANSMISSION,
                    seq: u32::MAX,
                    tsval: 0,
                    offset: u32::MAX,
                    len: 7,
                }),
                b"goodbye".to_vec(),
            ),
            (Repr::Reset { to: 1, reason: 0 }, vec![]),
        ]
    }

    #[test]
    fn every_kind_round_trips() {
        for (r, payload) in samples() {
            let b = bytes(&r, &payload);
            assert_eq!(parse(&b), Ok(r.clone()), "{r:?}");
            let p = Packet::new_checked(&b[..]).unwrap();
            assert_eq!(p.payload(), &payload[..]);
        }
    }

    #[test]
    fn the_set_up_never_amplifies() {
        // A RETRY answers any CONNECT and is smaller than the smallest one.
        const { assert!(RETRY_LEN < CONNECT_FIXED_LEN + 2) };
    }

    #[test]
    fn a_flipped_header_bit_fails_the_header_checksum() {
        for (r, payload) in samples() {
            let b = bytes(&r, &payload);
            let hl = Packet::new_checked(&b[..]).unwrap().header_len();
            for bit in [8 * 8, 8 * 16 + 3, 8 * hl - 1] {
                let mut c = b.clone();
                c[bit / 8] ^= 1 << (bit % 8);
                assert!(parse(&c).is_err(), "{r:?} bit {bit}");
            }
        }
    }

    #[test]
    fn a_flipped_payload_bit_fails_only_a_present_data_checksum() {
        let (r, payload) = samples().remove(4);
        let mut b = bytes(&r, &payload);
        assert_eq!(b.len(), DATA_HEADER_MAX + payload.len());
        b[DATA_HEADER_MAX + 1] ^= 0x10;
        assert_eq!(parse(&b), Err(WireError::DataChecksum));
        let Repr::Data(mut d) = r else { unreachable!() };
        d.flags = 0;
        let mut b = bytes(&Repr::Data(d), &payload);
        assert_eq!(b.len(), DATA_HEADER_LEN + payload.len());
        b[DATA_HEADER_LEN + 1] ^= 0x10;
        assert!(parse(&b).is_ok());
    }

    #[test]
    fn truncated_and_padded_packets_are_refused() {
        for (r, payload) in samples() {
            let b = bytes(&r, &payload);
            for cut in 0..b.len() {
                assert!(parse(&b[..cut]).is_err(), "{r:?} cut {cut}");
            }
            let mut longer = b.clone();
            longer.push(0);
            // A DATA packet's length is not sent, but its header checksum
            // covers it.
            let want = match r {
                Repr::Data(_) => WireError::HeaderChecksum,
                _ => WireError::Malformed,
            };
            assert_eq!(parse(&longer), Err(want), "{r:?}");
        }
    }

    #[test]
    fn a_data_header_fits_a_full_payload_in_a_1500_byte_mtu() {
        // 33 bytes or less is what a payload of 95% of each Ethernet frame
        // needs at MTU 1500 (1,514-byte frames).
        const { assert!(DATA_HEADER_LEN <= 33) };
        let mss = payload_for_mtu(1500, IPV4_UDP_LEN);
        assert_eq!(mss, 1444);
        assert_eq!(mss as usize + DATA_HEADER_LEN + IPV4_UDP_LEN, 1500);
        assert_eq!(payload_for_mtu(1500, IPV6_UDP_LEN), 1424);
        assert_eq!(payload_for_mtu(20, IPV4_UDP_LEN), 1);
        assert_eq!(payload_for_mtu(1 << 20, IPV4_UDP_LEN), 65_535);
    }

    #[test]
    fn the_offset_is_widened_to_the_nearest_of_the_expected() {
        assert_eq!(widen_offset(5, 0), 5);
        assert_eq!(widen_offset(0x10, 0x1_0000_0000), 0x1_0000_0010);
        // A retransmission just before a wrap, heard just after it.
        assert_eq!(widen_offset(0xffff_fff0, 0x1_0000_0010), 0xffff_fff0);
        // Just past a wrap, heard just before it.
        assert_eq!(widen_offset(0x10, 0x2_ffff_fff0), 0x3_0000_0010);
        // Nothing is before the stream's start.
        assert_eq!(widen_offset(0xffff_fff0, 0), 0);
        let near = 0x7_1234_5678u64;
        for d in [-(1i64 << 31), -1, 0, 1, (1 << 31) - 1] {
            let o = near.wrapping_add_signed(d);
            assert_eq!(widen_offset(o as u32, near), o, "{d}");
        }
    }

    #[test]
    fn a_set_up_without_a_payload_size_is_refused() {
        let (r, _) = samples().remove(0);
        let mut b = bytes(&r, &[]);
        b[38..40].copy_from_slice(&[0, 0]);
        let sum = header_sum(&b, None);
        b[4..8].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(parse(&b), Err(WireError::Malformed));
    }

    #[test]
    fn a_scattered_header_is_checked_like_the_whole_packet() {
        for (r, payload) in samples() {
            let Repr::Data(d) = r else { continue };
            let b = bytes(&r, &payload);
            let h = &b[..b.len() - payload.len()];
            assert_eq!(data_place(h), Some((d.to, d.offset)));
            assert_eq!(parse_data_header(h, payload.len()), Ok(d));
            assert!(data_checksum_ok(h, &payload));
            // Another length, another header length: refused.
            assert_eq!(
                parse_data_header(h, payload.len() + 1),
                Err(WireError::HeaderChecksum)
            );
            assert_eq!(data_place(&b[..h.len() + 1]), None);
            assert!(parse_data_header(&b[..h.len() + 1], payload.len() - 1).is_err());
            // The shape alone: the whole header, not a byte more or less.
            assert!(is_data_header(h));
            assert!(!is_data_header(&b[..h.len() + 1]));
            assert!(!is_data_header(&h[..h.len() - 1]));
        }
        for (r, payload) in samples() {
            if !matches!(r, Repr::Data(_)) {
                assert!(!is_data_header(&bytes(&r, &payload)));
            }
        }
    }

    #[test]
    fn xtp_checksum_is_column_and_diagonal_parity() {
        assert_eq!(xtp_checksum([&[0x12, 0x34][..]]), 0x1234_1234);
        // rxor: rotl(0x1234,1)=0x2468, ^0x00ff = 0x2497; xor: 0x12cb.
        assert_eq!(xtp_checksum([&[0x12, 0x34, 0x00, 0xff][..]]), 0x12cb_2497);
        assert_eq!(xtp_checksum([&[0xab][..]]), 0xab00_ab00);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..700)) {
            let _ = parse(&b);
        }

        #[test]
        fn random_bytes_behind_a_valid_prefix_never_panic(
            kind in 1u8..=6,
            b in proptest::collection::vec(any::<u8>(), 0..700),
        ) {
            let mut v = vec![VERSION, kind];
            v.extend_from_slice(&b);
            let _ = parse(&v);
        }

        #[test]
        fn any_data_packet_round_trips_whole_and_scattered(
            to in 1u64..,
            fl in 0u16..8,
            seq in any::<u32>(),
            tsval in any::<u32>(),
            offset in any::<u32>(),
            payload in proptest::collection::vec(any::<u8>(), 0..1500),
        ) {
            let d = DataRepr { to, flags: fl, seq, tsval, offset, len: payload.len() as u32 };
            let b = bytes(&Repr::Data(d), &payload);
            let hl = data_header_len(fl);
            prop_assert_eq!(b.len(), hl + payload.len());
            prop_assert_eq!(parse(&b), Ok(Repr::Data(d)));
            prop_assert_eq!(parse_data_header(&b[..hl], payload.len()), Ok(d));
            prop_assert_eq!(data_place(&b[..hl]), Some((to, offset)));
        }

        #[test]
        fn the_checksum_ignores_how_data_is_split(
            b in proptest::collection::vec(any::<u8>(), 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..4),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(b.len())).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts {
                pieces.push(&b[at..c]);
                at = c;
            }
            pieces.push(&b[at..]);
            prop_assert_eq!(xtp_checksum(pieces), xtp_checksum([&b[..]]));
        }
    }
}
