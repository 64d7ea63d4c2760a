//! The two-host setup the tests, the benchmark and the demo share: a host's
//! graph config with the paper's stack on Ethernet, the PA on or off.

use strata_core::{GraphConfig, GraphError, HwAddr};

/// The EtherType of PA and `hp-ident` frames: IEEE 802's first local
/// experimental one.
pub const ETHERTYPE: u16 = 0x88b5;

/// Host `n`'s hardware address.
pub fn mac(n: u8) -> HwAddr {
    HwAddr([0x02, 0x53, 0x54, 0, 0, n])
}

/// Host `n`'s graph on link `net0` of `link_kind`: Ethernet, then `pa` (PA
/// on) or the four `hp-*` layers (PA off). `extra` holds more options of
/// `pa`, or of `hp-window` when the PA is off.
pub fn host_config(
    n: u8,
    link_kind: &str,
    pa: bool,
    extra: &str,
) -> Result<GraphConfig, GraphError> {
    host_config_on(n, &format!("kind = \"{link_kind}\""), pa, extra)
}

/// As [`host_config`], with the body of the link's table given whole
/// (`kind = "udp"`, `local = …`, `peer = …`).
pub fn host_config_on(
    n: u8,
    link_table: &str,
    pa: bool,
    extra: &str,
) -> Result<GraphConfig, GraphError> {
    let m = mac(n);
    let stack = if pa {
        format!(
            "[protocol.pa]\nbelow = [\"eth\"]\nnumbers = {{ eth = {ETHERTYPE} }}\nmac = \"{m}\"\n{extra}\n"
        )
    } else {
        format!(
            "[protocol.hp-check]\nbelow = [\"eth\"]\nnumbers = {{ eth = {ETHERTYPE} }}\n\
             [protocol.hp-ident]\nbelow = [\"hp-check\"]\nmac = \"{m}\"\n\
             [protocol.hp-window]\nbelow = [\"hp-ident\"]\n{extra}\n\
             [protocol.hp-frag]\nbelow = [\"hp-window\"]\n"
        )
    };
    GraphConfig::from_toml(&format!(
        "[link.net0]\n{link_table}\n\n[protocol.eth]\nbelow = [\"net0\"]\nmac = \"{m}\"\n\n{stack}"
    ))
}

/// The protocol an application opens: `pa`, or the top layer `hp-frag`.
pub fn top(pa: bool) -> &'static str {
    if pa { "pa" } else { "hp-frag" }
}
