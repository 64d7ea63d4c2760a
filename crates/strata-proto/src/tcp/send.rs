//! The send side: the send buffer and the sequence variables of RFC 9293
//! §3.3.1 (SND.UNA, SND.NXT, SND.WND, SND.WL1, SND.WL2, ISS).
//!
//! The buffer holds every byte from SND.UNA on, acknowledged or not yet sent,
//! as the application's own messages: a segment, first sent or retransmitted,
//! is a slice of them made with [`Message::share`], so retransmission shares
//! the data with the buffer and nothing is copied. Bytes are numbered by a
//! 64-bit stream offset (byte 0 has sequence number ISS + 1) so the buffer
//! never has to think about wrap-around.
//!
//! Sizing follows Linux's tcp_wmem autotuning: the buffer starts at `sndbuf`
//! (at least twice the initial window) and grows to 2·cwnd, up to
//! `sndbuf_max`, whenever the application found it full while the congestion
//! window was not what held the sender back (`tcp_should_expand_sndbuf`).

use std::collections::VecDeque;

use strata_core::Message;

use super::seq::Seq;

/// Bytes waiting to be sent or acknowledged, by stream offset.
#[derive(Debug, Default)]
pub struct SendBuffer {
    /// The application's messages in order. The front one may begin before
    /// `start`: acknowledged bytes are not cut off it, as segments are cut
    /// from it by offset anyway.
    chunks: VecDeque<Chunk>,
    start: u64,
    end: u64,
    /// Messages dropped from the front so far, and the number (counting
    /// those) of the message the last slice ended in: the next slice starts
    /// there or in the one after, so it is found without a search.
    released: u64,
    last: u64,
}

/// One of the application's messages and the stream offsets it spans.
#[derive(Debug)]
struct Chunk {
    start: u64,
    end: u64,
    msg: Message,
}

impl SendBuffer {
    /// Bytes held.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Stream offset of the first byte held (SND.UNA's).
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Stream offset just past the last byte held.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Appends the application's data.
    pub fn push(&mut self, msg: Message) {
        if msg.is_empty() {
            return;
        }
        let start = self.end;
        self.end += msg.len() as u64;
        self.chunks.push_back(Chunk {
            start,
            end: self.end,
            msg,
        });
    }

    /// Forgets the bytes before `offset` (they were acknowledged), dropping
    /// the messages that hold nothing after it.
    pub fn release_to(&mut self, offset: u64) {
        let offset = offset.min(self.end);
        while self.chunks.front().is_some_and(|c| c.end <= offset) {
            self.chunks.pop_front();
            self.released += 1;
        }
        self.start = self.start.max(offset);
    }

    /// The index of the message holding stream offset `from`, which lies
    /// within the messages held.
    fn find(&self, from: u64) -> usize {
        let holds = |k: usize| {
            self.chunks
                .get(k)
                .is_some_and(|c| c.start <= from && from < c.end)
        };
        let k = self.last.saturating_sub(self.released) as usize;
        if holds(k) {
            return k;
        }
        if holds(k + 1) {
            return k + 1;
        }
        self.chunks.partition_point(|c| c.end <= from)
    }

    /// Up to `len` bytes from stream offset `from`, sharing the buffer's data
    /// (reference-counted sub-slices of the application's messages).
    pub fn slice(&mut self, from: u64, len: usize) -> Message {
        let mut out = Message::new();
        if from >= self.end || self.chunks.front().is_none_or(|c| from < c.start) {
            return out;
        }
        let mut k = self.find(from);
        if let Some(c) = self.chunks.get(k) {
            out.set_path(c.msg.path());
        }
        let mut at = from;
        let mut need = len as u64;
        while need > 0
            && let Some(c) = self.chunks.get(k)
        {
            let take = (c.end - at).min(need);
            out.append_share(&c.msg, (at - c.start) as usize, take as usize);
            self.last = self.released + k as u64;
            at += take;
            need -= take;
            k += 1;
        }
        out
    }
}

