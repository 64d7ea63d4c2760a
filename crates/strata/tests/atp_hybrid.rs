//! Hybrid graphs (seed 004 Figure 4): protocols imported from BSD and
//! STREAMS mixed with Strata's native ones in one graph, interoperating on
//! the wire with the all-native graph, exactly-once under loss, duplication
//! and reordering.

mod appletalk_common;

use std::time::Duration;

use appletalk_common::{Requester, Responder, lossy, pair, transactions};
use strata::Arch;
use strata_compat::bsd_in_strata::ddp::BsdDdp;
use strata_compat::streams_in_strata::ddp::StreamsDdp;

/// Runs 40 transactions (two response packets each) from a host running
/// `requester` to one running `responder` at `loss`, and checks each
/// request reached the responder once and each reply came back intact.
fn exactly_once(requester: &str, responder: &str, loss: f64, arch: Arch) {
    let (mut net, a, b, _) = pair(arch, 7, requester, responder, lossy(loss));
    let (tx, rx) = transactions(&mut net, a, b, 40, 900);
    let done = net.run_until_condition(
        |n| n.engine(a).app::<Requester>(tx).unwrap().finished(),
        Duration::from_secs(600),
    );
    let r = net.engine(a).app::<Requester>(tx).unwrap();
    let (finished, wrong) = (r.done.len(), r.wrong);
    let what = format!("{requester} → {responder}, {arch}, loss {loss}");
    assert!(done, "{what}: {finished}/40 transactions finished");
    assert_eq!(wrong, 0, "{what}: a reply wrong or twice");
    let resp = net.engine(b).app::<Responder>(rx).unwrap();
    assert!(
        resp.deliveries.iter().all(|d| *d == 1),
        "{what}: each request reached the responder once: {:?}",
        resp.deliveries
    );
    // The imported code carried the traffic: its own counters say so.
    for (h, spec) in [(a, requester), (b, responder)] {
        let e = net.engine(h);
        let (ins, outs) = if spec.contains("ddp@bsd") {
            let id = e.proto_id("ddp@bsd").unwrap();
            let s = e.protocol::<BsdDdp>(id).unwrap().stats();
            (s.delivered, s.opackets)
        } else if spec.contains("ddp@streams") {
            let id = e.proto_id("ddp@streams").unwrap();
            let c = e.protocol::<StreamsDdp>(id).unwrap().counters();
            let get = |n: &str| c.iter().find(|(k, _)| *k == n).map_or(0, |(_, v)| *v);
            (get("delivered"), get("opackets"))
        } else {
            continue;
        };
        assert!(
            ins >= 40 && outs >= 40,
            "{what}: {spec} moved {ins} in, {outs} out"
        );
    }
}

#[test]
fn bsd_ddp_in_strata_interoperates_with_native_ddp_both_ways() {
    for arch in Arch::ALL {
        for loss in [0.0, 0.05] {
            exactly_once("atp/ddp@bsd/eth", "atp/ddp/eth", loss, arch);
            exactly_once("atp/ddp/eth", "atp/ddp@bsd/eth", loss, arch);
        }
    }
}

#[test]
fn streams_ddp_in_strata_interoperates_with_native_and_bsd_ddp() {
    for arch in Arch::ALL {
        for loss in [0.0, 0.05] {
            exactly_once("atp/ddp@streams/eth", "atp/ddp/eth", loss, arch);
            exactly_once("atp/ddp/eth", "atp/ddp@streams/eth", loss, arch);
            exactly_once("atp/ddp@bsd/eth", "atp/ddp@streams/eth", loss, arch);
        }
    }
}
