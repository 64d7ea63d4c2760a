//! TCP's timers seen from the wire: the delayed ACK (RFC 9293 §3.8.6.3,
//! RFC 5681 §4.2) and keepalives (RFC 1122 §4.2.3.6).

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Host, carry, host_with, settle};
use strata_core::{
    Addr, AppEvent, AppId, Arch, Control, Message, Participants, Qos, SessionRef, UpiError,
};
use strata_proto::tcp::{self, Keepalive, Tcp};

const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// An established connection from A to B's port 80.
fn established() -> (Host, Host, AppId, SessionRef) {
    let mut a = host_with(1, Arch::Llm, "tcp/ip/eth", false, &[]);
    let mut b = host_with(2, Arch::Llm, "tcp/ip/eth", false, &[]);
    let server = b.recorder();
    let tcp_b = b.proto("tcp");
    b.engine
        .with_app(server, |_, cx| {
            cx.open_enable(tcp_b, Participants::local([Addr::Port(80)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let client = a.recorder();
    let tcp_a = a.proto("tcp");
    let s = a
        .engine
        .with_app(client, |_, cx| {
            cx.open(
                tcp_a,
                Participants::remote([Addr::Ip(B_IP), Addr::Port(80)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    a.run();
    settle(&mut a, &mut b);
    (a, b, client, s)
}

fn op(h: &mut Host, app: AppId, s: SessionRef, o: impl Into<Control>) {
    let tcp = h.proto("tcp");
    h.engine
        .with_app(app, |_, cx| cx.control(tcp, Some(s.sess), o.into()))
        .unwrap()
        .unwrap();
    h.run();
}

#[test]
fn a_lone_segment_is_acknowledged_after_the_delayed_ack_timer_and_a_second_full_one_at_once() {
    let (mut a, mut b, client, s) = established();
    op(&mut a, client, s, tcp::Write(Message::from(vec![1u8; 100])));
    carry(&mut a, &mut b);
    assert!(b.sent().is_empty(), "the ACK waits for a second segment");
    b.advance(Duration::from_millis(39));
    assert!(b.sent().is_empty());
    b.advance(Duration::from_millis(1));
    assert_eq!(b.sent().len(), 1, "40 ms later it goes alone");
    let mss = a
        .engine
        .protocol::<Tcp>(s.proto)
        .unwrap()
        .info(s.sess)
        .unwrap()
        .mss as usize;
    op(
        &mut a,
        client,
        s,
        tcp::Write(Message::from(vec![2u8; 2 * mss])),
    );
    assert_eq!(carry(&mut a, &mut b), 2, "two full segments");
    assert_eq!(
        b.sent().len(),
        1,
        "every second full segment is acknowledged at once"
    );
}

#[test]
fn keepalives_keep_an_answering_peer_and_give_up_on_a_silent_one() {
    let (mut a, mut b, client, s) = established();
    let ka = Keepalive {
        idle: Duration::from_secs(10),
        interval: Duration::from_secs(1),
        probes: 3,
    };
    op(&mut a, client, s, tcp::SetKeepalive(Some(ka)));
    a.advance(Duration::from_millis(9_990));
    assert!(a.sent().is_empty(), "not idle long enough");
    a.advance(Duration::from_millis(10));
    assert_eq!(carry(&mut a, &mut b), 1, "a probe after 10 s idle");
    assert_eq!(carry(&mut b, &mut a), 1, "answered");
    a.advance(Duration::from_secs(10));
    assert_eq!(a.sent().len(), 1, "the next probe, unanswered from now on");
    for _ in 0..2 {
        a.advance(Duration::from_secs(1));
        assert_eq!(a.sent().len(), 1, "probes every interval");
    }
    assert!(
        a.app(client)
            .events
            .iter()
            .all(|e| !matches!(e, AppEvent::Closed { .. }))
    );
    a.advance(Duration::from_secs(1));
    assert_eq!(
        a.app(client).events.last(),
        Some(&AppEvent::Closed {
            session: s,
            error: Some(UpiError::TimedOut)
        })
    );
    assert_eq!(a.events("tcp", "keepalive-probe"), 4);
}
