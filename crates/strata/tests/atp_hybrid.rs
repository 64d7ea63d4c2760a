//! Hybrid graphs (seed 004 Figure 4): protocols imported from BSD and
//! STREAMS mixed with Strata's native ones in one graph, interoperating on
//! the wire with the all-native graph, exactly-once under loss, duplication
//! and reordering.

mod appletalk_common;

use std::time::Duration;

use appletalk_common::{Requester, Responder, lossy, pair, transactions};
use strata::Arch;
use strata_compat::bsd_in_strata::atp::BsdAtp;
use strata_compat::bsd_in_strata::ddp::BsdDdp;
use strata_compat::streams_in_strata::atp::StreamsAtp;
use strata_compat::streams_in_strata::ddp::StreamsDdp;

/// What the imported code of `spec` on `e` carried, by its own counters:
/// (DDP datagrams in, out; ATP transactions completed, requests in).
fn carried(e: &strata::Engine, spec: &str) -> ((u64, u64), (u64, u64)) {
    let get = |c: Vec<(&'static str, u64)>, n: &str| {
        c.iter().find(|(k, _)| *k == n).map_or(0, |(_, v)| *v)
    };
    let ddp = if spec.contains("ddp@bsd") {
        let id = e.proto_id("ddp@bsd").unwrap();
        let s = e.protocol::<BsdDdp>(id).unwrap().stats();
        (s.delivered, s.opackets)
    } else if spec.contains("ddp@streams") {
        let id = e.proto_id("ddp@streams").unwrap();
        let c = e.protocol::<StreamsDdp>(id).unwrap().counters();
        (get(c.clone(), "delivered"), get(c, "opackets"))
    } else {
        (u64::MAX, u64::MAX)
    };
    let atp = if spec.starts_with("atp@bsd") {
        let id = e.proto_id("atp@bsd").unwrap();
        let s = e.protocol::<BsdAtp>(id).unwrap().stats();
        (s.completed, s.requests_in)
    } else if spec.starts_with("atp@streams") {
        let id = e.proto_id("atp@streams").unwrap();
        let c = e.protocol::<StreamsAtp>(id).unwrap().counters();
        (get(c.clone(), "completed"), get(c, "requests_in"))
    } else {
        (u64::MAX, u64::MAX)
    };
    (ddp, atp)
}

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
    let ((ins, outs), (completed, _)) = carried(net.engine(a), requester);
    assert!(
        ins >= 40 && outs >= 40,
        "{what}: {requester}'s DDP moved {ins} in, {outs} out"
    );
    assert!(
        completed >= 40,
        "{what}: {requester}'s ATP completed {completed}"
    );
    let ((ins, outs), (_, requests)) = carried(net.engine(b), responder);
    assert!(
        ins >= 40 && outs >= 40,
        "{what}: {responder}'s DDP moved {ins} in, {outs} out"
    );
    assert!(
        requests >= 40,
        "{what}: {responder}'s ATP took {requests} requests"
    );
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

#[test]
fn imported_atps_over_native_ddp_interoperate_with_native_atp() {
    for arch in Arch::ALL {
        for loss in [0.0, 0.05] {
            exactly_once("atp@bsd/ddp/eth", "atp/ddp/eth", loss, arch);
            exactly_once("atp/ddp/eth", "atp@streams/ddp/eth", loss, arch);
            exactly_once("atp@streams/ddp/eth", "atp@bsd/ddp/eth", loss, arch);
        }
    }
}

#[test]
fn imported_atps_over_imported_ddps_interoperate_with_the_all_native_graph() {
    for arch in Arch::ALL {
        for loss in [0.0, 0.05] {
            exactly_once("atp@bsd/ddp@streams/eth", "atp/ddp/eth", loss, arch);
            exactly_once("atp/ddp/eth", "atp@bsd/ddp@streams/eth", loss, arch);
            exactly_once("atp@streams/ddp@bsd/eth", "atp/ddp/eth", loss, arch);
            exactly_once("atp/ddp/eth", "atp@streams/ddp@bsd/eth", loss, arch);
            exactly_once(
                "atp@bsd/ddp@bsd/eth",
                "atp@streams/ddp@streams/eth",
                loss,
                arch,
            );
            exactly_once(
                "atp@streams/ddp@streams/eth",
                "atp@bsd/ddp@bsd/eth",
                loss,
                arch,
            );
        }
    }
}

/// The imported ATPs' pools are options (`mbufs` of `atp@bsd`, `dblks` of
/// `atp@streams`): with a pool of one buffer a request cannot be built and is
/// dropped as `no-room`; with the defaults the same transactions complete.
#[test]
fn the_imported_atps_pool_sizes_are_options() {
    use strata::{HostBuilder, HostParams};
    for (stack, pool) in [
        ("atp@bsd/ddp/eth", "mbufs"),
        ("atp@streams/ddp/eth", "dblks"),
    ] {
        for size in [Some(1), None] {
            let mut b =
                HostBuilder::spec(stack, HostParams::numbered(1), "net0", strata::link::SIM)
                    .arch(Arch::Llm);
            if let Some(n) = size {
                b = b.option(stack.split('/').next().unwrap(), pool, n);
            }
            let mut net = strata::link::SimNet::new(5);
            let a = net.add_host("a", b.build().unwrap());
            let b = net.add_host("b", appletalk_common::host(2, Arch::Llm, "atp/ddp/eth"));
            net.connect((a, "net0"), (b, "net0"), lossy(0.0), lossy(0.0))
                .unwrap();
            let (tx, _) = transactions(&mut net, a, b, 5, 100);
            let done = net.run_until_condition(
                |n| n.engine(a).app::<Requester>(tx).unwrap().finished(),
                Duration::from_secs(5),
            );
            let e = net.engine(a);
            let no_room = e
                .counters(e.proto_id(stack.split('/').next().unwrap()).unwrap())
                .drops()
                .get("no-room");
            match size {
                Some(_) => assert!(!done && no_room >= 1, "{stack} {pool}=1: {no_room}"),
                None => assert!(done && no_room == 0, "{stack} default {pool}: {no_room}"),
            }
        }
    }
}
