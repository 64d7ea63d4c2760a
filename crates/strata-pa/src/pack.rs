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

/// Messages waiting to be sent, by priority.
#[derive(Default)]
pub struct Backlog {
    /// Lanes by priority, most urgent first; a few are kept when empty (a
    /// connection sends at one priority: its lane stays, with its buffer).
    lanes: Vec<(Priority, VecDeque<Message>)>,
    len: usize,
    bytes: usize,
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

    /// Queues a message.
    pub fn push(&mut self, priority: Priority, m: Message) {
        self.len += 1;
        self.bytes += m.len();
        let at = match self.lanes.iter().position(|(p, _)| *p >= priority) {
            Some(at) if self.lanes[at].0 == priority => at,
            Some(at) => {
                self.lanes.insert(at, (priority, VecDeque::new()));
                at
            }
            None => {
                self.lanes.push((priority, VecDeque::new()));
                self.lanes.len() - 1
            }
        };
        self.lanes[at].1.push_back(m);
    }

    /// Takes the next pack: most urgent first, as many as fit `max` bytes of
    /// packed data (header included), at least one.
    pub fn take(&mut self, max: usize) -> Vec<Message> {
        let mut out = Vec::new();
        let mut size = 1;
        'lanes: for (_, q) in &mut self.lanes {
            while let Some(m) = q.front() {
                let cost = m.len() + leb_len(m.len());
                if !out.is_empty() && (size + cost > max || out.len() == MAX_PACK) {
                    break 'lanes;
                }
                size += cost;
                out.extend(q.pop_front());
            }
        }
        if self.lanes.len() > LANES_KEPT {
            self.lanes.retain(|(_, q)| !q.is_empty());
        }
        self.took(out)
    }

    /// What [`Backlog::take`] takes, packed ([`pack`]) straight from the
    /// lanes in one pass: the data goes in behind room for the longest
    /// packing header a pack of up to `max` bytes can need, the header in
    /// front of it once the count is known. Also says how many messages it
    /// holds.
    pub fn take_packed(&mut self, max: usize) -> (Message, usize) {
        let first = self.lanes.iter().find_map(|(_, q)| q.front());
        if first.is_none_or(|m| m.len() + leb_len(m.len()) + 1 >= max) {
            // One message at most: no lengths.
            let one = self.take(max);
            let n = one.len();
            return (pack(one), n);
        }
        let room = 1 + leb_len(max) * (MAX_PACK - 1);
        let mut out = vec![0u8; room];
        out.reserve(max);
        let mut lens = [0usize; MAX_PACK];
        let (mut n, mut size) = (0, 1);
        'lanes: for (_, q) in &mut self.lanes {
            while let Some(m) = q.front() {
                let cost = m.len() + leb_len(m.len());
                if n > 0 && (size + cost > max || n == MAX_PACK) {
                    break 'lanes;
                }
                size += cost;
                lens[n] = m.len();
                n += 1;
                if let Some(m) = q.pop_front() {
                    for chunk in m.chunks() {
                        out.extend_from_slice(chunk);
                    }
                }
            }
        }
        if self.lanes.len() > LANES_KEPT {
            self.lanes.retain(|(_, q)| !q.is_empty());
        }
        let data: usize = lens[..n].iter().sum();
        self.len -= n;
        self.bytes -= data;
        let mut head = Vec::with_capacity(room);
        // A message alone has the count 0 (and no lengths).
        head.push(if n == 1 { 0 } else { n as u8 });
        for &len in &lens[..n.saturating_sub(1)] {
            let mut len = len;
            while len >= 0x80 {
                head.push((len as u8 & 0x7f) | 0x80);
                len >>= 7;
            }
            head.push(len as u8);
        }
        let start = room - head.len();
        out[start..room].copy_from_slice(&head);
        let bytes = bytes::Bytes::from(out).slice(start..);
        (Message::from_bytes(bytes), n)
    }

    fn took(&mut self, out: Vec<Message>) -> Vec<Message> {
        self.len -= out.len();
        self.bytes -= out.iter().map(Message::len).sum::<usize>();
        out
    }
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
        let mut n = m.len();
        while n >= 0x80 {
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
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
    let mut first = [0u8; 1];
    if m.copy_to_slice(0, &mut first) == 0 {
        return Err(UnpackError::Empty);
    }
    let n = first[0];
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
