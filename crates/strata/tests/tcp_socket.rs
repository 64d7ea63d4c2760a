//! The blocking TCP API, `TcpListener` and `TcpStream`, on the in-memory
//! network running in real time: a 16 MB echo whose SHA-256 must come back
//! unchanged (on a clean link and through loss), backpressure from a slow
//! reader that shows in the advertised window, timeouts, shutdown and close
//! semantics, and the bound of the accept queue — on Strata's TCP and on
//! smoltcp's imported into Strata (`smoltcp-tcp`, seed 004) alike.

mod tcp_common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddrV4};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use strata::link::{EngineHandle, LinkParams, SimNet};
use strata::proto::tcp::Stats;
use strata::proto::tcp::state::State;
use strata::{Arch, Network, TcpListener, TcpStream};
use tcp_common::{Tcp, chunk, expected_digest, host, ip};

const MB: u64 = 1 << 20;
const PORT: u16 = 7;

/// A client (host 1) and a server (host 2) on a link with `params` both
/// ways, running in real time.
struct Pair {
    client: EngineHandle,
    server: EngineHandle,
    _net: Network,
}

fn network(tcp: Tcp, params: LinkParams) -> Pair {
    let mut net = SimNet::new(7);
    let a = net.add_host("client", host(1, Arch::Llm, tcp.spec(), 7, &[]));
    let b = net.add_host("server", host(2, Arch::Llm, tcp.spec(), 7, &[]));
    net.connect((a, "net0"), (b, "net0"), params.clone(), params)
        .unwrap();
    let net = Network::start(net);
    Pair {
        client: net.host(a),
        server: net.host(b),
        _net: net,
    }
}

/// Waits up to 5 s for `cond`.
fn eventually(mut cond: impl FnMut() -> bool, what: &str) {
    let end = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within 5 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn server_addr(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip(2), port)
}

/// Writes the first `total` bytes of the test stream in 64 KB writes.
fn send_stream(mut to: &TcpStream, total: u64) {
    let mut sent = 0u64;
    let mut i = 0;
    while sent < total {
        let len = (total - sent).min(64 * 1024) as usize;
        to.write_all(&chunk(i, len)).unwrap();
        sent += len as u64;
        i += 1;
    }
}

/// Reads to the end; returns the byte count and SHA-256.
fn hash_stream(mut from: &TcpStream) -> (u64, [u8; 32]) {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 50_000];
    let mut total = 0u64;
    loop {
        match from.read(&mut buf).unwrap() {
            0 => return (total, h.finalize().into()),
            n => {
                h.update(&buf[..n]);
                total += n as u64;
            }
        }
    }
}

/// An echo server for one connection: everything read is written back; at
/// the end of the stream it closes.
fn echo_once(listener: TcpListener) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 30_000];
        let mut echoed = 0;
        loop {
            let n = (&s).read(&mut buf).unwrap();
            if n == 0 {
                return echoed;
            }
            (&s).write_all(&buf[..n]).unwrap();
            echoed += n as u64;
        }
    })
}

/// Echoes 16 MB through a link with `params`; returns the client's counters.
fn echo_16_mb(tcp: Tcp, params: LinkParams, limit: Duration) -> Stats {
    let net = network(tcp, params);
    let listener = TcpListener::bind(&net.server, PORT).unwrap();
    let echo = echo_once(listener);
    let started = Instant::now();
    let s = TcpStream::connect(&net.client, server_addr(PORT)).unwrap();
    let total = 16 * MB;
    let (got, digest) = std::thread::scope(|scope| {
        let reader = scope.spawn(|| hash_stream(&s));
        send_stream(&s, total);
        s.shutdown(Shutdown::Write).unwrap();
        reader.join().unwrap()
    });
    assert_eq!(echo.join().unwrap(), total, "the server echoed every byte");
    assert_eq!(got, total, "every byte came back");
    assert_eq!(digest, expected_digest(total), "SHA-256 of what came back");
    assert!(started.elapsed() < limit, "took {:?}", started.elapsed());
    s.info().unwrap().stats
}

