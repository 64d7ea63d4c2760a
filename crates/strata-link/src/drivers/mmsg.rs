//! Batched datagram I/O: recvmmsg(2) and sendmmsg(2), one system call for up to
//! a batch of frames each way.
//!
//! [`RxBatch`] owns fixed receive slots and the `mmsghdr`s pointing into them,
//! built once: a busy-polling loop that finds nothing pays for the system call
//! and nothing else. [`TxBatch`] points `iovec`s at the chunks of the
//! [`Message`]s being sent, so a frame goes from the engine's buffers to the
//! kernel without a copy in user space (the kernel's gather does it).

use std::io;
use std::mem;
use std::os::fd::RawFd;
use std::ptr;

use bytes::{Bytes, BytesMut};
use strata_core::Message;

use super::vnet;

/// Most chunks one sent frame may have; a frame in more pieces is gathered into
/// one buffer first. Ethernet, IP and transport headers plus a few body
/// segments need far fewer.
const MAX_IOV: usize = 16;

/// One received frame.
pub struct Received<'a> {
    /// Its bytes (cut to the slot when `truncated`), the driver's to finish.
    pub data: &'a mut [u8],
    /// The frame was longer than the slot (MSG_TRUNC).
    pub truncated: bool,
    /// The packet type from the link-layer address (PACKET_HOST,
    /// PACKET_OUTGOING …), for packet sockets.
    pub pkttype: Option<u8>,
}

/// Receive slots and their headers for one socket.
///
/// Each slot is a buffer of its own with room for the largest frame, so a
/// large frame can leave with the memory it was read into
/// ([`take`](Self::take)) instead of being copied out: the slot then reads
/// the next frame into what is left of its buffer, or, once that is too
/// short, into the same memory again when every frame taken from it has been
/// let go (`BytesMut::reserve` reclaims a buffer held by nobody else), and
/// into fresh memory only while one is still held.
pub struct RxBatch {
    slot: usize,
    bufs: Vec<BytesMut>,
    /// Bytes the last `recv` put in each slot (cut to the slot).
    lens: Vec<usize>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_ll>,
    hdrs: Vec<libc::mmsghdr>,
    with_names: bool,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point only into `bufs`, `iovs`
// and `names`, heap buffers owned by the same value: `iovs` and `names` are
// never resized, and `recv` points the iovecs at the slots' buffers afresh
// before every call, so they stay valid wherever the value moves; nothing is
// shared between threads.
unsafe impl Send for RxBatch {}

impl RxBatch {
    /// `batch` slots of `slot` bytes; `with_names` asks for each frame's
    /// link-layer address (packet sockets), so its packet type is known.
    pub fn new(batch: usize, slot: usize, with_names: bool) -> RxBatch {
        let batch = batch.max(1);
        let mut rx = RxBatch {
            slot,
            bufs: (0..batch).map(|_| BytesMut::with_capacity(slot)).collect(),
            lens: vec![0; batch],
            // SAFETY (both): iovec, sockaddr_ll and mmsghdr are plain old data
            // for which all-zero bytes are valid (null pointers, zero lengths).
            iovs: vec![unsafe { mem::zeroed() }; batch],
            names: vec![unsafe { mem::zeroed() }; batch],
            hdrs: Vec::with_capacity(batch),
            with_names,
        };
        for i in 0..batch {
            // SAFETY: as above, a zeroed mmsghdr is valid; its pointers are set next.
            let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
            h.msg_hdr.msg_iov = &mut rx.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            if with_names {
                h.msg_hdr.msg_name = (&mut rx.names[i] as *mut libc::sockaddr_ll).cast();
            }
            rx.hdrs.push(h);
        }
        rx
    }

