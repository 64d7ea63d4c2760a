//! Receive offload in software (LRO/GRO): in-order TCP segments of one
//! connection, received back to back, merged into one frame before the
//! layers above see them, under the rules of Linux's `tcp_gro_receive`.

use strata_core::Message;
use strata_core::checksum::{self, Checksum};

use super::{
    ACK, CWR, FIN, Headers, Owned, PSH, RST, SEGMENTED_MAX, SYN, SharedSums, URG, data_sum,
};

/// Merges runs of received TCP segments. Frames go in one at a time
/// ([`push`](Self::push)) and come out, merged or as they were, through the
/// caller's `out`, in the order received; at most one run is held, until a
/// frame that does not continue it or [`flush`](Self::flush) (the end of a
/// receive batch).
///
/// A segment joins a run when it is the run's next byte, of the same
/// connection with the same headers but for lengths, identification,
/// sequence number and checksums; carries data with ACK and none of SYN,
/// FIN, RST, URG and CWR (PSH ends the run); its checksums verify; and the
/// run's segments before it were all of the first one's size. Anything else —
/// a pure ACK, a SYN or FIN, an IPv4 fragment or options, a bad checksum —
/// ends the run and goes up as it came, for the protocols to judge and count.
///
/// The merged frame's IPv4 and TCP headers are the first segment's with the
/// run's length, PSH if the last had it, and checksums that verify; it is
/// marked with the segments' size ([`Message::segment_size`]) so TCP keeps
/// counting full-sized segments for its acknowledgements and does not verify
/// again what was verified here.
#[derive(Default)]
pub struct Coalescer {
    held: Option<Run>,
    merged: u64,
}

/// The run being merged.
struct Run {
    headers: Headers<Owned>,
    /// Sums of what the run's segments share in their headers.
    sums: SharedSums,
    /// The run's data, headers stripped.
    data: Message,
    /// Sum of the data so far.
    sum: Checksum,
    segments: usize,
    /// Payload bytes of the first segment, and of the last.
    size: usize,
    last: usize,
    next_seq: u32,
}

impl Coalescer {
    /// A coalescer holding nothing.
    pub fn new() -> Coalescer {
        Coalescer::default()
    }

    /// Segments merged into another so far (what the layers above were
    /// spared).
    pub fn merged(&self) -> u64 {
        self.merged
    }

    /// Takes the next received frame.
    pub fn push(&mut self, frame: Message, out: &mut impl FnMut(Message)) {
        // Headers not whole in the frame's first chunk (never so from a
        // driver, the simulator or the in-memory pair) go up unmerged.
        let Some(h) = Headers::within(&frame).filter(|h| mergeable(h, frame.len())) else {
            return self.pass(frame, out);
        };
        let payload = frame.len() - h.o.end;
        let data = data_sum(&frame, h.o.end);
        let push = h.flags() & PSH != 0;
        // A segment that continues the run shares its headers but for its own
        // fields, so the run's shared sums verify it.
        if let Some(run) = self.held.as_mut().filter(|r| r.continues(&h, payload)) {
            if !run.sums.verify(&h, payload, data) {
                return self.pass(frame, out);
            }
            let end = h.o.end;
            run.join(frame, end, push, data);
            self.merged += 1;
        } else {
            if !verifies(&h, payload, data) {
                return self.pass(frame, out);
            }
            let h = h.to_owned();
            self.flush(out);
            self.held = Some(Run::start(h, frame, data));
        }
        if push {
            self.flush(out);
        }
    }

    /// Sends what is held up, then `frame` as it came.
    fn pass(&mut self, frame: Message, out: &mut impl FnMut(Message)) {
        self.flush(out);
        out(frame);
    }

    /// Sends the run held, if any, up.
    pub fn flush(&mut self, out: &mut impl FnMut(Message)) {
        if let Some(run) = self.held.take() {
            out(run.finish());
        }
    }
}

