//! A connection, sans-I/O: datagrams and the time in, datagrams and the next
//! deadline out (the quinn-proto pattern). No sockets, clocks or threads: a
//! driver — kernel UDP, Strata's own stack, the simulator — moves the bytes.
//!
//! Driving it:
//!
//! 1. feed every datagram received with [`Connection::handle`], saying which
//!    socket it came on ([`Channel`]); read control sockets first (§3.6);
//! 2. call [`Connection::poll_transmit`] until it returns `None`, sending
//!    each [`Transmit`] (the header written into the caller's buffer, then
//!    the payload — a slice of the application's buffer) from the socket it
//!    names;
//! 3. take [`Connection::poll_event`]s;
//! 4. sleep until [`Connection::poll_timeout`] or the next datagram, then
//!    call [`Connection::handle_timeout`] and go to 2.

mod place;
pub(crate) use place::placed_header;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{Config, full_payload, max_payload};
use crate::rate::{Pacer, Rtt, rate};
use crate::recv::Receiver;
use crate::send::{BufId, Sender};
use crate::stats::{DropReason, Stats};
use crate::window::Window;
use crate::wire::{COOKIE_LEN, DataRepr, Packet, Repr, SetupRepr, flags};

/// The socket a datagram arrived on or leaves from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    /// The control socket.
    Control,
    /// Data socket number `i` (0-based, below the negotiated count).
    Data(u8),
}

/// A datagram to send: the header the connection wrote into the caller's
/// buffer, followed by `payload` (empty for control packets). A driver sends
/// both in one `sendmsg` with a two-entry iovec, so the payload is never copied.
#[derive(Clone, Debug)]
pub struct Transmit {
    /// Where to.
    pub dest: SocketAddr,
    /// From which of our sockets.
    pub channel: Channel,
    /// The data after the header: a slice of an application buffer.
    pub payload: Bytes,
}

/// Why a connection ended early.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// Nothing was heard from the peer for the idle time-out.
    #[error("peer vanished: nothing heard for {0:?}")]
    TimedOut(Duration),
    /// The set-up got no answer.
    #[error("connection set-up timed out")]
    SetupTimedOut,
    /// The peer reset the connection.
    #[error("connection reset by peer")]
    Reset,
    /// This end aborted.
    #[error("connection aborted")]
    Aborted,
}

/// What happened, for the application.
#[derive(Debug)]
pub enum Event {
    /// The set-up completed (client) or was confirmed by the client (server).
    Connected,
    /// An application buffer's last packet was acknowledged: it is given back.
    SendDone {
        /// The id [`Connection::send`] returned.
        id: BufId,
        /// The buffer itself.
        buf: Bytes,
    },
    /// A posted receive buffer is filled (or, at the end of the stream, the
    /// first `len` bytes are).
    Received {
        /// Stream offset of the buffer's first byte.
        offset: u64,
        /// The buffer.
        buf: Vec<u8>,
        /// Bytes of stream data in it.
        len: usize,
    },
    /// The peer's stream ended and all of it was delivered.
    Finished,
    /// Both directions completed and acknowledged: nothing was lost.
    Closed,
    /// The connection ended early.
    Lost(ConnectionError),
}

/// A connection's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Client: the set-up is under way.
    Connecting,
    /// Data may flow.
    Established,
    /// Both streams are done; answering late retransmissions before closing.
    Draining,
    /// Over.
    Closed,
}

/// Sending side figures, for statistics (`strata xperf`).
#[derive(Clone, Copy, Debug)]
pub struct PathInfo {
    /// Smoothed RTT.
    pub srtt: Duration,
    /// The window the peer's receiver grants us, packets.
    pub peer_cwnd: u32,
    /// The window our receiver grants the peer, packets.
    pub cwnd: u32,
    /// cwnd / SRTT, bytes per second (§3.1).
    pub sending_rate: f64,
    /// Packets sent and not acknowledged.
    pub in_flight: u32,
    /// Stream bytes received in order.
    pub delivered: u64,
    /// Bytes handed to `send` and not yet acknowledged.
    pub unacked: u64,
}

