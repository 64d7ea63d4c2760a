//! The paper's stack on real links, the PA off and on: Ethernet frames in
//! kernel UDP datagrams between two runtimes on the loopback interface, and
//! over a veth pair between two namespaces with AF_PACKET (its own
//! EtherType, 0x88b5).

mod common;

use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Sink, engine_of, open_side};
use strata::Message;
use strata::link::{Runtime, RuntimeConfig};
use strata_pa::example::{host_config_on, top};

fn free_port() -> String {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

fn payload(i: u32) -> Vec<u8> {
    let len = 1 + (i as usize * 113) % 4000;
    vec![(i % 251) as u8; len]
}

#[test]
fn the_stack_delivers_everything_over_kernel_udp_with_the_pa_off_and_on() {
    for pa in [false, true] {
        let (a, b) = (free_port(), free_port());
        let link = |l: &str, p: &str| format!("kind = \"udp\"\nlocal = \"{l}\"\npeer = \"{p}\"");
        exchange(pa, [link(&a, &b), link(&b, &a)]);
    }
}

#[test]
fn the_stack_delivers_everything_over_a_veth_pair_with_af_packet() {
    let t = Topology::up("pa");
    for pa in [false, true] {
        let link = |side: &str| {
            format!(
                "kind = \"packet\"\ninterface = \"{0}-v{side}\"\nnetns = \"{0}-{side}\"",
                t.name
            )
        };
        exchange(pa, [link("a"), link("b")]);
    }
}

const NETNS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/netns");

/// Two namespaces joined by a veth pair (`scripts/netns`), torn down on drop.
struct Topology {
    name: String,
}

impl Topology {
    fn up(tag: &str) -> Topology {
        let name = format!("s{}{tag}", std::process::id() % 100_000);
        let _ = Command::new(NETNS).args(["down", &name]).status();
        let ok = Command::new(NETNS).args(["up", &name]).status();
        let t = Topology { name };
        assert!(
            ok.is_ok_and(|s| s.success()),
            "scripts/netns up {} (needs root)",
            t.name
        );
        t
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new(NETNS).args(["down", &self.name]).status();
    }
}

/// 200 messages of 1 to 4,000 bytes from host 1 to host 2 over `links`
/// (each host's link table): every one arrives once, in order.
fn exchange(pa: bool, links: [String; 2]) {
    let mut rt = [1u8, 2].map(|n| {
        let cfg = host_config_on(n, &links[n as usize - 1], pa, "").unwrap();
        Runtime::new(engine_of(&cfg, u64::from(n)), RuntimeConfig::default()).unwrap()
    });
    let t = rt[0].engine().proto_id(top(pa)).unwrap();
    let (app_a, s_a) = open_side(rt[0].engine_mut(), t, 2);
    let (app_b, _) = open_side(rt[1].engine_mut(), t, 1);
    let (apps, sessions) = ([app_a, app_b], [s_a]);
    let n = 200u32;
    let (app, s) = (apps[0], sessions[0]);
    for i in 0..n {
        let m = Message::from_slice(&payload(i));
        rt[0]
            .engine_mut()
            .with_app(app, |_, cx| cx.send(s, m))
            .unwrap();
        if i % 20 == 0 {
            for r in rt.iter_mut() {
                r.run_for(Duration::from_millis(1)).unwrap();
            }
        }
    }
    let start = Instant::now();
    let got = loop {
        for r in rt.iter_mut() {
            r.run_for(Duration::from_millis(2)).unwrap();
        }
        let got = &rt[1].engine().app::<Sink>(apps[1]).unwrap().got;
        if got.len() >= n as usize || start.elapsed() > Duration::from_secs(20) {
            break got.clone();
        }
    };
    let want: Vec<Vec<u8>> = (0..n).map(payload).collect();
    assert_eq!(got.len(), want.len(), "pa={pa}");
    assert!(got == want, "pa={pa}: every message once, in order");
}
