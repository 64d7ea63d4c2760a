//! The Internet checksum (RFC 1071): the ones'-complement sum of 16-bit words,
//! used by IPv4, ICMP, UDP and TCP, and as an ILP data-manipulation stage.
//!
//! [`Checksum`] accumulates over any number of chunks of any lengths, carrying an
//! odd byte across chunk boundaries, so a message's segments can be summed in
//! place without gathering them.

use std::net::Ipv4Addr;

/// Bytes summed into 32-bit accumulators before they are widened: the sums of
/// 2¹⁴ words' upper and lower halves (64 KiB) stay below 2³².
const BLOCK: usize = 1 << 16;

/// Adds `data` to a running 64-bit sum of big-endian 16-bit words. `data` must
/// start on an even offset of the summed byte string.
#[inline]
fn add_words(sum: u64, data: &[u8]) -> u64 {
    let (words, tail) = data.as_chunks::<4>();
    let mut s = if data.len() >= 64 {
        // The bulk of a segment, summed in native byte order: summing in
        // either order and swapping the folded result is the same sum (RFC
        // 1071 §2(B)). Each 32-bit word is two 16-bit halves; instead of
        // masking and adding both, the block keeps the wrapping sum of the
        // whole words and the sum of the upper halves: the lower halves' sum
        // is the first less the second shifted up, exact while it stays below
        // 2³² (a block's 2¹⁴ words give at most 2¹⁴ × 0xffff). The compiler
        // turns each into 16-byte vector adds: a load, two adds and a shift
        // per 16 bytes, a third fewer instructions than mask-and-add.
        let mut native = 0u64;
        for block in words.chunks(BLOCK / 4) {
            let mut all = 0u32;
            let mut upper = 0u32;
            for w in block {
                let x = u32::from_ne_bytes(*w);
                all = all.wrapping_add(x);
                upper += x >> 16;
            }
            let lower = all.wrapping_sub(upper << 16);
            native += u64::from(lower) + u64::from(upper);
        }
        u64::from(u16::from_be(fold(native)))
    } else {
        // A header or a small datagram (fewer than 16 words): whole 32-bit
        // big-endian words into a 64-bit sum, which cannot overflow, instead
        // of a carry per 16-bit word; folding later gives the same sum (§2(C)).
        words
            .iter()
            .map(|w| u64::from(u32::from_be_bytes(*w)))
            .sum()
    };
    if let [a, b, ..] = *tail {
        s += u64::from(u16::from_be_bytes([a, b]));
    }
    if tail.len() % 2 == 1 {
        s += u64::from(tail[tail.len() - 1]) << 8;
    }
    let (s, carry) = sum.overflowing_add(s);
    s + u64::from(carry)
}

/// Folds a 64-bit ones'-complement sum to 16 bits in a fixed number of steps
/// (no data-dependent loop): 64 → 33 → 17 → 16 bits, the last step absorbing
/// the final carry.
#[inline]
fn fold(sum: u64) -> u16 {
    let s = (sum & 0xffff_ffff) + (sum >> 32);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// A running Internet checksum over chunks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Checksum {
    sum: u64,
    /// A byte left over from an odd-length chunk, waiting for its partner.
    odd: Option<u8>,
}

impl Checksum {
    /// A fresh checksum.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next chunk of the byte string.
    #[inline]
    pub fn add(&mut self, mut data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if let Some(hi) = self.odd.take() {
            // The pending byte and this chunk's first make one word.
            self.sum += u64::from(u16::from_be_bytes([hi, data[0]]));
            data = &data[1..];
        }
        if data.len() % 2 == 1
            && let [rest @ .., last] = data
        {
            self.odd = Some(*last);
            data = rest;
        }
        self.sum = add_words(self.sum, data);
    }

    /// Adds a 16-bit word (a pseudo-header field) at an even position.
    #[inline]
    pub fn add_u16(&mut self, w: u16) {
        match self.odd {
            None => self.sum += u64::from(w),
            Some(_) => self.add(&w.to_be_bytes()),
        }
    }

    /// Adds the IPv4 pseudo-header of UDP and TCP (RFC 768, RFC 9293 §3.1). Its
    /// six 16-bit words are added directly: it sits at an even position, so any
    /// odd byte pending from earlier data would be a caller's mistake, and the
    /// order of ones'-complement addition does not matter (RFC 1071 §2).
    #[inline]
    pub fn add_pseudo_header(&mut self, src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u16) {
        let word = |a: [u8; 4]| {
            u64::from(u32::from_be_bytes(a) >> 16) + u64::from(u32::from_be_bytes(a) & 0xffff)
        };
        self.sum += word(src.octets()) + word(dst.octets()) + u64::from(proto) + u64::from(len);
    }

