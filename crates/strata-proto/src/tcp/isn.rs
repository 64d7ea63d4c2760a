//! Initial sequence numbers (RFC 6528): ISN = M + F(localip, localport,
//! remoteip, remoteport, secretkey), where M is a clock ticking every 4 µs
//! (RFC 9293 §3.4.1) and F a keyed pseudo-random function, so an off-path
//! attacker cannot guess the ISN of a connection, while a new incarnation of a
//! connection still starts above the old one's numbers.
//!
//! F is SipHash-2-4 (Aumasson and Bernstein, 2012), the keyed PRF Linux uses
//! for the same job (`secure_tcp_seq`). RFC 6528 §3 asks for "MD5 or better";
//! SipHash is a PRF designed for exactly this (short inputs, secret 128-bit
//! key) and needs no dependency. The key comes from the engine's random
//! numbers once per protocol instance.

use std::net::Ipv4Addr;

use strata_core::Instant;

use super::seq::Seq;

/// The ISN generator of one TCP instance.
#[derive(Clone, Debug)]
pub struct IsnGenerator {
    key: (u64, u64),
}

impl IsnGenerator {
    /// A generator with the secret key `(k0, k1)`.
    pub fn new(k0: u64, k1: u64) -> Self {
        IsnGenerator { key: (k0, k1) }
    }

    /// The ISN for a connection from `local` to `remote` at engine time `now`.
    pub fn isn(&self, local: (Ipv4Addr, u16), remote: (Ipv4Addr, u16), now: Instant) -> Seq {
        let f = self.hash(0, local, remote) as u32;
        let m = (now.as_nanos() / 4_000) as u32;
        Seq(m.wrapping_add(f))
    }

    /// The offset of a connection's timestamp clock (RFC 7323 §5.4): random
    /// per 4-tuple, yet the same for every incarnation of one, so timestamps
    /// keep rising across them and can tell a new SYN from an old duplicate
    /// in TIME-WAIT (RFC 6191), as Linux's `secure_tcp_ts_off`.
    pub fn ts_offset(&self, local: (Ipv4Addr, u16), remote: (Ipv4Addr, u16)) -> u32 {
        (self.hash(1, local, remote) >> 32) as u32
    }

    fn hash(&self, domain: u8, local: (Ipv4Addr, u16), remote: (Ipv4Addr, u16)) -> u64 {
        let mut input = [0u8; 13];
        input[..4].copy_from_slice(&local.0.octets());
        input[4..6].copy_from_slice(&local.1.to_be_bytes());
        input[6..10].copy_from_slice(&remote.0.octets());
        input[10..12].copy_from_slice(&remote.1.to_be_bytes());
        input[12] = domain;
        siphash24(self.key.0, self.key.1, &input)
    }
}

fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-2-4 of `data` under the key `(k0, k1)`.
pub fn siphash24(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let m = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    let mut last = [0u8; 8];
    let rest = words.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = data.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    round(&mut v);
    round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vector() {
        // The paper's Appendix A: key 00..0f, message 00..0e.
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(k0, k1, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn isns_advance_with_the_4_microsecond_clock_and_differ_per_connection() {
        let g = IsnGenerator::new(1, 2);
        let a = (Ipv4Addr::new(198, 18, 0, 1), 40000);
        let b = (Ipv4Addr::new(198, 18, 0, 2), 80);
        let t0 = Instant::from_nanos(1_000_000);
        let later = t0 + std::time::Duration::from_micros(400);
        assert_eq!(g.isn(a, b, later) - g.isn(a, b, t0), 100);
        assert_ne!(g.isn(a, b, t0), g.isn(a, (b.0, 81), t0));
        assert_ne!(g.isn(a, b, t0), IsnGenerator::new(1, 3).isn(a, b, t0));
        assert_eq!(
            g.ts_offset(a, b),
            g.ts_offset(a, b),
            "one offset per 4-tuple"
        );
        assert_ne!(g.ts_offset(a, b), g.ts_offset(a, (b.0, 81)));
    }
}
