//! The deterministic simulator, in virtual time: a client [`Connection`]
//! sending a stream of application buffers and a [`Listener`]'s connection
//! receiving them, over a [`Path`] — this crate's [`Wire`] (delay, loss,
//! reordering, duplication, bit errors, a rate with a finite queue) or any
//! other, such as strata-link's emulator (`strata::xport_sim`). Everything
//! random comes from the scenario's seed, so a failing run is reproduced by
//! its seed. One simulator for every test of the transport: this crate's
//! (`tests/`) and the `strata` crate's, and `strata demo`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use crate::{
    Channel, Config, Connection, ConnectionError, Event, Listener, ListenerStats, Stats, Transmit,
};

/// One direction of [`Wire`].
#[derive(Clone, Debug)]
pub struct LinkSpec {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is held back by up to `reorder_by`.
    pub reorder: f64,
    /// How far a reordered datagram is held back.
    pub reorder_by: Duration,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability one bit of a datagram is flipped.
    pub bit_error: f64,
    /// Bit error rate of the wire: a datagram with an error anywhere is
    /// lost, as UDP's checksum drops it (Figure 7's errors).
    pub ber: f64,
    /// Bottleneck rate in bytes per second (0: unlimited).
    pub rate: u64,
    /// Queue in front of the bottleneck, bytes; datagrams beyond are lost.
    pub queue: u64,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            delay: Duration::from_millis(10),
            loss: 0.0,
            reorder: 0.0,
            reorder_by: Duration::from_millis(2),
            duplicate: 0.0,
            bit_error: 0.0,
            ber: 0.0,
            rate: 125_000_000,
            queue: 4 << 20,
        }
    }
}

/// What a scenario does.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Seeds the data, both connections and [`Wire`].
    pub seed: u64,
    /// Bytes of the stream.
    pub bytes: usize,
    /// Size of each application buffer handed to the sender.
    pub app_buffer: usize,
    /// Application buffers handed over at once (§3.5.2), and posted at the receiver.
    pub app_buffers: usize,
    /// The receiver's buffers, when not `app_buffer` bytes.
    pub recv_buffer: Option<usize>,
    /// Each direction of [`Wire`] (unused by [`run_on`] with another path).
    pub link: LinkSpec,
    /// The client's settings.
    pub client: Config,
    /// The server's settings.
    pub server: Config,
    /// Data sockets each end opens (§3.4).
    pub data_sockets: usize,
    /// The receiving application takes this long per buffer before posting it again.
    pub consume_delay: Duration,
    /// The receiver stops existing at this virtual time.
    pub vanish_at: Option<Duration>,
    /// Give up after this much virtual time.
    pub limit: Duration,
    /// For every real datagram, inject this many hostile ones at the same
    /// socket: a mutated copy, random bytes, from the peer's or a stranger's address.
    pub hostile: usize,
    /// A loaded host: each timer (a pacer's deadline among them) is run up
    /// to this much late, uniformly at random; datagrams are still read
    /// when they arrive.
    pub wake_late: Duration,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            seed: 1,
            bytes: 8 << 20,
            app_buffer: 1 << 20,
            app_buffers: 4,
            recv_buffer: None,
            link: LinkSpec::default(),
            client: Config::default(),
            server: Config::default(),
            data_sockets: 1,
            consume_delay: Duration::ZERO,
            vanish_at: None,
            limit: Duration::from_secs(3600),
            hostile: 0,
            wake_late: Duration::ZERO,
        }
    }
}

/// How a scenario ended.
#[derive(Debug)]
pub struct Outcome {
    /// SHA-256 of the stream as sent.
    pub sent_hash: [u8; 32],
    /// SHA-256 of what the receiver got, once the stream finished.
    pub received_hash: Option<[u8; 32]>,
    /// Bytes the receiving application got.
    pub received_bytes: u64,
    /// Virtual time from the first set-up packet to the end.
    pub elapsed: Duration,
    /// The sender's counters.
    pub client: Stats,
    /// The receiver's counters.
    pub server: Stats,
    /// Drops at the listener, before a datagram reached a connection.
    pub listener: ListenerStats,
    /// The client's connection closed, nothing lost.
    pub client_closed: bool,
    /// The server's connection closed, nothing lost.
    pub server_closed: bool,
    /// Why the client's connection ended early, if it did.
    pub client_lost: Option<ConnectionError>,
    /// Data sockets the set-up agreed.
    pub data_sockets: usize,
    /// Application buffers the sender got back.
    pub returned_buffers: usize,
    /// When half the stream had arrived (the steady state follows).
    pub half_at: Option<Duration>,
    /// When the whole stream had arrived.
    pub full_at: Option<Duration>,
    /// Data datagrams the bottleneck queue (client to server) dropped…
    pub overflows: u64,
    /// …of which while the server's receiver said it was in slow start.
    pub slow_start_overflows: u64,
}

