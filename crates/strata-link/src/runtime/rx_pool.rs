//! Received frames into pooled memory: a driver reads a batch into its own
//! buffers, and each frame it lends ([`Rx::Lent`](crate::drivers::Rx)) is
//! copied once from there into a reservoir that the link keeps; the frame
//! handed to the engine is a shared slice of it. (A super-frame the driver
//! gives away with its memory is not copied at all.)
//! When the engine and the protocols have let go of every frame of the
//! reservoir's memory — what steady traffic does, each packet running to
//! completion — the next frames reuse that memory in place
//! (`BytesMut::reserve` reclaims a uniquely held buffer), so receiving
//! allocates nothing per frame; a frame held longer (a TCP segment waiting
//! for a gap to fill) keeps its part alive, and the reservoir moves on to new
//! memory only then.

use bytes::BytesMut;
use strata_core::Message;

/// Bytes of frames a reservoir holds before it starts over: a batch of
/// full-sized frames, with room to spare.
const RESERVOIR: usize = 256 * 1024;

/// One link's reservoir of received frames.
pub(crate) struct RxPool {
    reservoir: BytesMut,
}

impl Default for RxPool {
    fn default() -> Self {
        RxPool {
            reservoir: BytesMut::with_capacity(RESERVOIR),
        }
    }
}

impl RxPool {
    /// `frame` as a message whose bytes live in the reservoir.
    pub fn frame(&mut self, frame: &[u8]) -> Message {
        if self.reservoir.capacity() < frame.len() {
            // Reclaims the reservoir's memory when nothing holds it any more;
            // allocates fresh memory otherwise.
            self.reservoir.reserve(RESERVOIR.max(frame.len()));
        }
        self.reservoir.extend_from_slice(frame);
        Message::from_bytes(self.reservoir.split().freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_keep_their_bytes_while_the_reservoir_moves_on() {
        let mut pool = RxPool::default();
        let a = pool.frame(b"first");
        let frames: Vec<Message> = (0..100_000u32)
            .map(|i| pool.frame(&i.to_be_bytes()))
            .collect();
        assert_eq!(a.to_vec(), b"first");
        assert_eq!(frames[99_999].to_vec(), 99_999u32.to_be_bytes());
    }

    #[test]
    fn released_frames_give_their_memory_back_to_the_reservoir() {
        let mut pool = RxPool::default();
        let first = pool.frame(&[1; 1500]);
        let start = first.chunks().next().map_or(0, |c| c.as_ptr() as usize);
        drop(first);
        // Fill the rest of the reservoir, dropping every frame at once.
        for _ in 0..RESERVOIR / 1500 + 1 {
            drop(pool.frame(&[2; 1500]));
        }
        let again = pool.frame(&[3; 1500]);
        let at = again.chunks().next().map_or(0, |c| c.as_ptr() as usize);
        assert!(
            (start..start + RESERVOIR).contains(&at),
            "the same memory, reused ({at:#x} from {start:#x})"
        );
    }
}
