//! TCP against hand-made segments: RFC 5961's answers to resets, SYNs and
//! ACKs that are not where they should be, RFC 9293's resets for segments of
//! no connection, PAWS, old duplicates, TIME-WAIT's answers, a half-open
//! connection giving up, and an ICMP error refusing a connection.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Host, carry, host_with, settle};
use strata_core::{
    Addr, AppEvent, AppId, Arch, Control, HwAddr, Message, Participants, Qos, Reply, SessionRef,
    UpiError,
};
use strata_proto::eth::wire::{Repr as EthRepr, ethertype};
use strata_proto::icmp::wire::Repr as IcmpRepr;
use strata_proto::ipv4::wire::Repr as IpRepr;
use strata_proto::tcp::seq::Seq;
use strata_proto::tcp::state::State;
use strata_proto::tcp::wire::{Flags, Header, Repr, TcpOptions, Timestamp};
use strata_proto::tcp::{self, ConnInfo, Tcp};

const A_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// A connection from A (client) to B (server, port 80).
struct Conn {
    a: Host,
    b: Host,
    client: AppId,
    server: AppId,
    sa: SessionRef,
    sb: SessionRef,
}

fn hosts(extra: &[(&str, &str, toml::Value)]) -> (Host, Host) {
    (
        host_with(1, Arch::Llm, "tcp/ip/eth", false, extra),
        host_with(2, Arch::Llm, "tcp/ip/eth", false, extra),
    )
}