/// A datagram between the two ends.
#[derive(Clone, Debug)]
pub struct Datagram {
    /// Client to server, or back.
    pub to_server: bool,
    /// The socket it left from.
    pub from: SocketAddr,
    /// The socket it is addressed to.
    pub to: SocketAddr,
    /// The transport's bytes: header, then payload.
    pub bytes: Vec<u8>,
}

/// The network between the two ends, both directions.
pub trait Path {
    /// `d` leaves its end at `now`; `slow_start`: the receiving end's window
    /// is in slow start (its control packets say), for counting overflows.
    fn send(&mut self, now: Duration, d: Datagram, slow_start: bool);
    /// `d` arrives at `now`, past the link (a hostile sender on the path).
    fn inject(&mut self, now: Duration, d: Datagram);
    /// When the next datagram arrives, if any is on the way.
    fn next_delivery(&self) -> Option<Duration>;
    /// The datagrams arrived by `now`; each end reads its control socket
    /// first (§3.6), which the simulator sees to.
    fn poll(&mut self, now: Duration) -> Vec<Datagram>;
    /// Data datagrams the queue toward the server dropped: all, and while
    /// the server's window was in slow start.
    fn overflows(&self) -> (u64, u64) {
        (0, 0)
    }
    /// What `SIM_TRACE` prints about the path every 100 ms.
    fn trace(&mut self) -> String {
        String::new()
    }
}

/// The addresses of the simulated ends: the client's control socket and
/// data sockets, then the server's.
pub fn addresses(data_sockets: usize) -> [(SocketAddr, Vec<SocketAddr>); 2] {
    let end = |ip: &str, base: u16| {
        let control: SocketAddr = format!("{ip}:{base}").parse().expect("address");
        let data = (1..=data_sockets as u16)
            .map(|i| SocketAddr::new(control.ip(), base + i))
            .collect();
        (control, data)
    };
    [end(CLIENT, 1000), end(SERVER, 2000)]
}

/// The client's address.
pub const CLIENT: &str = "198.18.0.1";
/// The server's address.
pub const SERVER: &str = "198.18.0.2";

/// Runs a scenario over [`Wire`] to completion (or its time limit).
pub fn run(s: &Scenario) -> Outcome {
    run_on(s, &mut Wire::new(&s.link, s.seed))
}

