//! Native Strata ATP over DDP over EtherTalk (`atp/ddp/eth`) across the
//! deterministic simulator: exactly-once transactions under 0, 1, 5 and 10%
//! loss with as much duplication and reordering, under every architecture.

mod appletalk_common;

use std::time::Duration;

use appletalk_common::{Requester, Responder, lossy, pair, transactions};
use strata::Arch;

const STACK: &str = "atp/ddp/eth";

#[test]
fn atp_transactions_are_exactly_once_under_loss_duplication_and_reordering() {
    for arch in Arch::ALL {
        for (i, loss) in [0.0, 0.01, 0.05, 0.10].into_iter().enumerate() {
            let (mut net, a, b, _) = pair(arch, 40 + i as u64, STACK, STACK, lossy(loss));
            // 1200-byte replies: three response packets per transaction.
            let (tx, rx) = transactions(&mut net, a, b, 60, 1200);
            let done = net.run_until_condition(
                |n| n.engine(a).app::<Requester>(tx).unwrap().finished(),
                Duration::from_secs(600),
            );
            let r = net.engine(a).app::<Requester>(tx).unwrap();
            let (finished, wrong) = (r.done.len(), r.wrong);
            assert!(done, "{arch} {loss}: {finished}/60 transactions finished");
            assert_eq!(wrong, 0, "{arch} {loss}: no reply wrong or twice");
            let resp = net.engine(b).app::<Responder>(rx).unwrap();
            assert!(
                resp.deliveries.iter().all(|d| *d == 1),
                "{arch} {loss}: each request reached the responder once: {:?}",
                resp.deliveries
            );
            assert_eq!(resp.sessions, 1, "{arch} {loss}: one responder session");
            let atp = net.engine(a).proto_id("atp").unwrap();
            let retried = net.engine(a).counters(atp).events().get("request-retried");
            if loss == 0.0 {
                assert_eq!(retried, 0, "{arch}: a clean link needs no retry");
            } else if loss >= 0.05 {
                assert!(retried > 0, "{arch} {loss}: loss forced retries");
            }
        }
    }
}
