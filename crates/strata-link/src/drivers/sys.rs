//! The few system calls the drivers need that neither `std` nor `socket2`
//! offers: interface ioctls (netdevice(7)), TUN/TAP setup (the kernel's
//! Documentation/networking/tuntap.rst), AF_PACKET sockets and their options
//! (packet(7)) and setns(2). Each wrapper takes and returns safe types; the
//! `unsafe` stays in this file, each block with the invariant that makes it sound.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The longest interface name: IFNAMSIZ less the terminating NUL.
pub const IFNAME_MAX: usize = libc::IFNAMSIZ - 1;

/// `TUNSETIFF` (include/uapi/linux/if_tun.h: `_IOW('T', 202, int)`); libc does
/// not export it.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// `TUNSETOFFLOAD` (`_IOW('T', 208, unsigned int)`): the offloads the reader
/// of a TAP takes, passed by value.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;

/// `TUNSETVNETHDRSZ` (`_IOW('T', 216, int)`): the virtio-net header's length.
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

/// `IFF_VNET_HDR` (include/uapi/linux/if_tun.h): a virtio-net header before
/// every frame read or written.
const IFF_VNET_HDR: libc::c_int = 0x4000;

/// `TUN_F_*` (include/uapi/linux/if_tun.h): what a TAP's reader takes.
pub mod tun_f {
    /// Frames with their transport checksum left to finish.
    pub const CSUM: u32 = 0x01;
    /// TCP-in-IPv4 super-segments.
    pub const TSO4: u32 = 0x02;
    /// TCP super-segments with ECN (CWR on the first segment).
    pub const TSO_ECN: u32 = 0x08;
    /// UDP-in-IPv4 super-datagrams (Linux 6.2; only with USO6).
    pub const USO4: u32 = 0x20;
    /// UDP-in-IPv6 super-datagrams (Linux 6.2; only with USO4).
    pub const USO6: u32 = 0x40;
}

/// `PACKET_IGNORE_OUTGOING` (include/uapi/linux/if_packet.h, Linux 4.20).
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// `PACKET_VNET_HDR` (include/uapi/linux/if_packet.h): a virtio-net header
/// before every frame, both ways.
pub const PACKET_VNET_HDR: libc::c_int = 15;

/// Turns a `-1` return into the thread's `errno`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// An `ifreq` naming `name`, every other byte zero.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() > IFNAME_MAX || name.contains(['\0', '/']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{name}' is not an interface name (1 to {IFNAME_MAX} bytes, no '/')"),
        ));
    }
    // SAFETY: `ifreq` is plain old data (a name array and a union of integers
    // and plain structs); all-zero bytes are a valid value of it.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (slot, byte) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *slot = byte as libc::c_char;
    }
    Ok(req)
}

/// The name an `ifreq` holds, as the kernel filled it in.
fn ifreq_name(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A throwaway datagram socket to carry interface ioctls (netdevice(7): "any
/// socket's file descriptor regardless of the family or type").
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new file
    // descriptor that nothing else owns, so OwnedFd may take it.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: see above: `fd` is fresh and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches the open `/dev/net/tun` descriptor to the TAP device `name`
/// (IFF_TAP | IFF_NO_PI, and IFF_VNET_HDR when `vnet`), creating it when it
/// does not exist. Returns the device's name as the kernel reports it.
pub fn tun_set_tap(tun: RawFd, name: &str, vnet: bool) -> io::Result<String> {
    let mut req = ifreq(name)?;
    let vnet = if vnet { IFF_VNET_HDR } else { 0 };
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | vnet) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, and `req` is a
    // valid, exclusively borrowed one that outlives the call.
    check(unsafe { libc::ioctl(tun, TUNSETIFF, &mut req as *mut libc::ifreq) })?;
    Ok(ifreq_name(&req))
}

/// Tells the TAP open at `tun` which offloads its reader takes (`TUN_F_*`);
/// EINVAL when the kernel does not know one of them.
pub fn tun_set_offload(tun: RawFd, flags: u32) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value, no pointer.
    check(unsafe { libc::ioctl(tun, TUNSETOFFLOAD, libc::c_ulong::from(flags)) })?;
    Ok(())
}

/// Sets the virtio-net header's length of the TAP open at `tun` (a
/// persistent device keeps what an earlier user set).
pub fn tun_set_vnet_header_len(tun: RawFd, len: usize) -> io::Result<()> {
    let len =
        libc::c_int::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: TUNSETVNETHDRSZ reads one int at the pointer, a live local.
    check(unsafe { libc::ioctl(tun, TUNSETVNETHDRSZ, &len as *const libc::c_int) })?;
    Ok(())
}

/// The MTU of interface `name` (SIOCGIFMTU).
pub fn interface_mtu(name: &str) -> io::Result<usize> {
    let sock = ioctl_socket()?;
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFMTU fills `ifr_mtu` of the valid `ifreq` we lend it.
    check(unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            libc::SIOCGIFMTU,
            &mut req as *mut libc::ifreq,
        )
    })?;
    // SAFETY: the kernel has just written the `ifru_mtu` member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::other(format!("{name}: negative MTU {mtu}")))
}

