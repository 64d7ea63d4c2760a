//! The in-engine TCP services a host serves — echo, discard, static HTTP —
//! driven by `TcpStream` clients on the in-memory network in real time, on
//! Strata's TCP and on smoltcp's imported into Strata (`smoltcp-tcp`, seed
//! 004) alike: services and sockets find their TCP by IP's protocol number.

mod tcp_common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use strata::apps::http::HttpServer;
use strata::apps::tcp_discard::TcpDiscard;
use strata::apps::tcp_echo::TcpEcho;
use strata::link::{EngineHandle, LinkParams, SimNet};
use strata::{AppId, Arch, Engine, Network, TcpStream};
use tcp_common::{Tcp, chunk, host, ip};

/// A client (host 1) and a server (host 2) running `serve` on a 1 ms link.
struct Pair {
    client: EngineHandle,
    server: EngineHandle,
    app: AppId,
    _net: Network,
}

fn pair(tcp: Tcp, serve: impl FnOnce(&mut Engine) -> AppId) -> Pair {
    let mut net = SimNet::new(3);
    let a = net.add_host("client", host(1, Arch::Llm, tcp.spec(), 3, &[]));
    let mut server = host(2, Arch::Llm, tcp.spec(), 3, &[]);
    let app = serve(&mut server);
    let b = net.add_host("server", server);
    let link = LinkParams::delay(Duration::from_millis(1));
    net.connect((a, "net0"), (b, "net0"), link.clone(), link)
        .unwrap();
    let net = Network::start(net);
    Pair {
        client: net.host(a),
        server: net.host(b),
        app,
        _net: net,
    }
}

fn to(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip(2), port)
}

#[test]
fn the_echo_service_returns_a_stream_whole_and_holds_back_a_client_that_does_not_read() {
    echo_returns_a_stream_whole(Tcp::Strata);
}

#[test]
fn on_smoltcp_the_echo_service_returns_a_stream_whole_and_holds_back_a_client_that_does_not_read() {
    echo_returns_a_stream_whole(Tcp::Smoltcp);
}

fn echo_returns_a_stream_whole(tcp: Tcp) {
    let p = pair(tcp, |e| TcpEcho::install(e, 7).unwrap());
    let c = TcpStream::connect(&p.client, to(7)).unwrap();
    // Nobody reads the echo: our receive window, then the service's send
    // buffer and receive window fill, and writing stops.
    c.set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut sent = Vec::new();
    let err = loop {
        let data = chunk(sent.len() as u64, 16 * 1024);
        match (&c).write(&data) {
            Ok(n) => sent.extend_from_slice(&data[..n]),
            Err(e) => break e,
        }
        assert!(sent.len() < 32 << 20, "the client was never held back");
    };
    assert_eq!(err.kind(), ErrorKind::WouldBlock);
    let held = sent.len();
    let reader = std::thread::scope(|s| {
        let r = s.spawn(|| {
            let mut back = Vec::new();
            (&c).read_to_end(&mut back).unwrap();
            back
        });
        c.set_write_timeout(None).unwrap();
        let more = chunk(99, 3 << 20);
        (&c).write_all(&more).unwrap();
        sent.extend_from_slice(&more);
        c.shutdown(Shutdown::Write).unwrap();
        r.join().unwrap()
    });
    assert!(reader == sent, "every byte came back in order");
    let app = p.app;
    let (connections, bytes) = p
        .server
        .call(move |e| e.app::<TcpEcho>(app).map(|a| (a.connections, a.bytes)))
        .unwrap()
        .unwrap();
    assert_eq!((connections, bytes), (1, sent.len() as u64));
    assert!(held < 16 << 20, "held back after {held} B");
}

#[test]
fn the_discard_service_reads_everything_and_closes_after_the_client() {
    discard_reads_everything(Tcp::Strata);
}

#[test]
fn on_smoltcp_the_discard_service_reads_everything_and_closes_after_the_client() {
    discard_reads_everything(Tcp::Smoltcp);
}

