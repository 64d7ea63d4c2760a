//! A pcap writer for Ethernet frames, readable by tshark and Wireshark.
//!
//! The file header comes from the `pcap-file` crate. Each record's 16-byte header
//! is written here, because `pcap_file::pcap::PcapWriter` wants a frame's bytes in
//! one slice and keeps its inner writer out of reach (so it could not be flushed
//! without being dropped): writing the record here lets a [`Message`]'s chunks go
//! straight into the buffered file, with no gathering copy, and lets
//! [`PcapWriter::flush`] flush.
//!
//! Timestamps have nanosecond resolution, so virtual-time captures show the
//! simulator's exact times.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::PcapHeader;
use pcap_file::{DataLink, Endianness, TsResolution};
use strata_core::Message;

/// The most bytes of a frame a record keeps (tcpdump's default snapshot length);
/// longer frames are cut, with their true length recorded.
pub const SNAPLEN: u32 = 262_144;

/// A capture that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Writing failed.
    #[error("pcap write: {0}")]
    Io(#[from] io::Error),
    /// The file header could not be written.
    #[error("pcap header: {0}")]
    Header(#[from] pcap_file::PcapError),
    /// The format counts seconds in 32 bits; this timestamp does not fit.
    #[error("pcap timestamp {0:?} does not fit the format's 32-bit seconds")]
    Timestamp(Duration),
}

/// Writes Ethernet frames with their timestamps to a pcap stream.
pub struct PcapWriter<W: Write = BufWriter<File>> {
    out: W,
    frames: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes the pcap header.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        Self::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the pcap header (Ethernet, nanosecond timestamps, native byte
    /// order) to `out`.
    pub fn new(mut out: W) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::native(),
            ..PcapHeader::default()
        };
        header.write_to(&mut out)?;
        Ok(PcapWriter { out, frames: 0 })
    }

    /// Writes one frame seen at `timestamp` (since the Unix epoch, or since the
    /// start of virtual time). The frame's chunks are written as they are.
    pub fn write(&mut self, timestamp: Duration, frame: &Message) -> Result<(), CaptureError> {
        self.record(timestamp, frame.len(), frame.chunks())
    }

    /// Writes one frame held in a slice.
    pub fn write_slice(&mut self, timestamp: Duration, frame: &[u8]) -> Result<(), CaptureError> {
        self.record(timestamp, frame.len(), std::iter::once(frame))
    }

    fn record<'a>(
        &mut self,
        timestamp: Duration,
        len: usize,
        chunks: impl Iterator<Item = &'a [u8]>,
    ) -> Result<(), CaptureError> {
        let secs =
            u32::try_from(timestamp.as_secs()).map_err(|_| CaptureError::Timestamp(timestamp))?;
        let orig_len = u32::try_from(len).unwrap_or(u32::MAX);
        let incl_len = orig_len.min(SNAPLEN);
        // The file header says native byte order, so the record uses it too.
        let mut header = [0u8; 16];
        for (slot, field) in
            header
                .chunks_exact_mut(4)
                .zip([secs, timestamp.subsec_nanos(), incl_len, orig_len])
        {
            slot.copy_from_slice(&field.to_ne_bytes());
        }
        self.out.write_all(&header)?;
        let mut left = incl_len as usize;
        for chunk in chunks {
            let part = &chunk[..chunk.len().min(left)];
            self.out.write_all(part)?;
            left -= part.len();
            if left == 0 {
                break;
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// How many frames have been written.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Pushes buffered records to the underlying writer, so a reader sees them.
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        Ok(self.out.flush()?)
    }

    /// Flushes and gives back the underlying writer.
    pub fn into_inner(mut self) -> Result<W, CaptureError> {
        self.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::PcapReader;

    #[test]
    fn frames_read_back_with_their_bytes_times_and_lengths() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let mut split = Message::from_slice(b"head");
        split.append_bytes(bytes::Bytes::from_static(b"-body"));
        w.write(Duration::new(3, 123_456_789), &split).unwrap();
        w.write_slice(Duration::from_nanos(5), b"second").unwrap();
        let big = vec![7u8; SNAPLEN as usize + 10];
        w.write_slice(Duration::ZERO, &big).unwrap();
        assert_eq!(w.frames(), 3);
        let bytes = w.into_inner().unwrap();

        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(r.header().datalink, DataLink::ETHERNET);
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.timestamp, Duration::new(3, 123_456_789));
        assert_eq!(&p.data[..], b"head-body");
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(
            (p.timestamp, &p.data[..]),
            (Duration::from_nanos(5), &b"second"[..])
        );
        // pcap-file's checked reader refuses orig_len > snaplen; the raw one (like
        // tshark) takes the cut record.
        let p = r.next_raw_packet().unwrap().unwrap();
        assert_eq!((p.data.len(), p.orig_len), (SNAPLEN as usize, SNAPLEN + 10));
        assert!(r.next_packet().is_none());
    }

    #[test]
    fn a_timestamp_beyond_the_format_is_refused_not_wrapped() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let late = Duration::from_secs(u64::from(u32::MAX) + 1);
        assert!(matches!(
            w.write_slice(late, b"x"),
            Err(CaptureError::Timestamp(_))
        ));
    }
}
