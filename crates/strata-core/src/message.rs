//! The x-kernel message: a byte string that headers are pushed onto and popped off
//! without copying the data they wrap.
//!
//! A message is a *head* — an owned buffer whose live bytes sit at its end, so that
//! `push` writes downward into headroom — followed by *body segments*, shared
//! [`Bytes`] that may borrow an application's buffer or a received frame. Layer
//! crossings never copy: `push` writes into headroom, `pop` advances a cursor,
//! `split_off`/`join` slice and concatenate segments, and `clone` shares the body
//! (only the small head is copied). Head buffers come from a per-thread pool so a
//! steady stream of messages does not allocate.

use std::cell::RefCell;
use std::fmt;

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

use crate::ids::PathId;

/// Capacity of a pooled head buffer: room for Ethernet, IPv4 and TCP headers with
/// all their options, and then some.
pub const HEAD_CAPACITY: usize = 192;

/// How many idle head buffers a thread keeps for reuse.
const POOL_LIMIT: usize = 1024;

/// The segment list of a message's body: one segment inline (a received
/// frame, an application's buffer), more in a list from the thread's pool.
type Body = SmallVec<[Bytes; 1]>;

/// How many spilled segment lists a thread keeps, and the largest capacity
/// kept (a reassembled datagram's list may be far longer than the usual).
const BODY_POOL_LIMIT: usize = 256;
const BODY_CAPACITY_KEPT: usize = 128;

thread_local! {
    static HEAD_POOL: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
    /// Empty segment lists with heap capacity, from dropped messages: a
    /// message that grows past two segments (a receive offload's merged run,
    /// a reassembled datagram) takes one instead of allocating.
    static BODY_POOL: RefCell<Vec<Body>> = const { RefCell::new(Vec::new()) };
}

fn pooled_buffer() -> Box<[u8]> {
    HEAD_POOL
        .with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| vec![0; HEAD_CAPACITY].into_boxed_slice())
}

fn recycle(buf: Box<[u8]>) {
    if buf.len() != HEAD_CAPACITY {
        return;
    }
    HEAD_POOL.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_LIMIT {
            pool.push(buf);
        }
    });
}

/// The owned front of a message. Live bytes are `buf[start..end]`;
/// `buf[..start]` is headroom for the next `push`.
#[derive(Default)]
struct Head {
    buf: Box<[u8]>,
    start: u32,
    end: u32,
}

impl Head {
    #[inline]
    fn live(&self) -> &[u8] {
        &self.buf[self.start as usize..self.end as usize]
    }

    #[inline]
    fn live_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start as usize..self.end as usize]
    }

    #[inline]
    fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Makes `n` bytes of room in front of the live bytes and returns them.
    #[inline]
    fn push(&mut self, n: usize) -> &mut [u8] {
        if (self.start as usize) < n {
            self.regrow(n);
        }
        self.start -= n as u32;
        &mut self.buf[self.start as usize..self.start as usize + n]
    }

    /// Moves the live bytes to the end of a buffer with room for `n` more in front.
    #[cold]
    fn regrow(&mut self, n: usize) {
        let live = self.len();
        let size = (live + n + HEAD_CAPACITY / 2).max(HEAD_CAPACITY);
        let mut fresh = if size == HEAD_CAPACITY {
            pooled_buffer()
        } else {
            vec![0; size].into_boxed_slice()
        };
        let start = size - live;
        fresh[start..].copy_from_slice(self.live());
        recycle(std::mem::replace(&mut self.buf, fresh));
        let size = u32::try_from(size).expect("a message head stays below 4 GiB");
        self.start = size - live as u32;
        self.end = size;
    }

    /// Takes the live bytes out as shared bytes, leaving the head empty.
    fn take_bytes(&mut self) -> Bytes {
        let (start, end) = (self.start as usize, self.end as usize);
        let buf = std::mem::take(&mut self.buf);
        self.start = 0;
        self.end = 0;
        Bytes::from(buf).slice(start..end)
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        recycle(std::mem::take(&mut self.buf));
    }
}

impl Clone for Head {
    fn clone(&self) -> Self {
        if self.len() == 0 {
            return Head::default();
        }
        let mut head = Head::default();
        head.push(self.len()).copy_from_slice(self.live());
        head
    }
}

/// A protocol message: headers in front, data behind, no copies between layers.
#[derive(Clone, Default)]
pub struct Message {
    head: Head,
    /// Data segments in order; never holds an empty segment. One inline
    /// segment covers a received frame or an application's buffer (a
    /// message moves through every layer, so it is kept small); a TCP
    /// segment cut across two of the application's writes, a receive
    /// offload's merged run or a reassembled datagram takes a pooled list
    /// (`BODY_POOL`), so that none allocates in steady state.
    body: Body,
    len: usize,
    /// DAA: the path this message is sent on, so the lowest layer can write the
    /// path's application identifiers and priority (an x-kernel message attribute).
    path: Option<PathId>,
    /// Segmentation offload: when non-zero, the message is a transport
    /// super-segment the link cuts into segments of this many payload bytes
    /// (TCP's TSO/GSO), so it may exceed the link's MTU on the way down; on
    /// the way up, one a link's receive offload merged from such segments.
    segment_size: u16,
}