#[test]
fn sixteen_megabytes_echoed_through_tcp_streams_come_back_with_the_same_sha256() {
    sixteen_megabytes_echoed_through_tcp_streams_come_back_with_the_same_sha256_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_sixteen_megabytes_echoed_through_tcp_streams_come_back_with_the_same_sha256() {
    sixteen_megabytes_echoed_through_tcp_streams_come_back_with_the_same_sha256_on(Tcp::Smoltcp);
}

fn sixteen_megabytes_echoed_through_tcp_streams_come_back_with_the_same_sha256_on(tcp: Tcp) {
    let stats = echo_16_mb(tcp, LinkParams::default(), Duration::from_secs(60));
    match tcp {
        Tcp::Strata => assert_eq!(stats.retransmits, 0, "nothing lost: {stats:?}"),
        // smoltcp sends its FIN into a window the echo has closed, and
        // sends it again once the window opens; and this network runs in
        // real time, so on a loaded machine a starved thread can let one of
        // its timers fire spuriously (the likely cause of the one failure
        // of a bound of 1, in a busy run; its count was not recorded).
        // A lossless link still resends next to nothing of 11,600 segments.
        Tcp::Smoltcp => assert!(stats.retransmits <= 4, "nothing lost: {stats:?}"),
    }
}

/// Not on smoltcp: without SACK and with a one-second RTO floor, its
/// recovery makes 16 MB both ways through 1% loss take minutes
/// (docs/design.md, "Importing smoltcp's TCP"); `smoltcp_transfer.rs` moves
/// data through 1% loss in virtual time instead.
#[test]
fn sixteen_megabytes_echoed_through_one_percent_loss_come_back_with_the_same_sha256() {
    let lossy = LinkParams {
        loss: 0.01,
        ..LinkParams::delay(Duration::from_millis(1))
    };
    let stats = echo_16_mb(Tcp::Strata, lossy, Duration::from_secs(120));
    assert!(stats.retransmits > 50, "losses were repaired: {stats:?}");
}

#[test]
fn a_reader_that_does_not_read_closes_the_window_and_the_writer_waits() {
    a_reader_that_does_not_read_closes_the_window_and_the_writer_waits_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_reader_that_does_not_read_closes_the_window_and_the_writer_waits() {
    a_reader_that_does_not_read_closes_the_window_and_the_writer_waits_on(Tcp::Smoltcp);
}

fn a_reader_that_does_not_read_closes_the_window_and_the_writer_waits_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::delay(Duration::from_millis(1)));
    let listener = TcpListener::bind(&net.server, PORT).unwrap();
    let c = TcpStream::connect(&net.client, server_addr(PORT)).unwrap();
    let (s, peer) = listener.accept().unwrap();
    assert_eq!(peer, c.local_addr());
    c.set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut written = 0u64;
    let block = vec![7u8; 16 * 1024];
    let err = loop {
        match (&c).write(&block) {
            Ok(n) => written += n as u64,
            Err(e) => break e,
        }
        assert!(written < 64 * MB, "the writer was never held back");
    };
    assert_eq!(err.kind(), ErrorKind::WouldBlock, "{err}");
    let receiver = s.info().unwrap();
    let sender = c.info().unwrap();
    assert_eq!(receiver.rcv_wnd, 0, "the window is closed: {receiver:?}");
    assert_eq!(sender.snd_wnd, 0, "the sender sees it closed: {sender:?}");
    assert!(
        receiver.rcvbuf.1 > 0,
        "what waits unread counts against the window: {receiver:?}"
    );
    // smoltcp's receive ring fills behind the window's worth the
    // application holds unread: one more buffer.
    let rings = match tcp {
        Tcp::Strata => 1,
        Tcp::Smoltcp => 2,
    };
    assert!(
        written <= (rings * receiver.rcvbuf.0 + sender.sndbuf.0) as u64 + 64 * 1024,
        "held back by the receive and send buffers: {written} B, {receiver:?} {sender:?}"
    );
    // Now the reader reads: everything arrives and the writer goes on.
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 8192];
        let mut got = 0u64;
        loop {
            match (&s).read(&mut buf).unwrap() {
                0 => return got,
                n => {
                    assert!(buf[..n].iter().all(|&b| b == 7));
                    got += n as u64;
                }
            }
        }
    });
    c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    (&c).write_all(&vec![7u8; 4 * MB as usize]).unwrap();
    written += 4 * MB;
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(
        reader.join().unwrap(),
        written,
        "every byte written arrived"
    );
}

