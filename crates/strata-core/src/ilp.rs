//! Integrated layer processing (seed 000 §2.2, the paper's future work): the data
//! manipulations of several layers — an Internet checksum, a cipher, a
//! presentation conversion, the final copy into the application's buffer — run
//! either as separate passes, one per layer (how LLM must do them, since each
//! layer's pop runs before the next layer is even found), or fused: block by
//! block over cache-sized pieces, every stage on a block while it is still in the
//! cache, so the data crosses the memory bus once in and once out.
//!
//! Stages are declared by protocols in `pop` through [`Cx::stage`](crate::Cx::stage).
//! Under LLM the stage runs at once, as its own pass. Under ILLM and DAA the
//! engine collects the stages of every layer and runs them fused after the
//! state-change phase, before delivery; results are byte-identical.

use chacha20::ChaCha20;
use chacha20::cipher::{KeyIvInit, StreamCipher};

use crate::checksum::Checksum;
use crate::message::Message;

/// Size of the pieces fused processing works on: small enough that a block stays
/// in the L1 data cache through every stage.
pub const BLOCK: usize = 4096;

/// One layer's manipulation of the data it carries.
pub enum Stage {
    /// Sums the data into an Internet checksum that already holds the layer's
    /// header and pseudo-header; the packet is dropped unless the total verifies.
    Checksum(Checksum),
    /// XORs the data with a ChaCha20 keystream (decrypts what the peer encrypted).
    Cipher(Box<ChaCha20>),
    /// Converts 32-bit words between the external (big-endian, XDR, RFC 4506) and
    /// the host's order; a trailing partial word is left alone.
    Swap32,
    /// Copies the data into a fresh contiguous buffer: the application's buffer.
    Copy,
}

impl Stage {
    /// A ChaCha20 stage with this key and nonce, starting at block counter 0.
    pub fn cipher(key: [u8; 32], nonce: [u8; 12]) -> Stage {
        Stage::Cipher(Box::new(ChaCha20::new(&key.into(), &nonce.into())))
    }

    /// A short name for counters and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Checksum(_) => "checksum",
            Stage::Cipher(_) => "cipher",
            Stage::Swap32 => "swap32",
            Stage::Copy => "copy",
        }
    }

    /// Processes the next `block` of data in place. Blocks come in order, and
    /// every block but the last has a length that is a multiple of 4.
    fn block(&mut self, block: &mut [u8]) {
        match self {
            Stage::Checksum(sum) => sum.add(block),
            Stage::Cipher(c) => c.apply_keystream(block),
            Stage::Swap32 => {
                for word in block.chunks_exact_mut(4) {
                    word.reverse();
                }
            }
            Stage::Copy => {}
        }
    }

    /// Whether the stage only reads the data (a checksum): a pass of such
    /// stages alone needs no write access, so shared data is not copied.
    fn reads_only(&self) -> bool {
        matches!(self, Stage::Checksum(_))
    }

    /// Reads the next block (a stage that [`reads_only`](Self::reads_only)).
    fn look(&mut self, block: &[u8]) {
        if let Stage::Checksum(sum) = self {
            sum.add(block);
        }
    }

    /// The verdict once all data has passed: false when a checksum fails.
    fn verdict(&self) -> bool {
        match self {
            Stage::Checksum(sum) => sum.sum() == 0xffff,
            _ => true,
        }
    }
}

/// Runs one stage as its own pass over the whole message (the LLM way). Returns
/// the stage's verdict.
pub fn run_one(stage: &mut Stage, msg: &mut Message) -> bool {
    match stage {
        Stage::Copy => *msg = Message::from(msg.to_vec()),
        Stage::Checksum(sum) => {
            for chunk in msg.chunks() {
                sum.add(chunk);
            }
        }
        Stage::Swap32 => {
            make_contiguous(msg);
            msg.for_each_chunk_mut(|c| stage.block(c));
        }
        Stage::Cipher(_) => msg.for_each_chunk_mut(|c| stage.block(c)),
    }
    stage.verdict()
}

