//! The transport's blocking API over kernel UDP on the loopback.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest, Sha256};
use strata::xport::{XportListener, XportOptions, XportStream};

#[test]
fn buffers_sent_are_given_back_and_the_stream_arrives_whole() {
    let opts = XportOptions::default();
    let mut listener = XportListener::bind("127.0.0.1:0", &opts).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let mut s = listener.accept().unwrap();
        for _ in 0..3 {
            s.post_recv(vec![0u8; 256 << 10]);
        }
        let mut h = Sha256::new();
        let mut total = 0;
        loop {
            let (buf, len) = s.recv(vec![0u8; 256 << 10]).unwrap();
            if len == 0 {
                break;
            }
            h.update(&buf[..len]);
            total += len;
        }
        s.close().unwrap();
        (total, <[u8; 32]>::from(h.finalize()))
    });
    let mut c = XportStream::connect(addr, &opts).unwrap();
    let data: Vec<u8> = (0..(8usize << 20))
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    let whole = Bytes::from(data.clone());
    let bufs: Vec<Bytes> = (0..4)
        .map(|i| whole.slice(i * (2 << 20)..(i + 1) * (2 << 20)))
        .collect();
    let mut back = c.send(bufs).unwrap();
    assert!(
        !back.is_empty(),
        "send returns once a buffer is acknowledged"
    );
    back.extend(c.finish().unwrap());
    assert_eq!(back.len(), 4, "every buffer is given back");
    assert!(back.iter().all(|b| b.len() == 2 << 20));
    c.close().unwrap();
    let (total, hash) = server.join().unwrap();
    assert_eq!(total, data.len());
    assert_eq!(hash, <[u8; 32]>::from(Sha256::digest(&data)));
}

#[test]
fn wait_watches_the_applications_descriptors_while_the_connection_runs() {
    let opts = XportOptions::default();
    let mut listener = XportListener::bind("127.0.0.1:0", &opts).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let mut s = listener.accept().unwrap();
        let (_, len) = s.recv(vec![0u8; 5]).unwrap();
        assert_eq!(len, 5);
        s.close().unwrap();
    });
    let mut c = XportStream::connect(addr, &opts).unwrap();
    let (mut a, b) = UnixStream::pair().unwrap();
    let t = Instant::now();
    let ready = c
        .wait(&[b.as_raw_fd()], Some(Duration::from_millis(50)))
        .unwrap();
    assert_eq!(ready, vec![false]);
    assert!(t.elapsed() >= Duration::from_millis(50));
    a.write_all(b"x").unwrap();
    let ready = c
        .wait(&[b.as_raw_fd()], Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(ready, vec![true]);
    c.send(vec![Bytes::from_static(b"hello")]).unwrap();
    c.close().unwrap();
    server.join().unwrap();
}

/// This thread's CPU time (user + system) from /proc, in clock ticks (10 ms).
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn an_idle_connection_sleeps_instead_of_spinning() {
    let opts = XportOptions::default();
    let mut listener = XportListener::bind("127.0.0.1:0", &opts).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let mut s = listener.accept().unwrap();
        let (_, len) = s.recv(vec![0u8; 1]).unwrap();
        assert_eq!(len, 1);
        s.close().unwrap();
    });
    let mut c = XportStream::connect(addr, &opts).unwrap();
    let before = thread_cpu_ticks();
    // Two seconds open and idle: keepalives every 500 ms, nothing else.
    c.wait(&[], Some(Duration::from_secs(2))).unwrap();
    let used = thread_cpu_ticks() - before;
    assert!(
        used <= 10,
        "an idle connection used {used} ticks (10 ms each) in 2 s"
    );
    c.send(vec![Bytes::from_static(b"!")]).unwrap();
    c.close().unwrap();
    server.join().unwrap();
}

/// Runs `f` on a thread and fails if it does not end within `limit` (a
/// stalled transfer must fail the test, not hang the suite).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("stalled: not done within {limit:?}"))
}

#[test]
fn a_rate_limited_sender_of_small_buffers_reaches_a_receiver_of_large_ones() {
    // 12.5 KB every 10 ms (10 Mbit/s) for a second, sent between waits on
    // the application's own time-out; the receiver posts 1 MiB buffers.
    const CHUNK: usize = 12_500;
    const CHUNKS: usize = 100;
    let got = within(Duration::from_secs(20), || {
        let opts = XportOptions::default();
        let mut listener = XportListener::bind("127.0.0.1:0", &opts).unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let mut s = listener.accept().unwrap();
            let mut all = Vec::new();
            loop {
                let (buf, len) = s.recv(vec![0u8; 1 << 20]).unwrap();
                if len == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..len]);
            }
            s.close().unwrap();
            all
        });
        let mut c = XportStream::connect(addr, &opts).unwrap();
        let mut sent = Vec::new();
        for i in 0..CHUNKS {
            let chunk: Vec<u8> = (0..CHUNK).map(|j| (i * 31 + j) as u8).collect();
            sent.extend_from_slice(&chunk);
            c.send(vec![Bytes::from(chunk)]).unwrap();
            c.wait(&[], Some(Duration::from_millis(10))).unwrap();
        }
        c.close().unwrap();
        (sent, server.join().unwrap())
    });
    assert_eq!(got.1.len(), CHUNK * CHUNKS);
    assert!(got.0 == got.1, "the stream arrived altered");
}
