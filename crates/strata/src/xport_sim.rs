//! Seed 001's transport in the deterministic simulator over strata-link's
//! emulator: a file moved from a client connection to a listener's
//! connection over two of its link directions (delay, jitter, loss, bit
//! errors, duplication, reordering, rate), in virtual time. The simulator is
//! strata-xport's own ([`strata_xport::sim`], which its tests run over its
//! own wire model); this module is the emulator as its [`Path`]. The same
//! seed replays the same run. `strata demo` shows one.
//!
//! Each simulated datagram carries, ahead of the transport's bytes, the four
//! bytes a real path would put in its UDP header for us: which socket it
//! left from and its port, with a check byte. A bit error there stands for one
//! in a real UDP header: the kernel's checksum would drop the datagram, and so
//! does the simulator (counted in [`SimOutcome::misrouted`]).

use std::net::SocketAddr;
use std::time::Duration;

use strata_core::Message;
use strata_core::time::Instant as SimInstant;
use strata_link::LinkParams;
use strata_link::emulator::{Emulator, EmulatorStats, Fate};
use strata_xport::Config;
use strata_xport::sim::{self, Datagram, Path, Scenario};

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

/// How a simulated transfer ended: what the simulator saw at both ends
/// ([`sim::Outcome`], through `Deref`), and what the emulator did.
#[derive(Debug)]
pub struct SimOutcome {
    /// Both ends: hashes, bytes, counters, how each closed.
    pub ends: sim::Outcome,
    /// What each link direction did (client → server, server → client).
    pub links: [EmulatorStats; 2],
    /// Datagrams whose simulated UDP header a bit error hit (dropped).
    pub misrouted: u64,
}

impl std::ops::Deref for SimOutcome {
    type Target = sim::Outcome;
    fn deref(&self) -> &sim::Outcome {
        &self.ends
    }
}

impl SimOutcome {
    /// File bytes per second of virtual time.
    pub fn goodput(&self) -> f64 {
        self.received_bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The whole file arrived intact and both ends closed.
    pub fn intact(&self) -> bool {
        self.client_closed
            && self.server_closed
            && self.client_lost.is_none()
            && self.received_hash == Some(self.sent_hash)
    }
}

const ROUTE: usize = 4;

/// The simulated UDP header: source port, destination port, a check byte.
fn route(from: u16, to: u16) -> [u8; ROUTE] {
    let [a, b] = from.to_be_bytes();
    let [c, d] = to.to_be_bytes();
    [a ^ c, b ^ d, a.wrapping_add(b), c.wrapping_add(d)]
}

/// The source and destination ports of a simulated UDP header, trying each
/// of the sending end's `ports` as the source.
fn unroute(head: &[u8], ports: &[u16]) -> Option<(u16, u16)> {
    ports.iter().find_map(|&src| {
        let [a, b] = src.to_be_bytes();
        let [c, d] = [head[0] ^ a, head[1] ^ b];
        let dst = u16::from_be_bytes([c, d]);
        (head[2] == a.wrapping_add(b) && head[3] == c.wrapping_add(d)).then_some((src, dst))
    })
}

/// strata-link's emulator as the simulator's path: `links[0]` carries
/// client → server, `links[1]` server → client.
struct Emulated {
    links: [Emulator; 2],
    /// Each end's socket addresses, control first (client, server).
    ends: [Vec<SocketAddr>; 2],
    injected: Vec<(Duration, Datagram)>,
    misrouted: u64,
    overflows: (u64, u64),
}

impl Path for Emulated {
    fn send(&mut self, now: Duration, d: Datagram, slow_start: bool) {
        let mut frame = Vec::with_capacity(ROUTE + d.bytes.len());
        frame.extend_from_slice(&route(d.from.port(), d.to.port()));
        frame.extend_from_slice(&d.bytes);
        let fate = self.links[usize::from(!d.to_server)]
            .offer(SimInstant::ZERO + now, Message::from(frame));
        if d.to_server && matches!(fate, Fate::QueueFull) {
            self.overflows.0 += 1;
            self.overflows.1 += u64::from(slow_start);
        }
    }

    fn inject(&mut self, now: Duration, d: Datagram) {
        self.injected.push((now, d));
    }

    fn next_delivery(&self) -> Option<Duration> {
        let links = self
            .links
            .iter()
            .filter_map(|l| l.next_delivery())
            .map(|i| i.saturating_since(SimInstant::ZERO));
        links.chain(self.injected.iter().map(|(t, _)| *t)).min()
    }

    fn poll(&mut self, now: Duration) -> Vec<Datagram> {
        let mut due = Vec::new();
        for (to_server, i) in [(true, 0), (false, 1)] {
            let (from, to) = (&self.ends[i], &self.ends[1 - i]);
            let ports: Vec<u16> = from.iter().map(|a| a.port()).collect();
            while let Some(frame) = self.links[i].poll(SimInstant::ZERO + now) {
                let frame = frame.to_vec();
                let routed = frame.get(..ROUTE).and_then(|h| unroute(h, &ports));
                let dest = routed.and_then(|(src, dst)| {
                    let to = *to.iter().find(|a| a.port() == dst)?;
                    Some((SocketAddr::new(from[0].ip(), src), to))
                });
                match dest {
                    Some((from, to)) => due.push(Datagram {
                        to_server,
                        from,
                        to,
                        bytes: frame[ROUTE..].to_vec(),
                    }),
                    None => self.misrouted += 1,
                }
            }
        }
        let (ready, later) = std::mem::take(&mut self.injected)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.injected = later;
        due.extend(ready.into_iter().map(|(_, d)| d));
        due
    }

    fn overflows(&self) -> (u64, u64) {
        self.overflows
    }
}

/// Runs a transfer to its end (or to `limit`).
pub fn run(t: &SimTransfer) -> SimOutcome {
    let s = Scenario {
        seed: t.seed,
        bytes: t.bytes,
        app_buffer: t.app_buffer,
        app_buffers: t.app_buffers,
        client: t.config.clone(),
        server: t.config.clone(),
        data_sockets: usize::from(t.data_sockets),
        limit: t.limit,
        ..Scenario::default()
    };
    let ends = sim::addresses(s.data_sockets)
        .map(|(control, data)| std::iter::once(control).chain(data).collect::<Vec<_>>());
    let mut path = Emulated {
        links: [
            Emulator::new(t.link.clone(), t.seed ^ 0x11),
            Emulator::new(t.link.clone(), t.seed ^ 0x22),
        ],
        ends,
        injected: Vec::new(),
        misrouted: 0,
        overflows: (0, 0),
    };
    let ends = sim::run_on(&s, &mut path);
    SimOutcome {
        ends,
        links: [path.links[0].stats().clone(), path.links[1].stats().clone()],
        misrouted: path.misrouted,
    }
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
        let [(control, data), _] = sim::addresses(4);
        let p: Vec<u16> = std::iter::once(control)
            .chain(data)
            .map(|a| a.port())
            .collect();
        for src in [p[0], p[1], p[4]] {
            let h = route(src, 2002);
            assert_eq!(unroute(&h, &p), Some((src, 2002)));
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
        assert!(o.client_lost.is_some(), "{o:#?}");
        assert!(o.elapsed < Duration::from_secs(120), "{:?}", o.elapsed);
    }
}