impl AsMut<Stage> for Stage {
    fn as_mut(&mut self) -> &mut Stage {
        self
    }
}

/// Runs every stage fused, block by block, in declaration order (lowest layer
/// first). When a stage copies, each block is copied first and the later stages
/// work on the copy while it is in the cache. Returns the index of the first
/// stage whose verdict failed, if any. The stages may sit in records of the
/// caller's (the engine keeps each with its layer), so nothing is collected.
pub fn run_fused<S: AsMut<Stage>>(stages: &mut [S], msg: &mut Message) -> Option<usize> {
    if stages.iter_mut().all(|s| s.as_mut().reads_only()) {
        // Blocks are cut from each chunk; a checksum carries odd bytes across.
        for chunk in msg.chunks() {
            for block in chunk.chunks(BLOCK) {
                for s in stages.iter_mut() {
                    s.as_mut().look(block);
                }
            }
        }
    } else if stages.iter_mut().any(|s| matches!(s.as_mut(), Stage::Copy)) {
        let out = copy_fused(stages, msg);
        *msg = Message::from(out);
    } else {
        make_contiguous(msg);
        msg.for_each_chunk_mut(|data| fused_in_place(stages, data));
    }
    stages.iter_mut().position(|s| !s.as_mut().verdict())
}

/// Copies `msg` into a fresh buffer block by block, running every stage on each
/// block as it lands.
fn copy_fused<S: AsMut<Stage>>(stages: &mut [S], msg: &Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len());
    let mut pending: &[u8] = &[];
    let mut chunks = msg.chunks();
    // Blocks are cut from the message's chunks; a block that straddles two
    // chunks is gathered, so every block but the last holds BLOCK bytes and
    // 32-bit words never split between blocks.
    loop {
        let start = out.len();
        while out.len() - start < BLOCK {
            if pending.is_empty() {
                match chunks.next() {
                    Some(c) => pending = c,
                    None => break,
                }
            }
            let n = (BLOCK - (out.len() - start)).min(pending.len());
            out.extend_from_slice(&pending[..n]);
            pending = &pending[n..];
        }
        if out.len() == start {
            break;
        }
        // The block is gathered into `out` already; run every stage there.
        for s in stages.iter_mut() {
            s.as_mut().block(&mut out[start..]);
        }
    }
    out
}

/// One block of a fused pass that copies: the stages before the copy read the
/// block where it is (the first touch pulls it into the cache), the copy moves it
/// to `out` from the cache, and the stages after the copy work on the copy. The
/// order of stages is kept, so the bytes and verdicts are those of separate
/// passes.
fn copy_block(stages: &mut [Stage], block: &mut [u8], out: &mut Vec<u8>) {
    let copy = stages
        .iter()
        .position(|s| matches!(s, Stage::Copy))
        .unwrap_or(stages.len());
    let (before, after) = stages.split_at_mut(copy);
    for s in before.iter_mut() {
        s.block(block);
    }
    let start = out.len();
    out.extend_from_slice(block);
    for s in after.iter_mut() {
        s.block(&mut out[start..]);
    }
}

/// Every stage on `data`, each as its own pass, the last copying into `out`
/// (the application's buffer): the LLM way, on plain buffers, for measuring.
pub fn separate_passes(stages: &mut [Stage], data: &mut [u8], out: &mut Vec<u8>) {
    for s in stages.iter_mut() {
        match s {
            Stage::Copy => {
                out.clear();
                out.extend_from_slice(data);
            }
            Stage::Swap32 | Stage::Cipher(_) | Stage::Checksum(_) => s.block(data),
        }
    }
}