#[test]
fn reads_and_writes_time_out_with_would_block_and_connects_with_timed_out() {
    reads_and_writes_time_out_with_would_block_and_connects_with_timed_out_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_reads_and_writes_time_out_with_would_block_and_connects_with_timed_out() {
    reads_and_writes_time_out_with_would_block_and_connects_with_timed_out_on(Tcp::Smoltcp);
}

fn reads_and_writes_time_out_with_would_block_and_connects_with_timed_out_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::default());
    let listener = TcpListener::bind(&net.server, PORT).unwrap();
    let c = TcpStream::connect(&net.client, server_addr(PORT)).unwrap();
    let (_s, _) = listener.accept().unwrap();
    assert_eq!(
        c.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let t0 = Instant::now();
    let err = (&c).read(&mut [0u8; 10]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WouldBlock);
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(
        listener
            .accept_timeout(Duration::from_millis(100))
            .unwrap_err()
            .kind(),
        ErrorKind::WouldBlock
    );
    listener.set_nonblocking(true);
    assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    // Nobody at .99 answers ARP.
    let t0 = Instant::now();
    let err = TcpStream::connect_timeout(
        &net.client,
        SocketAddrV4::new(std::net::Ipv4Addr::new(198, 18, 0, 99), PORT),
        Duration::from_millis(300),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_closed_port_refuses_and_a_taken_one_is_in_use() {
    a_closed_port_refuses_and_a_taken_one_is_in_use_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_closed_port_refuses_and_a_taken_one_is_in_use() {
    a_closed_port_refuses_and_a_taken_one_is_in_use_on(Tcp::Smoltcp);
}

fn a_closed_port_refuses_and_a_taken_one_is_in_use_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::default());
    let err = TcpStream::connect(&net.client, server_addr(9)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    let l = TcpListener::bind(&net.server, PORT).unwrap();
    assert_eq!(l.local_addr(), server_addr(PORT));
    let err = TcpListener::bind(&net.server, PORT).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AddrInUse);
    let any = TcpListener::bind(&net.server, 0).unwrap();
    let port = any.local_addr().port();
    assert!(port >= 49152, "an ephemeral port: {port}");
    let c = TcpStream::connect(&net.client, server_addr(port)).unwrap();
    assert_eq!(c.peer_addr(), server_addr(port));
    assert_eq!(*c.local_addr().ip(), ip(1));
    drop(l);
    let err = TcpStream::connect(&net.client, server_addr(PORT)).unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::ConnectionRefused,
        "a dropped listener frees its port"
    );
}

#[test]
fn a_half_close_ends_the_peers_reads_while_it_can_still_answer() {
    a_half_close_ends_the_peers_reads_while_it_can_still_answer_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_half_close_ends_the_peers_reads_while_it_can_still_answer() {
    a_half_close_ends_the_peers_reads_while_it_can_still_answer_on(Tcp::Smoltcp);
}

fn a_half_close_ends_the_peers_reads_while_it_can_still_answer_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::default());
    let listener = TcpListener::bind(&net.server, PORT).unwrap();
    let mut c = TcpStream::connect(&net.client, server_addr(PORT)).unwrap();
    let (mut s, _) = listener.accept().unwrap();
    c.write_all(b"question").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let err = c.write(b"more").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    assert_eq!(got, "question", "then the end of the stream");
    assert_eq!(s.read(&mut [0u8; 4]).unwrap(), 0, "and it stays ended");
    s.write_all(b"answer").unwrap();
    drop(s);
    let mut back = String::new();
    c.read_to_string(&mut back).unwrap();
    assert_eq!(back, "answer");
    let state = c.info().unwrap().state;
    assert_eq!(state, State::TimeWait, "both sides closed cleanly");
}

