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
pub struct RxBatch {
    slot: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_ll>,
    hdrs: Vec<libc::mmsghdr>,
    with_names: bool,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point only into `bufs`, `iovs`
// and `names`, heap buffers owned by the same value that are never resized, so
// they stay valid wherever the value moves; nothing is shared between threads.
unsafe impl Send for RxBatch {}

impl RxBatch {
    /// `batch` slots of `slot` bytes; `with_names` asks for each frame's
    /// link-layer address (packet sockets), so its packet type is known.
    pub fn new(batch: usize, slot: usize, with_names: bool) -> RxBatch {
        let batch = batch.max(1);
        let mut rx = RxBatch {
            slot,
            bufs: vec![0; batch * slot],
            // SAFETY (both): iovec, sockaddr_ll and mmsghdr are plain old data
            // for which all-zero bytes are valid (null pointers, zero lengths).
            iovs: vec![unsafe { mem::zeroed() }; batch],
            names: vec![unsafe { mem::zeroed() }; batch],
            hdrs: Vec::with_capacity(batch),
            with_names,
        };
        for i in 0..batch {
            rx.iovs[i] = libc::iovec {
                iov_base: rx.bufs[i * slot..].as_mut_ptr().cast(),
                iov_len: slot,
            };
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
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = name_len;
            h.msg_hdr.msg_flags = 0;
        }
        loop {
            // SAFETY: every header points at live slots, iovecs and names of
            // `self` with lengths that match them (set up in `new`, never
            // changed but for the name length reset above), and `self` is
            // borrowed mutably for the call, so the kernel's writes alias
            // nothing. A null timeout is allowed.
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

    /// Frame `i` of the last `recv`.
    pub fn frame(&mut self, i: usize) -> Received<'_> {
        let h = &self.hdrs[i];
        let len = (h.msg_len as usize).min(self.slot);
        let start = i * self.slot;
        Received {
            data: &mut self.bufs[start..start + len],
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || h.msg_len as usize > self.slot,
            pkttype: self.with_names.then(|| self.names[i].sll_pkttype),
        }
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