/// Runs a scenario over `path` to completion (or its time limit).
pub fn run_on(s: &Scenario, path: &mut dyn Path) -> Outcome {
    let t0 = Instant::now();
    let at = |d: Duration| t0 + d;
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed ^ 0x4057);
    let mut late = ChaCha8Rng::seed_from_u64(s.seed ^ 0x1a7e);
    let [(client_ctl, client_data), (server_ctl, server_data)] = addresses(s.data_sockets);
    let ports = |a: &[SocketAddr]| a.iter().map(|a| a.port()).collect::<Vec<u16>>();
    let mut client = Connection::connect(
        s.client.clone(),
        at(Duration::ZERO),
        s.seed ^ 0xc1,
        server_ctl,
        &ports(&client_data),
    );
    let mut listener = Listener::new(
        s.server.clone(),
        at(Duration::ZERO),
        s.seed ^ 0x5e,
        &ports(&server_data),
        16,
    );

    // The stream: deterministic bytes, cut into application buffers.
    let mut data = vec![0u8; s.bytes];
    ChaCha8Rng::seed_from_u64(s.seed ^ 0xda7a).fill_bytes(&mut data);
    let data = Bytes::from(data);
    let sent_hash: [u8; 32] = Sha256::digest(&data).into();
    let mut next_buf = 0usize;
    let mut outstanding = 0usize;
    let mut returned = 0usize;
    let mut finished_sending = false;

    let mut server_id: Option<u64> = None;
    let mut hasher = Sha256::new();
    let mut received = 0u64;
    let mut half_at = None;
    let mut full_at = None;
    let mut received_hash = None;
    let mut reposts: VecDeque<(Duration, Vec<u8>)> = VecDeque::new();
    let mut client_closed = false;
    let mut server_closed = false;
    let mut client_lost = None;
    let mut server_stats = Stats::default();
    let mut vanished = false;

    let mut now = Duration::ZERO;
    let mut buf = Vec::new();
    // SIM_TRACE=1: every 100 ms of virtual time, the path, the sender's
    // view and the server's own window.
    // SIM_TRACE=n: every n ms instead.
    let trace = std::env::var("SIM_TRACE").ok();
    let every = Duration::from_millis(trace.as_deref().and_then(|v| v.parse().ok()).unwrap_or(100));
    let trace = trace.is_some();
    let mut next_trace = Duration::ZERO;
    loop {
        if trace && now >= next_trace {
            let i = client.info();
            let st = client.stats();
            let server = server_id.and_then(|id| listener.connection(id));
            let (cwnd, space) = server.map_or((0, 0), |c| (c.info().cwnd, c.recv_space()));
            eprintln!(
                "{:>6} ms: {} {} peer_cwnd {:>5} cwnd {:>5} in_flight {:>5} unacked {:>8} srtt {:?} recv {:>9} resent {} cuts {} space {}",
                now.as_millis(),
                path.trace(),
                if client.peer_in_slow_start() {
                    "ss"
                } else {
                    "  "
                },
                i.peer_cwnd,
                cwnd,
                i.in_flight,
                i.unacked,
                i.srtt,
                received,
                st.retransmitted,
                server_stats.congestion_cuts,
                space,
            );
            next_trace = now + every;
        }
        if let Some(v) = s.vanish_at
            && now >= v
        {
            vanished = true;
        }
        // Application: buffers given back first, so that the sender refills
        // at once.
        while let Some(e) = client.poll_event() {
            match e {
                Event::SendDone { .. } => {
                    outstanding -= 1;
                    returned += 1;
                }
                Event::Closed => client_closed = true,
                Event::Lost(e) => client_lost = Some(e),
                Event::Connected | Event::Finished | Event::Received { .. } => {}
            }
        }
        // Application: the sender keeps `app_buffers` buffers handed over.
        if client.state() == crate::State::Established {
            while outstanding < s.app_buffers && next_buf < data.len() {
                let end = (next_buf + s.app_buffer).min(data.len());
                if client.send(data.slice(next_buf..end)).is_none() {
                    break;
                }
                next_buf = end;
                outstanding += 1;
            }
            if next_buf == data.len() && !finished_sending {
                client.finish();
                finished_sending = true;
            }
        }
        if server_id.is_none()
            && let Some(id) = listener.accept()
        {
            server_id = Some(id);
            if let Some(c) = listener.connection(id) {
                for _ in 0..s.app_buffers {
                    c.post_recv(vec![0u8; s.recv_buffer.unwrap_or(s.app_buffer)]);
                }
                c.finish();
            }
        }
        while let Some((t, _)) = reposts.front() {
            if *t > now {
                break;
            }
            let Some((_, b)) = reposts.pop_front() else {
                break;
            };
            if let Some(c) = server_id.and_then(|id| listener.connection(id)) {
                c.post_recv(b);
            }
        }
        if let Some(c) = server_id.and_then(|id| listener.connection(id)) {
            while let Some(e) = c.poll_event() {
                match e {
                    Event::Received { buf: b, len, .. } => {
                        hasher.update(&b[..len]);
                        received += len as u64;
                        if half_at.is_none() && received * 2 >= s.bytes as u64 {
                            half_at = Some(now);
                        }
                        if received == s.bytes as u64 {
                            full_at = Some(now);
                        }
                        reposts.push_back((now + s.consume_delay, b));
                    }
                    Event::Finished => {
                        received_hash = Some(std::mem::take(&mut hasher).finalize().into());
                    }
                    Event::Closed => server_closed = true,
                    _ => {}
                }
            }
            server_stats = c.stats().clone();
        }

        // Transmissions onto the path, with `hostile` forgeries beside each.
        let mut leave = |to_server: bool, t: Transmit, buf: &[u8], slow_start: bool| {
            let ends = [(client_ctl, &client_data), (server_ctl, &server_data)];
            let (control, data) = ends[usize::from(!to_server)];
            let from = match t.channel {
                Channel::Control => control,
                Channel::Data(i) => data[usize::from(i)],
            };
            let mut d = buf.to_vec();
            d.extend_from_slice(&t.payload);
            for _ in 0..s.hostile {
                let (from, forged) = hostile(&mut rng, from, &d);
                path.inject(now, datagram(to_server, from, t.dest, forged));
            }
            path.send(now, datagram(to_server, from, t.dest, d), slow_start);
        };
        while let Some(t) = client.poll_transmit(at(now), &mut buf) {
            leave(true, t, &buf, client.peer_in_slow_start());
        }
        while let Some(t) = (!vanished)
            .then(|| listener.poll_transmit(at(now), &mut buf))
            .flatten()
        {
            leave(false, t, &buf, false);
        }

        let done = (client_closed && (server_closed || vanished)) || client_lost.is_some();
        if done || now >= s.limit {
            break;
        }
        // Next instant: a delivery or a deadline.
        let mut next = path.next_delivery();
        for t in [
            client.poll_timeout(),
            if vanished {
                None
            } else {
                listener.poll_timeout()
            },
        ]
        .into_iter()
        .flatten()
        {
            let mut d = t.saturating_duration_since(t0);
            if !s.wake_late.is_zero() {
                d += s.wake_late.mul_f64(late.random::<f64>());
            }
            next = Some(next.map_or(d, |n| n.min(d)));
        }
        if let Some(&(d, _)) = reposts.front() {
            next = Some(next.map_or(d, |n| n.min(d)));
        }
        let Some(next) = next else { break };
        now = now.max(next);
        // Control sockets are read before data sockets (§3.6).
        let mut due = path.poll(now);
        due.sort_by_key(|d| channel(d) != Channel::Control);
        for d in due {
            let ch = channel(&d);
            if d.to_server {
                if !vanished {
                    listener.handle(at(now), d.from, ch, &d.bytes);
                }
            } else {
                client.handle(at(now), d.from, ch, &d.bytes);
            }
        }
        if client.poll_timeout().is_some_and(|t| t <= at(now)) {
            client.handle_timeout(at(now));
        }
        if !vanished && listener.poll_timeout().is_some_and(|t| t <= at(now)) {
            listener.handle_timeout(at(now));
        }
    }
    let (overflows, slow_start_overflows) = path.overflows();
    Outcome {
        sent_hash,
        received_hash,
        received_bytes: received,
        elapsed: now,
        client: client.stats().clone(),
        server: server_stats,
        listener: listener.stats().clone(),
        client_closed,
        server_closed,
        client_lost,
        data_sockets: client.data_sockets(),
        returned_buffers: returned,
        half_at,
        full_at,
        overflows,
        slow_start_overflows,
    }
}

