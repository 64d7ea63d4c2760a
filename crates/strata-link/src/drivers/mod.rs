//! Link drivers: the bottom anchors that carry an engine's Ethernet frames on real
//! links (seed 000 §4.1's driver anchors).
//!
//! - [`tap`] — a TAP device (`/dev/net/tun`, IFF_TAP | IFF_NO_PI): the kernel on
//!   one side, a Strata host on the other.
//! - [`packet`] — an AF_PACKET socket on an existing interface (a veth end, a
//!   NIC): Strata shares the wire with whatever else is on it.
//! - [`udp`] — each frame in one kernel UDP datagram to a peer Strata host.
//! - [`xudp`] — seed 001's transport over kernel UDP: a control socket and
//!   data sockets driving a `strata-xport` connection or listener.
//!
//! Every driver is non-blocking and batched: the runtime waits on [`Driver::fd`],
//! then [`Driver::recv`] reads what is waiting (up to a batch per call) and
//! [`Driver::send`] writes what the engine queued. A driver never changes a
//! frame: the engine wrote it, and it leaves byte for byte — no padding, no
//! cutting. (A packet or TAP link with segmentation offload has the *kernel*
//! cut TCP super-segments the engine marked, as a NIC's TSO would: see
//! [`vnet`]; only when the kernel refuses are they cut here, in software.)
//! Received frames shorter than an Ethernet header or longer than the link's
//! largest frame are dropped and counted, never handed on cut — but for the
//! kernel's own super-frames, which a virtio-net header describes: a TCP one
//! goes up whole, marked with its segment size ([`Arrival`]), and a UDP one
//! as the datagrams it stands for.
//!
//! Each kind's options are documented in its `OPTIONS`; [`register`] puts the
//! three kinds in a registry with their validators, so `[link.NAME] kind =
//! "tap"` configs are checked when the graph is built.

mod error;
#[allow(unsafe_code)]
mod mmsg;
pub mod netns;
pub mod packet;
mod stats;
#[allow(unsafe_code)]
mod sys;
pub mod tap;
pub mod udp;
pub mod vnet;
#[allow(unsafe_code)]
pub mod xudp;

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use bytes::Bytes;
use strata_core::graph::{LinkNode, LinkSpec, OptionDoc, Options, Registry};
use strata_core::{GraphError, Message};

pub use error::DriverError;
pub use stats::{Counter, DriverCounts, DriverStats, Offloads};

/// The length of an Ethernet II header; shorter frames are runts.
pub const ETH_HEADER: usize = 14;

/// Bytes an IEEE 802.1Q tag adds to a frame.
pub const VLAN_TAG: usize = 4;

/// Frames a driver moves per system call unless told otherwise.
pub const DEFAULT_BATCH: usize = 32;

/// The most frames per system call a driver accepts.
pub const MAX_BATCH: usize = 1024;

/// What a driver knows of a received frame beyond its bytes, from the
/// virtio-net header the kernel put before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Non-zero: a TCP super-frame of segments of this many payload bytes
    /// (the kernel's GSO), for the receiver to mark it with
    /// ([`Message::set_segment_size`]).
    pub segment_size: u16,
    /// Its transport checksum is right: the kernel verified it
    /// (`DATA_VALID`), or left it to be finished and the driver did. A
    /// receive offload need not sum its data again.
    pub verified: bool,
}

/// A received frame as a driver hands it up.
#[derive(Debug)]
pub enum Rx<'a> {
    /// Bytes in the driver's own buffer, for the receiver to copy out
    /// before the next frame.
    Lent(&'a [u8]),
    /// Bytes the driver gave away with the memory they were read into: a
    /// large frame is not copied again.
    Owned(Bytes),
}

impl Rx<'_> {
    /// The frame's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Rx::Lent(b) => b,
            Rx::Owned(b) => b,
        }
    }

    /// The frame as a message, copying what was lent.
    pub fn into_message(self) -> Message {
        match self {
            Rx::Lent(b) => Message::from_slice(b),
            Rx::Owned(b) => Message::from_bytes(b),
        }
    }
}