impl Message {
    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    /// A message whose body is `data`, shared without copying.
    pub fn from_bytes(data: Bytes) -> Self {
        let mut m = Self::new();
        m.append_bytes(data);
        m
    }

    /// A message holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Self {
        Self::from_bytes(Bytes::copy_from_slice(data))
    }

    /// The DAA path the message is sent on, if any.
    #[inline]
    pub fn path(&self) -> Option<PathId> {
        self.path
    }

    /// Tags the message with the path it is sent on.
    #[inline]
    pub fn set_path(&mut self, path: Option<PathId>) {
        self.path = path;
    }

    /// The payload bytes per segment a link cuts this message into, or 0 when
    /// it is one packet (see [`Control::GetSegmentation`](crate::Control)).
    ///
    /// On a received frame, non-zero marks segments of that size that the
    /// link's receive offload merged after verifying each one's checksums, as
    /// Linux's GRO packet carries its `gso_size` and needs no checksum check.
    #[inline]
    pub fn segment_size(&self) -> u16 {
        self.segment_size
    }

    /// Marks the message as a super-segment to be cut into `size`-byte
    /// segments below (0: one packet).
    #[inline]
    pub fn set_segment_size(&mut self, size: u16) {
        self.segment_size = size;
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the message holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for an `n`-byte header in front and returns it for the caller to
    /// fill. Uses headroom when there is some; otherwise takes a pooled head buffer.
    #[inline]
    pub fn push(&mut self, n: usize) -> &mut [u8] {
        self.len += n;
        self.head.push(n)
    }

    /// Pushes a copy of `header` in front.
    #[inline]
    pub fn push_slice(&mut self, header: &[u8]) {
        self.push(header.len()).copy_from_slice(header);
    }

    /// The first `n` bytes if they are contiguous, without copying.
    #[inline]
    pub fn peek(&self, n: usize) -> Option<&[u8]> {
        let head = self.head.len();
        if head >= n {
            return self.head.live().get(..n);
        }
        if head == 0 {
            return self.body.first().and_then(|b| b.get(..n));
        }
        None
    }

    /// True when the first `n` bytes lie in one segment.
    #[inline]
    fn is_contiguous(&self, n: usize) -> bool {
        let head = self.head.len();
        head >= n || (head == 0 && self.body.first().is_some_and(|b| b.len() >= n))
    }

    /// The first `n` bytes, made contiguous if they straddle segments (the copy
    /// BSD calls `m_pullup`). `None` when the message is shorter than `n`.
    #[inline]
    pub fn pullup(&mut self, n: usize) -> Option<&[u8]> {
        // Decided without holding a borrow, so the common case (the header is in
        // one segment already) is one check and no second look.
        if !self.is_contiguous(n) {
            if n > self.len {
                return None;
            }
            self.gather(n);
        }
        self.peek(n)
    }

    /// Copies the first `n` bytes into a fresh head (the rare path of `pullup`).
    #[cold]
    fn gather(&mut self, n: usize) {
        let mut head = Head::default();
        let front = head.push(n);
        self.copy_to_slice(0, front);
        self.strip(n);
        self.head = head;
        self.len += n;
    }

    /// The bytes from `offset` to the end of the segment holding it: what a
    /// demultiplexer at that depth can read without copying.
    #[inline]
    pub fn contiguous_at(&self, offset: usize) -> &[u8] {
        let head = self.head.live();
        if offset < head.len() {
            return &head[offset..];
        }
        self.contiguous_in_body(offset)
    }

    fn contiguous_in_body(&self, offset: usize) -> &[u8] {
        let mut at = offset - self.head.len();
        for chunk in &self.body {
            if at < chunk.len() {
                return &chunk[at..];
            }
            at -= chunk.len();
        }
        &[]
    }

    /// Removes `n` bytes from the front (a header that was read). Returns false,
    /// and leaves the message unchanged, when it is shorter than `n`.
    #[inline]
    pub fn strip(&mut self, n: usize) -> bool {
        // A header pushed by the sender (and received over the in-memory link)
        // or gathered by `pullup` lies in the head: the common case.
        if n <= self.head.len() {
            self.head.start += n as u32;
            self.len -= n;
            return true;
        }
        self.strip_into_body(n)
    }

    fn strip_into_body(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.len -= n;
        let from_head = self.head.len();
        self.head.start += from_head as u32;
        let mut rest = n - from_head;
        while rest > 0 {
            let first = &mut self.body[0];
            if first.len() > rest {
                bytes::Buf::advance(first, rest);
                rest = 0;
            } else {
                rest -= first.len();
                self.body.remove(0);
            }
        }
        true
    }

    /// Shortens the message to `len` bytes, dropping the tail (link padding,
    /// bytes beyond a header's length field). No-op when already shorter.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.cut(len);
        }
    }

    /// [`truncate`](Self::truncate) when there is something to cut.
    fn cut(&mut self, len: usize) {
        let head = self.head.len();
        if len <= head {
            self.head.end = self.head.start + len as u32;
            self.body.clear();
        } else {
            let mut keep = len - head;
            let mut segments = 0;
            for seg in self.body.iter_mut() {
                if keep == 0 {
                    break;
                }
                if seg.len() > keep {
                    seg.truncate(keep);
                }
                keep -= seg.len();
                segments += 1;
            }
            self.body.truncate(segments);
        }
        self.len = len;
    }

    /// Splits the message at `at`: `self` keeps `[0, at)` and the tail `[at, len)`
    /// is returned. The body is shared, not copied. `at` beyond the end yields an
    /// empty tail.
    pub fn split_off(&mut self, at: usize) -> Message {
        if at >= self.len {
            return Message::new();
        }
        let mut tail = Message::new();
        tail.path = self.path;
        let head = self.head.len();
        if at < head {
            tail.append_bytes(Bytes::copy_from_slice(&self.head.live()[at..]));
            for seg in self.body.drain(..) {
                tail.append_bytes(seg);
            }
        } else {
            let mut skip = at - head;
            let mut first_moved = self.body.len();
            for (i, seg) in self.body.iter_mut().enumerate() {
                if skip < seg.len() {
                    if skip > 0 {
                        tail.append_bytes(seg.split_off(skip));
                        first_moved = i + 1;
                    } else {
                        first_moved = i;
                    }
                    break;
                }
                skip -= seg.len();
            }
            for seg in self.body.drain(first_moved..) {
                tail.append_bytes(seg);
            }
        }
        self.truncate(at);
        tail
    }

    /// Appends `other` behind this message (reassembly). Bodies are shared; the
    /// other message's head becomes a body segment without copying.
    pub fn join(&mut self, mut other: Message) {
        if other.head.len() > 0 {
            let head = other.head.take_bytes();
            self.append_bytes(head);
        }
        for seg in other.body.drain(..) {
            self.append_bytes(seg);
        }
    }

    /// Appends a shared segment behind the message.
    pub fn append_bytes(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        self.len += data.len();
        if self.body.len() == self.body.inline_size()
            && !self.body.spilled()
            && let Some(mut list) = BODY_POOL.with(|p| p.borrow_mut().pop())
        {
            list.extend(self.body.drain(..));
            self.body = list;
        }
        self.body.push(data);
    }

    /// The message's bytes as contiguous chunks, front to back.
    #[inline]
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        Chunks {
            head: self.head.live(),
            body: self.body.iter(),
        }
    }

    /// How many chunks `chunks` yields.
    pub fn chunk_count(&self) -> usize {
        usize::from(self.head.len() > 0) + self.body.len()
    }

    /// Calls `f` on every chunk with write access, in order. Shared segments are
    /// taken over in place when this message holds the only reference, and copied
    /// otherwise (so other holders never see the change).
    pub fn for_each_chunk_mut(&mut self, mut f: impl FnMut(&mut [u8])) {
        if self.head.len() > 0 {
            f(self.head.live_mut());
        }
        for seg in self.body.iter_mut() {
            let shared = std::mem::take(seg);
            let mut owned = shared
                .try_into_mut()
                .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
            f(&mut owned);
            *seg = owned.freeze();
        }
    }

    /// Copies bytes starting at `offset` into `dst`, as many as fit and exist;
    /// returns how many were copied.
    pub fn copy_to_slice(&self, offset: usize, dst: &mut [u8]) -> usize {
        // The common case: a header read from the head.
        let end = offset.saturating_add(dst.len());
        if let Some(src) = self.head.live().get(offset..end) {
            dst.copy_from_slice(src);
            return dst.len();
        }
        let mut skip = offset;
        let mut done = 0;
        for chunk in self.chunks() {
            if done == dst.len() {
                break;
            }
            if skip >= chunk.len() {
                skip -= chunk.len();
                continue;
            }
            let part = &chunk[skip..];
            skip = 0;
            let n = part.len().min(dst.len() - done);
            dst[done..done + n].copy_from_slice(&part[..n]);
            done += n;
        }
        done
    }

    /// The whole message as one `Bytes`: free when it already is one segment,
    /// otherwise one copy (what a NIC's gather DMA would do).
    pub fn into_bytes(mut self) -> Bytes {
        if self.head.len() == 0 && self.body.len() == 1 {
            return self.body.pop().unwrap_or_default();
        }
        if self.body.is_empty() {
            return self.head.take_bytes();
        }
        Bytes::from(self.to_vec())
    }

    /// A copy of the whole message.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for chunk in self.chunks() {
            v.extend_from_slice(chunk);
        }
        v
    }
}

