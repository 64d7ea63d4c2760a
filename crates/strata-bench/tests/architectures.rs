//! One suite, parameterised by architecture: every stack Strata builds carries
//! seed 000's ping-pong intact under LLM, DAA and ILLM, on plain Ethernet and on
//! ETHDAA, in memory and across a delayed, reordering simulated link — and each
//! architecture did what it is: ILLM demultiplexed before popping, DAA followed
//! paths on ETHDAA.

use std::time::Duration;

use bytes::Bytes;
use strata::link::{LinkParams, SimNet};
use strata::{Arch, HostBuilder, HostParams};
use strata_bench::pingpong::{self, Layer, Peer, PingPongClient};
use strata_bench::rtt::{MemPingPong, RttSetup};

/// Every stack the ping-pong drives, on both link layers.
const STACKS: &[&str] = &[
    "eth",
    "ip/eth",
    "udp/ip/eth",
    "copy/xdr/cipher/udp/ip/eth",
    "ethdaa",
    "ip/ethdaa",
    "udp/ip/ethdaa",
    "copy/xdr/cipher/udp/ip/ethdaa",
];

fn payload(size: usize) -> Bytes {
    (0..size)
        .map(|i| (i * 13 + 7) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Sizes that fit a frame, and (above the raw Ethernet layer, which cannot
/// fragment) sizes IPv4 must fragment.
fn sizes(stack: &str) -> &'static [usize] {
    if stack == "eth" || stack == "ethdaa" {
        &[1, 100, 1400]
    } else {
        &[1, 100, 1400, 4000, 9000]
    }
}

fn check_mem(arch: Arch) {
    for &stack in STACKS {
        let mut pp = MemPingPong::new(&RttSetup {
            stack: stack.into(),
            arch,
            checksum: true,
        })
        .unwrap_or_else(|e| panic!("{stack} under {arch}: {e:#}"));
        pp.keep_replies();
        for &size in sizes(stack) {
            let sent = payload(size);
            pp.round_trip(&sent)
                .unwrap_or_else(|e| panic!("{stack} under {arch}, {size} B: {e:#}"));
            assert_eq!(
                pp.last_reply().as_deref(),
                Some(&sent[..]),
                "{stack} under {arch}, {size} B"
            );
        }
        let (client, server) = pp.engines();
        let (c, s) = (client.engine_counters(), server.engine_counters());
        let events = |name: &str| c.events().get(name) + s.events().get(name);
        match arch {
            Arch::Daa if stack.ends_with("ethdaa") => {
                assert!(events("daa-path") > 0, "{stack}: DAA followed paths")
            }
            Arch::Daa => assert!(
                events("daa-no-path") > 0,
                "{stack}: no ETHDAA, layer by layer"
            ),
            Arch::Illm => assert_eq!(events("daa-path"), 0, "{stack}"),
            Arch::Llm => assert_eq!(events("illm-pop-skipped"), 0, "{stack}"),
        }
    }
}

/// The ping-pong across a simulated link with delay, jitter and reordering,
/// driven by the client's own timed run (one message in flight, so nothing the
/// link does may lose it).
fn check_sim(arch: Arch) {
    for &stack in STACKS {
        let layer = Layer::of_spec(stack).unwrap();
        let proto = pingpong::top_of(stack).unwrap();
        let host = |n: u8| {
            HostBuilder::spec(stack, HostParams::numbered(n), "net0", strata::link::SIM)
                .arch(arch)
                .build()
                .unwrap()
        };
        let (mut client, mut server) = (host(1), host(2));
        let params = HostParams::numbered(2);
        let peer = Peer {
            mac: params.mac,
            ip: params.address.address(),
        };
        let pp = pingpong::install(&mut client, &mut server, layer, proto, peer, true).unwrap();
        let mut net = SimNet::new(21);
        let a = net.add_host("a", client);
        let b = net.add_host("b", server);
        let link = LinkParams {
            delay: Duration::from_millis(2),
            jitter: Duration::from_micros(300),
            reorder: 0.05,
            ..LinkParams::default()
        };
        net.connect((a, "net0"), (b, "net0"), link.clone(), link)
            .unwrap();
        for &size in sizes(stack) {
            let sent = payload(size);
            pp.start_timed(net.engine(a), sent.clone(), 0, 20).unwrap();
            let done = net.run_until_condition(
                |n| {
                    n.engine(a)
                        .app::<PingPongClient>(pp.client)
                        .and_then(|c| c.run.as_ref())
                        .is_some_and(|r| r.is_finished())
                },
                Duration::from_secs(30),
            );
            assert!(done, "{stack} under {arch}, {size} B: 20 round trips");
            let client = net.engine(a).app::<PingPongClient>(pp.client).unwrap();
            assert_eq!(
                client.last.as_deref(),
                Some(&sent[..]),
                "{stack} under {arch}, {size} B"
            );
        }
    }
}

#[test]
fn every_stack_under_llm() {
    check_mem(Arch::Llm);
    check_sim(Arch::Llm);
}

#[test]
fn every_stack_under_daa() {
    check_mem(Arch::Daa);
    check_sim(Arch::Daa);
}

#[test]
fn every_stack_under_illm() {
    check_mem(Arch::Illm);
    check_sim(Arch::Illm);
}