/// A link driver, as the runtime uses it.
pub trait Driver: Send {
    /// The link kind ("tap", "packet", "udp").
    fn kind(&self) -> &'static str;

    /// What it is attached to, for reports ("tap strata0").
    fn describe(&self) -> String;

    /// The descriptor to wait on for readability and writability.
    fn fd(&self) -> RawFd;

    /// The largest frame it carries.
    fn max_frame(&self) -> usize;

    /// Segmentation offload: the largest frame payload (above Ethernet) of a
    /// TCP super-segment it has cut into MTU-sized frames on the way out; 0
    /// when it cannot (the default). The runtime tells the engine.
    fn segmentation(&self) -> usize {
        0
    }

    /// The most frames one [`recv`](Self::recv) takes from the kernel: a
    /// call that took fewer found the kernel's queue empty.
    fn batch(&self) -> usize;

    /// Reads the frames waiting, at most one batch, without blocking, and hands
    /// each acceptable one to `deliver` with what the driver knows of it.
    /// Returns how many frames were taken from the kernel, dropped ones
    /// included: fewer than the batch means the kernel had no more.
    fn recv(&mut self, deliver: &mut dyn FnMut(Rx<'_>, Arrival)) -> io::Result<usize>;

    /// Sends frames from the front of `queue` without blocking, removing each one
    /// it is done with and handing it to `done` with `true` when it left, or
    /// `false` when it was dropped (a size the link cannot carry, or refused by
    /// the kernel; counted either way). What is left in `queue` would have
    /// blocked.
    fn send(
        &mut self,
        queue: &mut VecDeque<Message>,
        done: &mut dyn FnMut(Message, bool),
    ) -> io::Result<()>;

    /// The live counters.
    fn stats(&self) -> Arc<DriverStats>;

    /// Brings the counters the kernel keeps for us up to date (frames it
    /// dropped before we read them). Costs a system call, so the runtime calls
    /// it now and then, not per frame.
    fn refresh(&mut self) {}
}

/// Opens the driver a link's config names. The kinds without a real device
/// ("sim", "mem") are refused.
pub fn open(link: &LinkNode, batch: usize) -> Result<Box<dyn Driver>, DriverError> {
    let batch = batch.clamp(1, MAX_BATCH);
    let opened: Box<dyn Driver> = match link.kind.as_str() {
        tap::KIND => Box::new(tap::TapDriver::open(&link.options, batch)?),
        packet::KIND => Box::new(packet::PacketDriver::open(&link.options, batch)?),
        udp::KIND => Box::new(udp::UdpDriver::open(&link.options, batch)?),
        other => {
            return Err(DriverError::NotReal {
                link: link.name.clone(),
                kind: other.to_string(),
            });
        }
    };
    Ok(opened)
}

/// Registers "tap", "packet" and "udp" with their options and validators.
pub fn register(reg: &mut Registry) {
    reg.register_link(LinkSpec {
        kind: tap::KIND,
        doc: "a TAP device (/dev/net/tun), created or attached by name",
        options: tap::OPTIONS,
        validate: Some(|o| tap::TapConfig::from_options(o).map(drop)),
    });
    reg.register_link(LinkSpec {
        kind: packet::KIND,
        doc: "an AF_PACKET socket on an existing interface (a veth end, a NIC)",
        options: packet::OPTIONS,
        validate: Some(|o| packet::PacketConfig::from_options(o).map(drop)),
    });
    reg.register_link(LinkSpec {
        kind: udp::KIND,
        doc: "Ethernet frames in kernel UDP datagrams between two Strata hosts",
        options: udp::OPTIONS,
        validate: Some(|o| udp::UdpConfig::from_options(o).map(drop)),
    });
}

/// The `netns` option every kind takes.
const NETNS: OptionDoc = OptionDoc {
    name: "netns",
    doc: "open the device inside this network namespace (a name from `ip netns`), whatever namespace the host runs in (default: the host's)",
};

/// The `buffer` option of socket-based kinds.
const BUFFER: OptionDoc = OptionDoc {
    name: "buffer",
    doc: "kernel send and receive buffer of the socket, like \"4MB\" (default 4MB)",
};

/// Socket buffers unless `buffer` says otherwise: a few milliseconds of a
/// 10 Gbit/s burst, so a busy engine does not lose frames between reads.
const DEFAULT_BUFFER: usize = 4 << 20;

/// An option error naming the link and option.
fn bad(o: &Options, option: &str, problem: impl std::fmt::Display) -> GraphError {
    GraphError::BadOption {
        owner: o.owner().into(),
        option: option.into(),
        problem: problem.to_string(),
    }
}

/// Reads the `netns` option.
fn netns_option(o: &Options) -> Result<Option<String>, GraphError> {
    let ns = o.text("netns")?;
    if let Some(name) = &ns {
        netns::check_name(name).map_err(|e| bad(o, "netns", e))?;
    }
    Ok(ns)
}

/// Reads the `buffer` option.
fn buffer_option(o: &Options) -> Result<usize, GraphError> {
    match o.size("buffer")? {
        None => Ok(DEFAULT_BUFFER),
        Some(b) if (4096..=1 << 30).contains(&b) => Ok(b as usize),
        Some(_) => Err(bad(o, "buffer", "must lie between 4KB and 1GB")),
    }
}

/// Reads an interface-name option.
fn interface_option(o: &Options, key: &str) -> Result<String, GraphError> {
    let name: String = o.require(key)?;
    if name.is_empty()
        || name.len() > sys::IFNAME_MAX
        || name.contains(['/', '\0'])
        || name.contains(char::is_whitespace)
    {
        return Err(bad(
            o,
            key,
            format!(
                "'{name}' is not an interface name (1 to {} bytes, no '/' or spaces)",
                sys::IFNAME_MAX
            ),
        ));
    }
    Ok(name)
}

/// Sets a socket's send and receive buffers, forcing past the system's limits
/// where we have CAP_NET_ADMIN (socket(7): SO_RCVBUFFORCE), else as far as
/// they allow.
fn size_buffers(fd: RawFd, bytes: usize) {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if sys::set_int_option(fd, libc::SOL_SOCKET, force, bytes).is_err() {
            // Without the capability the kernel caps the size at
            // net.core.[rw]mem_max; a smaller buffer still works.
            let _ = sys::set_int_option(fd, libc::SOL_SOCKET, plain, bytes);
        }
    }
}

/// Checks a received frame's size, counts it, and hands on the good ones.
fn accept(
    stats: &DriverStats,
    max: usize,
    data: &[u8],
    truncated: bool,
    deliver: &mut dyn FnMut(&[u8], Arrival),
) {
    admit(stats, max, data, truncated, Arrival::default(), deliver);
}

fn admit(
    stats: &DriverStats,
    max: usize,
    data: &[u8],
    truncated: bool,
    arrival: Arrival,
    deliver: &mut dyn FnMut(&[u8], Arrival),
) {
    if truncated || data.len() > max {
        stats.rx_oversize.add(1);
    } else if data.len() < ETH_HEADER {
        stats.rx_runts.add(1);
    } else {
        stats.rx_frames.add(1);
        stats.rx_bytes.add(data.len() as u64);
        deliver(data, arrival);
    }
}

/// Checks a frame received behind a virtio-net header ([`vnet::receive`]),
/// counts it, and hands on what it holds: a plain frame (sized as
/// [`accept`] sizes it), a TCP super-frame whole, or a UDP super-frame's
/// datagrams, cut in `scratch`. A header that is not believed drops the
/// frame, counted by reason.
fn accept_vnet(
    stats: &DriverStats,
    max: usize,
    frame: &mut [u8],
    truncated: bool,
    scratch: &mut Vec<u8>,
    deliver: &mut dyn FnMut(&[u8], Arrival),
) {
    if truncated {
        stats.rx_oversize.add(1);
        return;
    }
    match vnet::receive(frame, max) {
        Err(why) => stats.refuse(why),
        Ok(vnet::Taken::Frame(data, arrival)) if arrival.segment_size == 0 => {
            admit(stats, max, data, false, arrival, deliver);
        }
        Ok(vnet::Taken::Frame(data, arrival)) => {
            stats.rx_super.add(1);
            stats.rx_frames.add(1);
            stats.rx_bytes.add(data.len() as u64);
            deliver(data, arrival);
        }
        Ok(vnet::Taken::Datagrams(data, size)) => {
            stats.rx_super.add(1);
            stats.rx_frames.add(1);
            stats.rx_bytes.add(data.len() as u64);
            let verified = Arrival {
                segment_size: 0,
                verified: true,
            };
            let cut = crate::offload::datagrams(data, size, scratch, &mut |d| deliver(d, verified));
            stats.rx_cut.add(cut as u64);
        }
    }
}

/// The receive slot that holds any frame the kernel hands over behind a
/// virtio-net header — a super-frame is one IPv4 datagram, at most 64 KiB,
/// in Ethernet with a VLAN tag — and one byte more, so that a longer one
/// shows as cut by the read rather than fitting exactly.
const VNET_SLOT: usize = vnet::LEN + ETH_HEADER + VLAN_TAG + crate::offload::SEGMENTED_MAX + 1;

/// True when a send failed because the kernel will not cut the super-segment
/// in front (EINVAL from the virtio-net header's checks): from then on the
/// driver cuts them itself.
fn refused_to_cut(err: &io::Error, front: Option<&Message>) -> bool {
    err.raw_os_error() == Some(libc::EINVAL) && front.is_some_and(|f| f.segment_size() > 0)
}

/// Records that the kernel of link `link` refused to cut super-segments,
/// and says so (once: the driver cuts in software from then on).
fn fall_back_to_cutting(stats: &DriverStats, link: &str, err: &io::Error) {
    stats.refused_now(Offloads::TX_TSO4);
    tracing::warn!(%link, error = %err, "the kernel refused a TCP super-segment; cutting them in software from now on");
}

/// Replaces every super-segment in `queue` by the frames it becomes on the
/// wire ([`offload::segment`](crate::offload::segment)), for a kernel that
/// refused to cut them. One that is not TCP in IPv4 stays as it is, to be
/// dropped as a size the link cannot carry.
fn cut_in_software(queue: &mut VecDeque<Message>) {
    if queue.iter().all(|f| f.segment_size() == 0) {
        return;
    }
    for f in std::mem::take(queue) {
        match crate::offload::segment(f) {
            Ok(frames) => queue.extend(frames),
            Err(f) => queue.push_back(f),
        }
    }
}

/// What frames a link takes: up to its largest frame, and with segmentation
/// offload, TCP super-segments up to `segmented` bytes.
#[derive(Clone, Copy, Debug)]
struct Limits {
    max: usize,
    segmented: usize,
}

impl Limits {
    /// Frames of `ETH_HEADER..=max` bytes, no super-segments.
    fn plain(max: usize) -> Limits {
        Limits { max, segmented: 0 }
    }

