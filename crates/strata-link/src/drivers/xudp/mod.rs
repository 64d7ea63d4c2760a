//! Seed 001's transport over the kernel's UDP (§2): one control socket and N
//! data sockets, driving a sans-I/O [`strata_xport::Endpoint`] (a connection
//! or a listener).
//!
//! - Socket buffers are set and **read back** (§3.4); when the kernel clamps
//!   them below what was asked, the data is spread over more data sockets
//!   ([`BufferReport`] says so, for the caller to tell the user).
//! - A datagram leaves with an iovec of the header the connection wrote and
//!   the slice of the application's buffer (§3.5.1): the payload is never
//!   copied in user space. Runs of equal-size datagrams to one port go as
//!   one UDP GSO super-datagram (`UDP_SEGMENT`), and up to 16 such messages
//!   per sendmmsg(2). A kernel without GSO is found at bind; a kernel or
//!   route that refuses it on a send (EIO, EINVAL …) has the same datagrams
//!   sent one by one, to that destination from then on, said once.
//! - Reception is batched with recvmmsg, with UDP GRO where the kernel
//!   grants it (refusal again said once); the control socket is always read
//!   before the data sockets (§3.6).
//! - With GRO, a data socket is read straight into the application's
//!   buffers (§3.5.1): one recvmsg per super-datagram, its iovec putting
//!   each packet's header into the driver's buffer and its payload where the
//!   connection expects it ([`strata_xport::Endpoint::rx_targets`]); a packet
//!   that lands elsewhere is copied to its place ([`XudpStats::placed_bytes`]
//!   and [`XudpStats::copied_bytes`] count both).
//! - [`Xudp::wait`] blocks in ppoll(2) until a socket, one of the
//!   application's own descriptors, or the connection's next deadline (a
//!   timer or the pacer's next departure) — nanosecond resolution, no spin;
//!   busy-polling is an option for latency.

mod scatter;
mod sys;

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use bytes::Bytes;
use socket2::{Domain, Protocol, Socket, Type};
use strata_xport::{Channel, Endpoint};

/// Most datagrams in one GSO super-datagram (the kernel's UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO super-datagram.
const GSO_MAX_BYTES: usize = 65_000;
/// Most messages (GSO super-datagrams or datagrams) per sendmmsg(2).
const MMSG_BATCH: usize = 16;
/// Packets taken from the endpoint before the queue is sent.
const TX_QUEUE: usize = 4 * GSO_MAX_SEGMENTS;
/// Destinations remembered as refusing GSO before it is off for all.
const MAX_NO_GSO: usize = 64;
/// A received datagram larger than this is cut (the transport's are ≤ 1500).
const SLOT: usize = 2048;
/// A GRO receive slot: one coalesced super-datagram.
const GRO_SLOT: usize = 65_536;
/// Super-datagrams received into the application's buffers per data socket
/// and turn (as many as a GRO recvmmsg batch takes).
const SCATTER_TURNS: usize = 8;

/// How to open the sockets.
#[derive(Clone, Debug)]
pub struct XudpOptions {
    /// Data sockets wanted (more are opened if buffers are clamped).
    pub data_sockets: usize,
    /// Socket buffer size wanted per direction, bytes, summed over the
    /// data sockets.
    pub socket_buffer: usize,
    /// Try UDP GSO on sends.
    pub gso: bool,
    /// Try UDP GRO on receives.
    pub gro: bool,
    /// Poll without sleeping (latency at the price of a core).
    pub busy_poll: bool,
    /// Datagrams per recvmmsg.
    pub batch: usize,
    /// Receive data straight into the application's buffers (with GRO).
    pub place: bool,
}

impl Default for XudpOptions {
    fn default() -> Self {
        XudpOptions {
            data_sockets: 1,
            socket_buffer: 4 << 20,
            gso: true,
            gro: true,
            busy_poll: false,
            batch: 32,
            place: true,
        }
    }
}

/// What the kernel granted (§3.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferReport {
    /// Bytes asked for, in total.
    pub requested: usize,
    /// Receive buffer per data socket, as read back (Linux reports twice
    /// the usable size; this is the usable half).
    pub rcvbuf: usize,
    /// Send buffer per data socket, as read back (halved likewise).
    pub sndbuf: usize,
    /// The kernel gave less than asked per socket.
    pub clamped: bool,
    /// Data sockets opened.
    pub data_sockets: usize,
}

