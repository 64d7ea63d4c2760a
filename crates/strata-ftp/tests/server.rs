//! The server on loopback, driven by raw control lines and by the crate's
//! client: paths stay inside the served folder, every bound holds, bad input
//! gets its reply code, and transfers (resumed ones too) arrive whole.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strata_ftp::client::{Client, Error};
use strata_ftp::server::{Config, Server};
use strata_ftp::transport::Transport;

/// A served folder and a running server, stopped on drop.
struct Fixture {
    dir: PathBuf,
    addr: SocketAddr,
    server: Arc<Server>,
    stop: Arc<AtomicBool>,
}

impl Fixture {
    fn new(name: &str, tune: impl FnOnce(&mut Config)) -> Fixture {
        let base = std::env::temp_dir().join(format!("strata-ftp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("served");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("hello.txt"), b"hello\n").unwrap();
        std::fs::write(base.join("secret.txt"), b"outside\n").unwrap();
        let mut config = Config::new(&dir);
        tune(&mut config);
        let server = Arc::new(Server::bind("127.0.0.1:0".parse().unwrap(), config).unwrap());
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, f) = (Arc::clone(&server), Arc::clone(&stop));
        std::thread::spawn(move || s.run(&f).unwrap());
        Fixture {
            dir,
            addr,
            server,
            stop,
        }
    }

    fn outside(&self) -> PathBuf {
        self.dir.parent().unwrap().to_path_buf()
    }

    fn client(&self) -> Client {
        let mut c = Client::connect(self.addr, Duration::from_secs(10)).unwrap();
        c.login("anonymous", "test@").unwrap();
        c
    }

    fn stat(&self, name: &str) -> u64 {
        self.server
            .stats()
            .snapshot()
            .into_iter()
            .find(|(k, _)| *k == name)
            .unwrap()
            .1
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(self.outside());
    }
}

/// A raw control connection.
struct Raw {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Raw {
    fn open(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut raw = Raw {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        };
        assert_eq!(raw.reply(), 220);
        raw
    }

    fn login(addr: SocketAddr) -> Raw {
        let mut raw = Raw::open(addr);
        assert_eq!(raw.send("USER anonymous"), 331);
        assert_eq!(raw.send("PASS x@"), 230);
        raw
    }

