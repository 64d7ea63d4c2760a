//! The real-time event loop: one engine, its links and its timers, on the
//! monotonic clock.
//!
//! Each turn of the loop does, in order: read a batch from every link that
//! may have frames and hand them to the engine; run queued jobs (work other
//! threads sent through an [`EngineHandle`]); run the engine at the current
//! time, which fires due timers and processes everything queued; send what the
//! engine queued for each link, a batch per system call. Then it waits:
//! in [`PollMode::Blocking`] in epoll (through mio, edge-triggered) until a
//! link is readable or writable again, a job wakes it or the engine's next
//! timer is due; in [`PollMode::BusyPoll`] not at all.
//!
//! Receiving a batch, then running, then sending, bounds the engine's receive
//! queue by the batch and lets one system call carry the replies to a whole
//! batch of requests.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use strata_core::{Engine, Instant, LinkId, Message};

use super::capture::Capture;
use super::clock::Clock;
use super::config::{PollMode, RuntimeConfig};
use super::error::RuntimeError;
use super::handle::{EngineHandle, JobQueue};
use super::monitor::LinkMonitor;
use super::rx_pool::RxPool;
use crate::drivers::{self, Driver, Rx};
use crate::offload::Coalescer;

/// The waker's token; links use their index.
const WAKER: Token = Token(usize::MAX);

/// The longest a blocking wait lasts, so a stop flag set without a wake-up is
/// still seen.
const MAX_WAIT: Duration = Duration::from_millis(100);

/// One link as the loop drives it.
struct LinkIo {
    id: LinkId,
    name: String,
    driver: Box<dyn Driver>,
    /// Frames taken from the engine that the kernel has not taken yet (at most
    /// a batch; the rest wait in the engine's bounded queue).
    pending: VecDeque<Message>,
    /// The kernel may have frames for us (edge-triggered: until a read comes
    /// back short).
    readable: bool,
    /// The kernel may take frames (until a send would block).
    writable: bool,
    capture: Option<Capture>,
    /// Receive offload: runs of a batch's TCP segments merged per
    /// connection before the engine sees them.
    coalescer: Coalescer,
    /// Where received frames' bytes live (no allocation per frame).
    rx_pool: RxPool,
}

/// What became of a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureStatus {
    /// The link.
    pub link: String,
    /// The file.
    pub path: std::path::PathBuf,
    /// Frames recorded.
    pub frames: u64,
    /// The first write error, when there was one.
    pub error: Option<String>,
}

/// One engine running on real links in real time.
pub struct Runtime {
    engine: Engine,
    links: Vec<LinkIo>,
    poll: Poll,
    events: Events,
    waker: Arc<Waker>,
    jobs: JobQueue,
    handle: EngineHandle,
    monitor: LinkMonitor,
    clock: Clock,
    config: RuntimeConfig,
    /// Jobs were left in the queue at the end of the last turn.
    jobs_left: bool,
    /// When captures were last flushed and kernel counters read.
    last_housekeeping: Instant,
}

impl Runtime {
    /// A runtime for `engine` with a driver opened for each of its links, as its
    /// graph config describes them.
    pub fn new(engine: Engine, config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        let drivers = engine
            .links()
            .iter()
            .map(|node| drivers::open(node, config.batch))
            .collect::<Result<Vec<_>, _>>()?;
        Self::with_drivers(engine, drivers, config)
    }

