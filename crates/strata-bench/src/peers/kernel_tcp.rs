//! The Linux kernel's TCP at both ends of a bulk transfer: the receiver every
//! sender of `strata bench tcp-veth` and `tcp-wan` sends to, and the kernel
//! sender Strata's is measured beside.
//!
//! [`KernelSink`] listens in one namespace and reads every connection on a
//! thread of its own, with blocking reads of 128 KiB (what iperf3 reads),
//! counting the bytes into one total; a benchmark reads the total before and
//! after a batch, then [cuts](KernelSink::cut) the batch's connection: the
//! sink closes it with data unread, which resets it (RFC 2525 §2.17), so
//! whatever the sender still had queued never competes with the next batch.
//! [`kernel_send`] connects from another namespace and writes 128 KiB
//! buffers with blocking writes for a given time: the kernel's own way of
//! sending as fast as its window allows.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strata_link::drivers::netns;

use super::transfer::Transfer;

/// Bytes per read and per write.
const BUFFER: usize = 128 * 1024;

/// How often the listener looks at its stop flag, and a reader at its cut
/// flag when no data comes.
const POLL: Duration = Duration::from_millis(20);

/// What the sink's threads share.
#[derive(Default)]
struct Shared {
    received: AtomicU64,
    connections: AtomicU64,
    /// Bumped by `cut`: readers of connections accepted before it close.
    generation: AtomicU64,
    stop: AtomicBool,
}

/// A kernel TCP receiver that counts what every connection brings.
pub struct KernelSink {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl KernelSink {
    /// Listens on `addr` in namespace `ns`.
    pub fn start(ns: Option<&str>, addr: SocketAddrV4) -> io::Result<KernelSink> {
        let listener = netns::within(ns, || TcpListener::bind(addr))?;
        listener.set_nonblocking(true)?;
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("kernel-tcp-sink".into())
            .spawn(move || accept_loop(&listener, &s))?;
        Ok(KernelSink {
            shared,
            thread: Some(thread),
        })
    }

    /// Bytes received so far, over every connection.
    pub fn received(&self) -> u64 {
        self.shared.received.load(Ordering::Acquire)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Acquire)
    }

    /// Resets every connection accepted so far (see the module docs).
    pub fn cut(&self) {
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Stops accepting and cuts every connection.
    pub fn stop(mut self) -> io::Result<()> {
        self.halt()
    }

    fn halt(&mut self) -> io::Result<()> {
        self.cut();
        self.shared.stop.store(true, Ordering::Release);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the sink thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for KernelSink {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) -> io::Result<()> {
    while !shared.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                stream.set_read_timeout(Some(POLL))?;
                shared.connections.fetch_add(1, Ordering::AcqRel);
                let generation = shared.generation.load(Ordering::Acquire);
                let s = Arc::clone(shared);
                std::thread::Builder::new()
                    .name("kernel-tcp-read".into())
                    .spawn(move || drain(stream, &s, generation))?;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads a connection until its end, its reset, or a cut.
fn drain(mut stream: TcpStream, shared: &Shared, generation: u64) {
    let mut buf = vec![0u8; BUFFER];
    while shared.generation.load(Ordering::Acquire) == generation {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                shared.received.fetch_add(n as u64, Ordering::AcqRel);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// Connects from namespace `ns` to `to` and writes for `duration`. Returns
/// the bytes the kernel took; the connection closes when the sink cuts it.
pub fn kernel_send(ns: Option<&str>, to: SocketAddrV4, duration: Duration) -> io::Result<u64> {
    let stream = netns::within(ns, || {
        TcpStream::connect_timeout(&to.into(), Duration::from_secs(5))
    })?;
    // A write blocks while the send buffer is full; the timeout lets the
    // loop notice the end of the batch on a path too slow to drain it.
    stream.set_write_timeout(Some(Duration::from_millis(100)))?;
    let buf = vec![0x5au8; BUFFER];
    let end = Instant::now() + duration;
    let mut sent = 0u64;
    let mut s = &stream;
    while Instant::now() < end {
        match s.write(&buf) {
            Ok(n) => sent += n as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            // The sink cut the connection: the batch is over.
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Moves `bytes` over one kernel TCP connection from namespace `from` to a
/// listener at `to` in namespace `into` (what the namespaces' defaults and
/// routes make of it: congestion control, window clamp), timed at the
/// receiver from the accept to the end of the stream; the sender stops
/// writing at `deadline`. CPU is this process's, both ends.
pub fn transfer(
    from: Option<&str>,
    into: Option<&str>,
    to: SocketAddrV4,
    bytes: u64,
    deadline: Instant,
) -> io::Result<Transfer> {
    let listener = netns::within(into, || TcpListener::bind(to))?;
    let cpu0 = crate::cpu::process_cpu();
    let receiver = std::thread::spawn(move || -> io::Result<(u64, f64, (u64, f64))> {
        let (mut s, _) = listener.accept()?;
        let t0 = Instant::now();
        let mut buf = vec![0u8; BUFFER];
        let (mut got, mut half) = (0u64, (0, 0.0));
        loop {
            match s.read(&mut buf) {
                Ok(0) => return Ok((got, t0.elapsed().as_secs_f64(), half)),
                Ok(n) => {
                    got += n as u64;
                    if half.0 == 0 && got >= bytes / 2 {
                        half = (got, t0.elapsed().as_secs_f64());
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    });
    let cut = netns::within(from, || {
        let mut s = TcpStream::connect_timeout(&to.into(), Duration::from_secs(5))?;
        let buf = vec![0x5au8; BUFFER];
        let mut sent = 0u64;
        while sent < bytes {
            if Instant::now() >= deadline {
                break;
            }
            let n = (bytes - sent).min(BUFFER as u64) as usize;
            s.write_all(&buf[..n])?;
            sent += n as u64;
        }
        s.shutdown(std::net::Shutdown::Write)?;
        Ok(sent < bytes)
    })?;
    let (got, secs, half) = receiver
        .join()
        .map_err(|_| io::Error::other("the receiver panicked"))??;
    Ok(Transfer {
        bytes: got,
        secs,
        cpu_secs: (crate::cpu::process_cpu() - cpu0).as_secs_f64(),
        cut,
        half_bytes: half.0,
        half_secs: half.1,
        ..Transfer::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_sender_and_sink_on_loopback_move_bytes_and_count_them() {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = match probe.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        drop(probe);
        let sink = KernelSink::start(None, addr).unwrap();
        let sent = kernel_send(None, addr, Duration::from_millis(100)).unwrap();
        assert!(sent > 0);
        let deadline = Instant::now() + Duration::from_secs(5);
        while sink.received() < sent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(sink.received(), sent);
        assert_eq!(sink.connections(), 1);
        sink.cut();
        sink.stop().unwrap();
    }
}