fn listen(b: &mut Host, port: u16) -> AppId {
    let server = b.recorder();
    let tcp = b.proto("tcp");
    b.engine
        .with_app(server, |_, cx| {
            cx.open_enable(tcp, Participants::local([Addr::Port(port)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    server
}

fn connect(a: &mut Host, app: AppId, local: u16) -> SessionRef {
    let tcp = a.proto("tcp");
    let parts =
        Participants::remote([Addr::Ip(B_IP), Addr::Port(80)]).with_local([Addr::Port(local)]);
    let s = a
        .engine
        .with_app(app, |_, cx| cx.open(tcp, parts, Qos::default()))
        .unwrap()
        .unwrap();
    a.run();
    s
}

fn established(extra: &[(&str, &str, toml::Value)]) -> Conn {
    let (mut a, mut b) = hosts(extra);
    let server = listen(&mut b, 80);
    let client = a.recorder();
    let sa = connect(&mut a, client, 40000);
    settle(&mut a, &mut b);
    let sb = match b.app(server).events.first() {
        Some(AppEvent::OpenDone { session, .. }) => *session,
        other => panic!("no connection: {other:?}"),
    };
    Conn {
        a,
        b,
        client,
        server,
        sa,
        sb,
    }
}

fn info(h: &Host, s: SessionRef) -> Option<ConnInfo> {
    h.engine.protocol::<Tcp>(s.proto).unwrap().info(s.sess)
}

/// A frame from A to B carrying `seg` and `data`.
fn frame(seg: &Repr, data: &[u8]) -> Vec<u8> {
    let tcp = seg.to_bytes(A_IP, B_IP, [data]);
    let ip = IpRepr {
        src: A_IP,
        dst: B_IP,
        protocol: 6,
        ttl: 64,
        tos: 0,
        ident: 7,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        payload_len: tcp.len() + data.len(),
    };
    let eth = EthRepr {
        dst: HwAddr::local(2),
        src: HwAddr::local(1),
        ethertype: ethertype::IPV4,
    };
    [&eth.to_bytes()[..], &ip.to_bytes()[..], &tcp, data].concat()
}

/// The TCP segments among `frames`, with their data.
fn segments(frames: &[Vec<u8>]) -> Vec<(Repr, Vec<u8>)> {
    frames
        .iter()
        .filter(|f| f.len() >= 34 && f[12..14] == [0x08, 0x00] && f[23] == 6)
        .filter_map(|f| {
            let tcp = &f[34..];
            let h = Header::new_checked(tcp).ok()?;
            Some((Repr::parse(&h), tcp[h.header_len()..].to_vec()))
        })
        .collect()
}

impl Conn {
    /// A segment as A would send it next: SEQ = A's SND.NXT, ACK = its RCV.NXT.
    fn next_from_a(&self, flags: Flags) -> Repr {
        let i = info(&self.a, self.sa).unwrap();
        Repr {
            src_port: 40000,
            dst_port: 80,
            seq: i.snd_nxt,
            ack: i.rcv_nxt,
            flags,
            window: 1000,
            urgent: 0,
            options: TcpOptions::default(),
        }
    }

    /// Hands B a segment and returns the segments B answers with.
    fn inject(&mut self, seg: &Repr, data: &[u8]) -> Vec<(Repr, Vec<u8>)> {
        self.b.receive(&frame(seg, data));
        segments(&self.b.sent())
    }

    fn b_state(&self) -> Option<State> {
        info(&self.b, self.sb).map(|i| i.state)
    }

    fn write(h: &mut Host, app: AppId, s: SessionRef, data: &[u8]) {
        let tcp = h.proto("tcp");
        let op = Control::Write(Message::from_slice(data));
        let r = h
            .engine
            .with_app(app, |_, cx| cx.control(tcp, Some(s.sess), op))
            .unwrap();
        assert!(matches!(r, Ok(Reply::Size(n)) if n == data.len()));
        h.run();
    }

    fn shutdown(h: &mut Host, app: AppId, s: SessionRef) {
        let tcp = h.proto("tcp");
        let op = Control::Private(Box::new(tcp::Shutdown));
        h.engine
            .with_app(app, |_, cx| cx.control(tcp, Some(s.sess), op))
            .unwrap()
            .unwrap();
        h.run();
    }
}

/// B asked for A's address before answering it: tell B.
fn answer_arp(b: &mut Host) {
    let sent = b.sent();
    assert!(
        sent.iter().any(|f| f[12..14] == [0x08, 0x06]),
        "B resolves A before answering"
    );
    let reply = strata_proto::arp::wire::Repr {
        operation: strata_proto::arp::wire::Operation::Reply,
        sender_hw: HwAddr::local(1),
        sender_ip: A_IP,
        target_hw: HwAddr::local(2),
        target_ip: B_IP,
    };
    let eth = EthRepr {
        dst: HwAddr::local(2),
        src: HwAddr::local(1),
        ethertype: ethertype::ARP,
    };
    b.receive(&[&eth.to_bytes()[..], &reply.to_bytes()[..]].concat());
}

/// B's expected ACK: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
fn is_ack_of(seg: &Repr, b: &ConnInfo) -> bool {
    seg.flags == Flags::ACK && seg.seq == b.snd_nxt && seg.ack == b.rcv_nxt
}

#[test]
fn a_reset_in_the_window_but_not_at_rcv_nxt_only_earns_a_challenge_ack() {
    let mut c = established(&[]);
    let mut rst = c.next_from_a(Flags::RST);
    rst.seq = rst.seq + 100;
    let answer = c.inject(&rst, b"");
    let b = info(&c.b, c.sb).unwrap();
    assert_eq!(answer.len(), 1, "one challenge ACK");
    assert!(is_ack_of(&answer[0].0, &b), "{:?}", answer[0].0);
    assert_eq!(b.state, State::Established, "the connection lives on");
    assert_eq!(c.b.drops("tcp", "rst-challenged"), 1);
}

#[test]
fn a_reset_exactly_at_rcv_nxt_ends_the_connection() {
    let mut c = established(&[]);
    let rst = c.next_from_a(Flags::RST);
    assert!(c.inject(&rst, b"").is_empty(), "no answer to a reset");
    assert_eq!(c.b_state(), None);
    assert_eq!(
        c.b.app(c.server).events.last(),
        Some(&AppEvent::Closed {
            session: c.sb,
            error: Some(UpiError::Refused)
        })
    );
}

#[test]
fn a_reset_outside_the_window_is_dropped_without_an_answer() {
    let mut c = established(&[]);
    let mut rst = c.next_from_a(Flags::RST);
    rst.seq = rst.seq + (1 << 30);
    assert!(c.inject(&rst, b"").is_empty());
    assert_eq!(c.b_state(), Some(State::Established));
    assert_eq!(c.b.drops("tcp", "rst-out-of-window"), 1);
}

#[test]
fn a_syn_on_an_established_connection_earns_a_challenge_ack_and_changes_nothing() {
    let mut c = established(&[]);
    let mut syn = c.next_from_a(Flags::SYN);
    syn.seq = syn.seq + 5;
    let answer = c.inject(&syn, b"");
    let b = info(&c.b, c.sb).unwrap();
    assert_eq!(answer.len(), 1);
    assert!(is_ack_of(&answer[0].0, &b));
    assert_eq!(b.state, State::Established);
    assert_eq!(c.b.drops("tcp", "syn-challenged"), 1);
}

#[test]
fn an_ack_of_data_never_sent_is_answered_and_its_data_dropped() {
    let mut c = established(&[]);
    let mut seg = c.next_from_a(Flags::ACK | Flags::PSH);
    seg.ack = seg.ack + 100_000;
    let answer = c.inject(&seg, b"not delivered");
    assert_eq!(answer.len(), 1);
    assert!(is_ack_of(&answer[0].0, &info(&c.b, c.sb).unwrap()));
    assert!(c.b.app(c.server).received.is_empty());
    assert_eq!(c.b.drops("tcp", "ack-unsent"), 1);
}

#[test]
fn an_ack_far_below_snd_una_is_challenged_and_dropped() {
    let mut c = established(&[]);
    let mut seg = c.next_from_a(Flags::ACK);
    seg.ack = seg.ack - (1 << 30);
    let answer = c.inject(&seg, b"data");
    assert_eq!(answer.len(), 1);
    assert!(c.b.app(c.server).received.is_empty());
    assert_eq!(c.b.drops("tcp", "ack-too-old"), 1);
}

#[test]
fn segments_of_no_connection_are_answered_with_resets_as_rfc_9293_says() {
    let (_, mut b) = hosts(&[]);
    let closed = |flags, seq: u32, ack: u32| Repr {
        src_port: 40001,
        dst_port: 81,
        seq: Seq(seq),
        ack: Seq(ack),
        flags,
        window: 1000,
        urgent: 0,
        options: TcpOptions::default(),
    };
    b.receive(&frame(&closed(Flags::SYN, 1000, 0), b""));
    answer_arp(&mut b);
    let rst = segments(&b.sent());
    assert_eq!(rst.len(), 1);
    let (r, _) = &rst[0];
    assert_eq!(
        r.flags,
        Flags::RST | Flags::ACK,
        "a SYN: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>"
    );
    assert_eq!((r.seq, r.ack), (Seq(0), Seq(1001)));
    b.receive(&frame(&closed(Flags::ACK, 5000, 7777), b"data"));
    let rst = segments(&b.sent());
    assert_eq!(rst[0].0.flags, Flags::RST, "an ACK: <SEQ=SEG.ACK><CTL=RST>");
    assert_eq!(rst[0].0.seq, Seq(7777));
    b.receive(&frame(&closed(Flags::RST, 5000, 0), b""));
    assert!(segments(&b.sent()).is_empty(), "never a reset for a reset");
    assert_eq!(b.drops("tcp", "no-session"), 3);
}

#[test]
fn paws_drops_data_whose_timestamp_is_older_than_ts_recent_but_not_a_reordered_ack() {
    let mut c = established(&[]);
    Conn::write(&mut c.a, c.client, c.sa, b"first");
    let sent = segments(&c.a.sent());
    let ts = sent
        .last()
        .unwrap()
        .0
        .options
        .timestamp
        .expect("timestamps are on");
    c.b.receive(&frame(&sent.last().unwrap().0, b"first"));
    c.b.sent();
    let mut old = c.next_from_a(Flags::ACK | Flags::PSH);
    old.options.timestamp = Some(Timestamp {
        val: ts.val.wrapping_sub(1000),
        ecr: ts.ecr,
    });
    let answer = c.inject(&old, b"stale");
    assert_eq!(answer.len(), 1, "an ACK answers it");
    assert_eq!(c.b.drops("tcp", "paws"), 1);
    assert_eq!(c.b.app(c.server).data(), vec![b"first".to_vec()]);
    old.options.timestamp = Some(ts);
    c.inject(&old, b"fresh");
    assert_eq!(
        c.b.app(c.server).data(),
        vec![b"first".to_vec(), b"fresh".to_vec()]
    );
    let mut reordered_ack = c.next_from_a(Flags::ACK);
    reordered_ack.seq = reordered_ack.seq + 5;
    reordered_ack.options.timestamp = Some(Timestamp {
        val: ts.val.wrapping_sub(1),
        ecr: ts.ecr,
    });
    c.inject(&reordered_ack, b"");
    assert_eq!(
        c.b.drops("tcp", "paws"),
        1,
        "a bare ACK that was overtaken by a few ms is not an old duplicate"
    );
}

#[test]
fn an_old_duplicate_is_acknowledged_again_with_a_dsack_and_not_delivered_twice() {
    let mut c = established(&[]);
    Conn::write(&mut c.a, c.client, c.sa, b"once");
    let frames = c.a.sent();
    let data = segments(&frames)[0].0;
    for f in &frames {
        c.b.receive(f);
    }
    c.b.sent();
    c.b.receive(&frames[0]);
    let answer = segments(&c.b.sent());
    assert_eq!(answer.len(), 1, "the ACK may have been lost: ACK again");
    assert!(is_ack_of(&answer[0].0, &info(&c.b, c.sb).unwrap()));
    assert_eq!(
        answer[0].0.options.sack.as_slice(),
        &[(data.seq, data.seq + 4)],
        "a D-SACK names the duplicate (RFC 2883)"
    );
    assert_eq!(c.b.app(c.server).data(), vec![b"once".to_vec()]);
    assert_eq!(c.b.drops("tcp", "duplicate"), 1);
}

#[test]
fn a_fin_retransmitted_into_time_wait_is_acknowledged_again() {
    let mut c = established(&[]);
    Conn::shutdown(&mut c.a, c.client, c.sa);
    settle(&mut c.a, &mut c.b);
    Conn::shutdown(&mut c.b, c.server, c.sb);
    carry(&mut c.b, &mut c.a);
    assert_eq!(info(&c.a, c.sa).unwrap().state, State::TimeWait);
    let lost_ack = c.a.sent();
    assert_eq!(lost_ack.len(), 1, "A's last ACK, which we lose");
    assert_eq!(c.b_state(), Some(State::LastAck));
    c.b.advance(Duration::from_millis(1500));
    let fin_again = c.b.sent();
    assert_eq!(segments(&fin_again)[0].0.flags, Flags::FIN | Flags::ACK);
    for f in &fin_again {
        c.a.receive(f);
    }
    let ack_again = c.a.sent();
    assert_eq!(segments(&ack_again)[0].0.flags, Flags::ACK);
    for f in &ack_again {
        c.b.receive(f);
    }
    assert_eq!(c.b_state(), None, "LAST-ACK got its ACK");
    assert_eq!(info(&c.a, c.sa).unwrap().state, State::TimeWait);
}

#[test]
fn a_new_syn_reopens_a_connection_lingering_in_time_wait() {
    let mut c = established(&[]);
    Conn::shutdown(&mut c.b, c.server, c.sb);
    settle(&mut c.a, &mut c.b);
    Conn::shutdown(&mut c.a, c.client, c.sa);
    settle(&mut c.a, &mut c.b);
    assert_eq!(
        c.b_state(),
        Some(State::TimeWait),
        "the server closed first"
    );
    assert_eq!(info(&c.a, c.sa), None);
    c.a.advance(Duration::from_secs(1));
    c.b.advance(Duration::from_secs(1));
    let again = connect(&mut c.a, c.client, 40000);
    settle(&mut c.a, &mut c.b);
    assert_eq!(info(&c.a, again).unwrap().state, State::Established);
    assert_eq!(c.b.events("tcp", "time-wait-reopened"), 1);
}

#[test]
fn a_half_open_connection_resends_its_syn_ack_with_backoff_then_gives_up() {
    let (_, mut b) = hosts(&[("tcp", "synack_retries", 2.into())]);
    let server = listen(&mut b, 80);
    let syn = Repr {
        src_port: 40002,
        dst_port: 80,
        seq: Seq(77),
        ack: Seq(0),
        flags: Flags::SYN,
        window: 1000,
        urgent: 0,
        options: TcpOptions::default(),
    };
    // Let B's ARP request go unanswered but its SYN-ACKs be seen: they wait
    // in ARP's queue, so count transmissions by the protocol's own events.
    b.receive(&frame(&syn, b""));
    let tcp = b.engine.proto_id("tcp").unwrap();
    let pending = |b: &Host| b.engine.protocol::<Tcp>(tcp).unwrap().pending(80);
    assert_eq!(pending(&b), Some(1));
    b.advance(Duration::from_millis(1000));
    b.advance(Duration::from_millis(2000));
    assert_eq!(
        b.events("tcp", "rto"),
        2,
        "two SYN-ACK retransmissions, 1 s then 2 s later"
    );
    b.advance(Duration::from_millis(4000));
    assert_eq!(pending(&b), Some(0), "given up");
    assert_eq!(b.events("tcp", "handshake-timeout"), 1);
    assert!(
        b.app(server).events.is_empty(),
        "the listener never heard of it"
    );
}

#[test]
fn a_port_unreachable_about_our_syn_refuses_the_connection() {
    let mut c = established(&[]);
    let other = c.a.recorder();
    let tcp = c.a.proto("tcp");
    let parts = Participants::remote([Addr::Ip(B_IP), Addr::Port(81)]);
    let s =
        c.a.engine
            .with_app(other, |_, cx| cx.open(tcp, parts, Qos::default()))
            .unwrap()
            .unwrap();
    c.a.run();
    let syn = c.a.sent().pop().expect("the SYN");
    let quoted = &syn[14..14 + 28];
    let icmp = IcmpRepr::DstUnreachable { code: 3 }.to_bytes_over([quoted]);
    let body = [&icmp[..], quoted].concat();
    let ip = IpRepr {
        src: B_IP,
        dst: A_IP,
        protocol: 1,
        ttl: 64,
        tos: 0,
        ident: 9,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        payload_len: body.len(),
    };
    let eth = EthRepr {
        dst: HwAddr::local(1),
        src: HwAddr::local(2),
        ethertype: ethertype::IPV4,
    };
    c.a.receive(&[&eth.to_bytes()[..], &ip.to_bytes()[..], &body].concat());
    assert_eq!(
        c.a.app(other).events,
        vec![AppEvent::Closed {
            session: s,
            error: Some(UpiError::Refused)
        }]
    );
    assert_eq!(c.a.events("tcp", "closed-by-icmp"), 1);
    assert_eq!(
        info(&c.a, c.sa).unwrap().state,
        State::Established,
        "the other connection is untouched"
    );
}

#[test]
fn data_on_the_ack_that_completes_the_handshake_arrives_after_the_open_done() {
    let (_, mut b) = hosts(&[]);
    let server = listen(&mut b, 80);
    let seg = |flags, seq: u32, ack: Seq| Repr {
        src_port: 40003,
        dst_port: 80,
        seq: Seq(seq),
        ack,
        flags,
        window: 1000,
        urgent: 0,
        options: TcpOptions::default(),
    };
    b.receive(&frame(&seg(Flags::SYN, 500, Seq(0)), b""));
    answer_arp(&mut b);
    let syn_ack = segments(&b.sent());
    assert_eq!(syn_ack[0].0.flags, Flags::SYN | Flags::ACK);
    let iss = syn_ack[0].0.seq;
    b.receive(&frame(
        &seg(Flags::ACK | Flags::PSH, 501, iss + 1),
        b"early data",
    ));
    let events = &b.app(server).events;
    assert!(
        matches!(events.first(), Some(AppEvent::OpenDone { .. })),
        "{events:?}"
    );
    assert_eq!(b.app(server).data(), vec![b"early data".to_vec()]);
    assert_eq!(b.events("tcp", "delivered-after-open"), 1);
}

#[test]
fn withdrawing_a_listener_resets_its_half_open_connections() {
    let (_, mut b) = hosts(&[]);
    let server = listen(&mut b, 80);
    let syn = Repr {
        src_port: 40004,
        dst_port: 80,
        seq: Seq(900),
        ack: Seq(0),
        flags: Flags::SYN,
        window: 1000,
        urgent: 0,
        options: TcpOptions::default(),
    };
    b.receive(&frame(&syn, b""));
    answer_arp(&mut b);
    assert_eq!(segments(&b.sent())[0].0.flags, Flags::SYN | Flags::ACK);
    let tcp = b.proto("tcp");
    b.engine
        .with_app(server, |_, cx| {
            cx.open_disable(tcp, Participants::local([Addr::Port(80)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    b.run();
    let rst = segments(&b.sent());
    assert_eq!(rst.len(), 1);
    assert_eq!(rst[0].0.flags, Flags::RST);
    assert_eq!(b.engine.protocol::<Tcp>(tcp).unwrap().connection_count(), 0);
    b.receive(&frame(&syn, b""));
    assert_eq!(
        segments(&b.sent())[0].0.flags,
        Flags::RST | Flags::ACK,
        "the port is closed now"
    );
}
