//! CPU time as Linux accounts it, for the cost-per-byte figures of the
//! throughput benchmarks.
//!
//! The in-memory benchmarks run on one thread, whose scheduler run time
//! (`/proc/thread-self/schedstat`, nanoseconds) is exact. The real-link ones
//! run threads that come and go, so they read the whole process's user and
//! system time (`/proc/self/stat`, which keeps what exited threads used), in
//! clock ticks of 10 ms: batches of seconds keep that well under a percent.
//! On this kernel (no IRQ time accounting) the softirq work a thread's
//! system calls trigger — the receiving side of a veth — is charged to that
//! thread, so both figures include the kernel's share of the work.

use std::time::Duration;

/// `/proc`'s clock tick (USER_HZ), fixed at 100 by Linux's ABI on every
/// architecture Strata runs on.
const TICKS_PER_SECOND: u64 = 100;

/// CPU time the calling thread has used, or zero where `/proc` cannot say.
pub fn thread_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// User and system time of the whole process, every thread it has had
/// included, or zero where `/proc` cannot say.
pub fn process_cpu() -> Duration {
    // utime and stime are fields 14 and 15 of proc(5), 12 and 13 after ')'
    // (cutime and cstime follow).
    stat_ticks(11..13)
}

/// User and system time of this process's children that ended and were
/// waited for (peer programs such as UDT's harness), or zero where `/proc`
/// cannot say.
pub fn children_cpu() -> Duration {
    stat_ticks(13..15)
}

/// The sum of `/proc/self/stat`'s fields `range`, counted after the
/// command name, as a duration.
fn stat_ticks(range: std::ops::Range<usize>) -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // The command name (field 2) may hold spaces; fields count from after it.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields
        .get(range)
        .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_shows_in_both_clocks() {
        // Spin until this thread has run 200 ms, however busy the machine is
        // (the wall-clock bound only stops a broken clock from hanging us).
        let (t0, p0) = (thread_cpu(), process_cpu());
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while thread_cpu() - t0 < Duration::from_millis(200) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "thread clock stuck"
            );
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        // The process clock counts in 10 ms ticks, sampled: allow two.
        let p = process_cpu() - p0;
        assert!(p >= Duration::from_millis(180), "process {p:?}");
    }
}