/// The driver's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XudpStats {
    /// recvmmsg calls that returned datagrams.
    pub recv_calls: u64,
    /// Datagrams received (after cutting GRO super-datagrams).
    pub datagrams_in: u64,
    /// GRO super-datagrams received.
    pub gro_batches: u64,
    /// Datagrams cut by a too-small slot (dropped).
    pub truncated: u64,
    /// Datagrams from an address family we cannot name (dropped).
    pub unnamed: u64,
    /// Send system calls (sendmmsg, each up to 16 messages).
    pub send_calls: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// GSO super-datagrams sent.
    pub gso_batches: u64,
    /// Sends that found the socket buffer full (waited for).
    pub would_block: u64,
    /// Datagrams the kernel refused to send (dropped; the transport resends).
    pub send_errors: u64,
    /// The kernel refused GSO (then off).
    pub gso_refused: bool,
    /// The kernel refused GRO (then off).
    pub gro_refused: bool,
    /// Payload bytes received straight into the application's buffers.
    pub placed_bytes: u64,
    /// Payload bytes received into the driver's buffers (then copied into
    /// the application's by the connection).
    pub copied_bytes: u64,
}

struct Pending {
    header: Vec<u8>,
    payload: Bytes,
    dest: SocketAddr,
    channel: Channel,
}

impl Pending {
    fn len(&self) -> usize {
        self.header.len() + self.payload.len()
    }
}

/// The control socket, the data sockets and their batches.
pub struct Xudp {
    control: UdpSocket,
    data: Vec<UdpSocket>,
    rx_control: sys::RxBatch,
    rx_data: Vec<sys::RxBatch>,
    scatter: Option<scatter::Scatter>,
    pending: VecDeque<Pending>,
    pool: Vec<Vec<u8>>,
    gso: bool,
    /// Destinations whose route refused GSO (sent datagram by datagram).
    no_gso: Vec<SocketAddr>,
    /// The sockets (control first) the last [`Xudp::wait`] saw readable,
    /// for the next [`Xudp::receive`] (`None`: read them all).
    ready: Option<Vec<bool>>,
    gro: bool,
    busy_poll: bool,
    report: BufferReport,
    stats: XudpStats,
}

fn udp_socket(addr: SocketAddr, buffer: usize) -> io::Result<(UdpSocket, usize, usize)> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Ask; the kernel caps at net.core.[rw]mem_max silently, hence the read-back.
    let _ = s.set_recv_buffer_size(buffer);
    let _ = s.set_send_buffer_size(buffer);
    s.bind(&addr.into())?;
    s.set_nonblocking(true)?;
    let rcv = s.recv_buffer_size()? / 2;
    let snd = s.send_buffer_size()? / 2;
    Ok((s.into(), rcv, snd))
}

impl Xudp {
    /// Binds the control socket at `control` and the data sockets on the
    /// same address, ephemeral ports; `opts.socket_buffer` is spread over
    /// them, and more are opened when the kernel clamps each (§3.4).
    pub fn bind(control: SocketAddr, opts: &XudpOptions) -> io::Result<Xudp> {
        let want_sockets = opts
            .data_sockets
            .clamp(1, strata_xport::wire::MAX_DATA_SOCKETS);
        let per_socket = opts.socket_buffer.div_ceil(want_sockets);
        let (control, _, _) = udp_socket(control, 1 << 20)?;
        let data_addr = SocketAddr::new(control.local_addr()?.ip(), 0);
        let (first, rcv, snd) = udp_socket(data_addr, per_socket)?;
        let got = rcv.min(snd).max(1);
        let clamped = got < per_socket;
        let n = if clamped {
            opts.socket_buffer
                .div_ceil(got)
                .clamp(want_sockets, strata_xport::wire::MAX_DATA_SOCKETS)
        } else {
            want_sockets
        };
        let mut data = vec![first];
        for _ in 1..n {
            data.push(udp_socket(data_addr, per_socket)?.0);
        }
        let mut stats = XudpStats::default();
        let mut gro = opts.gro;
        if gro {
            for s in &data {
                if let Err(e) = sys::enable_gro(s.as_raw_fd()) {
                    tracing::warn!(
                        "UDP GRO refused by the kernel ({e}); receiving datagram by datagram"
                    );
                    stats.gro_refused = true;
                    gro = false;
                    break;
                }
            }
        }
        let mut gso = opts.gso;
        if gso && let Err(e) = sys::gso_supported(data[0].as_raw_fd()) {
            tracing::warn!("UDP GSO unknown to the kernel ({e}); sending datagram by datagram");
            stats.gso_refused = true;
            gso = false;
        }
        let batch = opts.batch.max(1);
        let rx_data = data
            .iter()
            .map(|_| {
                if gro {
                    sys::RxBatch::new(batch.min(8), GRO_SLOT)
                } else {
                    sys::RxBatch::new(batch, SLOT)
                }
            })
            .collect();
        Ok(Xudp {
            control,
            data,
            rx_control: sys::RxBatch::new(16, SLOT),
            rx_data,
            scatter: (gro && opts.place).then(scatter::Scatter::default),
            pending: VecDeque::new(),
            pool: Vec::new(),
            gso,
            no_gso: Vec::new(),
            ready: None,
            gro,
            busy_poll: opts.busy_poll,
            report: BufferReport {
                requested: opts.socket_buffer,
                rcvbuf: rcv,
                sndbuf: snd,
                clamped,
                data_sockets: n,
            },
            stats,
        })
    }