/// True for a frame a run could hold: TCP data with ACK and none of SYN,
/// FIN, RST, URG and CWR, in an IPv4 datagram without options that is not a
/// fragment and fills the frame (no Ethernet padding).
fn mergeable(h: &Headers<&[u8]>, frame_len: usize) -> bool {
    let (o, b) = (h.o, h.bytes);
    let ip_len = usize::from(u16::from_be_bytes([b[o.ip + 2], b[o.ip + 3]]));
    let fragment = u16::from_be_bytes([b[o.ip + 6], b[o.ip + 7]]) & 0x3fff != 0;
    let flags = h.flags();
    let plain = flags & (FIN | SYN | RST | URG | CWR) == 0 && flags & ACK != 0;
    let fits = o.ip + ip_len == frame_len && frame_len > o.end;
    o.tcp == IP + 20 && !fragment && plain && fits
}

/// True when the IPv4 header and the TCP segment (`payload` bytes of data
/// summing to `data`) both verify.
fn verifies(h: &Headers<&[u8]>, payload: usize, data: u16) -> bool {
    let mut c = h.tcp_header_sum(payload);
    c.add_u16(data);
    checksum::verifies(&h.bytes[h.o.ip..h.o.tcp]) && c.sum() == 0xffff
}

/// Where a mergeable frame's IPv4 and TCP headers start (IPv4 without
/// options).
const IP: usize = crate::drivers::ETH_HEADER;
const TCP: usize = IP + 20;

/// True when two mergeable frames' headers (up to `end`) are the same but for
/// what each segment of a run has of its own: IPv4 total length,
/// identification and checksum; TCP sequence number, PSH and checksum.
fn same_but_own(a: &[u8], b: &[u8], end: usize) -> bool {
    // Fixed ranges, so that each compares as a few machine words.
    a[..IP + 2] == b[..IP + 2]
        && a[IP + 6..IP + 10] == b[IP + 6..IP + 10]
        && a[IP + 12..TCP + 4] == b[IP + 12..TCP + 4]
        && a[TCP + 8..TCP + 13] == b[TCP + 8..TCP + 13]
        && a[TCP + 13] | PSH == b[TCP + 13] | PSH
        && a[TCP + 14..TCP + 16] == b[TCP + 14..TCP + 16]
        && a[TCP + 18..end] == b[TCP + 18..end]
}

impl Run {
    fn start(headers: Headers<Owned>, mut frame: Message, data: u16) -> Run {
        let payload = frame.len() - headers.o.end;
        let next_seq = headers.seq().wrapping_add(payload as u32);
        frame.strip(headers.o.end);
        let mut sum = Checksum::new();
        sum.add_u16(data);
        Run {
            sums: SharedSums::of(&headers),
            headers,
            data: frame,
            sum,
            segments: 1,
            size: payload,
            last: payload,
            next_seq,
        }
    }

    /// True when a segment with headers `h` and `payload` bytes continues
    /// the run.
    fn continues(&self, h: &Headers<&[u8]>, payload: usize) -> bool {
        let end = h.o.end;
        end == self.headers.o.end
            && self.last == self.size
            && payload <= self.size
            && h.seq() == self.next_seq
            && end - IP + self.data.len() + payload <= SEGMENTED_MAX
            && same_but_own(&self.headers.bytes, h.bytes, end)
    }

    /// Appends the data of the next segment, whose headers end at `end`.
    fn join(&mut self, mut frame: Message, end: usize, push: bool, data: u16) {
        let payload = frame.len() - end;
        // Ones'-complement sums are byte-order independent but for a swap:
        // data starting at an odd offset adds in swapped (RFC 1071 §2(B)).
        let odd = self.data.len() % 2 == 1;
        self.sum.add_u16(if odd { data.swap_bytes() } else { data });
        frame.strip(end);
        self.data.join(frame);
        self.segments += 1;
        self.last = payload;
        self.next_seq = self.next_seq.wrapping_add(payload as u32);
        if push {
            self.headers.bytes[TCP + 13] |= PSH;
        }
    }

    fn finish(mut self) -> Message {
        let end = self.headers.o.end;
        if self.segments > 1 {
            let len = self.data.len();
            self.headers.finish_ip(len);
            self.headers.finish_tcp(len, self.sum.sum());
            self.data.set_segment_size(self.size as u16);
        }
        self.data.push_slice(&self.headers.bytes[..end]);
        self.data
    }
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::super::tests::{tcp_frame, verifies};
    use super::super::{ETH_HEADER, segment};
    use super::*;

