//! The datagrams of a measured transfer ([`udp_blast`](super::udp_blast) to
//! [`udp_sink`](super::udp_sink)): each one says which transfer and which
//! sequence number it is, and the rest of its bytes are a function of those,
//! so the receiver checks every byte of every datagram without the sender
//! telling it anything else.
//!
//! ```text
//! 0      4        8                16
//! +------+--------+----------------+------------------------------+
//! | STRB | run id | sequence (u64) | pattern(run, seq) …          |
//! +------+--------+----------------+------------------------------+
//! ```
//!
//! Both ends also fold each datagram's 64-bit FNV-1a hash into a sum, an
//! order-independent digest of everything sent or received intact: equal sums
//! mean the same datagrams arrived, whatever their order.

use bytes::{BufMut, Bytes, BytesMut};

/// The first four bytes of every transfer datagram.
pub const MAGIC: [u8; 4] = *b"STRB";

/// The header: magic, run id, sequence number.
pub const HEADER_LEN: usize = 16;

/// What a received datagram is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Datagram `seq` of the run, every byte as sent.
    Intact(u64),
    /// A datagram of the run whose bytes differ from what was sent.
    Corrupt(u64),
    /// Not a datagram of this run.
    Foreign,
}

/// Makes datagram `seq` of run `run`, `size` bytes long (at least the header).
pub fn datagram(run: u32, seq: u64, size: usize) -> Bytes {
    let size = size.max(HEADER_LEN);
    let mut b = BytesMut::with_capacity(size);
    b.put_slice(&MAGIC);
    b.put_u32(run);
    b.put_u64(seq);
    let mut state = seed(run, seq);
    while b.len() < size {
        let word = next(&mut state).to_be_bytes();
        let n = (size - b.len()).min(8);
        b.put_slice(&word[..n]);
    }
    b.freeze()
}

/// Checks a received datagram against run `run`.
pub fn check(run: u32, chunks: impl IntoIterator<Item = impl AsRef<[u8]>>) -> Check {
    let mut header = [0u8; HEADER_LEN];
    let mut got = 0;
    let mut state = 0;
    let mut word = [0u8; 8];
    let mut pos = 0usize;
    let mut seq = 0;
    let mut intact = true;
    for chunk in chunks {
        for &byte in chunk.as_ref() {
            if got < HEADER_LEN {
                header[got] = byte;
                got += 1;
                if got == HEADER_LEN {
                    if header[..4] != MAGIC
                        || u32::from_be_bytes([header[4], header[5], header[6], header[7]]) != run
                    {
                        return Check::Foreign;
                    }
                    seq = u64::from_be_bytes(header[8..16].try_into().unwrap_or_default());
                    state = seed(run, seq);
                }
                continue;
            }
            if pos.is_multiple_of(8) {
                word = next(&mut state).to_be_bytes();
            }
            intact &= byte == word[pos % 8];
            pos += 1;
        }
    }
    match (got == HEADER_LEN, intact) {
        (false, _) => Check::Foreign,
        (true, true) => Check::Intact(seq),
        (true, false) => Check::Corrupt(seq),
    }
}

/// The 64-bit FNV-1a hash of a datagram given in chunks.
pub fn hash(chunks: impl IntoIterator<Item = impl AsRef<[u8]>>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for chunk in chunks {
        for &b in chunk.as_ref() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn seed(run: u32, seq: u64) -> u64 {
    (u64::from(run) << 32) ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// SplitMix64: a fast generator whose every output depends on the whole state.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_checks_intact_in_any_chunking_and_names_its_sequence() {
        let d = datagram(7, 42, 1400);
        assert_eq!(d.len(), 1400);
        assert_eq!(check(7, [&d[..]]), Check::Intact(42));
        assert_eq!(check(7, [&d[..3], &d[3..20], &d[20..]]), Check::Intact(42));
        assert_eq!(hash([&d[..]]), hash([&d[..700], &d[700..]]));
        assert_ne!(hash([&d[..]]), hash([&datagram(7, 43, 1400)[..]]));
    }

    #[test]
    fn a_flipped_bit_a_cut_or_another_run_is_noticed() {
        let d = datagram(7, 42, 200);
        let mut bad = d.to_vec();
        bad[150] ^= 0x10;
        assert_eq!(check(7, [&bad[..]]), Check::Corrupt(42));
        assert_eq!(check(8, [&d[..]]), Check::Foreign);
        assert_eq!(check(7, [&d[..10]]), Check::Foreign);
        assert_eq!(check(7, [&b"hello from nc\n"[..]]), Check::Foreign);
    }
}
