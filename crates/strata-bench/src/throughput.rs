//! Throughput batches and their summary: the rate of each batch, their mean
//! and spread, and CPU time per byte — what the bulk-transfer benchmarks
//! report beside each other.

use std::fmt;
use std::time::Duration;

/// One measured batch of a bulk transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Batch {
    /// Bytes the receiver got.
    pub bytes: u64,
    /// Wall-clock time.
    pub wall: Duration,
    /// CPU time spent meanwhile (what is counted is the benchmark's to say).
    pub cpu: Duration,
}

impl Batch {
    /// Megabytes (10⁶ bytes) per second.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64().max(1e-9) / 1e6
    }
}

/// Batches of one system, summarised.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Rate {
    /// How many batches.
    pub batches: usize,
    /// Bytes in all.
    pub bytes: u64,
    /// Mean of the batches' rates, MB/s.
    pub mean_mb_s: f64,
    /// Sample standard deviation of the batches' rates, MB/s.
    pub stdev_mb_s: f64,
    /// Slowest batch, MB/s.
    pub min_mb_s: f64,
    /// Fastest batch, MB/s.
    pub max_mb_s: f64,
    /// CPU nanoseconds per byte over all batches.
    pub cpu_ns_per_byte: f64,
}

impl Rate {
    /// Summarises `batches`; empty input gives zeros.
    pub fn of(batches: &[Batch]) -> Rate {
        if batches.is_empty() {
            return Rate::default();
        }
        let rates: Vec<f64> = batches.iter().map(Batch::mb_per_s).collect();
        let n = rates.len() as f64;
        let mean = rates.iter().sum::<f64>() / n;
        let var = if rates.len() > 1 {
            rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let bytes: u64 = batches.iter().map(|b| b.bytes).sum();
        let cpu: Duration = batches.iter().map(|b| b.cpu).sum();
        Rate {
            batches: batches.len(),
            bytes,
            mean_mb_s: mean,
            stdev_mb_s: var.sqrt(),
            min_mb_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
            max_mb_s: rates.iter().copied().fold(0.0, f64::max),
            cpu_ns_per_byte: cpu.as_nanos() as f64 / bytes.max(1) as f64,
        }
    }

    /// Gigabits per second at the mean rate.
    pub fn gbit_s(&self) -> f64 {
        self.mean_mb_s * 8.0 / 1e3
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Slow paths (a lossy WAN) move a fraction of a megabyte a second.
        let p = if self.mean_mb_s < 10.0 { 3 } else { 1 };
        write!(
            f,
            "{:9.p$} MB/s ({:6.3} Gbit/s) ± {:.p$}  [{:.p$} … {:.p$}]  {:.3} ns CPU/B  (n={})",
            self.mean_mb_s,
            self.gbit_s(),
            self.stdev_mb_s,
            self.min_mb_s,
            self.max_mb_s,
            self.cpu_ns_per_byte,
            self.batches
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_average_per_batch_and_cpu_per_byte_over_all() {
        let b = |mb: u64, ms: u64, cpu_ms: u64| Batch {
            bytes: mb * 1_000_000,
            wall: Duration::from_millis(ms),
            cpu: Duration::from_millis(cpu_ms),
        };
        let r = Rate::of(&[b(10, 1000, 500), b(30, 1000, 1500)]);
        assert_eq!(r.mean_mb_s, 20.0);
        assert_eq!((r.min_mb_s, r.max_mb_s), (10.0, 30.0));
        assert!((r.stdev_mb_s - 200f64.sqrt()).abs() < 1e-9);
        assert_eq!(r.cpu_ns_per_byte, 50.0);
        assert_eq!(Rate::of(&[]), Rate::default());
    }
}
