//! The system calls of the transport's UDP driver: recvmmsg(2) with source
//! addresses and GRO's segment size, sendmmsg(2) with an iovec per message
//! (headers and the application's slices, no copy) and UDP GSO's segment
//! size, ppoll(2) with a nanosecond time-out.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::ptr;
use std::time::Duration;

/// `UDP_SEGMENT` (linux/udp.h): the GSO segment size, as a socket option or cmsg.
const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (linux/udp.h): ask for coalesced receives, reported by cmsg.
const UDP_GRO: libc::c_int = 104;
/// Room for one cmsg carrying an int (CMSG_SPACE(4) is 24 on 64-bit Linux).
const CONTROL_LEN: usize = 64;

/// Turns on GRO for `fd`; an error means the kernel refuses it.
pub fn enable_gro(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` lives across the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_UDP,
            UDP_GRO,
            (&one as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The MTU of the route from `fd` (a connected UDP socket) to its peer,
/// the path MTU when the kernel learnt one (`IP_MTU`, `IPV6_MTU`).
pub fn route_mtu(fd: RawFd, ipv6: bool) -> io::Result<usize> {
    let (level, name) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `mtu` and `len` live across the call; `len` holds `mtu`'s size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(usize::try_from(mtu).unwrap_or(0))
    }
}

fn to_socket_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which
            // is smaller than sockaddr_storage and suitably aligned by it.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn from_socket_addr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut s: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            let sin = unsafe {
                &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe {
                &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_scope_id = v6.scope_id();
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (s, len as libc::socklen_t)
}

/// Receive slots, their source addresses and control buffers for one socket.
pub struct RxBatch {
    slot: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    controls: Vec<[u8; CONTROL_LEN]>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point only into `bufs`,
// `iovs`, `names` and `controls`, heap buffers owned by this value and never
// resized, so they stay valid wherever it moves; nothing is shared.
unsafe impl Send for RxBatch {}

impl RxBatch {
    /// `batch` slots of `slot` bytes.
    pub fn new(batch: usize, slot: usize) -> RxBatch {
        let batch = batch.max(1);
        let mut rx = RxBatch {
            slot,
            bufs: vec![0; batch * slot],
            // SAFETY (all three): plain old data, valid when zeroed.
            iovs: vec![unsafe { mem::zeroed() }; batch],
            names: vec![unsafe { mem::zeroed() }; batch],
            controls: vec![[0; CONTROL_LEN]; batch],
            hdrs: Vec::with_capacity(batch),
        };
        for i in 0..batch {
            rx.iovs[i] = libc::iovec {
                iov_base: rx.bufs[i * slot..].as_mut_ptr().cast(),
                iov_len: slot,
            };
            // SAFETY: a zeroed mmsghdr is valid; its pointers are set next.
            let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
            h.msg_hdr.msg_iov = &mut rx.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name = (&mut rx.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_control = rx.controls[i].as_mut_ptr().cast();
            rx.hdrs.push(h);
        }
        rx
    }

    /// Datagrams one `recv` may take.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Receives what is waiting on `fd`, up to the batch, without blocking;
    /// how many datagrams arrived (0: none waiting).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = CONTROL_LEN as _;
            h.msg_hdr.msg_flags = 0;
        }
        loop {
            // SAFETY: every header points at live slots, names and control
            // buffers of `self` whose lengths were just set to their sizes;
            // `self` is borrowed mutably, so the kernel's writes alias nothing.
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

    /// Datagram `i` of the last `recv`: its source, bytes, whether it was
    /// cut (longer than the slot), and GRO's segment size when the kernel
    /// coalesced several datagrams into it.
    pub fn datagram(&self, i: usize) -> (Option<SocketAddr>, &[u8], bool, Option<usize>) {
        let h = &self.hdrs[i];
        let len = (h.msg_len as usize).min(self.slot);
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        let gso = gro_segment(&h.msg_hdr);
        let start = i * self.slot;
        (
            to_socket_addr(&self.names[i]),
            &self.bufs[start..start + len],
            truncated,
            gso,
        )
    }
}

/// GRO's segment size in a received message's control data, when the
/// kernel coalesced several datagrams into it.
fn gro_segment(h: &libc::msghdr) -> Option<usize> {
    let mut gso = None;
    // SAFETY: the kernel filled `msg_control` up to `msg_controllen` within
    // the caller's CONTROL_LEN buffer; the CMSG_* walkers stay inside it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let v = ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                if v > 0 {
                    gso = Some(v as usize);
                }
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    gso
}

/// One datagram (or GRO super-datagram) received by recvmsg(2).
pub struct Received {
    /// Its bytes, spread over the iovecs in order.
    pub len: usize,
    /// Its source.
    pub from: Option<SocketAddr>,
    /// It was longer than the iovecs (cut).
    pub truncated: bool,
    /// GRO's segment size when several datagrams were coalesced.
    pub segment: Option<usize>,
}

/// Receives one datagram from `fd` without blocking, scattered over `iovs`
/// in order (the caller's header buffers and application buffers); `None`
/// when nothing waits.
///
/// # Safety
///
/// Every iovec must describe memory the caller may write and nothing else
/// reads or writes during the call (the kernel writes up to `iov_len` bytes
/// at `iov_base`).
pub unsafe fn recv_iov(fd: RawFd, iovs: &mut [libc::iovec]) -> io::Result<Option<Received>> {
    // SAFETY: all-zero bytes are valid for these plain C structures.
    let mut name: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut control = [0u8; CONTROL_LEN];
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = iovs.as_mut_ptr();
    msg.msg_iovlen = iovs.len() as _;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL_LEN as _;
    loop {
        // SAFETY: `msg` points at the live name and control buffers of this
        // frame and at the caller's iovecs, writable by the caller's contract.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(Received {
                len: n as usize,
                from: to_socket_addr(&name),
                truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
                segment: gro_segment(&msg),
            }));
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(err),
        }
    }
}

/// One message of a [`send_many`] batch: the concatenation of
/// `pieces[pieces]` to `dest` — with `segment`, a UDP GSO super-datagram the
/// kernel cuts every `segment` bytes.
pub struct Outgoing {
    /// Where it goes.
    pub dest: SocketAddr,
    /// Its pieces, a range of the batch's piece list.
    pub pieces: std::ops::Range<usize>,
    /// GSO's segment size, if it is a super-datagram.
    pub segment: Option<u16>,
}

/// Whether a failed GSO send is the kernel or the route refusing
/// segmentation itself (the same datagrams may leave one by one): EIO
/// (UDP-Lite, an IPsec route), EINVAL (a segment larger than the route's
/// MTU, UDP checksums off), EOPNOTSUPP / ENOPROTOOPT (no support).
pub fn gso_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOPROTOOPT)
    )
}

/// Whether the kernel knows UDP GSO (Linux 4.18): an older one would
/// ignore the `UDP_SEGMENT` cmsg and send a super-datagram whole, as IP
/// fragments, so it is asked once, on `fd`, before any send.
pub fn gso_supported(fd: RawFd) -> io::Result<()> {
    let mut v: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` live across the call; `len` holds `v`'s size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_UDP,
            UDP_SEGMENT,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sends `msgs` on `fd` in one sendmmsg(2), without blocking; each message
/// is the concatenation of its `pieces` (the headers the connection wrote
/// and slices of the application's buffers: no copy in user space). Returns
/// how many left, from the front: 0 when the socket's buffer is full, fewer
/// than given when one failed after the first (sendmmsg(2) reports that
/// error on the next call). An error means the first failed.
pub fn send_many(fd: RawFd, pieces: &[&[u8]], msgs: &[Outgoing]) -> io::Result<usize> {
    if msgs.is_empty() {
        return Ok(0);
    }
    let mut iovs: Vec<libc::iovec> = pieces
        .iter()
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    let mut names: Vec<(libc::sockaddr_storage, libc::socklen_t)> =
        msgs.iter().map(|m| from_socket_addr(m.dest)).collect();
    let mut controls = vec![[0u8; CONTROL_LEN]; msgs.len()];
    let iov_base = iovs.as_mut_ptr();
    let name_base = names.as_mut_ptr();
    let control_base = controls.as_mut_ptr();
    let mut hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        assert!(m.pieces.end <= pieces.len() && m.pieces.start <= m.pieces.end);
        // SAFETY: a zeroed mmsghdr is valid; its pointers are set below, all
        // into `iovs`, `names` and `controls`, which are not touched again
        // (nor moved) until the call returns. `i` is within `names` and
        // `controls` (both `msgs.len()` long), `m.pieces` within `iovs`
        // (asserted), so the offsets stay in bounds.
        unsafe {
            let mut h: libc::mmsghdr = mem::zeroed();
            let name = name_base.add(i);
            h.msg_hdr.msg_name = (&mut (*name).0 as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = (*name).1;
            h.msg_hdr.msg_iov = iov_base.add(m.pieces.start);
            h.msg_hdr.msg_iovlen = m.pieces.len() as _;
            if let Some(size) = m.segment {
                h.msg_hdr.msg_control = control_base.add(i).cast();
                // CMSG_SPACE of a u16 fits CONTROL_LEN: the cmsg header and
                // its data are written inside this message's control buffer.
                h.msg_hdr.msg_controllen = libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as _;
                let c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
                ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size);
            }
            hdrs.push(h);
        }
    }
    loop {
        // SAFETY: every header points at live names, iovecs (over the
        // caller's borrowed slices, only read by the kernel) and control
        // buffers of this frame; the kernel writes only `msg_len`.
        let r = unsafe {
            libc::sendmmsg(
                fd,
                hdrs.as_mut_ptr(),
                hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::WouldBlock => return Ok(0),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(err),
        }
    }
}

/// Waits until one of `fds` is ready for its `events` or `timeout` passes
/// (`None`: forever); fills each `revents`. Nanosecond resolution, so a
/// pacing deadline is slept to, not spun to.
pub fn ppoll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    loop {
        // SAFETY: `fds` is a live mutable slice of pollfd with its length;
        // the timespec, when given, lives across the call; no signal mask.
        let r = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                ts.as_ref()
                    .map_or(ptr::null(), |t| t as *const libc::timespec),
                ptr::null(),
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
