//! Strata's native DDP and ATP on the wire, cross-checked against tshark's
//! AppleTalk dissectors: ATP transactions between two `atp/ddp/eth` hosts,
//! some frames lost on the way so that requests are retried and answered
//! from the responder's transaction list, are written to a capture with
//! Strata's pcap writer. tshark must decode every frame as LLC/SNAP, DDP and
//! ATP with nothing malformed, and read the same header fields our wire
//! module wrote. (tshark does not verify DDP checksums; the checksum
//! algorithm is checked by `appletalk::wire::ddp`'s known-bytes test, and
//! here tshark's reading of the field must match the one that verifies.)

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Scratch, assert_capture_clean, tshark_count};
use strata::link::PcapWriter;
use strata::proto::eth::snap;
use strata::{
    Addr, App, AppCx, Arch, Engine, HostBuilder, HostParams, Instant, LinkId, Message, PacketMeta,
    Participants, Qos, SessionRef,
};
use strata_compat::appletalk::aarp::wire as aarp;
use strata_compat::appletalk::wire::{atp, ddp};

const NET0: LinkId = LinkId(0);

/// The ATP of `stack`, native or imported.
fn atp_kind(stack: &str) -> &str {
    stack.split('/').next().unwrap()
}

/// `stack`, or `stack` with AARP beside Ethernet below DDP when it ends in
/// `+aarp` (the TOML form's edge: `ddp` below `["eth", "aarp"]`).
fn host(n: u8, stack: &str) -> Engine {
    let (stack, with_aarp) = match stack.strip_suffix("+aarp") {
        Some(s) => (s, true),
        None => (stack, false),
    };
    let b = HostBuilder::spec(stack, HostParams::numbered(n), "net0", strata::link::SIM)
        .arch(Arch::Llm)
        .option(atp_kind(stack), "retry_interval", "1s");
    if !with_aarp {
        return b.build().unwrap();
    }
    let mut g = b.graph().unwrap();
    g.protocols
        .push(strata::core::graph::ProtocolConfig::new("aarp", &["eth"]));
    let ddp = g.protocols.iter_mut().find(|p| p.kind == "ddp").unwrap();
    ddp.below.push("aarp".into());
    HostBuilder::config(g, HostParams::numbered(n))
        .arch(Arch::Llm)
        .build()
        .unwrap()
}

/// Sends requests 0..total one after another; records the replies.
#[derive(Default)]
struct Client {
    session: Option<SessionRef>,
    sent: u32,
    total: u32,
    replies: u32,
}

impl Client {
    fn next(&mut self, cx: &mut AppCx) {
        if let Some(s) = self.session
            && self.sent < self.total
        {
            cx.send(s, Message::from(self.sent.to_be_bytes().to_vec()));
            self.sent += 1;
        }
    }
}

