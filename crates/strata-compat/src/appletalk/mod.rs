//! AppleTalk (Inside AppleTalk, 2nd ed., 1990): the protocols of seed 004's
//! experiments. The paper imports DDP and ATP between the BSD and STREAMS
//! subsystems; every version of them — native Strata, native BSD, native
//! STREAMS — reads and writes its headers through [`wire`], so the bits on the
//! wire are the same whichever subsystem produced them (§3: an encapsulation
//! module "does not produce or consume headers").

pub mod wire;