enum Role {
    Client {
        setup: SetupRepr,
        cookie: [u8; COOKIE_LEN],
        attempts: u32,
        send_connect: bool,
        connect_sent: Option<Instant>,
        retry_at: Instant,
    },
    Server {
        accept: Repr,
        send_accept: bool,
        confirmed: bool,
        accept_sent: Option<Instant>,
    },
}

/// One end of a connection.
pub struct Connection {
    config: Config,
    role: Role,
    state: State,
    epoch: Instant,
    own_id: u64,
    peer_id: u64,
    peer: SocketAddr,
    peer_data: Vec<SocketAddr>,
    sender: Sender,
    receiver: Receiver,
    rtt: Rtt,
    pacer: Pacer,
    events: VecDeque<Event>,
    stats: Stats,
    last_heard: Instant,
    last_control: Instant,
    give_up_at: Instant,
    drain_until: Option<Instant>,
    reset_pending: bool,
    finished_told: bool,
    /// The peer's data packets carry the data checksum (its set-up said so).
    peer_data_checksum: bool,
}

impl Connection {
    /// Starts a connection to the server whose control socket is `server`.
    /// `data_ports` are this end's data sockets (at least one); `seed`
    /// feeds the random connection id and initial sequence number (drivers
    /// pass OS randomness, tests a fixed seed).
    pub fn connect(
        config: Config,
        now: Instant,
        seed: u64,
        server: SocketAddr,
        data_ports: &[u16],
    ) -> Connection {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let own_id = rng.random_range(1..=u64::MAX);
        let isn: u32 = rng.random();
        let ports = clamp_ports(data_ports);
        let setup = SetupRepr {
            own_id,
            isn,
            app_buffer: config.app_buffer,
            socket_buffer: config.socket_buffer,
            max_payload: max_payload(&config),
            data_checksum: config.data_checksum,
            data_ports: ports,
        };
        let role = Role::Client {
            setup,
            cookie: [0; COOKIE_LEN],
            attempts: 0,
            send_connect: true,
            connect_sent: None,
            retry_at: now + config.connect_retry,
        };
        Connection::new(
            config,
            role,
            State::Connecting,
            now,
            own_id,
            (isn, 0),
            server,
            false,
        )
    }

    /// The server's end, made by the listener once the client proved its
    /// address (echoed a cookie). `ours` are the server's parameters with the
    /// agreed number of data ports.
    pub(crate) fn accept(
        config: Config,
        now: Instant,
        peer: SocketAddr,
        client: &SetupRepr,
        ours: SetupRepr,
    ) -> Connection {
        let n = ours.data_ports.len();
        let accept = Repr::Accept {
            to: client.own_id,
            setup: ours.clone(),
        };
        let role = Role::Server {
            accept,
            send_accept: true,
            confirmed: false,
            accept_sent: None,
        };
        let mut config = config;
        config.mss = agreed_mss(&config, client);
        let mut c = Connection::new(
            config,
            role,
            State::Established,
            now,
            ours.own_id,
            (ours.isn, client.isn),
            peer,
            client.data_checksum,
        );
        c.peer_id = client.own_id;
        c.peer_data = client.data_ports[..n]
            .iter()
            .map(|&p| SocketAddr::new(peer.ip(), p))
            .collect();
        c
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        config: Config,
        role: Role,
        state: State,
        now: Instant,
        own_id: u64,
        (isn, peer_isn): (u32, u32),
        peer: SocketAddr,
        peer_data_checksum: bool,
    ) -> Connection {
        let window = Window::new(config.initial_cwnd, config.max_cwnd, config.slow_start_exit);
        Connection {
            sender: Sender::new(
                isn,
                full_payload(config.mss, config.data_checksum),
                config.initial_cwnd,
            ),
            receiver: Receiver::new(
                peer_isn,
                config.recovery,
                config.adaptive_threshold,
                full_payload(config.mss, peer_data_checksum),
                window,
                config.reorder_window,
                config.loss_discrimination,
            ),
            rtt: Rtt::new(config.initial_rtt),
            pacer: Pacer::new(),
            give_up_at: now + config.idle_timeout,
            config,
            role,
            state,
            epoch: now,
            own_id,
            peer_id: 0,
            peer,
            peer_data: Vec::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            last_heard: now,
            last_control: now,
            drain_until: None,
            reset_pending: false,
            finished_told: false,
            peer_data_checksum,
        }
    }

