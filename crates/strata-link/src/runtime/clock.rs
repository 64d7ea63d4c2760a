//! The runtime's clock: engine time is the monotonic clock since the runtime
//! started, so it never jumps when the wall clock is set; captures are stamped
//! with wall time, so tshark shows real dates.

use std::time::{Duration, SystemTime};

use strata_core::Instant;

/// Monotonic engine time with a wall-clock anchor.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
    wall_origin: Duration,
}

impl Clock {
    /// A clock whose engine time starts now.
    pub fn start() -> Clock {
        Clock {
            origin: std::time::Instant::now(),
            wall_origin: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default(),
        }
    }

    /// Engine time now: nanoseconds since the clock started.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// The wall-clock time (since the Unix epoch) of engine time `at`.
    pub fn wall(&self, at: Instant) -> Duration {
        self.wall_origin + Duration::from_nanos(at.as_nanos())
    }

    /// How long from `now` until `deadline` (zero when it has passed).
    pub fn until(now: Instant, deadline: Instant) -> Duration {
        deadline.saturating_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_time_starts_near_zero_and_moves_forward_with_wall_time_anchored() {
        let c = Clock::start();
        let a = c.now();
        std::thread::sleep(Duration::from_millis(2));
        let b = c.now();
        assert!(a < Instant::from_nanos(1_000_000_000));
        assert!(b - a >= Duration::from_millis(2));
        let wall = c.wall(b);
        let real = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        assert!(real.abs_diff(wall) < Duration::from_secs(1));
    }
}
