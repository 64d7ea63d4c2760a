//! Running a runtime on a thread of its own, and stopping it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use mio::Waker;

use super::error::RuntimeError;
use super::event_loop::Runtime;
use super::handle::EngineHandle;
use super::monitor::LinkMonitor;

/// A runtime running on its own thread. Dropping it stops the thread.
pub struct RuntimeThread {
    handle: EngineHandle,
    monitor: LinkMonitor,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<Result<Runtime, RuntimeError>>>,
}

impl Runtime {
    /// Moves the runtime to a new thread called `name` and runs it there until
    /// [`RuntimeThread::stop`].
    pub fn spawn(self, name: &str) -> Result<RuntimeThread, RuntimeError> {
        let handle = self.handle();
        let monitor = self.monitor();
        let waker = self.waker();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut runtime = self;
                runtime.run_until(&flag)?;
                Ok(runtime)
            })
            .map_err(|e| RuntimeError::io("spawning the runtime thread", e))?;
        Ok(RuntimeThread {
            handle,
            monitor,
            stop,
            waker,
            thread: Some(thread),
        })
    }
}

impl RuntimeThread {
    /// A handle for running jobs on the engine.
    pub fn handle(&self) -> &EngineHandle {
        &self.handle
    }

    /// The link counters.
    pub fn monitor(&self) -> &LinkMonitor {
        &self.monitor
    }

    /// True while the thread runs (it ends early only on an error).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the loop, waits for the thread, and gives the runtime back (its
    /// captures flushed), or the error that ended it.
    pub fn stop(mut self) -> Result<Runtime, RuntimeError> {
        self.halt()
    }

    fn halt(&mut self) -> Result<Runtime, RuntimeError> {
        self.stop.store(true, Ordering::Release);
        // A failed wake-up only delays the stop until the loop's longest wait.
        let _ = self.waker.wake();
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| RuntimeError::Panicked)?,
            None => Err(RuntimeError::Panicked),
        }
    }
}

impl Drop for RuntimeThread {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.halt();
        }
    }
}
