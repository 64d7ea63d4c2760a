//! The paper's stack on real links: Ethernet frames in kernel UDP datagrams
//! between two runtimes on the loopback interface, the PA off and on.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::{Sink, engine_of};
use strata::link::{Runtime, RuntimeConfig};
use strata::{Addr, Message, Participants, Qos};
use strata_pa::example::{host_config_on, mac, top};

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
        let (pa_addr, pb_addr) = (free_port(), free_port());
        let link = |l: &str, p: &str| format!("kind = \"udp\"\nlocal = \"{l}\"\npeer = \"{p}\"");
        let mut rt = [
            Runtime::new(
                engine_of(
                    &host_config_on(1, &link(&pa_addr, &pb_addr), pa, "").unwrap(),
                    1,
                ),
                RuntimeConfig::default(),
            )
            .unwrap(),
            Runtime::new(
                engine_of(
                    &host_config_on(2, &link(&pb_addr, &pa_addr), pa, "").unwrap(),
                    2,
                ),
                RuntimeConfig::default(),
            )
            .unwrap(),
        ];
        let mut apps = Vec::new();
        let mut sessions = Vec::new();
        for (i, peer) in [(0usize, 2u8), (1, 1)] {
            let e = rt[i].engine_mut();
            let t = e.proto_id(top(pa)).unwrap();
            let app = e.add_app(Box::new(Sink::default()));
            let s = e
                .with_app(app, |_, cx| {
                    cx.open(
                        t,
                        Participants::remote([Addr::Hw(mac(peer))]),
                        Qos::default(),
                    )
                })
                .unwrap()
                .unwrap();
            apps.push(app);
            sessions.push(s);
        }
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
        loop {
            for r in rt.iter_mut() {
                r.run_for(Duration::from_millis(2)).unwrap();
            }
            let got = rt[1].engine().app::<Sink>(apps[1]).unwrap().got.len();
            if got >= n as usize || start.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
        let got = rt[1].engine().app::<Sink>(apps[1]).unwrap().got.clone();
        let want: Vec<Vec<u8>> = (0..n).map(payload).collect();
        assert_eq!(got.len(), want.len(), "pa={pa}");
        assert!(got == want, "pa={pa}: every message once, in order");
    }
}