    /// The folded ones'-complement sum (not yet complemented).
    #[inline]
    pub fn sum(&self) -> u16 {
        let mut s = self.sum;
        if let Some(hi) = self.odd {
            s = add_words(s, &[hi]);
        }
        fold(s)
    }

    /// The checksum to put in a header: the complement of the sum.
    #[inline]
    pub fn finish(&self) -> u16 {
        !self.sum()
    }
}

/// The ones'-complement sum of a UDP or TCP segment (RFC 768, RFC 9293 §3.1):
/// the IPv4 pseudo-header for `proto` and `length`, then `chunks`, the header
/// (checksum field as it is) and data in any number of pieces.
#[inline]
pub fn transport<'a>(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    length: usize,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Checksum {
    let mut c = Checksum::new();
    c.add_pseudo_header(src, dst, proto, length.min(usize::from(u16::MAX)) as u16);
    for chunk in chunks {
        c.add(chunk);
    }
    c
}

/// The checksum of one byte string.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(add_words(0, data))
}

/// True when `data`, checksum field included, sums to all ones (RFC 1071 §1).
#[inline]
pub fn verifies(data: &[u8]) -> bool {
    fold(add_words(0, data)) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sums_to_the_published_value() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        let mut c = Checksum::new();
        c.add(&data);
        assert_eq!(c.sum(), 0xddf2);
    }

    #[test]
    fn chunking_at_odd_boundaries_gives_the_same_sum() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let whole = checksum(&data);
        for cut in [1, 3, 500, 999] {
            let mut c = Checksum::new();
            c.add(&data[..cut]);
            c.add(&data[cut..cut + 1]);
            c.add(&data[cut + 1..]);
            assert_eq!(c.finish(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn folding_matches_repeated_end_around_carries() {
        let slow = |mut s: u64| {
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        };
        for s in [
            0,
            1,
            0xffff,
            0x1_0000,
            0xffff_ffff,
            0x1_ffff_fffe,
            u64::MAX,
            0x8000_0000_0000_fffe,
        ] {
            assert_eq!(fold(s), slow(s), "{s:#x}");
        }
    }

    #[test]
    fn the_pseudo_header_sums_like_its_bytes() {
        let (src, dst) = (
            Ipv4Addr::new(198, 18, 255, 1),
            Ipv4Addr::new(198, 19, 0, 254),
        );
        let mut direct = Checksum::new();
        direct.add_pseudo_header(src, dst, 17, 0xfff1);
        let mut bytes = Checksum::new();
        bytes.add(&src.octets());
        bytes.add(&dst.octets());
        bytes.add(&[0, 17, 0xff, 0xf1]);
        assert_eq!(direct.sum(), bytes.sum());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_in_any_chunks_sum_as_rfc_1071_defines(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..2000),
            cuts in proptest::collection::vec(0usize..2000, 0..4),
        ) {
            // The definition: 16-bit big-endian words, end-around carry, an odd
            // last byte padded with zero.
            let mut slow: u32 = 0;
            for w in data.chunks(2) {
                slow += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
                slow = (slow & 0xffff) + (slow >> 16);
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let mut c = Checksum::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain([data.len()]) {
                c.add(&data[at..cut]);
                at = cut;
            }
            // 0 and 0xffff are the two zeros of ones' complement; the fast
            // path may reach either only for data that sums to zero.
            let ours = c.sum();
            proptest::prop_assert!(
                ours == slow as u16 || (ours.is_multiple_of(0xffff) && slow.is_multiple_of(0xffff)),
                "ours {ours:#x} definition {slow:#x}"
            );
        }
    }

    #[test]
    fn all_ones_over_several_blocks_does_not_overflow_a_lane() {
        // The worst case for the 32-bit lanes: every word 0xffff, over more
        // than one block and an odd tail. Each 0xffff word is a ones'-complement
        // zero, so the sum is 0xffff plus the tail byte's weight.
        for len in [BLOCK - 2, BLOCK, BLOCK + 6, 3 * BLOCK + 1] {
            let data = vec![0xff; len];
            let mut definition: u64 = 0;
            for w in data.chunks(2) {
                definition += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            }
            assert_eq!(fold(add_words(0, &data)), fold(definition), "{len} bytes");
        }
    }

    #[test]
    fn a_header_with_its_checksum_verifies() {
        // An IPv4 header with its checksum field zeroed, then filled in.
        let mut h = [
            0x45, 0, 0, 0x54, 0, 0, 0x40, 0, 0x40, 1, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(verifies(&h));
        h[3] ^= 1;
        assert!(!verifies(&h));
    }
}
