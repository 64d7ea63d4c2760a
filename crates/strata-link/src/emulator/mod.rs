//! A sans-I/O link emulator for one direction of a link: seed 001's "delay/error
//! generator", made complete.
//!
//! [`Emulator::offer`] decides a frame's fate the moment it is offered — dropped at
//! the queue, lost on the wire, or delivered at a time, possibly corrupted,
//! duplicated or held back — and [`Emulator::poll`] hands frames out when their time
//! comes. The emulator never reads a clock: time is passed in, so the same code runs
//! in the simulator's virtual time and, later, in a real-time bridge.
//!
//! A frame goes through the stages of a real link in order: the queue and the
//! serialiser of a rate-limited sender (tail drop), the wire (random and burst loss,
//! bit errors), and propagation (delay, jitter, reordering, duplication). A frame
//! lost on the wire was still serialised, so losses do not free bandwidth.
//!
//! Each impairment draws from its own random stream of the seed, so changing one
//! (say, the jitter) leaves every other one's pattern unchanged: comparisons between
//! settings see the same losses (common random numbers).

mod bit_errors;
mod burst;
mod params;
mod serializer;
mod stats;

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_core::{Instant, Message};

pub use burst::{BadBurst, BurstLoss};
pub use params::{DEFAULT_LIMIT, DEFAULT_QUEUE, DEFAULT_REORDER_DELAY, LinkParams, OPTIONS};
pub use stats::EmulatorStats;

use burst::BurstChain;
use serializer::Serializer;

/// What became of an offered frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Dropped before the wire: the rate limiter's queue was full.
    QueueFull,
    /// Dropped before the wire: the emulator already held `limit` frames.
    OverLimit,
    /// Lost on the wire at random.
    LostRandom,
    /// Lost on the wire in a loss burst.
    LostBurst,
    /// Will be delivered.
    Delivered {
        /// When.
        at: Instant,
        /// Bits flipped on the way.
        bits_flipped: u64,
        /// True when a second copy follows it.
        duplicated: bool,
        /// True when it was held back so later frames overtake it.
        reordered: bool,
    },
}

/// A frame on its way.
struct InFlight {
    at: Instant,
    /// Offer order, so frames due at the same time leave in the order they came.
    seq: u64,
    offered: Instant,
    frame: Message,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    // BinaryHeap is a max-heap: the earliest frame must compare greatest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The random streams of one emulator, one per impairment.
struct Streams {
    loss: ChaCha8Rng,
    burst: ChaCha8Rng,
    ber: ChaCha8Rng,
    jitter: ChaCha8Rng,
    reorder: ChaCha8Rng,
    duplicate: ChaCha8Rng,
}

impl Streams {
    fn new(seed: u64) -> Self {
        let stream = |n| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(n);
            rng
        };
        Streams {
            loss: stream(1),
            burst: stream(2),
            ber: stream(3),
            jitter: stream(4),
            reorder: stream(5),
            duplicate: stream(6),
        }
    }
}

/// One direction of an emulated link.
pub struct Emulator {
    params: LinkParams,
    rng: Streams,
    serializer: Serializer,
    burst: Option<BurstChain>,
    /// The latest delivery time of a frame not held back: jitter may not deliver a
    /// later frame before it.
    in_order_until: Instant,
    in_flight: BinaryHeap<InFlight>,
    seq: u64,
    stats: EmulatorStats,
}

impl Emulator {
    /// An emulator with these parameters; its decisions are a function of `seed`
    /// and the offers made.
    pub fn new(params: LinkParams, seed: u64) -> Self {
        Emulator {
            rng: Streams::new(seed),
            serializer: Serializer::new(params.rate, params.queue),
            burst: params.burst.map(BurstChain::new),
            in_order_until: Instant::ZERO,
            in_flight: BinaryHeap::new(),
            seq: 0,
            stats: EmulatorStats::default(),
            params,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    /// What has happened so far.
    pub fn stats(&self) -> &EmulatorStats {
        &self.stats
    }

    /// Frames held, queued or in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Offers a frame sent at `now` and decides its fate.
    pub fn offer(&mut self, now: Instant, mut frame: Message) -> Fate {
        self.stats.offered += 1;
        self.stats.offered_bytes += frame.len() as u64;
        if self.in_flight.len() >= self.params.limit {
            self.stats.dropped_limit += 1;
            return Fate::OverLimit;
        }
        let Ok(sent) = self.serializer.admit(now, frame.len()) else {
            self.stats.dropped_queue += 1;
            return Fate::QueueFull;
        };
        // Both streams are drawn for every frame on the wire, so each loss pattern
        // is the same whether or not the other kind of loss is enabled.
        let burst_lost = match &mut self.burst {
            Some(chain) => chain.step(&mut self.rng.burst),
            None => false,
        };
        let random_lost = chance(&mut self.rng.loss, self.params.loss);
        if burst_lost {
            self.stats.lost_burst += 1;
            return Fate::LostBurst;
        }
        if random_lost {
            self.stats.lost_random += 1;
            return Fate::LostRandom;
        }
        let bits_flipped = if self.params.ber > 0.0 {
            bit_errors::flip_bits(&mut frame, self.params.ber, &mut self.rng.ber)
        } else {
            0
        };
        if bits_flipped > 0 {
            self.stats.corrupted += 1;
            self.stats.bits_flipped += bits_flipped;
        }
        let at = self.propagate(sent).max(self.in_order_until);
        let reordered = chance(&mut self.rng.reorder, self.params.reorder);
        let at = if reordered {
            self.stats.reordered += 1;
            at + self.params.reorder_delay
        } else {
            self.in_order_until = at;
            at
        };
        let duplicated = chance(&mut self.rng.duplicate, self.params.duplicate);
        if duplicated {
            self.stats.duplicated += 1;
            self.schedule(at, now, frame.clone());
        }
        self.schedule(at, now, frame);
        Fate::Delivered {
            at,
            bits_flipped,
            duplicated,
            reordered,
        }
    }

    /// When a frame whose last bit left at `sent` arrives: the delay, varied
    /// uniformly within ±jitter.
    fn propagate(&mut self, sent: Instant) -> Instant {
        let jitter = nanos(self.params.jitter);
        let arrival = sent + self.params.delay;
        if jitter == 0 {
            return arrival;
        }
        let offset = self.rng.jitter.random_range(0..=jitter.saturating_mul(2));
        Instant::from_nanos(arrival.as_nanos().saturating_add(offset)) - self.params.jitter
    }

    fn schedule(&mut self, at: Instant, offered: Instant, frame: Message) {
        self.seq += 1;
        self.in_flight.push(InFlight {
            at,
            seq: self.seq,
            offered,
            frame,
        });
    }

    /// The next frame due at or before `now`, earliest first.
    pub fn poll(&mut self, now: Instant) -> Option<Message> {
        if self.in_flight.peek()?.at > now {
            return None;
        }
        let f = self.in_flight.pop()?;
        self.stats.delivered += 1;
        self.stats.delivered_bytes += f.frame.len() as u64;
        self.stats.total_delay += f.at - f.offered;
        Some(f.frame)
    }

    /// When the next frame is due.
    pub fn next_delivery(&self) -> Option<Instant> {
        self.in_flight.peek().map(|f| f.at)
    }
}

/// True with probability `p`; draws nothing when `p` is zero, so a disabled
/// impairment costs nothing.
fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    p > 0.0 && rng.random::<f64>() < p
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
