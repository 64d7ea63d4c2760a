//! The server side of the set-up (§2.1), safe on an open network: a first
//! `CONNECT` gets a stateless `RETRY` with a cookie, smaller than the
//! `CONNECT` itself (no amplification); only a `CONNECT` echoing a valid
//! cookie makes a connection, and at most `max_pending` connections wait for
//! confirmation or for the application to accept them — a flood of forged
//! set-ups is answered, counted and refused without growing memory.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::config::{Config, max_payload};
use crate::conn::{Channel, Connection, State, Transmit};
use crate::cookie::CookieJar;
use crate::endpoint::RxTargets;
use crate::stats::{DropReason, Drops};
use crate::wire::{COOKIE_LEN, DataRepr, Packet, Repr, SetupRepr};

/// How long a cookie's time bucket lasts (a cookie lives one or two).
const COOKIE_PERIOD: Duration = Duration::from_secs(8);
/// `RETRY`s waiting to leave, at most (more are dropped and counted).
const RETRY_QUEUE: usize = 256;

/// A listener's own counters (each connection has its [`crate::Stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// `RETRY`s sent.
    pub retries: u64,
    /// `RETRY`s not sent because the queue was full.
    pub retries_dropped: u64,
    /// Connections made (cookie echoed).
    pub created: u64,
    /// Set-ups refused because `max_pending` were waiting.
    pub refused: u64,
    /// Datagrams dropped before reaching a connection.
    pub drops: Drops,
}

/// Accepts connections on one control socket and its data sockets.
pub struct Listener {
    config: Config,
    max_pending: usize,
    epoch: Instant,
    rng: ChaCha8Rng,
    jar: CookieJar,
    data_ports: Vec<u16>,
    conns: FxHashMap<u64, Connection>,
    order: Vec<u64>,
    cursor: usize,
    by_peer: FxHashMap<(SocketAddr, u64), u64>,
    announced: FxHashSet<u64>,
    accept_queue: VecDeque<u64>,
    retries: VecDeque<(SocketAddr, u64, [u8; COOKIE_LEN])>,
    stats: ListenerStats,
    /// The connection that last took a data packet: where the data sockets'
    /// next packets are expected (`rx_targets`).
    last_data: Option<u64>,
    /// The payload the path to a client carries whole, asked at its set-up
    /// ([`Listener::fit_paths`]).
    path_payload: Option<PathPayload>,
    /// A peer whose address is proven another way ([`Listener::expect`]).
    expected: Option<std::net::IpAddr>,
    /// No new connections ([`Listener::stop_accepting`]).
    stopped: bool,
}

/// What [`Listener::fit_paths`] asks: the data payload that fills the path
/// to a client and no more (`None`: the configured MSS).
pub type PathPayload = Box<dyn FnMut(SocketAddr) -> Option<u32> + Send>;

impl Listener {
    /// A listener whose data sockets have `data_ports`; `seed` feeds the
    /// cookie keys, connection ids and sequence numbers.
    pub fn new(
        config: Config,
        now: Instant,
        seed: u64,
        data_ports: &[u16],
        max_pending: usize,
    ) -> Listener {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let keys = [[rng.random(), rng.random()], [rng.random(), rng.random()]];
        let mut ports: Vec<u16> = data_ports
            .iter()
            .copied()
            .take(crate::wire::MAX_DATA_SOCKETS)
            .collect();
        if ports.is_empty() {
            ports.push(0);
        }
        Listener {
            config,
            max_pending: max_pending.max(1),
            epoch: now,
            rng,
            jar: CookieJar::new(keys),
            data_ports: ports,
            conns: FxHashMap::default(),
            order: Vec::new(),
            cursor: 0,
            by_peer: FxHashMap::default(),
            announced: FxHashSet::default(),
            accept_queue: VecDeque::new(),
            retries: VecDeque::new(),
            stats: ListenerStats::default(),
            last_data: None,
            path_payload: None,
            expected: None,
            stopped: false,
        }
    }

    /// Takes no new connections, while those accepted go on (the
    /// application closed its listener but not its connections): a
    /// `CONNECT` that does not repeat a set-up already made is dropped
    /// ([`DropReason::Unexpected`]) without a `RETRY`, and the set-ups not
    /// yet taken by [`Listener::accept`] are reset (then forgotten by
    /// [`Listener::handle_timeout`]).
    pub fn stop_accepting(&mut self) {
        self.stopped = true;
        for id in self.accept_queue.drain(..) {
            self.announced.remove(&id);
        }
        for (id, c) in self.conns.iter_mut() {
            if !self.announced.contains(id) {
                c.abort();
            }
        }
    }

