//! Reading a running runtime's link counters from another thread.

use std::fmt;
use std::sync::Arc;

use crate::drivers::{DriverCounts, DriverStats};

/// One link's driver counters at a moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkReport {
    /// The link's name in the graph.
    pub name: String,
    /// What its driver is attached to ("packet veth0").
    pub device: String,
    /// The driver's counters.
    pub counts: DriverCounts,
}

impl fmt::Display for LinkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link {} ({}): {}", self.name, self.device, self.counts)
    }
}

/// A cloneable view of a runtime's driver counters, valid while and after it
/// runs.
#[derive(Clone, Debug, Default)]
pub struct LinkMonitor {
    links: Vec<(String, String, Arc<DriverStats>)>,
}

impl LinkMonitor {
    pub(crate) fn add(&mut self, name: String, device: String, stats: Arc<DriverStats>) {
        self.links.push((name, device, stats));
    }

    /// Every link's counters now.
    pub fn snapshot(&self) -> Vec<LinkReport> {
        self.links
            .iter()
            .map(|(name, device, stats)| LinkReport {
                name: name.clone(),
                device: device.clone(),
                counts: stats.snapshot(),
            })
            .collect()
    }
}
