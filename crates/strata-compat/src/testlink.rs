//! An in-memory link for the subsystems' tests: loses, duplicates and
//! reorders frames with a seeded generator, so a run is reproducible.

/// A lossy link.
pub struct Link {
    state: u64,
    loss: u32,
    dup: u32,
    reorder: u32,
    held: Option<Vec<u8>>,
    /// Frames carried (each copy counted).
    pub carried: u64,
    /// Frames lost.
    pub lost: u64,
}

impl Link {
    /// A link losing, duplicating and reordering `percent` of frames each.
    pub fn new(seed: u64, percent: u32) -> Link {
        Link {
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            loss: percent,
            dup: percent,
            reorder: percent,
            held: None,
            carried: 0,
            lost: 0,
        }
    }

    fn roll(&mut self, percent: u32) -> bool {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33;
        (r % 100) < u64::from(percent)
    }

    /// Carry one frame: what comes out the other end now (none, one, two,
    /// or a frame held back earlier).
    pub fn carry(&mut self, frame: Vec<u8>) -> Vec<Vec<u8>> {
        if self.roll(self.loss) {
            self.lost += 1;
            return self.held.take().into_iter().collect();
        }
        let mut out = Vec::new();
        if self.held.is_none() && self.roll(self.reorder) {
            self.held = Some(frame);
            return out;
        }
        if self.roll(self.dup) {
            out.push(frame.clone());
        }
        out.push(frame);
        out.extend(self.held.take());
        self.carried += out.len() as u64;
        out
    }

    /// Whatever is held back, released (at the end of a time step).
    pub fn flush(&mut self) -> Option<Vec<u8>> {
        self.held.take()
    }
}

/// The `i`th hostile variant of a good frame: cut short, a bit flipped,
/// random bytes, or padded with junk.
pub fn mutate(good: &[u8], i: u32) -> Vec<u8> {
    let mut f = good.to_vec();
    let n = (i as usize) % f.len().max(1);
    match i % 4 {
        0 => f.truncate(n),
        1 => f[n] ^= 1 << (i % 8),
        2 => f = (0..(i % 40)).map(|j| (j * 31 + i) as u8).collect(),
        _ => f.extend(std::iter::repeat_n(0xAA, n)),
    }
    f
}

/// A well-formed, checksummed DDP datagram carrying an ATP request from
/// node 1 socket 130 to `dst` on network `net`.
pub fn atp_request(net: u16, dst: (u8, u8), tid: u16, payload: &[u8]) -> Vec<u8> {
    use crate::appletalk::wire::{atp, ddp};
    let mut data = atp::Repr::request(tid, 1, None, [0; 4]).to_bytes().to_vec();
    data.extend_from_slice(payload);
    let repr = ddp::Repr::new(
        ddp::Addr::new(net, 1, 130),
        ddp::Addr::new(net, dst.0, dst.1),
        atp::DDP_TYPE,
        data.len(),
    )
    .expect("short enough");
    let mut f = repr
        .to_bytes_checksummed([&data[..]])
        .expect("in range")
        .to_vec();
    f.extend_from_slice(&data);
    f
}
