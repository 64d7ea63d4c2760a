//! The embedded in-memory network, running in real time on its own thread, so
//! ordinary blocking Rust code (a [`UdpSocket`](crate::UdpSocket)) can use its
//! hosts.
//!
//! A [`SimNet`] runs in virtual time; here its virtual clock is paced to the wall
//! clock: the thread runs the net up to "now", then sleeps until the next frame
//! or timer is due or a socket hands it work through an [`EngineHandle`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as Wall};

use strata_link::{EngineHandle, HostId, JobQueue, SimNet};

/// The longest the pacing thread sleeps, so a stop request is seen promptly.
const MAX_SLEEP: Duration = Duration::from_millis(20);

/// A simulated network running in real time on a thread.
pub struct Network {
    handles: Vec<EngineHandle>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<SimNet>>,
}

impl Network {
    /// Starts running `net` in real time.
    pub fn start(mut net: SimNet) -> Network {
        let queue = JobQueue::new();
        let hosts: Vec<HostId> = net.hosts().collect();
        let handles = hosts
            .iter()
            .map(|h| queue.handle(h.index(), Arc::new(|| {})))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("strata-net".into())
            .spawn(move || {
                let epoch = (Wall::now(), net.now());
                let now = || epoch.1 + epoch.0.elapsed();
                while !stopping.load(Ordering::Relaxed) {
                    net.run_until(now());
                    let due = net.next_event().map_or(MAX_SLEEP, |t| {
                        Duration::from_nanos(t.as_nanos().saturating_sub(now().as_nanos()))
                    });
                    if let Some((host, job)) = queue.next_timeout(due.min(MAX_SLEEP)) {
                        run_job(&mut net, &hosts, host, job);
                        while let Some((host, job)) = queue.try_next() {
                            run_job(&mut net, &hosts, host, job);
                        }
                    }
                }
                net
            })
            .expect("spawning a thread");
        Network {
            handles,
            stop,
            thread: Some(thread),
        }
    }

    /// A handle to host `h`'s engine.
    pub fn host(&self, h: HostId) -> EngineHandle {
        self.handles[h.index()].clone()
    }

    /// Stops the thread and gives the net back (its counters and captures).
    pub fn stop(mut self) -> SimNet {
        self.halt().expect("the network thread was running")
    }

    fn halt(&mut self) -> Option<SimNet> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take()?.join().ok()
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run_job(net: &mut SimNet, hosts: &[HostId], host: usize, job: strata_link::Job) {
    if let Some(&h) = hosts.get(host) {
        job(net.engine(h));
    }
}
