//! Opening connections: a simultaneous open, a refused one, one that times
//! out, and a storm of connections that overflows the listener's backlog
//! while an accepted connection goes on transferring.

mod tcp_common;

use std::any::Any;
use std::time::Duration;

use strata::link::{HostId, LinkParams, SimNet};
use strata::proto::tcp::{self, state::State};
use strata::{
    Addr, App, AppCx, AppEvent, Arch, Message, PacketMeta, Participants, Qos, SessionRef, UpiError,
};
use tcp_common::{Peer, Transfer, control, finish, host, ip, start};

fn net(link: LinkParams, tcp: &[(&str, toml::Value)]) -> (SimNet, HostId, HostId) {
    let mut net = SimNet::new(3);
    let a = net.add_host("a", host(1, Arch::Llm, "tcp/ip/eth", 3, tcp));
    let b = net.add_host("b", host(2, Arch::Llm, "tcp/ip/eth", 3, tcp));
    net.connect((a, "net0"), (b, "net0"), link.clone(), link)
        .unwrap();
    (net, a, b)
}

fn open(
    net: &mut SimNet,
    h: HostId,
    app: strata::AppId,
    to: u8,
    port: u16,
    local: u16,
) -> SessionRef {
    let e = net.engine(h);
    let tcp = e.proto_id("tcp").unwrap();
    e.with_app(app, |_, cx| {
        let parts = Participants::remote([Addr::Ip(ip(to)), Addr::Port(port)])
            .with_local([Addr::Port(local)]);
        cx.open(tcp, parts, Qos::default())
    })
    .unwrap()
    .unwrap()
}

#[test]
fn a_simultaneous_open_connects_both_ends_without_a_listener() {
    let (mut net, a, b) = net(LinkParams::delay(Duration::from_millis(10)), &[]);
    // ARP first, so that the two SYNs really cross on the wire.
    let pa = net.engine(a).add_app(Box::new(Peer::default()));
    let pb = net.engine(b).add_app(Box::new(Peer::default()));
    open(&mut net, a, pa, 2, 9, 0);
    net.run_for(Duration::from_millis(100));
    let sa = open(&mut net, a, pa, 2, 6000, 5000);
    let sb = open(&mut net, b, pb, 1, 5000, 6000);
    net.run_for(Duration::from_millis(500));
    for (h, app, s) in [(a, pa, sa), (b, pb, sb)] {
        let e = net.engine(h);
        let events = &e.app::<Peer>(app).unwrap().events;
        assert!(events.contains(&AppEvent::Connected(s)), "{events:?}");
        let tcp = e.protocol::<tcp::Tcp>(s.proto).unwrap();
        assert_eq!(tcp.state_of(s.sess), Some(State::Established));
        assert_eq!(e.counters(s.proto).events().get("passive-open"), 0);
    }
    control(
        net.engine(a),
        pa,
        sa,
        tcp::Write(Message::from_slice(b"from a")),
    )
    .unwrap();
    control(
        net.engine(b),
        pb,
        sb,
        tcp::Write(Message::from_slice(b"from b")),
    )
    .unwrap();
    net.run_for(Duration::from_millis(100));
    assert_eq!(net.engine(b).app::<Peer>(pb).unwrap().data, b"from a");
    assert_eq!(net.engine(a).app::<Peer>(pa).unwrap().data, b"from b");
}

#[test]
fn a_connection_to_a_closed_port_is_refused_by_a_reset() {
    let (mut net, a, b) = net(LinkParams::delay(Duration::from_millis(1)), &[]);
    let pa = net.engine(a).add_app(Box::new(Peer::default()));
    let s = open(&mut net, a, pa, 2, 81, 0);
    net.run_for(Duration::from_millis(100));
    let events = &net.engine(a).app::<Peer>(pa).unwrap().events;
    assert_eq!(
        events,
        &[AppEvent::Closed {
            session: s,
            error: Some(UpiError::Refused)
        }]
    );
    let tcp_b = net.engine(b).proto_id("tcp").unwrap();
    assert_eq!(net.engine(b).counters(tcp_b).events().get("reset-sent"), 1);
    assert_eq!(
        net.engine(a)
            .protocol::<tcp::Tcp>(s.proto)
            .unwrap()
            .connection_count(),
        0
    );
}