    const MSS: usize = 1448;

    /// The wire frames of a super-segment of `data` starting at `seq`.
    fn wire(data: &[u8], seq: u32, flags: u8) -> Vec<Message> {
        wire_from(40000, data, seq, flags)
    }

    /// The same, from source port `port`.
    fn wire_from(port: u16, data: &[u8], seq: u32, flags: u8) -> Vec<Message> {
        wire_cut(port, data, seq, flags, MSS)
    }

    /// The same, in segments of `mss` bytes.
    fn wire_cut(port: u16, data: &[u8], seq: u32, flags: u8, mss: usize) -> Vec<Message> {
        let mut f = tcp_frame(0);
        f[34..36].copy_from_slice(&port.to_be_bytes());
        f[34 + 4..34 + 8].copy_from_slice(&seq.to_be_bytes());
        f[34 + 13] = flags;
        f.extend_from_slice(data);
        let mut m = Message::from(f);
        m.set_segment_size(mss as u16);
        segment(m).expect("a TCP super-segment").collect()
    }

    fn coalesce(frames: Vec<Message>) -> (Vec<Message>, u64) {
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        for f in frames {
            c.push(f, &mut |m| out.push(m));
        }
        c.flush(&mut |m| out.push(m));
        (out, c.merged())
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + 7) as u8).collect()
    }

    #[test]
    fn a_run_of_segments_becomes_one_frame_that_verifies() {
        let d = data(20 * MSS + 333);
        let (out, merged) = coalesce(wire(&d, 0xffff_0000, ACK | PSH));
        assert_eq!((out.len(), merged), (1, 20));
        let f = out[0].to_vec();
        assert!(verifies(&f), "lengths and checksums of the merged frame");
        assert_eq!(&f[ETH_HEADER + 20 + 32..], &d[..]);
        assert_eq!(out[0].segment_size(), MSS as u16);
        assert_eq!(
            u32::from_be_bytes([f[38], f[39], f[40], f[41]]),
            0xffff_0000
        );
        assert_eq!(f[34 + 13], ACK | PSH, "the last segment's PSH");
    }

    #[test]
    fn odd_sized_segments_merge_with_a_checksum_that_verifies() {
        let d = data(5 * 999);
        let mut f = tcp_frame(0);
        f.extend_from_slice(&d);
        let mut m = Message::from(f);
        m.set_segment_size(999);
        let (out, _) = coalesce(segment(m).expect("cut").collect());
        assert_eq!(out.len(), 1);
        assert!(verifies(&out[0].to_vec()));
    }

    #[test]
    fn a_segment_with_a_bad_checksum_ends_the_run_and_goes_up_as_it_came() {
        let d = data(10 * MSS);
        let mut frames = wire(&d, 1000, ACK);
        let mut bad = frames[4].to_vec();
        bad[100] ^= 0x01;
        frames[4] = Message::from(bad.clone());
        let (out, merged) = coalesce(frames);
        assert_eq!(out.len(), 3);
        assert_eq!(merged, 3 + 4);
        assert_eq!(out[1].to_vec(), bad, "the bad segment, untouched");
        assert!(verifies(&out[0].to_vec()) && verifies(&out[2].to_vec()));
        assert_eq!(out[0].len() - 66, 4 * MSS);
        assert_eq!(out[2].len() - 66, 5 * MSS);
    }

    #[test]
    fn only_the_next_bytes_of_the_same_connection_join_a_run() {
        let d = data(4 * MSS);
        let mut frames = wire(&d, 0, ACK);
        // Out of order: the fourth before the third.
        frames.swap(2, 3);
        let (out, merged) = coalesce(frames);
        assert_eq!((out.len(), merged), (3, 1));
        assert_eq!(out[0].len() - 66, 2 * MSS, "the first two merge");

        let mut frames = wire(&d[..MSS], 0, ACK);
        frames.extend(wire_from(40001, &d[MSS..2 * MSS], MSS as u32, ACK));
        let (out, merged) = coalesce(frames);
        assert_eq!((out.len(), merged), (2, 0));
    }

    #[test]
    fn acks_syns_and_fins_pass_through_in_order() {
        let d = data(3 * MSS);
        let mut frames = wire(&d, 0, ACK);
        let pure_ack = Message::from(tcp_frame(0));
        frames.insert(1, pure_ack.clone());
        frames.extend(wire(&[], 0, ACK | FIN));
        let (out, merged) = coalesce(frames);
        assert_eq!(merged, 1);
        let lens: Vec<usize> = out.iter().map(|m| m.len() - 66).collect();
        assert_eq!(lens, vec![MSS, 0, 2 * MSS, 0]);
        assert_eq!(out[1].to_vec(), pure_ack.to_vec());
    }

    #[test]
    fn a_short_segment_ends_the_run() {
        let d = data(2 * MSS + 100);
        let mut frames = wire(&d, 0, ACK);
        frames.extend(wire(&data(MSS), (2 * MSS + 100) as u32, ACK));
        let (out, _) = coalesce(frames);
        let lens: Vec<usize> = out.iter().map(|m| m.len() - 66).collect();
        assert_eq!(lens, vec![2 * MSS + 100, MSS]);
    }

    #[test]
    fn a_run_stops_at_the_largest_ipv4_datagram() {
        let d = data(100 * MSS);
        let (out, _) = coalesce(wire(&d, 0, ACK));
        assert!(out.iter().all(|m| m.len() - ETH_HEADER <= SEGMENTED_MAX));
        assert_eq!(out.len(), 3, "45 segments fit, then 45, then 10");
        assert_eq!(out.iter().map(|m| m.len() - 66).sum::<usize>(), d.len());
    }

    /// What can happen to a frame on its way: lost, overtaken by the next,
    /// a bit flipped, or delivered twice.
    #[derive(Clone, Debug)]
    enum Mishap {
        Lose(usize),
        Swap(usize),
        Flip(usize, usize),
        Twice(usize),
    }

    fn mishap() -> impl Strategy<Value = Mishap> {
        prop_oneof![
            any::<usize>().prop_map(Mishap::Lose),
            any::<usize>().prop_map(Mishap::Swap),
            (any::<usize>(), any::<usize>()).prop_map(|(f, b)| Mishap::Flip(f, b)),
            any::<usize>().prop_map(Mishap::Twice),
        ]
    }

    proptest! {
        #[test]
        fn whatever_arrives_every_byte_goes_up_once_and_every_merged_frame_tells_the_truth(
            len in 1usize..40_000,
            mss in 500usize..1500,
            seq in any::<u32>(),
            mishaps in vec(mishap(), 0..8),
        ) {
            let d = data(len);
            let mut frames: Vec<Vec<u8>> =
                wire_cut(7, &d, seq, ACK | PSH, mss).iter().map(Message::to_vec).collect();
            let mut flipped = Vec::new();
            for m in mishaps {
                let n = frames.len();
                match m {
                    Mishap::Lose(i) if n > 1 => { frames.remove(i % n); }
                    Mishap::Swap(i) if n > 1 => frames.swap(i % (n - 1), i % (n - 1) + 1),
                    Mishap::Flip(i, b) => {
                        let f = &mut frames[i % n];
                        let at = b % f.len();
                        f[at] ^= 1 << (b % 8);
                        flipped.push(f.clone());
                    }
                    Mishap::Twice(i) => frames.insert(i % n, frames[i % n].clone()),
                    _ => {}
                }
            }
            let sent: usize = frames.iter().map(|f| f.len() - 66).sum();
            let (out, _) = coalesce(frames.into_iter().map(Message::from).collect());
            let got: usize = out.iter().map(|m| m.len() - 66).sum();
            prop_assert_eq!(sent, got, "every byte goes up once");
            for m in &out {
                let f = m.to_vec();
                if flipped.contains(&f) {
                    continue; // up as it came, for TCP to judge
                }
                prop_assert!(verifies(&f), "a frame made here verifies");
                let at = u32::from_be_bytes([f[38], f[39], f[40], f[41]]).wrapping_sub(seq) as usize;
                prop_assert_eq!(&f[66..], &d[at..at + f.len() - 66], "and carries the bytes at its sequence number");
            }
        }
    }
}