fn datagram(to_server: bool, from: SocketAddr, to: SocketAddr, bytes: Vec<u8>) -> Datagram {
    Datagram {
        to_server,
        from,
        to,
        bytes,
    }
}

/// The socket a datagram reaches: each end's control port ends in 000.
fn channel(d: &Datagram) -> Channel {
    let data = d.to.port() % 1000;
    if data == 0 {
        Channel::Control
    } else {
        Channel::Data((data - 1) as u8)
    }
}

/// A hostile datagram modelled on `real`: a copy with a few bytes changed,
/// a truncated copy, or random bytes; from `from` or from a stranger.
fn hostile(rng: &mut ChaCha8Rng, from: SocketAddr, real: &[u8]) -> (SocketAddr, Vec<u8>) {
    let from = if rng.random_bool(0.5) {
        from
    } else {
        "198.18.9.9:666".parse().expect("address")
    };
    let mut d = real.to_vec();
    match rng.random_range(0..3) {
        0 => {
            // One byte: XTP's checksum (XOR and rotated XOR of 16-bit words)
            // catches every single-byte change, but not two equal changes 32
            // bytes apart (the rotation's period) — a forger who knows that
            // passes it, as one who recomputes it would (tests/hostile.rs).
            let i = rng.random_range(0..d.len());
            d[i] ^= rng.random_range(1..=255u8);
        }
        1 => d.truncate(rng.random_range(0..d.len())),
        _ => {
            d = vec![0u8; rng.random_range(0..1500)];
            rng.fill_bytes(&mut d);
        }
    }
    (from, d)
}

/// A datagram on its way, in arrival order (ties: in order sent).
struct Flight {
    at: Duration,
    n: u64,
    d: Datagram,
}

impl PartialEq for Flight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.n) == (o.at, o.n)
    }
}
impl Eq for Flight {}
impl PartialOrd for Flight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Flight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.n).cmp(&(o.at, o.n))
    }
}

struct Direction {
    spec: LinkSpec,
    busy_until: Duration,
    /// Smallest and largest backlog met by a datagram since the last trace, bytes.
    seen: (f64, f64),
    /// Datagrams lost to the full queue: all, and in slow start.
    overflows: (u64, u64),
}

