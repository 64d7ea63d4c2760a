//! Message packing (seed 003 §3.4): a backlog of messages travels as one,
//! behind a packing header, and is unpacked on delivery.
//!
//! Unlike the paper's PA, which packed only messages of one size, the
//! packing header lists every message's length, so messages of any sizes
//! pack together. The header is one byte, the count: 0 for a message that
//! is not packed (it is the whole rest), `n` ≥ 2 for `n` messages, followed
//! by the lengths of the first `n - 1` as LEB128 numbers; the last takes the
//! rest.
//!
//! The backlog keeps a lane per priority ([`Priority`]: lower is more
//! urgent). A pack takes the most urgent messages first and first in, first
//! out within a priority, so a message never travels behind a less urgent one
//! that was queued before it, nor ahead of an equally urgent one.

use std::collections::VecDeque;

use strata_core::{Message, Priority};

/// Empty lanes a backlog keeps at most.
const LANES_KEPT: usize = 4;

/// The most messages in one pack (the count is one byte).
pub const MAX_PACK: usize = 255;

/// Messages of at most this many bytes are copied into their lane when
/// queued: a pack of small messages is then one copy of a run of bytes, and
/// the queue holds lengths, not messages. Longer ones are kept whole (one
/// alone in a pack keeps its buffers).
const COPIED_MAX: usize = 128;

/// The length entry of a message kept whole (in [`Lane::kept`]).
const KEPT: u32 = u32::MAX;

/// The messages of one priority, first in, first out.
struct Lane {
    priority: Priority,
    /// Each message's length, or [`KEPT`].
    lens: VecDeque<u32>,
    /// The copied messages' bytes, in order, from `start`.
    bytes: Vec<u8>,
    start: usize,
    /// The messages kept whole, in order.
    kept: VecDeque<Message>,
}

impl Lane {
    fn new(priority: Priority) -> Lane {
        Lane {
            priority,
            lens: VecDeque::new(),
            bytes: Vec::new(),
            start: 0,
            kept: VecDeque::new(),
        }
    }

    /// The first message's entry and length.
    #[inline]
    fn front(&self) -> Option<(u32, usize)> {
        let &e = self.lens.front()?;
        if e == KEPT {
            Some((e, self.kept.front().map_or(0, Message::len)))
        } else {
            Some((e, e as usize))
        }
    }

    /// Copies `n` copied bytes from the front out to `out`.
    fn copy_out(&mut self, n: usize, out: &mut Vec<u8>) {
        if n > 0 {
            out.extend_from_slice(&self.bytes[self.start..self.start + n]);
            self.consume(n);
        }
    }

    /// Forgets `n` copied bytes from the front.
    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
        } else if self.start > self.bytes.len() / 2 {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
    }
}

/// Messages waiting to be sent, by priority.
#[derive(Default)]
pub struct Backlog {
    /// Lanes by priority, most urgent first; a few are kept when empty (a
    /// connection sends at one priority: its lane stays, with its buffers).
    lanes: Vec<Lane>,
    len: usize,
    bytes: usize,
    /// The packing header's lengths, built here (kept: no allocation).
    head: Vec<u8>,
}

impl Backlog {
    /// An empty backlog.
    pub fn new() -> Self {
        Backlog::default()
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of data waiting.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn lane(&mut self, priority: Priority) -> &mut Lane {
        // The common case first: one lane, the connection's priority.
        let at = match self.lanes.first() {
            Some(l) if l.priority == priority => 0,
            _ => match self.lanes.iter().position(|l| l.priority >= priority) {
                Some(at) if self.lanes[at].priority == priority => at,
                Some(at) => {
                    self.lanes.insert(at, Lane::new(priority));
                    at
                }
                None => {
                    self.lanes.push(Lane::new(priority));
                    self.lanes.len() - 1
                }
            },
        };
        &mut self.lanes[at]
    }

    /// Queues a message.
    pub fn push(&mut self, priority: Priority, m: Message) {
        let len = m.len();
        self.len += 1;
        self.bytes += len;
        let lane = self.lane(priority);
        if len <= COPIED_MAX {
            for chunk in m.chunks() {
                lane.bytes.extend_from_slice(chunk);
            }
            lane.lens.push_back(len as u32);
        } else {
            lane.kept.push_back(m);
            lane.lens.push_back(KEPT);
        }
    }

    /// The length of the first message waiting.
    fn front_len(&self) -> Option<usize> {
        self.lanes
            .iter()
            .find_map(|l| l.front().map(|(_, len)| len))
    }

    /// Takes the next pack: most urgent first, as many as fit `max` bytes of
    /// packed data (header included), at least one.
    pub fn take(&mut self, max: usize) -> Vec<Message> {
        let mut out = Vec::new();
        let mut size = 1;
        'lanes: for lane in &mut self.lanes {
            while let Some((e, len)) = lane.front() {
                let cost = len + leb_len(len);
                if !out.is_empty() && (size + cost > max || out.len() == MAX_PACK) {
                    break 'lanes;
                }
                size += cost;
                lane.lens.pop_front();
                if e == KEPT {
                    out.extend(lane.kept.pop_front());
                } else {
                    out.push(Message::from_slice(
                        &lane.bytes[lane.start..lane.start + len],
                    ));
                    lane.consume(len);
                }
            }
        }
        self.took(out.len(), out.iter().map(Message::len).sum());
        out
    }

