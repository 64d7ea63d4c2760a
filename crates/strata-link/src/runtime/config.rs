//! How a runtime runs.

use crate::drivers::DEFAULT_BATCH;

/// How the runtime waits for work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PollMode {
    /// Sleep in epoll until a link has frames, a job arrives or the engine's
    /// next timer is due: no CPU while idle, a wake-up's latency per frame.
    #[default]
    Blocking,
    /// Never sleep: spin on non-blocking reads of every link, the job queue
    /// and the clock. One core stays busy; the latency of a wake-up is gone.
    BusyPoll,
}

/// A runtime's settings.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// How to wait.
    pub mode: PollMode,
    /// Frames per receive or send system call, at most.
    pub batch: usize,
    /// Jobs run per turn of the loop before packets get their turn again.
    pub jobs_per_turn: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            mode: PollMode::Blocking,
            batch: DEFAULT_BATCH,
            jobs_per_turn: 64,
        }
    }
}

impl RuntimeConfig {
    /// The default settings in busy-poll mode.
    pub fn busy_poll() -> Self {
        RuntimeConfig {
            mode: PollMode::BusyPoll,
            ..Self::default()
        }
    }
}