/// The flags of interface `name` (SIOCGIFFLAGS), with the `ifreq` that read them.
fn interface_flags(sock: &OwnedFd, name: &str) -> io::Result<(libc::ifreq, libc::c_short)> {
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFFLAGS fills `ifr_flags` of the valid `ifreq` we lend it.
    check(unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            libc::SIOCGIFFLAGS,
            &mut req as *mut libc::ifreq,
        )
    })?;
    // SAFETY: the kernel has just written the `ifru_flags` member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok((req, flags))
}

/// Brings interface `name` up (SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP).
pub fn interface_up(name: &str) -> io::Result<()> {
    let sock = ioctl_socket()?;
    let (mut req, flags) = interface_flags(&sock, name)?;
    if flags & libc::IFF_UP as libc::c_short != 0 {
        return Ok(());
    }
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads the valid `ifreq` we lend it.
    check(unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            libc::SIOCSIFFLAGS,
            &mut req as *mut libc::ifreq,
        )
    })?;
    Ok(())
}

/// Waits, at most `limit`, until an interface that is up is also running.
/// A TAP gets its carrier when a reader attaches, but the kernel activates
/// its transmit queue later, from its link-watch work (up to a second
/// later); until then what the kernel sends out of it — the answer to
/// Strata's first ARP request — is dropped. Returns whether it runs; an
/// interface that is down is not waited for.
pub fn interface_wait_running(name: &str, limit: std::time::Duration) -> io::Result<bool> {
    let sock = ioctl_socket()?;
    let start = std::time::Instant::now();
    loop {
        let (_, flags) = interface_flags(&sock, name)?;
        if flags & libc::IFF_UP as libc::c_short == 0 {
            return Ok(false);
        }
        if flags & libc::IFF_RUNNING as libc::c_short != 0 {
            return Ok(true);
        }
        if start.elapsed() >= limit {
            return Ok(false);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The index of interface `name` (if_nametoindex(3)).
pub fn interface_index(name: &str) -> io::Result<libc::c_int> {
    ifreq(name)?;
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    libc::c_int::try_from(index).map_err(|_| io::Error::other("interface index out of range"))
}

/// A non-blocking AF_PACKET SOCK_RAW socket that receives nothing until it is
/// bound: packet(7) suggests protocol 0 at creation and the real protocol at
/// bind(2), so no frame of another interface slips in between.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new file
    // descriptor that nothing else owns.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is fresh and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds a packet socket to every protocol (ETH_P_ALL) on interface `index`.
pub fn packet_bind(fd: RawFd, index: libc::c_int) -> io::Result<()> {
    // SAFETY: `sockaddr_ll` is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as libc::c_ushort;
    addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    addr.sll_ifindex = index;
    // SAFETY: bind(2) reads `len` bytes at the pointer, which is exactly the
    // live `sockaddr_ll` above.
    check(unsafe {
        libc::bind(
            fd,
            &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Puts interface `index` in promiscuous mode for as long as the packet socket
/// lives (PACKET_ADD_MEMBERSHIP with PACKET_MR_PROMISC; the kernel counts
/// such requests and drops ours when the socket closes).
pub fn packet_promiscuous(fd: RawFd, index: libc::c_int) -> io::Result<()> {
    // SAFETY: `packet_mreq` is plain old data; all-zero is a valid value.
    let mut mreq: libc::packet_mreq = unsafe { mem::zeroed() };
    mreq.mr_ifindex = index;
    mreq.mr_type = libc::PACKET_MR_PROMISC as libc::c_ushort;
    set_option(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
}

/// Sets an integer socket option.
pub fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    set_option(fd, level, name, &value)
}

/// setsockopt(2) with a plain-data value.
fn set_option<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes at the pointer, which is
    // exactly the borrowed `T`; callers only pass plain-data option structs.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value as *const T as *const libc::c_void,
            mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `SO_MEMINFO` (include/uapi/asm-generic/socket.h), which libc does not
/// export for every target.
const SO_MEMINFO: libc::c_int = 55;

/// How many packets the kernel dropped at this socket's receive queue (full
/// buffer, filter): `SK_MEMINFO_DROPS` of SO_MEMINFO (sock_diag(7)), a running
/// total kept for every socket type, packet and UDP sockets alike.
pub fn socket_drops(fd: RawFd) -> io::Result<u64> {
    // Newer kernels may report more fields; room for them is harmless.
    let mut info = [0u32; 16];
    let mut len = mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes at the pointer, which is
    // exactly the live array above, and updates `len`, a live local.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    Ok(u64::from(info[libc::SK_MEMINFO_DROPS as usize]))
}

/// Moves the calling thread into the network namespace open at `ns` (setns(2)
/// with CLONE_NEWNET; other threads are not affected).
pub fn enter_net_namespace(ns: RawFd) -> io::Result<()> {
    // SAFETY: setns takes a descriptor and a flag, no pointers.
    check(unsafe { libc::setns(ns, libc::CLONE_NEWNET) })?;
    Ok(())
}