/// The send side of a connection.
#[derive(Debug)]
pub struct Sender {
    /// ISS: our initial sequence number.
    pub iss: Seq,
    /// SND.UNA: oldest unacknowledged sequence number.
    pub una: Seq,
    /// SND.NXT: the next new sequence number to send. It never moves back;
    /// retransmissions are chosen by loss recovery below it.
    pub nxt: Seq,
    /// SND.WND in bytes (scaled).
    pub wnd: u32,
    /// SND.WL1: the segment sequence number of the last window update.
    pub wl1: Seq,
    /// SND.WL2: the segment acknowledgment number of the last window update.
    pub wl2: Seq,
    /// MAX.SND.WND: the largest window the peer has offered (RFC 5961 §5.2).
    pub max_wnd: u32,
    /// The window scale the peer asked for (Snd.Wind.Shift, RFC 7323 §2.3).
    pub wscale: u8,
    /// Data from SND.UNA on.
    pub buf: SendBuffer,
    /// The application will send nothing more: a FIN follows the buffer.
    pub fin_queued: bool,
    /// Effective send MSS: the most data one segment carries (RFC 9293
    /// §3.7.1, options of every segment taken off).
    pub mss: u32,
    /// Segmentation offload: the longest segment, header included, the
    /// layers below cut into MSS-sized ones (`Control::GetSegmentation`);
    /// 0 when they do not.
    pub offload: u32,
    /// The buffer's current size.
    pub sndbuf: usize,
    /// The most it may grow to.
    pub sndbuf_max: usize,
    /// Nagle's algorithm off (RFC 9293 §3.7.4).
    pub nodelay: bool,
    /// The application was refused room, or filled the buffer: tell it
    /// `Writable` when room comes back.
    pub wants_writable: bool,
}

impl Sender {
    /// A send side starting at `iss`.
    pub fn new(iss: Seq, sndbuf: usize, sndbuf_max: usize, nodelay: bool) -> Sender {
        Sender {
            iss,
            una: iss,
            nxt: iss,
            wnd: 0,
            wl1: Seq(0),
            wl2: Seq(0),
            max_wnd: 0,
            wscale: 0,
            buf: SendBuffer::default(),
            fin_queued: false,
            mss: 536,
            offload: 0,
            sndbuf,
            sndbuf_max: sndbuf_max.max(sndbuf),
            nodelay,
            wants_writable: false,
        }
    }

    /// The sequence number of stream offset `offset`.
    pub fn seq_of(&self, offset: u64) -> Seq {
        self.iss + 1 + offset as u32
    }

    /// The stream offset of `seq`, which must lie at or after the first byte
    /// held.
    pub fn offset_of(&self, seq: Seq) -> u64 {
        let first = self.seq_of(self.buf.start());
        self.buf.start() + u64::from(seq.since(first))
    }

    /// The sequence number just past the data (where the FIN goes).
    pub fn data_end(&self) -> Seq {
        self.seq_of(self.buf.end())
    }

    /// The FIN's sequence number, once the application has closed.
    pub fn fin_seq(&self) -> Option<Seq> {
        self.fin_queued.then(|| self.data_end())
    }

    /// True once the FIN has been sent.
    pub fn fin_sent(&self) -> bool {
        self.fin_seq().is_some_and(|f| self.nxt > f)
    }

    /// True once the FIN has been acknowledged.
    pub fn fin_acked(&self) -> bool {
        self.fin_seq().is_some_and(|f| self.una > f)
    }

    /// Bytes sent and not acknowledged (SYN and FIN included).
    pub fn flight(&self) -> u32 {
        self.nxt.since(self.una)
    }

    /// Bytes not yet sent.
    pub fn unsent(&self) -> usize {
        let next = self.offset_of(self.nxt.max(self.seq_of(self.buf.start())));
        self.buf.end().saturating_sub(next) as usize
    }

    /// Room for more data from the application.
    pub fn free(&self) -> usize {
        self.sndbuf.saturating_sub(self.buf.len())
    }

    /// `tcp::Write`: takes as much of `msg` as fits and returns how much.
    pub fn write(&mut self, mut msg: Message) -> usize {
        let n = msg.len().min(self.free());
        if n < msg.len() || n == self.free() {
            self.wants_writable = true;
        }
        msg.truncate(n);
        self.buf.push(msg);
        n
    }

    /// `push`: takes the whole message when the buffer, grown to its cap if
    /// need be, holds it; otherwise takes nothing. Whole messages keep the
    /// stream what the application meant when something must be refused.
    pub fn push_whole(&mut self, msg: Message) -> bool {
        if self.buf.len() + msg.len() > self.sndbuf_max {
            self.wants_writable = true;
            return false;
        }
        self.buf.push(msg);
        if self.free() == 0 {
            self.wants_writable = true;
        }
        true
    }

    /// Autotuning: called on ACKs of new data.
    pub fn expand(&mut self, cwnd: u32, cwnd_limited: bool) {
        if self.wants_writable && !cwnd_limited {
            let want = 2 * cwnd as usize;
            self.sndbuf = self.sndbuf.max(want.min(self.sndbuf_max));
        }
    }

