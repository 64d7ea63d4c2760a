//! Receive offload in software (LRO/GRO): in-order TCP segments of one
//! connection, received in one batch, merged into one frame before the
//! layers above see them, under the rules of Linux's `tcp_gro_receive`, with
//! a run held per connection as Linux's GRO holds one per flow.

use strata_core::Message;
use strata_core::checksum::{self, Checksum};

use super::{
    ACK, CWR, FIN, Headers, Owned, PSH, RST, SEGMENTED_MAX, SYN, SharedSums, URG, data_sum,
};

/// The most runs held at once, each of its own connection, as Linux's GRO
/// holds at most eight packets per NAPI bucket (`MAX_GRO_SKBS`): a segment
/// of one more connection sends the oldest run up first, so what is held
/// stays bounded however many connections are interleaved.
pub const FLOWS: usize = 8;

/// Merges runs of received TCP segments. Frames go in one at a time
/// ([`push`](Self::push)) and come out, merged or as they were, through the
/// caller's `out`, each connection's in the order received; a run is held
/// per connection (at most [`FLOWS`]) until a frame of its connection that
/// does not continue it or [`flush`](Self::flush) (the end of a receive
/// batch), so interleaved connections merge as well as one alone.
///
/// A segment joins its connection's run when it is the run's next byte,
/// with the same headers but for lengths, identification, sequence number
/// and checksums; carries data with ACK and none of SYN, FIN, RST, URG and
/// CWR (PSH ends the run); its checksums verify; and the run's segments
/// before it were all of the first one's size. Anything else of the
/// connection — a pure ACK, a SYN or FIN, an IPv4 fragment or options, a bad
/// checksum, a super-segment the link took whole — sends its run up and
/// goes up as it came, for the protocols to judge and count. What is not
/// TCP in IPv4 belongs to no run and goes straight up.
///
/// A run's frame has the first segment's IPv4 and TCP headers with the
/// run's length, PSH if the last had it, and checksums that verify; it is
/// marked with the segments' size ([`Message::segment_size`]) so TCP keeps
/// counting full-sized segments for its acknowledgements and does not verify
/// again what was verified here.
#[derive(Default)]
pub struct Coalescer {
    /// Runs held, oldest first, each of another connection.
    runs: Vec<Run>,
    merged: u64,
}

/// A connection's IPv4 addresses and TCP ports, as its frames carry them.
type Flow = [u8; 12];

fn flow_of<B: AsRef<[u8]>>(h: &Headers<B>) -> Flow {
    let (b, o) = (h.bytes(), h.o);
    let mut flow = [0u8; 12];
    flow[..8].copy_from_slice(&b[o.ip + 12..o.ip + 20]);
    flow[8..].copy_from_slice(&b[o.tcp..o.tcp + 4]);
    flow
}

