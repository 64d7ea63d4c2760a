//! `strata demo`'s seed 001 section: a file through the transport over
//! simulated links, in virtual time — the demo's own lossy link, and a long
//! fat pipe.

use std::time::Duration;

use strata::link::LinkParams;
use strata::xport_sim::{self, SimTransfer};

/// Both paths run at 100 Mbit/s.
const RATE: u64 = 100_000_000;
const FILE: usize = 16 << 20;

fn hex(h: &[u8]) -> String {
    h.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Moves a 16 MB file over the demo's link (`one_way`, `loss`) and over a
/// 50 ms long fat pipe with 0.01% loss; a line of figures for each.
pub fn transfer(seed: u64, one_way: Duration, loss: f64) {
    println!(
        "  a {} MB file, 4 application buffers of 1 MB handed over at once, 100 Mbit/s links:",
        FILE >> 20
    );
    for (one_way, loss) in [(one_way, loss), (Duration::from_millis(25), 0.0001)] {
        let link = LinkParams {
            delay: one_way,
            loss,
            rate: RATE,
            ..LinkParams::default()
        };
        let o = xport_sim::run(&SimTransfer {
            seed,
            bytes: FILE,
            link,
            ..SimTransfer::default()
        });
        let (c, s) = (&o.client, &o.server);
        println!(
            "\n  RTT {} ms, loss {}% each way: {:.2} s (virtual), goodput {:.1} Mbit/s ({:.0}% of the link)",
            2 * one_way.as_millis(),
            loss * 100.0,
            o.elapsed.as_secs_f64(),
            o.goodput() * 8.0 / 1e6,
            o.goodput() * 8.0 / RATE as f64 * 100.0
        );
        println!(
            "    {} data packets, {} retransmitted ({} go-back-N, {} selective requests, {} time-outs); the link lost {}, its queue dropped {}",
            c.data_sent,
            c.retransmitted,
            s.go_back_n_sent,
            s.selective_sent,
            c.timeouts,
            o.links[0].lost() + o.links[1].lost(),
            o.links[0].dropped() + o.links[1].dropped(),
        );
        let got = o.received_hash.map_or("none".to_string(), |h| hex(&h));
        let verdict = if o.intact() {
            "intact, both ends closed".to_string()
        } else {
            format!("NOT INTACT ({:?})", o.client_lost)
        };
        println!(
            "    SHA-256 sent {}…, received {}…: {verdict}",
            hex(&o.sent_hash),
            got
        );
    }
}
