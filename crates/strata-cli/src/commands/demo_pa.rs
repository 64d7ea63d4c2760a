//! `strata demo`'s seed 003 section: the Protocol Accelerator's 4-layer
//! stack, a round trip with the PA off and on, and the header bytes of each.

use anyhow::Result;
use strata_bench::paper003::{self, Duo};

/// Round trips of 8 bytes over the stack, PA off then on; a line each.
pub fn round_trips(count: usize) -> Result<()> {
    println!(
        "  frag / window of 16 / check / ident, two hosts on an in-memory link, {count} round trips of 8 B:"
    );
    for pa in [false, true] {
        let mut d = Duo::new(pa)?;
        let (rtt, header) = paper003::quick(&mut d, count);
        let how = if pa {
            "PA on  (predicted headers, filters, post-processing while idle)"
        } else {
            "PA off (four Strata protocols, every message through each)"
        };
        println!("    {how}: round trip {rtt:.2} µs (median), {header} header bytes per message");
        if pa {
            println!(
                "      fast paths: {} of {} sends, {} of {} deliveries",
                d.event(0, "fast-send") + d.event(1, "fast-send"),
                2 * count,
                d.event(0, "fast-deliver") + d.event(1, "fast-deliver"),
                2 * count,
            );
        }
    }
    println!("  (strata bench paper003 runs Table 4, Figures 4 and 5 beside the paper's figures)");
    Ok(())
}