fn discard_reads_everything(tcp: Tcp) {
    let p = pair(tcp, |e| TcpDiscard::install(e, 9).unwrap());
    let mut c = TcpStream::connect(&p.client, to(9)).unwrap();
    c.write_all(&chunk(1, 5 << 20)).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(c.read(&mut [0u8; 8]).unwrap(), 0, "the service closed too");
    let app = p.app;
    let counts = p
        .server
        .call(move |e| e.app::<TcpDiscard>(app).map(|a| (a.connections, a.bytes)))
        .unwrap();
    assert_eq!(counts, Some((1, 5 << 20)));
}

/// Sends `request` and returns the status line, the headers and the body.
fn fetch(client: &EngineHandle, request: &[u8]) -> (String, String, Vec<u8>) {
    let mut c = TcpStream::connect(client, to(80)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(request).unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head")
        + 4;
    let head = String::from_utf8(all[..end].to_vec()).unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap();
    (status.to_string(), headers.to_string(), all[end..].to_vec())
}

#[test]
fn the_http_server_streams_a_file_and_answers_what_it_cannot_serve_with_an_error() {
    http_streams_a_file(Tcp::Strata);
}

#[test]
fn on_smoltcp_the_http_server_streams_a_file_and_answers_what_it_cannot_serve_with_an_error() {
    http_streams_a_file(Tcp::Smoltcp);
}

fn http_streams_a_file(tcp: Tcp) {
    let dir = std::env::temp_dir().join(format!(
        "strata-http-test-{}-{}",
        std::process::id(),
        tcp.kind()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("d")).unwrap();
    let file = chunk(5, 3 << 20 | 123);
    std::fs::write(dir.join("d/big file.bin"), &file).unwrap();
    std::fs::write(dir.join("index.html"), b"<p>hi</p>\n").unwrap();
    let root: PathBuf = dir.clone();
    let p = pair(tcp, move |e| HttpServer::install(e, 80, root).unwrap());

    let (status, headers, body) = fetch(
        &p.client,
        b"GET /d/big%20file.bin HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains(&format!("Content-Length: {}\r\n", file.len())),
        "{headers}"
    );
    assert!(headers.contains("Connection: close"), "{headers}");
    assert!(body == file[..], "the file, byte for byte");

    let (status, headers, body) = fetch(&p.client, b"HEAD / HTTP/1.0\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("Content-Length: 10\r\n"), "{headers}");
    assert!(headers.contains("Content-Type: text/html"), "{headers}");
    assert!(body.is_empty(), "HEAD has no body");

    for (request, want) in [
        (
            &b"GET /nothing HTTP/1.1\r\n\r\n"[..],
            "HTTP/1.1 404 Not Found",
        ),
        (
            b"GET /../etc/passwd HTTP/1.1\r\n\r\n",
            "HTTP/1.1 400 Bad Request",
        ),
        (
            b"DELETE / HTTP/1.1\r\n\r\n",
            "HTTP/1.1 405 Method Not Allowed",
        ),
        (b"hello\r\n\r\n", "HTTP/1.1 400 Bad Request"),
    ] {
        let (status, _, _) = fetch(&p.client, request);
        assert_eq!(status, want, "{}", String::from_utf8_lossy(request));
    }
    let mut long = b"GET / HTTP/1.1\r\n".to_vec();
    long.extend(std::iter::repeat_n(b'x', 10_000));
    let (status, _, _) = fetch(&p.client, &long);
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");

    let app = p.app;
    let stats = p
        .server
        .call(move |e| e.app::<HttpServer>(app).map(|a| a.stats))
        .unwrap()
        .unwrap();
    assert_eq!(
        (stats.connections, stats.ok, stats.errors),
        (7, 2, 5),
        "{stats:?}"
    );
    assert_eq!(stats.body_bytes, file.len() as u64);
    assert_eq!(stats.aborted, 0, "{stats:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
