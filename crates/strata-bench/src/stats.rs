//! Latency samples and their summary: mean, median and 99th percentile, as
//! EXPERIMENTS.md asks for every latency figure.

use std::fmt;
use std::time::Duration;

/// A summary of round-trip samples.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    /// How many samples.
    pub count: usize,
    /// Mean, in microseconds.
    pub mean_us: f64,
    /// Median, in microseconds.
    pub p50_us: f64,
    /// 99th percentile, in microseconds.
    pub p99_us: f64,
}

impl Summary {
    /// Summarises samples (nanoseconds). Empty input gives zeros.
    pub fn of(samples: &mut [u64]) -> Summary {
        if samples.is_empty() {
            return Summary {
                count: 0,
                mean_us: 0.0,
                p50_us: 0.0,
                p99_us: 0.0,
            };
        }
        samples.sort_unstable();
        let n = samples.len();
        let mean = samples.iter().map(|&s| s as f64).sum::<f64>() / n as f64;
        let pick = |q: f64| samples[((n as f64 * q).ceil() as usize).clamp(1, n) - 1] as f64;
        Summary {
            count: n,
            mean_us: mean / 1e3,
            p50_us: pick(0.50) / 1e3,
            p99_us: pick(0.99) / 1e3,
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mean {:8.3} µs  p50 {:8.3} µs  p99 {:8.3} µs  (n={})",
            self.mean_us, self.p50_us, self.p99_us, self.count
        )
    }
}

/// Nanoseconds in a duration, saturating.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_right_samples() {
        let mut s: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let sum = Summary::of(&mut s);
        assert_eq!(sum.count, 100);
        assert_eq!(sum.p50_us, 50.0);
        assert_eq!(sum.p99_us, 99.0);
        assert_eq!(sum.mean_us, 50.5);
    }
}