    /// Whether to tell the application `Writable` now: it was refused, and a
    /// third of the buffer is free again (Linux wakes writers at the same
    /// point, `sk_stream_min_wspace`).
    pub fn take_writable(&mut self) -> bool {
        if self.wants_writable && !self.fin_queued && self.free() >= (self.sndbuf / 3).max(1) {
            self.wants_writable = false;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn slices_cross_messages_and_share_their_bytes() {
        let mut b = SendBuffer::default();
        let first = Bytes::from_static(b"hello ");
        b.push(Message::from_bytes(first.clone()));
        b.push(Message::from_slice(b"world"));
        assert_eq!(b.slice(3, 5).to_vec(), b"lo wo");
        assert_eq!(b.slice(9, 100).to_vec(), b"ld");
        let whole_first = b.slice(0, 6);
        assert_eq!(
            whole_first.into_bytes().as_ptr(),
            first.as_ptr(),
            "a slice is the application's own bytes"
        );
        b.release_to(4);
        assert_eq!((b.start(), b.len()), (4, 7));
        assert_eq!(b.slice(4, 3).to_vec(), b"o w");
        b.release_to(11);
        assert!(b.is_empty());
    }

    #[test]
    fn slices_follow_the_stream_across_releases_in_any_order() {
        // Messages of uneven sizes; slices taken in order (the usual case,
        // found from the last one), backwards and after partial releases
        // must all be the stream's bytes.
        let stream: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let mut b = SendBuffer::default();
        let mut at = 0;
        for len in [1, 700, 1448, 3, 1500, 1348] {
            b.push(Message::from_slice(&stream[at..at + len]));
            at += len;
        }
        let check = |b: &mut SendBuffer, from: usize, len: usize| {
            let want = &stream[from..(from + len).min(stream.len())];
            assert_eq!(b.slice(from as u64, len).to_vec(), want, "{from}+{len}");
        };
        for from in (0..5000).step_by(1448) {
            check(&mut b, from, 1448);
        }
        for from in [4000, 100, 0, 701, 2149, 2150, 3652, 4999] {
            check(&mut b, from, 1448);
        }
        b.release_to(1000);
        check(&mut b, 1000, 1448);
        check(&mut b, 2448, 1448);
        b.release_to(2152);
        assert_eq!((b.start(), b.len()), (2152, 2848));
        for from in [2152, 3600, 2152, 4999] {
            check(&mut b, from, 1448);
        }
        assert!(b.slice(5000, 10).is_empty() && b.slice(9000, 10).is_empty());
        b.release_to(5000);
        assert!(b.is_empty() && b.slice(4999, 1).is_empty());
    }

    #[test]
    fn write_takes_what_fits_and_asks_to_be_told_when_room_comes_back() {
        let mut s = Sender::new(Seq(100), 10, 20, false);
        assert_eq!(s.write(Message::from_slice(b"0123456")), 7);
        assert!(!s.wants_writable);
        assert_eq!(s.write(Message::from_slice(b"789abc")), 3);
        assert!(s.wants_writable);
        assert!(!s.take_writable(), "still full");
        s.buf.release_to(5);
        assert!(s.take_writable());
        assert_eq!(s.seq_of(0), Seq(101));
        assert_eq!(s.data_end(), Seq(111));
    }

    #[test]
    fn push_queues_whole_messages_up_to_the_cap() {
        let mut s = Sender::new(Seq(0), 10, 20, false);
        assert!(
            s.push_whole(Message::from_slice(&[0; 15])),
            "beyond sndbuf, within the cap"
        );
        assert!(
            !s.push_whole(Message::from_slice(&[0; 6])),
            "beyond the cap: refused whole"
        );
        assert_eq!(s.buf.len(), 15);
        assert!(s.wants_writable);
    }

    #[test]
    fn the_buffer_grows_to_twice_cwnd_only_when_the_application_was_held_back() {
        let mut s = Sender::new(Seq(0), 1000, 10_000, false);
        s.expand(3000, false);
        assert_eq!(s.sndbuf, 1000, "the application never waited");
        s.wants_writable = true;
        s.expand(3000, true);
        assert_eq!(s.sndbuf, 1000, "cwnd was the limit");
        s.expand(3000, false);
        assert_eq!(s.sndbuf, 6000);
        s.expand(9000, false);
        assert_eq!(s.sndbuf, 10_000, "capped");
    }
}