/// Every stage on `data` fused block by block, copying each block into `out`
/// first when a stage copies: the ILLM and DAA way, on plain buffers, for
/// measuring.
pub fn fused_passes(stages: &mut [Stage], data: &mut [u8], out: &mut Vec<u8>) {
    if stages.iter().any(|s| matches!(s, Stage::Copy)) {
        out.clear();
        for block in data.chunks_mut(BLOCK) {
            copy_block(stages, block, out);
        }
    } else {
        fused_in_place(stages, data);
    }
}

fn fused_in_place<S: AsMut<Stage>>(stages: &mut [S], data: &mut [u8]) {
    for block in data.chunks_mut(BLOCK) {
        for s in stages.iter_mut() {
            s.as_mut().block(block);
        }
    }
}

/// Gathers a message into one segment when it has several, so that word-wise
/// stages never see a word split across segments.
fn make_contiguous(msg: &mut Message) {
    if msg.chunk_count() > 1 {
        *msg = Message::from(msg.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(key: u8) -> Vec<Stage> {
        vec![
            Stage::Checksum(Checksum::new()),
            Stage::cipher([key; 32], [7; 12]),
            Stage::Swap32,
            Stage::Copy,
        ]
    }

    fn message(len: usize, cut: usize) -> Message {
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let mut m = Message::from_slice(&data[..cut.min(len)]);
        m.append_bytes(bytes::Bytes::copy_from_slice(&data[cut.min(len)..]));
        m
    }

    #[test]
    fn fused_and_separate_passes_give_the_same_bytes_and_verdicts() {
        for len in [0, 1, 3, 4, 63, 4095, 4096, 4097, 10_001, 65_536] {
            for cut in [0, 1, 2, 1000, 4097] {
                let mut separate = message(len, cut);
                let mut stages = stack(9);
                let verdicts: Vec<bool> = stages
                    .iter_mut()
                    .map(|s| run_one(s, &mut separate))
                    .collect();
                let mut fused = message(len, cut);
                let mut stages = stack(9);
                let failed = run_fused(&mut stages, &mut fused);
                assert_eq!(fused.to_vec(), separate.to_vec(), "len {len} cut {cut}");
                assert_eq!(failed, verdicts.iter().position(|v| !v), "len {len}");
            }
        }
    }

    #[test]
    fn plain_buffer_passes_agree_with_each_other() {
        for len in [0, 5, 4096, 9000] {
            let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let (mut a, mut b) = (data.clone(), data.clone());
            let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
            separate_passes(&mut stack(3), &mut a, &mut out_a);
            fused_passes(&mut stack(3), &mut b, &mut out_b);
            assert_eq!(out_a, out_b, "len {len}");
        }
    }

    #[test]
    fn the_cipher_stage_round_trips() {
        let plain = message(5000, 17).to_vec();
        let mut m = Message::from_slice(&plain);
        run_one(&mut Stage::cipher([1; 32], [2; 12]), &mut m);
        assert_ne!(m.to_vec(), plain);
        run_one(&mut Stage::cipher([1; 32], [2; 12]), &mut m);
        assert_eq!(m.to_vec(), plain);
    }

    #[test]
    fn swap32_converts_big_endian_words_to_host_order_and_leaves_a_tail() {
        let mut m = Message::from_slice(&[0, 0, 0, 1, 0, 0, 1, 0, 9]);
        run_one(&mut Stage::Swap32, &mut m);
        assert_eq!(m.to_vec(), [1, 0, 0, 0, 0, 1, 0, 0, 9]);
    }

    #[test]
    fn a_checksum_stage_fails_on_corrupt_data() {
        let data = vec![0x12u8; 1000];
        let mut sum = Checksum::new();
        sum.add(&data);
        let mut expect = Checksum::new();
        expect.add_u16(sum.finish());
        let mut good = Message::from_slice(&data);
        assert!(run_one(&mut Stage::Checksum(expect), &mut good));
        let mut bad_data = data.clone();
        bad_data[500] ^= 1;
        let mut bad = Message::from_slice(&bad_data);
        assert_eq!(run_fused(&mut [Stage::Checksum(expect)], &mut bad), Some(0));
    }
}
