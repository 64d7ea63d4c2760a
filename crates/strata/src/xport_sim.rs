//! Seed 001's transport in the deterministic simulator: a file moved from a
//! client [`Connection`] to a [`Listener`]'s connection over two of
//! strata-link's emulated link directions (delay, jitter, loss, bit errors,
//! duplication, reordering, rate), in virtual time. The same seed replays the
//! same run. `strata demo` shows one; tests and benchmarks can run many.
//!
//! Each simulated datagram carries, ahead of the transport's bytes, the four
//! bytes a real path would put in its UDP header for us: which socket it
//! left from and its port, with a check byte. A bit error there stands for one
//! in a real UDP header: the kernel's checksum would drop the datagram, and so
//! does the simulator (counted in [`SimOutcome::misrouted`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use strata_core::Message;
use strata_core::time::Instant as SimInstant;
use strata_link::LinkParams;
use strata_link::emulator::{Emulator, EmulatorStats};
use strata_xport::{Channel, Config, Connection, ConnectionError, Event, Listener, Stats};

/// One transfer to simulate.
#[derive(Clone, Debug)]
pub struct SimTransfer {
    /// Seeds the data, both connections and both link directions.
    pub seed: u64,
    /// Bytes of the file.
    pub bytes: usize,
    /// Size of each application buffer handed to the sender.
    pub app_buffer: usize,
    /// Application buffers handed over at once (§3.5.2), and posted at the receiver.
    pub app_buffers: usize,
    /// The link, each way.
    pub link: LinkParams,
    /// Both ends' settings.
    pub config: Config,
    /// Data sockets each end opens (§3.4).
    pub data_sockets: u8,
    /// Give up after this much virtual time.
    pub limit: Duration,
}

impl Default for SimTransfer {
    fn default() -> Self {
        SimTransfer {
            seed: 1,
            bytes: 8 << 20,
            app_buffer: 1 << 20,
            app_buffers: 4,
            link: LinkParams::default(),
            config: Config::default(),
            data_sockets: 1,
            limit: Duration::from_secs(600),
        }
    }
}

/// How a simulated transfer ended.
#[derive(Debug)]
pub struct SimOutcome {
    /// SHA-256 of the file as sent.
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
    /// What each link direction did (client → server, server → client).
    pub links: [EmulatorStats; 2],
    /// Datagrams whose simulated UDP header a bit error hit (dropped).
    pub misrouted: u64,
    /// Both ends closed, nothing lost.
    pub closed: bool,
    /// Why the sender's connection ended early, if it did.
    pub lost: Option<ConnectionError>,
}

impl SimOutcome {
    /// File bytes per second of virtual time.
    pub fn goodput(&self) -> f64 {
        self.received_bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The whole file arrived intact and both ends closed.
    pub fn intact(&self) -> bool {
        self.closed && self.lost.is_none() && self.received_hash == Some(self.sent_hash)
    }
}

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const CONTROL_PORT: u16 = 4000;
const ROUTE: usize = 4;

/// One end's sockets: the control port and the data ports after it.
struct Ports {
    ip: IpAddr,
    control: u16,
    data: Vec<u16>,
}

impl Ports {
    fn new(ip: IpAddr, n: u8) -> Ports {
        Ports {
            ip,
            control: CONTROL_PORT,
            data: (1..=u16::from(n)).map(|i| CONTROL_PORT + i).collect(),
        }
    }

    fn addr(&self, channel: Channel) -> SocketAddr {
        let port = match channel {
            Channel::Control => self.control,
            Channel::Data(i) => self.data[usize::from(i)],
        };
        SocketAddr::new(self.ip, port)
    }

