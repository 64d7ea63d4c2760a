//! `strata ftpd` serving standard clients — curl, lftp, Python's ftplib —
//! and `strata ftp`, over TCP and over seed 001's transport (XPSV), on
//! loopback: gets and puts of a file of several MB, resumed ones too, each
//! checked by SHA-256.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{STRATA, Scratch, random_file, sha256_file};

/// `strata ftpd` on an ephemeral loopback port; interrupted on drop.
struct Ftpd {
    child: Child,
    port: u16,
    lines: mpsc::Receiver<String>,
}

impl Ftpd {
    fn start(dir: &str) -> Ftpd {
        let mut child = Command::new(STRATA)
            .args(["ftpd", dir, "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("strata ftpd starts");
        let (tx, lines) = mpsc::channel();
        let out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut port = None;
        loop {
            let l = lines
                .recv_timeout(Duration::from_secs(10))
                .expect("strata ftpd prints ready");
            if let Some(addr) = l.strip_prefix("ftpd serving ") {
                port = addr.rsplit(':').next().and_then(|p| p.parse().ok());
            }
            if l == "ready" {
                break;
            }
        }
        Ftpd {
            child,
            port: port.expect("ftpd names its address"),
            lines,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("ftp://127.0.0.1:{}/{path}", self.port)
    }

    /// Interrupts the server and returns its counters line.
    fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = self.child.wait().unwrap();
        assert!(status.success(), "ftpd exited with {status}");
        // The reader thread may still be passing the last lines on.
        std::iter::from_fn(|| self.lines.recv_timeout(Duration::from_secs(5)).ok())
            .find(|l| l.starts_with("ftpd sessions="))
            .expect("ftpd prints its counters")
    }
}

impl Drop for Ftpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn counter(line: &str, key: &str) -> u64 {
    common::field(line, "ftpd", key)
}

const SIZE: usize = 8 << 20;

#[test]
fn curl_lftp_and_ftplib_get_and_put_through_strata_ftpd() {
    let scratch = Scratch::new("ftp_clients");
    let served = scratch.file("served");
    std::fs::create_dir(&served).unwrap();
    let original = format!("{served}/big.bin");
    random_file(&original, SIZE, 14);
    let want = sha256_file(&original);
    let ftpd = Ftpd::start(&served);

    // curl: get, put, and a get and a put resumed from half a file.
    let got = scratch.file("curl.bin");
    ok("curl", &["-sS", "-o", &got, &ftpd.url("big.bin")]);
    assert_eq!(sha256_file(&got), want, "curl get");
    ok("curl", &["-sS", "-T", &original, &ftpd.url("curl-up.bin")]);
    assert_eq!(
        sha256_file(&format!("{served}/curl-up.bin")),
        want,
        "curl put"
    );
    std::fs::File::options()
        .write(true)
        .open(&got)
        .unwrap()
        .set_len(SIZE as u64 / 2)
        .unwrap();
    ok(
        "curl",
        &["-sS", "-C", "-", "-o", &got, &ftpd.url("big.bin")],
    );
    assert_eq!(sha256_file(&got), want, "curl resumed get (REST)");
    std::fs::File::options()
        .write(true)
        .open(format!("{served}/curl-up.bin"))
        .unwrap()
        .set_len(SIZE as u64 / 3)
        .unwrap();
    ok(
        "curl",
        &["-sS", "-C", "-", "-T", &original, &ftpd.url("curl-up.bin")],
    );
    assert_eq!(
        sha256_file(&format!("{served}/curl-up.bin")),
        want,
        "curl resumed put (SIZE, APPE)"
    );

    // lftp: get and put, then a listing.
    let got = scratch.file("lftp.bin");
    let script = format!(
        "set net:max-retries 1; set net:timeout 10; set ftp:ssl-allow no; \
         open -p {} 127.0.0.1; get big.bin -o {got}; put {original} -o lftp-up.bin; cls -l",
        ftpd.port
    );
    let listing = ok("lftp", &["-c", &script]);
    assert_eq!(sha256_file(&got), want, "lftp get");
    assert_eq!(
        sha256_file(&format!("{served}/lftp-up.bin")),
        want,
        "lftp put"
    );
    assert!(listing.contains("lftp-up.bin"), "{listing}");

    // Python's ftplib: binary get and put, and a get restarted at an offset.
    let got = scratch.file("ftplib.bin");
    let script = format!(
        "import ftplib\n\
         f = ftplib.FTP()\n\
         f.connect('127.0.0.1', {port}, timeout=10)\n\
         f.login()\n\
         with open('{got}', 'wb') as o: f.retrbinary('RETR big.bin', o.write)\n\
         with open('{original}', 'rb') as i: f.storbinary('STOR py-up.bin', i)\n\
         half = f.size('big.bin') // 2\n\
         with open('{got}.tail', 'wb') as o: f.retrbinary('RETR big.bin', o.write, rest=half)\n\
         print(f.sendcmd('SYST'), f.pwd(), half)\n\
         f.quit()\n",
        port = ftpd.port
    );
    let out = ok("python3", &["-c", &script]);
    assert!(out.contains("215 UNIX Type: L8 / "), "{out}");
    assert_eq!(sha256_file(&got), want, "ftplib get");
    assert_eq!(
        sha256_file(&format!("{served}/py-up.bin")),
        want,
        "ftplib put"
    );
    let whole = std::fs::read(&original).unwrap();
    let tail = std::fs::read(format!("{got}.tail")).unwrap();
    assert_eq!(tail, whole[SIZE / 2..], "ftplib get with REST");

    let stats = ftpd.stop();
    assert_eq!(counter(&stats, "denied"), 0, "{stats}");
    // Resumed transfers moved only what was missing: curl's get half the
    // file, its put two thirds, ftplib's restarted get half.
    let size = SIZE as u64;
    assert_eq!(counter(&stats, "files-received"), 4, "{stats}");
    assert_eq!(
        counter(&stats, "bytes-received"),
        4 * size - size / 3,
        "{stats}"
    );
    assert_eq!(counter(&stats, "bytes-sent"), 4 * size, "{stats}");
}

#[test]
fn strata_ftp_gets_and_puts_checked_by_hash_and_resumes() {
    let scratch = Scratch::new("ftp_strata");
    let served = scratch.file("served");
    std::fs::create_dir(&served).unwrap();
    let original = format!("{served}/big.bin");
    random_file(&original, SIZE, 41);
    let want = sha256_file(&original);
    let ftpd = Ftpd::start(&served);
    let server = format!("127.0.0.1:{}", ftpd.port);

    let got = scratch.file("got.bin");
    let out = ok(
        STRATA,
        &["ftp", &server, "--data", "tcp", "get", "big.bin", &got],
    );
    assert!(
        out.contains(&format!("sha256={want}")) && out.contains("verified=yes"),
        "{out}"
    );
    assert_eq!(sha256_file(&got), want);

    let out = ok(
        STRATA,
        &["ftp", &server, "--data", "tcp", "put", &got, "up.bin"],
    );
    assert!(out.contains("verified=yes"), "{out}");
    assert_eq!(sha256_file(&format!("{served}/up.bin")), want);

    // A get interrupted at a third: its .part is carried on.
    let whole = std::fs::read(&original).unwrap();
    let part = scratch.file("again.bin.part");
    std::fs::write(&part, &whole[..SIZE / 3]).unwrap();
    let again = scratch.file("again.bin");
    let out = ok(
        STRATA,
        &["ftp", &server, "get", "big.bin", &again, "--resume"],
    );
    assert!(out.contains(&format!("from={}", SIZE / 3)), "{out}");
    assert_eq!(sha256_file(&again), want);
    assert!(!std::path::Path::new(&part).exists());

    // A put interrupted at a quarter: carried on from what the server holds.
    std::fs::write(format!("{served}/up2.bin"), &whole[..SIZE / 4]).unwrap();
    let out = ok(
        STRATA,
        &["ftp", &server, "put", &original, "up2.bin", "--resume"],
    );
    assert!(
        out.contains(&format!("from={}", SIZE / 4)) && out.contains("verified=yes"),
        "{out}"
    );
    assert_eq!(sha256_file(&format!("{served}/up2.bin")), want);

    // A path out of the folder is one line of error, and nothing is written.
    let out = Command::new(STRATA)
        .args(["ftp", &server, "put", &original, "../escaped.bin"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("550"), "{err}");
    assert!(!std::path::Path::new(&scratch.file("escaped.bin")).exists());

    let stats = ftpd.stop();
    assert_eq!(counter(&stats, "denied"), 1, "{stats}");
}

#[test]
fn strata_ftp_moves_files_over_the_transport_and_resumes() {
    let scratch = Scratch::new("ftp_xport");
    let served = scratch.file("served");
    std::fs::create_dir(&served).unwrap();
    let original = format!("{served}/big.bin");
    random_file(&original, SIZE, 1001);
    let want = sha256_file(&original);
    let ftpd = Ftpd::start(&served);
    let server = format!("127.0.0.1:{}", ftpd.port);

    // The server offers XPSV: strata ftp takes it by itself.
    let got = scratch.file("got.bin");
    let out = ok(STRATA, &["ftp", &server, "get", "big.bin", &got]);
    assert!(
        out.contains("data=xport") && out.contains("verified=yes"),
        "{out}"
    );
    assert_eq!(sha256_file(&got), want);

    let out = ok(
        STRATA,
        &["ftp", &server, "--data", "xport", "put", &got, "up.bin"],
    );
    assert!(
        out.contains("data=xport") && out.contains("verified=yes"),
        "{out}"
    );
    assert_eq!(sha256_file(&format!("{served}/up.bin")), want);

    // REST works over the transport as over TCP.
    let whole = std::fs::read(&original).unwrap();
    let part = scratch.file("again.bin.part");
    std::fs::write(&part, &whole[..SIZE / 5]).unwrap();
    let again = scratch.file("again.bin");
    let out = ok(
        STRATA,
        &["ftp", &server, "get", "big.bin", &again, "--resume"],
    );
    assert!(
        out.contains(&format!("from={}", SIZE / 5)) && out.contains("data=xport"),
        "{out}"
    );
    assert_eq!(sha256_file(&again), want);

    // Listings come over the transport too; curl on the same server still
    // gets its TCP.
    let out = ok(STRATA, &["ftp", &server, "ls"]);
    assert!(out.contains(" up.bin"), "{out}");
    let curl = scratch.file("curl.bin");
    ok("curl", &["-sS", "-o", &curl, &ftpd.url("up.bin")]);
    assert_eq!(sha256_file(&curl), want);

    let stats = ftpd.stop();
    let size = SIZE as u64;
    assert_eq!(counter(&stats, "bytes-received"), size, "{stats}");
    assert_eq!(
        counter(&stats, "bytes-sent"),
        2 * size + size - size / 5,
        "{stats}"
    );
}

#[test]
fn a_server_without_the_transport_is_used_over_tcp_or_refused_when_asked() {
    let scratch = Scratch::new("ftp_noxport");
    let served = scratch.file("served");
    std::fs::create_dir(&served).unwrap();
    random_file(&format!("{served}/f.bin"), 100_000, 5);
    let mut child = Command::new(STRATA)
        .args(["ftpd", &served, "--listen", "127.0.0.1:0", "--no-xport"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines
        .next()
        .unwrap()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    let got = scratch.file("f.bin");
    let out = ok(STRATA, &["ftp", &addr, "get", "f.bin", &got]);
    assert!(out.contains("data=tcp"), "{out}");
    let refused = Command::new(STRATA)
        .args(["ftp", &addr, "--data", "xport", "get", "f.bin", &got])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("XPSV"));
    let _ = child.kill();
    let _ = child.wait();
}
