//! Direct application association (seed 000 §3.2, §4.2) on `udp/ip/ethdaa`:
//! one demux per packet once a path is known, delivery to the right application,
//! the early resource check, and frames processed in deadline/priority order.

mod tcp_common;

use std::any::Any;
use std::time::Duration;

use strata::core::Priority;
use strata::link::{HostId, LinkParams, SimNet};
use strata::{
    Addr, App, AppCx, AppEvent, AppId, Arch, HostBuilder, HostParams, Message, PacketMeta,
    Participants, Qos, SessionRef,
};

/// The well-known application identifier the echo servers demand.
const SERVICE: u32 = 100;

fn net(arch: Arch) -> (SimNet, HostId, HostId) {
    let host = |n: u8| {
        HostBuilder::spec(
            "udp/ip/ethdaa",
            HostParams::numbered(n),
            "net0",
            strata::link::SIM,
        )
        .arch(arch)
        .build()
        .unwrap()
    };
    let mut net = SimNet::new(1);
    let a = net.add_host("a", host(1));
    let b = net.add_host("b", host(2));
    let p = LinkParams::delay(Duration::from_millis(1));
    net.connect((a, "net0"), (b, "net0"), p.clone(), p).unwrap();
    (net, a, b)
}

/// Echoes on the session a datagram came from, and remembers what it got.
#[derive(Default)]
struct Echo {
    got: Vec<Vec<u8>>,
    full: bool,
}