    /// The MTU of the kernel's route to `to` (its path MTU when known): a
    /// throw-away socket is connected there and asked (`IP_MTU`). A data
    /// packet's payload that fills it is
    /// `wire::payload_for_mtu(mtu, wire::IPV4_UDP_LEN)` (or `IPV6_UDP_LEN`).
    pub fn path_mtu(to: SocketAddr) -> io::Result<usize> {
        let any: SocketAddr = if to.is_ipv6() {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let s = UdpSocket::bind(any)?;
        s.connect(to)?;
        sys::route_mtu(s.as_raw_fd(), to.is_ipv6())
    }

    /// The control socket's address.
    pub fn control_addr(&self) -> io::Result<SocketAddr> {
        self.control.local_addr()
    }

    /// The data sockets' ports, to announce in the set-up.
    pub fn data_ports(&self) -> io::Result<Vec<u16>> {
        self.data
            .iter()
            .map(|s| Ok(s.local_addr()?.port()))
            .collect()
    }

    /// What the kernel granted.
    pub fn report(&self) -> &BufferReport {
        &self.report
    }

    /// Counters.
    pub fn stats(&self) -> &XudpStats {
        &self.stats
    }

    /// Whether GSO and GRO are in use.
    pub fn offloads(&self) -> (bool, bool) {
        (self.gso, self.gro)
    }

    /// Reads every waiting datagram into `ep`: the control socket first,
    /// then one batch per data socket, again while a data socket fills its
    /// batch (the control socket first each time, §3.6), up to a bound so
    /// that sending is not starved. After [`Xudp::wait`], only the sockets
    /// it saw readable are read: a socket that is empty costs no system
    /// call (a sender's data socket, a receiver's control socket between
    /// acknowledgements). Returns datagrams handled.
    pub fn receive(&mut self, ep: &mut impl Endpoint, now: Instant) -> io::Result<usize> {
        let mut want = self
            .ready
            .take()
            .unwrap_or_else(|| vec![true; 1 + self.data.len()]);
        let mut total = 0;
        loop {
            if want[0] {
                loop {
                    let n = self.rx_control.recv(self.control.as_raw_fd())?;
                    total += deliver(
                        &self.rx_control,
                        n,
                        Channel::Control,
                        ep,
                        now,
                        &mut self.stats,
                    );
                    if n < self.rx_control_capacity() {
                        break;
                    }
                }
            }
            for (i, s) in self.data.iter().enumerate() {
                if !want[1 + i] {
                    continue;
                }
                let ch = Channel::Data(i as u8);
                // Whether the socket may hold more: it filled what was read.
                let mut full = None;
                if let Some(sc) = self.scatter.as_mut() {
                    let mut turns = 0;
                    while turns < SCATTER_TURNS {
                        match sc.receive(s.as_raw_fd(), ch, ep, now, &mut self.stats)? {
                            scatter::Outcome::NoTargets => break,
                            scatter::Outcome::Empty => {
                                full = Some(false);
                                break;
                            }
                            scatter::Outcome::Handled(n) => {
                                total += n;
                                turns += 1;
                                full = Some(turns == SCATTER_TURNS);
                            }
                        }
                    }
                }
                want[1 + i] = match full {
                    Some(full) => full,
                    None => {
                        let n = self.rx_data[i].recv(s.as_raw_fd())?;
                        total += deliver(&self.rx_data[i], n, ch, ep, now, &mut self.stats);
                        n == self.rx_data[i].capacity()
                    }
                };
            }
            if total >= 4096 || !want[1..].contains(&true) {
                return Ok(total);
            }
            want[0] = true;
        }
    }

    fn rx_control_capacity(&self) -> usize {
        16
    }

    /// Takes what `ep` wants sent and sends it; what the kernel cannot take
    /// now stays queued for the next call (after [`Xudp::wait`] saw the
    /// socket writable).
    pub fn transmit(&mut self, ep: &mut impl Endpoint, now: Instant) -> io::Result<()> {
        if !self.flush()? {
            return Ok(());
        }
        loop {
            let mut header = self.pool.pop().unwrap_or_default();
            match ep.poll_transmit(now, &mut header) {
                Some(t) => self.pending.push_back(Pending {
                    header,
                    payload: t.payload,
                    dest: t.dest,
                    channel: t.channel,
                }),
                None => {
                    self.pool.push(header);
                    break;
                }
            }
            if self.pending.len() >= TX_QUEUE && !self.flush()? {
                return Ok(());
            }
        }
        self.flush()?;
        Ok(())
    }

    /// The data socket a channel's packets leave by (`None`: the control
    /// socket).
    fn socket_index(&self, ch: Channel) -> Option<usize> {
        match ch {
            Channel::Control => None,
            Channel::Data(i) => Some(usize::from(i) % self.data.len()),
        }
    }

    /// Sends the queue; false when the kernel's buffer filled first.
    ///
    /// Each system call is one sendmmsg(2) on one socket (the front
    /// packet's): up to [`MMSG_BATCH`] messages, each a GSO run — datagrams
    /// for that socket and one destination, all of the first's size but the
    /// last, which may be shorter — or a single datagram. Packets for other
    /// sockets or destinations are skipped over and keep their order.
    fn flush(&mut self) -> io::Result<bool> {
        let mut sent = Vec::new();
        let mut msgs: Vec<sys::Outgoing> = Vec::new();
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut order: Vec<usize> = Vec::new();
        while let Some(front) = self.pending.front() {
            let sock = self.socket_index(front.channel);
            sent.clear();
            sent.resize(self.pending.len(), false);
            // Borrows the queue until the call: made afresh per call.
            let mut pieces: Vec<&[u8]> = Vec::with_capacity(4 * GSO_MAX_SEGMENTS);
            msgs.clear();
            runs.clear();
            order.clear();
            let mut start = 0;
            while msgs.len() < MMSG_BATCH && start < self.pending.len() {
                let p = &self.pending[start];
                if sent[start] || self.socket_index(p.channel) != sock {
                    start += 1;
                    continue;
                }
                let (dest, size) = (p.dest, p.len());
                let first = order.len();
                order.push(start);
                sent[start] = true;
                if self.gso && sock.is_some() && !self.no_gso.contains(&dest) {
                    let mut bytes = size;
                    for i in (start + 1..self.pending.len()).take(4 * GSO_MAX_SEGMENTS) {
                        let q = &self.pending[i];
                        if order.len() - first == GSO_MAX_SEGMENTS
                            || bytes + q.len() > GSO_MAX_BYTES
                        {
                            break;
                        }
                        if sent[i] || q.dest != dest || self.socket_index(q.channel) != sock {
                            continue;
                        }
                        if q.len() > size {
                            break;
                        }
                        order.push(i);
                        sent[i] = true;
                        bytes += q.len();
                        if q.len() < size {
                            break;
                        }
                    }
                }
                let from = pieces.len();
                for &i in &order[first..] {
                    let q = &self.pending[i];
                    pieces.push(&q.header);
                    if !q.payload.is_empty() {
                        pieces.push(&q.payload);
                    }
                }
                let count = order.len() - first;
                msgs.push(sys::Outgoing {
                    dest,
                    pieces: from..pieces.len(),
                    segment: (count > 1).then_some(size as u16),
                });
                runs.push((first, count));
                start += 1;
            }
            let fd = match sock {
                None => self.control.as_raw_fd(),
                Some(i) => self.data[i].as_raw_fd(),
            };
            self.stats.send_calls += 1;
            let left = match sys::send_many(fd, &pieces, &msgs) {
                Ok(0) => {
                    self.stats.would_block += 1;
                    return Ok(false);
                }
                Ok(n) => n,
                Err(e) if msgs[0].segment.is_some() && sys::gso_refusal(&e) => {
                    self.refuse_gso(msgs[0].dest, &e);
                    continue;
                }
                Err(_) => {
                    // ICMP errors reported on a later send, a route gone: the
                    // datagrams are lost like any other, and resent by the
                    // transport.
                    self.stats.send_errors += runs[0].1 as u64;
                    1
                }
            };
            sent.fill(false);
            for &(first, count) in &runs[..left] {
                if count > 1 {
                    self.stats.gso_batches += 1;
                }
                self.stats.datagrams_out += count as u64;
                for &i in &order[first..first + count] {
                    sent[i] = true;
                }
            }
            let mut i = 0;
            let pool = &mut self.pool;
            self.pending.retain_mut(|p| {
                let gone = sent[i];
                i += 1;
                if gone {
                    pool.push(std::mem::take(&mut p.header));
                }
                !gone
            });
        }
        Ok(true)
    }

    /// The kernel or the route refused a GSO send to `dest`: its datagrams
    /// go one by one from now on, said once per destination. Past
    /// [`MAX_NO_GSO`] such destinations, GSO is off for all.
    fn refuse_gso(&mut self, dest: SocketAddr, e: &io::Error) {
        tracing::warn!(
            "UDP GSO to {dest} refused by the kernel ({e}); sending to it datagram by datagram"
        );
        self.stats.gso_refused = true;
        if self.no_gso.len() < MAX_NO_GSO {
            self.no_gso.push(dest);
        } else {
            self.gso = false;
        }
    }

    /// Blocks until a socket is readable (or writable, when sends wait), one
    /// of `extra` (the application's own descriptors, §3.6) is readable, or
    /// `deadline` passes. Returns which of `extra` are readable.
    pub fn wait(&mut self, deadline: Option<Instant>, extra: &[RawFd]) -> io::Result<Vec<bool>> {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(1 + self.data.len() + extra.len());
        let blocked = self.pending.front().map(|p| p.channel);
        let mut add = |fd: RawFd, out: bool| {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN | if out { libc::POLLOUT } else { 0 },
                revents: 0,
            })
        };
        add(self.control.as_raw_fd(), blocked == Some(Channel::Control));
        for (i, s) in self.data.iter().enumerate() {
            add(s.as_raw_fd(), blocked == Some(Channel::Data(i as u8)));
        }
        for &fd in extra {
            add(fd, false);
        }
        let timeout = if self.busy_poll {
            Some(std::time::Duration::ZERO)
        } else {
            deadline.map(|d| d.saturating_duration_since(Instant::now()))
        };
        sys::ppoll(&mut fds, timeout)?;
        let base = 1 + self.data.len();
        let readable = |f: &libc::pollfd| f.revents & (libc::POLLIN | libc::POLLERR) != 0;
        self.ready = Some(fds[..base].iter().map(readable).collect());
        Ok(fds[base..]
            .iter()
            .map(|f| f.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0)
            .collect())
    }

    /// One turn of the loop: receive, run timers, send. The caller then
    /// waits ([`Xudp::wait`]) until `ep.poll_timeout()`.
    pub fn turn(&mut self, ep: &mut impl Endpoint) -> io::Result<()> {
        let now = Instant::now();
        self.receive(ep, now)?;
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        self.transmit(ep, now)
    }
}

