//! Seed 000 §2.2's ILP, which the paper left as future work: the cost per byte of
//! a checksum, a ChaCha20 cipher, an XDR byte-order conversion and the copy into
//! the application's buffer, run as four separate passes (how LLM must run them)
//! and fused block by block (how Strata's ILLM and DAA run them), for payloads
//! from 64 B to 64 KB, with the data warm in the cache and cold.

use std::time::Instant as Wall;

use anyhow::Result;
use strata_core::checksum::Checksum;
use strata_core::ilp::{Stage, fused_passes, separate_passes};

/// Bytes of buffers cycled through for cold-cache runs: well beyond any L3.
const COLD_POOL: usize = 256 << 20;

/// One measurement.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct IlpPoint {
    /// Whether the cipher was in the stack (without it, the stages are cheap per
    /// byte and memory traffic dominates).
    pub cipher: bool,
    /// Payload bytes.
    pub size: usize,
    /// Whether the data was cold (not in any cache) when processed.
    pub cold: bool,
    /// Nanoseconds per byte, separate passes.
    pub separate_ns_per_byte: f64,
    /// Nanoseconds per byte, fused.
    pub fused_ns_per_byte: f64,
}

impl IlpPoint {
    /// separate / fused: how much faster fusing is.
    pub fn speedup(&self) -> f64 {
        self.separate_ns_per_byte / self.fused_ns_per_byte
    }
}

fn stages(cipher: bool) -> Vec<Stage> {
    let mut s = vec![Stage::Checksum(Checksum::new())];
    if cipher {
        s.push(Stage::cipher([7; 32], [1; 12]));
    }
    s.push(Stage::Swap32);
    s.push(Stage::Copy);
    s
}

/// A fixed pseudo-random permutation of `0..n` (xorshift, so every run visits the
/// same order).
fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// Measures one size, warm or cold, with or without the cipher, alternating the
/// two ways `rounds` times.
pub fn measure(
    size: usize,
    cold: bool,
    cipher: bool,
    bytes_per_round: usize,
    rounds: usize,
) -> Result<IlpPoint> {
    // Cold: messages are visited in a shuffled order across a buffer far larger
    // than the caches, so neither a cache nor the prefetcher has them; warm: every
    // message is the same bytes.
    let slots = if cold { (COLD_POOL / size).max(2) } else { 1 };
    let mut pool: Vec<u8> = (0..slots * size).map(|i| i as u8).collect();
    let order = shuffled(slots);
    let mut out = Vec::with_capacity(size);
    let iterations = (bytes_per_round / size).max(1);
    let (mut separate, mut fused) = (0u128, 0u128);
    let mut next = 0;
    for _ in 0..rounds {
        for fuse in [false, true] {
            let t0 = Wall::now();
            for _ in 0..iterations {
                let slot = order[next];
                next = (next + 1) % slots;
                let data = &mut pool[slot * size..(slot + 1) * size];
                let mut s = stages(cipher);
                if fuse {
                    fused_passes(&mut s, data, &mut out);
                } else {
                    separate_passes(&mut s, data, &mut out);
                }
                std::hint::black_box(&out);
            }
            let ns = t0.elapsed().as_nanos();
            if fuse {
                fused += ns;
            } else {
                separate += ns;
            }
        }
    }
    let bytes = (iterations * size * rounds) as f64;
    Ok(IlpPoint {
        cipher,
        size,
        cold,
        separate_ns_per_byte: separate as f64 / bytes,
        fused_ns_per_byte: fused as f64 / bytes,
    })
}
