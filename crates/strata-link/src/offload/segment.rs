//! Segmentation offload in software (TSO/GSO): a TCP super-segment cut into
//! the frames the wire carries, as Linux's `tcp_gso_segment` cuts it.

use bytes::Bytes;
use strata_core::Message;

use super::{CWR, FIN, Headers, Owned, PSH, SharedSums, data_sum};

/// The frames a frame becomes on the wire: a super-segment's segments, or any
/// other frame as it is.
pub struct Segments {
    state: State,
}

// The size difference is the point: one `Segments` lives on the stack per
// frame sent, and a boxed cutter would cost an allocation per super-segment.
#[allow(clippy::large_enum_variant)]
enum State {
    /// A frame that needs no cutting, until it is taken.
    Whole(Option<Message>),
    /// Inline, not boxed: a super-segment costs no allocation (the value
    /// lives on the caller's stack while the frames are taken).
    Cut(Cutter),
}

/// What cutting needs to make the next segment.
struct Cutter {
    headers: Headers<Owned>,
    /// The payload not cut yet.
    rest: Payload,
    size: usize,
    /// Index of the next segment.
    index: u32,
    seq: u32,
    ident: u16,
    /// Sums of the header bytes all segments share.
    sums: SharedSums,
}

/// A super-segment's payload: most often one shared buffer (a slice of what
/// the application wrote), cut by slicing; otherwise a message of several.
enum Payload {
    One(Bytes),
    Many(Message),
}

impl Payload {
    fn is_empty(&self) -> bool {
        match self {
            Payload::One(b) => b.is_empty(),
            Payload::Many(m) => m.is_empty(),
        }
    }

    /// The next `size` bytes (fewer at the end).
    fn take(&mut self, size: usize) -> Message {
        match self {
            Payload::One(b) => Message::from_bytes(b.split_to(size.min(b.len()))),
            Payload::Many(m) => {
                let tail = m.split_off(size);
                std::mem::replace(m, tail)
            }
        }
    }
}

/// Cuts `frame` into the frames a NIC with TCP segmentation offload would
/// send: a super-segment of TCP in IPv4 in Ethernet II into segments of its
/// [`segment_size`](Message::segment_size) payload bytes, each with its IPv4
/// total length, identification (one more each) and checksum and its TCP
/// sequence number, flags (FIN and PSH on the last only, CWR on the first
/// only) and checksum; any frame not marked as it is. Payload bytes are
/// shared with `frame`, not copied.
///
/// # Errors
/// Gives `frame` back when it is marked but is not TCP in IPv4 in Ethernet
/// II, which no NIC could cut.
pub fn segment(mut frame: Message) -> Result<Segments, Message> {
    let size = usize::from(frame.segment_size());
    if size == 0 {
        return Ok(Segments {
            state: State::Whole(Some(frame)),
        });
    }
    let Some(headers) = Headers::of(&frame) else {
        return Err(frame);
    };
    let ip = headers.o.ip;
    let ident = u16::from_be_bytes([headers.bytes[ip + 4], headers.bytes[ip + 5]]);
    let seq = headers.seq();
    let sums = SharedSums::of(&headers);
    frame.strip(headers.o.end);
    frame.set_segment_size(0);
    let rest = if frame.chunk_count() == 1 {
        Payload::One(frame.into_bytes())
    } else {
        Payload::Many(frame)
    };
    Ok(Segments {
        state: State::Cut(Cutter {
            headers,
            rest,
            size,
            index: 0,
            seq,
            ident,
            sums,
        }),
    })
}

impl Iterator for Segments {
    type Item = Message;

    fn next(&mut self) -> Option<Message> {
        match &mut self.state {
            State::Whole(frame) => frame.take(),
            State::Cut(c) => c.next(),
        }
    }
}