    /// This end's connection id (what the peer puts in its packets).
    pub fn id(&self) -> u64 {
        self.own_id
    }

    /// The peer's control address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The lifecycle state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The number of data sockets agreed (0 before the set-up completes).
    pub fn data_sockets(&self) -> usize {
        self.peer_data.len()
    }

    /// RTT, windows and rate.
    pub fn info(&self) -> PathInfo {
        PathInfo {
            srtt: self.rtt.srtt,
            peer_cwnd: self.sender.peer_cwnd,
            cwnd: self.receiver.window.cwnd(),
            sending_rate: rate(self.sender.peer_cwnd, self.config.mss, self.rtt.srtt),
            in_flight: self.sender.in_flight(),
            delivered: self.receiver.delivered(),
            unacked: self.sender.unacked_bytes(),
        }
    }

    /// Whether the peer's receiver says the window it grants us is in slow
    /// start (its control packets' `SLOW_START` flag).
    pub fn peer_in_slow_start(&self) -> bool {
        self.sender.peer_slow_start
    }

    /// Hands an application buffer to the connection; it is given back in
    /// [`Event::SendDone`] once its last byte is acknowledged, never copied.
    /// `None` once [`Connection::finish`] was called or the connection is over.
    pub fn send(&mut self, buf: Bytes) -> Option<BufId> {
        if matches!(self.state, State::Closed | State::Draining) {
            return None;
        }
        self.sender.queue(buf)
    }

    /// No more buffers: the stream ends after those queued.
    pub fn finish(&mut self) {
        self.sender.finish();
    }

    /// Posts an application buffer to receive the next `buf.len()` bytes of
    /// the peer's stream into; it comes back in [`Event::Received`].
    pub fn post_recv(&mut self, buf: Vec<u8>) {
        self.receiver.post(buf);
    }

    /// Bytes of posted receive buffers not yet filled.
    pub fn recv_space(&self) -> u64 {
        self.receiver.posted_space()
    }