    /// What [`Backlog::take`] takes, packed ([`pack`]) straight from the
    /// lanes in one pass: the data goes in behind room for the longest
    /// packing header a pack of up to `max` bytes can need (copied
    /// messages a run of bytes at a time), the header in front of it once
    /// the count is known. Also says how many messages it holds.
    pub fn take_packed(&mut self, max: usize) -> (Message, usize) {
        if self
            .front_len()
            .is_none_or(|len| len + leb_len(len) + 1 >= max)
        {
            // One message at most: no lengths.
            let one = self.take(max);
            let n = one.len();
            return (pack(one), n);
        }
        let room = 1 + leb_len(max) * (MAX_PACK - 1);
        let mut out = Vec::with_capacity(room + max);
        out.resize(room, 0);
        let mut head = std::mem::take(&mut self.head);
        head.clear();
        let (mut n, mut size, mut data, mut last) = (0, 1, 0, 0);
        for lane in &mut self.lanes {
            // The lengths are read in place and drained at once.
            let mut lens = std::mem::take(&mut lane.lens);
            // Copied bytes taken from the lane's front, not yet copied out.
            let (mut run, mut taken, mut full) = (0, 0, false);
            for &e in &lens {
                let len = if e == KEPT {
                    lane.kept.front().map_or(0, Message::len)
                } else {
                    e as usize
                };
                let cost = len + leb_len(len);
                if n > 0 && (size + cost > max || n == MAX_PACK) {
                    full = true;
                    break;
                }
                size += cost;
                if n > 0 {
                    leb(&mut head, last);
                }
                (n, data, last, taken) = (n + 1, data + len, len, taken + 1);
                if e == KEPT {
                    lane.copy_out(std::mem::take(&mut run), &mut out);
                    if let Some(m) = lane.kept.pop_front() {
                        for chunk in m.chunks() {
                            out.extend_from_slice(chunk);
                        }
                    }
                } else {
                    run += len;
                }
            }
            lens.drain(..taken);
            lane.lens = lens;
            lane.copy_out(run, &mut out);
            if full {
                break;
            }
        }
        self.took(n, data);
        // A message alone has the count 0 (and no lengths).
        let start = room - head.len() - 1;
        out[start] = if n == 1 { 0 } else { n as u8 };
        out[start + 1..room].copy_from_slice(&head);
        self.head = head;
        let bytes = bytes::Bytes::from(out).slice(start..);
        (Message::from_bytes(bytes), n)
    }

    fn took(&mut self, n: usize, data: usize) {
        self.len -= n;
        self.bytes -= data;
        if self.lanes.len() > LANES_KEPT {
            self.lanes.retain(|l| !l.lens.is_empty());
        }
    }
}

/// Appends `n` as a LEB128 number.
fn leb(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn leb_len(mut n: usize) -> usize {
    let mut k = 1;
    while n >= 0x80 {
        n >>= 7;
        k += 1;
    }
    k
}

/// Packs `msgs` (at least one) into one message with its packing header.
/// A single message keeps its buffers (the header goes into its headroom);
/// several are copied into one buffer, which for a pack of small messages
/// costs less than a list of segments.
pub fn pack(mut msgs: Vec<Message>) -> Message {
    if msgs.len() <= 1 {
        return pack_one(msgs.pop().unwrap_or_default());
    }
    let data: usize = msgs.iter().map(Message::len).sum();
    let mut out = Vec::with_capacity(1 + 2 * msgs.len() + data);
    out.push(msgs.len() as u8);
    for m in &msgs[..msgs.len() - 1] {
        leb(&mut out, m.len());
    }
    for m in &msgs {
        for chunk in m.chunks() {
            out.extend_from_slice(chunk);
        }
    }
    Message::from_bytes(out.into())
}

/// A message alone, with the packing header of one (no list to build).
pub fn pack_one(mut m: Message) -> Message {
    m.push_slice(&[0]);
    m
}

/// Why a packed message could not be unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnpackError {
    /// No packing header.
    Empty,
    /// A count of 1, a length too long or cut off.
    Malformed,
}