    /// Takes a first `CONNECT` from `ip` without the cookie round trip:
    /// for a listener that serves one peer whose address another
    /// connection has proven (FTP's `XPSV`: the control connection's TCP
    /// peer). Nothing else changes: the `ACCEPT` is smaller than the
    /// `CONNECT` (no amplification), no data leaves before the client
    /// answers it (so before it has shown it receives at its address), and
    /// pending set-ups stay bounded.
    pub fn expect(&mut self, ip: std::net::IpAddr) {
        self.expected = Some(ip);
    }

    /// Fits each connection's payload to the path to its client: `f` is
    /// asked at each (cookie-checked) set-up, and the connection announces
    /// and sends no more than it says — below the configured MSS, and the
    /// client's own announcement (the smaller of both ends' is used).
    pub fn fit_paths(&mut self, f: PathPayload) {
        self.path_payload = Some(f);
    }

    /// Counters.
    pub fn stats(&self) -> &ListenerStats {
        &self.stats
    }

    /// A confirmed connection not yet taken, by id.
    pub fn accept(&mut self) -> Option<u64> {
        self.accept_queue.pop_front()
    }

    /// A connection by id.
    pub fn connection(&mut self, id: u64) -> Option<&mut Connection> {
        self.conns.get_mut(&id)
    }

    /// Forgets a connection (after its `Closed` or `Lost` event).
    pub fn remove(&mut self, id: u64) -> Option<Connection> {
        let c = self.conns.remove(&id)?;
        self.order.retain(|&o| o != id);
        self.by_peer.retain(|_, v| *v != id);
        self.announced.remove(&id);
        Some(c)
    }