/// A run being merged.
struct Run {
    flow: Flow,
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
        self.take(frame, false, out);
    }

    /// Takes the next received frame, whose transport checksum the link
    /// already knows to be right (the kernel's `DATA_VALID`, or one the
    /// driver finished): its data is not summed again. Its data's sum, which
    /// a merged frame's checksum needs, follows from the checksum it carries
    /// and its headers (RFC 1071: all of it sums to all ones), and its IPv4
    /// header is still verified.
    pub fn push_verified(&mut self, frame: Message, out: &mut impl FnMut(Message)) {
        self.take(frame, true, out);
    }

    fn take(&mut self, frame: Message, verified: bool, out: &mut impl FnMut(Message)) {
        // Headers not whole in the frame's first chunk (never so from a
        // driver, the simulator or the in-memory pair) go up unmerged.
        let Some(h) = Headers::within(&frame) else {
            return out(frame);
        };
        let at = self.runs.iter().position(|r| r.flow == flow_of(&h));
        if frame.segment_size() != 0 || !mergeable(&h, frame.len()) {
            return self.pass(at, frame, out);
        }
        let payload = frame.len() - h.o.end;
        let data = if verified {
            !h.tcp_header_sum(payload).sum()
        } else {
            data_sum(&frame, h.o.end)
        };
        let push = h.flags() & PSH != 0;
        // A segment that continues the run shares its headers but for its own
        // fields, so the run's shared sums verify it.
        let held = match at {
            Some(i) if self.runs[i].continues(&h, payload) => {
                let run = &mut self.runs[i];
                if !run.sums.verify(&h, payload, data) {
                    return self.pass(at, frame, out);
                }
                let end = h.o.end;
                run.join(frame, end, push, data);
                self.merged += 1;
                i
            }
            _ => {
                self.send_up(at, out);
                if !verifies(&h, payload, data) {
                    return out(frame);
                }
                if self.runs.len() == FLOWS {
                    self.send_up(Some(0), out);
                }
                let h = h.to_owned();
                self.runs.push(Run::start(flow_of(&h), h, frame, data));
                self.runs.len() - 1
            }
        };
        if push {
            self.send_up(Some(held), out);
        }
    }

    /// Sends the connection's run (at `at`) up, then `frame` as it came.
    fn pass(&mut self, at: Option<usize>, frame: Message, out: &mut impl FnMut(Message)) {
        self.send_up(at, out);
        out(frame);
    }

    /// Sends the run at `at`, if any, up.
    fn send_up(&mut self, at: Option<usize>, out: &mut impl FnMut(Message)) {
        if let Some(i) = at {
            out(self.runs.remove(i).finish());
        }
    }

    /// Sends every run held up, oldest first.
    pub fn flush(&mut self, out: &mut impl FnMut(Message)) {
        for run in self.runs.drain(..) {
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
    fn start(flow: Flow, headers: Headers<Owned>, mut frame: Message, data: u16) -> Run {
        let payload = frame.len() - headers.o.end;
        let next_seq = headers.seq().wrapping_add(payload as u32);
        frame.strip(headers.o.end);
        let mut sum = Checksum::new();
        sum.add_u16(data);
        Run {
            flow,
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

    /// The run's frame. A run of one segment is the segment as it came;
    /// it is marked too, since it was verified as well.
    fn finish(mut self) -> Message {
        let end = self.headers.o.end;
        if self.segments > 1 {
            let len = self.data.len();
            self.headers.finish_ip(len);
            self.headers.finish_tcp(len, self.sum.sum());
        }
        self.data.set_segment_size(self.size as u16);
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
        let mut ack = tcp_frame(0);
        ack[34..36].copy_from_slice(&40000u16.to_be_bytes());
        let pure_ack = Message::from(ack);
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

    /// The source port of a frame.
    fn port(m: &Message) -> u16 {
        let f = m.to_vec();
        u16::from_be_bytes([f[34], f[35]])
    }

    /// The frames of `flows` connections, `segments` full segments each,
    /// interleaved one of each in turn; connection `i` sends from port
    /// 40000 + `i` the bytes `data(…)` shifted by `i`.
    fn interleaved(flows: u16, segments: usize) -> (Vec<Message>, Vec<Vec<u8>>) {
        let sent: Vec<Vec<u8>> = (0..flows)
            .map(|i| data(segments * MSS + usize::from(i))[usize::from(i)..].to_vec())
            .collect();
        let cut: Vec<Vec<Message>> = (0..flows)
            .map(|i| wire_from(40000 + i, &sent[usize::from(i)], 7, ACK))
            .collect();
        let mut frames = Vec::new();
        for k in 0..segments {
            frames.extend(cut.iter().map(|c| c[k].clone()));
        }
        (frames, sent)
    }

    #[test]
    fn interleaved_connections_merge_as_well_as_one_alone() {
        let (frames, sent) = interleaved(3, 10);
        let (out, merged) = coalesce(frames);
        assert_eq!((out.len(), merged), (3, 27), "one frame per connection");
        for (i, m) in out.iter().enumerate() {
            let f = m.to_vec();
            assert_eq!(port(m), 40000 + i as u16, "oldest run first");
            assert!(verifies(&f));
            assert_eq!(&f[66..], &sent[i][..], "connection {i}'s bytes");
            assert_eq!(m.segment_size(), MSS as u16);
        }
    }

    #[test]
    fn one_connection_more_than_the_runs_held_sends_the_oldest_up() {
        let (frames, _) = interleaved(FLOWS as u16 + 1, 2);
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        for f in frames.iter().take(FLOWS).cloned() {
            c.push(f, &mut |m| out.push(m));
        }
        assert!(out.is_empty(), "{FLOWS} connections are held");
        c.push(frames[FLOWS].clone(), &mut |m| out.push(m));
        assert_eq!(out.len(), 1, "the ninth sends one run up");
        assert_eq!(port(&out[0]), 40000, "the oldest");
        for f in frames.into_iter().skip(FLOWS + 1) {
            c.push(f, &mut |m| out.push(m));
        }
        c.flush(&mut |m| out.push(m));
        let bytes: usize = out.iter().map(|m| m.len() - 66).sum();
        assert_eq!(bytes, (FLOWS + 1) * 2 * MSS, "every byte up once");
        assert!(out.iter().all(|m| verifies(&m.to_vec())));
    }

    #[test]
    fn a_pure_ack_sends_only_its_own_connections_run_up_before_it() {
        let (mut frames, _) = interleaved(2, 3);
        let mut ack = tcp_frame(0);
        ack[34..36].copy_from_slice(&40000u16.to_be_bytes());
        frames.push(Message::from(ack.clone()));
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        for f in frames {
            c.push(f, &mut |m| out.push(m));
        }
        assert_eq!(out.len(), 2, "connection 40000's run, then its ACK");
        assert_eq!((port(&out[0]), out[0].len() - 66), (40000, 3 * MSS));
        assert_eq!(out[1].to_vec(), ack);
        c.flush(&mut |m| out.push(m));
        assert_eq!((port(&out[2]), out[2].len() - 66), (40001, 3 * MSS));
    }

    #[test]
    fn a_super_segment_the_link_took_whole_goes_up_after_its_connections_run() {
        let d = data(6 * MSS);
        let mut frames = wire(&d[..2 * MSS], 0, ACK);
        let mut whole = tcp_frame(0);
        whole[34 + 4..34 + 8].copy_from_slice(&((2 * MSS) as u32).to_be_bytes());
        whole[34..36].copy_from_slice(&40000u16.to_be_bytes());
        whole.extend_from_slice(&d[2 * MSS..]);
        let mut m = Message::from(whole);
        m.set_segment_size(MSS as u16);
        frames.push(m);
        let (out, merged) = coalesce(frames);
        assert_eq!((out.len(), merged), (2, 1));
        assert_eq!(out[0].len() - 66, 2 * MSS);
        assert_eq!(out[1].len() - 66, 4 * MSS, "untouched");
    }

    #[test]
    fn verified_segments_merge_into_a_frame_that_verifies_without_their_data_summed() {
        for mss in [MSS, 999, 1] {
            let d = data(7 * mss + 5);
            let mut c = Coalescer::new();
            let mut out = Vec::new();
            for f in wire_cut(40000, &d, 0xffff_fff0, ACK, mss) {
                c.push_verified(f, &mut |m| out.push(m));
            }
            c.flush(&mut |m| out.push(m));
            assert_eq!(out.len(), 1, "mss {mss}");
            let f = out[0].to_vec();
            assert!(verifies(&f), "mss {mss}");
            assert_eq!(&f[66..], &d[..]);
        }
    }

    #[test]
    fn a_verified_segment_with_a_bad_ipv4_header_is_still_refused() {
        let d = data(3 * MSS);
        let mut frames = wire(&d, 0, ACK);
        let mut bad = frames[1].to_vec();
        bad[14 + 8] ^= 1; // the TTL, under the IPv4 header's checksum only
        frames[1] = Message::from(bad.clone());
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        for f in frames {
            c.push_verified(f, &mut |m| out.push(m));
        }
        c.flush(&mut |m| out.push(m));
        assert_eq!(out.len(), 3);
        assert_eq!(out[1].to_vec(), bad, "up as it came, for IPv4 to drop");
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
                    // One bit per frame: two can cancel out in the Internet
                    // checksum (RFC 1071), which no receiver could tell.
                    Mishap::Flip(i, b) if !flipped.contains(&frames[i % n]) => {
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

        #[test]
        fn interleaved_connections_each_go_up_whole_and_in_order(
            lens in vec(1usize..20_000, 1..12),
            picks in vec(any::<usize>(), 0..400),
            verified in any::<bool>(),
        ) {
            let sent: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &n)| data(n + i)[i..].to_vec()).collect();
            let mut queues: Vec<std::collections::VecDeque<Message>> = sent
                .iter()
                .enumerate()
                .map(|(i, d)| wire_cut(30000 + i as u16, d, 1, ACK, 1000).into_iter().collect())
                .collect();
            // Any interleaving that keeps each connection's own order.
            let mut frames = Vec::new();
            let mut picks = picks.into_iter();
            while queues.iter().any(|q| !q.is_empty()) {
                let live: Vec<usize> = (0..queues.len()).filter(|&i| !queues[i].is_empty()).collect();
                let i = live[picks.next().unwrap_or(0) % live.len()];
                frames.extend(queues[i].pop_front());
            }
            let mut c = Coalescer::new();
            let mut out = Vec::new();
            for f in frames {
                if verified {
                    c.push_verified(f, &mut |m| out.push(m));
                } else {
                    c.push(f, &mut |m| out.push(m));
                }
            }
            c.flush(&mut |m| out.push(m));
            let mut got = vec![Vec::new(); sent.len()];
            for m in &out {
                let f = m.to_vec();
                prop_assert!(verifies(&f));
                got[usize::from(port(m) - 30000)].extend_from_slice(&f[66..]);
            }
            prop_assert_eq!(got, sent);
        }
    }
}