impl App for Client {
    fn receive(&mut self, _: Option<SessionRef>, _: Message, _: &PacketMeta, cx: &mut AppCx) {
        self.replies += 1;
        self.next(cx);
    }
    fn timer(&mut self, _: u64, cx: &mut AppCx) {
        self.next(cx);
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Answers every request with 1300 bytes: three response packets.
struct Server;

impl App for Server {
    fn receive(&mut self, s: Option<SessionRef>, _: Message, _: &PacketMeta, cx: &mut AppCx) {
        if let Some(s) = s {
            cx.send(s, Message::from(vec![0x5a; 1300]));
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Runs `total` transactions from host 1 (running `stack_a`) to host 2
/// (`stack_b`), losing every `nth` frame; returns every frame put on the
/// wire, in order, lost ones included.
fn transactions(total: u32, nth: usize, stack_a: &str, stack_b: &str) -> Vec<Vec<u8>> {
    let (mut a, mut b) = (host(1, stack_a), host(2, stack_b));
    let server = b.add_app(Box::new(Server));
    let atp_b = b.proto_id(atp_kind(stack_b)).unwrap();
    b.with_app(server, |_, cx| {
        cx.open_enable(atp_b, Participants::local([Addr::Port(10)]), Qos::default())
    })
    .unwrap()
    .unwrap();
    let client = a.add_app(Box::new(Client {
        total,
        ..Client::default()
    }));
    let atp_a = a.proto_id(atp_kind(stack_a)).unwrap();
    a.with_app(client, |app, cx| {
        let parts = Participants::remote([
            Addr::AppleTalk {
                net: 0xff00,
                node: 2,
            },
            Addr::Port(10),
        ]);
        let s = cx.open(atp_a, parts, Qos::default()).unwrap();
        let c = app.as_any_mut().downcast_mut::<Client>().unwrap();
        c.session = Some(s);
        c.next(cx);
    })
    .unwrap();
    let mut wire = Vec::new();
    let mut now = Instant::ZERO;
    for _ in 0..10_000 {
        a.run(now);
        b.run(now);
        let mut moved = false;
        for a_to_b in [true, false] {
            let (from, to) = if a_to_b {
                (&mut a, &mut b)
            } else {
                (&mut b, &mut a)
            };
            while let Some(f) = from.poll_transmit(NET0) {
                moved = true;
                wire.push(f.to_vec());
                if wire.len() % nth != 0 {
                    to.receive(NET0, f);
                }
            }
        }
        if a.app::<Client>(client).unwrap().replies == total {
            break;
        }
        if !moved {
            now += Duration::from_millis(250);
        }
    }
    assert_eq!(a.app::<Client>(client).unwrap().replies, total);
    wire
}

/// One line of `tshark -T fields` per frame, split at tabs.
fn fields(path: &str, names: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r", path, "-T", "fields", "-E", "separator=/t"]);
    for n in names {
        cmd.args(["-e", n]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn tshark_decodes_every_strata_ddp_and_atp_frame_as_we_wrote_it() {
    check(&transactions(12, 9, "atp/ddp/eth", "atp/ddp/eth"), "native");
}

#[test]
fn tshark_decodes_the_frames_of_bsd_and_streams_ddp_imported_into_strata() {
    check(
        &transactions(8, 7, "atp/ddp@bsd/eth", "atp/ddp@streams/eth"),
        "imported",
    );
}

#[test]
fn tshark_decodes_the_frames_of_bsd_and_streams_atp_imported_into_strata() {
    check(
        &transactions(8, 7, "atp@bsd/ddp@streams/eth", "atp@streams/ddp@bsd/eth"),
        "imported-atp",
    );
}

#[test]
fn tshark_decodes_every_aarp_probe_request_and_response_as_we_wrote_it() {
    let frames = transactions(6, usize::MAX, "atp/ddp/eth+aarp", "atp/ddp/eth+aarp");
    let (aarp, ddp): (Vec<_>, Vec<_>) = frames
        .iter()
        .partition(|f| f[20..22] == snap::AARP_TYPE.to_be_bytes());
    let dir = Scratch::new("appletalk_tshark_aarp");
    let path = dir.file("aarp.pcap");
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_slice(Duration::from_millis(i as u64), f).unwrap();
    }
    w.flush().unwrap();
    assert_eq!(assert_capture_clean(&path, frames.len()), frames.len());
    assert_eq!(tshark_count(&path, "aarp"), aarp.len());
    assert_eq!(tshark_count(&path, "ddp"), ddp.len());
    assert_eq!(tshark_count(&path, "aarp.length.invalid"), 0);
    for (op, what) in [(1, "request"), (2, "response"), (3, "probe")] {
        assert!(
            tshark_count(&path, &format!("aarp.opcode == {op}")) > 0,
            "some {what}"
        );
    }
    let names = [
        "aarp.hard.type",
        "aarp.proto.type",
        "aarp.hard.size",
        "aarp.proto.size",
        "aarp.opcode",
        "aarp.src.hw_mac",
        "aarp.src.proto_id",
        "aarp.dst.hw_mac",
        "aarp.dst.proto_id",
    ];
    let rows: Vec<_> = fields(&path, &names)
        .into_iter()
        .filter(|r| r.first().is_some_and(|c| !c.is_empty()))
        .collect();
    assert_eq!(rows.len(), aarp.len());
    let at = |a: aarp::NodeAddr| format!("00{:04x}{:02x}", a.net, a.node);
    for (f, row) in aarp.iter().zip(&rows) {
        let r = aarp::Repr::parse(&f[22..]).unwrap();
        let ours = [
            "0x0001".to_string(),
            "0x809b".to_string(),
            "6".to_string(),
            "4".to_string(),
            (r.function as u16).to_string(),
            r.src_hw.to_string(),
            at(r.src),
            r.dst_hw.to_string(),
            at(r.dst),
        ];
        assert_eq!(row, &ours, "tshark's reading of {:02x?}", &f[22..]);
    }
}

fn check(frames: &[Vec<u8>], name: &str) {
    let dir = Scratch::new(&format!("appletalk_tshark_{name}"));
    let path = dir.file("atp.pcap");
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_slice(Duration::from_millis(i as u64), f).unwrap();
    }
    w.flush().unwrap();

    let n = assert_capture_clean(&path, frames.len());
    assert_eq!(n, frames.len());
    assert_eq!(
        tshark_count(
            &path,
            "llc.oui == 0x080007 && llc.apple_atalk_pid == 0x809b"
        ),
        n
    );
    assert_eq!(tshark_count(&path, "ddp"), n, "every frame is DDP");
    assert_eq!(tshark_count(&path, "atp"), n, "every frame is ATP");
    assert_eq!(tshark_count(&path, "ddp.len_invalid"), 0);
    for (function, what) in [(1, "TReq"), (2, "TResp"), (3, "TRel")] {
        assert!(
            tshark_count(&path, &format!("atp.function == {function}")) > 0,
            "some {what}"
        );
    }

    let names = [
        "ddp.len",
        "ddp.checksum",
        "ddp.src.net",
        "ddp.src.node",
        "ddp.src_socket",
        "ddp.dst.net",
        "ddp.dst.node",
        "ddp.dst_socket",
        "ddp.type",
        "atp.function",
        "atp.xo",
        "atp.eom",
        "atp.bitmap",
        "atp.tid",
    ];
    let rows = fields(&path, &names);
    assert_eq!(rows.len(), n);
    for (i, (f, row)) in frames.iter().zip(&rows).enumerate() {
        // 14 bytes of 802.3 header, 8 of LLC/SNAP, then the datagram.
        let d = &f[22..];
        let h = ddp::Header::new_checked(d).unwrap();
        let r = ddp::Repr::parse(&h).unwrap();
        assert!(
            ddp::verify(&h, [&d[ddp::HEADER_LEN..r.length]]),
            "frame {i}"
        );
        assert_ne!(r.checksum, 0, "frame {i}: checksummed");
        let a =
            atp::Repr::parse(&atp::Header::new_checked(&d[ddp::HEADER_LEN..]).unwrap()).unwrap();
        let ours = [
            r.length.to_string(),
            r.checksum.to_string(),
            r.src.net.to_string(),
            r.src.node.to_string(),
            r.src.socket.to_string(),
            r.dst.net.to_string(),
            r.dst.node.to_string(),
            r.dst.socket.to_string(),
            r.ddp_type.to_string(),
            a.function.code().to_string(),
            u8::from(a.xo).to_string(),
            u8::from(a.eom).to_string(),
            format!("0x{:02x}", a.bitmap_seq),
            a.tid.to_string(),
        ];
        for ((name, theirs), ours) in names.iter().zip(row).zip(&ours) {
            let theirs = if theirs == "True" {
                "1"
            } else if theirs == "False" {
                "0"
            } else {
                theirs
            };
            assert_eq!(theirs, ours, "frame {i}: {name}");
        }
    }
}
