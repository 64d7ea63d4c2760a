//! The x-kernel message: a byte string that headers are pushed onto and popped off
//! without copying the data they wrap.
//!
//! A message is a *head* — an owned buffer whose live bytes sit at its end, so that
//! `push` writes downward into headroom — followed by *body segments*, shared
//! [`Bytes`] that may borrow an application's buffer or a received frame. Layer
//! crossings never copy: `push` writes into headroom, `pop` advances a cursor,
//! `split_off`/`join` slice and concatenate segments, and `clone` shares the body
//! (only the small head is copied).
//!
//! The message itself is one pointer: its head buffer, segment list and
//! attributes live in one block taken from a per-thread pool, so a steady
//! stream of messages does not allocate, and handing a message from layer to
//! layer by value (the UPI's `push`, the engine's queues, a delivery) moves
//! eight bytes, not the ninety its parts take (issue 15: every layer crossing
//! moved the whole message several times). An empty message holds no block.

use std::cell::RefCell;
use std::fmt;

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

use crate::ids::PathId;

/// Capacity of a pooled head buffer: room for Ethernet, IPv4 and TCP headers with
/// all their options, and then some.
pub const HEAD_CAPACITY: usize = 192;

/// How many idle message blocks a thread keeps for reuse.
const POOL_LIMIT: usize = 1024;

/// The segment list of a message's body: one segment inline (a received
/// frame, an application's buffer), more in a list from the thread's pool.
type Body = SmallVec<[Bytes; 1]>;

/// How many spilled segment lists a thread keeps, and the largest capacity
/// kept (a reassembled datagram's list may be far longer than the usual).
const BODY_POOL_LIMIT: usize = 256;
const BODY_CAPACITY_KEPT: usize = 128;

thread_local! {
    /// Idle message blocks, each with an empty head buffer of
    /// `HEAD_CAPACITY` bytes and an empty inline segment list. Boxed: a
    /// message is the box, taken and given back whole.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Box<Inner>>> = const { RefCell::new(Vec::new()) };
    /// Empty segment lists with heap capacity, from dropped messages: a
    /// message that grows past two segments (a receive offload's merged run,
    /// a reassembled datagram) takes one instead of allocating.
    static BODY_POOL: RefCell<Vec<Body>> = const { RefCell::new(Vec::new()) };
}

/// A message's parts. Live head bytes are `buf[start..end]`; `buf[..start]`
/// is headroom for the next `push`.
struct Inner {
    buf: Box<[u8]>,
    start: u32,
    end: u32,
    /// Data segments in order; never holds an empty segment. One inline
    /// segment covers a received frame or an application's buffer; a TCP
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

/// A block from the pool, or a new one.
#[inline]
fn take_inner() -> Box<Inner> {
    match POOL.with(|p| p.borrow_mut().pop()) {
        Some(inner) => inner,
        None => fresh_inner(),
    }
}

#[cold]
fn fresh_inner() -> Box<Inner> {
    Box::new(Inner {
        buf: vec![0; HEAD_CAPACITY].into_boxed_slice(),
        start: HEAD_CAPACITY as u32,
        end: HEAD_CAPACITY as u32,
        body: Body::new(),
        len: 0,
        path: None,
        segment_size: 0,
    })
}

/// Empties a dropped message's block and keeps it for reuse.
#[inline]
fn recycle(mut inner: Box<Inner>) {
    // A head that grew past the pooled size, or was taken as shared bytes,
    // is not kept (as the head pool always did).
    if inner.buf.len() != HEAD_CAPACITY {
        return;
    }
    if inner.body.spilled() {
        spill_back(&mut inner.body);
    } else {
        inner.body.clear();
    }
    inner.start = HEAD_CAPACITY as u32;
    inner.end = HEAD_CAPACITY as u32;
    inner.len = 0;
    inner.path = None;
    inner.segment_size = 0;
    // `try_with`: a message may be dropped while the thread exits.
    let _ = POOL.try_with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_LIMIT {
            pool.push(inner);
        }
    });
}