impl App for Echo {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        self.got.push(msg.to_vec());
        if let Some(s) = s {
            cx.send(s, msg);
        }
    }

    fn has_room(&self) -> bool {
        !self.full
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Collects what comes back.
#[derive(Default)]
struct Client {
    got: Vec<Vec<u8>>,
}

impl App for Client {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        self.got.push(msg.to_vec());
    }

    fn event(&mut self, _: AppEvent, _: &mut AppCx) {}

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn serve(net: &mut SimNet, h: HostId, port: u16, app_id: u32) -> AppId {
    let e = net.engine(h);
    let udp = e.proto_id("udp").unwrap();
    let app = e.add_app(Box::new(Echo::default()));
    let qos = Qos {
        app_id: Some(app_id),
        ..Qos::default()
    };
    e.with_app(app, |_, cx| {
        cx.open_enable(udp, Participants::local([Addr::Port(port)]), qos)
    })
    .unwrap()
    .unwrap();
    app
}

fn client(
    net: &mut SimNet,
    h: HostId,
    port: u16,
    app_id: u32,
    priority: Priority,
) -> (AppId, SessionRef) {
    let server = HostParams::numbered(2).address.address();
    let e = net.engine(h);
    let udp = e.proto_id("udp").unwrap();
    let app = e.add_app(Box::new(Client::default()));
    let qos = Qos {
        priority,
        app_id: None,
    };
    let s = e
        .with_app(app, |_, cx| {
            let parts =
                Participants::remote([Addr::AppId(app_id), Addr::Ip(server), Addr::Port(port)])
                    .with_local([Addr::Port(0)]);
            cx.open(udp, parts, qos)
        })
        .unwrap()
        .unwrap();
    (app, s)
}

fn send(net: &mut SimNet, h: HostId, app: AppId, s: SessionRef, data: &[u8]) {
    let msg = Message::from_slice(data);
    net.engine(h)
        .with_app(app, |_, cx| cx.send(s, msg))
        .unwrap();
}

#[test]
fn once_paths_are_known_each_packet_is_demultiplexed_once_and_reaches_its_application() {
    let (mut net, a, b) = net(Arch::Daa);
    let echo7 = serve(&mut net, b, 7, SERVICE);
    let echo9 = serve(&mut net, b, 9, SERVICE + 1);
    let (c7, s7) = client(&mut net, a, 7, SERVICE, Priority::BEST_EFFORT);
    let (c9, s9) = client(&mut net, a, 9, SERVICE + 1, Priority::BEST_EFFORT);
    // Warm up: the first exchanges teach each path its peer and its pops.
    for i in 0..3u8 {
        send(&mut net, a, c7, s7, &[7, i]);
        send(&mut net, a, c9, s9, &[9, i]);
        net.run_for(Duration::from_millis(10));
    }
    let before = (net.engine(a).demux_calls(), net.engine(b).demux_calls());
    let frames_before = rx_frames(&mut net, a) + rx_frames(&mut net, b);
    for i in 0..20u8 {
        send(&mut net, a, c7, s7, &[7, 100 + i]);
        send(&mut net, a, c9, s9, &[9, 100 + i]);
        net.run_for(Duration::from_millis(10));
    }
    let frames = rx_frames(&mut net, a) + rx_frames(&mut net, b) - frames_before;
    let demuxes = net.engine(a).demux_calls() + net.engine(b).demux_calls() - before.0 - before.1;
    assert_eq!(frames, 80, "20 exchanges of two clients, there and back");
    assert_eq!(demuxes, frames, "one demux per frame once paths are known");
    assert!(net.engine(b).engine_counters().events().get("daa-path") >= 40);

    let got = |net: &mut SimNet, h, app| net.engine(h).app::<Echo>(app).unwrap().got.clone();
    assert!(
        got(&mut net, b, echo7).iter().all(|m| m[0] == 7),
        "port 7's server got only its own"
    );
    assert!(
        got(&mut net, b, echo9).iter().all(|m| m[0] == 9),
        "port 9's server got only its own"
    );
    let back = |net: &mut SimNet, app| net.engine(a).app::<Client>(app).unwrap().got.clone();
    assert_eq!(
        back(&mut net, c7).len(),
        23,
        "every echo came back to client 7"
    );
    assert!(
        back(&mut net, c9).iter().all(|m| m[0] == 9),
        "client 9 got only its own echoes"
    );
}

#[test]
fn a_client_that_does_not_know_the_servers_identifier_learns_a_path_from_the_first_answer() {
    let (mut net, a, b) = net(Arch::Daa);
    serve(&mut net, b, 7, SERVICE);
    // No Addr::AppId: the first datagram reaches b with no path and is
    // demultiplexed layer by layer; b's new session must still answer a's path.
    let server = HostParams::numbered(2).address.address();
    let e = net.engine(a);
    let udp = e.proto_id("udp").unwrap();
    let app = e.add_app(Box::new(Client::default()));
    let s = e
        .with_app(app, |_, cx| {
            let parts =
                Participants::remote([Addr::Ip(server), Addr::Port(7)]).with_local([Addr::Port(0)]);
            cx.open(udp, parts, Qos::default())
        })
        .unwrap()
        .unwrap();
    for i in 0..10u8 {
        send(&mut net, a, app, s, &[i]);
        net.run_for(Duration::from_millis(10));
    }
    assert_eq!(net.engine(a).app::<Client>(app).unwrap().got.len(), 10);
    let paths = |net: &mut SimNet, h| net.engine(h).engine_counters().events().get("daa-path");
    assert!(paths(&mut net, a) >= 8, "a's answers arrive on its path");
    assert!(
        paths(&mut net, b) >= 8,
        "after one answer, a addresses b's session path"
    );
}

#[test]
fn a_pure_tcp_sender_takes_its_acks_along_its_path() {
    let t = tcp_common::Transfer {
        arch: Arch::Daa,
        spec: "tcp/ip/ethdaa",
        ..tcp_common::Transfer::new(4 << 20, LinkParams::delay(Duration::from_millis(1)))
    };
    let mut done = tcp_common::transfer(&t);
    let client = done.client;
    let e = done.net.engine(client);
    let along = e.engine_counters().events().get("daa-path");
    let link = e.link_id("net0").unwrap();
    let acks = e.link_stats(link).rx_frames;
    assert!(
        along * 10 > acks * 9,
        "the sender's ACKs, which end at its TCP session, follow its path: {along} of {acks}"
    );
}

fn rx_frames(net: &mut SimNet, h: HostId) -> u64 {
    let e = net.engine(h);
    let link = e.link_id("net0").unwrap();
    e.link_stats(link).rx_frames
}

#[test]
fn llm_demultiplexes_at_every_layer_on_the_same_stack() {
    let (mut net, a, b) = net(Arch::Llm);
    serve(&mut net, b, 7, SERVICE);
    let (c7, s7) = client(&mut net, a, 7, SERVICE, Priority::BEST_EFFORT);
    send(&mut net, a, c7, s7, b"warm");
    net.run_for(Duration::from_millis(10));
    let before = net.engine(b).demux_calls();
    send(&mut net, a, c7, s7, b"x");
    net.run_for(Duration::from_millis(10));
    assert_eq!(net.engine(b).demux_calls() - before, 3, "ethdaa, ip, udp");
}

#[test]
fn a_full_application_loses_packets_at_the_lowest_layer_before_any_protocol_work() {
    let (mut net, a, b) = net(Arch::Daa);
    let echo = serve(&mut net, b, 7, SERVICE);
    let (c, s) = client(&mut net, a, 7, SERVICE, Priority::BEST_EFFORT);
    for i in 0..3u8 {
        send(&mut net, a, c, s, &[i]);
        net.run_for(Duration::from_millis(10));
    }
    net.engine(b).app_mut::<Echo>(echo).unwrap().full = true;
    let ip = net.engine(b).proto_id("ip").unwrap();
    let ip_in = net.engine(b).counters(ip).packets_in;
    send(&mut net, a, c, s, b"no room");
    net.run_for(Duration::from_millis(10));
    let ethdaa = net.engine(b).proto_id("ethdaa").unwrap();
    assert_eq!(net.engine(b).counters(ethdaa).drops().get("no-room"), 1);
    assert_eq!(
        net.engine(b).counters(ip).packets_in,
        ip_in,
        "IP never saw it"
    );
    assert_eq!(net.engine(b).app::<Echo>(echo).unwrap().got.len(), 3);
}

#[test]
fn queued_frames_are_processed_in_priority_order_under_daa_and_in_arrival_order_under_llm() {
    for arch in [Arch::Daa, Arch::Llm] {
        let (mut net, a, b) = net(arch);
        // One server application for both services: its log is b's processing order.
        let srv = serve(&mut net, b, 9, SERVICE + 1);
        let udp = net.engine(b).proto_id("udp").unwrap();
        let qos = Qos {
            app_id: Some(SERVICE),
            ..Qos::default()
        };
        net.engine(b)
            .with_app(srv, |_, cx| {
                cx.open_enable(udp, Participants::local([Addr::Port(7)]), qos)
            })
            .unwrap()
            .unwrap();
        let (bulk, sb) = client(&mut net, a, 9, SERVICE + 1, Priority::BEST_EFFORT);
        let (urgent, su) = client(&mut net, a, 7, SERVICE, Priority(1));
        // Learn the paths.
        for _ in 0..2 {
            send(&mut net, a, bulk, sb, b"b");
            send(&mut net, a, urgent, su, b"u");
            net.run_for(Duration::from_millis(10));
        }
        for i in 0..10u8 {
            send(&mut net, a, bulk, sb, &[i]);
        }
        send(&mut net, a, urgent, su, b"!");
        let link = net.engine(a).link_id("net0").unwrap();
        let now = net.now();
        net.engine(a).run(now);
        let mut frames = Vec::new();
        while let Some(f) = net.engine(a).poll_transmit(link) {
            frames.push(f);
        }
        let urgent_len = 28 + 20 + 8 + 1;
        assert_eq!(frames.len(), 11);
        assert_eq!(
            frames[0].len() == urgent_len,
            arch == Arch::Daa,
            "{arch}: a's send queue puts the urgent frame first only under DAA"
        );
        // Hand b the urgent frame last, as if it had arrived behind the bulk:
        // b's receive queue must do the reordering itself.
        frames.sort_by_key(|f| f.len() == urgent_len);
        for f in frames {
            net.engine(b).receive(link, f);
        }
        net.engine(b).run(now);
        let log = net.engine(b).app::<Echo>(srv).unwrap().got.clone();
        let last = &log[log.len() - 11..];
        let at = last.iter().position(|m| m == b"!").unwrap();
        let expect = if arch == Arch::Daa { 0 } else { 10 };
        assert_eq!(
            at, expect,
            "{arch}: where the urgent datagram was processed"
        );
    }
}
