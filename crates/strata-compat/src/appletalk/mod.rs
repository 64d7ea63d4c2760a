//! AppleTalk (Inside AppleTalk, 2nd ed., 1990): the protocols of seed 004's
//! experiments. The paper imports DDP and ATP between the BSD and STREAMS
//! subsystems; every version of them — native Strata, native BSD, native
//! STREAMS — reads and writes its headers through [`wire`], so the bits on the
//! wire are the same whichever subsystem produced them (§3: an encapsulation
//! module "does not produce or consume headers").
//!
//! The native Strata versions are [`ddp`] and [`atp`], ordinary Strata
//! protocols (`strata graph --stack atp/ddp/eth`); [`register`] adds them and
//! their protocol numbers ([`NUMBERS`]) to a registry.

pub mod aarp;
pub mod atp;
pub mod ddp;
pub mod endpoints;
pub mod info;
pub mod wire;

use strata_core::Registry;

pub use info::DdpInfo;

/// AppleTalk's protocol numbers, as TOML: DDP's SNAP type on Ethernet, the
/// DDP types of the protocols above DDP.
pub const NUMBERS: &str = include_str!("numbers.toml");

/// Registers `ddp`, `aarp` and `atp`, the imported `ddp@bsd`, `ddp@streams`,
/// `atp@bsd` and `atp@streams`, and
/// merges [`NUMBERS`] into the number table.
pub fn register(reg: &mut Registry) {
    reg.register_protocol(ddp::SPEC);
    reg.register_protocol(aarp::SPEC);
    reg.register_protocol(atp::SPEC);
    reg.register_protocol(crate::bsd_in_strata::DDP_SPEC);
    reg.register_protocol(crate::streams_in_strata::DDP_SPEC);
    reg.register_protocol(crate::bsd_in_strata::ATP_SPEC);
    reg.register_protocol(crate::streams_in_strata::ATP_SPEC);
    reg.numbers_mut()
        .load_toml(NUMBERS)
        .expect("the embedded AppleTalk numbers.toml parses (checked by a unit test)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_number_table_names_ddp_on_ethernet_and_atp_on_ddp() {
        let mut reg = Registry::new();
        register(&mut reg);
        assert_eq!(reg.numbers().get("eth", "ddp"), Some(0x809b));
        assert_eq!(reg.numbers().get("eth", "aarp"), Some(0x80f3));
        assert_eq!(reg.numbers().get("ddp", "atp"), Some(3));
        assert_eq!(reg.numbers().get("eth", "ddp@bsd"), Some(0x809b));
        assert_eq!(reg.numbers().get("ddp@streams", "atp"), Some(3));
    }
}