/// Gives a spilled segment list back to `BODY_POOL`, leaving an inline one.
#[cold]
fn spill_back(body: &mut Body) {
    body.clear();
    let list = std::mem::take(body);
    if list.capacity() > BODY_CAPACITY_KEPT {
        return;
    }
    let _ = BODY_POOL.try_with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < BODY_POOL_LIMIT {
            pool.push(list);
        }
    });
}

impl Inner {
    #[inline]
    fn live(&self) -> &[u8] {
        &self.buf[self.start as usize..self.end as usize]
    }

    #[inline]
    fn live_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start as usize..self.end as usize]
    }

    #[inline]
    fn head_len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Makes `n` bytes of room in front of the live head bytes and returns them.
    #[inline]
    fn push(&mut self, n: usize) -> &mut [u8] {
        if (self.start as usize) < n {
            self.regrow(n);
        }
        self.start -= n as u32;
        self.len += n;
        &mut self.buf[self.start as usize..self.start as usize + n]
    }

    /// Moves the live head bytes into a buffer of `size` bytes, ending
    /// `behind` bytes before its end.
    #[cold]
    fn relocate(&mut self, size: usize, behind: usize) {
        let live = self.head_len();
        let mut fresh = vec![0; size].into_boxed_slice();
        let end = size - behind;
        fresh[end - live..end].copy_from_slice(self.live());
        self.buf = fresh;
        let end = u32::try_from(end).expect("a message head stays below 4 GiB");
        self.start = end - live as u32;
        self.end = end;
    }

    /// Makes room for `n` more bytes in front of the head.
    #[cold]
    fn regrow(&mut self, n: usize) {
        let size = (self.head_len() + n + HEAD_CAPACITY / 2).max(HEAD_CAPACITY);
        self.relocate(size, 0);
    }

    /// Takes the live head bytes out as shared bytes, leaving the head empty
    /// (and without a buffer: the block is then not pooled again).
    fn take_bytes(&mut self) -> Bytes {
        let (start, end) = (self.start as usize, self.end as usize);
        let buf = std::mem::take(&mut self.buf);
        self.start = 0;
        self.end = 0;
        self.len -= end - start;
        Bytes::from(buf).slice(start..end)
    }

    /// Drops `n` bytes from the front of the body (`n` ≤ the body's length).
    fn advance_body(&mut self, mut rest: usize) {
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
    }

    /// Appends a non-empty shared segment behind the body.
    #[inline]
    fn append(&mut self, data: Bytes) {
        self.len += data.len();
        if self.body.len() == self.body.inline_size() && !self.body.spilled() {
            self.spill();
        }
        self.body.push(data);
    }

    /// Moves the inline segment list into a pooled one with room for more
    /// (when the pool has one; otherwise the list grows by itself).
    #[cold]
    fn spill(&mut self) {
        if let Some(mut list) = BODY_POOL.with(|p| p.borrow_mut().pop()) {
            list.extend(self.body.drain(..));
            self.body = list;
        }
    }
}

/// A protocol message: headers in front, data behind, no copies between layers.
#[derive(Default)]
pub struct Message {
    inner: Option<Box<Inner>>,
}

impl Message {
    /// An empty message.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// A message whose body is `data`, shared without copying.
    #[inline]
    pub fn from_bytes(data: Bytes) -> Self {
        let mut m = Self::new();
        m.append_bytes(data);
        m
    }

