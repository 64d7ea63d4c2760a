//! Applications and hosts for AppleTalk tests: a requester that runs numbered
//! ATP transactions one after another and checks every reply, and a responder
//! that counts how often each request reached it (exactly-once means once).

#![allow(dead_code)]

use std::any::Any;
use std::time::Duration;

use strata::link::{HostId, LinkParams, SimNet, WireId};
use strata::{
    Addr, App, AppCx, AppEvent, Arch, HostBuilder, HostParams, Message, PacketMeta, Participants,
    Qos, SessionRef,
};

/// The responder's socket.
pub const SOCKET: u16 = 10;

/// AppleTalk's startup network, where every test node lives.
pub const NET: u16 = 0xff00;

/// The reply to request `seq`: `len` bytes derived from it (more than 578
/// bytes take several response packets).
pub fn reply(seq: u32, len: usize) -> Vec<u8> {
    let mut r: Vec<u8> = (0..len)
        .map(|i| (seq as usize).wrapping_mul(7).wrapping_add(i) as u8)
        .collect();
    r[..4].copy_from_slice(&seq.to_be_bytes());
    r
}

fn seq_of(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// Runs `total` transactions one at a time, checking each reply.
pub struct Requester {
    pub session: Option<SessionRef>,
    pub total: u32,
    pub reply_len: usize,
    pub next: u32,
    /// Replies that came back intact, by sequence number.
    pub done: Vec<u32>,
    pub wrong: u32,
}

impl Requester {
    fn request(&mut self, cx: &mut AppCx) {
        if let Some(s) = self.session
            && self.next < self.total
        {
            cx.send(s, Message::from(self.next.to_be_bytes().to_vec()));
            self.next += 1;
        }
    }

    /// Whether every transaction came back.
    pub fn finished(&self) -> bool {
        self.done.len() == self.total as usize
    }
}

impl App for Requester {
    fn receive(&mut self, _: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        let bytes = msg.to_vec();
        match seq_of(&bytes) {
            Some(seq) if seq + 1 == self.next && bytes == reply(seq, self.reply_len) => {
                self.done.push(seq);
                self.request(cx);
            }
            _ => self.wrong += 1,
        }
    }

    fn timer(&mut self, _: u64, cx: &mut AppCx) {
        self.request(cx);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Answers each request with [`reply`], counting deliveries per request.
pub struct Responder {
    pub reply_len: usize,
    pub deliveries: Vec<u32>,
    pub sessions: u32,
}

impl App for Responder {
    fn receive(&mut self, s: Option<SessionRef>, msg: Message, _: &PacketMeta, cx: &mut AppCx) {
        let Some(seq) = seq_of(&msg.to_vec()) else {
            return;
        };
        if let Some(d) = self.deliveries.get_mut(seq as usize) {
            *d += 1;
        }
        if let Some(s) = s {
            cx.send(s, Message::from(reply(seq, self.reply_len)));
        }
    }

    fn event(&mut self, e: AppEvent, _: &mut AppCx) {
        if let AppEvent::OpenDone { .. } = e {
            self.sessions += 1;
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Host `n` (node `n` on [`NET`]) running `spec`.
pub fn host(n: u8, arch: Arch, spec: &str) -> strata::Engine {
    HostBuilder::spec(spec, HostParams::numbered(n), "net0", strata::link::SIM)
        .arch(arch)
        .seed(u64::from(n))
        .build()
        .unwrap()
}

/// Two hosts on one simulated wire: the requester `a` runs `spec_a`, the
/// responder `b` `spec_b`.
pub fn pair(
    arch: Arch,
    seed: u64,
    spec_a: &str,
    spec_b: &str,
    params: LinkParams,
) -> (SimNet, HostId, HostId, WireId) {
    let mut net = SimNet::new(seed);
    let a = net.add_host("a", host(1, arch, spec_a));
    let b = net.add_host("b", host(2, arch, spec_b));
    let w = net
        .connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    (net, a, b, w)
}

/// Starts `total` transactions from `a`'s `atp` to `b`'s, whose replies are
/// `reply_len` bytes; returns (requester, responder).
pub fn transactions(
    net: &mut SimNet,
    a: HostId,
    b: HostId,
    total: u32,
    reply_len: usize,
) -> (strata::AppId, strata::AppId) {
    let rx = net.engine(b).add_app(Box::new(Responder {
        reply_len,
        deliveries: vec![0; total as usize],
        sessions: 0,
    }));
    let atp_b = atp_of(net.engine(b));
    net.engine(b)
        .with_app(rx, |_, cx| {
            cx.open_enable(
                atp_b,
                Participants::local([Addr::Port(SOCKET)]),
                Qos::default(),
            )
        })
        .unwrap()
        .unwrap();
    let tx = net.engine(a).add_app(Box::new(Requester {
        session: None,
        total,
        reply_len,
        next: 0,
        done: Vec::new(),
        wrong: 0,
    }));
    let atp_a = atp_of(net.engine(a));
    net.engine(a)
        .with_app(tx, |app, cx| {
            let parts =
                Participants::remote([Addr::AppleTalk { net: NET, node: 2 }, Addr::Port(SOCKET)]);
            let s = cx.open(atp_a, parts, Qos::default()).unwrap();
            app.as_any_mut()
                .downcast_mut::<Requester>()
                .unwrap()
                .session = Some(s);
            let now = cx.now();
            cx.set_timer(now, 0);
        })
        .unwrap();
    (tx, rx)
}

/// The host's ATP, native or imported.
pub fn atp_of(e: &strata::Engine) -> strata::ProtoId {
    ["atp", "atp@bsd", "atp@streams"]
        .into_iter()
        .find_map(|k| e.proto_id(k))
        .expect("an ATP in the graph")
}

/// A link with loss, duplication and reordering.
pub fn lossy(loss: f64) -> LinkParams {
    LinkParams {
        delay: Duration::from_millis(5),
        loss,
        duplicate: loss,
        reorder: loss,
        reorder_delay: Duration::from_millis(3),
        ..LinkParams::default()
    }
}
