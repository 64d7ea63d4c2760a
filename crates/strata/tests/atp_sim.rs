//! ATP over DDP over EtherTalk across the deterministic simulator:
//! exactly-once transactions under 0, 1, 5 and 10% loss with as much
//! duplication and reordering, under every architecture — Strata's native
//! `atp/ddp/eth`, and BSD's and STREAMS' ATP imported into Strata
//! (`atp@bsd`, `atp@streams`) against it, both ways.

mod appletalk_common;

use std::time::Duration;

use appletalk_common::{Requester, Responder, atp_of, lossy, pair, transactions};
use strata::Arch;
use strata_compat::bsd_in_strata::atp::BsdAtp;
use strata_compat::streams_in_strata::atp::StreamsAtp;

const NATIVE: &str = "atp/ddp/eth";
const LOSSES: [f64; 4] = [0.0, 0.01, 0.05, 0.10];

/// The imported ATP's own counter `name` on host `e` (`None`: native).
fn imported(e: &strata::Engine, name: &str) -> Option<u64> {
    let id = atp_of(e);
    let c = match (e.protocol::<BsdAtp>(id), e.protocol::<StreamsAtp>(id)) {
        (Some(a), _) => a.stats().named(),
        (_, Some(a)) => a.counters(),
        _ => return None,
    };
    c.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

/// Requests the ATP of host `e` sent again, whichever ATP it is.
fn retries(e: &strata::Engine) -> u64 {
    imported(e, "retries").unwrap_or_else(|| e.counters(atp_of(e)).events().get("request-retried"))
}

/// 60 transactions of three response packets from `requester` to
/// `responder` at `loss`: all finish, no reply wrong or twice, each request
/// delivered once, retries only under loss.
fn exactly_once(requester: &str, responder: &str, arch: Arch, loss: f64, seed: u64) {
    let what = format!("{requester} → {responder}, {arch}, loss {loss}");
    let (mut net, a, b, _) = pair(arch, seed, requester, responder, lossy(loss));
    // 1200-byte replies: three response packets per transaction.
    let (tx, rx) = transactions(&mut net, a, b, 60, 1200);
    let done = net.run_until_condition(
        |n| n.engine(a).app::<Requester>(tx).unwrap().finished(),
        Duration::from_secs(900),
    );
    let r = net.engine(a).app::<Requester>(tx).unwrap();
    let (finished, wrong) = (r.done.len(), r.wrong);
    assert!(done, "{what}: {finished}/60 transactions finished");
    assert_eq!(wrong, 0, "{what}: no reply wrong or twice");
    let resp = net.engine(b).app::<Responder>(rx).unwrap();
    assert!(
        resp.deliveries.iter().all(|d| *d == 1),
        "{what}: each request reached the responder once: {:?}",
        resp.deliveries
    );
    assert_eq!(resp.sessions, 1, "{what}: one responder session");
    // The imported code ran the transactions: its own counters say so.
    for (h, name) in [(a, "completed"), (b, "requests_in")] {
        if let Some(n) = imported(net.engine(h), name) {
            assert_eq!(n, 60, "{what}: the imported ATP's {name}");
        }
    }
    let retried = retries(net.engine(a));
    if loss == 0.0 {
        assert_eq!(retried, 0, "{what}: a clean link needs no retry");
    } else if loss >= 0.05 {
        assert!(retried > 0, "{what}: loss forced retries");
    }
}

#[test]
fn atp_transactions_are_exactly_once_under_loss_duplication_and_reordering() {
    for arch in Arch::ALL {
        for (i, loss) in LOSSES.into_iter().enumerate() {
            exactly_once(NATIVE, NATIVE, arch, loss, 40 + i as u64);
        }
    }
}

#[test]
fn bsd_atp_in_strata_is_exactly_once_with_native_atp_both_ways() {
    for arch in Arch::ALL {
        for (i, loss) in LOSSES.into_iter().enumerate() {
            exactly_once("atp@bsd/ddp/eth", NATIVE, arch, loss, 50 + i as u64);
            exactly_once(NATIVE, "atp@bsd/ddp/eth", arch, loss, 60 + i as u64);
        }
    }
}

#[test]
fn streams_atp_in_strata_is_exactly_once_with_native_atp_both_ways() {
    for arch in Arch::ALL {
        for (i, loss) in LOSSES.into_iter().enumerate() {
            exactly_once("atp@streams/ddp/eth", NATIVE, arch, loss, 70 + i as u64);
            exactly_once(NATIVE, "atp@streams/ddp/eth", arch, loss, 80 + i as u64);
        }
    }
}
