//! The example protocol of `docs/writing-a-protocol.md`, `seqnum`, placed in a
//! host purely by the graph config below — no code names it — and checked against
//! what the simulated link really lost.

use std::any::Any;
use std::time::Duration;

use strata::link::{Direction, LinkParams, SimNet};
use strata::proto::seqnum::SeqNum;
use strata::{
    Addr, App, AppCx, Arch, GraphConfig, HostBuilder, HostParams, Message, PacketMeta,
    Participants, Qos, SessionRef,
};

/// The guide's config: Ethernet, ARP, IPv4 with ICMP, and `seqnum` on IPv4 under
/// the experimental protocol number 254 (RFC 3692).
fn config(n: u8) -> GraphConfig {
    let text = format!(
        r#"
[link.net0]
kind = "sim"

[protocol.eth]
below = ["net0"]
mac = "02:53:54:00:00:0{n}"

[protocol.arp]
below = ["eth"]
address = "198.18.0.{n}/24"

[protocol.ip]
below = ["eth", "arp"]
address = "198.18.0.{n}/24"

[protocol.icmp]
below = ["ip"]

[protocol.seqnum]
below = ["ip"]
numbers = {{ ip = 254 }}
max_peers = 8
"#
    );
    GraphConfig::from_toml(&text).unwrap()
}

/// Notes the number each message carries in its payload.
#[derive(Default)]
struct Count {
    got: Vec<u32>,
}

impl App for Count {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, _: &mut AppCx) {
        let mut n = [0u8; 4];
        msg.copy_to_slice(0, &mut n);
        self.got.push(u32::from_be_bytes(n));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn seqnum_counts_exactly_the_numbers_missing_between_the_first_and_last_message() {
    for arch in [Arch::Llm, Arch::Illm, Arch::Daa] {
        let host = |n: u8| {
            HostBuilder::config(config(n), HostParams::numbered(n))
                .arch(arch)
                .build()
                .unwrap()
        };
        let mut net = SimNet::new(9);
        let a = net.add_host("a", host(1));
        let b = net.add_host("b", host(2));
        let lossy = LinkParams {
            delay: Duration::from_millis(1),
            loss: 0.05,
            ..LinkParams::default()
        };
        let w = net
            .connect((a, "net0"), (b, "net0"), lossy, LinkParams::default())
            .unwrap();

        let seqnum = net.engine(b).proto_id("seqnum").unwrap();
        let rx = net.engine(b).add_app(Box::new(Count::default()));
        net.engine(b)
            .with_app(rx, |_, cx| {
                cx.open_enable(seqnum, Participants::default(), Qos::default())
            })
            .unwrap()
            .unwrap();
        let tx = net.engine(a).add_app(Box::new(Count::default()));
        let peer = HostParams::numbered(2).address.address();
        let s = net
            .engine(a)
            .with_app(tx, |_, cx| {
                cx.open(
                    seqnum,
                    Participants::remote([Addr::Ip(peer)]),
                    Qos::default(),
                )
            })
            .unwrap()
            .unwrap();
        // Message i carries i and seqnum's number i; the link loses some.
        for i in 0..500u32 {
            let msg = Message::from_slice(&i.to_be_bytes());
            net.engine(a).with_app(tx, |_, cx| cx.send(s, msg)).unwrap();
            net.run_for(Duration::from_micros(200));
        }
        net.run_for(Duration::from_secs(5));
        let got = net.engine(b).app::<Count>(rx).unwrap().got.clone();
        let gaps = net.engine(b).counters(seqnum).events().get("gap");
        let late = net.engine(b).counters(seqnum).events().get("late");
        assert!(
            net.wire_stats(w, Direction::AToB).lost() > 0,
            "{arch}: the link lost some"
        );
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{arch}: in order, no duplicates"
        );
        // The passive open starts counting at the first message it sees; every
        // number missing between that one and the last one seen is a gap.
        let (first, last) = (got[0], got[got.len() - 1]);
        let missing = u64::from(last - first + 1) - got.len() as u64;
        assert!(
            missing > 0,
            "{arch}: some losses fall between the first and last"
        );
        assert_eq!(
            (gaps, late),
            (missing, 0),
            "{arch}: seqnum counts exactly the missing"
        );
        let sn = net.engine(b).protocol::<SeqNum>(seqnum);
        assert!(sn.is_some(), "{arch}: the config made a seqnum protocol");
    }
}
