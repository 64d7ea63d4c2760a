//! Seed 001's transport as the protocol node `xport` over Strata's own
//! `udp/ip/eth` (issue 14 (b)): a file between two hosts on the simulator's
//! lossy link in virtual time, under every architecture, hash checked and
//! every refused datagram counted; forged datagrams at the node's ports;
//! and the blocking [`StackStream`] on the in-memory network in real time.

use std::any::Any;
use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use strata::core::Reply;
use strata::link::{HostId, LinkParams, SimNet};
use strata::xport_stack::{StackListener, StackStream, Taken, XportOp, XportReport};
use strata::{
    Addr, App, AppCx, AppEvent, Arch, Control, HostBuilder, HostParams, Message, Network,
    PacketMeta, Participants, Qos, SessionRef,
};

const PORT: u16 = 7100;
const BUF: usize = 256 << 10;
const BUFS: usize = 4;

fn host(n: u8, arch: Arch) -> strata::Engine {
    HostBuilder::spec(
        "xport/udp/ip/eth",
        HostParams::numbered(n),
        "net0",
        strata::link::SIM,
    )
    .arch(arch)
    .seed(u64::from(n))
    .option("xport", "deterministic", true)
    .option("xport", "data_sockets", 2)
    .build()
    .unwrap()
}

fn data(len: usize, seed: u64) -> Bytes {
    let mut d = vec![0u8; len];
    ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut d);
    Bytes::from(d)
}

fn take(cx: &mut AppCx, s: SessionRef) -> Taken {
    match cx.control(
        s.proto,
        Some(s.sess),
        Control::Private(Box::new(XportOp::Take)),
    ) {
        Ok(Reply::Private(b)) => *b.downcast::<Taken>().unwrap(),
        other => panic!("take: {other:?}"),
    }
}

fn op(cx: &mut AppCx, s: SessionRef, o: XportOp) {
    cx.control(s.proto, Some(s.sess), Control::Private(Box::new(o)))
        .unwrap();
}

fn report(cx: &mut AppCx, s: SessionRef) -> Option<XportReport> {
    match cx.control(
        s.proto,
        Some(s.sess),
        Control::Private(Box::new(XportOp::Report)),
    ) {
        Ok(Reply::Private(r)) => r.downcast().ok().map(|r| *r),
        _ => None,
    }
}

/// The sending application: keeps `BUFS` buffers with the node, finishes, closes.
struct Sender {
    data: Bytes,
    session: Option<SessionRef>,
    next: usize,
    in_flight: usize,
    finished: bool,
    closed: bool,
    lost: bool,
    report: Option<XportReport>,
}

impl Sender {
    fn feed(&mut self, cx: &mut AppCx) {
        let Some(s) = self.session else { return };
        let t = take(cx, s);
        self.in_flight -= t.done.len();
        self.closed |= t.closed;
        self.lost |= t.lost.is_some();
        if t.closed {
            self.report = report(cx, s);
        }
        while self.in_flight < BUFS && self.next < self.data.len() {
            let end = (self.next + BUF).min(self.data.len());
            let b = self.data.slice(self.next..end);
            cx.control(
                s.proto,
                Some(s.sess),
                Control::Write(Message::from_bytes(b)),
            )
            .unwrap();
            self.next = end;
            self.in_flight += 1;
        }
        if self.next == self.data.len() && !self.finished {
            self.finished = true;
            op(cx, s, XportOp::Finish);
        }
    }
}

