//! EtherTalk framing (AppleTalk Phase 2 on Ethernet): an application bound to
//! DDP's SNAP type sends IEEE 802.3 length frames with 802.2 LLC and SNAP
//! headers, and a receiver demuxes them by SNAP type under every architecture;
//! Ethernet II numbers are framed as before.

mod common;

use common::{Host, host_with, settle};
use strata_core::{Addr, AppId, Arch, Message, Participants, Qos, SessionRef};
use strata_proto::RAW_ETHERTYPE;
use strata_proto::eth::snap::{AARP_TYPE, DDP_TYPE};

/// A recorder on `h`'s eth bound to `number`, with a session to `peer`.
fn bound(h: &mut Host, number: u16, peer: &Host) -> (AppId, SessionRef) {
    let app = h.recorder();
    let eth = h.proto("eth");
    let remote = Participants::remote([Addr::Hw(peer.mac)]);
    let s = h
        .engine
        .with_app(app, |_, cx| {
            cx.bind(eth, u32::from(number))?;
            cx.open(eth, remote, Qos::default())
        })
        .unwrap()
        .unwrap();
    (app, s)
}

fn send(h: &mut Host, app: AppId, s: SessionRef, data: &[u8]) -> Vec<Vec<u8>> {
    let m = Message::from_slice(data);
    h.engine.with_app(app, |_, cx| cx.send(s, m)).unwrap();
    h.run();
    h.sent()
}

#[test]
fn ddp_goes_out_in_an_llc_snap_frame_under_apples_oui() {
    let mut a = host_with(1, Arch::Llm, "eth", false, &[]);
    let b = host_with(2, Arch::Llm, "eth", false, &[]);
    let (app, s) = bound(&mut a, DDP_TYPE, &b);
    let out = send(&mut a, app, s, b"a ddp datagram");
    let f = &out[0];
    assert_eq!(&f[..6], &b.mac.0, "to the peer");
    assert_eq!(
        &f[12..14],
        &22u16.to_be_bytes(),
        "802.3 length: LLC+SNAP+data"
    );
    assert_eq!(
        &f[14..22],
        &[0xaa, 0xaa, 0x03, 0x08, 0x00, 0x07, 0x80, 0x9b]
    );
    assert_eq!(&f[22..], b"a ddp datagram");
}

#[test]
fn aarp_goes_out_under_the_zero_oui() {
    let mut a = host_with(1, Arch::Llm, "eth", false, &[]);
    let b = host_with(2, Arch::Llm, "eth", false, &[]);
    let (app, s) = bound(&mut a, AARP_TYPE, &b);
    let out = send(&mut a, app, s, b"aarp");
    assert_eq!(&out[0][14..22], &[0xaa, 0xaa, 0x03, 0, 0, 0, 0x80, 0xf3]);
}

#[test]
fn an_llc_snap_frame_reaches_the_app_bound_to_its_snap_type_under_every_arch() {
    for arch in Arch::ALL {
        let mut a = host_with(1, arch, "eth", false, &[]);
        let mut b = host_with(2, arch, "eth", false, &[]);
        let (app_a, s) = bound(&mut a, DDP_TYPE, &b);
        let (app_b, _) = bound(&mut b, DDP_TYPE, &a);
        let (raw_b, _) = bound(&mut b, RAW_ETHERTYPE as u16, &a);
        for f in send(&mut a, app_a, s, b"over ethertalk") {
            b.receive(&f);
        }
        settle(&mut a, &mut b);
        assert_eq!(
            b.app(app_b).data(),
            vec![b"over ethertalk".to_vec()],
            "{arch}"
        );
        assert!(
            b.app(raw_b).data().is_empty(),
            "{arch}: not the raw ethertype"
        );
    }
}

#[test]
fn a_padded_short_frame_is_delivered_with_its_padding_for_ddp_to_trim() {
    let mut a = host_with(1, Arch::Llm, "eth", false, &[]);
    let mut b = host_with(2, Arch::Llm, "eth", false, &[]);
    let (app_a, s) = bound(&mut a, DDP_TYPE, &b);
    let (app_b, _) = bound(&mut b, DDP_TYPE, &a);
    let mut f = send(&mut a, app_a, s, b"tiny").remove(0);
    f.resize(60, 0);
    b.receive(&f);
    let got = b.app(app_b).data().remove(0);
    assert_eq!(&got[..4], b"tiny");
    assert_eq!(got.len(), 60 - 22);
}

#[test]
fn strange_llc_and_short_length_frames_are_dropped_and_counted() {
    let mut b = host_with(2, Arch::Llm, "eth", false, &[]);
    let a = host_with(1, Arch::Llm, "eth", false, &[]);
    let (app_b, _) = bound(&mut b, DDP_TYPE, &a);
    let mut head = Vec::new();
    head.extend_from_slice(&b.mac.0);
    head.extend_from_slice(&a.mac.0);
    // NetBIOS over LLC (SAP F0): not SNAP.
    let mut netbios = head.clone();
    netbios.extend_from_slice(&[0, 8, 0xf0, 0xf0, 0x03, 0, 0, 0, 0, 0]);
    b.receive(&netbios);
    // A SNAP frame of DDP's type under the wrong OUI.
    let mut wrong_oui = head.clone();
    wrong_oui.extend_from_slice(&[0, 8, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x80, 0x9b]);
    b.receive(&wrong_oui);
    // A length frame cut inside its SNAP header.
    let mut cut = head.clone();
    cut.extend_from_slice(&[0, 8, 0xaa, 0xaa, 0x03]);
    b.receive(&cut);
    // A length field too short for LLC and SNAP.
    let mut tiny = head;
    tiny.extend_from_slice(&[0, 3, 0xaa, 0xaa, 0x03, 0x08, 0x00, 0x07, 0x80, 0x9b]);
    b.receive(&tiny);
    assert!(b.app(app_b).data().is_empty());
    assert_eq!(b.drops("eth", "unsupported"), 2);
    assert_eq!(b.drops("eth", "truncated"), 1);
    assert_eq!(b.drops("eth", "malformed"), 1);
}
