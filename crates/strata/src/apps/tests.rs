//! The applications on two real stacks joined in memory, in virtual time.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use bytes::Bytes;
use strata_core::{Engine, Instant};
use strata_link::MemPair;

use super::ping::{PingConfig, PingEvent, Pinger};
use super::udp_blast::{BlastConfig, UdpBlast};
use super::udp_client::{ClientEvent, UdpClient};
use super::udp_discard::UdpDiscard;
use super::udp_echo::UdpEcho;
use super::udp_rtt::{RttConfig, UdpRtt};
use super::udp_sink::UdpSink;
use crate::{HostBuilder, HostParams};

fn host(n: u8) -> Engine {
    HostBuilder::spec("udp/ip/eth", HostParams::numbered(n), "net0", "mem")
        .build()
        .unwrap()
}

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

/// Runs the pair in 1 ms steps of virtual time until `done` or 10 s pass.
fn run(pair: &mut MemPair, mut done: impl FnMut(&mut MemPair) -> bool) {
    let mut now = Instant::ZERO;
    while !done(pair) {
        now += Duration::from_millis(1);
        assert!(now < Instant::from_nanos(10_000_000_000), "timed out");
        pair.pump(now);
    }
}

#[test]
fn ping_gets_every_reply_with_its_data_intact() {
    let mut pair = MemPair::new(host(1), host(2), "net0").unwrap();
    let config = PingConfig {
        target: ip(2),
        count: Some(3),
        size: 100,
        interval: Duration::from_millis(5),
        linger: Duration::from_secs(1),
    };
    let (id, events) = Pinger::install(pair.a(), config).unwrap();
    run(&mut pair, |p| {
        p.a().app::<Pinger>(id).unwrap().is_finished()
    });
    let replies: Vec<PingEvent> = events.try_iter().collect();
    assert_eq!(replies.len(), 4, "three replies and the end: {replies:?}");
    assert!(matches!(
        replies[0],
        PingEvent::Reply { seq: 1, bytes: 108, from, duplicate: false, corrupt: false, .. } if from == ip(2)
    ));
    let totals = &pair.a().app::<Pinger>(id).unwrap().totals;
    assert_eq!(
        (totals.transmitted, totals.received, totals.corrupt),
        (3, 3, 0)
    );
    assert!(totals.rtt.is_some());
}

#[test]
fn the_echo_server_sends_each_datagram_back_to_its_sender() {
    let mut pair = MemPair::new(host(1), host(2), "net0").unwrap();
    let echo = UdpEcho::install(pair.b(), 7).unwrap();
    let discard = UdpDiscard::install(pair.b(), 9).unwrap();
    let (client, events) = UdpClient::install(pair.a(), SocketAddrV4::new(ip(2), 7), 4000).unwrap();
    UdpClient::send(pair.a(), client, Bytes::from_static(b"hello")).unwrap();
    run(&mut pair, |p| {
        p.a().app::<UdpClient>(client).unwrap().received == 1
    });
    assert_eq!(
        events.try_recv().unwrap(),
        ClientEvent::Datagram {
            from: SocketAddrV4::new(ip(2), 7),
            data: b"hello".to_vec()
        }
    );
    assert_eq!(pair.b().app::<UdpEcho>(echo).unwrap().echoed, 1);
    let (to_discard, _) = UdpClient::install(pair.a(), SocketAddrV4::new(ip(2), 9), 4001).unwrap();
    UdpClient::send(pair.a(), to_discard, Bytes::from_static(b"gone")).unwrap();
    run(&mut pair, |p| {
        p.b().app::<UdpDiscard>(discard).unwrap().datagrams == 1
    });
    assert_eq!(pair.b().app::<UdpDiscard>(discard).unwrap().bytes, 4);
}

#[test]
fn a_paced_transfer_arrives_whole_with_matching_digests() {
    let mut pair = MemPair::new(host(1), host(2), "net0").unwrap();
    let sink = UdpSink::install(pair.b(), 9, 77).unwrap();
    let config = BlastConfig {
        dest: SocketAddrV4::new(ip(2), 9),
        next_hop: ip(2),
        local_port: 0,
        total: 200_000,
        size: 1000,
        rate: 100_000_000,
        run: 77,
    };
    let blast = UdpBlast::install(pair.a(), config).unwrap();
    run(&mut pair, |p| {
        let sent = p.a().app::<UdpBlast>(blast).unwrap().sent;
        p.a().app::<UdpBlast>(blast).unwrap().is_finished()
            && p.b().app::<UdpSink>(sink).unwrap().counts.intact == sent
    });
    let b = pair.a().app::<UdpBlast>(blast).unwrap();
    let (sent, digest) = (b.sent, b.digest);
    let c = pair.b().app::<UdpSink>(sink).unwrap().counts.clone();
    assert_eq!(sent, 200);
    assert_eq!(
        (c.intact, c.intact_bytes, c.corrupt, c.duplicates, c.foreign),
        (200, 200_000, 0, 0, 0)
    );
    assert_eq!(c.digest, digest);
}

#[test]
fn the_rtt_client_keeps_one_sample_per_echo_after_its_warmup() {
    let mut pair = MemPair::new(host(1), host(2), "net0").unwrap();
    UdpEcho::install(pair.b(), 7).unwrap();
    let config = RttConfig {
        dest: SocketAddrV4::new(ip(2), 7),
        next_hop: ip(2),
        size: 32,
        samples: 20,
        warmup: 5,
    };
    let rtt = UdpRtt::install(pair.a(), config).unwrap();
    run(&mut pair, |p| {
        p.a().app::<UdpRtt>(rtt).unwrap().is_finished()
    });
    let r = pair.a().app::<UdpRtt>(rtt).unwrap();
    assert_eq!((r.samples.len(), r.lost, r.stray), (20, 0, 0));
}
