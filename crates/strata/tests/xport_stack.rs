//! Seed 001's transport as the protocol node `xport` over Strata's own
//! `udp/ip/eth` (issue 14 (b)): a file between two hosts on the simulator's
//! lossy link in virtual time, under every architecture, hash checked and
//! every refused datagram counted; forged datagrams at the node's ports;
//! and the blocking [`StackStream`] on the in-memory network in real time.

use std::any::Any;
use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
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
    let xb = net.engine(b).proto_id("xport").unwrap();
    let receiver = net.engine(b).add_app(Box::new(Receiver::default()));
    net.engine(b)
        .with_app(receiver, |_, cx| {
            cx.open_enable(xb, Participants::local([Addr::Port(PORT)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let xa = net.engine(a).proto_id("xport").unwrap();
    let server = HostParams::numbered(2).address.address();
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
            let parts = Participants::remote([Addr::Ip(server), Addr::Port(PORT)]);
            let s = cx.open(xa, parts, Qos::default()).unwrap();
            app.as_any_mut().downcast_mut::<Sender>().unwrap().session = Some(s);
        })
        .unwrap();
    Run {
        net,
        a,
        b,
        sender,
        receiver,
    }
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