    /// Aborts: a reset goes to the peer, the connection closes at once.
    pub fn abort(&mut self) {
        if self.state != State::Closed {
            self.reset_pending = self.peer_id != 0;
            self.close_with(Event::Lost(ConnectionError::Aborted));
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn close_with(&mut self, e: Event) {
        self.state = State::Closed;
        self.events.push_back(e);
    }

    /// Counts a datagram the listener routed here and this connection refused.
    pub(crate) fn count_drop(&mut self, r: DropReason) {
        self.stats.drops.count(r);
    }

    fn drop_packet(&mut self, r: DropReason) -> Option<DropReason> {
        self.stats.drops.count(r);
        Some(r)
    }

    /// Feeds a datagram received on `channel` from `from`. Anything bad is
    /// dropped and counted in [`Stats::drops`]; the reason is also returned,
    /// so a driver can name this datagram's fate without comparing counters.
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        channel: Channel,
        datagram: &[u8],
    ) -> Option<DropReason> {
        let p = match Packet::new_checked(datagram) {
            Ok(p) => p,
            Err(e) => return self.drop_packet(e.into()),
        };
        if p.kind().is_control() != (channel == Channel::Control) {
            return self.drop_packet(DropReason::WrongChannel);
        }
        let repr = match Repr::parse(&p) {
            Ok(r) => r,
            Err(e) => return self.drop_packet(e.into()),
        };
        match self.handle_repr(now, from, repr, Some(p.payload())) {
            Ok(()) => None,
            Err(r) => self.drop_packet(r),
        }
    }

    /// Feeds an already parsed packet (the listener parses to route); a
    /// data packet's payload is `None` when already in place (`place.rs`).
    pub(crate) fn handle_repr(
        &mut self,
        now: Instant,
        from: SocketAddr,
        repr: Repr,
        payload: Option<&[u8]>,
    ) -> Result<(), DropReason> {
        if self.state == State::Closed {
            return Err(DropReason::UnknownConnection);
        }
        let to = match &repr {
            Repr::Connect { .. } => return Err(DropReason::Unexpected),
            Repr::Retry { to, .. } | Repr::Accept { to, .. } | Repr::Reset { to, .. } => *to,
            Repr::Control(c) => c.to,
            Repr::Data(d) => d.to,
        };
        if to != self.own_id {
            return Err(DropReason::UnknownConnection);
        }
        if from.ip() != self.peer.ip() {
            return Err(DropReason::WrongAddress);
        }
        match repr {
            Repr::Connect { .. } => unreachable!("refused above"),
            Repr::Retry { cookie: c, .. } => {
                let Role::Client {
                    cookie,
                    send_connect,
                    connect_sent,
                    attempts,
                    retry_at,
                    ..
                } = &mut self.role
                else {
                    return Err(DropReason::Unexpected);
                };
                if self.state != State::Connecting {
                    return Err(DropReason::Unexpected);
                }
                *cookie = c;
                *send_connect = true;
                // The CONNECT with the cookie leaves now: its time-out runs
                // from now, and at least two of the round trips the RETRY
                // just took. Left at the first CONNECT's, it fired while
                // the ACCEPT was on its way (a second CONNECT 250 ms in at
                // a 200 ms RTT).
                let rtt = connect_sent.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
                *retry_at =
                    now + (self.config.connect_retry * (1 << (*attempts).min(5))).max(2 * rtt);
                self.stats.control_received += 1;
            }
            Repr::Accept { setup, .. } => self.on_accept(now, setup)?,
            Repr::Reset { .. } => {
                if self.peer_id == 0 {
                    return Err(DropReason::Unexpected);
                }
                self.stats.control_received += 1;
                self.close_with(Event::Lost(ConnectionError::Reset));
                return Ok(());
            }
            Repr::Control(c) => {
                if self.state == State::Connecting {
                    return Err(DropReason::Unexpected);
                }
                let rto = self.rto();
                // A request repeated within a round trip — and its variation:
                // a queue or the receiver's delayed ACK makes the round trip
                // longer than SRTT — was sent before our answer arrived.
                let again = self.rtt.srtt + 2 * self.rtt.rttvar;
                let (done, progressed) =
                    self.sender
                        .on_control(now, &c, again, rto, &mut self.stats)?;
                self.stats.control_received += 1;
                if c.recovery == crate::wire::Recovery::None {
                    self.stats.acks_received += 1;
                } else {
                    self.stats.naks_received += 1;
                }
                if progressed && c.ts_echo != 0 {
                    let rtt = self.clock(now).wrapping_sub(c.ts_echo);
                    if rtt < 60_000_000 {
                        self.rtt.sample(Duration::from_micros(u64::from(rtt)));
                    }
                }
                for (id, buf) in done {
                    self.events.push_back(Event::SendDone { id, buf });
                }
                self.confirm(now);
            }
            Repr::Data(d) => {
                if self.state == State::Connecting {
                    return Err(DropReason::Unexpected);
                }
                self.on_data(now, &d, payload)?;
            }
        }
        self.last_heard = now;
        self.check_done(now);
        Ok(())
    }

    fn on_accept(&mut self, now: Instant, setup: SetupRepr) -> Result<(), DropReason> {
        let Role::Client {
            setup: ours,
            connect_sent,
            ..
        } = &self.role
        else {
            return Err(DropReason::Unexpected);
        };
        if self.state != State::Connecting {
            // Our confirmation was lost and the server's client retransmitted:
            // answer again if it is the same server end.
            if setup.own_id == self.peer_id {
                self.receiver.urgent = true;
                self.stats.control_received += 1;
                return Ok(());
            }
            return Err(DropReason::Unexpected);
        }
        if setup.data_ports.len() > ours.data_ports.len() {
            return Err(DropReason::Inconsistent);
        }
        let n = setup.data_ports.len();
        let sent = *connect_sent;
        self.config.mss = agreed_mss(&self.config, &setup);
        self.sender
            .set_mss(full_payload(self.config.mss, self.config.data_checksum));
        self.peer_data_checksum = setup.data_checksum;
        self.peer_id = setup.own_id;
        self.peer_data = setup
            .data_ports
            .iter()
            .map(|&p| SocketAddr::new(self.peer.ip(), p))
            .collect();
        debug_assert!(n >= 1);
        self.receiver = Receiver::new(
            setup.isn,
            self.config.recovery,
            self.config.adaptive_threshold,
            full_payload(self.config.mss, setup.data_checksum),
            Window::new(
                self.config.initial_cwnd,
                self.config.max_cwnd,
                self.config.slow_start_exit,
            ),
            self.config.reorder_window,
            self.config.loss_discrimination,
        );
        if let Some(t) = sent {
            self.rtt.sample(now - t);
        }
        self.state = State::Established;
        self.receiver.urgent = true;
        self.stats.control_received += 1;
        self.events.push_back(Event::Connected);
        Ok(())
    }

    fn on_data(
        &mut self,
        now: Instant,
        d: &DataRepr,
        payload: Option<&[u8]>,
    ) -> Result<(), DropReason> {
        let sockets = self.peer_data.len() as u32;
        self.receiver.path_rtt = self.rtt.sampled.then_some(self.rtt.srtt);
        let filled = self.receiver.on_data(
            now,
            d,
            payload,
            sockets,
            self.config.ack_delay,
            &mut self.stats,
        )?;
        self.stats.data_received += 1;
        for f in filled {
            self.events.push_back(Event::Received {
                offset: f.offset,
                buf: f.buf,
                len: f.len,
            });
        }
        if self.receiver.finished && !self.finished_told {
            self.finished_told = true;
            self.events.push_back(Event::Finished);
        }
        self.confirm(now);
        Ok(())
    }

    /// Server: the client is heard on this connection, so it got the ACCEPT.
    /// Its RTT is sampled then, so that the receiver knows the path's
    /// (`slowstart.rs`) when no data of ours has been acknowledged yet.
    fn confirm(&mut self, now: Instant) {
        if let Role::Server {
            confirmed,
            accept_sent,
            ..
        } = &mut self.role
            && !*confirmed
        {
            *confirmed = true;
            if let Some(t) = *accept_sent
                && !self.rtt.sampled
            {
                self.rtt.sample(now.saturating_duration_since(t));
            }
            self.events.push_back(Event::Connected);
        }
    }

    /// Server: whether the client has confirmed the set-up.
    pub(crate) fn confirmed(&self) -> bool {
        match &self.role {
            Role::Server { confirmed, .. } => *confirmed,
            Role::Client { .. } => self.state != State::Connecting,
        }
    }

    /// Server: the client sent its `CONNECT` again (our ACCEPT was lost).
    pub(crate) fn resend_accept(&mut self) {
        if let Role::Server { send_accept, .. } = &mut self.role {
            *send_accept = true;
        }
    }

    fn check_done(&mut self, now: Instant) {
        if self.state == State::Established && self.sender.fin_acked && self.receiver.finished {
            // Linger to answer a retransmitted FIN whose acknowledgement was lost.
            self.state = State::Draining;
            self.drain_until = Some(now + 3 * self.rto());
        }
    }

    /// Data packets are paced with rate control on, in the peer receiver's
    /// slow start (`slowstart.rs`), and when more than a burst would leave
    /// at once (`Sender::recovering`, `Sender::released`).
    fn paced(&self) -> bool {
        self.config.rate_control
            || (self.config.slow_start_exit && self.sender.peer_slow_start)
            || self.sender.recovering()
            || self.sender.released()
    }

    fn rto(&self) -> Duration {
        self.rtt.rto(self.config.min_rto)
    }

    /// Our clock in microseconds for `tsval`; odd, so never zero ("no echo").
    fn clock(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.epoch).as_micros() as u32) | 1
    }

    /// The next datagram to send, its header written into `buf` (cleared
    /// first); control packets come before data.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        if self.reset_pending {
            self.reset_pending = false;
            Repr::Reset {
                to: self.peer_id,
                reason: 0,
            }
            .emit(buf, []);
            return Some(self.control_out());
        }
        if self.state == State::Closed {
            return None;
        }
        match &mut self.role {
            Role::Client {
                setup,
                cookie,
                send_connect,
                connect_sent,
                ..
            } if *send_connect => {
                *send_connect = false;
                *connect_sent = Some(now);
                Repr::Connect {
                    setup: setup.clone(),
                    cookie: *cookie,
                }
                .emit(buf, []);
                return Some(self.control_out());
            }
            Role::Server {
                accept,
                send_accept,
                accept_sent,
                ..
            } if *send_accept => {
                *send_accept = false;
                // The first: a client that sent its CONNECT again got the
                // first ACCEPT too, and a sample from a later one is short.
                accept_sent.get_or_insert(now);
                accept.emit(buf, []);
                return Some(self.control_out());
            }
            _ => {}
        }
        if self.state == State::Connecting || !self.confirmed_enough() {
            return None;
        }
        if self.receiver.ack_due(now) || now >= self.last_control + self.config.keepalive {
            let c = self.receiver.control(self.peer_id, &mut self.stats);
            Repr::Control(c).emit(buf, []);
            self.last_control = now;
            return Some(self.control_out());
        }
        self.poll_data(now, buf)
    }

    /// A server sends data only once the client is known to hold the ACCEPT
    /// (it is then also known to receive at its address).
    fn confirmed_enough(&self) -> bool {
        match &self.role {
            Role::Server { confirmed, .. } => *confirmed,
            Role::Client { .. } => true,
        }
    }

    fn control_out(&mut self) -> Transmit {
        self.stats.control_sent += 1;
        Transmit {
            dest: self.peer,
            channel: Channel::Control,
            payload: Bytes::new(),
        }
    }

    fn poll_data(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.peer_data.is_empty() || !self.sender.ready() {
            self.pacer.idle();
            return None;
        }
        if self.paced() && self.pacer.blocked_until(now).is_some() {
            self.pacer.hold();
            return None;
        }
        let rto = self.rto();
        let out = self.sender.next(now, rto)?;
        let mut f = 0;
        if out.sent.fin {
            f |= flags::FIN;
        }
        if out.retransmission {
            f |= flags::RETRANSMISSION;
            self.stats.retransmitted += 1;
        }
        if self.config.data_checksum {
            f |= flags::DATA_CHECKSUM;
        }
        let d = DataRepr {
            to: self.peer_id,
            flags: f,
            seq: out.rel.wrapping_add(self.sender.isn),
            tsval: self.clock(now),
            // Modulo 2^32 on the wire (the receiver widens it).
            offset: out.sent.offset as u32,
            len: out.sent.len,
        };
        Repr::Data(d).emit(buf, [&out.payload[..]]);
        // Slow start is paced at four times cwnd / SRTT (`slowstart.rs`):
        // each round's packets leave as a train in its first quarter, which
        // queues at the bottleneck once the window passes a quarter of the
        // path — early enough for the receiver's delay signal, a round trip
        // late, to stop the window before it overflows the queue.
        let pace = if self.config.slow_start_exit && self.sender.peer_slow_start {
            self.sender.peer_cwnd.saturating_mul(4)
        } else if self.sender.recovering() || self.sender.released() {
            // Retransmissions, or new data a window let out at once, leave
            // at the window's rate before the episode (the window granted
            // during one counts the packets held past the holes), not all
            // at once: thousands resent in one burst (a slow start's
            // overflow at 1 Gbit/s) overflowed the queue again, and so did
            // the thousands an application buffer given back let out. At
            // the window's rate and no faster: whatever the window lets out
            // beyond what the acknowledgements replace ends up in the queue
            // if sent faster than the bottleneck (a quarter faster lost
            // three times as many packets at 200 ms, 23,544 against 7,828);
            // the pacer's catch-up (`rate.rs`) keeps a late timer from
            // lowering it.
            self.sender.peer_cwnd.min(self.sender.calm_cwnd)
        } else {
            self.sender.peer_cwnd
        };
        self.pacer
            .sent(now, pace, self.rtt.srtt.max(Duration::from_micros(1)));
        self.stats.data_sent += 1;
        self.stats.bytes_sent += u64::from(out.sent.len);
        let i = (out.rel as usize) % self.peer_data.len();
        Some(Transmit {
            dest: self.peer_data[i],
            channel: Channel::Data(i as u8),
            payload: out.payload,
        })
    }

    /// When [`Connection::handle_timeout`] must next be called (a timer or
    /// the pacer's next departure); `None` when closed. All the connection's
    /// timers — set-up, retransmission, delayed ACK, keepalive, idle,
    /// drain — are read from this one place.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.state == State::Closed {
            return None;
        }
        let mut t: Vec<Option<Instant>> = vec![];
        match &self.role {
            Role::Client { retry_at, .. } if self.state == State::Connecting => {
                t.push(Some(*retry_at));
                t.push(Some(self.give_up_at));
            }
            Role::Server { .. } if !self.confirmed_enough() => {
                t.push(Some(self.last_heard + self.config.idle_timeout));
            }
            _ => {
                t.push(self.sender.rto_at);
                t.push(self.receiver.ack_at);
                t.push(Some(self.last_control + self.config.keepalive));
                if self.state == State::Draining {
                    t.push(self.drain_until);
                } else {
                    t.push(Some(self.last_heard + self.config.idle_timeout));
                }
                if self.paced() && self.sender.ready() {
                    t.push(self.pacer.wake_at().or(Some(self.epoch)));
                }
            }
        }
        t.into_iter().flatten().min()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state == State::Closed {
            return;
        }
        if let Role::Client {
            retry_at,
            attempts,
            send_connect,
            ..
        } = &mut self.role
            && self.state == State::Connecting
        {
            if now >= self.give_up_at {
                self.close_with(Event::Lost(ConnectionError::SetupTimedOut));
            } else if now >= *retry_at {
                *attempts += 1;
                *send_connect = true;
                *retry_at = now + self.config.connect_retry * (1 << (*attempts).min(5));
            }
            return;
        }
        if self.state == State::Draining {
            if self.drain_until.is_some_and(|t| now >= t) {
                self.close_with(Event::Closed);
            }
            return;
        }
        if now >= self.last_heard + self.config.idle_timeout {
            let e = if self.confirmed() {
                ConnectionError::TimedOut(self.config.idle_timeout)
            } else {
                ConnectionError::SetupTimedOut
            };
            self.close_with(Event::Lost(e));
            return;
        }
        self.receiver.check_gap(now, &mut self.stats);
        if self.sender.rto_at.is_some_and(|t| now >= t) {
            let rto = self.rto();
            self.sender.on_timeout(now, rto, &mut self.stats);
        }
    }
}

/// The payload both ends send once set up: the smaller of what each said
/// its path takes. Set into the connection's `config.mss` (until then it is
/// this end's own).
fn agreed_mss(config: &Config, peer: &SetupRepr) -> u32 {
    config.mss.clamp(1, u32::from(peer.max_payload.max(1)))
}

fn clamp_ports(ports: &[u16]) -> Vec<u16> {
    let mut v: Vec<u16> = ports
        .iter()
        .copied()
        .take(crate::wire::MAX_DATA_SOCKETS)
        .collect();
    if v.is_empty() {
        v.push(0);
    }
    v
}
