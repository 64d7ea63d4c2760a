//! Seed 000's experiments (`strata bench paper000`): Tables 1–3, Figure 4, and
//! the ILP measurement the paper left as future work.

pub mod figure4;
pub mod ilp;
pub mod tables;
