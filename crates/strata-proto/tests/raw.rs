//! Seed 000 Table 1's ETH and IP-ETH stacks: applications bound directly to
//! an ethertype or an IP protocol number, talking to each other.

mod common;

use std::any::Any;

use common::{Host, host_with, settle};
use strata_core::{
    Addr, App, AppCx, AppId, Arch, Control, HwAddr, Message, PacketMeta, Participants, Priority,
    ProtoId, Qos, SessionRef,
};
use strata_proto::info::{hw_source, ip_source};
use strata_proto::{Ipv4Info, RAW_ETHERTYPE, RAW_IP_PROTOCOL};

/// Echoes what it receives back to the sender, through a session it opens on
/// `layer` the first time (remote taken from the meta), and records it all.
struct RawEcho {
    layer: ProtoId,
    ip: bool,
    reply: Option<SessionRef>,
    received: Vec<(Option<SessionRef>, Vec<u8>)>,
}

impl App for RawEcho {
    fn receive(
        &mut self,
        session: Option<SessionRef>,
        msg: Message,
        meta: &PacketMeta,
        cx: &mut AppCx,
    ) {
        self.received.push((session, msg.to_vec()));
        if self.reply.is_none() {
            let peer = if self.ip {
                Addr::Ip(Ipv4Info::from_meta(meta).src)
            } else {
                Addr::Hw(hw_source(meta).unwrap_or(HwAddr::ZERO))
            };
            self.reply = cx
                .open(self.layer, Participants::remote([peer]), Qos::default())
                .ok();
        }
        if let Some(s) = self.reply {
            cx.send(s, msg);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Binds a recording app on `h`'s `layer` under `number` and opens a session
/// to `peer`.
fn client(h: &mut Host, layer: &str, number: u32, peer: Addr) -> (AppId, SessionRef) {
    let app = h.recorder();
    let p = h.proto(layer);
    let s = h
        .engine
        .with_app(app, |_, cx| {
            cx.bind(p, number)?;
            cx.open(p, Participants::remote([peer]), Qos::default())
        })
        .unwrap()
        .unwrap();
    (app, s)
}

fn server(h: &mut Host, layer: &str, number: u32, ip: bool) -> AppId {
    let p = h.proto(layer);
    let app = h.engine.add_app(Box::new(RawEcho {
        layer: p,
        ip,
        reply: None,
        received: Vec::new(),
    }));
    h.engine
        .with_app(app, |_, cx| cx.bind(p, number))
        .unwrap()
        .unwrap();
    app
}

#[test]
fn a_raw_ethernet_app_talks_to_another_across_the_link() {
    for arch in Arch::ALL {
        let mut a = host_with(1, arch, "eth", false, &[]);
        let mut b = host_with(2, arch, "eth", false, &[]);
        let echo = server(&mut b, "eth", RAW_ETHERTYPE, false);
        let (app, s) = client(&mut a, "eth", RAW_ETHERTYPE, Addr::Hw(b.mac));
        a.engine
            .with_app(app, |_, cx| cx.send(s, Message::from_slice(b"raw frame")))
            .unwrap();
        a.run();
        let out = a.sent();
        assert_eq!(
            &out[0][12..14],
            &[0x88, 0xb5],
            "{arch}: the experimental ethertype"
        );
        assert_eq!(
            &out[0][14..],
            b"raw frame",
            "{arch}: no padding, no other header"
        );
        for f in &out {
            b.receive(f);
        }
        settle(&mut a, &mut b);
        let got = &b.engine.app::<RawEcho>(echo).unwrap().received;
        assert_eq!(
            got,
            &vec![(None, b"raw frame".to_vec())],
            "{arch}: bound by number, no session"
        );
        assert_eq!(
            a.app(app).data(),
            vec![b"raw frame".to_vec()],
            "{arch}: the echo came back"
        );
    }
}

#[test]
fn a_raw_ip_app_talks_to_another_through_arp_and_ip() {
    for arch in Arch::ALL {
        let mut a = host_with(1, arch, "ip/eth", false, &[]);
        let mut b = host_with(2, arch, "ip/eth", false, &[]);
        let echo = server(&mut b, "ip", RAW_IP_PROTOCOL, true);
        let (app, s) = client(&mut a, "ip", RAW_IP_PROTOCOL, Addr::Ip(b.ip));
        a.engine
            .with_app(app, |_, cx| {
                cx.send(s, Message::from_slice(b"raw datagram"))
            })
            .unwrap();
        a.run();
        settle(&mut a, &mut b);
        let got = &b.engine.app::<RawEcho>(echo).unwrap().received;
        assert_eq!(got, &vec![(None, b"raw datagram".to_vec())], "{arch}");
        let (session, data, meta) = &a.app(app).received[0];
        assert_eq!(data, b"raw datagram", "{arch}");
        assert_eq!(
            *session,
            Some(s),
            "{arch}: the reply finds the app's IP session"
        );
        assert_eq!(ip_source(meta), Some(b.ip), "{arch}");
        a.engine
            .with_app(app, |_, cx| cx.send(s, Message::from_slice(b"again")))
            .unwrap();
        a.run();
        let frame = a.sent().remove(0);
        assert_eq!(
            frame[23], 253,
            "{arch}: the experimental protocol number (RFC 3692)"
        );
    }
}

#[test]
fn a_priority_set_on_an_ethernet_session_orders_the_link_queue() {
    let mut a = host_with(1, Arch::Llm, "eth", false, &[]);
    let (app, bulk) = client(&mut a, "eth", RAW_ETHERTYPE, Addr::Hw(HwAddr::local(2)));
    let eth = a.proto("eth");
    let urgent = a
        .engine
        .with_app(app, |_, cx| {
            cx.open(
                eth,
                Participants::remote([Addr::Hw(HwAddr::local(3))]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    a.engine
        .control(eth, Some(urgent.sess), Control::SetPriority(Priority(1)))
        .unwrap();
    a.engine
        .with_app(app, |_, cx| {
            cx.send(bulk, Message::from_slice(b"bulk 1"));
            cx.send(bulk, Message::from_slice(b"bulk 2"));
            cx.send(urgent, Message::from_slice(b"urgent"));
        })
        .unwrap();
    a.run();
    let order: Vec<Vec<u8>> = a.sent().iter().map(|f| f[14..].to_vec()).collect();
    assert_eq!(
        order,
        vec![b"urgent".to_vec(), b"bulk 1".to_vec(), b"bulk 2".to_vec()]
    );
}
