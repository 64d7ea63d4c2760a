//! Closing connections: TIME-WAIT on the side that closed first, a
//! simultaneous close through CLOSING, a half-close that keeps receiving, a
//! session handed back with `close`, and a reset — each on Strata's TCP and
//! on smoltcp's imported into Strata (`smoltcp-tcp`, seed 004).

mod tcp_common;

use std::time::Duration;

use strata::link::{HostId, LinkParams, SimNet};
use strata::proto::tcp::{self, state::State};
use strata::{Addr, AppEvent, AppId, Arch, Message, Participants, Qos, SessionRef, UpiError};
use tcp_common::{Peer, Tcp, control, host, ip};

/// How long TIME-WAIT lasts: what Strata's TCP is told (`time_wait`), and
/// smoltcp's own, which is fixed (10 s).
fn time_wait(tcp: Tcp) -> Duration {
    match tcp {
        Tcp::Strata => Duration::from_secs(2),
        Tcp::Smoltcp => Duration::from_secs(10),
    }
}

/// A connection between a client and a server recorder on `tcp`,
/// established, with a 10 ms round trip and TIME-WAIT of `time_wait`.
struct Pair {
    net: SimNet,
    a: HostId,
    b: HostId,
    client: AppId,
    server: AppId,
    /// The client's session and the server's.
    sa: SessionRef,
    sb: SessionRef,
    tcp: Tcp,
}

