//! A deterministic simulator for the transport: virtual time, a lossy link
//! each way (delay, loss, reordering, duplication, bit errors, a rate with a
//! finite queue), a client [`Connection`] sending a stream of application
//! buffers and a [`Listener`]'s connection receiving them. Everything random
//! comes from one seed, so a failing run is reproduced by its seed.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use strata_xport::{Channel, Config, Connection, ConnectionError, Event, Listener, Stats};

/// One direction of the emulated path.
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
    pub seed: u64,
    pub bytes: usize,
    pub app_buffer: usize,
    pub app_buffers: usize,
    /// The receiver's buffers, when not `app_buffer` bytes.
    pub recv_buffer: Option<usize>,
    pub link: LinkSpec,
    pub client: Config,
    pub server: Config,
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
    pub sent_hash: [u8; 32],
    pub received_hash: Option<[u8; 32]>,
    pub received_bytes: u64,
    pub elapsed: Duration,
    pub client: Stats,
    pub server: Stats,
    /// Drops at the listener, before a datagram reached a connection.
    pub listener: strata_xport::ListenerStats,
    pub client_closed: bool,
    pub server_closed: bool,
    pub client_lost: Option<ConnectionError>,
    pub data_sockets: usize,
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

struct Flight {
    at: Duration,
    n: u64,
    to_server: bool,
    from: SocketAddr,
    channel_kind: Channel,
    bytes: Vec<u8>,
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

struct Link {
    spec: LinkSpec,
    busy_until: Duration,
    /// Smallest and largest backlog met by a datagram since the last trace, bytes.
    seen: (f64, f64),
    /// Datagrams lost to the full queue: all, and while the sender's peer
    /// was in slow start.
    overflows: (u64, u64),
}

pub const CLIENT: &str = "198.18.0.1";
pub const SERVER: &str = "198.18.0.2";

/// Runs a scenario to completion (or its time limit).
pub fn run(s: &Scenario) -> Outcome {
    let t0 = Instant::now();
    let at = |d: Duration| t0 + d;
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed);
    let mut late = ChaCha8Rng::seed_from_u64(s.seed ^ 0x1a7e);
    let server_ctl: SocketAddr = format!("{SERVER}:2000").parse().unwrap();
    let client_ports: Vec<u16> = (0..s.data_sockets as u16).map(|i| 1001 + i).collect();
    let server_ports: Vec<u16> = (0..s.data_sockets as u16).map(|i| 2001 + i).collect();
    let client_ctl: SocketAddr = format!("{CLIENT}:1000").parse().unwrap();
    let mut client = Connection::connect(
        s.client.clone(),
        at(Duration::ZERO),
        s.seed ^ 0xc1,
        server_ctl,
        &client_ports,
    );
    let mut listener = Listener::new(
        s.server.clone(),
        at(Duration::ZERO),
        s.seed ^ 0x5e,
        &server_ports,
        16,
    );
    let mut links = [
        Link {
            spec: s.link.clone(),
            busy_until: Duration::ZERO,
            seen: (f64::MAX, 0.0),
            overflows: (0, 0),
        },
        Link {
            spec: s.link.clone(),
            busy_until: Duration::ZERO,
            seen: (f64::MAX, 0.0),
            overflows: (0, 0),
        },
    ];
    let mut heap: BinaryHeap<Reverse<Flight>> = BinaryHeap::new();
    let mut n = 0u64;

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
    // SIM_TRACE=1: every 100 ms of virtual time, the data packets on the
    // way to the server (queued or in flight), the sender's view and the
    // server's own window.
    let trace = std::env::var_os("SIM_TRACE").is_some();
    let mut next_trace = Duration::ZERO;
    loop {
        if trace && now >= next_trace {
            let i = client.info();
            let st = client.stats();
            eprintln!(
                "{:>6} ms: net {:>5} {} peer_cwnd {:>5} cwnd {:>5} in_flight {:>5} unacked {:>8} srtt {:?} recv {:>9} resent {} cuts {} space {} queue {:.0}..{:.0}",
                now.as_millis(),
                heap.iter()
                    .filter(|Reverse(f)| f.to_server && f.channel_kind != Channel::Control)
                    .count(),
                if client.peer_in_slow_start() {
                    "ss"
                } else {
                    "  "
                },
                i.peer_cwnd,
                server_id
                    .and_then(|id| listener.connection(id))
                    .map_or(0, |c| c.info().cwnd),
                i.in_flight,
                i.unacked,
                i.srtt,
                received,
                st.retransmitted,
                server_stats.congestion_cuts,
                server_id
                    .and_then(|id| listener.connection(id))
                    .map_or(0, |c| c.recv_space()),
                if links[0].seen.0 == f64::MAX {
                    0.0
                } else {
                    links[0].seen.0
                },
                links[0].seen.1,
            );
            links[0].seen = (f64::MAX, 0.0);
            next_trace = now + Duration::from_millis(100);
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
        if client.state() == strata_xport::State::Established {
            while outstanding < s.app_buffers && next_buf < data.len() {
                let end = (next_buf + s.app_buffer).min(data.len());
                client
                    .send(data.slice(next_buf..end))
                    .expect("send accepted");
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
            let c = listener.connection(id).unwrap();
            for _ in 0..s.app_buffers {
                c.post_recv(vec![0u8; s.recv_buffer.unwrap_or(s.app_buffer)]);
            }
            c.finish();
        }
        while let Some((t, _)) = reposts.front() {
            if *t > now {
                break;
            }
            let (_, b) = reposts.pop_front().unwrap();
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

        // Transmissions onto the links.
        while let Some(t) = client.poll_transmit(at(now), &mut buf) {
            let mut d = buf.clone();
            d.extend_from_slice(&t.payload);
            let from = match t.channel {
                Channel::Control => client_ctl,
                Channel::Data(i) => SocketAddr::new(client_ctl.ip(), client_ports[i as usize]),
            };
            let ch = channel_at(t.dest, server_ctl);
            for _ in 0..s.hostile {
                let (from, forged) = hostile(&mut rng, from, &d);
                n += 1;
                heap.push(Reverse(Flight {
                    at: now,
                    n,
                    to_server: true,
                    from,
                    channel_kind: ch,
                    bytes: forged,
                }));
            }
            let slow_start = client.peer_in_slow_start();
            enqueue(
                &mut links[0],
                slow_start,
                &mut rng,
                &mut heap,
                &mut n,
                now,
                true,
                from,
                ch,
                d,
            );
        }
        if !vanished {
            while let Some(t) = listener.poll_transmit(at(now), &mut buf) {
                let mut d = buf.clone();
                d.extend_from_slice(&t.payload);
                let from = match t.channel {
                    Channel::Control => server_ctl,
                    Channel::Data(i) => SocketAddr::new(server_ctl.ip(), server_ports[i as usize]),
                };
                let ch = channel_at(t.dest, client_ctl);
                for _ in 0..s.hostile {
                    let (from, forged) = hostile(&mut rng, from, &d);
                    n += 1;
                    heap.push(Reverse(Flight {
                        at: now,
                        n,
                        to_server: false,
                        from,
                        channel_kind: ch,
                        bytes: forged,
                    }));
                }
                enqueue(
                    &mut links[1],
                    false,
                    &mut rng,
                    &mut heap,
                    &mut n,
                    now,
                    false,
                    from,
                    ch,
                    d,
                );
            }
        }

        let done = (client_closed && (server_closed || vanished)) || client_lost.is_some();
        if done || now >= s.limit {
            break;
        }
        // Next instant: a delivery or a deadline.
        let mut next = heap.peek().map(|Reverse(f)| f.at);
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
        if !reposts.is_empty() {
            let d = reposts.front().unwrap().0;
            next = Some(next.map_or(d, |n| n.min(d)));
        }
        let Some(next) = next else { break };
        now = now.max(next);
        // Control sockets are read before data sockets (§3.6).
        let mut due: Vec<Flight> = Vec::new();
        while heap.peek().is_some_and(|Reverse(f)| f.at <= now) {
            due.push(heap.pop().unwrap().0);
        }
        due.sort_by_key(|f| (f.channel_kind != Channel::Control, f.n));
        for f in due {
            if f.to_server {
                if !vanished {
                    listener.handle(at(now), f.from, f.channel_kind, &f.bytes);
                }
            } else {
                client.handle(at(now), f.from, f.channel_kind, &f.bytes);
            }
        }
        if client.poll_timeout().is_some_and(|t| t <= at(now)) {
            client.handle_timeout(at(now));
        }
        if !vanished && listener.poll_timeout().is_some_and(|t| t <= at(now)) {
            listener.handle_timeout(at(now));
        }
    }
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
        overflows: links[0].overflows.0,
        slow_start_overflows: links[0].overflows.1,
    }
}

/// A hostile datagram modelled on `real`: a copy with a few bytes changed,
/// a truncated copy, or random bytes; from `from` or from a stranger.
fn hostile(rng: &mut ChaCha8Rng, from: SocketAddr, real: &[u8]) -> (SocketAddr, Vec<u8>) {
    let from = if rng.random_bool(0.5) {
        from
    } else {
        "198.18.9.9:666".parse().unwrap()
    };
    let mut d = real.to_vec();
    match rng.random_range(0..3) {
        0 => {
            // One byte: XTP's checksum (XOR and rotated XOR of 16-bit words)
            // catches every single-byte change, but not two equal changes 32
            // bytes apart (the rotation's period) — a forger who knows that
            // passes it, as one who recomputes it would (see hostile.rs).
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

fn channel_at(dest: SocketAddr, control: SocketAddr) -> Channel {
    if dest == control {
        Channel::Control
    } else {
        Channel::Data(0)
    }
}

#[allow(clippy::too_many_arguments)]
fn enqueue(
    link: &mut Link,
    slow_start: bool,
    rng: &mut ChaCha8Rng,
    heap: &mut BinaryHeap<Reverse<Flight>>,
    n: &mut u64,
    now: Duration,
    to_server: bool,
    from: SocketAddr,
    channel_kind: Channel,
    mut bytes: Vec<u8>,
) {
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
        depart = start + Duration::from_secs_f64(bytes.len() as f64 / spec.rate as f64);
        link.busy_until = depart;
    }
    if rng.random_bool(spec.loss) {
        return;
    }
    if spec.ber > 0.0 && rng.random_bool(1.0 - (1.0 - spec.ber).powf(bytes.len() as f64 * 8.0)) {
        return;
    }
    if rng.random_bool(spec.bit_error) && !bytes.is_empty() {
        let bit = rng.random_range(0..bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
    }
    let mut at = depart + spec.delay;
    if rng.random_bool(spec.reorder) {
        at += Duration::from_secs_f64(rng.random::<f64>() * spec.reorder_by.as_secs_f64());
    }
    let copies = if rng.random_bool(spec.duplicate) {
        2
    } else {
        1
    };
    for _ in 0..copies {
        *n += 1;
        heap.push(Reverse(Flight {
            at,
            n: *n,
            to_server,
            from,
            channel_kind,
            bytes: bytes.clone(),
        }));
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
