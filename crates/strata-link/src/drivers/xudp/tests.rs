//! The transport over real kernel UDP on the loopback: a whole stream
//! crosses intact, through GSO/GRO where the kernel offers them.

use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_xport::{Config, Connection, Event, Listener, State};

use super::*;

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
        .collect()
}

fn run_server(mut x: Xudp, mut l: Listener, expect: usize) -> (Vec<u8>, XudpStats) {
    let mut got = vec![0u8; expect];
    let mut id = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut done = false;
    while Instant::now() < deadline {
        x.turn(&mut l).unwrap();
        if id.is_none()
            && let Some(i) = l.accept()
        {
            id = Some(i);
            let c = l.connection(i).unwrap();
            for _ in 0..4 {
                c.post_recv(vec![0u8; 1 << 20]);
            }
            c.finish();
        }
        if let Some(c) = id.and_then(|i| l.connection(i)) {
            while let Some(e) = c.poll_event() {
                match e {
                    Event::Received { offset, buf, len } => {
                        got[offset as usize..offset as usize + len].copy_from_slice(&buf[..len]);
                        c.post_recv(buf);
                    }
                    Event::Closed => done = true,
                    Event::Lost(e) => panic!("server lost: {e}"),
                    _ => {}
                }
            }
        }
        if done {
            break;
        }
        x.turn(&mut l).unwrap();
        x.wait(l.poll_timeout(), &[]).unwrap();
    }
    assert!(done, "server did not close");
    (got, x.stats().clone())
}