    /// A runtime for `engine` with the given drivers, one per link in the
    /// engine's link order.
    pub fn with_drivers(
        mut engine: Engine,
        drivers: Vec<Box<dyn Driver>>,
        config: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        let names: Vec<String> = engine.links().iter().map(|l| l.name.clone()).collect();
        if drivers.len() != names.len() {
            return Err(RuntimeError::io(
                "runtime",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} drivers for {} links", drivers.len(), names.len()),
                ),
            ));
        }
        let poll = Poll::new().map_err(|e| RuntimeError::io("epoll", e))?;
        let waker =
            Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| RuntimeError::io("waker", e))?);
        let mut monitor = LinkMonitor::default();
        let mut links = Vec::with_capacity(drivers.len());
        for (i, (driver, name)) in drivers.into_iter().zip(names).enumerate() {
            poll.registry()
                .register(
                    &mut SourceFd(&driver.fd()),
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| RuntimeError::io(format!("registering link '{name}'"), e))?;
            monitor.add(name.clone(), driver.describe(), driver.stats());
            engine.set_link_segmentation(LinkId(i as u16), driver.segmentation());
            links.push(LinkIo {
                id: LinkId(i as u16),
                name,
                driver,
                pending: VecDeque::with_capacity(config.batch),
                readable: true,
                writable: true,
                capture: None,
                coalescer: Coalescer::new(),
                rx_pool: RxPool::default(),
            });
        }
        let jobs = JobQueue::new();
        let wake_with = Arc::clone(&waker);
        let handle = jobs.handle(
            0,
            Arc::new(move || {
                // A failed wake-up leaves the job for the next turn, which
                // MAX_WAIT bounds.
                let _ = wake_with.wake();
            }),
        );
        Ok(Runtime {
            engine,
            links,
            poll,
            events: Events::with_capacity(64),
            waker,
            jobs,
            handle,
            monitor,
            clock: Clock::start(),
            config,
            jobs_left: false,
            last_housekeeping: Instant::ZERO,
        })
    }

    /// Captures every frame of link `link`, both ways, to a pcap file at `path`.
    pub fn capture(&mut self, link: &str, path: &Path) -> Result<(), RuntimeError> {
        let known = self
            .links
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let l = self
            .links
            .iter_mut()
            .find(|l| l.name == link)
            .ok_or_else(|| RuntimeError::NoSuchLink {
                link: link.into(),
                known,
            })?;
        let capture = Capture::create(path).map_err(|source| RuntimeError::Capture {
            link: link.into(),
            source,
        })?;
        l.capture = Some(capture);
        Ok(())
    }

    /// What the captures recorded.
    pub fn captures(&self) -> Vec<CaptureStatus> {
        self.links
            .iter()
            .filter_map(|l| {
                l.capture.as_ref().map(|c| CaptureStatus {
                    link: l.name.clone(),
                    path: c.path().to_path_buf(),
                    frames: c.frames(),
                    error: c.error().map(str::to_string),
                })
            })
            .collect()
    }

    /// A handle through which other threads run jobs on this engine.
    pub fn handle(&self) -> EngineHandle {
        self.handle.clone()
    }

    /// The link counters, readable from any thread.
    pub fn monitor(&self) -> LinkMonitor {
        self.monitor.clone()
    }

    /// Wakes the loop from any thread (what the handle does after queueing).
    pub fn waker(&self) -> Arc<Waker> {
        Arc::clone(&self.waker)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, for changing it between runs.
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Engine time now.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Takes the engine back.
    pub fn into_engine(self) -> Engine {
        self.engine
    }

    /// Runs until `stop` is set (checked every turn; a blocking wait lasts at
    /// most 100 ms, or is cut short by the waker). Captures are flushed before
    /// returning.
    pub fn run_until(&mut self, stop: &AtomicBool) -> Result<(), RuntimeError> {
        let result = self.run_while(|| !stop.load(Ordering::Acquire));
        self.housekeeping(true);
        result
    }

    /// Runs for `duration` of engine time.
    pub fn run_for(&mut self, duration: Duration) -> Result<(), RuntimeError> {
        let end = self.clock.now() + duration;
        let clock = self.clock;
        let result = self.run_while(|| clock.now() < end);
        self.housekeeping(true);
        result
    }

    fn run_while(&mut self, mut go_on: impl FnMut() -> bool) -> Result<(), RuntimeError> {
        let busy = self.config.mode == PollMode::BusyPoll;
        while go_on() {
            let now = self.clock.now();
            let progressed = self.turn(now, busy)?;
            if busy {
                if !progressed {
                    self.housekeeping(false);
                }
            } else {
                self.wait(progressed)?;
            }
        }
        Ok(())
    }

    /// One turn: receive, jobs, engine, send. True when anything happened.
    fn turn(&mut self, now: Instant, busy: bool) -> Result<bool, RuntimeError> {
        let received = self.receive(now, busy)?;
        let jobs = self.serve_jobs();
        let due = self.engine.next_deadline().is_some_and(|d| d <= now);
        if received || jobs || due {
            self.engine.run(now);
        }
        let sent = self.transmit(busy)?;
        Ok(received || jobs || due || sent)
    }

    fn receive(&mut self, now: Instant, busy: bool) -> Result<bool, RuntimeError> {
        let Runtime {
            engine,
            links,
            clock,
            ..
        } = self;
        let mut any = false;
        for link in links.iter_mut() {
            if !(busy || link.readable) {
                continue;
            }
            let LinkIo {
                id,
                name,
                driver,
                capture,
                readable,
                coalescer,
                rx_pool,
                ..
            } = link;
            let mut up = |frame| engine.receive(*id, frame);
            let n = driver
                .recv(&mut |frame, arrival| {
                    let mut m = match frame {
                        Rx::Lent(bytes) => rx_pool.frame(bytes),
                        Rx::Owned(bytes) => Message::from_bytes(bytes),
                    };
                    // A super-frame the kernel handed over whole: the mark
                    // TCP reads, and the capture's cue to record its segments.
                    m.set_segment_size(arrival.segment_size);
                    if let Some(c) = capture.as_mut() {
                        c.message(clock, now, &m);
                    }
                    if arrival.verified {
                        coalescer.push_verified(m, &mut up);
                    } else {
                        coalescer.push(m, &mut up);
                    }
                })
                .map_err(|e| RuntimeError::io(format!("receiving on link '{name}'"), e))?;
            coalescer.flush(&mut up);
            // A short batch means the kernel had no more: wait for the next edge.
            *readable = n >= driver.batch();
            any |= n > 0;
        }
        Ok(any)
    }

    fn serve_jobs(&mut self) -> bool {
        let mut served = 0;
        while served < self.config.jobs_per_turn {
            let Some((_, job)) = self.jobs.try_next() else {
                self.jobs_left = false;
                return served > 0;
            };
            job(&mut self.engine);
            served += 1;
        }
        self.jobs_left = true;
        true
    }

    fn transmit(&mut self, busy: bool) -> Result<bool, RuntimeError> {
        let Runtime {
            engine,
            links,
            clock,
            config,
            ..
        } = self;
        let mut any = false;
        for link in links.iter_mut() {
            let LinkIo {
                id,
                name,
                driver,
                pending,
                writable,
                capture,
                ..
            } = link;
            if busy {
                *writable = true;
            }
            while *writable {
                while pending.len() < config.batch {
                    match engine.poll_transmit(*id) {
                        Some(frame) => pending.push_back(frame),
                        None => break,
                    }
                }
                if pending.is_empty() {
                    break;
                }
                let before = pending.len();
                let now = clock.now();
                driver
                    .send(pending, &mut |frame, left| {
                        if let (true, Some(c)) = (left, capture.as_mut()) {
                            c.message(clock, now, &frame);
                        }
                    })
                    .map_err(|e| RuntimeError::io(format!("sending on link '{name}'"), e))?;
                any |= pending.len() < before;
                if !pending.is_empty() {
                    // The kernel's buffer is full: wait for it to drain.
                    *writable = false;
                }
            }
        }
        Ok(any)
    }

    /// Waits in epoll for as long as nothing needs doing.
    fn wait(&mut self, progressed: bool) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let more = progressed
            || self.jobs_left
            || self.links.iter().any(|l| {
                l.readable
                    || (l.writable
                        && (!l.pending.is_empty() || self.engine.transmit_backlog(l.id) > 0))
            });
        let timeout = if more {
            Duration::ZERO
        } else {
            // Periodic, not forced: a refresh of the kernel's counters is a
            // system call, and sleeping once per round trip must not cost one.
            // The loop wakes at least every MAX_WAIT, so captures still reach
            // their files promptly, and stopping forces a final flush.
            self.housekeeping(false);
            self.engine
                .next_deadline()
                .map_or(MAX_WAIT, |d| Clock::until(now, d).min(MAX_WAIT))
        };
        match self.poll.poll(&mut self.events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(RuntimeError::io("epoll wait", e)),
        }
        for event in self.events.iter() {
            let Some(link) = self.links.get_mut(event.token().0) else {
                continue;
            };
            // Errors and hang-ups are read as readable, so the driver meets them.
            if event.is_readable() || event.is_error() || event.is_read_closed() {
                link.readable = true;
            }
            if event.is_writable() {
                link.writable = true;
            }
        }
        Ok(())
    }

    /// Flushes captures and refreshes the kernel's counters: always when
    /// `force` (before sleeping, at the end), else at most every
    /// [`FLUSH_EVERY`](super::FLUSH_EVERY), so a busy loop pays for it rarely.
    fn housekeeping(&mut self, force: bool) {
        let now = self.clock.now();
        if !force && now - self.last_housekeeping < super::FLUSH_EVERY {
            return;
        }
        self.last_housekeeping = now;
        for link in &mut self.links {
            link.driver.refresh();
            if let Some(c) = link.capture.as_mut() {
                c.flush_if_due(now, true);
            }
        }
    }
}