    /// The code of the next reply (multi-line ones read whole).
    fn reply(&mut self) -> u16 {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        let code: u16 = line[..3]
            .parse()
            .unwrap_or_else(|_| panic!("reply {line:?}"));
        if line.as_bytes()[3] == b'-' {
            loop {
                line.clear();
                self.r.read_line(&mut line).unwrap();
                if line.starts_with(&format!("{code} ")) {
                    break;
                }
            }
        }
        code
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> u16 {
        self.w.write_all(bytes).unwrap();
        self.reply()
    }

    fn send(&mut self, line: &str) -> u16 {
        self.send_bytes(format!("{line}\r\n").as_bytes())
    }
}

#[test]
fn dot_dot_and_absolute_paths_never_leave_the_served_folder() {
    let f = Fixture::new("dotdot", |_| {});
    let mut raw = Raw::login(f.addr);
    assert_eq!(raw.send("CWD sub"), 250);
    for bad in [
        "SIZE ../../secret.txt",
        "SIZE ../../../../../../etc/passwd",
        "CWD ../..",
        "MDTM /../secret.txt",
        "DELE ../../secret.txt",
        "MKD ../../made",
    ] {
        assert_eq!(raw.send(bad), 550, "{bad}");
    }
    // Absolute paths start at the served folder's top.
    assert_eq!(raw.send("SIZE /hello.txt"), 213);
    assert_eq!(raw.send("SIZE /etc/passwd"), 550);
    assert_eq!(raw.send("CDUP"), 250);
    assert_eq!(raw.send("CDUP"), 550);
    assert!(f.stat("denied") >= 7, "{}", f.server.stats());
    assert!(!f.outside().join("made").exists());

    let mut c = f.client();
    let mut sink = Vec::new();
    assert!(matches!(
        c.get("../secret.txt", 0, &mut sink, &mut |_| {}),
        Err(Error::Refused { code: 550, .. })
    ));
    assert!(matches!(
        c.put(&mut &b"evil"[..], "../evil.txt", 0, &mut |_| {}),
        Err(Error::Refused { code: 550, .. })
    ));
    assert!(matches!(
        c.put(&mut &b"evil"[..], "/tmp/evil.txt", 0, &mut |_| {}),
        Err(Error::Refused { code: 550, .. })
    ));
    assert!(sink.is_empty());
    assert!(!f.outside().join("evil.txt").exists());
    assert_eq!(
        std::fs::read(f.outside().join("secret.txt")).unwrap(),
        b"outside\n"
    );
}

#[test]
fn symlinks_leading_out_are_refused_for_reading_listing_and_writing() {
    use std::os::unix::fs::symlink;
    let f = Fixture::new("symlink", |_| {});
    let out = f.outside();
    symlink(out.join("secret.txt"), f.dir.join("to-secret")).unwrap();
    symlink(&out, f.dir.join("to-outside")).unwrap();
    symlink(out.join("not-yet"), f.dir.join("dangling")).unwrap();
    symlink("hello.txt", f.dir.join("to-hello")).unwrap();

    let mut c = f.client();
    let mut sink = Vec::new();
    for path in ["to-secret", "to-outside/secret.txt"] {
        assert!(
            matches!(
                c.get(path, 0, &mut sink, &mut |_| {}),
                Err(Error::Refused { code: 550, .. })
            ),
            "{path}"
        );
    }
    assert!(sink.is_empty());
    assert!(matches!(
        c.cwd("to-outside"),
        Err(Error::Refused { code: 550, .. })
    ));
    assert!(matches!(
        c.list("to-outside"),
        Err(Error::Refused { code: 550, .. })
    ));
    for path in ["to-secret", "to-outside/new.txt", "dangling"] {
        assert!(
            matches!(
                c.put(&mut &b"evil"[..], path, 0, &mut |_| {}),
                Err(Error::Refused { code: 550, .. })
            ),
            "{path}"
        );
    }
    assert_eq!(std::fs::read(out.join("secret.txt")).unwrap(), b"outside\n");
    assert!(!out.join("new.txt").exists() && !out.join("not-yet").exists());

    // A symlink that stays inside works; deleting a symlink removes the link.
    let mut got = Vec::new();
    c.get("to-hello", 0, &mut got, &mut |_| {}).unwrap();
    assert_eq!(got, b"hello\n");
    let mut raw = Raw::login(f.addr);
    assert_eq!(raw.send("DELE to-secret"), 250);
    assert!(out.join("secret.txt").exists());
    assert!(f.dir.join("to-secret").symlink_metadata().is_err());
}

#[test]
fn bad_input_gets_its_reply_code_and_the_session_carries_on() {
    let f = Fixture::new("badinput", |c| c.max_line = 64);
    let mut raw = Raw::open(f.addr);
    assert_eq!(raw.send("RETR hello.txt"), 530);
    assert_eq!(raw.send("PASS early"), 503);
    assert_eq!(raw.send("USER root"), 530);
    assert_eq!(raw.send("USER ftp"), 331);
    assert_eq!(raw.send("PASS x"), 230);
    assert_eq!(raw.send(&format!("RETR {}", "a".repeat(500))), 500);
    assert_eq!(raw.send_bytes(b"\x00\x01\x02garbage\r\n"), 500);
    assert_eq!(raw.send_bytes(b"RETR \xc3\x28\r\n"), 500);
    assert_eq!(raw.send("XYZZY"), 500);
    assert_eq!(raw.send("XYZZ"), 502);
    assert_eq!(raw.send("TYPE E"), 504);
    assert_eq!(raw.send("MODE B"), 504);
    assert_eq!(raw.send("REST -5"), 501);
    assert_eq!(raw.send("PORT 127,0,0,1,4,1"), 502);
    assert_eq!(raw.send("EPSV 2"), 522);
    assert_eq!(raw.send("RETR hello.txt"), 425, "no PASV first");
    assert_eq!(raw.send("REST 100"), 350);
    assert_eq!(raw.send("EPSV"), 229);
    assert_eq!(raw.send("RETR hello.txt"), 554, "offset past the end");
    assert_eq!(raw.send("SIZE sub"), 550);
    assert_eq!(raw.send("NOOP"), 200);
    assert_eq!(raw.send("QUIT"), 221);
    assert_eq!(f.stat("long-lines"), 1);
    assert!(f.stat("bad-commands") >= 4, "{}", f.server.stats());
}

#[test]
fn sessions_over_the_cap_are_told_421_and_idle_ones_are_closed() {
    let f = Fixture::new("bounds", |c| {
        c.max_sessions = 2;
        c.idle_timeout = Duration::from_millis(300);
    });
    let a = Raw::open(f.addr);
    let b = Raw::open(f.addr);
    let mut third = TcpStream::connect(f.addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut text = String::new();
    third.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("421 "), "{text:?}");
    assert_eq!(f.stat("refused"), 1);

    // Both idle sessions are closed with 421, freeing their places.
    for mut s in [a, b] {
        assert_eq!(s.reply(), 421);
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(f.stat("idle-timeouts"), 2);
    let mut again = Raw::login(f.addr);
    assert_eq!(again.send("NOOP"), 200);
}

#[test]
fn a_data_connection_never_opened_is_answered_425_in_time() {
    let f = Fixture::new("nodata", |c| c.data_timeout = Duration::from_millis(200));
    let mut raw = Raw::login(f.addr);
    assert_eq!(raw.send("PASV"), 227);
    assert_eq!(raw.send("RETR hello.txt"), 150);
    assert_eq!(raw.reply(), 425);
    assert_eq!(raw.send("NOOP"), 200);
    assert_eq!(f.stat("data-failures"), 1);
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn read_file(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn gets_and_puts_arrive_whole_and_resume_from_an_offset() {
    let f = Fixture::new("transfer", |_| {});
    let data = pattern(3_000_000);
    std::fs::write(f.dir.join("sub/data.bin"), &data).unwrap();
    let mut c = f.client();
    assert_eq!(c.size("sub/data.bin").unwrap(), data.len() as u64);

    let mut got = Vec::new();
    let mut seen = 0;
    c.get("sub/data.bin", 0, &mut got, &mut |n| seen = n)
        .unwrap();
    assert!(got == data && seen == data.len() as u64);

    // A get resumed at an offset brings the rest.
    let mut tail = Vec::new();
    c.get("sub/data.bin", 1_000_000, &mut tail, &mut |_| {})
        .unwrap();
    assert_eq!(tail, data[1_000_000..]);

    // A put cut short, then resumed from the size the server holds.
    c.put(&mut &data[..1_234_567], "up.bin", 0, &mut |_| {})
        .unwrap();
    let held = c.size("up.bin").unwrap();
    assert_eq!(held, 1_234_567);
    c.put(&mut &data[held as usize..], "up.bin", held, &mut |_| {})
        .unwrap();
    assert_eq!(read_file(&f.dir.join("up.bin")), data);

    // The server's hash is the file's.
    use sha2::{Digest, Sha256};
    let ours: String = Sha256::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(c.sha256("up.bin").unwrap(), Some(ours));

    let listing = c.list("").unwrap();
    assert!(
        listing.contains(" up.bin\r\n") && listing.contains(" 3000000 "),
        "{listing}"
    );
    c.quit().unwrap();
    assert_eq!(f.stat("bytes-received"), 3_000_000);
}

#[test]
fn a_read_only_server_refuses_every_write() {
    let f = Fixture::new("readonly", |c| c.read_only = true);
    let mut c = f.client();
    assert!(matches!(
        c.put(&mut &b"x"[..], "new.txt", 0, &mut |_| {}),
        Err(Error::Refused { code: 550, .. })
    ));
    let mut raw = Raw::login(f.addr);
    assert_eq!(raw.send("DELE hello.txt"), 550);
    assert_eq!(raw.send("MKD d"), 550);
    assert!(f.dir.join("hello.txt").exists() && !f.dir.join("new.txt").exists());
}

#[test]
fn transfers_over_the_transport_arrive_whole_and_resume() {
    let f = Fixture::new("xport", |c| c.transport = Some(Transport::default()));
    let data = pattern(2_500_000);
    std::fs::write(f.dir.join("data.bin"), &data).unwrap();
    let mut c = f.client();
    assert!(c.use_transport(Transport::default()));
    assert_eq!(c.data_path(), "xport");

    let mut got = Vec::new();
    c.get("data.bin", 0, &mut got, &mut |_| {}).unwrap();
    assert!(got == data, "the transport's get differs");
    let mut tail = Vec::new();
    c.get("data.bin", 700_000, &mut tail, &mut |_| {}).unwrap();
    assert!(tail == data[700_000..], "the resumed get differs");
    c.put(&mut &data[..], "up.bin", 0, &mut |_| {}).unwrap();
    assert!(read_file(&f.dir.join("up.bin")) == data, "the put differs");
    assert!(c.list("").unwrap().contains(" up.bin\r\n"));
    c.quit().unwrap();
    assert_eq!(f.stat("bytes-received"), 2_500_000);
}

#[test]
fn xpsv_is_binary_only_bounded_in_time_and_absent_unless_offered() {
    let f = Fixture::new("xpsv", |c| {
        c.transport = Some(Transport::default());
        c.data_timeout = Duration::from_millis(300);
    });
    let mut raw = Raw::login(f.addr);
    assert_eq!(raw.send("TYPE A"), 200);
    assert_eq!(raw.send("XPSV"), 504);
    assert_eq!(raw.send("TYPE I"), 200);
    assert_eq!(raw.send("XPSV"), 229);
    assert_eq!(raw.send("TYPE A"), 504);
    // Nobody connects: 425 once the data time-out passes.
    assert_eq!(raw.send("RETR hello.txt"), 150);
    assert_eq!(raw.reply(), 425);
    assert_eq!(raw.send("NOOP"), 200);

    let plain = Fixture::new("noxpsv", |_| {});
    let mut raw = Raw::login(plain.addr);
    assert_eq!(raw.send("XPSV"), 502);
    let mut c = plain.client();
    assert!(!c.use_transport(Transport::default()));
    assert_eq!(c.data_path(), "tcp");
}

#[test]
fn the_final_reply_does_not_wait_for_the_transports_close() {
    // With a 4 s minimum RTO the transport's full close lingers 12 s (three
    // RTOs) after its last acknowledgement; a transfer that waited for it
    // before its 226 (as this crate's did) takes longer than that. Each
    // transfer here must be answered within one RTO: the server replies
    // once its side is through and closes in the background.
    let mut t = Transport::default();
    t.options.config.min_rto = Duration::from_secs(4);
    let server_t = t.clone();
    let f = Fixture::new("xportfast", move |c| c.transport = Some(server_t));
    let data = pattern(1_500_000);
    std::fs::write(f.dir.join("data.bin"), &data).unwrap();
    let mut c = f.client();
    assert!(c.use_transport(t));
    let within = Duration::from_secs(4);

    let start = std::time::Instant::now();
    let mut got = Vec::new();
    c.get("data.bin", 0, &mut got, &mut |_| {}).unwrap();
    assert!(got == data, "the get differs");
    let took = start.elapsed();
    assert!(took < within, "the get took {took:?}");

    let start = std::time::Instant::now();
    c.put(&mut &data[..], "up.bin", 0, &mut |_| {}).unwrap();
    let took = start.elapsed();
    assert!(took < within, "the put took {took:?}");
    assert!(read_file(&f.dir.join("up.bin")) == data, "the put differs");

    // A refused transfer command drops the set-up begun after XPSV, and
    // the session carries on.
    match c.get("missing.bin", 0, &mut Vec::new(), &mut |_| {}) {
        Err(Error::Refused { code: 550, .. }) => {}
        other => panic!("a missing file: {other:?}"),
    }
    let mut got = Vec::new();
    c.get("hello.txt", 0, &mut got, &mut |_| {}).unwrap();
    assert_eq!(got, b"hello\n");
    c.quit().unwrap();
}

#[test]
fn a_gets_size_comes_with_its_data_connection_over_tcp_and_the_transport() {
    let f = Fixture::new("sized", |c| c.transport = Some(Transport::default()));
    let data = pattern(1_500_000);
    std::fs::write(f.dir.join("data.bin"), &data).unwrap();
    for xport in [false, true] {
        let mut c = f.client();
        if xport {
            assert!(c.use_transport(Transport::default()));
        }
        // The size is told once, before any data moves.
        let size = std::cell::RefCell::new(Vec::new());
        let mut got = Vec::new();
        c.get_sized(
            "data.bin",
            500_000,
            &mut got,
            &mut |s| size.borrow_mut().push(s),
            &mut |_| assert_eq!(size.borrow().len(), 1, "data before the size"),
        )
        .unwrap();
        assert_eq!(
            size.into_inner(),
            [Some(data.len() as u64)],
            "xport {xport}"
        );
        assert!(got == data[500_000..], "xport {xport}: the get differs");
        // A file the server does not have: no size, the get's own refusal.
        let mut size = Vec::new();
        let r = c.get_sized(
            "none.bin",
            0,
            &mut Vec::new(),
            &mut |s| size.push(s),
            &mut |_| {},
        );
        assert!(
            matches!(r, Err(Error::Refused { code: 550, .. })),
            "xport {xport}: {r:?}"
        );
        assert_eq!(size, [None]);
        c.quit().unwrap();
    }
}
