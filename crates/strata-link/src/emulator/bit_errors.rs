//! Bit errors: every bit of a frame flipped independently with probability `ber`.
//!
//! Drawing once per bit would cost 12,000 draws for a full-size frame at the rates
//! that matter (1e-8 and below). The gap between flipped bits of a Bernoulli
//! sequence is geometric, so one draw finds the next flipped bit: the same
//! distribution at one draw per error plus one per frame.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use strata_core::Message;

/// How many good bits come before the next flipped one.
fn gap(ber: f64, rng: &mut ChaCha8Rng) -> u64 {
    if ber >= 1.0 {
        return 0;
    }
    // 1 − U lies in (0, 1], so the logarithm is finite; ln_1p keeps tiny rates
    // exact. A float too large for u64 saturates, which means "no more errors".
    let u = 1.0 - rng.random::<f64>();
    (u.ln() / (-ber).ln_1p()).floor() as u64
}

/// Flips bits of `frame` (bit 0 is the most significant bit of byte 0) and
/// returns how many. A frame without errors is not touched; one with errors is
/// changed in place where it holds the only reference to its bytes, and copied
/// where they are shared (a sender's retransmission copy must stay intact).
pub(crate) fn flip_bits(frame: &mut Message, ber: f64, rng: &mut ChaCha8Rng) -> u64 {
    let bits = frame.len() as u64 * 8;
    let mut next = gap(ber, rng);
    if next >= bits {
        return 0;
    }
    let mut flipped = 0;
    let mut base = 0u64;
    frame.for_each_chunk_mut(|chunk| {
        let end = base + chunk.len() as u64 * 8;
        while next < end {
            let bit = next - base;
            chunk[(bit / 8) as usize] ^= 0x80 >> (bit % 8);
            flipped += 1;
            next = next.saturating_add(1).saturating_add(gap(ber, rng));
        }
        base = end;
    });
    flipped
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_bit_error_rate_of_one_flips_every_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut m = Message::from_slice(&[0x00, 0xff]);
        m.append_bytes(bytes::Bytes::from_static(&[0x0f]));
        assert_eq!(flip_bits(&mut m, 1.0, &mut rng), 24);
        assert_eq!(m.to_vec(), [0xff, 0x00, 0xf0]);
    }

    #[test]
    fn a_zero_rate_and_an_empty_frame_flip_nothing() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut m = Message::from_slice(b"data");
        assert_eq!(flip_bits(&mut m, 0.0, &mut rng), 0);
        assert_eq!(flip_bits(&mut Message::new(), 0.5, &mut rng), 0);
        assert_eq!(m.to_vec(), b"data");
    }
}