#[test]
fn a_reader_shut_down_reads_nothing_more_and_the_writer_is_never_held_back() {
    a_reader_shut_down_reads_nothing_more_and_the_writer_is_never_held_back_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_reader_shut_down_reads_nothing_more_and_the_writer_is_never_held_back() {
    a_reader_shut_down_reads_nothing_more_and_the_writer_is_never_held_back_on(Tcp::Smoltcp);
}

fn a_reader_shut_down_reads_nothing_more_and_the_writer_is_never_held_back_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::delay(Duration::from_millis(1)));
    let listener = TcpListener::bind(&net.server, PORT).unwrap();
    let c = TcpStream::connect(&net.client, server_addr(PORT)).unwrap();
    let (s, _) = listener.accept().unwrap();
    (&c).write_all(b"hello").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.shutdown(Shutdown::Read).unwrap();
    assert_eq!((&s).read(&mut [0u8; 10]).unwrap(), 0);
    c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    (&c).write_all(&vec![1u8; 8 * MB as usize]).unwrap();
    (&c).flush().unwrap();
    assert_eq!((&s).read(&mut [0u8; 10]).unwrap(), 0);
    // The shut reader's side can still write.
    (&s).write_all(b"bye").unwrap();
    let mut buf = [0u8; 3];
    (&c).read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"bye");
}

#[test]
fn dropping_a_stream_with_unread_data_resets_the_connection() {
    dropping_a_stream_with_unread_data_resets_the_connection_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_dropping_a_stream_with_unread_data_resets_the_connection() {
    dropping_a_stream_with_unread_data_resets_the_connection_on(Tcp::Smoltcp);
}

fn dropping_a_stream_with_unread_data_resets_the_connection_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::default());
    let listener = TcpListener::bind(&net.server, PORT).unwrap();
    let c = TcpStream::connect(&net.client, server_addr(PORT)).unwrap();
    let (s, _) = listener.accept().unwrap();
    (&c).write_all(b"never read").unwrap();
    eventually(|| s.info().unwrap().rcvbuf.1 == 10, "the data waits unread");
    drop(s);
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let err = (&c).read(&mut [0u8; 10]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
    let err = (&c).write_all(b"x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
}

#[test]
fn connections_beyond_the_accept_queue_are_reset_and_counted() {
    connections_beyond_the_accept_queue_are_reset_and_counted_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_connections_beyond_the_accept_queue_are_reset_and_counted() {
    connections_beyond_the_accept_queue_are_reset_and_counted_on(Tcp::Smoltcp);
}

fn connections_beyond_the_accept_queue_are_reset_and_counted_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::default());
    let listener = TcpListener::bind_with_backlog(&net.server, PORT, 2).unwrap();
    let clients: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(&net.client, server_addr(PORT)).unwrap())
        .collect();
    eventually(|| listener.overflow().unwrap() == 3, "three were reset");
    let accepted: Vec<SocketAddrV4> = (0..2).map(|_| listener.accept().unwrap().1).collect();
    assert_eq!(
        accepted,
        [clients[0].local_addr(), clients[1].local_addr()],
        "the first two, in order"
    );
    listener.set_nonblocking(true);
    assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    for c in &clients[2..] {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let err = (&*c).read(&mut [0u8; 1]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
    }
}

#[test]
fn nodelay_and_info_reach_the_connection() {
    nodelay_and_info_reach_the_connection_on(Tcp::Strata);
}

#[test]
fn on_smoltcp_nodelay_and_info_reach_the_connection() {
    nodelay_and_info_reach_the_connection_on(Tcp::Smoltcp);
}

fn nodelay_and_info_reach_the_connection_on(tcp: Tcp) {
    let net = network(tcp, LinkParams::default());
    let listener = TcpListener::bind(&net.server, PORT).unwrap();
    let c = TcpStream::connect(&net.client, server_addr(PORT)).unwrap();
    let (s, _) = listener.accept().unwrap();
    c.set_nodelay(true).unwrap();
    let i = c.info().unwrap();
    assert_eq!(i.state, State::Established);
    assert!(i.sack && i.timestamps);
    assert_eq!(s.info().unwrap().state, State::Established);
    // Small writes go at once with Nagle off: ten round trips, no waits.
    let t0 = Instant::now();
    for _ in 0..10 {
        (&c).write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        (&s).read_exact(&mut b).unwrap();
        (&s).write_all(&b).unwrap();
        (&c).read_exact(&mut b).unwrap();
    }
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
}
