//! Instructions beside time: the benchmarks read the processor's counter
//! around each batch where the machine has one (`strata_link::perf`), and
//! say so where it has not, pointing at `scripts/instructions`, which counts
//! the same workloads under callgrind.

use std::fmt;

use strata_link::perf::Instructions;

/// Instructions counted for one system over its batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Tally {
    /// Instructions retired in user space.
    pub instructions: u64,
    /// Units of work they did (round trips, segments).
    pub units: u64,
}

impl Tally {
    /// Instructions per unit.
    pub fn per_unit(&self) -> f64 {
        self.instructions as f64 / self.units.max(1) as f64
    }
}

/// The thread's instruction counter, or why there is none.
pub enum Counter {
    /// Counting.
    On(Instructions),
    /// No counter on this machine; the kernel's reason.
    Off(String),
}

impl Counter {
    /// Opens the counter for the calling thread.
    pub fn open() -> Counter {
        match Instructions::new() {
            Ok(c) => Counter::On(c),
            Err(e) => Counter::Off(e.to_string()),
        }
    }

    fn now(&self) -> Option<u64> {
        match self {
            Counter::On(c) => c.read().ok(),
            Counter::Off(_) => None,
        }
    }

    /// Runs `f`, adding what it retired and `units` to `tally`.
    pub fn count<R>(&self, tally: &mut Tally, units: u64, f: impl FnOnce() -> R) -> R {
        let before = self.now();
        let r = f();
        if let (Some(a), Some(b)) = (before, self.now()) {
            tally.instructions += b.saturating_sub(a);
            tally.units += units;
        }
        r
    }

    /// Whether the counter counts.
    pub fn is_on(&self) -> bool {
        matches!(self, Counter::On(_))
    }
}

/// The line a benchmark prints about instructions: per unit for both
/// systems and their ratio, or why they were not counted.
pub struct Line<'a> {
    /// The counter used.
    pub counter: &'a Counter,
    /// Strata's tally.
    pub strata: Tally,
    /// The peer's.
    pub peer: Tally,
    /// What a unit is ("round trip", "segment").
    pub unit: &'a str,
    /// The `scripts/instructions` argument that counts the same workload.
    pub script: &'a str,
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.counter {
            Counter::On(_) => write!(
                f,
                "instructions per {}: strata {:.0}, peer {:.0}, ratio {:.3} (perf_event_open, user space)",
                self.unit,
                self.strata.per_unit(),
                self.peer.per_unit(),
                self.strata.per_unit() / self.peer.per_unit().max(1.0)
            ),
            Counter::Off(why) => write!(
                f,
                "instructions per {}: no hardware counter here (perf_event_open: {why}); count them with `scripts/instructions {}` (callgrind)",
                self.unit, self.script
            ),
        }
    }
}
