//! Capturing a link's frames, both directions, to a pcap file.
//!
//! Frames are recorded as they cross the driver: received ones before the
//! engine (and the receive offload) sees them, sent ones once the kernel
//! took them. Records are buffered
//! and flushed when the runtime is about to sleep, at most every
//! [`FLUSH_EVERY`] while it is busy, and when it stops, so a capture read
//! after the host stopped (or during a pause in traffic) is complete.

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata_core::{Instant, Message};

use crate::offload;

use crate::pcap::{CaptureError, PcapWriter};

use super::clock::Clock;

/// Longest a busy runtime keeps records buffered.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// One link's capture.
pub struct Capture {
    path: PathBuf,
    writer: PcapWriter,
    dirty: bool,
    last_flush: Instant,
    /// The first write error; later frames are not attempted.
    failed: Option<String>,
}

impl Capture {
    /// Creates (truncating) the file at `path`.
    pub fn create(path: &Path) -> Result<Capture, CaptureError> {
        Ok(Capture {
            path: path.to_path_buf(),
            writer: PcapWriter::create(path)?,
            dirty: false,
            last_flush: Instant::ZERO,
            failed: None,
        })
    }

    /// Records a frame. A super-segment — one the kernel cuts for Strata
    /// (segmentation offload), or one it handed Strata whole — is recorded
    /// as the frames it stands for on a wire of the link's MTU, as tshark
    /// expects to see them.
    pub fn message(&mut self, clock: &Clock, now: Instant, frame: &Message) {
        if self.failed.is_some() {
            return;
        }
        if frame.segment_size() == 0 {
            let r = self.writer.write(clock.wall(now), frame);
            self.note(r);
            return;
        }
        // One the kernel could not cut is recorded as it was handed down.
        let frames = offload::segment(frame.clone()).map_or_else(|f| vec![f], Iterator::collect);
        for f in &frames {
            let r = self.writer.write(clock.wall(now), f);
            self.note(r);
        }
    }

    fn note(&mut self, r: Result<(), CaptureError>) {
        match r {
            Ok(()) => self.dirty = true,
            Err(e) => self.failed = Some(format!("{}: {e}", self.path.display())),
        }
    }

    /// Flushes when records wait and `force` is set or the last flush is
    /// [`FLUSH_EVERY`] old.
    pub fn flush_if_due(&mut self, now: Instant, force: bool) {
        if !self.dirty || (!force && now - self.last_flush < FLUSH_EVERY) {
            return;
        }
        self.last_flush = now;
        self.dirty = false;
        if let Err(e) = self.writer.flush() {
            self.failed
                .get_or_insert_with(|| format!("{}: {e}", self.path.display()));
        }
    }

    /// Frames recorded.
    pub fn frames(&self) -> u64 {
        self.writer.frames()
    }

    /// The first error met, if any.
    pub fn error(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