    /// Connections held (pending, accepted or closed but not removed).
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether no connection is held.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    fn bucket(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.epoch).as_secs() / COOKIE_PERIOD.as_secs()) as u32
    }

    fn pending(&self) -> usize {
        self.conns.len() - (self.announced.len() - self.accept_queue.len())
    }

    /// Feeds a datagram received on `channel` from `from`; returns the
    /// reason it was dropped, if it was (also counted, here or in the
    /// connection it was routed to).
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        datagram: &[u8],
    ) -> Option<DropReason> {
        let p = match Packet::new_checked(datagram) {
            Ok(p) => p,
            Err(e) => return self.drop(e.into()),
        };
        if p.kind().is_control() != (channel == Channel::Control) {
            return self.drop(DropReason::WrongChannel);
        }
        let repr = match Repr::parse(&p) {
            Ok(r) => r,
            Err(e) => return self.drop(e.into()),
        };
        let to = match &repr {
            Repr::Connect { setup, cookie } => {
                let (setup, cookie) = (setup.clone(), *cookie);
                return self.on_connect(now, from, setup, cookie);
            }
            Repr::Retry { .. } | Repr::Accept { .. } => {
                return self.drop(DropReason::Unexpected);
            }
            Repr::Control(c) => c.to,
            Repr::Data(d) => d.to,
            Repr::Reset { to, .. } => *to,
        };
        let data = matches!(repr, Repr::Data(_));
        let Some(conn) = self.conns.get_mut(&to) else {
            return self.drop(DropReason::UnknownConnection);
        };
        let verdict = conn.handle_repr(now, from, repr, Some(p.payload())).err();
        self.routed(to, data, verdict)
    }

    /// Counts a routed packet's verdict and queues a newly confirmed
    /// connection for `accept`.
    fn routed(&mut self, to: u64, data: bool, verdict: Option<DropReason>) -> Option<DropReason> {
        let Some(conn) = self.conns.get_mut(&to) else {
            return verdict;
        };
        if let Some(r) = verdict {
            conn.count_drop(r);
        } else if data {
            self.last_data = Some(to);
        }
        if conn.confirmed() && self.announced.insert(to) {
            self.accept_queue.push_back(to);
        }
        verdict
    }

    /// Where the next data packets of `channel` are expected: in the
    /// buffers of the connection that took the last one (see
    /// [`Connection::rx_targets`]).
    pub fn rx_targets(&mut self, channel: Channel, max: usize) -> Option<RxTargets<'_>> {
        let id = self.last_data?;
        self.conns.get_mut(&id)?.rx_targets(channel, max)
    }

    /// A data packet whose payload a driver received straight into the
    /// buffers of the connection its header names (see
    /// [`Connection::handle_placed`]); routed and counted like
    /// [`Listener::handle`].
    pub fn handle_placed(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        len: usize,
    ) -> Option<DropReason> {
        self.route_data(channel, header, len, |conn, d| {
            conn.on_placed(now, from, d, header)
        })
    }

    /// A data packet in two pieces, header and payload (see
    /// [`Connection::handle_split`]); routed and counted like
    /// [`Listener::handle`].
    pub fn handle_split(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        header: &[u8],
        payload: &[u8],
    ) -> Option<DropReason> {
        self.route_data(channel, header, payload.len(), |conn, d| {
            conn.on_split(now, from, d, header, payload)
        })
    }

    /// A data packet whose header came apart from its `len` payload bytes:
    /// the header checked, the packet routed to the connection it names and
    /// fed to it by `feed`, counted like [`Listener::handle`].
    fn route_data(
        &mut self,
        channel: Channel,
        header: &[u8],
        len: usize,
        feed: impl FnOnce(&mut Connection, DataRepr) -> Result<(), DropReason>,
    ) -> Option<DropReason> {
        let d = match crate::conn::placed_header(channel, header, len) {
            Ok(d) => d,
            Err(r) => return self.drop(r),
        };
        let to = d.to;
        let Some(conn) = self.conns.get_mut(&to) else {
            return self.drop(DropReason::UnknownConnection);
        };
        let verdict = feed(conn, d).err();
        self.routed(to, true, verdict)
    }

    fn drop(&mut self, r: DropReason) -> Option<DropReason> {
        self.stats.drops.count(r);
        Some(r)
    }

    fn on_connect(
        &mut self,
        now: Instant,
        from: SocketAddr,
        setup: SetupRepr,
        cookie: [u8; COOKIE_LEN],
    ) -> Option<DropReason> {
        if self.stopped && !self.by_peer.contains_key(&(from, setup.own_id)) {
            return self.drop(DropReason::Unexpected);
        }
        let bucket = self.bucket(now);
        let proven = self.expected == Some(from.ip()) && cookie == [0; COOKIE_LEN];
        if !proven && !self.jar.check(&cookie, bucket, from, setup.own_id) {
            // A first CONNECT carries no cookie and is answered, not
            // dropped; a wrong cookie is dropped and answered all the same.
            let verdict = if cookie != [0; COOKIE_LEN] {
                self.drop(DropReason::BadCookie)
            } else {
                None
            };
            if self.retries.len() >= RETRY_QUEUE {
                self.stats.retries_dropped += 1;
                return verdict;
            }
            let c = self.jar.make(bucket, from, setup.own_id);
            self.retries.push_back((from, setup.own_id, c));
            return verdict;
        }
        if let Some(id) = self.by_peer.get(&(from, setup.own_id)) {
            if let Some(c) = self.conns.get_mut(id) {
                c.resend_accept();
            }
            return None;
        }
        if self.pending() >= self.max_pending {
            self.stats.refused += 1;
            return self.drop(DropReason::PendingFull);
        }
        let mut own_id = self.rng.random_range(1..=u64::MAX);
        while self.conns.contains_key(&own_id) {
            own_id = self.rng.random_range(1..=u64::MAX);
        }
        let n = setup.data_ports.len().min(self.data_ports.len());
        let mut config = self.config.clone();
        if let Some(p) = self.path_payload.as_mut().and_then(|f| f(from)) {
            config.mss = config.mss.min(p.max(1));
        }
        let ours = SetupRepr {
            own_id,
            isn: self.rng.random(),
            app_buffer: setup.app_buffer.min(self.config.app_buffer),
            socket_buffer: self.config.socket_buffer,
            max_payload: max_payload(&config),
            data_checksum: self.config.data_checksum,
            data_ports: self.data_ports[..n].to_vec(),
        };
        let conn = Connection::accept(config, now, from, &setup, ours);
        self.conns.insert(own_id, conn);
        self.order.push(own_id);
        self.by_peer.insert((from, setup.own_id), own_id);
        self.stats.created += 1;
        None
    }

    /// The next datagram to send (`RETRY`s first, then the connections in
    /// turn), its header written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        if let Some((dest, to, cookie)) = self.retries.pop_front() {
            Repr::Retry { to, cookie }.emit(buf, []);
            self.stats.retries += 1;
            return Some(Transmit {
                dest,
                channel: Channel::Control,
                payload: bytes::Bytes::new(),
            });
        }
        for _ in 0..self.order.len() {
            self.cursor = (self.cursor + 1) % self.order.len();
            let id = self.order[self.cursor];
            if let Some(t) = self
                .conns
                .get_mut(&id)
                .and_then(|c| c.poll_transmit(now, buf))
            {
                return Some(t);
            }
        }
        None
    }

    /// The earliest deadline of any connection.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.retries.is_empty() {
            return Some(self.epoch);
        }
        self.conns
            .values()
            .filter_map(Connection::poll_timeout)
            .min()
    }

    /// Runs every connection's timers; connections that died before being
    /// accepted are forgotten.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut dead = Vec::new();
        for (&id, c) in self.conns.iter_mut() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            if c.state() == State::Closed && !self.announced.contains(&id) {
                dead.push(id);
            }
        }
        for id in dead {
            self.remove(id);
        }
    }
}
