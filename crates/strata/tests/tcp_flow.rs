//! Flow control and the send API: a receiver that stops reading closes the
//! window and the sender probes it until it opens again; `push` queues whole
//! messages up to the buffer's cap and says `Writable` when room returns;
//! Nagle holds small segments back while data is unacknowledged — each on
//! Strata's TCP and on smoltcp's imported into Strata (`smoltcp-tcp`, seed
//! 004), whose buffers are fixed rings (no `_max`).

mod tcp_common;

use std::time::Duration;

use strata::core::Reply;
use strata::link::{LinkParams, SimNet};
use strata::proto::tcp;
use strata::{Addr, AppEvent, Arch, Message, Participants, Qos};
use tcp_common::{Peer, Tcp, Transfer, control, finish, host, ip, start};

const KB: u64 = 1024;

#[test]
fn a_reader_that_stops_closes_the_window_the_sender_probes_and_the_transfer_resumes() {
    reader_that_stops(Tcp::Strata);
}

#[test]
fn on_smoltcp_a_reader_that_stops_closes_the_window_the_sender_probes_and_the_transfer_resumes() {
    reader_that_stops(Tcp::Smoltcp);
}

fn reader_that_stops(tcp: Tcp) {
    let mut t = Transfer::new(2048 * KB, LinkParams::delay(Duration::from_millis(5)));
    t.spec = tcp.spec();
    // Few retries: probes that are answered must never count against them.
    t.tcp = vec![
        ("rcvbuf", "64KiB".into()),
        ("rcvbuf_max", "64KiB".into()),
        ("retries", 3.into()),
    ];
    let mut r = start(&t);
    r.sink().manual = true;
    r.sink().paused = true;
    r.run(Duration::from_secs(30));
    let stalled = r.sender().unwrap();
    let held = r.sink().bytes;
    assert_eq!(stalled.snd_wnd, 0, "the window closed: {stalled:?}");
    assert!(
        (60 * KB..=64 * KB).contains(&held),
        "the receiver took one window and no more: {held}"
    );
    // Strata's TCP starts probing at its RTO, smoltcp at its own, both
    // doubling the interval.
    let probes = match tcp {
        Tcp::Strata => 4..=10,
        Tcp::Smoltcp => 3..=10,
    };
    assert!(
        probes.contains(&stalled.stats.window_probes),
        "the sender probed the closed window with backoff for 30 s: {:?}",
        stalled.stats
    );
    assert_eq!(
        stalled.state,
        tcp::state::State::Established,
        "probes kept it alive"
    );
    assert!(r.source().closed.is_none());

    let (b, sink) = (r.server, r.sink);
    r.net
        .engine(b)
        .with_app(sink, |app, cx| {
            app.as_any_mut()
                .downcast_mut::<tcp_common::Sink>()
                .unwrap()
                .resume(cx)
        })
        .unwrap();
    let d = finish(r, Duration::from_secs(60));
    assert!(d.elapsed > Duration::from_secs(30));
}

/// Two hosts with a listener on the server that records what it gets; the
/// client's recorder holds an open session.
fn pair(
    tcp: Tcp,
    options: &[(&str, toml::Value)],
) -> (
    SimNet,
    strata::link::HostId,
    strata::link::HostId,
    strata::AppId,
    strata::AppId,
    strata::SessionRef,
) {
    let mut net = SimNet::new(7);
    let a = net.add_host("a", host(1, Arch::Llm, tcp.spec(), 7, options));
    let b = net.add_host("b", host(2, Arch::Llm, tcp.spec(), 7, options));
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
    net.run_for(Duration::from_millis(100));
    (net, a, b, client, server, s)
}

#[test]
fn push_queues_whole_messages_up_to_the_cap_and_says_writable_when_room_returns() {
    push_queues_whole_messages(Tcp::Strata);
}

#[test]
fn on_smoltcp_push_queues_whole_messages_up_to_the_cap_and_says_writable_when_room_returns() {
    push_queues_whole_messages(Tcp::Smoltcp);
}