/// Hands `n` received datagrams of `rx` to `ep`, cutting GRO super-datagrams.
fn deliver(
    rx: &sys::RxBatch,
    n: usize,
    ch: Channel,
    ep: &mut impl Endpoint,
    now: Instant,
    stats: &mut XudpStats,
) -> usize {
    if n > 0 {
        stats.recv_calls += 1;
    }
    let mut count = 0;
    for i in 0..n {
        let (from, bytes, truncated, gro) = rx.datagram(i);
        if truncated {
            stats.truncated += 1;
            continue;
        }
        let Some(from) = from else {
            stats.unnamed += 1;
            continue;
        };
        if ch != Channel::Control {
            let packets = gro
                .filter(|&s| s > 0)
                .map_or(1, |s| bytes.len().div_ceil(s));
            stats.copied_bytes += (bytes.len() as u64)
                .saturating_sub((packets * strata_xport::wire::DATA_HEADER_LEN) as u64);
        }
        match gro {
            Some(seg) if seg < bytes.len() => {
                stats.gro_batches += 1;
                for d in bytes.chunks(seg) {
                    ep.handle(now, from, ch, d);
                    count += 1;
                }
            }
            _ => {
                ep.handle(now, from, ch, bytes);
                count += 1;
            }
        }
    }
    stats.datagrams_in += count as u64;
    count
}

#[cfg(test)]
mod tests;