fn pair(tcp: Tcp, time_wait: Duration) -> Pair {
    let options = [(
        "time_wait",
        toml::Value::from(format!("{}s", time_wait.as_secs())),
    )];
    let mut net = SimNet::new(11);
    let a = net.add_host("a", host(1, Arch::Llm, tcp.spec(), 11, &options));
    let b = net.add_host("b", host(2, Arch::Llm, tcp.spec(), 11, &options));
    let p = LinkParams::delay(Duration::from_millis(5));
    net.connect((a, "net0"), (b, "net0"), p.clone(), p).unwrap();
    let e = net.engine(b);
    let tcp_b = e.proto_id(tcp.kind()).unwrap();
    let server = e.add_app(Box::new(Peer::default()));
    e.with_app(server, |_, cx| {
        cx.open_enable(tcp_b, Participants::local([Addr::Port(80)]), Qos::default())
    })
    .unwrap()
    .unwrap();
    let e = net.engine(a);
    let tcp_a = e.proto_id(tcp.kind()).unwrap();
    let client = e.add_app(Box::new(Peer::default()));
    let sa = e
        .with_app(client, |_, cx| {
            cx.open(
                tcp_a,
                Participants::remote([Addr::Ip(ip(2)), Addr::Port(80)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    net.run_for(Duration::from_millis(100));
    let sb = net.engine(b).app::<Peer>(server).unwrap().sessions()[0];
    Pair {
        net,
        a,
        b,
        client,
        server,
        sa,
        sb,
        tcp,
    }
}

impl Pair {
    fn state(&mut self, h: HostId, s: SessionRef) -> Option<State> {
        tcp_common::state(self.net.engine(h), s)
    }

    fn peer(&mut self, h: HostId, app: AppId) -> &Peer {
        self.net.engine(h).app::<Peer>(app).unwrap()
    }

    fn op(&mut self, h: HostId, app: AppId, s: SessionRef, o: impl Into<strata::Control>) {
        control(self.net.engine(h), app, s, o).unwrap();
    }
}

#[test]
fn the_side_that_closes_first_lingers_in_time_wait_for_2msl_and_the_other_goes_at_once() {
    closes_first_lingers_in_time_wait(Tcp::Strata);
}

#[test]
fn on_smoltcp_the_side_that_closes_first_lingers_in_time_wait_and_the_other_goes_at_once() {
    closes_first_lingers_in_time_wait(Tcp::Smoltcp);
}

fn closes_first_lingers_in_time_wait(tcp: Tcp) {
    let linger = time_wait(tcp);
    let mut p = pair(tcp, linger);
    let (a, b, client, server, sa, sb) = (p.a, p.b, p.client, p.server, p.sa, p.sb);
    p.op(a, client, sa, tcp::Shutdown);
    p.net.run_for(Duration::from_millis(50));
    assert_eq!(
        p.state(a, sa),
        Some(State::FinWait2),
        "our FIN is acknowledged"
    );
    assert_eq!(p.state(b, sb), Some(State::CloseWait));
    assert_eq!(
        p.peer(b, server).events.last(),
        Some(&AppEvent::PeerClosed(sb))
    );
    p.op(b, server, sb, tcp::Shutdown);
    p.net.run_for(Duration::from_millis(50));
    assert_eq!(p.state(a, sa), Some(State::TimeWait));
    assert_eq!(p.state(b, sb), None, "LAST-ACK ended in CLOSED");
    for (h, app, s) in [(a, client, sa), (b, server, sb)] {
        let closed = AppEvent::Closed {
            session: s,
            error: None,
        };
        assert_eq!(p.peer(h, app).events.last(), Some(&closed));
    }
    p.net.run_for(linger - Duration::from_millis(200));
    assert_eq!(p.state(a, sa), Some(State::TimeWait), "2·MSL not over");
    p.net.run_for(Duration::from_millis(200));
    assert_eq!(p.state(a, sa), None, "gone after 2·MSL");
}

#[test]
fn closing_at_the_same_time_goes_through_closing_to_time_wait_on_both_sides() {
    closing_at_the_same_time(Tcp::Strata);
}

#[test]
fn on_smoltcp_closing_at_the_same_time_goes_through_closing_to_time_wait_on_both_sides() {
    closing_at_the_same_time(Tcp::Smoltcp);
}

fn closing_at_the_same_time(tcp: Tcp) {
    let mut p = pair(tcp, Duration::from_secs(60));
    let (a, b, client, server, sa, sb) = (p.a, p.b, p.client, p.server, p.sa, p.sb);
    p.op(a, client, sa, tcp::Shutdown);
    p.op(b, server, sb, tcp::Shutdown);
    assert_eq!(p.state(a, sa), Some(State::FinWait1));
    p.net.run_for(Duration::from_millis(7));
    assert_eq!(p.state(a, sa), Some(State::Closing), "the FINs crossed");
    assert_eq!(p.state(b, sb), Some(State::Closing));
    p.net.run_for(Duration::from_millis(50));
    assert_eq!(p.state(a, sa), Some(State::TimeWait));
    assert_eq!(p.state(b, sb), Some(State::TimeWait));
    assert_eq!(p.peer(a, client).closed(), vec![None]);
    assert_eq!(p.peer(b, server).closed(), vec![None]);
}

#[test]
fn a_half_closed_connection_keeps_receiving_until_the_peer_closes() {
    half_closed_keeps_receiving(Tcp::Strata);
}

#[test]
fn on_smoltcp_half_closed_connection_keeps_receiving_until_the_peer_closes() {
    half_closed_keeps_receiving(Tcp::Smoltcp);
}

fn half_closed_keeps_receiving(tcp: Tcp) {
    let mut p = pair(tcp, Duration::from_secs(60));
    let (a, b, client, server, sa, sb) = (p.a, p.b, p.client, p.server, p.sa, p.sb);
    p.op(a, client, sa, tcp::Shutdown);
    p.net.run_for(Duration::from_millis(50));
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    while sent < data.len() {
        let rest = Message::from(data[sent..].to_vec());
        if let Ok(strata::core::Reply::Size(n)) =
            control(p.net.engine(b), server, sb, tcp::Write(rest))
        {
            sent += n;
        }
        p.net.run_for(Duration::from_millis(20));
    }
    p.op(b, server, sb, tcp::Shutdown);
    p.net.run_for(Duration::from_millis(200));
    let got = p.peer(a, client);
    assert!(got.data == data, "everything sent after our FIN arrived");
    assert!(got.events.contains(&AppEvent::PeerClosed(sa)));
    assert_eq!(got.closed(), vec![None]);
}

#[test]
fn a_closed_session_still_delivers_its_queued_data_and_finishes_on_its_own() {
    closed_session_still_delivers(Tcp::Strata);
}

#[test]
fn on_smoltcp_closed_session_still_delivers_its_queued_data_and_finishes_on_its_own() {
    closed_session_still_delivers(Tcp::Smoltcp);
}

fn closed_session_still_delivers(tcp: Tcp) {
    let mut p = pair(tcp, Duration::from_secs(60));
    let (a, b, client, server, sa, sb) = (p.a, p.b, p.client, p.server, p.sa, p.sb);
    let data = vec![7u8; 20_000];
    let written = control(
        p.net.engine(a),
        client,
        sa,
        tcp::Write(Message::from(data.clone())),
    );
    assert!(matches!(written, Ok(strata::core::Reply::Size(20_000))));
    p.net
        .engine(a)
        .with_app(client, |_, cx| cx.close(sa))
        .unwrap()
        .unwrap();
    let events_at_close = p.peer(a, client).events.len();
    p.net.run_for(Duration::from_millis(200));
    assert!(
        p.peer(b, server).data == data,
        "the data queued before close arrived"
    );
    assert!(p.peer(b, server).events.contains(&AppEvent::PeerClosed(sb)));
    p.op(b, server, sb, tcp::Shutdown);
    p.net.run_for(Duration::from_millis(100));
    assert_eq!(
        p.peer(a, client).events.len(),
        events_at_close,
        "no event after close"
    );
    assert_eq!(p.state(a, sa), Some(State::TimeWait));
    assert_eq!(
        control(p.net.engine(a), client, sa, tcp::SendSpace).unwrap_err(),
        UpiError::Closed,
        "the handle is no longer the application's"
    );
}

#[test]
fn an_abort_resets_the_peer() {
    abort_resets_the_peer(Tcp::Strata);
}

#[test]
fn on_smoltcp_abort_resets_the_peer() {
    abort_resets_the_peer(Tcp::Smoltcp);
}

fn abort_resets_the_peer(tcp: Tcp) {
    let mut p = pair(tcp, Duration::from_secs(60));
    let (a, b, client, server, sa, sb) = (p.a, p.b, p.client, p.server, p.sa, p.sb);
    p.op(a, client, sa, tcp::Abort);
    assert_eq!(p.state(a, sa), None, "gone at once");
    p.net.run_for(Duration::from_millis(50));
    assert_eq!(p.peer(b, server).closed(), vec![Some(UpiError::Refused)]);
    assert_eq!(p.state(b, sb), None);
    assert!(
        p.peer(a, client).closed().is_empty(),
        "the aborting side hears nothing"
    );
}

#[test]
fn a_shutdown_before_the_handshake_ends_sends_its_fin_once_established() {
    shutdown_before_the_handshake_ends(Tcp::Strata);
}

#[test]
fn on_smoltcp_shutdown_before_the_handshake_ends_sends_its_fin_once_established() {
    shutdown_before_the_handshake_ends(Tcp::Smoltcp);
}

fn shutdown_before_the_handshake_ends(tcp: Tcp) {
    let mut p = pair(tcp, Duration::from_secs(60));
    let (a, b, client, server) = (p.a, p.b, p.client, p.server);
    let e = p.net.engine(a);
    let tcp_a = e.proto_id(p.tcp.kind()).unwrap();
    let s = e
        .with_app(client, |_, cx| {
            cx.open(
                tcp_a,
                Participants::remote([Addr::Ip(ip(2)), Addr::Port(80)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    p.op(a, client, s, tcp::Shutdown);
    assert_eq!(
        p.state(a, s),
        Some(State::SynSent),
        "the FIN waits for the handshake"
    );
    p.net.run_for(Duration::from_millis(100));
    assert!(p.peer(a, client).events.contains(&AppEvent::Connected(s)));
    let sb = p.peer(b, server).sessions()[1];
    assert!(p.peer(b, server).events.contains(&AppEvent::PeerClosed(sb)));
    assert_eq!(p.state(a, s), Some(State::FinWait2));
}

#[test]
fn a_closed_session_whose_peer_never_closes_goes_after_the_fin_timeout() {
    orphan_goes_after_the_fin_timeout(Tcp::Strata);
}

#[test]
fn on_smoltcp_a_closed_session_whose_peer_never_closes_goes_after_the_fin_timeout() {
    orphan_goes_after_the_fin_timeout(Tcp::Smoltcp);
}

/// A peer that never sends its FIN must not hold a closed session for ever:
/// after a minute in FIN-WAIT-2 it goes (Linux's `tcp_fin_timeout`).
fn orphan_goes_after_the_fin_timeout(tcp: Tcp) {
    let mut p = pair(tcp, Duration::from_secs(60));
    let (a, client, sa) = (p.a, p.client, p.sa);
    p.net
        .engine(a)
        .with_app(client, |_, cx| cx.close(sa))
        .unwrap()
        .unwrap();
    p.net.run_for(Duration::from_secs(59));
    assert_eq!(
        p.state(a, sa),
        Some(State::FinWait2),
        "the peer said nothing yet"
    );
    p.net.run_for(Duration::from_secs(2));
    assert_eq!(p.state(a, sa), None, "gone after the FIN timeout");
}
