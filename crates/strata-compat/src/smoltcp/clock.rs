//! Time for smoltcp, from the engine: smoltcp takes `now` as an argument of
//! every call, as Strata's protocols do, so the engine's clock (virtual in the
//! simulator) is translated and passed in. One thing reads a clock of its own:
//! the generator of the timestamp option (RFC 7323), a plain `fn() -> u32`
//! with no argument and no context. The module gives it the engine's time
//! through a per-thread cell set before each call into smoltcp — the way a
//! BSD protocol reads the kernel's global `time` (seed 004 §4.2: a service of
//! the target subsystem the host must provide).

use std::cell::Cell;

use smoltcp::time::Instant as SmolInstant;
use strata_core::Instant;

thread_local! {
    /// The engine's time in milliseconds, for [`tsval`].
    static NOW_MS: Cell<u32> = const { Cell::new(0) };
}

/// The engine's `now` as smoltcp's, and the timestamp clock set to it: call
/// before handing control to smoltcp.
pub(super) fn enter(now: Instant) -> SmolInstant {
    NOW_MS.set((now.as_nanos() / 1_000_000) as u32);
    SmolInstant::from_micros(i64::try_from(now.as_nanos() / 1_000).unwrap_or(i64::MAX))
}

/// smoltcp's deadline as engine time (a deadline in the past is "now").
pub(super) fn from_smol(at: SmolInstant) -> Instant {
    Instant::from_nanos(u64::try_from(at.total_micros()).unwrap_or(0) * 1_000)
}

/// smoltcp's timestamp generator: milliseconds of engine time (RFC 7323 §5.4
/// asks for a clock between 1 ms and 1 s per tick).
pub(super) fn tsval() -> u32 {
    NOW_MS.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_time_round_trips_through_smoltcp_to_the_microsecond() {
        let now = Instant::from_nanos(12_345_678_901);
        let smol = enter(now);
        assert_eq!(smol.total_micros(), 12_345_678);
        assert_eq!(from_smol(smol), Instant::from_nanos(12_345_678_000));
        assert_eq!(tsval(), 12_345, "the timestamp clock follows the engine");
        assert_eq!(from_smol(SmolInstant::from_millis(0)), Instant::ZERO);
    }
}
