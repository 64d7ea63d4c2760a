//! The engine's contract, shown on a toy stack: work runs to completion, both
//! architectures deliver the same bytes, drops are counted with their reason,
//! timers fire, and bad graphs are refused naming the culprit.

mod toy;

use strata_core::graph::{self, GraphConfig};
use strata_core::{
    Addr, AppId, Arch, Engine, EngineConfig, GraphError, Instant, LinkId, Message, Participants,
    Qos, SessionRef,
};
use toy::{Echo, GRAPH, registry};

fn engine(arch: Arch) -> Engine {
    let cfg = GraphConfig::from_toml(GRAPH).unwrap();
    let built = graph::build(&cfg, &registry()).unwrap();
    Engine::new(
        built,
        EngineConfig {
            arch: Some(arch),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Two engines joined back to back by their only link, each with one app on port 9.
fn pair(arch: Arch) -> (Engine, Engine, AppId, SessionRef) {
    let mut a = engine(arch);
    let mut b = engine(arch);
    let port = a.proto_id("port").unwrap();
    let client = a.add_app(Box::new(Echo::default()));
    let sess = a
        .with_app(client, |_, cx| {
            cx.open(port, Participants::local([Addr::Port(9)]), Qos::default())
        })
        .unwrap()
        .unwrap();
    let server = b.add_app(Box::new(Echo {
        echo: true,
        ..Default::default()
    }));
    b.with_app(server, |_, cx| {
        cx.open(port, Participants::local([Addr::Port(9)]), Qos::default())
    })
    .unwrap()
    .unwrap();
    (a, b, client, sess)
}

fn shuttle(from: &mut Engine, to: &mut Engine) -> usize {
    let mut n = 0;
    while let Some(frame) = from.poll_transmit(LinkId(0)) {
        to.receive(LinkId(0), frame);
        n += 1;
    }
    to.run(Instant::ZERO);
    n
}

#[test]
fn a_message_goes_down_one_stack_up_the_other_and_back() {
    for arch in [Arch::Llm, Arch::Illm] {
        let (mut a, mut b, client, sess) = pair(arch);
        a.with_app(client, |_, cx| cx.send(sess, Message::from_slice(b"ping")))
            .unwrap();
        a.run(Instant::ZERO);
        assert_eq!(shuttle(&mut a, &mut b), 1, "{arch}: one frame out");
        assert_eq!(shuttle(&mut b, &mut a), 1, "{arch}: one echo back");
        let echo: &Echo = a.app(client).unwrap();
        assert_eq!(echo.seen, vec![b"ping".to_vec()], "{arch}");
        let port = a.proto_id("port").unwrap();
        assert_eq!(a.counters(port).packets_in, 1);
        assert_eq!(a.counters(port).packets_out, 1);
    }
}

#[test]
fn illm_skips_pops_that_only_strip() {
    let (mut a, mut b, client, sess) = pair(Arch::Illm);
    a.with_app(client, |_, cx| cx.send(sess, Message::from_slice(b"x")))
        .unwrap();
    a.run(Instant::ZERO);
    shuttle(&mut a, &mut b);
    assert_eq!(b.engine_counters().events().get("illm-pop-skipped"), 1);
    let frame = b.proto_id("frame").unwrap();
    assert_eq!(b.counters(frame).packets_in, 1, "skipped pops still count");
}

#[test]
fn packets_nobody_wants_are_dropped_and_counted_by_reason() {
    for arch in [Arch::Llm, Arch::Illm] {
        let mut e = engine(arch);
        let frame = e.proto_id("frame").unwrap();
        let port = e.proto_id("port").unwrap();
        e.receive(LinkId(0), Message::from_slice(&[]));
        e.receive(LinkId(0), Message::from_slice(&[99, 1, 2]));
        e.receive(LinkId(0), Message::from_slice(&[7, 0]));
        e.receive(LinkId(0), Message::from_slice(&[7, 0, 42, b'x']));
        e.run(Instant::ZERO);
        assert_eq!(e.counters(frame).drops().get("truncated"), 1, "{arch}");
        assert_eq!(e.counters(frame).drops().get("no-protocol"), 1, "{arch}");
        assert_eq!(e.counters(port).drops().get("truncated"), 1, "{arch}");
        assert_eq!(e.counters(port).drops().get("no-session"), 1, "{arch}");
    }
}

#[test]
fn a_header_split_across_segments_is_gathered_for_demux() {
    let (_, mut b, _, _) = pair(Arch::Llm);
    let mut frame = Message::from_slice(&[7, 0]);
    frame.append_bytes(bytes::Bytes::from_static(&[9, b'h', b'i']));
    b.receive(LinkId(0), frame);
    b.run(Instant::ZERO);
    let port = b.proto_id("port").unwrap();
    assert_eq!(b.counters(port).packets_in, 1);
    assert_eq!(b.counters(port).dropped(), 0);
}

#[test]
fn timers_fire_at_their_time_and_not_before() {
    let mut e = engine(Arch::Llm);
    /// Re-arms once, 5 ms after its first timer fires.
    struct Arm;
    impl strata_core::App for Arm {
        fn receive(
            &mut self,
            _: Option<SessionRef>,
            _: Message,
            _: &strata_core::PacketMeta,
            _: &mut strata_core::AppCx,
        ) {
        }
        fn timer(&mut self, token: u64, cx: &mut strata_core::AppCx) {
            if token == 1 {
                let at = cx.now() + std::time::Duration::from_millis(5);
                cx.set_timer(at, 2);
            }
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }
    let app = e.add_app(Box::new(Arm));
    let t = e
        .with_app(app, |_, cx| {
            cx.set_timer(Instant::from_nanos(10_000_000), 1);
            cx.set_timer(Instant::from_nanos(1), 99)
        })
        .unwrap();
    e.with_app(app, |_, cx| cx.cancel_timer(t)).unwrap();
    assert_eq!(e.next_deadline(), Some(Instant::from_nanos(10_000_000)));
    e.run(Instant::from_nanos(9_999_999));
    assert_eq!(e.armed_timers(), 1);
    e.run(Instant::from_nanos(10_000_000));
    assert_eq!(e.next_deadline(), Some(Instant::from_nanos(15_000_000)));
}

#[test]
fn an_idle_call_comes_once_at_the_next_run_after_the_frames_left() {
    let (mut a, mut b, client, sess) = pair(Arch::Llm);
    let port = a.proto_id("port").unwrap();
    let idle_calls = |e: &Engine| e.protocol::<toy::Port>(port).unwrap().idle_calls;
    a.run(Instant::from_nanos(5));
    assert!(a.is_idle());
    a.with_app(client, |_, cx| cx.send(sess, Message::from_slice(b"ping")))
        .unwrap();
    // Asked twice while the frame waits for the driver: one call, not yet.
    a.control(
        port,
        None,
        strata_core::Control::Private(Box::new("idle, please")),
    )
    .unwrap();
    assert_eq!(idle_calls(&a), 0);
    assert!(!a.is_idle(), "an idle call waits");
    assert_eq!(a.next_deadline(), Some(Instant::from_nanos(5)), "due now");
    assert_eq!(shuttle(&mut a, &mut b), 1, "the frame left before the call");
    a.run(Instant::from_nanos(5));
    assert_eq!(idle_calls(&a), 1);
    assert!(a.is_idle());
    assert_eq!(a.next_deadline(), None);
    a.run(Instant::from_nanos(6));
    assert_eq!(idle_calls(&a), 1, "once per asking");
}

fn build_err(text: &str) -> String {
    let cfg = match GraphConfig::from_toml(text) {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    match graph::build(&cfg, &registry()) {
        Ok(_) => "built".into(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_graphs_are_refused_naming_the_culprit() {
    let cycle = "[link.w]\nkind='wire'\n[protocol.frame]\nbelow=['w']\n\
                 [protocol.a]\nkind='port'\nbelow=['b']\n[protocol.b]\nkind='port'\nbelow=['a']";
    assert!(
        build_err(cycle).contains("cycle: a → b → a"),
        "{}",
        build_err(cycle)
    );
    let unknown =
        "[link.w]\nkind='wire'\n[protocol.frame]\nbelow=['w']\n[protocol.tcpp]\nbelow=['frame']";
    assert!(build_err(unknown).contains("protocol 'tcpp': unknown protocol kind 'tcpp'"));
    let below = "[link.w]\nkind='wire'\n[protocol.frame]\nbelow=['wire0']";
    assert!(build_err(below).contains("below names 'wire0'"));
    let option = "[link.w]\nkind='wire'\n[protocol.frame]\nbelow=['w']\n[protocol.port]\nbelow=['frame']\nbsae=1";
    assert!(
        build_err(option).contains("protocol 'port': option 'bsae': unknown option (known: base)")
    );
    let bad_value = "[link.w]\nkind='wire'\n[protocol.frame]\nbelow=['w']\n[protocol.port]\nbelow=['frame']\nbase='many'";
    assert!(build_err(bad_value).contains("protocol 'port': option 'base'"));
    let link = "[link.w]\nkind='fibre'\n[protocol.frame]\nbelow=['w']";
    assert!(build_err(link).contains("link 'w': unknown link kind 'fibre'"));
    let unused = "[link.w]\nkind='wire'\n[link.v]\nkind='wire'\n[protocol.frame]\nbelow=['w']";
    assert!(build_err(unused).contains("link 'v': no protocol sits on it"));
    let number = "[link.w]\nkind='wire'\n[protocol.frame]\nbelow=['w']\n[protocol.x]\nkind='frame'\nbelow=['frame']";
    assert!(build_err(number).contains("has no number for it"));
    assert!(build_err("[protocol]\nx=1").contains("must be a table"));
    assert_eq!(build_err(GRAPH), "built");
}

#[test]
fn a_protocol_with_nothing_below_is_refused() {
    let text = "[link.w]\nkind='wire'\n[protocol.frame]\nbelow=['w']\n[protocol.port]\nbelow=[]";
    assert_eq!(
        build_err(text),
        GraphError::NothingBelow("port".into()).to_string()
    );
}