/// Sends `len` bytes over two data sockets on the loopback, handing the
/// connection buffers of `chunk` bytes; returns the receiving driver's counters.
fn cross_the_loopback(len: usize, chunk: usize) -> XudpStats {
    let opts = XudpOptions {
        data_sockets: 2,
        ..XudpOptions::default()
    };
    let sx = Xudp::bind("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
    let server = sx.control_addr().unwrap();
    let listener = Listener::new(
        Config::default(),
        Instant::now(),
        7,
        &sx.data_ports().unwrap(),
        8,
    );
    let srv = thread::spawn(move || run_server(sx, listener, len));

    let mut cx = Xudp::bind("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
    let mut c = Connection::connect(
        Config::default(),
        Instant::now(),
        8,
        server,
        &cx.data_ports().unwrap(),
    );
    let data = Bytes::from(pattern(len));
    let mut next = 0;
    let mut closed = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !closed && Instant::now() < deadline {
        cx.turn(&mut c).unwrap();
        while c.state() == State::Established && next < len && c.info().unacked < 4 << 20 {
            let end = (next + chunk).min(len);
            c.send(data.slice(next..end)).unwrap();
            next = end;
            if next == len {
                c.finish();
            }
        }
        while let Some(e) = c.poll_event() {
            match e {
                Event::Closed => closed = true,
                Event::Lost(e) => panic!("client lost: {e}"),
                _ => {}
            }
        }
        if closed {
            break;
        }
        cx.turn(&mut c).unwrap();
        cx.wait(c.poll_timeout(), &[]).unwrap();
    }
    assert!(closed, "client did not close: {:?}", c.stats());
    let (got, sstats) = srv.join().unwrap();
    assert!(got == data[..], "the stream differs");
    assert_eq!(c.data_sockets(), 2);
    let cs = cx.stats();
    assert!(cs.datagrams_out > (len / Config::default().mss as usize) as u64);
    assert!(sstats.datagrams_in > 0);
    // Every payload byte was either received straight into the posted
    // buffers or copied there.
    eprintln!("server: {sstats:?}");
    assert!(sstats.placed_bytes + sstats.copied_bytes >= len as u64);
    sstats
}

#[test]
fn a_stream_crosses_the_loopback_intact() {
    let len = 24 << 20;
    let s = cross_the_loopback(len, 1 << 20);
    // With GRO, most bytes go straight into the application's buffers.
    if !s.gro_refused {
        assert!(
            s.placed_bytes > len as u64 / 2,
            "placed {} of {len}",
            s.placed_bytes
        );
    }
}

#[test]
fn short_packets_that_land_out_of_place_are_copied_to_theirs() {
    // Buffers of 12,500 bytes: every ninth packet is short (1,300 bytes),
    // so the places expected after it are wrong until the next packet
    // shows where the stream is — those land elsewhere and are copied.
    let len = 8 << 20;
    let s = cross_the_loopback(len, 12_500);
    if !s.gro_refused {
        assert!(s.placed_bytes > 0 && s.copied_bytes > 0, "{s:?}");
    }
}

#[test]
fn a_run_of_equal_datagrams_leaves_as_one_gso_send_and_arrives_cut() {
    let mut x = Xudp::bind("127.0.0.1:0".parse().unwrap(), &XudpOptions::default()).unwrap();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let dest = sink.local_addr().unwrap();
    let payload = Bytes::from(vec![7u8; 1000]);
    for i in 0..10u8 {
        let len = if i == 9 { 500 } else { 1000 };
        x.pending.push_back(Pending {
            header: vec![i; 40],
            payload: payload.slice(..len),
            dest,
            channel: Channel::Data(0),
        });
    }
    assert!(x.flush().unwrap());
    let s = x.stats().clone();
    if s.gso_refused {
        assert_eq!(
            s.send_calls, 2,
            "one refused GSO call, then all in one call"
        );
    } else {
        assert_eq!((s.gso_batches, s.send_calls), (1, 1), "{s:?}");
    }
    let mut buf = [0u8; 2048];
    for i in 0..10u8 {
        let n = sink.recv(&mut buf).unwrap();
        assert_eq!(n, if i == 9 { 540 } else { 1040 });
        assert_eq!(&buf[..40], &[i; 40][..], "header of datagram {i}");
        assert!(buf[40..n].iter().all(|&b| b == 7));
    }
}

#[test]
fn clamped_socket_buffers_are_read_back_and_spread_over_more_sockets() {
    // Ask far more than net.core.rmem_max allows by default: the kernel
    // clamps, we read back, and open more data sockets (§3.4).
    let opts = XudpOptions {
        data_sockets: 1,
        socket_buffer: 1 << 30,
        ..XudpOptions::default()
    };
    let x = Xudp::bind("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
    let r = x.report();
    assert!(r.rcvbuf > 0 && r.sndbuf > 0);
    if r.clamped {
        assert!(r.data_sockets > 1, "{r:?}");
        assert_eq!(x.data_ports().unwrap().len(), r.data_sockets);
    }
}

/// A queue of `n` datagrams to each of `dests` in turn on data socket 0,
/// `len` payload bytes each after a 40-byte header naming its destination
/// and number.
fn queue_to(x: &mut Xudp, dests: &[SocketAddr], n: u16, len: usize) {
    let payload = Bytes::from(vec![7u8; len]);
    for i in 0..n {
        for (d, &dest) in dests.iter().enumerate() {
            let mut header = vec![d as u8; 40];
            header[..2].copy_from_slice(&i.to_be_bytes());
            x.pending.push_back(Pending {
                header,
                payload: payload.clone(),
                dest,
                channel: Channel::Data(0),
            });
        }
    }
}

/// Reads `n` datagrams from `sink` and checks they are the ones numbered
/// 0..n, in order, for destination `d`.
fn read_in_order(sink: &UdpSocket, d: u8, n: u16, len: usize) {
    let mut buf = [0u8; 2048];
    for i in 0..n {
        let got = sink.recv(&mut buf).unwrap();
        assert_eq!(got, 40 + len);
        assert_eq!(
            &buf[..2],
            &i.to_be_bytes(),
            "datagram {i} to {d} out of order"
        );
        assert!(buf[2..40].iter().all(|&b| b == d));
    }
}

#[test]
fn runs_to_several_destinations_leave_in_one_sendmmsg_each_in_order() {
    let mut x = Xudp::bind("127.0.0.1:0".parse().unwrap(), &XudpOptions::default()).unwrap();
    let sinks: Vec<UdpSocket> = (0..2)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let dests: Vec<SocketAddr> = sinks.iter().map(|s| s.local_addr().unwrap()).collect();
    for s in &sinks {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    // 100 datagrams of 1,040 bytes to each, interleaved: 62 fit one GSO
    // super-datagram, so two runs per destination, four messages.
    queue_to(&mut x, &dests, 100, 1000);
    assert!(x.flush().unwrap());
    let s = x.stats().clone();
    assert_eq!(s.datagrams_out, 200);
    if !s.gso_refused {
        assert_eq!((s.send_calls, s.gso_batches), (1, 4), "{s:?}");
    } else {
        // Datagram by datagram, still 16 per system call.
        assert!(s.send_calls <= 200 / 16 + 2, "{s:?}");
    }
    assert!(x.pending.is_empty());
    for (d, sink) in sinks.iter().enumerate() {
        read_in_order(sink, d as u8, 100, 1000);
    }
}

#[test]
fn a_destination_whose_route_refuses_gso_gets_single_datagrams_in_order() {
    let mut x = Xudp::bind("127.0.0.1:0".parse().unwrap(), &XudpOptions::default()).unwrap();
    if !x.gso {
        return; // a kernel without GSO: nothing to refuse (bind said so)
    }
    // UDP checksums off on the sending socket: the kernel refuses GSO on it
    // (EINVAL), as an IPsec route does (EIO).
    let one: libc::c_int = 1;
    // SAFETY: `one` lives across the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            x.data[0].as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let dest = sink.local_addr().unwrap();
    queue_to(&mut x, &[dest], 40, 1000);
    assert!(x.flush().unwrap());
    let s = x.stats().clone();
    assert!(s.gso_refused, "{s:?}");
    assert_eq!((s.gso_batches, s.datagrams_out, s.send_errors), (0, 40, 0));
    // One refused call, then 16 datagrams per call.
    assert_eq!(s.send_calls, 1 + 3, "{s:?}");
    assert_eq!(x.no_gso, vec![dest]);
    assert!(x.gso, "GSO stays on for other destinations");
    read_in_order(&sink, 0, 40, 1000);
    // Later runs to it go datagram by datagram without asking again.
    queue_to(&mut x, &[dest], 16, 1000);
    assert!(x.flush().unwrap());
    assert_eq!(x.stats().send_calls, 5);
    read_in_order(&sink, 0, 16, 1000);
}