/// Unpacks a message with its packing header into the messages it carries.
pub fn unpack(m: Message) -> Result<Vec<Message>, UnpackError> {
    let mut out = Vec::new();
    unpack_each(m, |m| out.push(m))?;
    Ok(out)
}

/// Unpacks a message with its packing header and hands each message it
/// carries to `each`, in order; how many. Nothing is handed over unless the
/// whole packing header is sound. No list is built: the delivery path
/// calls this per message.
pub fn unpack_each(mut m: Message, mut each: impl FnMut(Message)) -> Result<usize, UnpackError> {
    let n = match m.peek(1) {
        Some(&[n]) => n,
        _ => {
            let mut first = [0u8; 1];
            if m.copy_to_slice(0, &mut first) == 0 {
                return Err(UnpackError::Empty);
            }
            first[0]
        }
    };
    if n == 0 {
        m.strip(1);
        each(m);
        return Ok(1);
    }
    if n == 1 {
        return Err(UnpackError::Malformed);
    }
    // One buffer (a received pack is one already: no copy), cut into
    // shared slices.
    let bytes = m.into_bytes();
    let head = &bytes[..];
    let got = head.len();
    let mut lens = [0usize; MAX_PACK];
    let mut at = 1;
    for len in &mut lens[..usize::from(n) - 1] {
        let mut v = 0usize;
        let mut shift = 0;
        loop {
            let b = *head[..got].get(at).ok_or(UnpackError::Malformed)?;
            at += 1;
            if shift > 28 {
                return Err(UnpackError::Malformed);
            }
            v |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        *len = v;
    }
    let lens = &lens[..usize::from(n) - 1];
    if lens.iter().sum::<usize>() > got - at {
        return Err(UnpackError::Malformed);
    }
    for &len in lens {
        each(Message::from_bytes(bytes.slice(at..at + len)));
        at += len;
    }
    each(Message::from_bytes(bytes.slice(at..)));
    Ok(usize::from(n))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn random_backlogs_unpack_to_what_was_queued_most_urgent_first(
            msgs in prop::collection::vec((0u32..3, prop::collection::vec(any::<u8>(), 0..300)), 1..80),
            max in 16usize..2000,
        ) {
            let mut b = Backlog::new();
            let mut direct = Backlog::new();
            for (p, d) in &msgs {
                b.push(Priority(*p), Message::from_slice(d));
                direct.push(Priority(*p), Message::from_slice(d));
            }
            // What must come out: by priority, first in first out within one.
            let mut want: Vec<(u32, Vec<u8>)> = msgs.clone();
            want.sort_by_key(|(p, _)| *p);
            let mut got = Vec::new();
            while !b.is_empty() {
                let pack_of = b.take(max);
                let n = pack_of.len();
                prop_assert!((1..=MAX_PACK).contains(&n));
                let packed = pack(pack_of);
                prop_assert!(n == 1 || packed.len() <= max);
                // Packing straight from the lanes makes the same pack.
                let (same, k) = direct.take_packed(max);
                prop_assert_eq!(k, n);
                prop_assert_eq!(same.to_vec(), packed.to_vec());
                prop_assert_eq!(direct.len(), b.len());
                let out = unpack(packed).unwrap();
                prop_assert_eq!(out.len(), n);
                got.extend(out.into_iter().map(|m| m.to_vec()));
            }
            prop_assert_eq!(b.bytes(), 0);
            let want: Vec<Vec<u8>> = want.into_iter().map(|(_, d)| d).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn a_pack_in_several_segments_unpacks_as_in_one(
            msgs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 2..20),
            cut in 0usize..400,
        ) {
            let packed = pack(msgs.iter().map(|d| Message::from_slice(d)).collect()).to_vec();
            // The same bytes as two segments, the first in the headroom.
            let cut = cut.min(packed.len());
            let mut m = Message::from_slice(&packed[cut..]);
            m.push_slice(&packed[..cut]);
            let out: Vec<Vec<u8>> = unpack(m).unwrap().iter().map(Message::to_vec).collect();
            prop_assert_eq!(out, msgs);
        }

        #[test]
        fn any_bytes_unpack_or_fail_without_panic(d in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(out) = unpack(Message::from_slice(&d)) {
                let total: usize = out.iter().map(Message::len).sum();
                prop_assert!(total < d.len());
            }
        }
    }
}