    /// How many frames one call may return.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Receives what is waiting on `fd`, up to the batch, without blocking.
    /// Returns how many frames arrived (0 when none was waiting).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        let name_len = if self.with_names {
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t
        } else {
            0
        };
        for (i, h) in self.hdrs.iter_mut().enumerate() {
            let buf = &mut self.bufs[i];
            // Frames taken from the slot keep their bytes; only the room
            // behind them is read into (`clear` keeps the capacity).
            buf.clear();
            if buf.capacity() < self.slot {
                buf.reserve(self.slot);
            }
            self.lens[i] = 0;
            self.iovs[i] = libc::iovec {
                iov_base: buf.spare_capacity_mut().as_mut_ptr().cast(),
                iov_len: self.slot,
            };
            h.msg_hdr.msg_namelen = name_len;
            h.msg_hdr.msg_flags = 0;
        }
        loop {
            // SAFETY: every header points at its iovec and name of `self`,
            // each iovec at `slot` bytes of spare capacity of its slot's
            // buffer (reserved just above), and `self` is borrowed mutably
            // for the call, so the kernel's writes alias nothing. A null
            // timeout is allowed.
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    self.hdrs.as_mut_ptr(),
                    self.hdrs.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            };
            if n >= 0 {
                let n = n as usize;
                for i in 0..n {
                    let len = (self.hdrs[i].msg_len as usize).min(self.slot);
                    // SAFETY: the kernel wrote `msg_len` bytes (at most the
                    // iovec's `slot`) into the spare capacity the iovec
                    // points at, so the first `len` bytes are initialized.
                    unsafe { self.bufs[i].set_len(len) };
                    self.lens[i] = len;
                }
                return Ok(n);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => return Ok(0),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(err),
            }
        }
    }

    /// Frame `i` of the last `recv`.
    pub fn frame(&mut self, i: usize) -> Received<'_> {
        let h = &self.hdrs[i];
        Received {
            data: &mut self.bufs[i][..self.lens[i]],
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || h.msg_len as usize > self.slot,
            pkttype: self.with_names.then(|| self.names[i].sll_pkttype),
        }
    }

    /// Bytes `range` of frame `i` of the last `recv`, taken with the memory
    /// they were read into (no copy). The rest of the frame is let go.
    pub fn take(&mut self, i: usize, range: std::ops::Range<usize>) -> Bytes {
        let whole = self.bufs[i].split_to(self.lens[i]).freeze();
        self.lens[i] = 0;
        whole.slice(range)
    }
}

