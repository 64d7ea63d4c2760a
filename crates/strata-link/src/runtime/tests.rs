//! The runtime on a real link: two engines joined by a UDP link on loopback,
//! each running a one-protocol graph that answers "?" frames with "!".

use std::any::Any;
use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use strata_core::graph::{self, BuildInfo, GraphConfig, ProtocolConfig, ProtocolSpec};
use strata_core::{
    Control, Cx, Demux, Engine, GraphError, Instant, LinkId, Message, Next, PacketMeta, Priority,
    Protocol, Registry, Reply, SessionId, Target, Up, UpiError,
};

use super::*;

/// Answers frames whose first payload byte is `?` with the same frame marked
/// `!`; sends a frame given as a private control; arms a timer that sends one.
struct Answer {
    link: LinkId,
    answered: u64,
    heard: u64,
    fired_at: Option<Instant>,
}

fn frame(mark: u8) -> Message {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14] = mark;
    Message::from(f)
}

impl Protocol for Answer {
    fn demux(&self, _hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        Demux::To {
            target: Target::Protocol,
            hdr_len: 0,
            next: Next::Here,
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, _m: &mut PacketMeta, cx: &mut Cx) -> Up {
        match msg.peek(15).map(|h| h[14]) {
            Some(b'?') => {
                self.answered += 1;
                cx.transmit(self.link, frame(b'!'), Priority::BEST_EFFORT);
            }
            _ => self.heard += 1,
        }
        Up::Consumed
    }

    fn push(&mut self, _sess: SessionId, msg: Message, cx: &mut Cx) {
        cx.transmit(self.link, msg, Priority::BEST_EFFORT);
    }

    fn open(&mut self, _req: strata_core::Open, _cx: &mut Cx) -> Result<SessionId, UpiError> {
        Err(UpiError::Unsupported("open"))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn control(
        &mut self,
        _sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match op {
            Control::Private(what) => match what.downcast::<Duration>() {
                Ok(after) => {
                    cx.set_timer(cx.now() + *after, 1);
                    Ok(Reply::Done)
                }
                Err(_) => {
                    cx.transmit(self.link, frame(b'?'), Priority::BEST_EFFORT);
                    Ok(Reply::Done)
                }
            },
            _ => Err(UpiError::Unsupported("control")),
        }
    }

    fn on_timer(&mut self, _token: u64, cx: &mut Cx) {
        self.fired_at = Some(cx.now());
        cx.transmit(self.link, frame(b'?'), Priority::BEST_EFFORT);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn make(_c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    Ok(Box::new(Answer {
        link: b.link().ok_or_else(|| b.needs_below("a link"))?,
        answered: 0,
        heard: 0,
        fired_at: None,
    }))
}

fn engine(local: &str, peer: &str) -> Engine {
    let mut reg = Registry::new();
    reg.register_protocol(ProtocolSpec {
        kind: "answer",
        doc: "test",
        options: &[],
        demux_by_number: false,
        implies_above: &[],
        implies_beside: &[],
        factory: make,
    });
    crate::register_links(&mut reg);
    let text = format!(
        "[link.net0]\nkind = \"udp\"\nlocal = \"{local}\"\npeer = \"{peer}\"\n\
         [protocol.answer]\nbelow = [\"net0\"]\n"
    );
    let cfg = GraphConfig::from_toml(&text).unwrap();
    Engine::new(graph::build(&cfg, &reg).unwrap(), Default::default()).unwrap()
}

fn free_port() -> String {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

fn counts(h: &EngineHandle) -> (u64, u64, Option<Instant>) {
    h.call(|e| {
        let p: &Answer = e.protocol(strata_core::ProtoId(0)).unwrap();
        (p.answered, p.heard, p.fired_at)
    })
    .unwrap()
}

fn poke(h: &EngineHandle, what: Box<dyn Any + Send>) {
    h.call(move |e| {
        e.control(strata_core::ProtoId(0), None, Control::Private(what))
            .map(drop)
    })
    .unwrap()
    .unwrap();
}

fn wait_for(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(4));
    }
    panic!("timed out");
}

#[test]
fn two_runtimes_on_a_udp_link_answer_each_other_and_capture_both_ways() {
    let (pa, pb) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!("strata-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("a.pcap");
    let mut a = Runtime::new(engine(&pa, &pb), RuntimeConfig::default()).unwrap();
    a.capture("net0", &pcap).unwrap();
    assert!(matches!(
        a.capture("nope", &pcap),
        Err(RuntimeError::NoSuchLink { .. })
    ));
    let b = Runtime::new(engine(&pb, &pa), RuntimeConfig::busy_poll()).unwrap();
    let (a, b) = (a.spawn("a").unwrap(), b.spawn("b").unwrap());
    for _ in 0..10 {
        poke(a.handle(), Box::new("send"));
    }
    wait_for(|| counts(a.handle()).1 == 10);
    assert_eq!(counts(b.handle()).0, 10, "b answered every question");
    let links = a.monitor().snapshot();
    assert_eq!(
        (links[0].counts.tx_frames, links[0].counts.rx_frames),
        (10, 10)
    );
    assert!(b.is_running());
    let a = a.stop().unwrap();
    drop(b);
    let status = a.captures();
    assert_eq!(status[0].frames, 20, "ten out, ten back");
    let bytes = std::fs::read(&pcap).unwrap();
    let mut reader = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
    let mut marks = Vec::new();
    while let Some(p) = reader.next_packet() {
        marks.push(p.unwrap().data[14]);
    }
    assert_eq!(marks.iter().filter(|&&m| m == b'?').count(), 10);
    assert_eq!(marks.iter().filter(|&&m| m == b'!').count(), 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_timer_fires_on_time_while_the_blocking_loop_sleeps() {
    let (pa, pb) = (free_port(), free_port());
    let a = Runtime::new(engine(&pa, &pb), RuntimeConfig::default()).unwrap();
    let b = Runtime::new(engine(&pb, &pa), RuntimeConfig::default()).unwrap();
    let (a, b) = (a.spawn("a").unwrap(), b.spawn("b").unwrap());
    let armed = a.handle().call(|e| e.now()).unwrap();
    poke(a.handle(), Box::new(Duration::from_millis(30)));
    wait_for(|| counts(a.handle()).1 == 1);
    let fired = counts(a.handle()).2.unwrap();
    let late = fired - armed;
    assert!(
        late >= Duration::from_millis(30) && late < Duration::from_millis(200),
        "{late:?}"
    );
    assert_eq!(counts(b.handle()).0, 1);
    drop((a, b));
}

#[test]
fn a_handle_to_a_stopped_runtime_says_so_and_run_for_returns_on_time() {
    let (pa, pb) = (free_port(), free_port());
    let mut rt = Runtime::new(engine(&pa, &pb), RuntimeConfig::default()).unwrap();
    let start = std::time::Instant::now();
    rt.run_for(Duration::from_millis(30)).unwrap();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(30) && took < Duration::from_secs(1),
        "{took:?}"
    );
    let stop = AtomicBool::new(true);
    rt.run_until(&stop).unwrap();
    let handle = rt.handle();
    drop(rt);
    assert_eq!(handle.call(|_| ()), Err(Stopped));
}
