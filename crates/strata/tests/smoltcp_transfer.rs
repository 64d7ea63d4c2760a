//! smoltcp's TCP imported into Strata (`smoltcp-tcp`, seed 004): the
//! transfers of `tcp_transfer.rs` that make sense for it, through the same
//! source and sink, SHA-256 checked at both ends.

mod tcp_common;

use std::time::Duration;

use strata::link::LinkParams;
use tcp_common::{Transfer, transfer};

const MB: u64 = 1 << 20;
const SPEC: &str = "smoltcp-tcp/ip/eth";

fn smoltcp(bytes: u64, link: LinkParams) -> Transfer {
    let mut t = Transfer::new(bytes, link);
    t.spec = SPEC;
    t
}

/// `rtt_ms` round trip, `loss` in each direction.
fn link(rtt_ms: u64, loss: f64) -> LinkParams {
    LinkParams {
        loss,
        ..LinkParams::delay(Duration::from_micros(rtt_ms * 500))
    }
}

#[test]
fn sixteen_megabytes_arrive_intact_on_a_clean_link_with_no_delay() {
    let d = transfer(&smoltcp(16 * MB, LinkParams::default()));
    assert_eq!(
        d.sender.stats.retransmits, 0,
        "nothing lost, nothing resent"
    );
    assert_eq!(d.sender.congestion, "cubic", "the default");
}

#[test]
fn sixteen_megabytes_arrive_intact_through_one_percent_loss_at_10_ms() {
    let d = transfer(&smoltcp(16 * MB, link(10, 0.01)));
    assert!(d.sender.stats.retransmits > 0, "{:?}", d.sender);
}