    /// True when the link can send `f`.
    fn fits(&self, f: &Message) -> bool {
        if f.segment_size() == 0 {
            (ETH_HEADER..=self.max).contains(&f.len())
        } else {
            (ETH_HEADER..=self.segmented).contains(&f.len()) && vnet::header(f).is_some()
        }
    }
}

/// Drops from the front of `queue` every frame the link cannot carry, counting
/// them, so that the frame in front can be sent.
fn drop_unsendable(
    stats: &DriverStats,
    limits: Limits,
    queue: &mut VecDeque<Message>,
    done: &mut dyn FnMut(Message, bool),
) {
    while let Some(front) = queue.front() {
        if limits.fits(front) {
            return;
        }
        stats.tx_bad_size.add(1);
        if let Some(f) = queue.pop_front() {
            done(f, false);
        }
    }
}

/// Errors a driver rides out, counting them: the peer or the interface is not
/// there for now (a UDP peer not yet listening, an interface down), or the
/// kernel is short of memory for a moment. Anything else is a bug or a lost
/// descriptor, and stops the runtime.
fn transient(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::ECONNREFUSED
                | libc::ENETDOWN
                | libc::ENETUNREACH
                | libc::EHOSTUNREACH
                | libc::EHOSTDOWN
                | libc::ENXIO
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::EMSGSIZE
                | libc::EIO
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_core::GraphConfig;

    fn options(kind: &str, body: &str) -> Options {
        let text = format!("[link.l]\nkind = \"{kind}\"\n{body}");
        GraphConfig::from_toml(&text).unwrap().links[0]
            .options
            .clone()
    }

    #[test]
    fn every_real_kind_is_registered_and_validates_its_options() {
        let mut reg = Registry::new();
        register(&mut reg);
        let check = |kind: &str, body: &str| {
            (reg.link(kind).unwrap().validate.unwrap())(&options(kind, body))
        };
        assert!(check("tap", "name = \"st0\"").is_ok());
        assert!(check("tap", "").is_err(), "a TAP needs a name");
        assert!(check("tap", "name = \"a-name-longer-than-15\"").is_err());
        assert!(check("packet", "interface = \"veth0\"\npromisc = false").is_ok());
        assert!(check("packet", "interface = \"veth0\"\nnetns = \"a/b\"").is_err());
        assert!(
            check(
                "udp",
                "local = \"127.0.0.1:9000\"\npeer = \"127.0.0.1:9001\""
            )
            .is_ok()
        );
        assert!(
            check("udp", "local = \"127.0.0.1:9000\"").is_err(),
            "a UDP link needs a peer"
        );
        assert!(check("udp", "local = \"127.0.0.1\"\npeer = \"127.0.0.1:9001\"").is_err());
        assert!(
            check(
                "udp",
                "local = \"127.0.0.1:1\"\npeer = \"127.0.0.1:2\"\nbuffer = \"1B\""
            )
            .is_err()
        );
    }

    #[test]
    fn received_frames_are_sized_before_they_are_handed_on() {
        let stats = DriverStats::default();
        let mut got = Vec::new();
        let mut deliver = |f: &[u8], _| got.push(f.len());
        accept(&stats, 60, &[0; 13], false, &mut deliver);
        accept(&stats, 60, &[0; 14], false, &mut deliver);
        accept(&stats, 60, &[0; 60], false, &mut deliver);
        accept(&stats, 60, &[0; 61], false, &mut deliver);
        accept(&stats, 60, &[0; 40], true, &mut deliver);
        assert_eq!(got, [14, 60]);
        let c = stats.snapshot();
        assert_eq!(
            (c.rx_frames, c.rx_bytes, c.rx_runts, c.rx_oversize),
            (2, 74, 1, 2)
        );
    }

    #[test]
    fn frames_the_link_cannot_carry_are_dropped_and_counted_before_sending() {
        let stats = DriverStats::default();
        let mut q: VecDeque<Message> = [10usize, 100, 20, 5]
            .into_iter()
            .map(|n| Message::from(vec![0u8; n]))
            .collect();
        let mut dropped = Vec::new();
        drop_unsendable(&stats, Limits::plain(60), &mut q, &mut |f, left| {
            dropped.push((f.len(), left))
        });
        assert_eq!(
            q.len(),
            2,
            "the runt and the giant in front go, the good frame stops it"
        );
        assert_eq!(q.front().map(Message::len), Some(20));
        drop_unsendable(&stats, Limits::plain(60), &mut q, &mut |f, left| {
            dropped.push((f.len(), left))
        });
        assert_eq!((q.len(), stats.snapshot().tx_bad_size), (2, 2));
        assert_eq!(dropped, [(10, false), (100, false)]);
    }

    /// `frame` behind a virtio-net header saying `repr`.
    fn behind(repr: vnet::Repr, frame: &[u8]) -> Vec<u8> {
        let mut f = repr.to_bytes().to_vec();
        f.extend_from_slice(frame);
        f
    }

    #[test]
    fn frames_behind_a_virtio_net_header_are_handed_on_whole_cut_or_counted_as_refused() {
        use crate::offload::tests::{as_the_kernel_sends, tcp_frame, udp_frame};
        use vnet::{Csum, Gso, Repr};
        let owed = |start, offset| Csum::Partial { start, offset };
        let tso = Repr {
            csum: owed(34, 16),
            gso: Gso::Tcp4 {
                size: 1448,
                ecn: false,
            },
            hdr_len: 0,
        };
        let uso = Repr {
            csum: owed(34, 6),
            gso: Gso::UdpL4 { size: 1000 },
            hdr_len: 0,
        };
        let lie = Repr {
            csum: owed(34, 6),
            ..tso
        };
        let super_tcp = as_the_kernel_sends(tcp_frame(30 * 1448), 6);
        let super_udp = as_the_kernel_sends(udp_frame(4500), 17);
        let mut frames = vec![
            (behind(Repr::default(), &tcp_frame(100)), false),
            (behind(tso, &super_tcp), false),
            (behind(uso, &super_udp), false),
            (behind(lie, &super_tcp), false),
            (behind(Repr::default(), &tcp_frame(3000)), false),
            (behind(Repr::default(), &tcp_frame(100)), true),
        ];
        let stats = DriverStats::default();
        let mut got = Vec::new();
        let mut scratch = Vec::new();
        for (f, truncated) in &mut frames {
            accept_vnet(&stats, 1518, f, *truncated, &mut scratch, &mut |d, a| {
                got.push((d.len(), a.segment_size))
            });
        }
        let udp = |n: usize| (42 + n, 0);
        assert_eq!(
            got,
            [
                (166, 0),
                (super_tcp.len(), 1448),
                udp(1000),
                udp(1000),
                udp(1000),
                udp(1000),
                udp(500)
            ]
        );
        let c = stats.snapshot();
        assert_eq!((c.rx_frames, c.rx_super, c.rx_cut), (3, 2, 5));
        assert_eq!(
            c.rx_oversize, 2,
            "a plain frame past the MTU, and a cut read"
        );
        assert_eq!(c.rx_refused[4], 1, "{:?}", c.rx_refused);
        assert_eq!(c.rx_refused_all(), 1);
        assert!(c.to_string().contains("vnet=1 (csum:1)"), "{c}");
    }

    #[test]
    fn a_kernel_that_refuses_to_cut_gets_its_super_segments_cut_here() {
        use crate::offload::tests::{not_tcp_in_ipv4, tcp_frame};
        let mut big = Message::from(tcp_frame(5 * 1000));
        big.set_segment_size(1000);
        let refused = io::Error::from_raw_os_error(libc::EINVAL);
        assert!(refused_to_cut(&refused, Some(&big)));
        assert!(!refused_to_cut(
            &refused,
            Some(&Message::from(tcp_frame(10)))
        ));
        assert!(!refused_to_cut(
            &io::Error::from_raw_os_error(libc::ENOBUFS),
            Some(&big)
        ));
        let mut odd = Message::from(not_tcp_in_ipv4()[0].clone());
        odd.set_segment_size(1000);
        let mut q: VecDeque<Message> = [Message::from(tcp_frame(10)), big, odd].into();
        cut_in_software(&mut q);
        let marks: Vec<(usize, u16)> = q.iter().map(|m| (m.len(), m.segment_size())).collect();
        let seg = (66 + 1000, 0);
        assert_eq!(marks, [(76, 0), seg, seg, seg, seg, seg, (3066, 1000)]);
        let stats = DriverStats::default();
        stats.set_offloads(Offloads::new(Offloads::VNET | Offloads::TX_TSO4, 0));
        fall_back_to_cutting(&stats, "test", &refused);
        assert_eq!(
            stats.offloads().to_string(),
            "offloads=vnet refused=tx-tso4"
        );
    }
}
