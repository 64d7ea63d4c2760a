//! Receiving straight into the application's buffers (seed 001 §3.5.1):
//! one recvmsg(2) per datagram or GRO super-datagram, whose iovec puts each
//! packet's header into the driver's buffer and its payload into the
//! application's buffer at the stream offset the connection expects it
//! ([`Endpoint::rx_targets`]). The kernel's copy out of the socket is then
//! the only one.
//!
//! A packet that lands elsewhere than its place — a retransmission, a packet
//! of another size, one for another connection, anything forged — is copied
//! out to the driver's scratch buffer before any packet is handed on, and
//! then handed on as usual: the places hold no data received yet, so landing
//! there wrongly overwrites nothing.

use std::io;
use std::os::fd::RawFd;
use std::time::Instant;

use strata_xport::wire::{DATA_HEADER_LEN, DATA_HEADER_MAX, data_place};
use strata_xport::{Channel, Endpoint, RxTargets};

use super::{XudpStats, sys};

/// Most packets one receive places (a GRO super-datagram of the largest
/// MSS-sized packets at MTU 1500 holds 44).
pub(super) const MAX_PLACES: usize = 48;
/// Room after the places for the rest of a super-datagram (up to 64 KiB).
const TAIL: usize = 65_536;

/// The driver's own side of a scattered receive.
pub(super) struct Scatter {
    headers: Vec<u8>,
    tail: Vec<u8>,
    scratch: Vec<u8>,
    /// Per packet of the last receive: `Ok(payload length)` when it landed
    /// at its place (its header in `headers`), `Err(range)` of `scratch`.
    packets: Vec<Result<usize, (usize, usize)>>,
}

impl Default for Scatter {
    fn default() -> Self {
        Scatter {
            headers: vec![0; MAX_PLACES * DATA_HEADER_MAX],
            tail: vec![0; TAIL],
            scratch: Vec::with_capacity(TAIL),
            packets: Vec::with_capacity(64),
        }
    }
}

/// What one receive did.
pub(super) enum Outcome {
    /// The endpoint expects nothing on this socket: receive the usual way.
    NoTargets,
    /// Nothing was waiting.
    Empty,
    /// Packets handed on.
    Handled(usize),
}

impl Scatter {
    /// Receives one datagram or super-datagram from `fd` (data socket `ch`)
    /// into the places `ep` gives, and hands its packets to `ep`.
    pub(super) fn receive(
        &mut self,
        fd: RawFd,
        ch: Channel,
        ep: &mut impl Endpoint,
        now: Instant,
        stats: &mut XudpStats,
    ) -> io::Result<Outcome> {
        let Some(mut t) = ep.rx_targets(ch, MAX_PLACES) else {
            return Ok(Outcome::NoTargets);
        };
        t.places.truncate(MAX_PLACES);
        // The peer's header length: 28 bytes, or 32 with the data checksum.
        let hl = t.header.clamp(DATA_HEADER_LEN, DATA_HEADER_MAX);
        t.header = hl;
        // On the stack: a receive allocates no list of iovecs.
        let mut iovs = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 2 * MAX_PLACES + 1];
        let mut n = 0;
        for (h, (_, place)) in self.headers.chunks_exact_mut(hl).zip(t.places.iter_mut()) {
            iovs[n] = iovec(h);
            iovs[n + 1] = iovec(place);
            n += 2;
        }
        iovs[n] = iovec(&mut self.tail);
        // SAFETY: the first `n + 1` iovecs describe `self.headers`,
        // `self.tail` and the places, slices borrowed mutably (by `self` and
        // `t`) until after this call, so nothing else touches them while the
        // kernel writes; the unused entries are not passed.
        let got = unsafe { sys::recv_iov(fd, &mut iovs[..=n])? };
        let Some(r) = got else {
            return Ok(Outcome::Empty);
        };
        stats.recv_calls += 1;
        let Some(from) = r.from else {
            stats.unnamed += 1;
            return Ok(Outcome::Handled(0));
        };
        if r.truncated {
            stats.truncated += 1;
            return Ok(Outcome::Handled(0));
        }
        let seg = r.segment.filter(|&s| s > 0 && s < r.len).unwrap_or(r.len);
        if seg < r.len {
            stats.gro_batches += 1;
        }
        self.sort(&t, r.len, seg, stats);
        drop(t);
        // Every packet not at its place is in `scratch` now: hand them on.
        let n = self.packets.len();
        for (k, p) in self.packets.iter().enumerate() {
            match *p {
                Ok(len) => {
                    let h = &self.headers[k * hl..(k + 1) * hl];
                    ep.handle_placed(now, from, ch, h, len);
                }
                Err((a, b)) => {
                    ep.handle(now, from, ch, &self.scratch[a..b]);
                }
            }
        }
        stats.datagrams_in += n as u64;
        Ok(Outcome::Handled(n))
    }

    /// Finds out which packets of a receive of `len` bytes cut every `seg`
    /// landed at their places and copies the others to `scratch`.
    fn sort(&mut self, t: &RxTargets<'_>, len: usize, seg: usize, stats: &mut XudpStats) {
        self.packets.clear();
        self.scratch.clear();
        let hl = t.header;
        let whole = hl + t.payload;
        let mut at = 0;
        let mut k = 0;
        while at < len {
            let end = (at + seg).min(len);
            // Packet k starts where header k does when it is the first or
            // every packet before it was whole-sized; its payload is the
            // rest of its datagram, which its header checksum covers.
            let placed = k < t.places.len() && (k == 0 || seg == whole) && end - at >= hl && {
                let (offset, place) = &t.places[k];
                let h = &self.headers[k * hl..(k + 1) * hl];
                end - at - hl <= place.len() && data_place(h) == Some((t.conn, *offset as u32))
            };
            if placed {
                let size = end - at - hl;
                stats.placed_bytes += size as u64;
                self.packets.push(Ok(size));
            } else {
                let from = self.scratch.len();
                self.gather(t, at, end);
                stats.copied_bytes += (end - at).saturating_sub(hl) as u64;
                self.packets.push(Err((from, self.scratch.len())));
            }
            at = end;
            k += 1;
        }
    }

    /// Appends bytes `[from, to)` of the receive, as laid out over the
    /// headers, the places and the tail, to `scratch`.
    fn gather(&mut self, t: &RxTargets<'_>, from: usize, to: usize) {
        let mut pos = 0;
        let pieces = self
            .headers
            .chunks_exact(t.header)
            .zip(t.places.iter())
            .flat_map(|(h, (_, p))| [h, &p[..]])
            .chain(std::iter::once(&self.tail[..]));
        for piece in pieces {
            let (a, b) = (pos, pos + piece.len());
            pos = b;
            if b <= from {
                continue;
            }
            if a >= to {
                break;
            }
            let lo = from.max(a) - a;
            let hi = to.min(b) - a;
            self.scratch.extend_from_slice(&piece[lo..hi]);
        }
    }
}

fn iovec(b: &mut [u8]) -> libc::iovec {
    libc::iovec {
        iov_base: b.as_mut_ptr().cast(),
        iov_len: b.len(),
    }
}