/// The iterator of [`Message::chunks`]: the head when it holds bytes, then
/// the body's segments (a plain struct: summing a small datagram's chunks
/// is on every packet's path, and an adapter chain costs more per step).
struct Chunks<'a> {
    head: &'a [u8],
    body: std::slice::Iter<'a, Bytes>,
}

impl<'a> Iterator for Chunks<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if !self.head.is_empty() {
            return Some(std::mem::take(&mut self.head));
        }
        self.body.next().map(|b| &b[..])
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if self.body.spilled() && self.body.capacity() <= BODY_CAPACITY_KEPT {
            self.body.clear();
            let list = std::mem::take(&mut self.body);
            // `try_with`: a message may be dropped while the thread exits.
            let _ = BODY_POOL.try_with(|p| {
                let mut pool = p.borrow_mut();
                if pool.len() < BODY_POOL_LIMIT {
                    pool.push(list);
                }
            });
        }
    }
}

impl From<Bytes> for Message {
    fn from(b: Bytes) -> Self {
        Message::from_bytes(b)
    }
}

impl From<Vec<u8>> for Message {
    fn from(v: Vec<u8>) -> Self {
        Message::from_bytes(Bytes::from(v))
    }
}

impl From<&[u8]> for Message {
    fn from(s: &[u8]) -> Self {
        Message::from_slice(s)
    }
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.to_vec() == other.to_vec()
    }
}