    /// A message holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Self {
        Self::from_bytes(Bytes::copy_from_slice(data))
    }

    /// The message's block, taken from the pool when it has none.
    #[inline]
    fn inner_mut(&mut self) -> &mut Inner {
        self.inner.get_or_insert_with(take_inner)
    }

    /// The live head bytes (empty when there are none).
    #[inline]
    fn head(&self) -> &[u8] {
        match &self.inner {
            Some(i) => i.live(),
            None => &[],
        }
    }

    /// The body's segments.
    #[inline]
    fn body(&self) -> &[Bytes] {
        match &self.inner {
            Some(i) => &i.body,
            None => &[],
        }
    }

    /// The DAA path the message is sent on, if any.
    #[inline]
    pub fn path(&self) -> Option<PathId> {
        self.inner.as_ref().and_then(|i| i.path)
    }

    /// Tags the message with the path it is sent on.
    #[inline]
    pub fn set_path(&mut self, path: Option<PathId>) {
        match &mut self.inner {
            Some(i) => i.path = path,
            None if path.is_some() => self.inner_mut().path = path,
            None => {}
        }
    }

    /// The payload bytes per segment a link cuts this message into, or 0 when
    /// it is one packet (see [`Control::GetSegmentation`](crate::Control)).
    ///
    /// On a received frame, non-zero marks segments of that size that the
    /// link's receive offload merged after verifying each one's checksums, as
    /// Linux's GRO packet carries its `gso_size` and needs no checksum check.
    #[inline]
    pub fn segment_size(&self) -> u16 {
        self.inner.as_ref().map_or(0, |i| i.segment_size)
    }

    /// Marks the message as a super-segment to be cut into `size`-byte
    /// segments below (0: one packet).
    #[inline]
    pub fn set_segment_size(&mut self, size: u16) {
        match &mut self.inner {
            Some(i) => i.segment_size = size,
            None if size != 0 => self.inner_mut().segment_size = size,
            None => {}
        }
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |i| i.len)
    }

    /// True when the message holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes room for an `n`-byte header in front and returns it for the caller to
    /// fill. Uses headroom when there is some; otherwise moves the head to a
    /// larger buffer.
    #[inline]
    pub fn push(&mut self, n: usize) -> &mut [u8] {
        self.inner_mut().push(n)
    }

    /// Pushes a copy of `header` in front.
    #[inline]
    pub fn push_slice(&mut self, header: &[u8]) {
        self.push(header.len()).copy_from_slice(header);
    }

    /// The first `n` bytes if they are contiguous, without copying.
    #[inline]
    pub fn peek(&self, n: usize) -> Option<&[u8]> {
        let Some(i) = self.inner.as_deref() else {
            return (n == 0).then_some(&[][..]);
        };
        let head = i.head_len();
        if head >= n {
            return i.live().get(..n);
        }
        if head == 0 {
            return i.body.first().and_then(|b| b.get(..n));
        }
        None
    }

    /// True when the first `n` bytes lie in one segment.
    #[inline]
    fn is_contiguous(&self, n: usize) -> bool {
        let Some(i) = self.inner.as_deref() else {
            return n == 0;
        };
        let head = i.head_len();
        head >= n || (head == 0 && i.body.first().is_some_and(|b| b.len() >= n))
    }

    /// The first `n` bytes, made contiguous if they straddle segments (the copy
    /// BSD calls `m_pullup`). `None` when the message is shorter than `n`.
    #[inline]
    pub fn pullup(&mut self, n: usize) -> Option<&[u8]> {
        // The common case, inlined where a layer pops: the header lies in the
        // head (pushed by the sender, or gathered). Decided without holding a
        // borrow, so the rest can take `self` mutably.
        if self.inner.as_deref().is_some_and(|i| i.head_len() >= n) {
            return self.peek(n);
        }
        self.pullup_rest(n)
    }

    /// [`pullup`](Self::pullup) when the head does not hold the `n` bytes.
    #[inline(never)]
    fn pullup_rest(&mut self, n: usize) -> Option<&[u8]> {
        if !self.is_contiguous(n) {
            if n > self.len() {
                return None;
            }
            self.gather(n);
        }
        self.peek(n)
    }

    /// Moves body bytes behind the head until the head holds the first `n`
    /// bytes (the rare path of `pullup`; `n` ≤ the length).
    #[cold]
    fn gather(&mut self, n: usize) {
        let i = self.inner_mut();
        let live = i.head_len();
        let extra = n - live;
        if i.buf.len() < n {
            let size = (n + HEAD_CAPACITY / 2).max(HEAD_CAPACITY);
            i.relocate(size, extra);
        } else if i.buf.len() - (i.end as usize) < extra {
            let to = i.buf.len() - n;
            let (start, end) = (i.start as usize, i.end as usize);
            i.buf.copy_within(start..end, to);
            i.start = to as u32;
            i.end = (to + live) as u32;
        }
        let end = i.end as usize;
        let mut at = 0;
        for chunk in &i.body {
            if at == extra {
                break;
            }
            let k = chunk.len().min(extra - at);
            i.buf[end + at..end + at + k].copy_from_slice(&chunk[..k]);
            at += k;
        }
        i.advance_body(extra);
        i.end += extra as u32;
    }

    /// The bytes from `offset` to the end of the segment holding it: what a
    /// demultiplexer at that depth can read without copying.
    #[inline]
    pub fn contiguous_at(&self, offset: usize) -> &[u8] {
        let Some(i) = self.inner.as_deref() else {
            return &[];
        };
        let head = i.live();
        if offset < head.len() {
            return &head[offset..];
        }
        Self::contiguous_in_body(i, offset)
    }

    fn contiguous_in_body(i: &Inner, offset: usize) -> &[u8] {
        let mut at = offset - i.head_len();
        for chunk in &i.body {
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
        let Some(i) = self.inner.as_deref_mut() else {
            return n == 0;
        };
        // A header pushed by the sender (and received over the in-memory link)
        // or gathered by `pullup` lies in the head: the common case.
        if n <= i.head_len() {
            i.start += n as u32;
            i.len -= n;
            return true;
        }
        Self::strip_into_body(i, n)
    }

    fn strip_into_body(i: &mut Inner, n: usize) -> bool {
        if n > i.len {
            return false;
        }
        i.len -= n;
        let from_head = i.head_len();
        i.start += from_head as u32;
        i.advance_body(n - from_head);
        true
    }

    /// Shortens the message to `len` bytes, dropping the tail (link padding,
    /// bytes beyond a header's length field). No-op when already shorter.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if let Some(i) = self.inner.as_deref_mut()
            && len < i.len
        {
            Self::cut(i, len);
        }
    }

    /// [`truncate`](Self::truncate) when there is something to cut.
    fn cut(i: &mut Inner, len: usize) {
        let head = i.head_len();
        if len <= head {
            i.end = i.start + len as u32;
            i.body.clear();
        } else {
            let mut keep = len - head;
            let mut segments = 0;
            for seg in i.body.iter_mut() {
                if keep == 0 {
                    break;
                }
                if seg.len() > keep {
                    seg.truncate(keep);
                }
                keep -= seg.len();
                segments += 1;
            }
            i.body.truncate(segments);
        }
        i.len = len;
    }

    /// Splits the message at `at`: `self` keeps `[0, at)` and the tail `[at, len)`
    /// is returned. The body is shared, not copied. `at` beyond the end yields an
    /// empty tail.
    pub fn split_off(&mut self, at: usize) -> Message {
        let Some(i) = self.inner.as_deref_mut() else {
            return Message::new();
        };
        if at >= i.len {
            return Message::new();
        }
        let mut tail = Message::new();
        let t = tail.inner_mut();
        t.path = i.path;
        let head = i.head_len();
        if at < head {
            t.append(Bytes::copy_from_slice(&i.live()[at..]));
            for seg in i.body.drain(..) {
                t.append(seg);
            }
        } else {
            let mut skip = at - head;
            let mut first_moved = i.body.len();
            for (k, seg) in i.body.iter_mut().enumerate() {
                if skip < seg.len() {
                    if skip > 0 {
                        t.append(seg.split_off(skip));
                        first_moved = k + 1;
                    } else {
                        first_moved = k;
                    }
                    break;
                }
                skip -= seg.len();
            }
            for seg in i.body.drain(first_moved..) {
                t.append(seg);
            }
        }
        self.truncate(at);
        tail
    }

    /// Bytes `from..from + len` of the message as a new message, sharing the
    /// body: each body segment in the range is a reference-counted sub-slice,
    /// and head bytes in the range (the message's own) are copied. The range
    /// is cut at the message's end. What a send buffer's segment is: the same
    /// bytes as a clone stripped and truncated, without taking a reference to
    /// every segment and dropping most of them again.
    pub fn share(&self, from: usize, len: usize) -> Message {
        let mut m = Message::new();
        m.append_share(self, from, len);
        m.set_path(self.path());
        m
    }

    /// Appends bytes `from..from + len` of `src` behind this message, sharing
    /// `src`'s body as [`share`](Self::share) does (cut at `src`'s end).
    pub fn append_share(&mut self, src: &Message, from: usize, len: usize) {
        let Some(i) = src.inner.as_deref() else {
            return;
        };
        let end = from.saturating_add(len).min(i.len);
        if from >= end {
            return;
        }
        let head = i.live();
        let mut at = from;
        if at < head.len() {
            let k = head.len().min(end);
            if self.is_empty() {
                self.push_slice(&head[at..k]);
            } else {
                self.append_bytes(Bytes::copy_from_slice(&head[at..k]));
            }
            at = k;
        }
        let mut base = head.len();
        let c = self.inner_mut();
        for seg in &i.body {
            if at == end {
                break;
            }
            let seg_end = base + seg.len();
            if at < seg_end {
                let (a, b) = (at - base, end.min(seg_end) - base);
                c.append(if a == 0 && b == seg.len() {
                    seg.clone()
                } else {
                    seg.slice(a..b)
                });
                at = base + b;
            }
            base = seg_end;
        }
    }

    /// Appends `other` behind this message (reassembly). Bodies are shared; the
    /// other message's head becomes a body segment without copying.
    pub fn join(&mut self, mut other: Message) {
        let Some(o) = other.inner.as_deref_mut() else {
            return;
        };
        if o.head_len() > 0 {
            let head = o.take_bytes();
            self.append_bytes(head);
        }
        for seg in o.body.drain(..) {
            self.append_bytes(seg);
        }
    }

    /// Appends a shared segment behind the message.
    #[inline]
    pub fn append_bytes(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        self.inner_mut().append(data);
    }

    /// The message's bytes as contiguous chunks, front to back.
    #[inline]
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        Chunks {
            head: self.head(),
            body: self.body().iter(),
        }
    }

    /// How many chunks `chunks` yields.
    pub fn chunk_count(&self) -> usize {
        usize::from(!self.head().is_empty()) + self.body().len()
    }

    /// Calls `f` on every chunk with write access, in order. Shared segments are
    /// taken over in place when this message holds the only reference, and copied
    /// otherwise (so other holders never see the change).
    pub fn for_each_chunk_mut(&mut self, mut f: impl FnMut(&mut [u8])) {
        let Some(i) = self.inner.as_deref_mut() else {
            return;
        };
        if i.head_len() > 0 {
            f(i.live_mut());
        }
        for seg in i.body.iter_mut() {
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
        if let Some(src) = self.head().get(offset..end) {
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
        let Some(i) = self.inner.as_deref_mut() else {
            return Bytes::new();
        };
        if i.head_len() == 0 && i.body.len() == 1 {
            return i.body.pop().unwrap_or_default();
        }
        if i.body.is_empty() {
            return i.take_bytes();
        }
        Bytes::from(self.to_vec())
    }

    /// A copy of the whole message.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        for chunk in self.chunks() {
            v.extend_from_slice(chunk);
        }
        v
    }
}

