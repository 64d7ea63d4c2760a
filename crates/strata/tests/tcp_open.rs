//! Opening connections: a simultaneous open, a refused one, one that times
//! out, and a storm of connections that overflows the listener's backlog
//! while an accepted connection goes on transferring — each on Strata's TCP
//! and on smoltcp's imported into Strata (`smoltcp-tcp`, seed 004).

mod tcp_common;

use std::any::Any;
use std::time::Duration;

use strata::link::{HostId, LinkParams, SimNet};
use strata::proto::tcp::{self, state::State};
use strata::{
    Addr, App, AppCx, AppEvent, Arch, Message, PacketMeta, Participants, Qos, SessionRef, UpiError,
};
use tcp_common::{Peer, Tcp, Transfer, control, finish, host, ip, start};

fn net(tcp: Tcp, link: LinkParams, options: &[(&str, toml::Value)]) -> (SimNet, HostId, HostId) {
    let mut net = SimNet::new(3);
    let a = net.add_host("a", host(1, Arch::Llm, tcp.spec(), 3, options));
    let b = net.add_host("b", host(2, Arch::Llm, tcp.spec(), 3, options));
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
    let tcp = strata::apps::tcp_of(e).unwrap();
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
    simultaneous_open(Tcp::Strata);
}

#[test]
fn on_smoltcp_a_simultaneous_open_connects_both_ends_without_a_listener() {
    simultaneous_open(Tcp::Smoltcp);
}

fn simultaneous_open(tcp: Tcp) {
    let (mut net, a, b) = net(tcp, LinkParams::delay(Duration::from_millis(10)), &[]);
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
        assert_eq!(tcp_common::state(e, s), Some(State::Established));
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
    refused_by_a_reset(Tcp::Strata);
}

#[test]
fn on_smoltcp_a_connection_to_a_closed_port_is_refused_by_a_reset() {
    refused_by_a_reset(Tcp::Smoltcp);
}

fn refused_by_a_reset(tcp: Tcp) {
    let (mut net, a, b) = net(tcp, LinkParams::delay(Duration::from_millis(1)), &[]);
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
    let tcp_b = net.engine(b).proto_id(tcp.kind()).unwrap();
    let refused = net.engine(b).counters(tcp_b);
    match tcp {
        Tcp::Strata => assert_eq!(refused.events().get("reset-sent"), 1),
        // smoltcp answers with the reset; the module counts the segment
        // that found no socket.
        Tcp::Smoltcp => assert_eq!(refused.drops().get("no-session"), 1),
    }
    assert_eq!(tcp_common::state(net.engine(a), s), None, "gone");
}

#[test]
fn an_unanswered_connection_times_out_after_its_syn_retries() {
    unanswered_times_out(Tcp::Strata);
}

#[test]
fn on_smoltcp_an_unanswered_connection_times_out_after_its_user_timeout() {
    unanswered_times_out(Tcp::Smoltcp);
}

/// Strata's TCP gives up after its SYN retries (1 + 2 + 4 s), smoltcp after
/// its user timeout, set to the same 7 s (it has no retry count).
fn unanswered_times_out(tcp: Tcp) {
    let dead = LinkParams {
        loss: 1.0,
        ..LinkParams::default()
    };
    let (mut net, a, _) = net(
        tcp,
        dead,
        &[("syn_retries", 2.into()), ("timeout", "7s".into())],
    );
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
    connection_storm(Tcp::Strata);
}

#[test]
fn on_smoltcp_a_connection_storm_overflows_the_backlog_without_breaking_an_accepted_connection() {
    connection_storm(Tcp::Smoltcp);
}

fn connection_storm(tcp: Tcp) {
    const CLIENTS: usize = 100;
    let mut t = Transfer::new(16 << 20, LinkParams::delay(Duration::from_millis(5)));
    t.spec = tcp.spec();
    t.tcp = vec![("backlog", 16.into()), ("time_wait", "120s".into())];
    let mut r = start(&t);
    r.run(Duration::from_millis(300));
    assert!(r.sink().bytes > 0, "the first connection is under way");
    let (a, b) = (r.client, r.server);
    let e = r.net.engine(b);
    let acceptor = e.add_app(Box::new(Acceptor::default()));
    let tcp_b = e.proto_id(tcp.kind()).unwrap();
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
    let pending = match tcp {
        Tcp::Strata => r
            .net
            .engine(b)
            .protocol::<tcp::Tcp>(tcp_b)
            .unwrap()
            .pending(80),
        Tcp::Smoltcp => r
            .net
            .engine(b)
            .protocol::<strata_compat::smoltcp::SmolTcp>(tcp_b)
            .unwrap()
            .pending(80),
    };
    assert_eq!(pending, Some(0), "the first 16 completed their handshakes");
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
    match tcp {
        Tcp::Strata => {
            let d = finish(r, Duration::from_secs(60));
            assert_eq!(
                d.sender.stats.timeouts, 0,
                "the storm did not disturb the transfer"
            );
        }
        // smoltcp's timeouts are not visible from outside, and its
        // TIME-WAIT (10 s) is over by now: every byte arriving and both
        // ends closing cleanly is the test.
        Tcp::Smoltcp => {
            tcp_common::verify(&mut r, Duration::from_secs(60));
        }
    }
}