impl Eq for Message {}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<u8> = self.chunks().flatten().copied().take(32).collect();
        write!(
            f,
            "Message {{ len: {}, chunks: {}, head: {:02x?}{} }}",
            self.len,
            self.chunk_count(),
            shown,
            if self.len > 32 { "…" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_then_pop_headers_without_touching_the_body() {
        let body = Bytes::from_static(b"payload");
        let mut m = Message::from_bytes(body.clone());
        m.push_slice(b"UDPH");
        m.push_slice(b"IPHDR");
        assert_eq!(m.to_vec(), b"IPHDRUDPHpayload");
        assert_eq!(m.peek(5), Some(&b"IPHDR"[..]));
        assert!(m.strip(5));
        assert_eq!(m.peek(4), Some(&b"UDPH"[..]));
        assert!(m.strip(4));
        assert_eq!(
            m.into_bytes().as_ptr(),
            body.as_ptr(),
            "body must not be copied"
        );
    }

    #[test]
    fn pullup_joins_a_header_that_straddles_segments() {
        let mut m = Message::from_slice(b"ab");
        m.append_bytes(Bytes::from_static(b"cdef"));
        assert_eq!(m.peek(4), None);
        assert_eq!(m.pullup(4), Some(&b"abcd"[..]));
        assert_eq!(m.to_vec(), b"abcdef");
        assert_eq!(m.pullup(7), None);
    }

    #[test]
    fn strip_refuses_more_than_the_length() {
        let mut m = Message::from_slice(b"abc");
        assert!(!m.strip(4));
        assert_eq!(m.to_vec(), b"abc");
    }

    #[test]
    fn split_and_join_share_the_body() {
        let data = Bytes::from(vec![7u8; 3000]);
        let mut m = Message::from_bytes(data.clone());
        let tail = m.split_off(1480);
        assert_eq!((m.len(), tail.len()), (1480, 1520));
        m.join(tail);
        assert_eq!(m.to_vec(), data.to_vec());
        assert!(m.chunks().all(|c| c.iter().all(|&b| b == 7)));
    }

    #[test]
    fn chunk_mutation_does_not_leak_into_clones() {
        let original = Message::from_slice(b"hello");
        let mut copy = original.clone();
        copy.for_each_chunk_mut(|c| c.make_ascii_uppercase());
        assert_eq!(copy.to_vec(), b"HELLO");
        assert_eq!(original.to_vec(), b"hello");
    }

    #[test]
    fn a_header_larger_than_the_pooled_head_still_fits() {
        let mut m = Message::from_slice(b"x");
        m.push(HEAD_CAPACITY * 2).fill(1);
        m.push_slice(b"yy");
        assert_eq!(m.len(), HEAD_CAPACITY * 2 + 3);
        assert_eq!(&m.to_vec()[..3], b"yy\x01");
    }
}
