//! TCP options (RFC 9293 §3.1): maximum segment size, window scale and
//! timestamps (RFC 7323), SACK-permitted and SACK blocks (RFC 2018).
//!
//! Parsing never fails: RFC 9293 §3.1 asks a receiver to be ready for any
//! option, and an option whose length is impossible ends the parse, keeping
//! what came before (as Linux does), so that one bad option cannot make a
//! segment unreadable. Options of the wrong length for their kind, and kinds
//! we do not know, are skipped.

use super::seq::Seq;

/// End of option list.
pub const KIND_EOL: u8 = 0;
/// No-operation (padding).
pub const KIND_NOP: u8 = 1;
/// Maximum segment size.
pub const KIND_MSS: u8 = 2;
/// Window scale.
pub const KIND_WINDOW_SCALE: u8 = 3;
/// SACK permitted.
pub const KIND_SACK_PERMITTED: u8 = 4;
/// SACK blocks.
pub const KIND_SACK: u8 = 5;
/// Timestamps.
pub const KIND_TIMESTAMP: u8 = 8;

/// The largest shift a window scale option may ask for (RFC 7323 §2.3).
pub const MAX_WINDOW_SCALE: u8 = 14;

/// Most option bytes a header has room for.
pub const MAX_OPTIONS_LEN: usize = 40;

/// Most SACK blocks an option can carry.
pub const MAX_SACK_BLOCKS: usize = 4;

/// A timestamps option (RFC 7323 §3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timestamp {
    /// TSval: the sender's clock.
    pub val: u32,
    /// TSecr: the echoed TSval.
    pub ecr: u32,
}

/// Up to four SACK blocks, each `[left, right)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlocks {
    blocks: [(Seq, Seq); MAX_SACK_BLOCKS],
    len: u8,
}

impl SackBlocks {
    /// Adds a block; blocks beyond four are ignored.
    pub fn push(&mut self, left: Seq, right: Seq) {
        if usize::from(self.len) < MAX_SACK_BLOCKS {
            self.blocks[usize::from(self.len)] = (left, right);
            self.len += 1;
        }
    }

    /// The blocks, first first.
    pub fn as_slice(&self) -> &[(Seq, Seq)] {
        &self.blocks[..usize::from(self.len)]
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps at most `n` blocks.
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n.min(MAX_SACK_BLOCKS) as u8);
    }
}