impl App for Sender {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn event(&mut self, e: AppEvent, cx: &mut AppCx) {
        match e {
            AppEvent::Closed { error: Some(_), .. } => self.lost = true,
            _ => self.feed(cx),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The receiving application: posts `BUFS` buffers, hashes what comes back.
#[derive(Default)]
struct Receiver {
    session: Option<SessionRef>,
    hash: Sha256,
    bytes: usize,
    digest: Option<[u8; 32]>,
    closed: bool,
    report: Option<XportReport>,
}

impl App for Receiver {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn event(&mut self, e: AppEvent, cx: &mut AppCx) {
        if let AppEvent::OpenDone { session, .. } = e {
            self.session = Some(session);
            for _ in 0..BUFS {
                op(cx, session, XportOp::Post(vec![0u8; BUF]));
            }
            op(cx, session, XportOp::Finish);
        }
        let Some(s) = self.session else { return };
        let t = take(cx, s);
        for (buf, len) in t.filled {
            self.hash.update(&buf[..len]);
            self.bytes += len;
            op(cx, s, XportOp::Post(buf));
        }
        if t.peer_finished && self.digest.is_none() {
            self.digest = Some(std::mem::take(&mut self.hash).finalize().into());
            self.report = report(cx, s);
        }
        self.closed |= t.closed;
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

struct Run {
    net: SimNet,
    a: HostId,
    b: HostId,
    sender: strata::AppId,
    receiver: strata::AppId,
}

fn start(arch: Arch, params: LinkParams, bytes: usize, seed: u64) -> Run {
    let mut net = SimNet::new(seed);
    let a = net.add_host("a", host(1, arch));
    let b = net.add_host("b", host(2, arch));
    net.connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    let (sender, receiver) = transfer(&mut net, (a, b, 2), PORT, bytes, seed);
    Run {
        net,
        a,
        b,
        sender,
        receiver,
    }
}

/// A receiver listening on `port` of host `b` (`HostParams::numbered(nb)`)
/// and a sender of `bytes` connecting to it from `a`: their app ids.
fn transfer(
    net: &mut SimNet,
    (a, b, nb): (HostId, HostId, u8),
    port: u16,
    bytes: usize,
    seed: u64,
) -> (strata::AppId, strata::AppId) {
    let xb = net.engine(b).proto_id("xport").unwrap();
    let receiver = net.engine(b).add_app(Box::new(Receiver::default()));
    net.engine(b)
        .with_app(receiver, |_, cx| {
            cx.open_enable(xb, Participants::local([Addr::Port(port)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let xa = net.engine(a).proto_id("xport").unwrap();
    let server = HostParams::numbered(nb).address.address();
    let sender = net.engine(a).add_app(Box::new(Sender {
        data: data(bytes, seed),
        session: None,
        next: 0,
        in_flight: 0,
        finished: false,
        closed: false,
        lost: false,
        report: None,
    }));
    net.engine(a)
        .with_app(sender, |app, cx| {
            let parts = Participants::remote([Addr::Ip(server), Addr::Port(port)]);
            let s = cx.open(xa, parts, Qos::default()).unwrap();
            app.as_any_mut().downcast_mut::<Sender>().unwrap().session = Some(s);
        })
        .unwrap();
    (sender, receiver)
}

/// Closes the receiving application's session, as an application does.
fn close_receiver(net: &mut SimNet, b: HostId, rb: strata::AppId) {
    let s = net.engine(b).app::<Receiver>(rb).unwrap().session.unwrap();
    net.engine(b)
        .with_app(rb, |_, cx| cx.close(s))
        .unwrap()
        .unwrap();
}

fn done(net: &mut SimNet, a: HostId, b: HostId, sa: strata::AppId, rb: strata::AppId) -> bool {
    let s = net.engine(a).app::<Sender>(sa).unwrap();
    let sent = s.closed || s.lost;
    let r = net.engine(b).app::<Receiver>(rb).unwrap();
    sent && (r.closed || r.digest.is_some())
}

#[test]
fn a_file_crosses_a_lossy_link_over_xport_udp_ip_eth_under_every_architecture() {
    let bytes = 4 << 20;
    for arch in Arch::ALL {
        let params = LinkParams {
            delay: Duration::from_millis(5),
            loss: 0.02,
            rate: 200_000_000,
            ..LinkParams::default()
        };
        let mut r = start(arch, params, bytes, 7);
        let (a, b, sa, rb) = (r.a, r.b, r.sender, r.receiver);
        let ok = r
            .net
            .run_until_condition(|n| done(n, a, b, sa, rb), Duration::from_secs(120));
        assert!(
            ok,
            "{arch}: the transfer did not end in 120 s of virtual time"
        );
        let want: [u8; 32] = Sha256::digest(data(bytes, 7)).into();
        let s = r.net.engine(a).app::<Sender>(sa).unwrap();
        assert!(s.closed && !s.lost, "{arch}: the sender's close completed");
        let sent = s.report.clone().unwrap().stats;
        assert!(
            sent.retransmitted > 0 && sent.naks_received > 0,
            "{arch}: 2% loss and nothing repaired: {sent:?}"
        );
        eprintln!(
            "{arch}: {bytes} bytes in {:?} of virtual time, {} data packets, {} resent",
            r.net.now().saturating_since(strata::Instant::ZERO),
            sent.data_sent,
            sent.retransmitted
        );
        let rx = r.net.engine(b).app::<Receiver>(rb).unwrap();
        assert_eq!(rx.bytes, bytes, "{arch}");
        assert_eq!(rx.digest, Some(want), "{arch}: SHA-256 of what arrived");
        let report = rx.report.clone().unwrap();
        assert_eq!(report.data_ports.len(), 2, "{arch}: two data ports");
        // Every byte accepted once, copied once from its frame to its
        // final offset: the in-memory link hands header and payload over
        // as separate pieces, and none was gathered first.
        eprintln!("{arch}: receiver's input {:?}", report.input);
        assert_eq!(
            report.input.placed, bytes as u64,
            "{arch}: {:?}",
            report.input
        );
        assert_eq!(report.input.copied, 0, "{arch}: {:?}", report.input);
        // 2% loss each way: the receiver asked for repairs, and the
        // repairs' duplicates (if any) were refused by reason, which the
        // engine counted against the node under the same names.
        let xb = r.net.engine(b).proto_id("xport").unwrap();
        let counted = r.net.engine(b).counters(xb).drops();
        for (reason, n) in report.drops.iter().filter(|&(_, n)| n > 0) {
            assert!(
                counted.get(reason.name()) >= n,
                "{arch}: the transport refused {n} for {}, the engine counted {}",
                reason.name(),
                counted.get(reason.name())
            );
        }
        let xa = r.net.engine(a).proto_id("xport").unwrap();
        assert!(
            r.net.engine(a).counters(xa).packets_in > 0,
            "{arch}: the sender heard its peer"
        );
    }
}

#[test]
fn control_datagrams_are_read_before_the_data_that_arrived_with_them() {
    // Two transfers at once, a to b and b to a: each host's batches hold
    // data for its receiving end and control (acknowledgements) for its
    // sending end, often data first (the link's jitter bunches frames that
    // would overtake each other into one delivery). The node reads the
    // control datagrams of a batch first (§3.6); both files arrive intact,
    // every byte copied once from its frame to its place.
    let params = LinkParams {
        delay: Duration::from_millis(2),
        jitter: Duration::from_millis(1),
        ..LinkParams::default()
    };
    let bytes = 2 << 20;
    let mut net = SimNet::new(11);
    let a = net.add_host("a", host(1, Arch::Llm));
    let b = net.add_host("b", host(2, Arch::Llm));
    net.connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    let (sa, rb) = transfer(&mut net, (a, b, 2), PORT, bytes, 1);
    let (sb, ra) = transfer(&mut net, (b, a, 1), PORT + 1, bytes, 2);
    let ok = net.run_until_condition(
        |n| done(n, a, b, sa, rb) && done(n, b, a, sb, ra),
        Duration::from_secs(60),
    );
    assert!(ok, "both transfers ended");
    for (h, s, r, seed) in [(a, sa, ra, 2), (b, sb, rb, 1)] {
        let sender = net.engine(h).app::<Sender>(s).unwrap();
        assert!(sender.closed && !sender.lost);
        let sent = sender.report.clone().unwrap().input;
        let rx = net.engine(h).app::<Receiver>(r).unwrap();
        assert_eq!(rx.digest, Some(Sha256::digest(data(bytes, seed)).into()));
        let got = rx.report.clone().unwrap().input;
        eprintln!("host {h:?}: sending end {sent:?}, receiving end {got:?}");
        assert!(
            sent.control_first > 0,
            "acknowledgements were read ahead of data: {sent:?}"
        );
        assert_eq!((got.placed, got.copied), (bytes as u64, 0), "{got:?}");
    }
}

#[test]
fn the_blocking_stream_moves_a_file_on_the_real_time_network_and_gives_buffers_back() {
    let params = LinkParams {
        delay: Duration::from_millis(1),
        loss: 0.01,
        ..LinkParams::default()
    };
    let mut net = SimNet::new(3);
    let a = net.add_host("a", host(1, Arch::Llm));
    let b = net.add_host("b", host(2, Arch::Llm));
    net.connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    let network = Network::start(net);
    let mut listener = StackListener::bind(&network.host(b), PORT).unwrap();
    assert!(
        StackListener::bind(&network.host(b), PORT).is_err(),
        "one listener per control port"
    );
    let bytes = 2 << 20;
    let server = std::thread::spawn(move || {
        let mut s = listener.accept_timeout(Duration::from_secs(10)).unwrap();
        let mut h = Sha256::new();
        let mut got = 0;
        s.post_recv(vec![0u8; BUF]).unwrap();
        loop {
            let (buf, n) = s.recv(vec![0u8; BUF]).unwrap();
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            got += n;
        }
        let drops = s.drops();
        s.close().unwrap();
        (got, <[u8; 32]>::from(h.finalize()), drops)
    });
    let to = SocketAddrV4::new(HostParams::numbered(2).address.address(), PORT);
    let mut c = StackStream::connect(&network.host(a), to).unwrap();
    let file = data(bytes, 9);
    let mut back = 0;
    for chunk in file.chunks(BUF) {
        back += c.send(vec![file.slice_ref(chunk)]).unwrap().len();
    }
    back += c.finish().unwrap().len();
    assert_eq!(back, bytes.div_ceil(BUF), "every buffer given back once");
    let stats = c.stats();
    c.close().unwrap();
    let (got, digest, _drops) = server.join().unwrap();
    assert_eq!(got, bytes);
    assert_eq!(digest, <[u8; 32]>::from(Sha256::digest(&file)));
    assert!(stats.data_sent > 0, "{stats:?}");
    network.stop();
}

/// Sends random datagrams (random lengths up to 1,500 bytes, random bytes)
/// from UDP port 9999 to every port of the peer's end, one every 100 µs.
struct Junk {
    to: Vec<SocketAddrV4>,
    sessions: Vec<SessionRef>,
    rng: ChaCha8Rng,
    left: u64,
    sent: u64,
}

impl App for Junk {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn timer(&mut self, _: u64, cx: &mut AppCx) {
        if self.sessions.is_empty() {
            let udp = cx.proto("udp").unwrap();
            for to in &self.to {
                let parts = Participants::remote([Addr::Ip(*to.ip()), Addr::Port(to.port())])
                    .with_local([Addr::Port(9999)]);
                self.sessions
                    .push(cx.open(udp, parts, Qos::default()).unwrap());
            }
        }
        if self.left == 0 {
            return;
        }
        let len = self.rng.random_range(0..1500);
        let mut d = vec![0u8; len];
        self.rng.fill_bytes(&mut d);
        let s = self.sessions[self.sent as usize % self.sessions.len()];
        cx.send(s, Message::from(d));
        self.sent += 1;
        self.left -= 1;
        let at = cx.now() + Duration::from_micros(100);
        cx.set_timer(at, 0);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn ports_of(net: &mut SimNet, h: HostId, s: SessionRef) -> Vec<u16> {
    let r = net
        .engine(h)
        .control(
            s.proto,
            Some(s.sess),
            Control::Private(Box::new(XportOp::Report)),
        )
        .unwrap();
    let Reply::Private(r) = r else {
        panic!("a report")
    };
    let r = r.downcast::<XportReport>().unwrap();
    std::iter::once(r.control_port)
        .chain(r.data_ports)
        .collect()
}

#[test]
fn random_datagrams_at_both_ends_ports_are_counted_by_reason_and_the_file_arrives_intact() {
    let bytes = 2 << 20;
    let params = LinkParams {
        // No loss, so every junk datagram arrives and must be counted.
        delay: Duration::from_millis(2),
        rate: 100_000_000,
        ..LinkParams::default()
    };
    let mut r = start(Arch::Llm, params, bytes, 11);
    let (a, b, sa, rb) = (r.a, r.b, r.sender, r.receiver);
    assert!(r.net.run_until_condition(
        |n| n.engine(b).app::<Receiver>(rb).unwrap().session.is_some(),
        Duration::from_secs(5)
    ));
    let client = r.net.engine(a).app::<Sender>(sa).unwrap().session.unwrap();
    let server = r
        .net
        .engine(b)
        .app::<Receiver>(rb)
        .unwrap()
        .session
        .unwrap();
    let (ip_a, ip_b) = (
        HostParams::numbered(1).address.address(),
        HostParams::numbered(2).address.address(),
    );
    let mut junk = Vec::new();
    for (from, to, ip, sess) in [(a, b, ip_b, server), (b, a, ip_a, client)] {
        let to_ports = ports_of(&mut r.net, to, sess);
        assert_eq!(to_ports.len(), 3, "a control and two data ports");
        let app = r.net.engine(from).add_app(Box::new(Junk {
            to: to_ports.iter().map(|&p| SocketAddrV4::new(ip, p)).collect(),
            sessions: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(u64::from(ip.octets()[3])),
            left: 3000,
            sent: 0,
        }));
        let now = r.net.engine(from).now();
        r.net
            .engine(from)
            .with_app(app, |_, cx| cx.set_timer(now, 0))
            .unwrap();
        junk.push((from, to, app));
    }
    let ok = r
        .net
        .run_until_condition(|n| done(n, a, b, sa, rb), Duration::from_secs(60));
    assert!(ok, "the transfer ended under the rain");
    r.net.run_for(Duration::from_millis(500));
    let want: [u8; 32] = Sha256::digest(data(bytes, 11)).into();
    let rx = r.net.engine(b).app::<Receiver>(rb).unwrap();
    assert_eq!(rx.digest, Some(want), "SHA-256 of what arrived");
    assert!(r.net.engine(a).app::<Sender>(sa).unwrap().closed);
    for (from, to, app) in junk {
        let sent = r.net.engine(from).app::<Junk>(app).unwrap().sent;
        assert_eq!(sent, 3000, "all the junk left");
        let x = r.net.engine(to).proto_id("xport").unwrap();
        let drops = r.net.engine(to).counters(x).drops();
        let names: Vec<_> = drops.iter().filter(|&(_, n)| n > 0).collect();
        // Every junk datagram refused by the transport, under its reason
        // (random bytes are mostly an unknown version or type); repairs'
        // duplicates add to the count, hence at least.
        assert!(
            drops.total() >= sent,
            "{} of {sent} counted: {names:?}",
            drops.total()
        );
        assert!(
            drops.get("unsupported") > 0 && drops.get("truncated") > 0,
            "{names:?}"
        );
    }
}

#[test]
fn the_node_refuses_bad_options_by_name() {
    for (key, value) in [
        ("data_sockets", "0"),
        ("data_sockets", "17"),
        ("recovery", "fast"),
    ] {
        let e = HostBuilder::spec(
            "xport/udp/ip/eth",
            HostParams::numbered(1),
            "net0",
            strata::link::SIM,
        )
        .option("xport", key, value)
        .build()
        .err()
        .unwrap_or_else(|| panic!("{key}={value} accepted"));
        let text = e.to_string();
        assert!(text.contains("xport") && text.contains(key), "{text}");
    }
}

#[test]
fn a_receiver_that_closes_early_resets_the_sender_at_once() {
    let params = LinkParams {
        delay: Duration::from_millis(5),
        rate: 100_000_000,
        ..LinkParams::default()
    };
    let mut r = start(Arch::Llm, params, 16 << 20, 12);
    let (a, b, sa, rb) = (r.a, r.b, r.sender, r.receiver);
    assert!(r.net.run_until_condition(
        |n| n.engine(b).app::<Receiver>(rb).unwrap().bytes > 0,
        Duration::from_secs(5)
    ));
    close_receiver(&mut r.net, b, rb);
    let closed_at = r.net.now();
    assert!(r.net.run_until_condition(
        |n| n.engine(a).app::<Sender>(sa).unwrap().lost,
        Duration::from_secs(5)
    ));
    let took = r.net.now().saturating_since(closed_at);
    assert!(
        took < Duration::from_millis(100),
        "the sender heard of it after {took:?}, not at the idle time-out"
    );
    let x = r.net.engine(b).proto_id("xport").unwrap();
    let node = r
        .net
        .engine(b)
        .protocol::<strata::xport_stack::XportNode>(x)
        .unwrap();
    assert_eq!(node.ends(), 1, "the listener stays; the connection is gone");
}

#[test]
fn data_packets_fill_the_mtu_ip_reports_and_no_more() {
    // The node asks IP for the payload its link carries whole: 1500-byte
    // Ethernet leaves 1,444 bytes of data per packet, ethdaa's 14-byte
    // extension 1,430 (a node assuming 1,444 there made IP cut every data
    // packet in two). A listener on port 0 takes a free one.
    for (stack, payload) in [("xport/udp/ip/eth", 1444u64), ("xport/udp/ip/ethdaa", 1430)] {
        let host = |n: u8| {
            HostBuilder::spec(stack, HostParams::numbered(n), "net0", strata::link::SIM)
                .seed(u64::from(n))
                .build()
                .unwrap()
        };
        let mut net = SimNet::new(5);
        let a = net.add_host("a", host(1));
        let b = net.add_host("b", host(2));
        net.connect(
            (a, "net0"),
            (b, "net0"),
            LinkParams::default(),
            LinkParams::default(),
        )
        .unwrap();
        let network = Network::start(net);
        let mut listener = StackListener::bind(&network.host(b), 0).unwrap();
        let port = listener.port();
        assert!(
            port >= 49_152,
            "{stack}: port {port} outside the dynamic range"
        );
        let bytes = 1 << 20;
        let server = std::thread::spawn(move || {
            let mut s = listener.accept_timeout(Duration::from_secs(10)).unwrap();
            let mut got = 0;
            loop {
                let (_, n) = s.recv(vec![0u8; BUF]).unwrap();
                if n == 0 {
                    break;
                }
                got += n;
            }
            s.close().unwrap();
            got
        });
        let to = SocketAddrV4::new(HostParams::numbered(2).address.address(), port);
        let mut c = StackStream::connect(&network.host(a), to).unwrap();
        let file = data(bytes, 11);
        for chunk in file.chunks(BUF) {
            c.send(vec![file.slice_ref(chunk)]).unwrap();
        }
        c.finish().unwrap();
        let stats = c.stats();
        c.close().unwrap();
        assert_eq!(server.join().unwrap(), bytes, "{stack}");
        network.stop();
        // Every packet full but the last of each buffer (and resent ones).
        let full = stats.bytes_sent / stats.data_sent;
        assert!(
            full <= payload && full > payload - 20,
            "{stack}: {} bytes in {} data packets, {full} each; want {payload}",
            stats.bytes_sent,
            stats.data_sent
        );
    }
}

#[test]
fn a_listeners_connections_outlive_it_and_its_port_comes_back_after_them() {
    let params = LinkParams {
        delay: Duration::from_millis(5),
        rate: 100_000_000,
        ..LinkParams::default()
    };
    let bytes = 4 << 20;
    let mut r = start(Arch::Llm, params, bytes, 14);
    let (a, b, sa, rb) = (r.a, r.b, r.sender, r.receiver);
    assert!(r.net.run_until_condition(
        |n| n.engine(b).app::<Receiver>(rb).unwrap().bytes > 0,
        Duration::from_secs(5)
    ));
    // The application closes its listener mid-transfer.
    let xb = r.net.engine(b).proto_id("xport").unwrap();
    let listen = |net: &mut SimNet, app, enable: bool| {
        net.engine(b)
            .with_app(app, |_, cx| {
                let parts = Participants::local([Addr::Port(PORT)]);
                if enable {
                    cx.open_enable(xb, parts, Qos::default())
                } else {
                    cx.open_disable(xb, parts, Qos::default())
                }
            })
            .unwrap()
    };
    listen(&mut r.net, rb, false).unwrap();
    assert!(
        listen(&mut r.net, rb, false).is_err(),
        "a closed listener is gone for its application"
    );
    // A new set-up to the port is refused while the old connection runs.
    let xa = r.net.engine(a).proto_id("xport").unwrap();
    let late = r.net.engine(a).add_app(Box::new(Receiver::default()));
    let server = HostParams::numbered(2).address.address();
    r.net
        .engine(a)
        .with_app(late, |_, cx| {
            let parts = Participants::remote([Addr::Ip(server), Addr::Port(PORT)]);
            cx.open(xa, parts, Qos::default())
        })
        .unwrap()
        .unwrap();
    assert!(
        r.net
            .run_until_condition(|n| done(n, a, b, sa, rb), Duration::from_secs(60))
    );
    let s = r.net.engine(a).app::<Sender>(sa).unwrap();
    assert!(s.closed && !s.lost, "the accepted connection completed");
    let got = r.net.engine(b).app::<Receiver>(rb).unwrap();
    assert_eq!(got.bytes, bytes);
    assert_eq!(
        got.digest,
        Some(<[u8; 32]>::from(Sha256::digest(data(bytes, 14))))
    );
    let refused = r.net.engine(b).counters(xb).drops().get("unexpected");
    assert!(refused > 0, "the late CONNECTs were dropped: {refused}");
    let node = |net: &mut SimNet| {
        net.engine(b)
            .protocol::<strata::xport_stack::XportNode>(xb)
            .unwrap()
            .ends()
    };
    assert_eq!(
        node(&mut r.net),
        1,
        "the listener's end stays for its connection"
    );
    assert!(
        listen(&mut r.net, rb, true).is_err(),
        "its ports are taken while it has a connection"
    );
    // The application closes its connection: the end goes, the port is free.
    close_receiver(&mut r.net, b, rb);
    assert_eq!(node(&mut r.net), 0);
    listen(&mut r.net, rb, true).unwrap();
}

#[test]
fn an_expected_peers_set_up_skips_the_cookie_round_trip_on_a_strata_host() {
    // One-way delay 20 ms: the cookie's RETRY costs a round trip (40 ms)
    // before the first data arrive (virtual time: the same every run; the
    // client's timers shift its sends by a little more or less).
    let first_data = |expect: bool| {
        let params = LinkParams {
            delay: Duration::from_millis(20),
            ..LinkParams::default()
        };
        let mut r = start(Arch::Llm, params, 1 << 20, 15);
        let (b, rb) = (r.b, r.receiver);
        if expect {
            let xb = r.net.engine(b).proto_id("xport").unwrap();
            let peer = HostParams::numbered(1).address.address().into();
            let op = XportOp::Expect { port: PORT, peer };
            r.net
                .engine(b)
                .with_app(rb, |_, cx| {
                    cx.control(xb, None, Control::Private(Box::new(op)))
                })
                .unwrap()
                .unwrap();
        }
        assert!(r.net.run_until_condition(
            |n| n.engine(b).app::<Receiver>(rb).unwrap().bytes > 0,
            Duration::from_secs(5)
        ));
        r.net.now().saturating_since(strata::core::Instant::ZERO)
    };
    let (cookie, expected) = (first_data(false), first_data(true));
    let saved = cookie.saturating_sub(expected);
    assert!(
        saved >= Duration::from_millis(30) && saved <= Duration::from_millis(45),
        "first data after {cookie:?} with the cookie, {expected:?} without"
    );
}

#[test]
fn a_blocking_listener_dropped_after_its_accept_leaves_the_stream_running() {
    let mut net = SimNet::new(16);
    let a = net.add_host("a", host(1, Arch::Llm));
    let b = net.add_host("b", host(2, Arch::Llm));
    let params = LinkParams {
        delay: Duration::from_millis(1),
        ..LinkParams::default()
    };
    net.connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    let network = Network::start(net);
    let hb = network.host(b);
    let mut listener = StackListener::bind(&hb, PORT).unwrap();
    let bytes = 1 << 20;
    let server = std::thread::spawn(move || {
        let mut s = listener.accept_timeout(Duration::from_secs(10)).unwrap();
        drop(listener);
        let mut got = Vec::new();
        loop {
            let (buf, n) = s.recv(vec![0u8; BUF]).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        s.close().unwrap();
        got
    });
    let to = SocketAddrV4::new(HostParams::numbered(2).address.address(), PORT);
    let mut c = StackStream::connect(&network.host(a), to).unwrap();
    let file = data(bytes, 16);
    for chunk in file.chunks(BUF) {
        c.send(vec![file.slice_ref(chunk)]).unwrap();
    }
    c.finish().unwrap();
    c.close().unwrap();
    assert!(server.join().unwrap() == file[..], "the stream differs");
    // Both gone: the port is free again.
    StackListener::bind(&hb, PORT).unwrap();
    network.stop();
}