/// Headers for sending a batch of frames with one call.
pub struct TxBatch {
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// With PACKET_VNET_HDR: each frame's virtio-net header, sent first.
    vnet: Option<Vec<[u8; vnet::LEN]>>,
    /// Frames in too many pieces, gathered for the duration of one call.
    gathered: Vec<Vec<u8>>,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` are written by `send` just
// before its system call and never read afterwards; between calls they are
// dead values, so moving the struct to another thread shares nothing.
unsafe impl Send for TxBatch {}

impl TxBatch {
    /// Room for `batch` frames per call.
    pub fn new(batch: usize) -> TxBatch {
        let batch = batch.max(1);
        TxBatch {
            // SAFETY: zeroed iovec and mmsghdr are valid plain data.
            iovs: vec![unsafe { mem::zeroed() }; batch * MAX_IOV],
            hdrs: vec![unsafe { mem::zeroed() }; batch],
            vnet: None,
            gathered: Vec::new(),
        }
    }

    /// Room for `batch` frames per call, each sent behind its virtio-net
    /// header ([`vnet::header`]; the caller sends only frames it describes).
    pub fn with_vnet(batch: usize) -> TxBatch {
        let mut tx = TxBatch::new(batch);
        tx.vnet = Some(vec![[0; vnet::LEN]; tx.hdrs.len()]);
        tx
    }

    /// How many frames one call may send.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Sends `frames` (at most the batch) on the connected or bound socket `fd`
    /// without blocking. Returns how many left, from the front: fewer than given
    /// when the socket's buffer filled (the rest would block) or a frame failed
    /// after the first (sendmmsg(2) reports that error on the next call). An
    /// error means the first frame failed.
    pub fn send<'m>(
        &mut self,
        fd: RawFd,
        frames: impl Iterator<Item = &'m Message>,
    ) -> io::Result<usize> {
        self.gathered.clear();
        let mut count = 0;
        for (i, frame) in frames.take(self.hdrs.len()).enumerate() {
            let all = &mut self.iovs[i * MAX_IOV..(i + 1) * MAX_IOV];
            let (iovs, prefix) = match self.vnet.as_mut() {
                Some(headers) => {
                    headers[i] = vnet::header(frame).unwrap_or([0; vnet::LEN]);
                    all[0] = libc::iovec {
                        iov_base: headers[i].as_mut_ptr().cast(),
                        iov_len: vnet::LEN,
                    };
                    (&mut all[1..], 1)
                }
                None => (all, 0),
            };
            let used = if frame.chunk_count() <= iovs.len() {
                for (iov, chunk) in iovs.iter_mut().zip(frame.chunks()) {
                    *iov = libc::iovec {
                        iov_base: chunk.as_ptr() as *mut libc::c_void,
                        iov_len: chunk.len(),
                    };
                }
                frame.chunk_count()
            } else {
                self.gathered.push(frame.to_vec());
                let whole = self.gathered.last().map_or(&[][..], |v| &v[..]);
                iovs[0] = libc::iovec {
                    iov_base: whole.as_ptr() as *mut libc::c_void,
                    iov_len: whole.len(),
                };
                1
            } + prefix;
            // SAFETY: a zeroed mmsghdr is valid; the iovec pointer is set next.
            let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
            h.msg_hdr.msg_iov = self.iovs[i * MAX_IOV..].as_mut_ptr();
            h.msg_hdr.msg_iovlen = used;
            self.hdrs[i] = h;
            count += 1;
        }
        if count == 0 {
            return Ok(0);
        }
        loop {
            // SAFETY: the first `count` headers point at iovecs of `self`, which
            // point at chunks of messages borrowed for `'m` (alive for the whole
            // call), at `self.gathered` or at `self.vnet`'s headers, untouched
            // until the call returns. The kernel only reads the data and writes
            // `msg_len`.
            let n = unsafe {
                libc::sendmmsg(
                    fd,
                    self.hdrs.as_mut_ptr(),
                    count as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => return Ok(0),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(err),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    use super::*;

    /// Sends `frames` from a fresh socket to a fresh one and returns the
    /// receiving socket once they all wait there.
    fn waiting(frames: &[Vec<u8>]) -> UdpSocket {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for f in frames {
            tx.send_to(f, rx.local_addr().unwrap()).unwrap();
        }
        rx
    }

    fn recv_all(rx: &mut RxBatch, fd: RawFd, want: usize) -> usize {
        for _ in 0..1000 {
            let n = rx.recv(fd).unwrap();
            if n > 0 {
                assert_eq!(n, want);
                return n;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("nothing arrived");
    }

    #[test]
    fn a_taken_frame_keeps_its_bytes_and_its_slot_memory_comes_back_once_let_go() {
        let slot = 48 * 1024;
        let big = |b: u8| vec![b; 40 * 1024];
        let mut rx = RxBatch::new(2, slot, false);
        let sock = waiting(&[big(1), vec![2; 100]]);
        recv_all(&mut rx, sock.as_raw_fd(), 2);
        assert_eq!(rx.frame(1).data, &[2; 100][..]);
        let taken = rx.take(0, 10..40 * 1024);
        let at = taken.as_ptr() as usize - 10;
        assert_eq!(taken, big(1)[10..]);

        // Read again while the frame is held: the slot reads into fresh
        // memory, and the held bytes stay as they were.
        let sock = waiting(&[big(3)]);
        recv_all(&mut rx, sock.as_raw_fd(), 1);
        let second = rx.frame(0).data.as_ptr() as usize;
        assert_ne!(second, at, "not into memory a frame still holds");
        assert_eq!(taken, big(1)[10..]);
        assert_eq!(rx.frame(0).data, &big(3)[..]);

        // Let go of both: the slot reads into the first memory once more
        // after taking the second, which is dropped at once.
        drop(taken);
        drop(rx.take(0, 0..1));
        let sock = waiting(&[big(4)]);
        recv_all(&mut rx, sock.as_raw_fd(), 1);
        let third = rx.frame(0).data.as_ptr() as usize;
        assert_eq!(
            third, second,
            "the slot's memory reclaimed, not allocated anew"
        );
        assert_eq!(rx.frame(0).data, &big(4)[..]);
    }

    #[test]
    fn a_frame_not_taken_leaves_the_slot_to_be_read_into_again() {
        let mut rx = RxBatch::new(1, 2048, false);
        let sock = waiting(&[vec![7; 1000]]);
        recv_all(&mut rx, sock.as_raw_fd(), 1);
        let first = rx.frame(0).data.as_ptr() as usize;
        let sock = waiting(&[vec![8; 3000]]);
        recv_all(&mut rx, sock.as_raw_fd(), 1);
        let f = rx.frame(0);
        assert_eq!(f.data.as_ptr() as usize, first);
        assert!(f.truncated, "longer than the slot");
        assert_eq!(f.data, &[8; 2048][..]);
    }
}