fn push_queues_whole_messages(tcp: Tcp) {
    // A 64 KiB cap: Strata's buffer grows from 32 KiB to it, smoltcp's ring
    // is that size.
    let sndbuf = match tcp {
        Tcp::Strata => "32KiB",
        Tcp::Smoltcp => "64KiB",
    };
    let (mut net, a, b, client, server, s) = pair(
        tcp,
        &[("sndbuf", sndbuf.into()), ("sndbuf_max", "64KiB".into())],
    );
    let e = net.engine(a);
    e.with_app(client, |_, cx| {
        for i in 0..3u8 {
            cx.send(s, Message::from(vec![i; 20_000]));
        }
        cx.send(s, Message::from(vec![9; 20_000]));
    })
    .unwrap();
    let tcp_a = e.proto_id(tcp.kind()).unwrap();
    e.run(e.now());
    assert_eq!(
        e.counters(tcp_a).drops().get("sndbuf-full"),
        1,
        "60 000 bytes fit under the 64 KiB cap; the fourth message did not, whole"
    );
    net.run_for(Duration::from_millis(200));
    let got = net.engine(b).app::<Peer>(server).unwrap().data.clone();
    let want: Vec<u8> = (0..3u8).flat_map(|i| vec![i; 20_000]).collect();
    assert!(
        got == want,
        "the three accepted messages arrived whole, in order"
    );
    let events = &net.engine(a).app::<Peer>(client).unwrap().events;
    assert!(
        events.contains(&AppEvent::Writable(s)),
        "told when room came back: {events:?}"
    );
}

#[test]
fn write_takes_what_fits_and_the_rest_goes_after_writable() {
    write_takes_what_fits(Tcp::Strata);
}

#[test]
fn on_smoltcp_write_takes_what_fits_and_the_rest_goes_after_writable() {
    write_takes_what_fits(Tcp::Smoltcp);
}

fn write_takes_what_fits(tcp: Tcp) {
    let (mut net, a, b, client, server, s) = pair(
        tcp,
        &[("sndbuf", "16KiB".into()), ("sndbuf_max", "16KiB".into())],
    );
    let e = net.engine(a);
    let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let Ok(Reply::Size(n)) = control(e, client, s, tcp::Write(Message::from(data.clone()))) else {
        panic!("write refused");
    };
    assert_eq!(n, 16 * 1024, "the buffer's free space");
    let Ok(Reply::Size(0)) = control(e, client, s, tcp::SendSpace) else {
        panic!("the buffer should be full");
    };
    let mut sent = n;
    while sent < data.len() {
        net.run_for(Duration::from_millis(20));
        let e = net.engine(a);
        if let Ok(Reply::Size(n)) = control(
            e,
            client,
            s,
            tcp::Write(Message::from(data[sent..].to_vec())),
        ) {
            sent += n;
        }
    }
    net.run_for(Duration::from_millis(200));
    assert!(net.engine(b).app::<Peer>(server).unwrap().data == data);
}

/// Data segments the client has sent so far, once its engine has run what
/// is due now (no time passes).
fn segments(net: &mut SimNet, a: strata::link::HostId, s: strata::SessionRef) -> u64 {
    let e = net.engine(a);
    e.run(e.now());
    tcp_common::info(e, s).unwrap().stats.segs_out
}

#[test]
fn nagle_holds_small_writes_while_data_is_unacknowledged_and_nodelay_sends_each() {
    nagle_holds_small_writes(Tcp::Strata);
}

#[test]
fn on_smoltcp_nagle_holds_small_writes_while_data_is_unacknowledged_and_nodelay_sends_each() {
    nagle_holds_small_writes(Tcp::Smoltcp);
}

fn nagle_holds_small_writes(tcp: Tcp) {
    for nodelay in [false, true] {
        let (mut net, a, b, client, server, s) = pair(tcp, &[]);
        let e = net.engine(a);
        control(e, client, s, tcp::SetNodelay(nodelay)).unwrap();
        let before = segments(&mut net, a, s);
        let e = net.engine(a);
        for i in 0..10u8 {
            control(e, client, s, tcp::Write(Message::from(vec![i; 10]))).unwrap();
        }
        let sent_at_once = segments(&mut net, a, s) - before;
        net.run_for(Duration::from_millis(200));
        assert_eq!(net.engine(b).app::<Peer>(server).unwrap().data.len(), 100);
        if nodelay {
            assert_eq!(sent_at_once, 10, "without Nagle every write leaves at once");
        } else {
            assert_eq!(
                sent_at_once, 1,
                "with Nagle only the first, the rest wait for its ACK"
            );
        }
    }
}
