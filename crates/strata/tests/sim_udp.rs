//! UDP, IPv4 fragmentation and ARP across the deterministic simulator's lossy
//! links, under every architecture; and the blocking socket API on the in-memory
//! network running in real time.

use std::any::Any;
use std::net::SocketAddrV4;
use std::time::Duration;

use strata::apps::udp_echo::UdpEcho;
use strata::link::{Direction, HostId, LinkParams, SimNet, WireId};
use strata::{
    Addr, App, AppCx, Arch, HostBuilder, HostParams, Message, Network, PacketMeta, Participants,
    Qos, SessionRef, UdpSocket,
};

const PORT: u16 = 5001;
const TICK: u64 = 1;

fn host(n: u8, arch: Arch, spec: &str) -> strata::Engine {
    HostBuilder::spec(spec, HostParams::numbered(n), "net0", strata::link::SIM)
        .arch(arch)
        .seed(u64::from(n))
        .build()
        .unwrap()
}

fn pair(arch: Arch, seed: u64, params: LinkParams) -> (SimNet, HostId, HostId, WireId) {
    let mut net = SimNet::new(seed);
    let a = net.add_host("a", host(1, arch, "udp/ip/eth"));
    let b = net.add_host("b", host(2, arch, "udp/ip/eth"));
    let w = net
        .connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    (net, a, b, w)
}

/// The bytes of datagram `seq`: its number, then a pattern derived from it, so
/// the receiver can check every byte.
fn datagram(seq: u64, len: usize) -> Vec<u8> {
    let mut d: Vec<u8> = (0..len)
        .map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i) as u8)
        .collect();
    d[..8].copy_from_slice(&seq.to_be_bytes());
    d
}

/// Sends `total` numbered datagrams of `len` bytes, one every `gap`.
struct Sender {
    session: SessionRef,
    total: u64,
    len: usize,
    gap: Duration,
    sent: u64,
}