impl Clone for Message {
    fn clone(&self) -> Self {
        let Some(i) = self.inner.as_deref() else {
            return Message::new();
        };
        let mut m = Message::new();
        let c = m.inner_mut();
        if i.head_len() > 0 {
            c.push(i.head_len()).copy_from_slice(i.live());
        }
        for seg in &i.body {
            c.append(seg.clone());
        }
        c.path = i.path;
        c.segment_size = i.segment_size;
        m
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
    #[inline]
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            recycle(inner);
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
        self.len() == other.len() && self.to_vec() == other.to_vec()
    }
}

impl Eq for Message {}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<u8> = self.chunks().flatten().copied().take(32).collect();
        write!(
            f,
            "Message {{ len: {}, chunks: {}, head: {:02x?}{} }}",
            self.len(),
            self.chunk_count(),
            shown,
            if self.len() > 32 { "…" } else { "" }
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

    #[test]
    fn a_message_moves_as_one_pointer() {
        assert_eq!(std::mem::size_of::<Message>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn pullup_behind_a_full_head_keeps_the_bytes_in_order() {
        // A head whose live bytes end at its buffer's end (pushed headers),
        // then a body: gathering must move the head to make room behind it.
        let mut m = Message::from_slice(b"0123456789");
        m.push_slice(b"hdr");
        assert_eq!(m.pullup(8), Some(&b"hdr01234"[..]));
        assert_eq!(m.to_vec(), b"hdr0123456789");
        // Longer than a pooled head: the head moves to a larger buffer.
        let body = vec![5u8; HEAD_CAPACITY * 2];
        let mut m = Message::from_slice(&body);
        m.push_slice(b"ab");
        let want: Vec<u8> = b"ab".iter().chain(&body).copied().collect();
        assert_eq!(
            m.pullup(HEAD_CAPACITY + 10),
            Some(&want[..HEAD_CAPACITY + 10])
        );
        assert_eq!(m.to_vec(), want);
        assert_eq!(m.len(), want.len());
    }

    #[test]
    fn share_is_the_clone_cut_to_the_range_and_shares_the_body() {
        let body = Bytes::from((0..200u8).collect::<Vec<u8>>());
        let mut m = Message::from_bytes(body.slice(..80));
        m.append_bytes(body.slice(80..));
        m.push_slice(b"head");
        m.set_path(Some(PathId(2)));
        let whole = m.to_vec();
        for (from, len) in [
            (0, 4),
            (2, 10),
            (4, 76),
            (10, 100),
            (84, 120),
            (0, 204),
            (150, 999),
        ] {
            let mut cut = m.clone();
            cut.strip(from.min(cut.len()));
            cut.truncate(len);
            let s = m.share(from, len);
            assert_eq!(s, cut, "{from}+{len}");
            assert_eq!(s.to_vec(), whole[from..(from + len).min(whole.len())]);
            assert_eq!(s.path(), Some(PathId(2)));
        }
        assert!(m.share(204, 5).is_empty() && m.share(300, 5).is_empty());
        assert!(Message::new().share(0, 5).is_empty());
        // Body bytes are the original's, not copies.
        let s = m.share(4, 80);
        assert_eq!(s.into_bytes().as_ptr(), body.as_ptr());
        let s = m.share(10, 20);
        assert_eq!(
            s.chunks().next().map(<[u8]>::as_ptr),
            Some(body[6..].as_ptr())
        );
        // Appending ranges of several messages gives their bytes in order.
        let mut joined = m.share(2, 10);
        joined.append_share(&m, 0, 6);
        joined.append_share(&m, 190, 50);
        let want: Vec<u8> = [&whole[2..12], &whole[..6], &whole[190..]].concat();
        assert_eq!(joined.to_vec(), want);
        assert_eq!(joined.len(), want.len());
    }

    #[test]
    fn a_reused_block_carries_nothing_over() {
        let mut m = Message::from_slice(b"old");
        m.push_slice(b"head");
        m.set_path(Some(PathId(3)));
        m.set_segment_size(1448);
        drop(m);
        let n = Message::from_slice(b"new");
        assert_eq!((n.path(), n.segment_size(), n.len()), (None, 0, 3));
        assert_eq!(n.to_vec(), b"new");
        let empty = Message::new();
        assert_eq!(empty.len(), 0);
        assert_eq!((empty.peek(0), empty.peek(1)), (Some(&[][..]), None));
        assert_eq!(empty.chunk_count(), 0);
    }
}