/// The options of one segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size (SYN only).
    pub mss: Option<u16>,
    /// Window scale shift (SYN only), capped at 14.
    pub window_scale: Option<u8>,
    /// SACK permitted (SYN only).
    pub sack_permitted: bool,
    /// Timestamps.
    pub timestamp: Option<Timestamp>,
    /// SACK blocks.
    pub sack: SackBlocks,
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl TcpOptions {
    /// Reads the options area of a header.
    pub fn parse(b: &[u8]) -> TcpOptions {
        // The layout of nearly every segment of a connection with
        // timestamps: NOP, NOP, timestamp (RFC 7323 Appendix A, what Van
        // Jacobson's header prediction looks for), read in one step.
        if let Some(&[KIND_NOP, KIND_NOP, KIND_TIMESTAMP, 10, ref ts @ ..]) =
            b.first_chunk::<12>().filter(|_| b.len() == 12)
        {
            return TcpOptions {
                timestamp: Some(Timestamp {
                    val: be32(&ts[..4]),
                    ecr: be32(&ts[4..]),
                }),
                ..TcpOptions::default()
            };
        }
        Self::parse_each(b)
    }

    /// Parses option by option.
    fn parse_each(mut b: &[u8]) -> TcpOptions {
        let mut o = TcpOptions::default();
        while let Some(&kind) = b.first() {
            match kind {
                KIND_EOL => break,
                KIND_NOP => {
                    b = &b[1..];
                    continue;
                }
                _ => {}
            }
            let Some(&len) = b.get(1) else { break };
            let len = usize::from(len);
            if len < 2 || len > b.len() {
                break;
            }
            let body = &b[2..len];
            match (kind, body.len()) {
                (KIND_MSS, 2) => o.mss = Some(u16::from_be_bytes([body[0], body[1]])),
                // RFC 7323 §2.3: a shift above 14 is used as 14.
                (KIND_WINDOW_SCALE, 1) => o.window_scale = Some(body[0].min(MAX_WINDOW_SCALE)),
                (KIND_SACK_PERMITTED, 0) => o.sack_permitted = true,
                (KIND_TIMESTAMP, 8) => {
                    o.timestamp = Some(Timestamp {
                        val: be32(body),
                        ecr: be32(&body[4..]),
                    })
                }
                (KIND_SACK, n) if n > 0 && n % 8 == 0 => {
                    for block in body.chunks_exact(8) {
                        o.sack.push(Seq(be32(block)), Seq(be32(&block[4..])));
                    }
                }
                _ => {}
            }
            b = &b[len..];
        }
        o
    }

    /// Bytes the options take when written, padded to a multiple of four.
    pub fn len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4;
        }
        n += match (self.sack_permitted, self.timestamp.is_some()) {
            (true, true) => 12,
            (false, true) => 12,
            (true, false) => 4,
            (false, false) => 0,
        };
        if !self.sack.is_empty() {
            n += 4 + 8 * self.sack.as_slice().len();
        }
        n
    }

    /// True when there are no options.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the options in Linux's layout (MSS, SACK-permitted with
    /// timestamps, NOP and window scale; NOPs align timestamps and SACK
    /// blocks on 32 bits) and returns the bytes written. `out` must hold
    /// [`len`](Self::len) bytes.
    pub fn write(&self, out: &mut [u8]) -> usize {
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        if let Some(mss) = self.mss {
            let m = mss.to_be_bytes();
            put(&[KIND_MSS, 4, m[0], m[1]]);
        }
        match (self.sack_permitted, self.timestamp) {
            (true, Some(ts)) => {
                put(&[KIND_SACK_PERMITTED, 2, KIND_TIMESTAMP, 10]);
                put(&ts.val.to_be_bytes());
                put(&ts.ecr.to_be_bytes());
            }
            (false, Some(ts)) => {
                put(&[KIND_NOP, KIND_NOP, KIND_TIMESTAMP, 10]);
                put(&ts.val.to_be_bytes());
                put(&ts.ecr.to_be_bytes());
            }
            (true, None) => put(&[KIND_NOP, KIND_NOP, KIND_SACK_PERMITTED, 2]),
            (false, None) => {}
        }
        if let Some(shift) = self.window_scale {
            put(&[KIND_NOP, KIND_WINDOW_SCALE, 3, shift]);
        }
        if !self.sack.is_empty() {
            let blocks = self.sack.as_slice();
            put(&[KIND_NOP, KIND_NOP, KIND_SACK, (2 + 8 * blocks.len()) as u8]);
            for (l, r) in blocks {
                put(&l.0.to_be_bytes());
                put(&r.0.to_be_bytes());
            }
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syn_options() -> TcpOptions {
        TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamp: Some(Timestamp { val: 1, ecr: 0 }),
            sack: SackBlocks::default(),
        }
    }

    #[test]
    fn syn_options_round_trip_in_twenty_bytes() {
        let o = syn_options();
        let mut b = [0u8; MAX_OPTIONS_LEN];
        let n = o.write(&mut b);
        assert_eq!((n, o.len()), (20, 20));
        assert_eq!(TcpOptions::parse(&b[..n]), o);
    }

    #[test]
    fn sack_blocks_round_trip_beside_timestamps() {
        let mut o = TcpOptions {
            timestamp: Some(Timestamp {
                val: 0xdead_beef,
                ecr: 7,
            }),
            ..TcpOptions::default()
        };
        for i in 0..3u32 {
            o.sack.push(Seq(i * 100), Seq(i * 100 + 50));
        }
        let mut b = [0u8; MAX_OPTIONS_LEN];
        let n = o.write(&mut b);
        assert_eq!(n, 12 + 4 + 24);
        assert_eq!(n % 4, 0);
        assert_eq!(TcpOptions::parse(&b[..n]), o);
    }

    #[test]
    fn a_bad_length_ends_the_parse_keeping_what_came_before() {
        let b = [KIND_MSS, 4, 0x05, 0xb4, KIND_WINDOW_SCALE, 0, 9, 9];
        let o = TcpOptions::parse(&b);
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.window_scale, None);
        let past_end = [KIND_NOP, KIND_TIMESTAMP, 10, 1, 2];
        assert_eq!(TcpOptions::parse(&past_end), TcpOptions::default());
    }

    #[test]
    fn wrong_sized_and_unknown_options_are_skipped() {
        let b = [
            KIND_MSS,
            3,
            1,
            30,
            4,
            1,
            2,
            KIND_SACK,
            5,
            0,
            0,
            0,
            KIND_SACK_PERMITTED,
            2,
        ];
        let o = TcpOptions::parse(&b);
        assert_eq!(o.mss, None);
        assert!(o.sack.is_empty());
        assert!(o.sack_permitted, "parsing went on past the skipped options");
    }

    #[test]
    fn the_timestamp_layout_reads_as_option_by_option() {
        let ts = Timestamp {
            val: 0x0102_0304,
            ecr: 0xfffe_fdfc,
        };
        let o = TcpOptions {
            timestamp: Some(ts),
            ..TcpOptions::default()
        };
        let mut b = [0u8; MAX_OPTIONS_LEN];
        let n = o.write(&mut b);
        assert_eq!(n, 12);
        assert_eq!(TcpOptions::parse(&b[..n]), o);
        assert_eq!(TcpOptions::parse(&b[..n]), TcpOptions::parse_each(&b[..n]));
        // Near misses take the general path and read the same as it.
        for (at, byte) in [(0, KIND_EOL), (1, KIND_EOL), (2, KIND_MSS), (3, 12), (3, 9)] {
            let mut c = b;
            c[at] = byte;
            assert_eq!(TcpOptions::parse(&c[..n]), TcpOptions::parse_each(&c[..n]));
        }
        for len in [11, 13, 16] {
            assert_eq!(
                TcpOptions::parse(&b[..len]),
                TcpOptions::parse_each(&b[..len])
            );
        }
    }

    #[test]
    fn a_window_scale_above_fourteen_is_taken_as_fourteen() {
        let o = TcpOptions::parse(&[KIND_WINDOW_SCALE, 3, 20]);
        assert_eq!(o.window_scale, Some(14));
    }
}
