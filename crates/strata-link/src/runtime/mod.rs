//! Running engines in real time on real links.
//!
//! A [`Runtime`] owns one engine and a [driver](crate::drivers) per link, and
//! runs them on the monotonic clock (engine time is nanoseconds since the
//! runtime started): it reads frames in batches, runs the engine and its
//! timers, and writes what the engine sends. It waits in epoll when idle
//! ([`PollMode::Blocking`]) or spins ([`PollMode::BusyPoll`]) for the lowest
//! latency. Other threads reach the engine only through an [`EngineHandle`],
//! whose jobs the loop runs between packets; [`Runtime::spawn`] runs it on a
//! thread of its own and [`RuntimeThread::stop`] gives it back. Any link can
//! be captured to a pcap file.

mod capture;
mod clock;
mod config;
mod error;
mod event_loop;
mod handle;
mod monitor;
mod rx_pool;
mod thread;

#[cfg(test)]
mod tests;

pub(crate) use capture::Capture;
pub use capture::FLUSH_EVERY;
pub use clock::Clock;
pub use config::{PollMode, RuntimeConfig};
pub use error::RuntimeError;
pub use event_loop::{CaptureStatus, Runtime};
pub use handle::{EngineHandle, Job, JobQueue, Stopped, Wake};
pub use monitor::{LinkMonitor, LinkReport};
pub use thread::RuntimeThread;
