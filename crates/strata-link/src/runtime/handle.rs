//! Handles to an engine running on its own thread.
//!
//! Whatever owns an engine in real time — the runtime on real links, or an
//! in-memory network paced to the wall clock — serves [`Job`]s: closures run on the
//! engine's thread between its packets. Socket-like handles in the `strata` crate
//! are built on [`EngineHandle::call`]; nothing else crosses threads, so the data
//! path has no locks.

use std::sync::Arc;
use std::sync::mpsc;

use strata_core::Engine;

/// Work for an engine, run on its thread.
pub type Job = Box<dyn FnOnce(&mut Engine) + Send>;

/// The engine's thread has stopped; nothing more can be done through the handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the engine has stopped")]
pub struct Stopped;

/// Wakes the engine's thread when a job is queued (a mio waker, or nothing for
/// loops that wait on the job channel itself).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// A cheap, cloneable way to run work on one engine from any thread.
#[derive(Clone)]
pub struct EngineHandle {
    jobs: mpsc::Sender<(usize, Job)>,
    host: usize,
    wake: Wake,
}

impl EngineHandle {
    /// A handle that sends jobs for engine `host` down `jobs` and calls `wake`.
    pub fn new(jobs: mpsc::Sender<(usize, Job)>, host: usize, wake: Wake) -> Self {
        EngineHandle { jobs, host, wake }
    }

    /// Which engine of its owner this handle reaches.
    pub fn host(&self) -> usize {
        self.host
    }

    /// Queues `job` without waiting for it.
    pub fn submit(&self, job: Job) -> Result<(), Stopped> {
        self.jobs.send((self.host, job)).map_err(|_| Stopped)?;
        (self.wake)();
        Ok(())
    }

    /// Runs `f` on the engine's thread and waits for its result.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(Box::new(move |engine| {
            // The caller may have given up waiting; the result is then dropped.
            let _ = tx.send(f(engine));
        }))?;
        rx.recv().map_err(|_| Stopped)
    }
}

/// The receiving end of the jobs for one or more engines.
pub struct JobQueue {
    rx: mpsc::Receiver<(usize, Job)>,
    tx: mpsc::Sender<(usize, Job)>,
}

impl JobQueue {
    /// An empty queue.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel();
        JobQueue { rx, tx }
    }

    /// A handle that reaches engine `host` through this queue.
    pub fn handle(&self, host: usize, wake: Wake) -> EngineHandle {
        EngineHandle::new(self.tx.clone(), host, wake)
    }

    /// The next queued job, without waiting.
    pub fn try_next(&self) -> Option<(usize, Job)> {
        self.rx.try_recv().ok()
    }

    /// The next job, waiting at most `timeout`.
    pub fn next_timeout(&self, timeout: std::time::Duration) -> Option<(usize, Job)> {
        self.rx.recv_timeout(timeout).ok()
    }
}

impl Default for JobQueue {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_call_runs_on_the_serving_thread_and_returns_its_result() {
        let queue = JobQueue::new();
        let handle = queue.handle(3, Arc::new(|| {}));
        let caller = std::thread::spawn(move || handle.call(|_engine| 42));
        let (host, job) = queue
            .next_timeout(Duration::from_secs(5))
            .expect("the call queues a job");
        assert_eq!(host, 3);
        // The job needs an engine; build the smallest one there is.
        let mut engine = tiny_engine();
        job(&mut engine);
        assert_eq!(caller.join().unwrap(), Ok(42));
    }

    #[test]
    fn a_handle_to_a_stopped_engine_says_so() {
        let queue = JobQueue::new();
        let handle = queue.handle(0, Arc::new(|| {}));
        drop(queue);
        assert_eq!(handle.call(|_| ()), Err(Stopped));
    }

    fn tiny_engine() -> Engine {
        use strata_core::graph::{self, GraphConfig, Registry};
        let empty = GraphConfig::default();
        Engine::new(
            graph::build(&empty, &Registry::new()).unwrap(),
            Default::default(),
        )
        .unwrap()
    }
}