/// This crate's path: each direction a queue in front of a rate, then
/// delay, loss, bit errors, reordering and duplication, from one seeded
/// random stream.
pub struct Wire {
    dirs: [Direction; 2],
    rng: ChaCha8Rng,
    heap: BinaryHeap<Reverse<Flight>>,
    n: u64,
}

impl Wire {
    /// `spec` each way, random choices from `seed`.
    pub fn new(spec: &LinkSpec, seed: u64) -> Wire {
        let dir = || Direction {
            spec: spec.clone(),
            busy_until: Duration::ZERO,
            seen: (f64::MAX, 0.0),
            overflows: (0, 0),
        };
        Wire {
            dirs: [dir(), dir()],
            rng: ChaCha8Rng::seed_from_u64(seed),
            heap: BinaryHeap::new(),
            n: 0,
        }
    }

    fn push(&mut self, at: Duration, d: Datagram) {
        self.n += 1;
        self.heap.push(Reverse(Flight { at, n: self.n, d }));
    }
}

impl Path for Wire {
    fn send(&mut self, now: Duration, mut d: Datagram, slow_start: bool) {
        let rng = &mut self.rng;
        let link = &mut self.dirs[usize::from(!d.to_server)];
        let spec = &link.spec;
        // The bottleneck: serialise at `rate`, lose what overflows the queue.
        let mut depart = now;
        if spec.rate > 0 {
            let start = link.busy_until.max(now);
            let backlog = (start - now).as_secs_f64() * spec.rate as f64;
            link.seen = (link.seen.0.min(backlog), link.seen.1.max(backlog));
            if backlog > spec.queue as f64 {
                link.overflows.0 += 1;
                link.overflows.1 += u64::from(slow_start);
                return;
            }
            depart = start + Duration::from_secs_f64(d.bytes.len() as f64 / spec.rate as f64);
            link.busy_until = depart;
        }
        if rng.random_bool(spec.loss) {
            return;
        }
        let bits = d.bytes.len() as f64 * 8.0;
        if spec.ber > 0.0 && rng.random_bool(1.0 - (1.0 - spec.ber).powf(bits)) {
            return;
        }
        if rng.random_bool(spec.bit_error) && !d.bytes.is_empty() {
            let bit = rng.random_range(0..d.bytes.len() * 8);
            d.bytes[bit / 8] ^= 1 << (bit % 8);
        }
        let mut at = depart + spec.delay;
        if rng.random_bool(spec.reorder) {
            at += Duration::from_secs_f64(rng.random::<f64>() * spec.reorder_by.as_secs_f64());
        }
        if rng.random_bool(spec.duplicate) {
            self.push(at, d.clone());
        }
        self.push(at, d);
    }

    fn inject(&mut self, now: Duration, d: Datagram) {
        self.push(now, d);
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.heap.peek().map(|Reverse(f)| f.at)
    }

    fn poll(&mut self, now: Duration) -> Vec<Datagram> {
        let mut due = Vec::new();
        while self.heap.peek().is_some_and(|Reverse(f)| f.at <= now) {
            if let Some(Reverse(f)) = self.heap.pop() {
                due.push(f.d);
            }
        }
        due
    }

    fn overflows(&self) -> (u64, u64) {
        self.dirs[0].overflows
    }

    fn trace(&mut self) -> String {
        let net = self
            .heap
            .iter()
            .filter(|Reverse(f)| f.d.to_server && channel(&f.d) != Channel::Control)
            .count();
        let seen = &mut self.dirs[0].seen;
        let min = if seen.0 == f64::MAX { 0.0 } else { seen.0 };
        let s = format!("net {net:>5} queue {min:.0}..{:.0}", seen.1);
        *seen = (f64::MAX, 0.0);
        s
    }
}

/// Asserts a scenario moved the whole stream intact and closed cleanly.
pub fn assert_intact(s: &Scenario) -> Outcome {
    let o = run(s);
    assert_eq!(o.client_lost, None, "connection lost: {o:#?}");
    assert_eq!(o.received_bytes, s.bytes as u64, "{o:#?}");
    assert_eq!(o.received_hash, Some(o.sent_hash), "SHA-256 differs");
    assert!(o.client_closed && o.server_closed, "not closed: {o:#?}");
    assert_eq!(
        o.returned_buffers,
        s.bytes.div_ceil(s.app_buffer),
        "buffers not all given back"
    );
    o
}