    /// Which of our sockets a datagram addressed to `port` reaches.
    fn channel(&self, port: u16) -> Option<Channel> {
        if port == self.control {
            return Some(Channel::Control);
        }
        let i = self.data.iter().position(|&p| p == port)?;
        u8::try_from(i).ok().map(Channel::Data)
    }
}

/// The simulated UDP header: source port, destination port, a check byte.
fn route(from: u16, to: u16) -> [u8; ROUTE] {
    let [a, b] = from.to_be_bytes();
    let [c, d] = to.to_be_bytes();
    [a ^ c, b ^ d, a.wrapping_add(b), c.wrapping_add(d)]
}

fn unroute(head: &[u8], from: &Ports) -> Option<(u16, u16)> {
    // Either end's ports are the same numbers; try each source port.
    let mut ports = std::iter::once(from.control).chain(from.data.iter().copied());
    ports.find_map(|src| {
        let [a, b] = src.to_be_bytes();
        let [c, d] = [head[0] ^ a, head[1] ^ b];
        let dst = u16::from_be_bytes([c, d]);
        (head[2] == a.wrapping_add(b) && head[3] == c.wrapping_add(d)).then_some((src, dst))
    })
}

/// Runs a transfer to its end (or to `limit`).
pub fn run(t: &SimTransfer) -> SimOutcome {
    let t0 = std::time::Instant::now();
    let at = |d: Duration| t0 + d;
    let client_ports = Ports::new(CLIENT, t.data_sockets);
    let server_ports = Ports::new(SERVER, t.data_sockets);
    let mut client = Connection::connect(
        t.config.clone(),
        at(Duration::ZERO),
        t.seed ^ 0xc1,
        server_ports.addr(Channel::Control),
        &client_ports.data,
    );
    let mut listener = Listener::new(
        t.config.clone(),
        at(Duration::ZERO),
        t.seed ^ 0x5e,
        &server_ports.data,
        4,
    );
    // links[0] carries client → server, links[1] server → client.
    let mut links = [
        Emulator::new(t.link.clone(), t.seed ^ 0x11),
        Emulator::new(t.link.clone(), t.seed ^ 0x22),
    ];

    let mut data = vec![0u8; t.bytes];
    ChaCha8Rng::seed_from_u64(t.seed ^ 0xda7a).fill_bytes(&mut data);
    let data = Bytes::from(data);
    let sent_hash: [u8; 32] = Sha256::digest(&data).into();
    let (mut next, mut outstanding, mut finishing) = (0usize, 0usize, false);

    let mut server: Option<u64> = None;
    let mut hasher = Sha256::new();
    let mut out = SimOutcome {
        sent_hash,
        received_hash: None,
        received_bytes: 0,
        elapsed: Duration::ZERO,
        client: Stats::default(),
        server: Stats::default(),
        links: Default::default(),
        misrouted: 0,
        closed: false,
        lost: None,
    };
    let (mut client_closed, mut server_closed) = (false, false);
    let mut now = Duration::ZERO;
    let mut buf = Vec::new();
    loop {
        // The sending application keeps `app_buffers` buffers with the library.
        if client.state() == strata_xport::State::Established {
            while outstanding < t.app_buffers && next < data.len() {
                let end = (next + t.app_buffer).min(data.len());
                if client.send(data.slice(next..end)).is_none() {
                    break;
                }
                next = end;
                outstanding += 1;
            }
            if next == data.len() && !finishing {
                client.finish();
                finishing = true;
            }
        }
        while let Some(e) = client.poll_event() {
            match e {
                Event::SendDone { .. } => outstanding -= 1,
                Event::Closed => client_closed = true,
                Event::Lost(e) => out.lost = Some(e),
                _ => {}
            }
        }
        if server.is_none()
            && let Some(id) = listener.accept()
        {
            server = Some(id);
            if let Some(c) = listener.connection(id) {
                for _ in 0..t.app_buffers {
                    c.post_recv(vec![0u8; t.app_buffer]);
                }
                c.finish();
            }
        }
        if let Some(c) = server.and_then(|id| listener.connection(id)) {
            while let Some(e) = c.poll_event() {
                match e {
                    // The receiving application consumes a buffer and posts it again.
                    Event::Received { buf, len, .. } => {
                        hasher.update(&buf[..len]);
                        out.received_bytes += len as u64;
                        c.post_recv(buf);
                    }
                    Event::Finished => {
                        out.received_hash = Some(std::mem::take(&mut hasher).finalize().into());
                    }
                    Event::Closed => server_closed = true,
                    _ => {}
                }
            }
            out.server = c.stats().clone();
        }

        let sim_now = SimInstant::ZERO + now;
        while let Some(x) = client.poll_transmit(at(now), &mut buf) {
            offer(
                &mut links[0],
                sim_now,
                &client_ports,
                x.channel,
                x.dest.port(),
                &buf,
                &x.payload,
            );
        }
        while let Some(x) = listener.poll_transmit(at(now), &mut buf) {
            offer(
                &mut links[1],
                sim_now,
                &server_ports,
                x.channel,
                x.dest.port(),
                &buf,
                &x.payload,
            );
        }

        if (client_closed && server_closed) || out.lost.is_some() || now >= t.limit {
            break;
        }
        // The next instant anything happens: a delivery or a deadline.
        let deliveries = links
            .iter()
            .filter_map(|l| l.next_delivery())
            .map(|i| i.saturating_since(SimInstant::ZERO));
        let deadlines = [client.poll_timeout(), listener.poll_timeout()]
            .into_iter()
            .flatten()
            .map(|i| i.saturating_duration_since(t0));
        let Some(soonest) = deliveries.chain(deadlines).min() else {
            break;
        };
        now = now.max(soonest);
        let sim_now = SimInstant::ZERO + now;
        // Control sockets are read before data sockets (§3.6).
        let mut due: Vec<(bool, SocketAddr, Channel, Vec<u8>)> = Vec::new();
        for (to_server, link) in [true, false].into_iter().zip(links.iter_mut()) {
            let (from, to) = if to_server {
                (&client_ports, &server_ports)
            } else {
                (&server_ports, &client_ports)
            };
            while let Some(frame) = link.poll(sim_now) {
                let mut bytes = frame.to_vec();
                let routed = bytes.get(..ROUTE).and_then(|h| unroute(h, from));
                match routed.and_then(|(src, dst)| Some((src, to.channel(dst)?))) {
                    Some((src, ch)) => {
                        // The transport's datagram, without the simulated UDP header.
                        bytes.drain(..ROUTE);
                        due.push((to_server, SocketAddr::new(from.ip, src), ch, bytes))
                    }
                    None => out.misrouted += 1,
                }
            }
        }
        due.sort_by_key(|d| d.2 != Channel::Control);
        for (to_server, from, ch, bytes) in due {
            if to_server {
                listener.handle(at(now), from, ch, &bytes);
            } else {
                client.handle(at(now), from, ch, &bytes);
            }
        }
        if client.poll_timeout().is_some_and(|d| d <= at(now)) {
            client.handle_timeout(at(now));
        }
        if listener.poll_timeout().is_some_and(|d| d <= at(now)) {
            listener.handle_timeout(at(now));
        }
    }
    out.elapsed = now;
    out.client = client.stats().clone();
    out.links = [links[0].stats().clone(), links[1].stats().clone()];
    out.closed = client_closed && server_closed;
    out
}

/// Puts one datagram on a link direction: the simulated UDP header, the
/// transport's header, its payload.
fn offer(
    link: &mut Emulator,
    now: SimInstant,
    from: &Ports,
    channel: Channel,
    to: u16,
    header: &[u8],
    payload: &[u8],
) {
    let src = from.addr(channel).port();
    let mut d = Vec::with_capacity(ROUTE + header.len() + payload.len());
    d.extend_from_slice(&route(src, to));
    d.extend_from_slice(header);
    d.extend_from_slice(payload);
    link.offer(now, Message::from(d));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lossy_link_moves_the_file_intact_and_counts_its_repairs() {
        let link = LinkParams {
            delay: Duration::from_millis(10),
            loss: 0.02,
            ber: 1e-6,
            ..LinkParams::default()
        };
        let config = Config {
            data_checksum: true,
            ..Config::default()
        };
        let o = run(&SimTransfer {
            seed: 3,
            bytes: 4 << 20,
            link,
            config,
            data_sockets: 2,
            ..SimTransfer::default()
        });
        assert!(o.intact(), "{o:#?}");
        assert_eq!(o.received_bytes, 4 << 20);
        assert!(
            o.client.retransmitted > 0,
            "2% loss and nothing resent: {o:#?}"
        );
        assert!(o.links[0].lost_random > 0);
    }

    #[test]
    fn the_simulated_udp_header_finds_every_port_and_refuses_a_flipped_bit() {
        let p = Ports::new(CLIENT, 4);
        for src in [p.control, p.data[0], p.data[3]] {
            let h = route(src, 4002);
            assert_eq!(unroute(&h, &p), Some((src, 4002)));
            for bit in 0..32 {
                let mut bad = h;
                bad[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(unroute(&bad, &p), None, "bit {bit} of {src}");
            }
        }
    }

    #[test]
    fn an_unreachable_receiver_is_reported_not_waited_for() {
        let link = LinkParams {
            loss: 1.0,
            ..LinkParams::default()
        };
        let o = run(&SimTransfer {
            link,
            bytes: 1 << 20,
            ..SimTransfer::default()
        });
        assert!(!o.intact());
        assert!(o.lost.is_some(), "{o:#?}");
        assert!(o.elapsed < Duration::from_secs(120), "{:?}", o.elapsed);
    }
}