#[test]
fn an_unanswered_connection_times_out_after_its_syn_retries() {
    let dead = LinkParams {
        loss: 1.0,
        ..LinkParams::default()
    };
    let (mut net, a, _) = net(dead, &[("syn_retries", 2.into())]);
    let pa = net.engine(a).add_app(Box::new(Peer::default()));
    let s = open(&mut net, a, pa, 2, 80, 0);
    net.run_for(Duration::from_millis(6_900));
    assert!(
        net.engine(a).app::<Peer>(pa).unwrap().events.is_empty(),
        "1 + 2 + 4 s not over yet"
    );
    net.run_for(Duration::from_millis(200));
    let events = &net.engine(a).app::<Peer>(pa).unwrap().events;
    assert_eq!(
        events,
        &[AppEvent::Closed {
            session: s,
            error: Some(UpiError::TimedOut)
        }]
    );
}

/// Connects, and closes its side once connected.
struct Client {
    connected: bool,
    closed: Option<Option<UpiError>>,
}

impl App for Client {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match event {
            AppEvent::Connected(s) => {
                self.connected = true;
                let _ = cx.control(
                    s.proto,
                    Some(s.sess),
                    strata::Control::Private(Box::new(tcp::Shutdown)),
                );
            }
            AppEvent::Closed { error, .. } => self.closed = Some(error),
            _ => {}
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Accepts connections on port 80 and closes each when its peer has.
#[derive(Default)]
struct Acceptor {
    accepted: usize,
}

impl App for Acceptor {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, _: &mut AppCx) {}

    fn event(&mut self, event: AppEvent, cx: &mut AppCx) {
        match event {
            AppEvent::OpenDone { .. } => self.accepted += 1,
            AppEvent::PeerClosed(s) => {
                let _ = cx.control(
                    s.proto,
                    Some(s.sess),
                    strata::Control::Private(Box::new(tcp::Shutdown)),
                );
            }
            _ => {}
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
fn a_connection_storm_overflows_the_backlog_without_breaking_an_accepted_connection() {
    const CLIENTS: usize = 100;
    let mut t = Transfer::new(16 << 20, LinkParams::delay(Duration::from_millis(5)));
    t.tcp = vec![("backlog", 16.into()), ("time_wait", "120s".into())];
    let mut r = start(&t);
    r.run(Duration::from_millis(300));
    assert!(r.sink().bytes > 0, "the first connection is under way");
    let (a, b) = (r.client, r.server);
    let e = r.net.engine(b);
    let acceptor = e.add_app(Box::new(Acceptor::default()));
    let tcp_b = e.proto_id("tcp").unwrap();
    e.with_app(acceptor, |_, cx| {
        cx.open_enable(tcp_b, Participants::local([Addr::Port(80)]), Qos::default())
    })
    .unwrap()
    .unwrap();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let app = r.net.engine(a).add_app(Box::new(Client {
                connected: false,
                closed: None,
            }));
            open(&mut r.net, a, app, 2, 80, 0);
            app
        })
        .collect();
    r.net.run_for(Duration::from_millis(50));
    let tcp = r.net.engine(b).protocol::<tcp::Tcp>(tcp_b).unwrap();
    assert_eq!(
        tcp.pending(80),
        Some(0),
        "the first 16 completed their handshakes"
    );
    let dropped = r.net.engine(b).counters(tcp_b).drops().get("backlog-full");
    assert_eq!(
        dropped,
        (CLIENTS - 16) as u64,
        "the rest of the burst was dropped, counted"
    );
    // SYN retransmissions at 1, 3, 7, 15, 31 and 63 s let 16 more in each time.
    r.net.run_for(Duration::from_secs(70));
    let accepted = r.net.engine(b).app::<Acceptor>(acceptor).unwrap().accepted;
    assert_eq!(accepted, CLIENTS, "every client got in eventually");
    for app in clients {
        let c = r.net.engine(a).app::<Client>(app).unwrap();
        assert!(c.connected && c.closed == Some(None));
    }
    let d = finish(r, Duration::from_secs(60));
    assert_eq!(
        d.sender.stats.timeouts, 0,
        "the storm did not disturb the transfer"
    );
}