impl Cutter {
    fn next(&mut self) -> Option<Message> {
        // A super-segment without data (never sent) still makes one frame.
        if self.rest.is_empty() && self.index > 0 {
            return None;
        }
        let mut piece = self.rest.take(self.size);
        let data = data_sum(&piece, 0);
        let o = self.headers.o;
        let mut h = self.headers;
        let i = self.index;
        let ident = self.ident.wrapping_add(i as u16);
        h.set_u16(o.ip + 4, ident);
        let seq = self.seq.wrapping_add(i.wrapping_mul(self.size as u32));
        h.bytes[o.tcp + 4..o.tcp + 8].copy_from_slice(&seq.to_be_bytes());
        if !self.rest.is_empty() {
            h.bytes[o.tcp + 13] &= !(FIN | PSH);
        }
        if i > 0 {
            h.bytes[o.tcp + 13] &= !CWR;
        }
        let len = piece.len();
        let total = (o.end - o.ip + len) as u16;
        h.set_u16(o.ip + 2, total);
        h.set_u16(o.ip + 10, !self.sums.ip(total, ident, 0));
        let offset_flags = u16::from_be_bytes([h.bytes[o.tcp + 12], h.bytes[o.tcp + 13]]);
        h.set_u16(o.tcp + 16, !self.sums.tcp(seq, offset_flags, 0, len, data));
        piece.push_slice(&h.bytes[..o.end]);
        self.index += 1;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{addresses_of, not_tcp_in_ipv4, tcp_frame, verifies};
    use super::*;

    #[test]
    fn a_super_segment_becomes_the_wire_frames_the_kernel_would_make() {
        let data: Vec<u8> = (0..3500u32).map(|i| (i * 7) as u8).collect();
        let mut f = tcp_frame(0);
        f[14 + 4..14 + 6].copy_from_slice(&0xfffeu16.to_be_bytes());
        f[34 + 4..34 + 8].copy_from_slice(&0xffff_f000u32.to_be_bytes());
        f[34 + 13] = CWR | PSH | FIN | 0x10;
        f.extend_from_slice(&data);
        let mut m = Message::from(f);
        m.set_segment_size(1448);
        let frames: Vec<Vec<u8>> = segment(m)
            .expect("a TCP super-segment")
            .map(|m| m.to_vec())
            .collect();
        assert_eq!(frames.len(), 3);
        let mut joined = Vec::new();
        for (i, s) in frames.iter().enumerate() {
            assert!(verifies(s), "IPv4 and TCP checksums of {i}");
            let ip = &s[14..34];
            assert_eq!(
                usize::from(u16::from_be_bytes([ip[2], ip[3]])),
                s.len() - 14
            );
            assert_eq!(
                u16::from_be_bytes([ip[4], ip[5]]),
                0xfffeu16.wrapping_add(i as u16)
            );
            let tcp = &s[34..];
            let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
            assert_eq!(seq, 0xffff_f000u32.wrapping_add(i as u32 * 1448));
            let flags = tcp[13];
            assert_eq!(flags & CWR != 0, i == 0, "CWR on the first only");
            assert_eq!(
                flags & (PSH | FIN) != 0,
                i == 2,
                "PSH, FIN on the last only"
            );
            joined.extend_from_slice(&tcp[32..]);
        }
        assert_eq!(joined, data);
        assert_eq!(frames[2].len(), 14 + 20 + 32 + 3500 - 2 * 1448);
        assert_eq!(addresses_of(&frames[1]), ([198, 18, 0, 1], [198, 18, 0, 2]));
    }

    #[test]
    fn payload_bytes_are_shared_not_copied() {
        let data = bytes::Bytes::from(vec![0xa5; 4000]);
        let mut m = Message::from_bytes(data.clone());
        m.push_slice(&tcp_frame(0));
        m.set_segment_size(1000);
        for (i, s) in segment(m).expect("cut").enumerate() {
            let body = s.chunks().nth(1).expect("a header chunk, then data");
            assert_eq!(body.as_ptr(), data[i * 1000..].as_ptr(), "segment {i}");
            assert_eq!(s.segment_size(), 0, "a wire frame is not a super-segment");
        }
    }

    #[test]
    fn a_payload_in_several_buffers_is_cut_across_their_seams() {
        let (x, y): (Vec<u8>, Vec<u8>) = ((0..2500).map(|i| i as u8).collect(), vec![0x3c; 1500]);
        let mut m = Message::from(x.clone());
        m.append_bytes(bytes::Bytes::from(y.clone()));
        m.push_slice(&tcp_frame(0));
        m.set_segment_size(1000);
        let frames: Vec<Vec<u8>> = segment(m).expect("cut").map(|m| m.to_vec()).collect();
        assert_eq!(frames.len(), 4);
        assert!(frames.iter().all(|f| verifies(f)));
        let joined: Vec<u8> = frames.iter().flat_map(|f| f[66..].to_vec()).collect();
        assert_eq!(joined, [x, y].concat());
    }

    #[test]
    fn a_frame_not_marked_goes_as_it_is() {
        let plain = Message::from(tcp_frame(10));
        let out: Vec<Vec<u8>> = segment(plain).expect("whole").map(|m| m.to_vec()).collect();
        assert_eq!(out, vec![tcp_frame(10)]);
    }

    #[test]
    fn a_marked_frame_that_is_not_tcp_in_ipv4_is_given_back() {
        for f in not_tcp_in_ipv4() {
            let mut m = Message::from(f.clone());
            m.set_segment_size(1000);
            let back = segment(m).err().expect("refused");
            assert_eq!(back.to_vec(), f);
        }
    }
}