impl App for Sender {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn timer(&mut self, _: u64, cx: &mut AppCx) {
        if self.sent < self.total {
            cx.send(self.session, Message::from(datagram(self.sent, self.len)));
            self.sent += 1;
            let at = cx.now() + self.gap;
            cx.set_timer(at, TICK);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Receives numbered datagrams and checks every byte of each.
#[derive(Default)]
struct Receiver {
    seen: Vec<bool>,
    intact: u64,
    damaged: u64,
    duplicates: u64,
}

impl App for Receiver {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        let bytes = msg.to_vec();
        let seq = bytes
            .get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().unwrap()));
        match seq {
            Some(seq) if bytes == datagram(seq, bytes.len()) => {
                match self.seen.get_mut(seq as usize) {
                    Some(s) if *s => self.duplicates += 1,
                    Some(s) => {
                        *s = true;
                        self.intact += 1;
                    }
                    None => self.damaged += 1,
                }
            }
            _ => self.damaged += 1,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Starts a transfer from `a` to `b` and returns the two applications.
fn transfer(
    net: &mut SimNet,
    a: HostId,
    b: HostId,
    total: u64,
    len: usize,
    gap: Duration,
) -> (strata::AppId, strata::AppId) {
    let rx = net.engine(b).add_app(Box::new(Receiver {
        seen: vec![false; total as usize],
        ..Receiver::default()
    }));
    let udp = net.engine(b).proto_id("udp").unwrap();
    net.engine(b)
        .with_app(rx, |_, cx| {
            cx.open(udp, Participants::local([Addr::Port(PORT)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    (sender(net, a, total, len, gap), rx)
}

/// Starts sending `total` numbered datagrams from `a` to host 2's `PORT`.
fn sender(net: &mut SimNet, a: HostId, total: u64, len: usize, gap: Duration) -> strata::AppId {
    let server = HostParams::numbered(2).address.address();
    let engine = net.engine(a);
    let udp = engine.proto_id("udp").unwrap();
    let tx = engine.add_app(Box::new(Sender {
        session: SessionRef::new(udp, strata::core::SessionId(0)),
        total,
        len,
        gap,
        sent: 0,
    }));
    engine
        .with_app(tx, |app, cx| {
            let parts = Participants::remote([Addr::Ip(server), Addr::Port(PORT)])
                .with_local([Addr::Port(0)]);
            let s = cx.open(udp, parts, Qos::default()).unwrap();
            app.as_any_mut().downcast_mut::<Sender>().unwrap().session = s;
            let now = cx.now();
            cx.set_timer(now, TICK);
        })
        .unwrap();
    tx
}

#[test]
fn ten_megabytes_of_udp_cross_a_lossy_link_and_every_datagram_that_arrives_is_intact() {
    for arch in Arch::ALL {
        let params = LinkParams {
            delay: Duration::from_millis(5),
            jitter: Duration::from_micros(200),
            loss: 0.02,
            ber: 1e-6,
            reorder: 0.01,
            ..LinkParams::default()
        };
        let (mut net, a, b, w) = pair(arch, 11, params);
        let total = 10_000_000 / 1400 + 1;
        let (tx, rx) = transfer(&mut net, a, b, total, 1400, Duration::from_micros(150));
        net.run_for(Duration::from_secs(3));
        assert_eq!(
            net.engine(a).app::<Sender>(tx).unwrap().sent,
            total,
            "{arch}: sent all"
        );
        let r = net.engine(b).app::<Receiver>(rx).unwrap();
        let (intact, damaged, dups) = (r.intact, r.damaged, r.duplicates);
        assert_eq!(
            (damaged, dups),
            (0, 0),
            "{arch}: nothing damaged or doubled is delivered"
        );
        assert!(
            intact > total * 9 / 10,
            "{arch}: most arrive ({intact}/{total})"
        );
        let wire = net.wire_stats(w, Direction::AToB).clone();
        assert!(
            wire.lost() > 0 && wire.corrupted > 0,
            "{arch}: the link did its worst"
        );

        // The wire's ledger: every frame a sent was lost on the wire or reached b.
        let link = net.engine(a).link_id("net0").unwrap();
        let sent_frames = net.engine(a).link_stats(link).tx_frames;
        let arrived = net.engine(b).link_stats(link).rx_frames;
        assert_eq!(sent_frames, wire.lost() + arrived, "{arch}: wire ledger");
        // b's ledger: every frame that arrived was delivered intact, dropped with
        // a reason (the corrupted ones: bad checksums, mangled addresses), or
        // consumed (ARP).
        let e = net.engine(b);
        let (mut dropped, mut consumed) = (e.engine_counters().dropped(), 0);
        for (_, c) in e.all_counters() {
            dropped += c.dropped();
            consumed += c.events().get(strata::core::CONSUMED);
        }
        let delivered = e.engine_counters().events().get(strata::core::DELIVERED);
        assert_eq!(
            delivered, intact,
            "{arch}: every delivery was an intact datagram"
        );
        assert_eq!(
            arrived,
            delivered + dropped + consumed,
            "{arch}: host ledger"
        );
        assert!(
            dropped >= wire.corrupted / 2,
            "{arch}: corrupted frames were dropped"
        );
    }
}

#[test]
fn fragmented_datagrams_reassemble_under_loss_and_reordering() {
    for arch in Arch::ALL {
        let params = LinkParams {
            delay: Duration::from_millis(2),
            loss: 0.03,
            reorder: 0.2,
            reorder_delay: Duration::from_millis(3),
            ..LinkParams::default()
        };
        let (mut net, a, b, _) = pair(arch, 5, params);
        let total = 400;
        let (_, rx) = transfer(&mut net, a, b, total, 4000, Duration::from_millis(2));
        net.run_for(Duration::from_secs(40));
        let r = net.engine(b).app::<Receiver>(rx).unwrap();
        let (intact, damaged) = (r.intact, r.damaged);
        let ip = net.engine(b).proto_id("ip").unwrap();
        let c = net.engine(b).counters(ip).clone();
        let timeouts = c.drops().get("reassembly-timeout");
        assert_eq!(damaged, 0, "{arch}: reassembly never mixes datagrams up");
        assert!(
            intact > total / 2,
            "{arch}: most whole datagrams arrive ({intact})"
        );
        assert!(
            timeouts > 0,
            "{arch}: datagrams missing a fragment time out"
        );
        assert_eq!(
            intact + timeouts,
            total,
            "{arch}: each datagram is delivered whole or times out in reassembly"
        );
    }
}

#[test]
fn arp_resolves_through_heavy_loss_and_releases_what_it_held() {
    for arch in Arch::ALL {
        let params = LinkParams {
            delay: Duration::from_millis(1),
            loss: 0.3,
            ..LinkParams::default()
        };
        let (mut net, a, b, _) = pair(arch, 3, params);
        let (_, rx) = transfer(&mut net, a, b, 3, 100, Duration::from_micros(10));
        net.run_for(Duration::from_secs(5));
        let arp = net.engine(a).proto_id("arp").unwrap();
        let requests = net.engine(a).counters(arp).events().get("requests");
        let r = net.engine(b).app::<Receiver>(rx).unwrap();
        assert!(requests >= 1, "{arch}: ARP asked");
        assert!(
            r.intact >= 1,
            "{arch}: held datagrams went out once ARP resolved"
        );
    }
}

/// Notes the order in which it hears of sessions and of data.
#[derive(Default)]
struct Order {
    log: Vec<&'static str>,
}

impl App for Order {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {
        self.log.push("data");
    }

    fn event(&mut self, event: strata::AppEvent, _: &mut AppCx) {
        if let strata::AppEvent::OpenDone { .. } = event {
            self.log.push("open-done");
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn a_listener_hears_of_a_new_session_before_its_first_datagram() {
    for arch in Arch::ALL {
        let (mut net, a, b, _) = pair(arch, 2, LinkParams::delay(Duration::from_millis(1)));
        let udp = net.engine(b).proto_id("udp").unwrap();
        let listener = net.engine(b).add_app(Box::new(Order::default()));
        net.engine(b)
            .with_app(listener, |_, cx| {
                cx.open_enable(udp, Participants::local([Addr::Port(PORT)]), Qos::default())
            })
            .unwrap()
            .unwrap();
        sender(&mut net, a, 2, 100, Duration::from_millis(1));
        net.run_for(Duration::from_millis(50));
        let log = &net.engine(b).app::<Order>(listener).unwrap().log;
        assert_eq!(log, &["open-done", "data", "data"], "{arch}");
    }
}

#[test]
fn a_blocking_udp_socket_talks_to_an_echo_server_on_the_real_time_network() {
    let params = LinkParams::delay(Duration::from_millis(1));
    let (mut net, a, b, _) = pair(Arch::Llm, 1, params);
    UdpEcho::install(net.engine(b), 7).unwrap();
    let network = Network::start(net);
    let mut socket = UdpSocket::bind(&network.host(a), 0).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(5)));
    assert_eq!(
        *socket.local_addr().ip(),
        HostParams::numbered(1).address.address()
    );
    let server = SocketAddrV4::new(HostParams::numbered(2).address.address(), 7);
    for i in 0..20u8 {
        socket.send_to(&[i; 300], server).unwrap();
        let mut buf = [0u8; 2048];
        let (n, from) = socket.recv_from(&mut buf).unwrap();
        assert_eq!((n, from), (300, server));
        assert!(
            buf[..n].iter().all(|&b| b == i),
            "echo {i} came back intact"
        );
    }
    socket.connect(server);
    socket.send(b"connected").unwrap();
    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"connected");
    drop(socket);
    let mut net = network.stop();
    let udp = net.engine(a).proto_id("udp").unwrap();
    assert_eq!(net.engine(a).counters(udp).packets_in, 21);
}
